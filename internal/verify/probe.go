package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/signature/provider"
)

// ProbePrefix starts every probe's event id: the probe's key is reserved
// before the probe is sent, so the guard answers it as a duplicate and the
// business step never runs for it.
const ProbePrefix = "idemhook-probe:"

// ProbeTarget is a workflow deploy just published.
type ProbeTarget struct {
	WorkflowID string
	// URL is its production webhook URL.
	URL string
	// Credential is the id of the Postgres credential its nodes use.
	Credential string
	// Preset and Scope are the generate options the key node was built
	// with, so that the probe's key is the one the workflow derives.
	Preset eventkey.Preset
	Scope  string
}

// probeDelivery is the probe's request: it carries id wherever a
// provider's deliveries carry theirs (package provider's table), so that
// the probe's key is built from id under any preset.
func probeDelivery(id string) (http.Header, []byte) {
	fields := map[string]string{"id": id, "type": "idemhook.probe"}
	header := http.Header{"Content-Type": {"application/json"}}
	for _, p := range provider.All {
		if p.Key.IDMember != "" {
			fields[p.Key.IDMember] = id
		}
		for _, h := range p.Key.IDHeaders {
			header.Set(h, id)
		}
	}
	body, _ := json.Marshal(fields) // strings only: it cannot fail
	return header, body
}

// ProbeError: the probe found the workflow live but not working; Node and
// Msg are n8n's own words when a node failed.
type ProbeError struct {
	Step string // "pre-reserve", "deliver" or "execution"
	Node string
	Msg  string
}

func (e *ProbeError) Error() string {
	if e.Node != "" {
		return fmt.Sprintf("probe %s: node %q failed: %s", e.Step, e.Node, e.Msg)
	}
	return fmt.Sprintf("probe %s: %s", e.Step, e.Msg)
}

// Probe sends one delivery through the published workflow without running
// its business step: it reserves the probe's key first (through the same
// credential, in a temporary workflow, which also proves the events table
// exists where the credential points), then delivers the probe and reads
// n8n's execution: the reservation must have run, no node failed (a Code
// node without require('crypto') fails here), and nothing past the
// decision's new-event output ran. The probe's row stays in the events
// table until the cleanup workflow's retention removes it. It returns what
// it saw.
func Probe(ctx context.Context, c *n8napi.Client, t ProbeTarget, opts deploy.Options) (string, error) {
	w, err := c.Workflow(ctx, t.WorkflowID)
	if err != nil {
		return "", err
	}
	live := w.Live()
	gd, err := findReservation(live)
	if err != nil {
		return "", err
	}
	if gd.Keysvc {
		return "", &UnsupportedError{"the probe reserves its key in PostgreSQL; this workflow reserves through keysvc"}
	}
	table, err := pgsql.ParseTable(gd.EventsTable)
	if err != nil {
		return "", &UnsupportedError{fmt.Sprintf("events table %s: %v", gd.EventsTable, err)}
	}

	id := ProbePrefix + nonce()
	header, body := probeDelivery(id)
	key, err := eventkey.DeriveFor(t.Preset, header, body, t.Scope)
	if err != nil {
		return "", err
	}
	if err := preReserve(ctx, c, t, table, key.Value, opts); err != nil {
		return "", err
	}
	status, reply, run, err := deliverToPublished(ctx, c, t, w, header, body, opts)
	if err != nil {
		return "", err
	}
	if err := checkProbeRun(gd, live, status, reply, run); err != nil {
		return "", err
	}
	return fmt.Sprintf("probe %s: reserved, delivered, answered %d as a duplicate without the business step (execution %s of version %s)", key.Value, status, run.ID, run.WorkflowVersionID), nil
}

