package generator_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	keysvcinbox "github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/idemhook/idemhook/signature"
	"github.com/tidwall/gjson"
)

func inboxFiles(t *testing.T, o generator.Options) (map[string][]byte, []generator.WorkflowFile) {
	t.Helper()
	o.Pattern = generator.PatternInbox
	files, err := generator.Files(o)
	if err != nil {
		t.Fatal(err)
	}
	wfs, err := generator.WorkflowFiles(o)
	if err != nil {
		t.Fatal(err)
	}
	return files, wfs
}

// The inbox pattern writes its workflows, schema and credentials; each
// workflow is well formed, and the ones it calls are deployed before it.
func TestInboxFiles(t *testing.T) {
	files, wfs := inboxFiles(t, generator.Options{InboxOptions: generator.InboxOptions{OutboxURL: "https://fulfil.example/v1/operations"}})
	var names []string
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"cleanup-workflow.json", "credentials.example.json", "outbox-workflow.json", "receiver-workflow.json",
		"recoverer-workflow.json", "schema.sql", "worker-workflow.json"}
	if !slices.Equal(names, want) {
		t.Errorf("files %v, want %v", names, want)
	}
	deployed := map[string]bool{}
	for _, f := range wfs {
		w := parse(t, files[f.File])
		checkCommon(t, w, generator.DefaultCredentialName)
		if w.doc.Get("id").String() != f.ID {
			t.Errorf("%s has id %s, WorkflowFiles says %s", f.File, w.doc.Get("id").String(), f.ID)
		}
		// Every sub-workflow it calls is published before it.
		for _, n := range w.doc.Get(`nodes.#(type=="n8n-nodes-base.executeWorkflow")#`).Array() {
			callee := n.Get("parameters.workflowId.value").String()
			if !deployed[callee] {
				t.Errorf("%s calls %s, which is not deployed before it", f.File, callee)
			}
		}
		deployed[f.ID] = true
	}
	if wfs[len(wfs)-2].File != generator.FileReceiver || wfs[len(wfs)-2].WebhookPath != generator.DefaultInboxWebhookPath {
		t.Errorf("the receiver serves %+v", wfs[len(wfs)-2])
	}
}

// The receiver verifies, then saves, then answers, and only then hands the
// new row to the worker: the provider's 200 follows the commit, and nothing
// reaches the save without a valid signature.
func TestInboxReceiverOrder(t *testing.T) {
	files, _ := inboxFiles(t, generator.Options{})
	w := parse(t, files[generator.FileReceiver])
	checkEveryPathAnswers(t, w)
	// The receipt's Code node also prepares the signature check (one trip to
	// the task runner); the check's verdict comes before the save.
	w.wantEdge(generator.NodeWebhook, 0, generator.NodeBuildReceipt)
	w.wantEdge(generator.NodeBuildReceipt, 0, generator.NodeComputeSignature)
	w.wantEdge(generator.NodeComputeSignature, 0, generator.NodeSignatureValid)
	w.wantEdge(generator.NodeSignatureValid, 0, generator.NodeKeyBuilt)
	w.wantEdge(generator.NodeSignatureValid, 1, generator.NodeRespond401)
	w.wantEdge(generator.NodeKeyBuilt, 0, generator.NodeSaveReceipt)
	w.wantEdge(generator.NodeSaveReceipt, 0, generator.NodeRespondReceipt)
	w.wantEdge(generator.NodeSaveReceipt, 1, generator.NodeRespond503Save)
	w.wantEdge(generator.NodeRespondReceipt, 0, generator.NodeNewReceipt)
	w.wantEdge(generator.NodeNewReceipt, 0, generator.NodeWorkerNeeded)
	w.wantEdge(generator.NodeWorkerNeeded, 0, generator.NodeDrainItem)
	w.wantEdge(generator.NodeDrainItem, 0, generator.NodeHandOff)
	if got := w.node(generator.NodeHandOff).Get("parameters.options.waitForSubWorkflow"); got.Type != gjson.False {
		t.Errorf("the hand-off waits for the worker (%s); the receipt is already answered", got.Raw)
	}
	save := w.node(generator.NodeSaveReceipt).Get("parameters.query").String()
	if !strings.Contains(save, "ON CONFLICT (account, event_id) DO NOTHING") {
		t.Errorf("the receipt is not saved once per (account, event_id): %s", save)
	}
	// A worker is started only for a receipt that found none draining.
	if !strings.Contains(w.node(generator.NodeWorkerNeeded).Get("parameters.conditions.conditions.0.leftValue").String(), ".json.wake") ||
		!strings.Contains(save, "inbox_drainer") {
		t.Errorf("the receiver starts a worker for every receipt, not only when none drains")
	}
	script := w.node(generator.NodeBuildReceipt).Get("parameters.jsCode").String()
	for _, line := range []string{"const RECEIPT = true;", `const PRESET = "stripe";`, `"stripe-signature"`, `"content-type"`, `const PROVIDER = "stripe";`} {
		if !strings.Contains(script, line) {
			t.Errorf("the receipt script lacks %s", line)
		}
	}
	// --verify none: no signature nodes, the receipt straight after the webhook.
	files, _ = inboxFiles(t, generator.Options{Verify: "none", InboxOptions: generator.InboxOptions{Account: "acct_shop"}})
	w = parse(t, files[generator.FileReceiver])
	w.wantEdge(generator.NodeWebhook, 0, generator.NodeBuildReceipt)
	if !strings.Contains(w.node(generator.NodeBuildReceipt).Get("parameters.jsCode").String(), `const DEFAULT_ACCOUNT = "acct_shop";`) {
		t.Error("--account did not reach the receipt script")
	}
}

