package verify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/signature"
)

// Target is the scratch n8n the workflow runs in.
type Target struct {
	API *n8napi.Client
	// WebhookURL is the base of production webhook URLs.
	WebhookURL string
	// Credentials fill the workflow's credentials by type, whatever names
	// the workflow gives them ("postgres", and "crypto" for a signature
	// check).
	Credentials map[string]n8napi.Credential
	// KeysvcURL is a keysvc for workflows that reserve through one: their
	// HTTP Request nodes are pointed at it.
	KeysvcURL string
	// SigningSecret signs every delivery the way Stripe does
	// (Stripe-Signature), so that a workflow checking signatures with the
	// crypto credential accepts them.
	SigningSecret string
}

// Options tune Run.
type Options struct {
	// Concurrency is the number of simultaneous deliveries of one event
	// (20 by default); Deliveries the number of distinct events (10).
	Concurrency, Deliveries int
	// Keep leaves the workflow in n8n after the run.
	Keep bool
	// Companions are workflows the one checked relies on, deployed beside
	// it: its error workflow (settings.errorWorkflow names it by the id in
	// its file), such as the one idemhook guard writes, which gives a
	// failed execution's key up.
	Companions []n8napi.Workflow
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

// Status is a check's outcome.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "FAIL"
	Skip Status = "skip"
)

// Check is one verified property and what was seen.
type Check struct {
	Name   string
	Status Status
	// Seen says what happened, with execution ids and the nodes that ran.
	Seen     string
	Duration time.Duration
}

// Report is the outcome of Run.
type Report struct {
	Workflow string
	Guard    Guard
	Checks   []Check
}

// OK tells whether no check failed (a skipped check is a weakness the
// table names, not a failure).
func (r *Report) OK() bool {
	return !slices.ContainsFunc(r.Checks, func(c Check) bool { return c.Status == Fail })
}

// Run deploys w into the target (under the name "idemhook verify: " +
// its own), sends the scenarios' deliveries and checks, from n8n's
// execution data, which nodes ran for each. The error is for what stopped
// the run (no guard found, n8n refusing the workflow); what the workflow
// did wrong is in the report's checks.
func Run(ctx context.Context, t Target, w n8napi.Workflow, opts Options) (*Report, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 20
	}
	if opts.Deliveries <= 0 {
		opts.Deliveries = 10
	}
	gd, err := Find(w)
	if err != nil {
		return nil, err
	}
	if gd.Method != http.MethodPost {
		return nil, &UnsupportedError{fmt.Sprintf("Webhook node %q answers %s; providers deliver with POST", gd.Webhook, gd.Method)}
	}
	if gd.Keysvc && (t.KeysvcURL == "" || gd.KeysvcBase == "") {
		return nil, &UnsupportedError{fmt.Sprintf("node %q reserves through keysvc at a URL an expression builds; verify points a literal keysvc URL at its own keysvc", gd.Reserve)}
	}
	r := &runner{t: t, opts: opts, guard: gd, nonce: nonce(), path: gd.Path}
	doc, err := r.bindCredentials(w)
	if err != nil {
		return nil, err
	}
	doc.Name = "idemhook verify: " + w.Name
	companions, err := r.deployCompanions(ctx, &doc, w.ID)
	if err != nil {
		return nil, err
	}
	r.original = doc
	if err := r.deploy(ctx, doc); err != nil {
		return nil, err
	}
	if !opts.Keep {
		defer func() {
			for _, id := range append([]string{r.id}, companions...) {
				if err := t.API.DeleteWorkflow(context.WithoutCancel(ctx), id); err != nil {
					r.progress("could not delete workflow %s: %v", id, err)
				}
			}
		}()
	}
	report := &Report{Workflow: w.Name, Guard: gd}
	return report, r.runChecks(ctx, report)
}

