package generator_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/templates"
	"github.com/tidwall/gjson"
)

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// wf is a parsed workflow with helpers for its graph.
type wf struct {
	t    *testing.T
	doc  gjson.Result
	byID map[string]gjson.Result
}

func parse(t *testing.T, raw []byte) wf {
	t.Helper()
	if !json.Valid(raw) {
		t.Fatal("not valid JSON")
	}
	w := wf{t: t, doc: gjson.ParseBytes(raw), byID: map[string]gjson.Result{}}
	for _, n := range w.doc.Get("nodes").Array() {
		name := n.Get("name").String()
		if _, dup := w.byID[name]; dup {
			t.Errorf("duplicate node name %q", name)
		}
		w.byID[name] = n
	}
	return w
}

func (w wf) node(name string) gjson.Result {
	w.t.Helper()
	n, ok := w.byID[name]
	if !ok {
		w.t.Fatalf("no node %q; nodes: %v", name, w.names())
	}
	return n
}

func (w wf) names() []string {
	var out []string
	for name := range w.byID {
		out = append(out, name)
	}
	return out
}

// targets lists the nodes output number out of from feeds.
func (w wf) targets(from string, out int) []string {
	var names []string
	outs := w.doc.Get("connections").Get(gjson.Escape(from)).Get("main").Array()
	if out >= len(outs) {
		return nil
	}
	for _, l := range outs[out].Array() {
		names = append(names, l.Get("node").String())
	}
	return names
}

func (w wf) wantEdge(from string, out int, to string) {
	w.t.Helper()
	for _, n := range w.targets(from, out) {
		if n == to {
			return
		}
	}
	w.t.Errorf("%q output %d does not lead to %q (it leads to %v)", from, out, to, w.targets(from, out))
}

// wantAbove fails unless node a sits above node b: of two branches of one
// output, n8n's execution order (v1) runs the upper one first, to its end.
func (w wf) wantAbove(a, b string) {
	w.t.Helper()
	if ya, yb := w.node(a).Get("position.1").Int(), w.node(b).Get("position.1").Int(); ya >= yb {
		w.t.Errorf("%q (y %d) is not above %q (y %d)", a, ya, b, yb)
	}
}

func generate(t *testing.T, o generator.Options) wf {
	t.Helper()
	raw, err := generator.Workflow(o)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, raw)
}

// checkCommon holds for every generated workflow: known node types at their
// typeVersions, unique ids, connections between existing nodes, credentials
// by name only, array query parameters, and every path from a trigger ending
// in an answer.
func checkCommon(t *testing.T, w wf, credential string) {
	ids := map[string]bool{}
	for name, n := range w.byID {
		typ := n.Get("type").String()
		want, known := generator.TypeVersions[typ]
		if !known {
			t.Errorf("node %q has unexpected type %q", name, typ)
		}
		if got := n.Get("typeVersion").Float(); got != want {
			t.Errorf("node %q: typeVersion %v, want %v", name, got, want)
		}
		id := n.Get("id").String()
		if !uuidPattern.MatchString(id) || ids[id] {
			t.Errorf("node %q: id %q is not a unique UUID", name, id)
		}
		ids[id] = true
		if !n.Get("position").IsArray() || len(n.Get("position").Array()) != 2 {
			t.Errorf("node %q: position %s", name, n.Get("position").Raw)
		}
		n.Get("credentials").ForEach(func(kind, ref gjson.Result) bool {
			if !ref.Get("id").Exists() || ref.Get("id").Type != gjson.Null || ref.Get("name").String() == "" {
				t.Errorf("node %q: %s credential %s must be referenced by name with a null id", name, kind.String(), ref.Raw)
			}
			return true
		})
		if typ == "n8n-nodes-base.postgres" {
			cred := n.Get("credentials.postgres")
			if !cred.Get("id").Exists() || cred.Get("id").Type != gjson.Null {
				t.Errorf("node %q: credential id must be null, got %s", name, cred.Get("id").Raw)
			}
			if cred.Get("name").String() != credential {
				t.Errorf("node %q: credential name %q, want %q", name, cred.Get("name").String(), credential)
			}
			if q := n.Get("parameters.options.queryReplacement"); q.Exists() &&
				(!strings.HasPrefix(q.String(), "={{ [") || !strings.HasSuffix(q.String(), "] }}")) {
				t.Errorf("node %q: queryReplacement %q is not an array expression", name, q.String())
			}
			if strings.Contains(n.Get("parameters.query").String(), "{{") {
				t.Errorf("node %q: query interpolates an expression instead of binding it", name)
			}
		}
	}
	if strings.Contains(w.doc.Raw, `"credentials": {"postgres": {"id": "`) {
		t.Error("a credential id leaked into the workflow")
	}
	for from := range w.doc.Get("connections").Map() {
		if _, ok := w.byID[from]; !ok {
			t.Errorf("connection from unknown node %q", from)
		}
	}
	w.doc.Get("connections").ForEach(func(from, v gjson.Result) bool {
		v.Get("main").ForEach(func(_, out gjson.Result) bool {
			out.ForEach(func(_, l gjson.Result) bool {
				if _, ok := w.byID[l.Get("node").String()]; !ok {
					t.Errorf("%s connects to unknown node %q", from.String(), l.Get("node").String())
				}
				return true
			})
			return true
		})
		return true
	})
}

// checkEveryPathAnswers walks from the Webhook: every path must pass
// through a Respond to Webhook node, or the caller would hang until timeout.
// Nodes after the answer (the inbox receiver's hand-off) are fine, and so
// are the branches of an output whose top branch (run first, in n8n's
// execution order v1) is the answer.
func checkEveryPathAnswers(t *testing.T, w wf) {
	const respond = "n8n-nodes-base.respondToWebhook"
	seen := map[string]bool{}
	var walk func(name string, answered bool)
	walk = func(name string, answered bool) {
		answered = answered || w.node(name).Get("type").String() == respond
		if seen[name] {
			return
		}
		seen[name] = true
		outs := w.doc.Get("connections").Get(gjson.Escape(name)).Get("main").Array()
		leaf := true
		for i := range outs {
			targets := w.targets(name, i)
			if len(targets) == 0 {
				continue
			}
			top := slices.MinFunc(append([]string{}, targets...), func(a, b string) int {
				return cmp.Compare(w.node(a).Get("position.1").Int(), w.node(b).Get("position.1").Int())
			})
			answeredFirst := len(targets) > 1 && w.node(top).Get("type").String() == respond
			for _, next := range targets {
				leaf = false
				walk(next, answered || answeredFirst)
			}
		}
		if leaf && !answered {
			t.Errorf("path ends at %q without answering the webhook", name)
		}
	}
	walk(generator.NodeWebhook, false)
	for name, n := range w.byID {
		if !seen[name] && n.Get("type").String() != "n8n-nodes-base.stickyNote" {
			t.Errorf("node %q is unreachable from the Webhook", name)
		}
	}
}