// With --hashing node the community node saves the receipt: one node after
// the Webhook, with the receiver's settings and both credentials, whose
// outputs are answered (Received 200, Rejected with its own status, Error
// 503); what follows the answer is the Code node receiver's.
func TestInboxReceiverWithCommunityNode(t *testing.T) {
	files, _ := inboxFiles(t, generator.Options{Hashing: generator.HashingNode, InboxOptions: generator.InboxOptions{DBSchema: "shop", Account: "acct_x"}})
	w := parse(t, files[generator.FileReceiver])
	checkEveryPathAnswers(t, w)
	w.wantEdge(generator.NodeWebhook, 0, generator.NodeSaveReceipt)
	w.wantEdge(generator.NodeSaveReceipt, 0, generator.NodeRespondReceipt)
	w.wantEdge(generator.NodeSaveReceipt, 1, generator.NodeRespondRejected)
	// Start Worker: answered first, then handed off; no If node.
	w.wantEdge(generator.NodeSaveReceipt, 2, generator.NodeRespondReceipt)
	w.wantEdge(generator.NodeSaveReceipt, 2, generator.NodeHandOff)
	w.wantAbove(generator.NodeRespondReceipt, generator.NodeHandOff)
	w.wantEdge(generator.NodeSaveReceipt, 3, generator.NodeRespond503Save)
	for _, typ := range []string{"n8n-nodes-base.code", "n8n-nodes-base.crypto", "n8n-nodes-base.postgres", "n8n-nodes-base.if", "n8n-nodes-base.set"} {
		if n := w.doc.Get(`nodes.#(type=="` + typ + `")#`).Array(); len(n) != 0 {
			t.Errorf("the receiver still runs a %s node", typ)
		}
	}
	save := w.node(generator.NodeSaveReceipt)
	for path, want := range map[string]string{
		"type":                                 "n8n-nodes-idemhook-postgres.idempotencyGuardPostgres",
		"parameters.operation":                 "receive",
		"parameters.signature":                 "stripe",
		"parameters.toleranceSeconds":          "300",
		"parameters.options.errorOutput":       "true",
		"parameters.receipt.schema":            "shop",
		"parameters.receipt.defaultAccount":    "acct_x",
		"parameters.receipt.typePath":          "type",
		"parameters.receipt.accountPath":       "account",
		"parameters.receipt.keptHeaders":       "Content-Type,Stripe-Signature",
		"parameters.receipt.drainLeaseSeconds": "120",
		"credentials.postgres.name":            generator.DefaultCredentialName,
		"credentials.crypto.name":              generator.DefaultVerifyCredential,
	} {
		if got := save.Get(path).String(); got != want {
			t.Errorf("Save Receipt's %s is %q, want %q", path, got, want)
		}
	}
	if got := w.node(generator.NodeRespondRejected).Get("parameters.options.responseCode").String(); got != "={{ $json.statusCode }}" {
		t.Errorf("the rejection is answered with %q, not the node's status", got)
	}
	// Without a signature check there is no Crypto credential to choose.
	files, _ = inboxFiles(t, generator.Options{Hashing: generator.HashingNode, Verify: "none"})
	w = parse(t, files[generator.FileReceiver])
	if c := w.node(generator.NodeSaveReceipt).Get("credentials.crypto"); c.Exists() {
		t.Errorf("a receiver that checks no signature names a Crypto credential: %s", c.Raw)
	}
	// keysvc saves the receipt itself: the node has nothing to do there.
	_, err := generator.Files(generator.Options{Pattern: generator.PatternInbox, Hashing: generator.HashingNode, InboxOptions: generator.InboxOptions{Receiver: generator.ReceiverKeysvc}})
	if err == nil || !strings.Contains(err.Error(), "hashing mode") {
		t.Errorf("--hashing node --receiver keysvc: %v, want a refusal of the hashing mode", err)
	}
}

