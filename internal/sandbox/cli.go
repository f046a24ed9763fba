package sandbox

// The n8n CLI, run against the stack as a user runs it on the n8n host:
// credentials and workflows imported, published, and proven live from
// n8n's own tables.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// N8N runs the n8n CLI against the stack, exactly as a user would on the
// n8n host, and returns its combined output.
func (s *Stack) N8N(ctx context.Context, args ...string) ([]byte, error) {
	out, err := s.rt.n8nCLI(ctx, args...)
	if err != nil {
		return out, fmt.Errorf("n8n %s: %w\n%s", strings.Join(args, " "), err, tail(out, 4000))
	}
	return out, nil
}

// PostgresCredential returns an `n8n import:credentials` file body for a
// Postgres credential named name that reaches the business database.
func (s *Stack) PostgresCredential(id, name string) []byte {
	b, _ := json.Marshal([]map[string]any{{"id": id, "name": name, "type": "postgres", "data": s.PostgresCredentialData()}})
	return b
}

// PostgresCredentialData is the data of an n8n Postgres credential on the
// business database, as n8n reaches it.
func (s *Stack) PostgresCredentialData() map[string]any {
	ssl := "disable"
	if s.pgForN8N.TLS {
		ssl = "require"
	}
	return map[string]any{
		"host":                   s.pgForN8N.Host,
		"port":                   s.pgForN8N.Port,
		"database":               s.pgForN8N.Database,
		"user":                   s.pgForN8N.User,
		"password":               s.pgForN8N.Password,
		"ssl":                    ssl,
		"allowUnauthorizedCerts": s.pgForN8N.TLS && !s.pgForN8N.Verify,
		"maxConnections":         50,
		// The public API's schema requires it; the CLI import does not.
		"sshTunnel": false,
	}
}

// ImportCredentials runs `n8n import:credentials --input=FILE`.
func (s *Stack) ImportCredentials(ctx context.Context, file string) error {
	p, err := s.rt.stage(ctx, file)
	if err != nil {
		return err
	}
	_, err = s.N8N(ctx, "import:credentials", "--input="+p)
	return err
}

// ImportWorkflow runs `n8n import:workflow --input=FILE`.
func (s *Stack) ImportWorkflow(ctx context.Context, file string) error {
	p, err := s.rt.stage(ctx, file)
	if err != nil {
		return err
	}
	_, err = s.N8N(ctx, "import:workflow", "--input="+p)
	return err
}

// ErrNotLive is returned by Publish when n8n accepted the publish command
// but the workflow's webhook did not go live.
var ErrNotLive = errors.New("workflow published but not live")

// Publish runs `n8n publish:workflow --id=ID` and waits until the webhook
// is live; with webhookPath empty (a workflow started by a schedule or by
// another workflow), until n8n reports its triggers activated. n8n 2.41 exits 0 even when activation fails (a taken webhook path,
// for one): the outcome shows only in workflow_publication_trigger_status,
// per published version. Publish waits for that record, then checks that
// n8n routes the path to this workflow and that the path answers.
func (s *Stack) Publish(ctx context.Context, workflowID, webhookPath string) error {
	if _, err := s.N8N(ctx, "publish:workflow", "--id="+workflowID); err != nil {
		return err
	}
	var version string
	if err := s.N8NDB.QueryRow(ctx, `SELECT coalesce("activeVersionId", '') FROM workflow_entity WHERE id = $1`, workflowID).Scan(&version); err != nil {
		return fmt.Errorf("publish %s: read the published version: %w", workflowID, err)
	}
	if version == "" {
		return fmt.Errorf("publish %s: %w: n8n recorded no active version", workflowID, ErrNotLive)
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		status, detail := s.publicationStatus(ctx, workflowID, version)
		switch {
		case status == "failed":
			return fmt.Errorf("publish %s: %w: %s", workflowID, ErrNotLive, detail)
		case status == "activated" && webhookPath == "":
			return nil
		case status == "activated" && s.routedTo(ctx, webhookPath) == workflowID && s.webhookRegistered(ctx, webhookPath):
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("publish %s: %w: /webhook/%s not live after 45s (publication status %q, routed to %q; logs: %s)",
				workflowID, ErrNotLive, webhookPath, status, s.routedTo(ctx, webhookPath), strings.Join(s.Logs(), ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// publicationStatus summarises n8n's record of a published version's
// triggers: "failed" if any failed (detail says why), "activated" if all
// were, "" while none is recorded yet.
func (s *Stack) publicationStatus(ctx context.Context, workflowID, version string) (status, detail string) {
	rows, err := s.N8NDB.Query(ctx, `SELECT status, coalesce("errorMessage", '') FROM workflow_publication_trigger_status WHERE "workflowId" = $1 AND "versionId" = $2`, workflowID, version)
	if err != nil {
		return "", err.Error()
	}
	defer rows.Close()
	for rows.Next() {
		var st, msg string
		if err := rows.Scan(&st, &msg); err != nil {
			return "", err.Error()
		}
		if st == "failed" {
			return st, msg
		}
		status = st
	}
	return status, ""
}

// routedTo returns the workflow n8n routes POST /webhook/PATH to.
func (s *Stack) routedTo(ctx context.Context, path string) string {
	var id string
	_ = s.N8NDB.QueryRow(ctx, `SELECT "workflowId" FROM webhook_entity WHERE "webhookPath" = $1 AND method = 'POST'`, path).Scan(&id)
	return id
}

// webhookRegistered probes a POST-only production path with GET: once it is
// registered n8n answers 404 "Did you mean to make a POST request?". The
// probe creates no execution.
func (s *Stack) webhookRegistered(ctx context.Context, path string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.WebhookURL+"/webhook/"+path, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return strings.Contains(string(body), "Did you mean to make a POST request")
}

// Deploy imports a workflow file and publishes it.
func (s *Stack) Deploy(ctx context.Context, workflowFile string) error {
	raw, err := os.ReadFile(workflowFile)
	if err != nil {
		return err
	}
	id := gjson.GetBytes(raw, "id").String()
	path := gjson.GetBytes(raw, `nodes.#(type=="n8n-nodes-base.webhook").parameters.path`).String()
	if id == "" {
		return fmt.Errorf("deploy %s: no workflow id in the file", workflowFile)
	}
	if err := s.ImportWorkflow(ctx, workflowFile); err != nil {
		return err
	}
	return s.Publish(ctx, id, path)
}

// NodeTypeVersions returns, for each node type n8n knows, the versions it
// accepts, read from the running n8n's own catalogue.
func (s *Stack) NodeTypeVersions(ctx context.Context) (map[string][]float64, error) {
	raw, err := s.rt.nodeTypes(ctx)
	if err != nil {
		return nil, fmt.Errorf("read n8n node types: %w", err)
	}
	out := map[string][]float64{}
	gjson.ParseBytes(raw).ForEach(func(_, t gjson.Result) bool {
		name := t.Get("name").String()
		v := t.Get("version")
		if v.IsArray() {
			for _, x := range v.Array() {
				out[name] = append(out[name], x.Float())
			}
		} else {
			out[name] = append(out[name], v.Float())
		}
		return true
	})
	if len(out) == 0 {
		return nil, errors.New("n8n's node type catalogue is empty")
	}
	return out, nil
}