// The default guard keeps the card's shape (the Webhook, the Code node that
// builds the key, the Postgres reserve, "Row Returned?" and "Respond 200
// duplicate") and holds the key with a lease: the example step writes its
// row and marks the key done in one statement fenced by the attempt, a
// retry meanwhile gets 409, a failed step releases only its own attempt.
func TestDefaultWorkflowHoldsALease(t *testing.T) {
	w := generate(t, generator.Options{})
	checkCommon(t, w, generator.DefaultCredentialName)
	checkEveryPathAnswers(t, w)
	card := map[string]string{"Webhook": "n8n-nodes-base.webhook", "Build Idempotency Key": "n8n-nodes-base.code",
		"Respond 200 duplicate": "n8n-nodes-base.respondToWebhook"}
	for name, typ := range card {
		if got := w.node(name).Get("type").String(); got != typ {
			t.Errorf("%s is a %s, want %s", name, got, typ)
		}
	}
	// Names may gain words, not lose the card's.
	if !strings.Contains(generator.NodeAcquireLease, "Reserve Key") || !strings.Contains(generator.NodeLeaseAcquired, "Row Returned?") {
		t.Errorf("the lease's nodes %q and %q lost the card's names", generator.NodeAcquireLease, generator.NodeLeaseAcquired)
	}
	if got := w.node(generator.NodeAcquireLease).Get("type").String(); got != "n8n-nodes-base.postgres" {
		t.Errorf("%s is a %s", generator.NodeAcquireLease, got)
	}
	events, business := pgsql.MustParseTable("processed_events"), pgsql.MustParseTable("business_log")
	for name, want := range map[string]string{
		generator.NodeAcquireLease:            pgsql.AcquireLease(events, generator.DefaultLease),
		"Business Step (insert business_log)": pgsql.BusinessInsertDone(events, business),
		generator.NodeMarkDone:                pgsql.MarkAttemptDone(events),
		generator.NodeRelease:                 pgsql.ReleaseLease(events),
	} {
		if got := w.node(name).Get("parameters.query").String(); got != want {
			t.Errorf("%s runs\n%s\nwant\n%s", name, got, want)
		}
	}
	// The fenced statements are bound to the attempt that holds the lease.
	attempt := "$('" + generator.NodeAcquireLease + "').item.json.attempt"
	for _, name := range []string{"Business Step (insert business_log)", generator.NodeMarkDone, generator.NodeRelease} {
		if got := w.node(name).Get("parameters.options.queryReplacement").String(); !strings.Contains(got, attempt) {
			t.Errorf("%s is bound to %s, not to the lease's attempt", name, got)
		}
	}
	if w.node("Business Step (insert business_log)").Get("onError").String() != "continueErrorOutput" {
		t.Error("the business step has no error output")
	}
	w.wantEdge("Webhook", 0, "Build Idempotency Key")
	w.wantEdge("Build Idempotency Key", 0, "Key Built?")
	w.wantEdge("Key Built?", 0, generator.NodeAcquireLease)
	wantLeaseDecision(w)
	w.wantEdge(generator.NodeStepSucceeded, 0, generator.NodeMarkDone)
	w.wantEdge(generator.NodeStepSucceeded, 1, "Release Key")
	w.wantEdge(generator.NodeMarkDone, 0, "Respond 200")
	w.wantEdge("Business Step (insert business_log)", 1, "Release Key")
	w.wantEdge("Release Key", 0, "Respond 500 released")
	checkStepSucceeded(t, w, leaseRow)
	for name, status := range map[string]int64{"Respond 200": 200, "Respond 200 duplicate": 200, "Respond 409 in progress": 409, "Respond 400 empty body": 400, "Respond 500 released": 500} {
		if got := w.node(name).Get("parameters.options.responseCode").Int(); got != status {
			t.Errorf("%s answers %d", name, got)
		}
	}
}

// checkStepSucceeded: with a lease, only an item carrying the column the
// business step returns goes on as its success. n8n hands a node that
// throws before its query (its credential unreadable) its input back on the
// success output, and that input never has the column.
func checkStepSucceeded(t *testing.T, w wf, guardItem string) {
	t.Helper()
	q := w.node("Business Step (insert business_log)").Get("parameters.query").String()
	if !strings.Contains(q, "RETURNING "+pgsql.StepOutputColumn) && !strings.Contains(q, "key AS "+pgsql.StepOutputColumn) {
		t.Errorf("the business step does not return %s:\n%s", pgsql.StepOutputColumn, q)
	}
	cond := w.node(generator.NodeStepSucceeded).Get("parameters.conditions.conditions.0")
	if cond.Get("operator.type").String() != "boolean" || cond.Get("operator.operation").String() != "true" {
		t.Fatalf("%s condition %s", generator.NodeStepSucceeded, cond.Raw)
	}
	// The condition, evaluated by node as n8n evaluates the expression:
	// the step's own output and a user's node's output go on; the item
	// the guard gave the step, handed back by n8n, does not.
	expr := strings.TrimSuffix(strings.TrimPrefix(cond.Get("leftValue").String(), "={{ "), " }}")
	items := map[string]bool{
		`{"event_key":"evt:1"}`:                                    true,
		`{"statusCode":200,"body":{"id":"ch_1"},"headers":{}}`:     true, // an HTTP Request node's
		`{"messageId":"<m@example>","accepted":["a@example.com"]}`: true,
		guardItem: false,
	}
	cases := slices.Sorted(maps.Keys(items))
	script := "const cases = [" + strings.Join(cases, ",") + "];\n" +
		"console.log(JSON.stringify(cases.map(($json) => (" + expr + "))));"
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: Step Succeeded?'s expression cannot be evaluated (install Node.js, see README)")
	}
	out, err := exec.Command(node, "-e", script).Output()
	if err != nil {
		t.Fatalf("%s's expression does not run: %v\n%s", generator.NodeStepSucceeded, err, expr)
	}
	var got []bool
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for i, item := range cases {
		if got[i] != items[item] {
			t.Errorf("%s on %s: %v, want %v (%s)", generator.NodeStepSucceeded, item, got[i], items[item], expr)
		}
	}
}

// The items the guards give the business step, as n8n would hand them back.
const (
	leaseRow    = `{"key":"evt:1","outcome":"acquired","attempt":1,"lease_until":"2026-12-07T20:00:00Z"}`
	nodeNewItem = `{"headers":{},"body":{"id":"evt_1"},"idempotency":{"key":"evt:1","source":"id","status":"new","attempt":1}}`
	keysvcNew   = `{"statusCode":201,"body":{"key":"evt:1","attempt":1},"headers":{}}`
)