// deployCompanions deploys opts.Companions and returns their ids. It
// points doc's error workflow at the deployed companion it names, and
// settles who gives a failed execution's key up: that companion
// (r.releaser), or the workflow itself, whose id in its file is selfID
// (r.selfReleases).
func (r *runner) deployCompanions(ctx context.Context, doc *n8napi.Workflow, selfID string) ([]string, error) {
	var companions []string
	for _, c := range r.opts.Companions {
		id, releases, err := r.deployCompanion(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("companion %q: %w", c.Name, err)
		}
		companions = append(companions, id)
		if doc.Settings["errorWorkflow"] == c.ID {
			doc.Settings["errorWorkflow"] = id
			if releases {
				r.releaser = id
			}
		}
	}
	if ew, _ := doc.Settings["errorWorkflow"].(string); ew != "" && !slices.Contains(companions, ew) {
		r.progress("the workflow names error workflow %s, which is not deployed here (give its file with --with): a failed execution runs none", ew)
		delete(doc.Settings, "errorWorkflow")
	}
	if ew, _ := doc.Settings["errorWorkflow"].(string); (ew == "" || ew == selfID) && r.releasesKeys(*doc) {
		// n8n runs the workflow itself when it fails, from its own Error
		// Trigger (see idemhook guard).
		r.selfReleases = true
		delete(doc.Settings, "errorWorkflow")
	}
	return companions, nil
}

// runChecks runs the checks in order, adding each to report as it ends,
// and stops at the first that cannot run to its end.
func (r *runner) runChecks(ctx context.Context, report *Report) error {
	for _, c := range []struct {
		name string
		run  func(context.Context) (Status, string, error)
	}{
		{"replay: A, A with another signature, B", r.replay},
		{"body without id, twice", r.withoutID},
		{fmt.Sprintf("%d simultaneous deliveries of one event", r.opts.Concurrency), r.concurrent},
		{fmt.Sprintf("%d distinct events", r.opts.Deliveries), r.distinct},
		{"business step fails: key released, retry runs it once", r.failure},
	} {
		r.progress("check: %s", c.name)
		start := time.Now()
		status, seen, err := c.run(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		report.Checks = append(report.Checks, Check{Name: c.name, Status: status, Seen: seen, Duration: time.Since(start)})
		report.Guard = r.guard
	}
	return nil
}

type runner struct {
	t     Target
	opts  Options
	guard Guard
	// releaser is the deployed error workflow that gives a failed
	// execution's key up ("" when there is none); selfReleases that the
	// workflow is its own, by an Error Trigger of its own.
	releaser     string
	selfReleases bool
	nonce        string
	// id and path are the workflow deliveries go to, seen its executions
	// accounted for: the deployed workflow, or for a while its failing copy.
	id, path string
	seen     int
	original n8napi.Workflow
	sig      atomic.Int64 // makes each delivery's signature header differ
}

func (r *runner) progress(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, "verify: "+format+"\n", args...)
	}
}

// bindCredentials points every node's credentials at the target's, by
// type, whatever the names in the file, and keysvc calls at the target's
// keysvc.
func (r *runner) bindCredentials(w n8napi.Workflow) (n8napi.Workflow, error) {
	doc, err := w.Clone()
	if err != nil {
		return w, err
	}
	for i, n := range doc.Nodes {
		if n["type"] == typeExecuteWorkflow {
			// A stand-in: the called workflow is not deployed here.
			doc.Nodes[i] = map[string]any{"name": n["name"], "id": n["id"], "type": "n8n-nodes-base.noOp", "typeVersion": 1, "position": n["position"], "parameters": map[string]any{}}
			continue
		}
		if params, _ := n["parameters"].(map[string]any); r.guard.KeysvcBase != "" && n["type"] == typeHTTP {
			if url, ok := params["url"].(string); ok {
				params["url"] = strings.ReplaceAll(url, r.guard.KeysvcBase, strings.TrimSuffix(r.t.KeysvcURL, "/"))
			}
		}
		creds, _ := n["credentials"].(map[string]any)
		for typ := range creds {
			c, ok := r.t.Credentials[typ]
			if !ok {
				return w, &UnsupportedError{fmt.Sprintf("node %q uses a %s credential; verify fills postgres, crypto and httpBearerAuth (keysvc) credentials", n["name"], typ)}
			}
			creds[typ] = map[string]any{"id": c.ID, "name": c.Name}
		}
	}
	// verify reads what each delivery ran from n8n's execution data: the
	// scratch copy keeps every execution's, whatever the workflow says.
	if doc.Settings == nil {
		doc.Settings = map[string]any{}
	}
	for _, k := range []string{"saveDataSuccessExecution", "saveDataErrorExecution"} {
		if v, ok := doc.Settings[k]; ok && v != "all" {
			r.progress("the workflow sets %s to %v; its scratch copy keeps every execution's data, which verify reads", k, v)
		}
		doc.Settings[k] = "all"
	}
	doc.ID, doc.Active = "", false
	return doc, nil
}

