package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	idemdeploy "github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/guard"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/verify"
)

// flakyCRM stands in for the business step's downstream service: the first
// call for each event fails with a 500 (the CRM is down), every later one
// succeeds. done counts the calls that succeeded, per event: the effects.
type flakyCRM struct {
	*httptest.Server
	mu    sync.Mutex
	seen  map[string]int
	done  map[string]int
	paths map[string]int
}

func newFlakyCRM(t *testing.T) *flakyCRM {
	c := &flakyCRM{seen: map[string]int{}, done: map[string]int{}, paths: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Event string `json:"event"`
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &body)
		c.mu.Lock()
		c.paths[r.URL.Path]++
		c.seen[body.Event]++
		first := c.seen[body.Event] == 1
		if !first {
			c.done[body.Event]++
		}
		c.mu.Unlock()
		if first && strings.HasPrefix(body.Event, "evt_flaky") {
			http.Error(w, `{"error":"the CRM is down"}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *flakyCRM) calls(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[path]
}

func (c *flakyCRM) effects(event string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done[event]
}

// alertRow is what the user's error workflow records of a failure.
type alertRow struct {
	ExecutionID, WorkflowID, WorkflowName, LastNode, Message, Mode string
}

func alertRows(t *testing.T, workflowID string) []alertRow {
	t.Helper()
	rows, err := st.Business.Query(context.Background(),
		`SELECT execution_id, workflow_id, workflow_name, last_node, message, mode FROM guard_alerts WHERE workflow_id = $1 ORDER BY at`, workflowID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []alertRow
	for rows.Next() {
		var r alertRow
		if err := rows.Scan(&r.ExecutionID, &r.WorkflowID, &r.WorkflowName, &r.LastNode, &r.Message, &r.Mode); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// errorFixtures reads the fixture workflow that names an error workflow of
// its own, and that error workflow (it writes a row), pointed at crm and
// the suite's credential.
func errorFixtures(t *testing.T, crm string) (orders, alerts []byte) {
	t.Helper()
	read := func(name string) []byte {
		raw, err := os.ReadFile("../internal/guard/testdata/error-workflow/" + name)
		if err != nil {
			t.Fatal(err)
		}
		raw = bytes.ReplaceAll(raw, []byte("http://IDEMHOOK_E2E_ECHO"), []byte(crm))
		return bytes.ReplaceAll(raw, []byte(`"Postgres (alerts)"`), []byte(`"`+credentialName+`"`))
	}
	execSQL(t, `CREATE TABLE IF NOT EXISTS guard_alerts (execution_id text, workflow_id text, workflow_name text, last_node text, message text, mode text, at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	return read("orders.json"), read("alerts.json")
}

// renamed gives a fixture workflow a name and webhook path of the test's.
func renamed(t *testing.T, raw []byte, name, path string) n8napi.Workflow {
	t.Helper()
	w := workflowOf(t, raw)
	w.Name = name
	for _, n := range w.Nodes {
		if n["type"] == "n8n-nodes-base.webhook" {
			n["parameters"].(map[string]any)["path"] = path
			n["webhookId"] = idemdeploy.NewUUID()
		}
	}
	claimName(t, name)
	return w
}

// A workflow that names an error workflow of its own keeps it. Side by side
// with the unguarded original: a delivery whose business step fails runs
// the user's error workflow once, which records the same failure (last
// node, message, mode) for its own execution and workflow, from the same
// error data; the key is given up, so the provider's retry runs the
// business step (one effect), and the next retry is a duplicate.
// idemhook verify passes on the guarded workflow with that error workflow,
// its failure check included.
func TestGuardKeepsTheErrorWorkflow(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	crm := newFlakyCRM(t)
	ordersRaw, alertsRaw := errorFixtures(t, crm.URL)
	opts := generator.Options{CredentialName: credentialName, ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce, EventsTable: "ge_events"}}
	res, err := guard.Guard(parse(t, ordersRaw), guard.Options{Generate: opts, ErrorWorkflow: parse(t, alertsRaw)})
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, string(res.Files[guard.FileSchema]))

	type side struct {
		path, id, alertsID string
		docs               []idemdeploy.Workflow
	}
	deploySide := func(s *side, orders, alerts []byte, suffix string) {
		o := renamed(t, orders, "e2e guard errors: orders "+suffix, s.path)
		a := renamed(t, alerts, "e2e guard errors: alerts "+suffix, "")
		got := deployFiles(t, ctx, map[string]n8napi.Workflow{"orders.json": o, "alerts.json": a})
		for _, d := range got {
			t.Cleanup(func() { api.DeleteWorkflow(context.WithoutCancel(ctx), d.ID) })
			if d.File == "orders.json" {
				s.id = d.ID
			} else {
				s.alertsID = d.ID
			}
		}
	}
	original := &side{path: "guard-errors-original"}
	guarded := &side{path: "guard-errors"}
	deploySide(original, ordersRaw, alertsRaw, "(original)")
	deploySide(guarded, res.Workflow, res.Files[guard.FileErrorWorkflow], "(guarded)")

	event := func(id string) []byte {
		return fmt.Appendf(nil, `{"id":"%s","type":"checkout.session.completed","data":{"object":{"id":"cs_%s"}}}`, id, id)
	}
	for _, s := range []*side{original, guarded} {
		url := st.WebhookURL + "/webhook/" + s.path
		id := "evt_flaky_" + strings.Trim(strings.ReplaceAll(s.path, "-", "_"), "_")
		if r := post(t, url, "application/json", event(id), map[string]string{"Stripe-Signature": "t=1,v1=first"}); r.status != 500 {
			t.Errorf("%s: the failing delivery was answered %d %s, want 500 (n8n's answer to a failed execution)", s.path, r.status, r.body)
		}
		waitFor(t, 2*time.Minute, s.path+": the error workflow's alert", func() bool { return len(alertRows(t, s.id)) == 1 })
		r := post(t, url, "application/json", event(id), map[string]string{"Stripe-Signature": "t=2,v1=retry"})
		if r.status != 200 || !strings.Contains(r.body, `"received":true`) {
			t.Errorf("%s: the provider's retry: %d %s, want the business step's answer", s.path, r.status, r.body)
		}
		if n := crm.effects(id); n != 1 {
			t.Errorf("%s: %d CRM contacts created for %s, want 1", s.path, n, id)
		}
		if s == guarded {
			if r := post(t, url, "application/json", event(id), nil); !strings.Contains(r.body, `"duplicate"`) {
				t.Errorf("the guarded workflow's third delivery: %d %s, want a duplicate", r.status, r.body)
			}
			if n := crm.effects(id); n != 1 {
				t.Errorf("after the duplicate, %d CRM contacts for %s, want 1", n, id)
			}
		}
	}

	// The user's error workflow ran once per failure, and recorded the same
	// failure for each side's own execution and workflow.
	want, got := alertRows(t, original.id), alertRows(t, guarded.id)
	if len(want) != 1 || len(got) != 1 {
		t.Fatalf("alerts: original %v, guarded %v; want one each", want, got)
	}
	if w, g := want[0], got[0]; w.LastNode != g.LastNode || w.Message != g.Message || w.Mode != g.Mode || g.LastNode != "Create CRM Contact" || g.Mode != "webhook" {
		t.Errorf("the alert differs:\noriginal %+v\nguarded  %+v", w, g)
	}
	for _, s := range []*side{original, guarded} {
		row := alertRows(t, s.id)[0]
		runs, err := api.Executions(ctx, s.id)
		if err != nil {
			t.Fatal(err)
		}
		if failed := runs[len(runs)-1]; string(failed.ID) != row.ExecutionID || failed.Status != "error" {
			t.Errorf("%s: the alert names execution %s; the failed one is %s (%s)", s.path, row.ExecutionID, failed.ID, failed.Status)
		}
	}
	// The item the user's alert node got: the same error data, but for the
	// trigger's name in the execution's context, which is the Webhook's
	// new one (docs/guard.md).
	wantItem := alertInput(t, ctx, original.alertsID, "Error Trigger", "evt_flaky_guard_errors_original")
	gotItem := alertInput(t, ctx, guarded.alertsID, "Error data for your nodes (idemhook)", "evt_flaky_guard_errors")
	trigger := func(item map[string]any) any {
		c := item["execution"].(map[string]any)["executionContext"].(map[string]any)["triggerNode"].(map[string]any)
		name := c["name"]
		c["name"] = "<the Webhook>"
		return name
	}
	if w, g := trigger(wantItem), trigger(gotItem); w != "Order Webhook" || g != "Order Webhook (raw body)" {
		t.Errorf("the error data's trigger node: original %v, guarded %v", w, g)
	}
	if !reflect.DeepEqual(wantItem, gotItem) {
		t.Errorf("the alert node's input differs:\noriginal %v\nguarded  %v", wantItem, gotItem)
	}

	// idemhook verify, its failure check included, with the error
	// workflow as companion.
	report, err := verify.Run(ctx, verifyTarget(t), workflowOf(t, res.Workflow), verify.Options{Concurrency: 10, Deliveries: 4,
		Companions: []n8napi.Workflow{workflowOf(t, res.Files[guard.FileErrorWorkflow])}})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	report.WriteTable(&table)
	for _, c := range report.Checks {
		if c.Status != verify.Pass {
			t.Errorf("verify: %s: %s %s", c.Name, c.Status, c.Seen)
		}
	}
	t.Logf("verify:\n%s", table.String())
}

// A workflow whose own Error Trigger n8n runs when it fails keeps it: the
// failed delivery pages once (the trigger's nodes run), its key is given
// up, and the retry buys the label once; idemhook verify passes, its
// failure check included.
func TestGuardKeepsTheOwnErrorTrigger(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	crm := newFlakyCRM(t)
	raw, err := os.ReadFile("../internal/guard/testdata/error-workflow/self.json")
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.ReplaceAll(raw, []byte("http://IDEMHOOK_E2E_ECHO"), []byte(crm.URL))
	res, err := guard.Guard(parse(t, raw), guard.Options{Generate: generator.Options{CredentialName: credentialName, ReserveOptions: generator.ReserveOptions{EventsTable: "gs_events"}}})
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, string(res.Files[guard.FileSchema]))
	w := renamed(t, res.Workflow, "e2e guard own error trigger", "guard-own-errors")
	var id string
	for _, d := range deployFiles(t, ctx, map[string]n8napi.Workflow{"self.json": w}) {
		id = d.ID
		t.Cleanup(func() { api.DeleteWorkflow(context.WithoutCancel(ctx), d.ID) })
	}
	url := st.WebhookURL + "/webhook/guard-own-errors"
	ev := []byte(`{"id":"evt_flaky_shipment","type":"shipment.ready"}`)
	post(t, url, "application/json", ev, nil)
	waitFor(t, 2*time.Minute, "the page of the failed execution", func() bool { return crm.calls("/pager") == 1 })
	waitFor(t, 2*time.Minute, "the retry's label", func() bool {
		post(t, url, "application/json", ev, nil)
		return crm.effects("evt_flaky_shipment") == 1
	})
	post(t, url, "application/json", ev, nil) // a duplicate now
	waitFor(t, time.Minute, "the duplicate's execution", func() bool {
		execs, _ := api.Executions(ctx, id)
		webhook := 0
		for _, e := range execs {
			if e.Mode == "webhook" && e.Status != "running" && e.Status != "new" {
				webhook++
			}
		}
		return webhook >= 3
	})
	if n, pages := crm.effects("evt_flaky_shipment"), crm.calls("/pager"); n != 1 || pages != 1 {
		t.Errorf("%d labels and %d pages for one event that failed once, want 1 and 1", n, pages)
	}

	check := workflowOf(t, res.Workflow)
	report, err := verify.Run(ctx, verifyTarget(t), check, verify.Options{Concurrency: 10, Deliveries: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range report.Checks {
		if c.Status != verify.Pass {
			t.Errorf("verify: %s: %s %s", c.Name, c.Status, c.Seen)
		}
	}
}

// alertInput is the first item node sent in the latest run of the error
// workflow id, its execution and workflow made comparable across runs:
// ids, URLs, names, the event's id and the error's stack and times are the
// run's own.
func alertInput(t *testing.T, ctx context.Context, id, node, event string) map[string]any {
	t.Helper()
	execs, err := api.Executions(ctx, id)
	if err != nil || len(execs) == 0 {
		t.Fatalf("error workflow %s ran %d times: %v", id, len(execs), err)
	}
	run, err := api.ExecutionRun(ctx, execs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	item := run.First[node]
	if item == nil {
		t.Fatalf("error workflow %s: %q sent nothing (ran %v)", id, node, run.Outputs)
	}
	b, _ := json.Marshal(item)
	b = bytes.ReplaceAll(b, []byte(event), []byte("<event>"))
	var out map[string]any
	json.Unmarshal(b, &out)
	exec, _ := out["execution"].(map[string]any)
	for _, k := range []string{"id", "url"} {
		if exec[k] == nil || exec[k] == "" {
			t.Errorf("the error data has no execution %s: %v", k, exec)
		}
		exec[k] = "<own>"
	}
	if e, ok := exec["error"].(map[string]any); ok {
		for _, k := range []string{"stack", "timestamp"} {
			delete(e, k)
		}
		if n, ok := e["node"].(map[string]any); ok {
			delete(n, "position") // guard moved the user's nodes right
		}
	}
	if c, ok := exec["executionContext"].(map[string]any); ok {
		delete(c, "establishedAt")
	}
	wf, _ := out["workflow"].(map[string]any)
	wf["id"], wf["name"] = "<own>", "<own>"
	return out
}

// The same through n8n's API, as a user runs it: --apply keeps the
// workflow's error workflow setting and puts the release into that
// workflow (published); a failing delivery runs it once and the retry runs
// the business step; guard again is refused and changes nothing; --remove
// --apply gives both workflows back as they were (the release gone, the
// setting the user's), after which a failure still alerts and nothing is
// reserved.
func TestGuardErrorWorkflowLive(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	crm := newFlakyCRM(t)
	ordersRaw, alertsRaw := errorFixtures(t, crm.URL)
	o := renamed(t, ordersRaw, "e2e guard errors live: orders", "guard-errors-live")
	a := renamed(t, alertsRaw, "e2e guard errors live: alerts", "")
	deployed := deployFiles(t, ctx, map[string]n8napi.Workflow{"orders.json": o, "alerts.json": a})
	var id, alertsID string
	for _, d := range deployed {
		t.Cleanup(func() { api.DeleteWorkflow(context.WithoutCancel(ctx), d.ID) })
		if d.File == "orders.json" {
			id = d.ID
		} else {
			alertsID = d.ID
		}
	}
	beforeOrders, _ := api.Workflow(ctx, id)
	beforeAlerts, _ := api.Workflow(ctx, alertsID)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "n8n-api-key")
	os.WriteFile(keyFile, []byte(apiKey), 0o600)
	opts := []string{"--credential", credentialName, "--events-table", "gel_events"}
	// The schema, as the file mode writes it.
	res, err := guard.Guard(parse(t, ordersRaw), guard.Options{Generate: generator.Options{CredentialName: credentialName, ReserveOptions: generator.ReserveOptions{EventsTable: "gel_events"}}, ErrorWorkflow: parse(t, alertsRaw)})
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, string(res.Files[guard.FileSchema]))
	live := append([]string{"guard", "--n8n-url", st.N8NURL, "--api-key-file", keyFile, "--webhook-url", st.WebhookURL, "--workflow-id", id, "--backup", dir}, opts...)

	r := runIdemhook(t, append(live, "--apply")...)
	if r.code != 0 {
		t.Fatalf("guard --apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if backups, _ := filepath.Glob(filepath.Join(dir, alertsID+"-before-guard-*.json")); len(backups) != 1 {
		t.Errorf("the error workflow's backups: %v, want one", backups)
	}
	guarded, _ := api.Workflow(ctx, id)
	alerts, _ := api.Workflow(ctx, alertsID)
	if guarded.Settings["errorWorkflow"] != alertsID {
		t.Errorf("after --apply the workflow's error workflow is %v, want the user's %s", guarded.Settings["errorWorkflow"], alertsID)
	}
	if !alerts.Active || !hasNode(alerts.Live(), "Release idemhook keys (gel_events)") || !hasNode(alerts.Live(), "Record Alert") {
		t.Errorf("after --apply the error workflow (published %v) runs %v", alerts.Active, nodeNames(alerts.Live()))
	}
	url := st.WebhookURL + "/webhook/guard-errors-live"
	ev := []byte(`{"id":"evt_flaky_live","type":"checkout.session.completed","data":{"object":{"id":"cs_live"}}}`)
	post(t, url, "application/json", ev, nil)
	waitFor(t, 2*time.Minute, "the alert of the failed execution", func() bool { return len(alertRows(t, id)) == 1 })
	if r := post(t, url, "application/json", ev, nil); r.status != 200 || crm.effects("evt_flaky_live") != 1 {
		t.Errorf("the retry after the failure: %d %s, %d effects; want the business step once", r.status, r.body, crm.effects("evt_flaky_live"))
	}
	// idemhook verify on what n8n now holds (on a path of its own: the
	// live workflow serves this one).
	check := guarded.Live()
	for _, n := range check.Nodes {
		if n["type"] == "n8n-nodes-base.webhook" {
			n["parameters"].(map[string]any)["path"] = "guard-errors-live-verify"
		}
	}
	report, err := verify.Run(ctx, verifyTarget(t), check, verify.Options{Concurrency: 10, Deliveries: 4, Companions: []n8napi.Workflow{alerts.Live()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range report.Checks {
		if c.Status != verify.Pass {
			t.Errorf("verify on the live workflow: %s: %s %s", c.Name, c.Status, c.Seen)
		}
	}

	if r := runIdemhook(t, append(live, "--apply")...); r.code != 2 || !strings.Contains(r.stderr, "already guarded") {
		t.Errorf("guard --apply again: exit %d, want 2, already guarded\n%s", r.code, r.stderr)
	}
	if again, _ := api.Workflow(ctx, id); again.Settings["errorWorkflow"] != alertsID {
		t.Errorf("after guard again the error workflow is %v", again.Settings["errorWorkflow"])
	}

	if r := runIdemhook(t, append(live, "--remove")...); r.code != 0 || !strings.Contains(r.stdout, "Nothing was changed") {
		t.Fatalf("guard --remove without --apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runIdemhook(t, append(live, "--remove", "--apply")...); r.code != 0 {
		t.Fatalf("guard --remove --apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	afterOrders, _ := api.Workflow(ctx, id)
	afterAlerts, _ := api.Workflow(ctx, alertsID)
	for _, c := range []struct {
		what          string
		before, after n8napi.Workflow
	}{{"the workflow", beforeOrders, afterOrders}, {"the error workflow", beforeAlerts, afterAlerts}} {
		if !reflect.DeepEqual(plainJSON(t, c.before.Nodes), plainJSON(t, c.after.Nodes)) || !reflect.DeepEqual(plainJSON(t, c.before.Connections), plainJSON(t, c.after.Connections)) ||
			!reflect.DeepEqual(plainJSON(t, c.before.Settings), plainJSON(t, c.after.Settings)) || !c.after.Active {
			t.Errorf("after --remove, %s (published %v) differs from before guard:\nbefore %s\nafter  %s", c.what, c.after.Active, mustJSON(t, c.before), mustJSON(t, c.after))
		}
	}
	// n8n may serve the guarded version for a few seconds after the
	// publish: deliveries wait for the original's.
	probes := 0
	waitFor(t, 2*time.Minute, "n8n serving the original again", func() bool {
		probes++
		post(t, url, "application/json", fmt.Appendf(nil, `{"id":"evt_probe_%d","data":{"object":{"id":"cs_probe"}}}`, probes), nil)
		execs, err := api.Executions(ctx, id)
		if err != nil || len(execs) == 0 {
			return false
		}
		run, err := api.ExecutionRun(ctx, execs[0].ID)
		return err == nil && run.Status == "success" && !run.Ran("Reserve Key") && run.Ran("Create CRM Contact")
	})
	keys := countRows(t, "gel_events")
	ev2 := []byte(`{"id":"evt_flaky_after_remove","type":"checkout.session.completed","data":{"object":{"id":"cs_rm"}}}`)
	post(t, url, "application/json", ev2, nil)
	waitFor(t, 2*time.Minute, "the alert after --remove", func() bool { return len(alertRows(t, id)) == 2 })
	if n := countRows(t, "gel_events"); n != keys {
		t.Errorf("after --remove a delivery reserved a key: %d keys, had %d", n, keys)
	}
}

// deployFiles deploys workflows as idemhook deploy deploys files: a
// workflow's references to another (its error workflow) point at the id n8n
// gives that one.
func deployFiles(t *testing.T, ctx context.Context, docs map[string]n8napi.Workflow) []idemdeploy.Deployed {
	t.Helper()
	files := map[string][]byte{}
	for name, w := range docs {
		files[name] = mustJSON(t, w)
	}
	ws, err := idemdeploy.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	got, err := idemdeploy.Deploy(ctx, api, ws, idemdeploy.Options{WebhookURL: st.WebhookURL})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	return got
}

func hasNode(w n8napi.Workflow, name string) bool {
	for _, n := range w.Nodes {
		if n["name"] == name {
			return true
		}
	}
	return false
}

func nodeNames(w n8napi.Workflow) []string {
	var out []string
	for _, n := range w.Nodes {
		out = append(out, fmt.Sprint(n["name"]))
	}
	return out
}

// plainJSON is v as plain JSON values, for comparing what n8n gives back.
func plainJSON(t *testing.T, v any) any {
	t.Helper()
	var out any
	json.Unmarshal(mustJSON(t, v), &out)
	return out
}

func parse(t *testing.T, raw []byte) *guard.Workflow {
	t.Helper()
	w, err := guard.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