// The at-most-once guard is the seed's template as it was written: reserve
// at first sight, release on failure.
func TestAtMostOnceWorkflowIsTheSeedTemplate(t *testing.T) {
	w := generate(t, generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce}})
	checkCommon(t, w, generator.DefaultCredentialName)
	checkEveryPathAnswers(t, w)

	hook := w.node("Webhook")
	if hook.Get("parameters.httpMethod").String() != "POST" || hook.Get("parameters.responseMode").String() != "responseNode" ||
		!hook.Get("parameters.options.rawBody").Bool() || hook.Get("parameters.path").String() != "idempotent-webhook" {
		t.Errorf("Webhook parameters: %s", hook.Get("parameters").Raw)
	}
	if !uuidPattern.MatchString(hook.Get("webhookId").String()) {
		t.Errorf("webhookId %q", hook.Get("webhookId").String())
	}
	if got := w.node("Build Idempotency Key").Get("parameters.jsCode").String(); got != templates.CodeNodeScript {
		t.Error("the Code node does not hold templates/code-node/idempotency-key.js verbatim")
	}
	reserve := w.node("Reserve Key")
	if got := reserve.Get("parameters.query").String(); got != "INSERT INTO processed_events (key) VALUES ($1) ON CONFLICT (key) DO NOTHING RETURNING key" {
		t.Errorf("reservation query %q", got)
	}
	if got := w.node("Release Key").Get("parameters.query").String(); got != "DELETE FROM processed_events WHERE key = $1" {
		t.Errorf("release query %q", got)
	}
	business := w.node("Business Step (insert business_log)")
	if business.Get("onError").String() != "continueErrorOutput" {
		t.Error("the business step has no error output")
	}
	if q := business.Get("parameters.query").String(); !strings.Contains(q, "INSERT INTO business_log (event_key, event_type)") {
		t.Errorf("business query %q", q)
	}
	// Row Returned? tests the returned column: on a conflict n8n's Postgres
	// node outputs {"success": true}, not zero items.
	cond := w.node("Row Returned?").Get("parameters.conditions.conditions.0")
	if cond.Get("leftValue").String() != "={{ $json.key }}" || cond.Get("operator.operation").String() != "exists" {
		t.Errorf("Row Returned? condition %s", cond.Raw)
	}

	w.wantEdge("Webhook", 0, "Build Idempotency Key")
	w.wantEdge("Build Idempotency Key", 0, "Key Built?")
	w.wantEdge("Key Built?", 0, "Reserve Key")
	w.wantEdge("Key Built?", 1, "Respond 400 empty body")
	w.wantEdge("Reserve Key", 0, "Row Returned?")
	w.wantEdge("Row Returned?", 0, "Business Step (insert business_log)")
	w.wantEdge("Row Returned?", 1, "Respond 200 duplicate")
	w.wantEdge("Business Step (insert business_log)", 0, "Respond 200")
	w.wantEdge("Business Step (insert business_log)", 1, "Release Key")
	w.wantEdge("Release Key", 0, "Respond 500 released")

	for name, status := range map[string]int64{"Respond 200": 200, "Respond 200 duplicate": 200, "Respond 400 empty body": 400, "Respond 500 released": 500} {
		if got := w.node(name).Get("parameters.options.responseCode").Int(); got != status {
			t.Errorf("%s answers %d", name, got)
		}
	}
}

func TestCryptoNodeWorkflow(t *testing.T) {
	w := generate(t, generator.Options{Hashing: generator.HashingCryptoNode})
	checkCommon(t, w, generator.DefaultCredentialName)
	checkEveryPathAnswers(t, w)
	for name, n := range w.byID {
		if n.Get("type").String() == "n8n-nodes-base.code" {
			t.Errorf("crypto-node mode has a Code node %q", name)
		}
	}
	hash := w.node("Hash Body").Get("parameters")
	if hash.Get("action").String() != "hash" || hash.Get("type").String() != "SHA256" || !hash.Get("binaryData").Bool() ||
		hash.Get("binaryPropertyName").String() != "data" || hash.Get("encoding").String() != "hex" {
		t.Errorf("Hash Body parameters %s", hash.Raw)
	}
	w.wantEdge("Webhook", 0, "Hash Body")
	w.wantEdge("Hash Body", 0, "Build Idempotency Key")
	w.wantEdge("Build Idempotency Key", 0, "Key Built?")
	if w.node("Build Idempotency Key").Get("type").String() != "n8n-nodes-base.set" {
		t.Error("Build Idempotency Key is not a Set node")
	}
}

func TestLeaseWorkflow(t *testing.T) {
	w := generate(t, generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease, Lease: 90 * time.Second}})
	checkCommon(t, w, generator.DefaultCredentialName)
	checkEveryPathAnswers(t, w)
	acquire := w.node(generator.NodeAcquireLease).Get("parameters.query").String()
	for _, want := range []string{"ON CONFLICT (key) DO UPDATE", "interval '90 seconds'", "e.lease_until < now()"} {
		if !strings.Contains(acquire, want) {
			t.Errorf("%s query lacks %q:\n%s", generator.NodeAcquireLease, want, acquire)
		}
	}
	w.wantEdge("Key Built?", 0, generator.NodeAcquireLease)
	wantLeaseDecision(w)
	w.wantEdge(generator.NodeStepSucceeded, 0, "Mark Done")
	w.wantEdge("Mark Done", 0, "Respond 200")
	w.wantEdge("Business Step (insert business_log)", 1, "Release Key")
	checkStepSucceeded(t, w, leaseRow)
	// Every way of building the key (the community node's included) checks
	// the step's output before Mark Done.
	for hashing, guardItem := range map[generator.Hashing]string{generator.HashingCryptoNode: leaseRow, generator.HashingNode: nodeNewItem} {
		v := generate(t, generator.Options{Hashing: hashing, ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease}})
		v.wantEdge(generator.NodeStepSucceeded, 0, "Mark Done")
		v.wantEdge(generator.NodeStepSucceeded, 1, "Release Key")
		checkStepSucceeded(t, v, guardItem)
	}
	busy := w.node("Respond 409 in progress").Get("parameters.options")
	if busy.Get("responseCode").Int() != 409 || busy.Get("responseHeaders.entries.0.name").String() != "Retry-After" ||
		busy.Get("responseHeaders.entries.0.value").String() != "90" {
		t.Errorf("Respond 409 options %s", busy.Raw)
	}
}

func TestCleanupWorkflow(t *testing.T) {
	raw, err := generator.CleanupWorkflow(generator.Options{Retention: 45 * 24 * time.Hour, ReserveOptions: generator.ReserveOptions{EventsTable: "hooks.events"}})
	if err != nil {
		t.Fatal(err)
	}
	w := parse(t, raw)
	checkCommon(t, w, generator.DefaultCredentialName)
	// Batches of pgsql.CleanupBatchSize, each committed (pgsql's tests run
	// the statement).
	if got := w.node("Delete Old Keys").Get("parameters.query").String(); got != pgsql.Cleanup(pgsql.MustParseTable("hooks.events"), 45*24*time.Hour, pgsql.CleanupBatchSize) ||
		!strings.Contains(got, "first_seen < now() - interval '45 days'") || !strings.Contains(got, "COMMIT") {
		t.Errorf("cleanup query %q", got)
	}
	rule := w.node("Every Day").Get("parameters.rule.interval.0")
	if rule.Get("field").String() != "days" || rule.Get("daysInterval").Int() != 1 {
		t.Errorf("schedule %s", rule.Raw)
	}
	w.wantEdge("Every Day", 0, "Delete Old Keys")
	w.wantEdge("On Demand", 0, "Delete Old Keys")
}