// Without --outbox-url no outbox workflow is written: none calls a default
// address nobody chose, the worker wakes nothing, and Notes says so.
func TestInboxWithoutOutboxURL(t *testing.T) {
	o := generator.Options{InboxOptions: generator.InboxOptions{DBSchema: "pay"}}
	files, wfs := inboxFiles(t, o)
	if _, ok := files[generator.FileOutbox]; ok {
		t.Errorf("an outbox workflow was written without --outbox-url")
	}
	for _, f := range wfs {
		if f.File == generator.FileOutbox {
			t.Errorf("WorkflowFiles lists the outbox without --outbox-url")
		}
	}
	w := parse(t, files[generator.FileWorker])
	if w.doc.Get(`nodes.#(name=="` + generator.NodeWakeOutbox + `")`).Exists() {
		t.Error("the worker wakes an outbox that is not there")
	}
	for name, b := range files {
		if strings.Contains(string(b), "127.0.0.1:8088") {
			t.Errorf("%s still names the old default outbox address", name)
		}
	}
	o.Pattern = generator.PatternInbox
	notes, err := generator.Notes(o)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "pay.outbox_tasks") || !strings.Contains(notes[0], "--outbox-url") {
		t.Errorf("notes %q (%v): want one that names the tasks' table and --outbox-url", notes, err)
	}
	o.OutboxCredential = "Fulfil API"
	if err := o.Validate(); err == nil {
		t.Error("--outbox-credential without --outbox-url was accepted")
	}
}