// deployCompanion deploys companion c (credentials bound as the
// workflow's) under verify's prefix and returns its id, and whether it is an
// error workflow that gives up the keys of the guard's events table by
// execution (what a failed execution needs).
func (r *runner) deployCompanion(ctx context.Context, c n8napi.Workflow) (string, bool, error) {
	doc, err := r.bindCredentials(c)
	if err != nil {
		return "", false, err
	}
	doc.Name = "idemhook verify: " + c.Name
	got, err := deploy.Deploy(ctx, r.t.API, []deploy.Workflow{{File: "companion.json", Doc: doc}}, deploy.Options{LiveTimeout: 60 * time.Second})
	if err != nil {
		return "", false, err
	}
	return got[0].ID, r.releasesKeys(doc), nil
}

// releasesKeys tells whether w, run as an error workflow, gives a failed
// execution's keys up: it has an Error Trigger and a Postgres node that
// deletes the events table's rows of an execution.
func (r *runner) releasesKeys(w n8napi.Workflow) bool {
	releasesByExecution := regexp.MustCompile(`(?is)\bdelete\s+from\s+"?` + regexp.QuoteMeta(strings.Trim(r.guard.EventsTable, `"`)) + `"?\s+where\s+execution_id\b`)
	trigger, releases := false, false
	for _, n := range w.Nodes {
		q, _ := param(n, "query")
		trigger = trigger || n["type"] == typeErrorTrigger
		releases = releases || (n["type"] == typePostgres && releasesByExecution.MatchString(q))
	}
	return trigger && releases
}

func (r *runner) deploy(ctx context.Context, doc n8napi.Workflow) error {
	ws := []deploy.Workflow{{File: "workflow.json", Doc: doc, WebhookPath: r.path}}
	got, err := deploy.Deploy(ctx, r.t.API, ws, deploy.Options{WebhookURL: r.t.WebhookURL, LiveTimeout: 60 * time.Second})
	if err != nil {
		return err
	}
	r.id = got[0].ID
	return nil
}

// answer is the HTTP answer to one delivery.
type answer struct {
	status int
	body   string
}

func (a answer) String() string {
	if a.status == 0 {
		return "no answer: " + a.body
	}
	return strconv.Itoa(a.status)
}