func TestIDsAreDeterministic(t *testing.T) {
	a, _ := generator.Workflow(generator.Options{})
	b, _ := generator.Workflow(generator.Options{})
	if string(a) != string(b) {
		t.Fatal("two runs with the same options differ")
	}
	base := generate(t, generator.Options{})
	other := generate(t, generator.Options{ReserveOptions: generator.ReserveOptions{BusinessTable: "orders_log", Guard: generator.GuardLease}})
	if base.doc.Get("id").String() != other.doc.Get("id").String() {
		t.Error("changing options other than the path changed the workflow id: a re-import would add a copy")
	}
	if base.node("Webhook").Get("webhookId").String() != other.node("Webhook").Get("webhookId").String() {
		t.Error("the webhookId changed with options other than the path")
	}
	moved := generate(t, generator.Options{WebhookPath: "elsewhere"})
	if base.doc.Get("id").String() == moved.doc.Get("id").String() {
		t.Error("two webhook paths share a workflow id")
	}
	if !regexp.MustCompile(`^[0-9A-Za-z]{16}$`).MatchString(base.doc.Get("id").String()) {
		t.Errorf("workflow id %q", base.doc.Get("id").String())
	}
}

func TestIdentifiersReachSQLValidated(t *testing.T) {
	w := generate(t, generator.Options{ReserveOptions: generator.ReserveOptions{EventsTable: "hooks.processed_events", BusinessTable: "app.orders"}})
	if q := w.node(generator.NodeAcquireLease).Get("parameters.query").String(); !strings.Contains(q, "INSERT INTO hooks.processed_events AS e (key") {
		t.Errorf("reservation query %q", q)
	}
	if q := w.node("Business Step (insert app.orders)").Get("parameters.query").String(); !strings.Contains(q, "UPDATE hooks.processed_events SET state = 'done'") || !strings.Contains(q, "INSERT INTO app.orders ") {
		t.Errorf("business query %q", q)
	}
}

func TestCredentialsExampleHoldsNoSecret(t *testing.T) {
	raw, err := generator.CredentialsExample(generator.Options{CredentialName: "Billing DB"})
	if err != nil {
		t.Fatal(err)
	}
	creds := gjson.ParseBytes(raw)
	if !creds.IsArray() || len(creds.Array()) != 1 {
		t.Fatalf("want a JSON array of one credential, got %s", raw)
	}
	c := creds.Get("0")
	if c.Get("name").String() != "Billing DB" || c.Get("type").String() != "postgres" || c.Get("id").String() == "" {
		t.Errorf("credential %s", c.Raw)
	}
	if c.Get("data.password").String() != "CHANGE_ME" {
		t.Errorf("password %q is not the placeholder", c.Get("data.password").String())
	}
}

func TestSchema(t *testing.T) {
	plain, err := generator.Schema(generator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := generator.Schema(generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CREATE TABLE IF NOT EXISTS processed_events (\n  key text PRIMARY KEY,\n  first_seen timestamptz NOT NULL DEFAULT now()\n)",
		"CREATE TABLE IF NOT EXISTS business_log (", "event_key text NOT NULL", "event_type text"} {
		if !strings.Contains(plain, want) {
			t.Errorf("plain schema lacks %q", want)
		}
	}
	// The lease schema is a superset: every plain statement, then columns.
	for _, stmt := range strings.Split(plain, ";") {
		if s := strings.TrimSpace(stmt); s != "" && !strings.Contains(s, "idemhook schema (guard") && !strings.Contains(lease, s) {
			t.Errorf("lease schema lacks %q", s)
		}
	}
	for _, want := range []string{"ADD COLUMN IF NOT EXISTS state", "ADD COLUMN IF NOT EXISTS lease_until", "ADD COLUMN IF NOT EXISTS attempts"} {
		if !strings.Contains(lease, want) {
			t.Errorf("lease schema lacks %q", want)
		}
	}
}

func TestKeysvcWorkflow(t *testing.T) {
	w := generate(t, generator.Options{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{KeysvcURL: "https://keys.internal:8443/", KeysvcCredential: "keysvc token"}})
	checkCommon(t, w, generator.DefaultCredentialName)
	checkEveryPathAnswers(t, w)
	reserve := w.node("Reserve via keysvc")
	p := reserve.Get("parameters")
	if p.Get("method").String() != "POST" || p.Get("url").String() != "https://keys.internal:8443/v1/reservations?lease=300s" ||
		p.Get("contentType").String() != "binaryData" || p.Get("inputDataFieldName").String() != "data" ||
		!p.Get("options.response.response.fullResponse").Bool() || !p.Get("options.response.response.neverError").Bool() {
		t.Errorf("Reserve via keysvc parameters %s", p.Raw)
	}
	if reserve.Get("onError").String() != "continueErrorOutput" {
		t.Error("an unreachable keysvc must take the error output (503), not fail silently")
	}
	cred := reserve.Get("credentials.httpBearerAuth")
	if cred.Get("name").String() != "keysvc token" || cred.Get("id").Type != gjson.Null {
		t.Errorf("bearer credential %s", cred.Raw)
	}
	w.wantEdge("Webhook", 0, "Reserve via keysvc")
	w.wantEdge("Reserve via keysvc", 0, "Reserved?")
	w.wantEdge("Reserve via keysvc", 1, "Respond 503 keysvc unreachable")
	w.wantEdge("Reserved?", 0, "Business Step (insert business_log)")
	w.wantEdge("Reserved?", 1, "Duplicate?")
	w.wantEdge("Duplicate?", 0, "Respond 200 duplicate")
	w.wantEdge("Duplicate?", 1, "Respond with keysvc's answer")
	w.wantEdge("Business Step (insert business_log)", 1, "Release Key")
	if got := w.node("Release Key").Get("parameters.method").String(); got != "DELETE" {
		t.Errorf("Release Key method %q", got)
	}
	if got := w.node("Reserved?").Get("parameters.conditions.conditions.0.rightValue").Int(); got != 201 {
		t.Errorf("Reserved? compares with %d", got)
	}
	for _, bad := range []string{"ftp://x", "http://user:pw@x", "http://x/?token=1", "not a url", "http://"} {
		if err := (generator.Options{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{KeysvcURL: bad}}).Validate(); err == nil {
			t.Errorf("keysvc URL %q accepted", bad)
		}
	}
	lease := generate(t, generator.Options{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease, Lease: 2 * time.Minute}})
	checkEveryPathAnswers(t, lease)
	if got := lease.node("Reserve via keysvc").Get("parameters.url").String(); got != "http://127.0.0.1:8080/v1/reservations?lease=120s" {
		t.Errorf("lease URL %q", got)
	}
	lease.wantEdge("Business Step (insert business_log)", 0, generator.NodeStepSucceeded)
	lease.wantEdge(generator.NodeStepSucceeded, 0, "Mark Done")
	lease.wantEdge(generator.NodeStepSucceeded, 1, "Release Key")
	checkStepSucceeded(t, lease, keysvcNew)
}