// The worker claims a batch before it applies, runs each row in its own
// transaction, records the errors of the batch on their own rows, wakes the
// outbox once per batch, and drains again while Drain Next says so; the
// allowlist is a bound parameter.
func TestInboxWorkerAndOutbox(t *testing.T) {
	files, _ := inboxFiles(t, generator.Options{InboxOptions: generator.InboxOptions{Events: []string{"payment_intent.succeeded", "charge.refunded"}, DBSchema: "pay", OutboxURL: "https://fulfil.example/v1/operations"}})
	w := parse(t, files[generator.FileWorker])
	w.wantEdge(generator.NodeWorkerStart, 0, generator.NodeClaimEvents)
	w.wantEdge(generator.NodeClaimEvents, 0, generator.NodeApplyEvent)
	w.wantEdge(generator.NodeApplyEvent, 0, generator.NodeRecordBatch)
	w.wantEdge(generator.NodeRecordBatch, 0, generator.NodeWakeOutbox)
	w.wantEdge(generator.NodeApplyEvent, 0, generator.NodeDrainNext)
	w.wantEdge(generator.NodeDrainNext, 0, generator.NodeClaimEvents)
	// The recording and the wake run before Drain Next, which may wait.
	w.wantAbove(generator.NodeRecordBatch, generator.NodeDrainNext)
	// Each answers with a row only for yes: no If node after them.
	for n, where := range map[string]string{generator.NodeRecordBatch: "WHERE coalesce(", generator.NodeDrainNext: "AND again"} {
		if q := w.node(n).Get("parameters.query").String(); !strings.Contains(q, where) || w.node(n).Get("alwaysOutputData").Bool() {
			t.Errorf("%s answers whatever it decides: %s", n, q)
		}
	}
	apply := w.node(generator.NodeApplyEvent)
	if !strings.Contains(apply.Get("parameters.options.queryReplacement").String(), `"payment_intent.succeeded,charge.refunded"`) {
		t.Errorf("the allowlist is not a parameter of Apply Event: %s", apply.Get("parameters.options.queryReplacement").String())
	}
	if !strings.Contains(apply.Get("parameters.query").String(), "CALL pay.idemhook_apply_batch(") {
		t.Errorf("Apply Event does not call the procedure in --db-schema, which commits each row: %s", apply.Get("parameters.query").String())
	}
	if got := apply.Get("onError").String(); got != "continueRegularOutput" {
		t.Errorf("Apply Event: onError %q, want continueRegularOutput (the batch goes on as one)", got)
	}
	for _, n := range []string{generator.NodeClaimEvents, generator.NodeApplyEvent, generator.NodeRecordBatch, generator.NodeDrainNext} {
		if !w.node(n).Get("executeOnce").Bool() {
			t.Errorf("%s runs once per item: it is one statement for the batch", n)
		}
	}
	claim := w.node(generator.NodeClaimEvents).Get("parameters.query").String()
	if !strings.Contains(claim, "FOR UPDATE SKIP LOCKED") || !strings.Contains(claim, fmt.Sprintf("LIMIT %d", generator.DrainBatch)) {
		t.Errorf("Claim Events does not claim a batch of %d with SKIP LOCKED: %s", generator.DrainBatch, claim)
	}
	// An error that ended the call is recorded on every claimed row (the
	// recording leaves the rows decided before it).
	record := w.node(generator.NodeRecordBatch).Get("parameters.options.queryReplacement").String()
	if !strings.Contains(record, "$('"+generator.NodeApplyEvent+"').first().json.error === undefined ? [] : $('"+generator.NodeClaimEvents+"').all().filter(") {
		t.Errorf("Record Batch's parameters %s: want the call's error on every claimed row", record)
	}

	o := parse(t, files[generator.FileOutbox])
	// A pass: the lookups, then the sends, then the wait, each branch of
	// the same outputs, in that order from the top.
	for _, from := range []string{generator.NodeSweepTimer, generator.NodeSweepOnCall, generator.NodeWaitDue} {
		for _, to := range []string{generator.NodeClaimLookups, generator.NodeClaimSends, generator.NodeWaitDue} {
			o.wantEdge(from, 0, to)
		}
	}
	o.wantAbove(generator.NodeClaimLookups, generator.NodeClaimSends)
	o.wantAbove(generator.NodeClaimSends, generator.NodeWaitDue)
	o.wantEdge(generator.NodeClaimLookups, 0, generator.NodeLookup)
	o.wantEdge(generator.NodeLookup, 0, generator.NodeRecordLookup)
	o.wantEdge(generator.NodeClaimSends, 0, generator.NodeCallAPI)
	o.wantEdge(generator.NodeCallAPI, 0, generator.NodeRecordSend)
	for _, n := range []string{generator.NodeClaimLookups, generator.NodeClaimSends, generator.NodeWaitDue} {
		if o.node(n).Get("alwaysOutputData").Bool() {
			t.Errorf("%s answers an empty item when it finds nothing: its branch would go on", n)
		}
	}
	if q := o.node(generator.NodeWaitDue).Get("parameters.query").String(); !strings.Contains(q, "WHERE due") {
		t.Errorf("Wait for Due Task answers when nothing is due: %s", q)
	}
	// A woken dispatcher paces its passes, unless a claim was full: with
	// a pace and a full claim the outbox would fall behind its workers.
	if p := o.node(generator.NodeWaitDue).Get("parameters.options.queryReplacement").String(); !strings.Contains(p, "? 1000 : 0 ]") ||
		!strings.Contains(p, "$('"+generator.NodeClaimSends+"').all().length : 0) >= 20") || !strings.Contains(p, "$('"+generator.NodeClaimLookups+"').all().length : 0) >= 20") {
		t.Errorf("Wait for Due Task's parameters %s: want a pace of 1 s unless a claim of 20 was full", p)
	}
	for _, n := range []string{generator.NodeLookup, generator.NodeCallAPI} {
		// No answer at all (timeout, reset) reaches the record node on the
		// one output, so that the phase after it runs once.
		if got := o.node(n).Get("onError").String(); got != "continueRegularOutput" {
			t.Errorf("%s: onError %q, want continueRegularOutput", n, got)
		}
		if len(o.doc.Get("connections").Get(gjson.Escape(n)).Get("main").Array()) != 1 {
			t.Errorf("%s has more than one output wired", n)
		}
		if o.node(n).Get("parameters.options.response.response.responseFormat").String() != "text" {
			t.Errorf("%s parses the answer: a non-JSON 2xx would look like a failed call", n)
		}
	}
	// Each node that more than one branch leads to runs once per pass: its
	// inputs come from branches that exclude each other.
	for _, n := range []string{generator.NodeClaimLookups, generator.NodeClaimSends, generator.NodeWaitDue} {
		if !o.node(n).Get("executeOnce").Bool() {
			t.Errorf("%s runs once per item: the loop would multiply", n)
		}
	}
	// The claim is sized for one call, not for the batch: a dead
	// dispatcher's tasks are reconciled within a minute of its claim.
	claim = o.node(generator.NodeClaimSends).Get("parameters.query").String()
	if !strings.Contains(claim, "interval '30 seconds'") {
		t.Errorf("the default claim is not the 10 s call plus 20 s: %s", claim)
	}
	call := o.node(generator.NodeCallAPI).Get("parameters")
	if call.Get("headerParameters.parameters.0.name").String() != "Idempotency-Key" ||
		!strings.Contains(call.Get("headerParameters.parameters.0.value").String(), "operation_key") {
		t.Errorf("Call API does not send the operation key as Idempotency-Key: %s", call.Get("headerParameters").Raw)
	}
	for _, n := range []string{generator.NodeClaimLookups, generator.NodeClaimSends} {
		if !strings.Contains(o.node(n).Get("parameters.query").String(), "FOR UPDATE SKIP LOCKED") {
			t.Errorf("%s does not skip locked tasks", n)
		}
	}
}