// preReserve reserves key in table through the target's credential, in a
// temporary workflow, so that the guard answers the probe as a duplicate.
func preReserve(ctx context.Context, c *n8napi.Client, t ProbeTarget, table pgsql.Table, key string, opts deploy.Options) error {
	keyJS, _ := json.Marshal([]string{key})
	node := map[string]any{"name": "Reserve Probe Key", "type": typePostgres, "typeVersion": 2.6,
		"onError":     "continueRegularOutput",
		"credentials": map[string]any{"postgres": map[string]any{"id": t.Credential, "name": "probe"}},
		"parameters": map[string]any{"operation": "executeQuery", "query": pgsql.Reserve(table),
			"options": map[string]any{"queryReplacement": "={{ " + string(keyJS) + " }}"}}}
	out, err := deploy.RunOnce(ctx, c, "reserve a probe key", node, time.Minute, opts)
	if err != nil {
		return &ProbeError{Step: "pre-reserve", Msg: err.Error()}
	}
	// The node continues on failure so that n8n answers with its message
	// ({"message": …, "error": {…}}) instead of a bare 500.
	var answer struct {
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(out, &answer) == nil && len(answer.Error) > 0 {
		return &ProbeError{Step: "pre-reserve", Node: "INSERT INTO " + table.String(), Msg: answer.Message + " (is the schema applied in the database the credential points at?)"}
	}
	return nil
}

// deliverToPublished delivers the probe until the published version of w
// runs it, and returns the answer and that execution. n8n 2.x applies a
// publication in the background: the API already names the new version
// while deliveries still run the previous one. The probe is delivered
// again until an execution ran the published version (its key stays
// reserved, so every try is a duplicate).
func deliverToPublished(ctx context.Context, c *n8napi.Client, t ProbeTarget, w n8napi.Workflow, header http.Header, body []byte, opts deploy.Options) (int, []byte, n8napi.Run, error) {
	var published string
	if w.ActiveVersion != nil {
		published = w.ActiveVersion.VersionID
	}
	timeout := opts.LiveWait()
	for deadline := time.Now().Add(timeout); ; {
		status, reply, run, err := deliverProbe(ctx, c, t, header, body)
		if err != nil {
			return 0, nil, n8napi.Run{}, err
		}
		if published == "" || run.WorkflowVersionID == "" || run.WorkflowVersionID == published {
			return status, reply, run, nil
		}
		if time.Now().After(deadline) {
			return 0, nil, n8napi.Run{}, &ProbeError{Step: "execution", Msg: fmt.Sprintf("after %s, n8n still runs version %s, not the published %s (see n8n's log for the publication)", timeout, run.WorkflowVersionID, published)}
		}
		opts.Progressf("probe: execution %s ran version %s; n8n has not put %s live yet, probing again", run.ID, run.WorkflowVersionID, published)
		select {
		case <-ctx.Done():
			return 0, nil, n8napi.Run{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// checkProbeRun checks what the probe's execution did in the live
// workflow: no node failed, the delivery was answered 2xx, the reservation
// ran and no business node of the guard did.
func checkProbeRun(gd Guard, live n8napi.Workflow, status int, reply []byte, run n8napi.Run) error {
	if failed := slices.Sorted(maps.Keys(run.Errors)); len(failed) > 0 {
		return &ProbeError{Step: "execution", Node: failed[0], Msg: run.Errors[failed[0]]}
	}
	if status < 200 || status > 299 {
		return &ProbeError{Step: "deliver", Msg: fmt.Sprintf("answered %d %s", status, strings.TrimSpace(string(reply)))}
	}
	if !run.Ran(gd.Reserve) {
		return &ProbeError{Step: "execution", Msg: fmt.Sprintf("execution %s never reached %q", run.ID, gd.Reserve)}
	}
	if full, err := Find(live); err == nil {
		if ran := slices.DeleteFunc(full.Business(), func(n string) bool { return !run.Ran(n) }); len(ran) > 0 {
			return &ProbeError{Step: "execution", Msg: fmt.Sprintf("execution %s ran %s for an event already reserved", run.ID, strings.Join(ran, ", "))}
		}
	}
	return nil
}

// deliverProbe posts the probe and reads the execution it started.
func deliverProbe(ctx context.Context, c *n8napi.Client, t ProbeTarget, header http.Header, body []byte) (int, []byte, n8napi.Run, error) {
	before, err := c.Executions(ctx, t.WorkflowID)
	if err != nil {
		return 0, nil, n8napi.Run{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, n8napi.Run{}, err
	}
	req.Header = header
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return 0, nil, n8napi.Run{}, &ProbeError{Step: "deliver", Msg: err.Error()}
	}
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	run, err := newExecution(ctx, c, t.WorkflowID, before)
	if err != nil {
		return 0, nil, n8napi.Run{}, &ProbeError{Step: "execution", Msg: err.Error()}
	}
	return resp.StatusCode, reply, run, nil
}

// newExecution waits for an execution of the workflow that is not in
// before and has finished, and reads it.
func newExecution(ctx context.Context, c *n8napi.Client, workflowID string, before []n8napi.Execution) (n8napi.Run, error) {
	known := map[n8napi.ID]bool{}
	for _, e := range before {
		known[e.ID] = true
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		execs, err := c.Executions(ctx, workflowID)
		if err != nil {
			return n8napi.Run{}, err
		}
		for _, e := range execs {
			if !known[e.ID] && e.Status != "new" && e.Status != "running" && e.Status != "waiting" {
				return c.ExecutionRun(ctx, e.ID)
			}
		}
		if time.Now().After(deadline) {
			return n8napi.Run{}, errors.New("n8n recorded no execution of the probe within 30 s")
		}
		select {
		case <-ctx.Done():
			return n8napi.Run{}, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}