func TestVerifyWorkflow(t *testing.T) {
	w := generate(t, generator.Options{Verify: "stripe"})
	checkCommon(t, w, generator.DefaultCredentialName)
	checkEveryPathAnswers(t, w)
	w.wantEdge("Webhook", 0, "Prepare Signature Check")
	w.wantEdge("Prepare Signature Check", 0, "Compute Signature")
	w.wantEdge("Compute Signature", 0, "Signature Valid?")
	if got := w.node("Signature Valid?").Get("parameters.conditions.conditions.0.leftValue").String(); got != "={{ "+templates.SignatureValidExpression+" }}" {
		t.Errorf("Signature Valid? tests %s, not the signature expression", got)
	}
	w.wantEdge("Signature Valid?", 0, "Build Idempotency Key")
	w.wantEdge("Signature Valid?", 1, "Respond 401 invalid signature")
	compute := w.node("Compute Signature")
	if compute.Get("parameters.action").String() != "hmac" || compute.Get("parameters.encoding").String() != "hex" ||
		compute.Get("parameters.value").String() != "={{ $json.signatureCheck.payload }}" {
		t.Errorf("Compute Signature parameters %s", compute.Get("parameters").Raw)
	}
	cred := compute.Get("credentials.crypto")
	if cred.Get("id").Type != gjson.Null || cred.Get("name").String() != generator.DefaultVerifyCredential {
		t.Errorf("Crypto credential reference %s", cred.Raw)
	}
	if js := w.node("Prepare Signature Check").Get("parameters.jsCode").String(); !strings.Contains(js, `const PROVIDER = "stripe";`) ||
		!strings.Contains(js, "const TOLERANCE_SECONDS = 300;") {
		t.Error("the prepare script is not set for stripe with a 300 s tolerance")
	}
	if js := w.node("Build Idempotency Key").Get("parameters.jsCode").String(); !strings.Contains(js, `const PRESET = "stripe";`) {
		t.Error("the key script does not use the provider's preset")
	}
	if got := w.node("Respond 401 invalid signature").Get("parameters.options.responseCode").Int(); got != 401 {
		t.Errorf("Respond 401 answers %d", got)
	}
	creds, _ := generator.CredentialsExample(generator.Options{Verify: "stripe"})
	c := gjson.ParseBytes(creds)
	if c.Get("#").Int() != 2 || c.Get(`#(type=="crypto").data.hmacSecret`).String() != "CHANGE_ME" {
		t.Errorf("credentials example %s", creds)
	}

	shopify := generate(t, generator.Options{Verify: "shopify", Hashing: generator.HashingCryptoNode, Preset: "stripe"})
	checkEveryPathAnswers(t, shopify)
	if shopify.node("Compute Signature").Get("parameters.encoding").String() != "base64" {
		t.Error("Shopify signatures are base64")
	}
	shopify.wantEdge("Signature Valid?", 0, "Hash Body")
}

func TestKeysvcVerifyForwardsHeaders(t *testing.T) {
	w := generate(t, generator.Options{Hashing: generator.HashingKeysvc, Verify: "github", Scope: "org"})
	p := w.node("Reserve via keysvc").Get("parameters")
	if got := p.Get("url").String(); got != "http://127.0.0.1:8080/v1/reservations?lease=300s&provider=github&scope=org" {
		t.Errorf("url %q", got)
	}
	var names []string
	for _, h := range p.Get("headerParameters.parameters").Array() {
		names = append(names, h.Get("name").String())
	}
	for _, want := range []string{"X-Hub-Signature-256", "X-Github-Delivery", "X-Github-Hook-Id"} {
		if !strings.Contains(strings.Join(names, ","), want) {
			t.Errorf("header %s is not forwarded to keysvc (forwarded: %v)", want, names)
		}
	}
	creds, _ := generator.CredentialsExample(generator.Options{Hashing: generator.HashingKeysvc, Verify: "github"})
	if gjson.ParseBytes(creds).Get("#").Int() != 1 {
		t.Error("keysvc holds the signing secret: no Crypto credential is needed")
	}
}

