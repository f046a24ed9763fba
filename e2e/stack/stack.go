package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tidwall/gjson"
)

// Names inside the stack's PostgreSQL server.
const (
	BusinessDatabase = "idemhook" // processed_events, business tables
	n8nDatabase      = "n8n"      // n8n's own tables
	pgUser           = "postgres"
	pgPassword       = "idemhook-e2e" // test-only server on loopback
)

// Stack is a running n8n and PostgreSQL pair.
type Stack struct {
	// Runtime is "local" or "docker".
	Runtime string
	// N8NURL is n8n's base URL, without a trailing slash.
	N8NURL string
	// Business is a pool on the business database, where the workflows'
	// tables live.
	Business *pgxpool.Pool
	// BusinessDSN connects to the business database from this process.
	BusinessDSN string
	// N8NDB is a pool on n8n's own database (executions, publication state).
	N8NDB *pgxpool.Pool
	// LogDir keeps the n8n and PostgreSQL logs after the stack stops.
	LogDir string

	rt        runtime
	pgForN8N  pgEndpoint // how n8n reaches PostgreSQL
	closeOnce sync.Once
	closeErr  error
}

type pgEndpoint struct {
	Host string
	Port int
}

// runtime is what differs between the local processes and the containers.
type runtime interface {
	// n8nCLI runs `n8n args…` against the stack's n8n database.
	n8nCLI(ctx context.Context, args ...string) ([]byte, error)
	// stage makes a host file readable by the n8n CLI and returns its path
	// there.
	stage(ctx context.Context, hostPath string) (string, error)
	// nodeTypes returns n8n's catalogue of node types (types/nodes.json),
	// which n8n writes at start-up.
	nodeTypes(ctx context.Context) ([]byte, error)
	// logs returns the paths of the kept logs.
	logs() []string
	close() error
}

// Options configure Start.
type Options struct {
	// Progress receives provisioning and start-up progress; os.Stderr when nil.
	Progress io.Writer
	// PostgresOnly starts PostgreSQL without n8n, for tests of keysvc.
	PostgresOnly bool
}

// Start starts a stack with the runtime IDEMHOOK_E2E_RUNTIME names, or docker
// when a Docker daemon answers, or local. It fails, never skips, when
// neither can run.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	choice := os.Getenv("IDEMHOOK_E2E_RUNTIME")
	switch choice {
	case "":
		if dockerAnswers() {
			choice = "docker"
		} else {
			choice = "local"
		}
	case "docker":
		if !dockerAnswers() {
			return nil, errors.New("IDEMHOOK_E2E_RUNTIME=docker, but no Docker daemon answers (DOCKER_HOST or /var/run/docker.sock); unset it to use the local runtime")
		}
	case "local":
	default:
		return nil, fmt.Errorf("IDEMHOOK_E2E_RUNTIME=%q: use local or docker", choice)
	}
	what := "n8n " + N8NVersion + " and PostgreSQL " + PostgresMajor
	if opts.PostgresOnly {
		what = "PostgreSQL " + PostgresMajor
	}
	fmt.Fprintf(opts.Progress, "e2e: starting %s (%s runtime)\n", what, choice)
	start := time.Now()
	var s *Stack
	var err error
	if choice == "docker" {
		s, err = startDocker(ctx, opts)
	} else {
		s, err = startLocal(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Progress, "e2e: stack ready in %s: n8n at %q, logs in %s\n", time.Since(start).Round(time.Second), s.N8NURL, s.LogDir)
	return s, nil
}

// dockerAnswers reports whether a Docker daemon accepts connections.
func dockerAnswers() bool {
	host := os.Getenv("DOCKER_HOST")
	network, addr := "unix", "/var/run/docker.sock"
	if host != "" {
		switch {
		case strings.HasPrefix(host, "unix://"):
			addr = strings.TrimPrefix(host, "unix://")
		case strings.HasPrefix(host, "tcp://"):
			network, addr = "tcp", strings.TrimPrefix(host, "tcp://")
		default:
			return false
		}
	}
	client := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
	resp, err := client.Get("http://docker/_ping")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Close stops everything the stack started. The logs stay in LogDir.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		if s.Business != nil {
			s.Business.Close()
		}
		if s.N8NDB != nil {
			s.N8NDB.Close()
		}
		s.closeErr = s.rt.close()
	})
	return s.closeErr
}

// CloseOnSignal closes the stack when the process is interrupted, so an
// interrupted test run leaves no server behind. Call the returned function
// to stop watching.
func (s *Stack) CloseOnSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			fmt.Fprintf(os.Stderr, "e2e: %v: stopping n8n and PostgreSQL\n", sig)
			s.Close()
			os.Exit(130)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// Logs returns the paths of the kept n8n and PostgreSQL logs.
func (s *Stack) Logs() []string { return s.rt.logs() }

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
	b, _ := json.Marshal([]map[string]any{{
		"id":   id,
		"name": name,
		"type": "postgres",
		"data": map[string]any{
			"host":                   s.pgForN8N.Host,
			"port":                   s.pgForN8N.Port,
			"database":               BusinessDatabase,
			"user":                   pgUser,
			"password":               pgPassword,
			"ssl":                    "disable",
			"allowUnauthorizedCerts": false,
			"maxConnections":         50,
		},
	}})
	return b
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
var ErrNotLive = errors.New("workflow published but its webhook is not live")

// Publish runs `n8n publish:workflow --id=ID` and waits until the webhook
// is live. n8n 2.41 exits 0 even when activation fails (a taken webhook path,
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.N8NURL+"/webhook/"+path, nil)
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

// Deploy imports a generated workflow file and publishes it.
func (s *Stack) Deploy(ctx context.Context, workflowFile string) error {
	raw, err := os.ReadFile(workflowFile)
	if err != nil {
		return err
	}
	id := gjson.GetBytes(raw, "id").String()
	path := gjson.GetBytes(raw, `nodes.#(type=="n8n-nodes-base.webhook").parameters.path`).String()
	if id == "" || path == "" {
		return fmt.Errorf("deploy %s: no workflow id or webhook path in the file", workflowFile)
	}
	if err := s.ImportWorkflow(ctx, workflowFile); err != nil {
		return err
	}
	return s.Publish(ctx, id, path)
}

// Execution is one row of n8n's execution_entity.
type Execution struct {
	ID     string
	Status string
}

// Executions lists a workflow's executions, oldest first.
func (s *Stack) Executions(ctx context.Context, workflowID string) ([]Execution, error) {
	rows, err := s.N8NDB.Query(ctx, `SELECT id::text, status FROM execution_entity WHERE "workflowId" = $1 ORDER BY execution_entity.id`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("list executions of %s: %w", workflowID, err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		var e Execution
		if err := rows.Scan(&e.ID, &e.Status); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// WaitExecutions waits until the workflow has at least n finished
// executions (n8n records them just after the response is sent) and returns
// them all.
func (s *Stack) WaitExecutions(ctx context.Context, workflowID string, n int) ([]Execution, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		execs, err := s.Executions(ctx, workflowID)
		if err != nil {
			return nil, err
		}
		finished := 0
		for _, e := range execs {
			if e.Status != "new" && e.Status != "running" && e.Status != "waiting" {
				finished++
			}
		}
		if finished >= n || time.Now().After(deadline) {
			return execs, nil
		}
		select {
		case <-ctx.Done():
			return execs, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
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