func TestInboxSchema(t *testing.T) {
	files, _ := inboxFiles(t, generator.Options{InboxOptions: generator.InboxOptions{DBSchema: "pay"}})
	sql := string(files["schema.sql"])
	for _, want := range []string{"CREATE SCHEMA IF NOT EXISTS pay;", "CREATE TABLE IF NOT EXISTS pay.inbox_events", "UNIQUE (account, event_id)",
		"CREATE TABLE IF NOT EXISTS pay.effects", "effect_key text PRIMARY KEY", "CREATE TABLE IF NOT EXISTS pay.orders",
		"operation_key text NOT NULL UNIQUE", "CREATE OR REPLACE FUNCTION pay.idemhook_apply_event("} {
		if !strings.Contains(sql, want) {
			t.Errorf("schema.sql lacks %q", want)
		}
	}
	// It only creates what is missing: a column added since the first
	// release, and an idemhook function whose signature changed, replaced.
	for _, line := range strings.Split(sql, "\n") {
		switch {
		case strings.HasPrefix(line, "ALTER TABLE") && !strings.Contains(line, " ADD COLUMN IF NOT EXISTS "),
			strings.HasPrefix(line, "DROP ") && !strings.HasPrefix(line, "DROP FUNCTION IF EXISTS pay.idemhook_"):
			t.Errorf("schema.sql changes what it does not own: %s", line)
		}
	}
}

// Standard Webhooks, which the n8n receiver cannot verify, is verified by
// keysvc as the inbox's receiver: the example endpoint names the provider,
// and keysvc loads it with a whpk_ public key.
func TestInboxKeysvcReceiverVerifiesStandardWebhooks(t *testing.T) {
	if err := (generator.Options{Pattern: generator.PatternInbox, Verify: "standardwebhooks", InboxOptions: generator.InboxOptions{Receiver: generator.ReceiverN8N}}).Validate(); err == nil {
		t.Error("the n8n receiver took standardwebhooks, which its Crypto node cannot verify")
	}
	files, _ := inboxFiles(t, generator.Options{Verify: "standardwebhooks", InboxOptions: generator.InboxOptions{Receiver: generator.ReceiverKeysvc}})
	file := filepath.Join(t.TempDir(), generator.FileEndpoints)
	if err := os.WriteFile(file, files[generator.FileEndpoints], 0o600); err != nil {
		t.Fatal(err)
	}
	key := "whpk_" + base64.StdEncoding.EncodeToString(make([]byte, 32))
	eps, err := keysvcinbox.LoadEndpoints(file, map[signature.Provider][]string{signature.ProviderStandardWebhooks: {key}})
	if err != nil || len(eps) != 1 || eps[0].Provider != signature.ProviderStandardWebhooks {
		t.Errorf("keysvc loaded %+v, %v from\n%s", eps, err, files[generator.FileEndpoints])
	}
}