func TestVerifyOptions(t *testing.T) {
	for _, tc := range []struct {
		opts   generator.Options
		option string
	}{
		{generator.Options{Verify: "paypal"}, "verify provider"},
		{generator.Options{Verify: "standardwebhooks"}, "verify provider"},
		{generator.Options{Verify: "github", Hashing: generator.HashingCryptoNode}, "preset"},
		{generator.Options{Preset: "slack", Hashing: generator.HashingCryptoNode}, "preset"},
		{generator.Options{Preset: "nope"}, "preset"},
		{generator.Options{Verify: "stripe", Scope: "acct"}, "scope"},
		{generator.Options{Preset: "github", Scope: "a b"}, "scope"},
		{generator.Options{Verify: "slack", Tolerance: time.Millisecond}, "tolerance"},
		{generator.Options{Verify: "slack", VerifyCredential: "a\nb"}, "verify credential"},
	} {
		var oe *generator.OptionError
		if err := tc.opts.Validate(); !errors.As(err, &oe) || oe.Option != tc.option {
			t.Errorf("%+v: %v, want an error on %s", tc.opts, err, tc.option)
		}
	}
	for _, ok := range []generator.Options{
		{Verify: "standardwebhooks", Hashing: generator.HashingKeysvc},
		{Verify: "github", Scope: "org-hooks"},
		{Preset: "slack"},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// The transactional guard: the key, one statement that reserves and writes,
// one answer; a failed statement answers 500. Four nodes on the way.
func TestTransactionalWorkflow(t *testing.T) {
	for _, hashing := range []generator.Hashing{generator.HashingCodeNode, generator.HashingCryptoNode} {
		w := generate(t, generator.Options{Hashing: hashing, ReserveOptions: generator.ReserveOptions{Guard: generator.GuardTransactional}})
		checkCommon(t, w, generator.DefaultCredentialName)
		checkEveryPathAnswers(t, w)
		w.wantEdge(generator.NodeReserveAndWrite, 0, generator.NodeRespondResult)
		w.wantEdge(generator.NodeReserveAndWrite, 1, generator.NodeRespond500Txn)
		// Only the statement's own row (its boolean "new") is answered 200:
		// n8n hands the key's item on when the node throws before its query.
		if code := w.node(generator.NodeRespondResult).Get("parameters.options.responseCode").String(); !strings.Contains(code, "typeof $json.new === 'boolean' ? 200 : 500") {
			t.Errorf("%s: Respond's status %q", hashing, code)
		}
		q := w.node(generator.NodeReserveAndWrite).Get("parameters.query").String()
		for _, want := range []string{"INSERT INTO processed_events (key) SELECT $1 WHERE $1 <> '' ON CONFLICT (key) DO NOTHING RETURNING key",
			"INSERT INTO business_log (event_key, event_type) SELECT key"} {
			if !strings.Contains(q, want) {
				t.Errorf("%s: the statement lacks %q:\n%s", hashing, want, q)
			}
		}
		// Webhook → key node(s) → Reserve and Write → Respond.
		path := []string{generator.NodeWebhook}
		for n := generator.NodeWebhook; len(w.targets(n, 0)) > 0; n = w.targets(n, 0)[0] {
			path = append(path, w.targets(n, 0)[0])
		}
		want := 4
		if hashing == generator.HashingCryptoNode {
			want = 5 // Hash Body and Build Idempotency Key
		}
		if len(path) != want {
			t.Errorf("%s: the hot path is %v, want %d nodes", hashing, path, want)
		}
	}
	if err := (generator.Options{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{Guard: generator.GuardTransactional}}).Validate(); err == nil {
		t.Error("the transactional guard was accepted with keysvc, which reserves in its own statement")
	}
}

// The crypto-node id expression lives under templates/ and names the Webhook
// node by its name: renaming the node must not leave it reading nothing.
func TestCryptoIDExpressionReadsTheWebhookNode(t *testing.T) {
	if !strings.Contains(templates.CryptoIDExpression, "$('"+generator.NodeWebhook+"').item.json.body") {
		t.Errorf("templates/expressions/crypto-id.js does not read $('%s').item.json.body", generator.NodeWebhook)
	}
}

// No two nodes of a generated workflow sit on the same spot of the canvas,
// whatever sections the options add (the signature check, two key nodes or
// one, each guard, keysvc, the inbox pattern's workflows).
func TestNodesDoNotOverlap(t *testing.T) {
	options := []generator.Options{
		{Verify: "stripe", Hashing: generator.HashingCryptoNode, ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease}},
		{Verify: "github", ReserveOptions: generator.ReserveOptions{Guard: generator.GuardTransactional}},
		{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease}},
		{Pattern: generator.PatternInbox, Verify: "shopify"},
		{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{Receiver: generator.ReceiverKeysvc}},
	}
	for _, tpl := range generator.Templates() {
		options = append(options, tpl.Options)
	}
	for _, o := range options {
		files, err := generator.Files(o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		for file, raw := range files {
			nodes := gjson.GetBytes(raw, "nodes").Array()
			if len(nodes) == 0 {
				continue
			}
			// Boxes as n8n draws them: a node about 100 × 100 from its
			// position, a note its width × height.
			type box struct {
				name       string
				x, y, w, h float64
				note       bool
			}
			var boxes []box
			notes := 0
			for _, n := range nodes {
				b := box{name: n.Get("name").String(), x: n.Get("position.0").Float(), y: n.Get("position.1").Float(), w: 100, h: 100}
				if n.Get("type").String() == "n8n-nodes-base.stickyNote" {
					b.w, b.h, b.note = n.Get("parameters.width").Float(), n.Get("parameters.height").Float(), true
					notes++
					if !strings.HasPrefix(n.Get("parameters.content").String(), "## ") {
						t.Errorf("%+v %s: note %q has no heading", o, file, b.name)
					}
				}
				boxes = append(boxes, b)
			}
			if notes == 0 {
				t.Errorf("%+v %s: no sticky note explains the workflow", o, file)
			}
			for i, a := range boxes {
				for _, b := range boxes[i+1:] {
					if a.x < b.x+b.w && b.x < a.x+a.w && a.y < b.y+b.h && b.y < a.y+a.h {
						t.Errorf("%+v %s: %q at (%v, %v) overlaps %q at (%v, %v)", o, file, a.name, a.x, a.y, b.name, b.x, b.y)
					}
				}
			}
		}
	}
}

// The notes say what each workflow needs and where the user's own step
// goes, for each mode.
func TestNotesSayWhatToDo(t *testing.T) {
	for _, c := range []struct {
		o    generator.Options
		file string
		want []string
	}{
		{generator.Options{}, generator.FileWorkflow, []string{"schema.sql", "**Postgres (idemhook)**", "NODE_FUNCTION_ALLOW_BUILTIN=crypto", "wired to **Release Key**", "docs/modes.md#lease", "**Mark Done**", "leased for 5m", "Idempotency-Key"}},
		{generator.Options{Hashing: generator.HashingCryptoNode}, generator.FileWorkflow, []string{"docs/modes.md#crypto-node", "leased for"}},
		{generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease}}, generator.FileWorkflow, []string{"**Mark Done**", "leased for 5m", "docs/modes.md#lease"}},
		{generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardTransactional}}, generator.FileWorkflow, []string{"business CTE", "docs/modes.md#transactional"}},
		{generator.Options{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{KeysvcCredential: "keysvc token"}}, generator.FileWorkflow, []string{"**keysvc token**", "docs/modes.md#keysvc"}},
		{generator.Options{Verify: "stripe"}, generator.FileWorkflow, []string{"Crypto credential **Webhook signing secret (idemhook)**", "401"}},
		{generator.Options{}, generator.FileCleanup, []string{"older than 30d", "idemhook cleanup --now"}},
		{generator.Options{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{OutboxURL: "https://api.example/v1/operations"}}, generator.FileReceiver, []string{"outbox, worker, recoverer, receiver", "docs/inbox.md"}},
		{generator.Options{Pattern: generator.PatternInbox}, generator.FileWorker, []string{"## Worker", "worker, recoverer, receiver"}},
		{generator.Options{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{OutboxURL: "https://api.example/v1/operations"}}, generator.FileOutbox, []string{"https://api.example/v1/operations", "Idempotency-Key"}},
		{generator.Options{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{Receiver: generator.ReceiverKeysvc}}, generator.FileTarget, []string{"X-Idemhook-Inbox-Id", "worker, recoverer, target"}},
	} {
		files, err := generator.Files(c.o)
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, n := range gjson.GetBytes(files[c.file], `nodes.#(type=="n8n-nodes-base.stickyNote")#`).Array() {
			text.WriteString(n.Get("parameters.content").String() + "\n")
		}
		for _, w := range c.want {
			if !strings.Contains(text.String(), w) {
				t.Errorf("%+v %s: the notes do not say %q:\n%s", c.o, c.file, w, text.String())
			}
		}
	}
}