// send delivers body, signed with a timestamp of its own.
func (r *runner) send(ctx context.Context, body []byte) answer {
	at := time.Now().Add(-time.Duration(r.sig.Add(1)%60) * time.Second)
	signed, err := signature.ProviderStripe.Sign(signature.Unsigned{Body: body, Secret: r.t.SigningSecret, Timestamp: at})
	if err != nil {
		return answer{body: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(r.t.WebhookURL, "/")+"/webhook/"+r.path, bytes.NewReader(body))
	if err != nil {
		return answer{body: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	for name, v := range signed {
		req.Header.Set(name, v)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return answer{body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return answer{status: resp.StatusCode, body: string(b)}
}

// tally counts answers by status, for deliveries sent at the same time:
// "answers: 9 × 200, 1 × 500".
func tally(answers []answer) string {
	counts := map[string]int{}
	var keys []string
	for _, a := range answers {
		k := a.String()
		if a.status == 0 {
			k = "no answer"
		}
		if counts[k] == 0 {
			keys = append(keys, k)
		}
		counts[k]++
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d × %s", counts[k], k)
	}
	return "answers: " + strings.Join(parts, ", ")
}

// sendAll delivers every body, at most limit at a time, and returns the
// answers in order.
func (r *runner) sendAll(ctx context.Context, bodies [][]byte, limit int) []answer {
	out := make([]answer, len(bodies))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = r.send(ctx, b)
		}()
	}
	wg.Wait()
	return out
}

// inTurn delivers the bodies one after the other, as a provider's retries
// come: each once the execution of the one before has finished. A workflow
// that answers on receipt (responseMode onReceived) answers before its
// execution runs, so without the wait two deliveries sent in a row can run
// side by side, and which one takes the key is a race, not a replay.
func (r *runner) inTurn(ctx context.Context, bodies ...[]byte) ([]answer, error) {
	out := make([]answer, len(bodies))
	for i, b := range bodies {
		if i > 0 {
			if _, err := r.finished(ctx, i); err != nil {
				return nil, err
			}
		}
		out[i] = r.send(ctx, b)
	}
	return out, nil
}

// runs waits for n more finished executions than already accounted for
// and returns them, oldest first, with their data.
func (r *runner) runs(ctx context.Context, n int) ([]n8napi.Run, error) {
	finished, err := r.finished(ctx, n)
	if err != nil {
		return nil, err
	}
	fresh := finished[r.seen : r.seen+n]
	r.seen += n
	out := make([]n8napi.Run, 0, n)
	for _, e := range fresh {
		run, err := r.t.API.ExecutionRun(ctx, e.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, run)
	}
	return out, nil
}

// finished waits until n8n has finished n more executions of the workflow
// than already accounted for, and returns all its finished ones, oldest
// first.
func (r *runner) finished(ctx context.Context, n int) ([]n8napi.Execution, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		execs, err := r.t.API.Executions(ctx, r.id)
		if err != nil {
			return nil, err
		}
		// A run in mode "error" is the workflow as its own error workflow
		// (an Error Trigger of its own), not a delivery.
		finished := slices.DeleteFunc(execs, func(e n8napi.Execution) bool {
			return e.Status == "new" || e.Status == "running" || e.Status == "waiting" || e.Mode == "error"
		})
		if len(finished) >= r.seen+n {
			slices.SortFunc(finished, func(a, b n8napi.Execution) int { return executionOrder(a.ID) - executionOrder(b.ID) })
			return finished, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("n8n recorded %d finished executions after 60 s, want %d", len(finished)-r.seen, n)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func executionOrder(id n8napi.ID) int {
	n, _ := strconv.Atoi(string(id))
	return n
}

// ranBusiness tells whether run took the business branch.
func (r *runner) ranBusiness(run n8napi.Run) bool {
	if r.guard.Transactional {
		return run.First[r.guard.Reserve]["new"] == true
	}
	if r.guard.Receipt {
		// Saved now, whichever output it left by.
		for _, items := range run.JSON[r.guard.Reserve] {
			if slices.ContainsFunc(items, func(item map[string]any) bool { return item["new"] == true }) {
				return true
			}
		}
		return false
	}
	return slices.ContainsFunc(r.guard.Business(), run.Ran)
}

// learnNewOutput settles the Decision output a new event takes, when the
// graph did not tell, from run: an execution of an event never seen.
func (r *runner) learnNewOutput(run n8napi.Run) {
	if r.guard.Transactional || r.guard.NewOutput >= 0 {
		return
	}
	for i, n := range run.Outputs[r.guard.Decision] {
		if n > 0 {
			r.guard.NewOutput = i
			return
		}
	}
}

// describe lists what an execution ran: its id, status, the answer to its
// delivery when a is given (only deliveries sent one at a time can be paired
// with their execution) and the nodes past the reservation.
func (r *runner) describe(run n8napi.Run, a *answer) string {
	past := r.guard.g.reach(r.guard.g.outs(r.guard.Reserve, true), true)
	var ran []string
	for _, n := range past {
		if run.Ran(n) {
			ran = append(ran, n)
		}
	}
	s := fmt.Sprintf("execution %s (%s", run.ID, run.Status)
	if a != nil {
		s += ", answered " + a.String()
	}
	s += "): " + strings.Join(ran, " → ")
	if r.guard.Transactional {
		s += fmt.Sprintf(" (%s reported new=%v)", r.guard.Reserve, run.First[r.guard.Reserve]["new"])
	}
	for n, msg := range run.Errors {
		s += fmt.Sprintf(" [%s failed: %s]", n, msg)
	}
	return s
}

func event(id, nonce string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","type":"checkout.session.completed","data":{"object":{"id":"cs_%s"}}}`, id, nonce)
}

func nonce() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