// keysvc accepts the endpoints example the keysvc receiver writes, whatever
// the webhook path: its endpoint name follows keysvc's rule.
func TestInboxKeysvcEndpointsExampleLoads(t *testing.T) {
	t.Setenv("KEYSVC_SECRET_STRIPE", "whsec_test")
	for _, path := range []string{"", "Hooks/Stripe_Live", "a--b/_c_", "x/" + strings.Repeat("long-", 20), "_-_"} {
		files, _ := inboxFiles(t, generator.Options{WebhookPath: path, InboxOptions: generator.InboxOptions{Receiver: generator.ReceiverKeysvc}})
		file := filepath.Join(t.TempDir(), generator.FileEndpoints)
		if err := os.WriteFile(file, files[generator.FileEndpoints], 0o600); err != nil {
			t.Fatal(err)
		}
		eps, err := keysvcinbox.LoadEndpoints(file, map[signature.Provider][]string{signature.ProviderStripe: {"whsec_test"}})
		if err != nil {
			t.Errorf("path %q: keysvc refuses the example: %v\n%s", path, err, files[generator.FileEndpoints])
			continue
		}
		t.Logf("path %q → endpoint %q", path, eps[0].Name)
	}
}

// Without --rules the inbox pattern compiles the stripe-orders preset,
// whose types are DefaultEvents; with --rules stripe-subscriptions the
// allowlist, the receipt's endpoint, the worker and schema.sql all follow
// the rules, for the n8n receiver and for keysvc's.
func TestInboxRules(t *testing.T) {
	orders, err := rules.Preset(rules.DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(orders.Types(), generator.DefaultEvents) {
		t.Errorf("DefaultEvents %v, the default preset's types %v", generator.DefaultEvents, orders.Types())
	}
	subs, err := rules.Preset("stripe-subscriptions")
	if err != nil {
		t.Fatal(err)
	}
	for _, receiver := range []generator.Receiver{generator.ReceiverN8N, generator.ReceiverKeysvc} {
		files, _ := inboxFiles(t, generator.Options{InboxOptions: generator.InboxOptions{Rules: subs, Receiver: receiver}})
		w := parse(t, files[generator.FileWorker])
		if got := w.node(generator.NodeApplyEvent).Get("parameters.options.queryReplacement").String(); !strings.Contains(got, strings.Join(subs.Types(), ",")) {
			t.Errorf("%s: the worker's allowlist %s, want the rules' types", receiver, got)
		}
		sql := string(files["schema.sql"])
		for _, want := range []string{"CREATE TABLE IF NOT EXISTS subscriptions", "-- rule open_account", "'open_account:' || v_id"} {
			if !strings.Contains(sql, want) {
				t.Errorf("%s: schema.sql lacks %q", receiver, want)
			}
		}
		if strings.Contains(sql, "CREATE TABLE IF NOT EXISTS orders") {
			t.Errorf("%s: schema.sql creates the orders table of another preset", receiver)
		}
		if receiver == generator.ReceiverKeysvc && !strings.Contains(string(files[generator.FileEndpoints]), `"customer.subscription.created"`) {
			t.Errorf("keysvc's endpoint does not allow the rules' types:\n%s", files[generator.FileEndpoints])
		}
	}
	// An allowlist within the rules is kept; beyond them, refused.
	if _, err := generator.Files(generator.Options{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{Rules: subs, Events: []string{"invoice.paid"}}}); err != nil {
		t.Errorf("a narrower allowlist: %v", err)
	}
	err = generator.Options{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{Rules: subs, Events: []string{"invoice.paid", "charge.refunded"}}}.Validate()
	var oe *generator.OptionError
	if !errors.As(err, &oe) || oe.Option != "events" || !strings.Contains(oe.Reason, "subset") {
		t.Errorf("an allowlist wider than the rules: %v", err)
	}
	// The flag reads a preset or a file; an unknown one is refused by name.
	if _, err := generator.OptionsFromFlags(map[string]string{"pattern": "inbox", "rules": "stripe-paypal"}); err == nil || !strings.Contains(err.Error(), "stripe-orders, stripe-subscriptions") {
		t.Errorf("--rules stripe-paypal: %v", err)
	}
}

// The inbox receiver answers Slack's URL check its challenge after the
// signature check, and saves nothing.
func TestInboxReceiverAnswersSlackURLCheck(t *testing.T) {
	files, err := generator.Files(generator.Options{Pattern: generator.PatternInbox, Verify: "slack"})
	if err != nil {
		t.Fatal(err)
	}
	w := parse(t, files[generator.FileReceiver])
	w.wantEdge(generator.NodeSignatureValid, 0, generator.NodeSlackEvent)
	w.wantEdge(generator.NodeSlackEvent, 0, generator.NodeKeyBuilt)
	w.wantEdge(generator.NodeSlackEvent, 1, generator.NodeRespondChallenge)
	if got := w.targets(generator.NodeRespondChallenge, 0); len(got) != 0 {
		t.Errorf("nodes run after the challenge: %v", got)
	}
}