// When the database does not answer, the reservation's error output
// answers 503 with Retry-After and runs nothing after it: the provider
// retries, and no business step ran without a key.
func TestUnreachableDatabaseAnswers503(t *testing.T) {
	for _, c := range []struct {
		guard   generator.Guard
		reserve string
	}{{generator.GuardAtMostOnce, generator.NodeReserve}, {generator.GuardLease, generator.NodeAcquireLease}} {
		w := generate(t, generator.Options{ReserveOptions: generator.ReserveOptions{Guard: c.guard}})
		w.wantEdge(c.reserve, 1, generator.NodeRespond503DB)
		respond := w.node(generator.NodeRespond503DB)
		if respond.Get("parameters.options.responseCode").Int() != 503 ||
			respond.Get("parameters.options.responseHeaders.entries.0.name").String() != "Retry-After" ||
			!json.Valid([]byte(respond.Get("parameters.responseBody").String())) {
			t.Errorf("%s: the unavailable answer is %s", c.guard, respond.Get("parameters").Raw)
		}
		if got := w.targets(generator.NodeRespond503DB, 0); len(got) != 0 {
			t.Errorf("%s: nodes run after the 503: %v", c.guard, got)
		}
	}
}

// The execution settings reach every workflow; the inbox receiver keeps no
// successful execution's data unless told to; a bad value is an option
// error.
func TestExecutionSettings(t *testing.T) {
	o := generator.Options{Executions: generator.Executions{SaveSuccess: "none", SaveErrors: "all", SaveManual: "false", Timeout: 5 * time.Minute}}
	files, err := generator.Files(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{generator.FileWorkflow, generator.FileCleanup} {
		s := gjson.GetBytes(files[name], "settings")
		if s.Get("saveDataSuccessExecution").String() != "none" || s.Get("saveDataErrorExecution").String() != "all" ||
			s.Get("saveManualExecutions").Type != gjson.False || s.Get("executionTimeout").Int() != 300 || s.Get("executionOrder").String() != "v1" {
			t.Errorf("%s settings: %s", name, s.Raw)
		}
	}
	plain, _ := generator.Files(generator.Options{})
	if s := gjson.GetBytes(plain[generator.FileWorkflow], "settings"); s.Get("saveDataSuccessExecution").Exists() || len(s.Map()) != 1 {
		t.Errorf("without options the settings are %s; want n8n's own, only executionOrder set", s.Raw)
	}
	inbox, _ := generator.Files(generator.Options{Pattern: generator.PatternInbox})
	if got := gjson.GetBytes(inbox[generator.FileReceiver], "settings.saveDataSuccessExecution").String(); got != "none" {
		t.Errorf("the inbox receiver saves successful executions' data (%q): the body is in inbox_events already", got)
	}
	if gjson.GetBytes(inbox[generator.FileWorker], "settings.saveDataSuccessExecution").Exists() {
		t.Error("the worker's settings changed without an option")
	}
	inbox, _ = generator.Files(generator.Options{Pattern: generator.PatternInbox, Executions: generator.Executions{SaveSuccess: "all"}})
	if got := gjson.GetBytes(inbox[generator.FileReceiver], "settings.saveDataSuccessExecution").String(); got != "all" {
		t.Errorf("--save-success all on the receiver: %q", got)
	}
	for _, x := range []generator.Executions{{SaveSuccess: "some"}, {SaveErrors: "yes"}, {SaveManual: "1"}, {Timeout: 1500 * time.Millisecond}, {Timeout: 48 * time.Hour}} {
		var oe *generator.OptionError
		if err := (generator.Options{Executions: x}).Validate(); !errors.As(err, &oe) {
			t.Errorf("%+v: %v, want an option error", x, err)
		}
	}
}

// The Setup note says what the workflow holds, read from its nodes: the
// environment a Code node's require needs only when a Code node requires a
// module, the Crypto credential only when a node uses one, keysvc's token
// whenever the workflow calls a keysvc that is not on loopback.
func TestNotesSayWhatTheWorkflowHolds(t *testing.T) {
	for _, c := range []struct {
		name         string
		o            generator.Options
		want, refuse []string
	}{
		{"crypto-node with a signature check: a Code node that requires nothing",
			generator.Options{Hashing: generator.HashingCryptoNode, Verify: "stripe"},
			[]string{"Crypto credential"}, []string{"NODE_FUNCTION_ALLOW_BUILTIN"}},
		{"the default: the Code node requires crypto",
			generator.Options{}, []string{"NODE_FUNCTION_ALLOW_BUILTIN=crypto"}, []string{"Crypto credential"}},
		{"keysvc on a public address, no credential named: one by default, with the guard scope",
			generator.Options{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{KeysvcURL: "https://keysvc.example.com"}},
			[]string{"**keysvc token**", "**guard** scope"}, []string{"NODE_FUNCTION_ALLOW_BUILTIN", "no token"}},
		{"keysvc on loopback, no credential named: says it sends no token",
			generator.Options{Hashing: generator.HashingKeysvc}, []string{"send **no token**"}, nil},
		{"the verifiable node with a signature check: keysvc's secret, no Crypto credential",
			generator.Options{Hashing: generator.HashingNode, NodeStore: generator.NodeStoreKeysvc, Verify: "stripe"},
			[]string{"n8n-nodes-idemhook**", "**idemhook keysvc**", "KEYSVC_SECRET_STRIPE"}, []string{"Crypto credential", "NODE_FUNCTION_ALLOW_BUILTIN", "n8n-nodes-idemhook-postgres"}},
	} {
		files, err := generator.Files(c.o)
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, n := range gjson.GetBytes(files[generator.FileWorkflow], `nodes.#(type=="n8n-nodes-base.stickyNote")#`).Array() {
			text.WriteString(n.Get("parameters.content").String() + "\n")
		}
		for _, w := range c.want {
			if !strings.Contains(text.String(), w) {
				t.Errorf("%s: the notes do not say %q:\n%s", c.name, w, text.String())
			}
		}
		for _, w := range c.refuse {
			if strings.Contains(text.String(), w) {
				t.Errorf("%s: the notes say %q:\n%s", c.name, w, text.String())
			}
		}
	}
	// credentials.example.json has an entry for every credential the
	// workflow names.
	for _, o := range []generator.Options{
		{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{KeysvcURL: "https://keysvc.example.com"}},
		{Hashing: generator.HashingNode, NodeStore: generator.NodeStoreKeysvc},
		{Hashing: generator.HashingCryptoNode, Verify: "stripe"},
	} {
		files, err := generator.Files(o)
		if err != nil {
			t.Fatal(err)
		}
		examples := map[string]bool{}
		for _, c := range gjson.GetBytes(files["credentials.example.json"], "@this").Array() {
			examples[c.Get("type").String()+"/"+c.Get("name").String()] = true
		}
		for _, n := range gjson.GetBytes(files[generator.FileWorkflow], "nodes").Array() {
			n.Get("credentials").ForEach(func(typ, ref gjson.Result) bool {
				if !examples[typ.String()+"/"+ref.Get("name").String()] {
					t.Errorf("%+v: node %s names the %s credential %q, which credentials.example.json lacks", o, n.Get("name"), typ, ref.Get("name"))
				}
				return true
			})
		}
	}
}

// Where keysvc holds the keys (its own store, pruned by its --retention),
// the files hold no events table and no cleanup workflow, the notes say so,
// --retention is refused, and the node's branch that passes keysvc's
// refusals on (400, 401, 413) is named for them.
func TestKeysvcKeepsTheKeys(t *testing.T) {
	for _, o := range []generator.Options{
		{Hashing: generator.HashingKeysvc},
		{Hashing: generator.HashingNode, NodeStore: generator.NodeStoreKeysvc},
		{Hashing: generator.HashingNode, NodeType: "n8n-nodes-idemhook.idempotencyGuard"},
	} {
		files, err := generator.Files(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := files[generator.FileCleanup]; ok {
			t.Errorf("%+v: a cleanup workflow for keys keysvc keeps", o)
		}
		if schema := string(files["schema.sql"]); strings.Contains(schema, "processed_events") || !strings.Contains(schema, "business_log") {
			t.Errorf("%+v: schema.sql\n%s\nwant the business table only", o, schema)
		}
		if _, err := generator.CleanupWorkflow(o); !errors.Is(err, generator.ErrNoCleanupWorkflow) {
			t.Errorf("%+v: CleanupWorkflow: %v", o, err)
		}
		var notes strings.Builder
		for _, n := range gjson.GetBytes(files[generator.FileWorkflow], `nodes.#(type=="n8n-nodes-base.stickyNote")#`).Array() {
			notes.WriteString(n.Get("parameters.content").String())
		}
		if !strings.Contains(notes.String(), "prunes them after its `--retention`: there is no cleanup workflow") {
			t.Errorf("%+v: the Setup note does not say keysvc keeps the keys:\n%s", o, notes.String())
		}
		withRetention := o
		withRetention.Retention = 40 * 24 * time.Hour
		var oe *generator.OptionError
		if _, err := generator.Files(withRetention); !errors.As(err, &oe) || oe.Option != "retention" {
			t.Errorf("%+v with --retention: %v, want it refused", o, err)
		}
	}
	w := generate(t, generator.Options{Hashing: generator.HashingNode, NodeStore: generator.NodeStoreKeysvc})
	if got := w.node(generator.NodeRespondRefused).Get("parameters.options.responseCode").String(); got != "={{ $json.details.httpStatus }}" {
		t.Errorf("%s answers %q, want keysvc's status", generator.NodeRespondRefused, got)
	}
	if _, ok := w.byID[generator.NodeRespond400]; ok {
		t.Errorf("the node on keysvc still has %q, which answers 401 and 413 too", generator.NodeRespond400)
	}
	// The PostgreSQL package's node keeps its events table and its cleanup.
	files, _ := generator.Files(generator.Options{Hashing: generator.HashingNode})
	if _, ok := files[generator.FileCleanup]; !ok || !strings.Contains(string(files["schema.sql"]), "processed_events") {
		t.Error("the node on PostgreSQL lost its events table or its cleanup workflow")
	}
}

// Slack's URL check is answered its challenge after the signature check
// and before the key: nothing reserved, nothing run. Without a Slack
// signature or preset the workflow has no such branch.
func TestSlackURLCheckAnsweredBeforeTheKey(t *testing.T) {
	for _, o := range []generator.Options{
		{Verify: "slack"},
		{Verify: "slack", Hashing: generator.HashingCryptoNode, Preset: "stripe"},
		{Preset: "slack"},
		{Verify: "slack", ReserveOptions: generator.ReserveOptions{Guard: generator.GuardTransactional}},
		{Verify: "slack", Hashing: generator.HashingNode},
	} {
		w := generate(t, o)
		checkEveryPathAnswers(t, w)
		from := generator.NodeWebhook
		if o.Verify != "" {
			from = generator.NodeSignatureValid
		}
		w.wantEdge(from, 0, generator.NodeSlackEvent)
		w.wantEdge(generator.NodeSlackEvent, 1, generator.NodeRespondChallenge)
		if got := w.targets(generator.NodeRespondChallenge, 0); len(got) != 0 {
			t.Errorf("%+v: nodes run after the challenge: %v", o, got)
		}
		respond := w.node(generator.NodeRespondChallenge).Get("parameters")
		if respond.Get("options.responseCode").Int() != 200 || !strings.Contains(respond.Get("responseBody").String(), "challenge: $('Webhook').item.json.body.challenge") {
			t.Errorf("%+v: the challenge's answer %s", o, respond.Raw)
		}
		if cond := w.node(generator.NodeSlackEvent).Get("parameters.conditions.conditions.0.leftValue").String(); !strings.Contains(cond, "b.type === 'url_verification'") {
			t.Errorf("%+v: Slack Event? tests %s", o, cond)
		}
	}
	for _, o := range []generator.Options{{}, {Verify: "stripe"}, {Verify: "github"}} {
		if _, ok := generate(t, o).byID[generator.NodeSlackEvent]; ok {
			t.Errorf("%+v: a Slack URL check in a workflow that takes no Slack delivery", o)
		}
	}
	// Where keysvc verifies, its answer carries the challenge to echo.
	keysvc := generate(t, generator.Options{Hashing: generator.HashingKeysvc, Verify: "slack"})
	if body := keysvc.node(generator.NodeRespondDup).Get("parameters.responseBody").String(); !strings.Contains(body, "$json.body.status === 'url_verification'") {
		t.Errorf("keysvc mode's duplicate answer does not echo the challenge: %s", body)
	}
	node := generate(t, generator.Options{Hashing: generator.HashingNode, NodeStore: generator.NodeStoreKeysvc, Verify: "slack"})
	if body := node.node(generator.NodeRespondDup).Get("parameters.responseBody").String(); !strings.Contains(body, "$json.idempotency.challenge") {
		t.Errorf("the node on keysvc's duplicate answer does not echo the challenge: %s", body)
	}
}

// wantLeaseDecision checks the lease's decision after Reserve Key (lease):
// the holder runs the step, a done key is a duplicate, a key another
// attempt holds is answered 409, anything else 503; the step's output goes
// to Step Succeeded?.
func wantLeaseDecision(w wf) {
	w.t.Helper()
	w.wantEdge(generator.NodeAcquireLease, 0, generator.NodeLeaseAcquired)
	w.wantEdge(generator.NodeLeaseAcquired, 0, "Business Step (insert business_log)")
	w.wantEdge(generator.NodeLeaseAcquired, 1, "Already Done?")
	w.wantEdge("Already Done?", 0, "Respond 200 duplicate")
	w.wantEdge("Already Done?", 1, generator.NodeHeldElsewhere)
	w.wantEdge(generator.NodeHeldElsewhere, 0, "Respond 409 in progress")
	// Neither done nor busy: the reservation's input handed back by n8n
	// (its node threw before its query): nothing reserved, 503.
	w.wantEdge(generator.NodeHeldElsewhere, 1, generator.NodeRespond503DB)
	w.wantEdge("Business Step (insert business_log)", 0, generator.NodeStepSucceeded)
}
