package generator

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/duration"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/signature/provider"
	"github.com/idemhook/idemhook/templates"
)

// Node names of the inbox pattern.
const (
	NodeBuildReceipt   = "Build Receipt Key"
	NodeSaveReceipt    = "Save Receipt"
	NodeRespondReceipt = "Respond 200 receipt"
	// NodeRespondRejected answers what the community node's receipt
	// rejects: 401 for the signature, 400 for an empty body.
	NodeRespondRejected = "Respond rejected"
	NodeRespond503Save  = "Respond 503 not saved"
	NodeNewReceipt      = "New Receipt?"
	NodeWorkerNeeded    = "Worker Needed?"
	NodeDrainItem       = "Drain"
	NodeHandOff         = "Hand Off to Worker"

	NodeWorkerStart  = "Offered Events"
	NodeClaimEvents  = "Claim Events"
	NodeApplyEvent   = "Apply Event"
	NodeRecordBatch  = "Record Batch"
	NodeWakeOutbox   = "Wake Outbox"
	NodeDrainNext    = "Drain Next"
	NodeSweepTimer   = "Every Sweep"
	NodeSweepOnCall  = "On Demand"
	NodeFindDue      = "Find Due Events"
	NodeAnyDue       = "Any Due?"
	NodeReoffer      = "Re-offer to Worker"
	NodeCountStuck   = "Count Stuck Work"
	NodeClaimLookups = "Claim Lookups"
	NodeLookup       = "Look Up Operation"
	NodeRecordLookup = "Record Lookup"
	NodeClaimSends   = "Claim Sends"
	NodeCallAPI      = "Call API"
	NodeRecordSend   = "Record Send"
	NodeWaitDue      = "Wait for Due Task"
	NodeDeleteDone   = "Delete Finished Work"
)

// Files of the inbox pattern, in the order they are deployed: a workflow is
// published before the workflows that call it.
const (
	FileOutbox    = "outbox-workflow.json"
	FileWorker    = "worker-workflow.json"
	FileRecoverer = "recoverer-workflow.json"
	FileReceiver  = "receiver-workflow.json"
	FileTarget    = "target-workflow.json"
	// FileEndpoints configures keysvc's inbox for the target workflow.
	FileEndpoints = "keysvc-endpoints.example.json"
	FileCleanup   = "cleanup-workflow.json"
	FileWorkflow  = "workflow.json"
)

// WorkflowFile is one generated workflow: its file name, its id and, for a
// workflow that serves a webhook, the path.
type WorkflowFile struct {
	File        string
	ID          string
	WebhookPath string
}

// WorkflowFiles lists the workflows Files writes for o, in deploy order.
// Ids depend only on the webhook path and the file, so re-importing after
// any other change updates the same workflows.
func WorkflowFiles(o Options) ([]WorkflowFile, error) {
	r, err := o.resolve()
	if err != nil {
		return nil, err
	}
	id := func(kind string) string { return workflowID(kind + "/" + r.WebhookPath) }
	if r.Pattern == PatternInbox {
		entry := WorkflowFile{File: FileReceiver, ID: id("receiver"), WebhookPath: r.WebhookPath}
		if r.Receiver == ReceiverKeysvc {
			entry = WorkflowFile{File: FileTarget, ID: id("target"), WebhookPath: r.WebhookPath}
		}
		var files []WorkflowFile
		if r.OutboxURL != "" {
			files = append(files, WorkflowFile{File: FileOutbox, ID: id("outbox")})
		}
		return append(files,
			WorkflowFile{File: FileWorker, ID: id("worker")},
			WorkflowFile{File: FileRecoverer, ID: id("recoverer")},
			entry,
			WorkflowFile{File: FileCleanup, ID: id("cleanup")},
		), nil
	}
	files := []WorkflowFile{{File: FileWorkflow, ID: id("main"), WebhookPath: r.WebhookPath}}
	if !r.KeysInKeysvc() {
		files = append(files, WorkflowFile{File: FileCleanup, ID: id("cleanup")})
	}
	return files, nil
}

// inboxWorkflows renders the inbox pattern's workflows by file name.
func inboxWorkflows(r resolved) (map[string][]byte, error) {
	ids := map[string]string{}
	files, _ := WorkflowFiles(r.Options)
	for _, f := range files {
		ids[f.File] = f.ID
	}
	builders := []struct {
		file, name string
		build      func(*graph, resolved, map[string]string) error
	}{
		{FileReceiver, r.WorkflowName + " – receiver", receiverGraph},
		{FileTarget, r.WorkflowName + " – target", targetGraph},
		{FileWorker, r.WorkflowName + " – worker", workerGraph},
		{FileRecoverer, r.WorkflowName + " – recoverer", recovererGraph},
		{FileOutbox, r.WorkflowName + " – outbox", outboxGraph},
		{FileCleanup, r.WorkflowName + " – cleanup", inboxCleanupGraph},
	}
	out := map[string][]byte{}
	for _, b := range builders {
		if ids[b.file] == "" {
			continue // the receiver or the target, whichever this receiver does not use; the outbox without a URL
		}
		g := newGraph(ids[b.file])
		if err := b.build(g, r, ids); err != nil {
			return nil, err
		}
		x := r.Executions
		if b.file == FileReceiver && x.SaveSuccess == "" {
			// The body is in inbox_events already: n8n need not keep a
			// second copy of every delivery it acknowledged.
			x.SaveSuccess = SaveNone
		}
		raw, err := g.render(ids[b.file], b.name, x)
		if err != nil {
			return nil, err
		}
		out[b.file] = raw
	}
	return out, nil
}

// jsString is s as a JavaScript string literal, for n8n expressions.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// receiverGraph: verify the signature, build the receipt key, save the
// receipt, answer 200 only once the row is committed, then hand a new row to
// the worker. A duplicate is answered with the stored state and changes
// nothing.
func receiverGraph(g *graph, r resolved, ids map[string]string) error {
	g.add(webhookNode(g, r, true))
	if r.Hashing == HashingNode {
		receiverNodeGraph(g, r, ids)
		return nil
	}
	receipt := receiptOf(r)
	// With a signature check, the receipt is built in the check's own Code
	// node (one trip to the task runner per delivery, not two) and saved
	// only once the check has passed.
	var script string
	var err error
	if r.Verify == "" {
		script, err = templates.ReceiptScript(receipt)
	} else {
		script, err = templates.SignedReceiptScript(receipt, r.Verify, int(r.Tolerance.Seconds()))
	}
	if err != nil {
		return err
	}
	g.add(node{Name: NodeBuildReceipt, Type: typeCode, Position: g.at(1, 0), Parameters: map[string]any{
		"mode": "runOnceForAllItems", "language": "javaScript", "jsCode": script,
	}})
	g.connect(NodeWebhook, 0, NodeBuildReceipt)
	// From here on, columns count from the last node placed: the receipt's,
	// or the check's If that follows it.
	g.col = 1
	keyed := NodeBuildReceipt
	if r.Verify != "" {
		keyed = addSignatureComparison(g, r, NodeBuildReceipt, respondNode)
	}
	if r.checksSlackURL() {
		// Slack's URL check is answered, never saved as an event.
		keyed = addSlackURLCheck(g, respondNode, keyed)
	}
	g.add(ifNode(g, NodeKeyBuilt, g.at(1, 0), "={{ $json.key }}", opStringNotEmpty, ""))
	g.connect(keyed, 0, NodeKeyBuilt)
	g.add(respondNode(NodeRespond400, g.at(2, 2), 400,
		`{"status":"rejected","error":"empty body: there is nothing to derive an idempotency key from"}`))
	g.connect(NodeKeyBuilt, 1, NodeRespond400)

	save := postgresNode(NodeSaveReceipt, g.at(2, 0), r.inbox.ReceiveAndWake(r.ClaimLease),
		"={{ [ $json.account, $json.key, $json.eventType, $json.body, JSON.stringify($json.headers) ] }}", r.CredentialName)
	save.OnError = "continueErrorOutput"
	save.AlwaysOutputData = true
	g.add(save)
	g.connect(NodeKeyBuilt, 0, NodeSaveReceipt)
	// Nothing was saved: the provider must retry.
	g.add(respondNode(NodeRespond503Save, g.at(3, 1), 503,
		`{"status":"unavailable","error":"the event could not be saved; retry later"}`, [2]string{"Retry-After", "5"}))
	g.connect(NodeSaveReceipt, 1, NodeRespond503Save)

	// A concurrent duplicate may return no row (see pgsql.Inbox.Receive):
	// the node then outputs an empty item, answered as a duplicate.
	g.add(respondNode(NodeRespondReceipt, g.at(3, 0), 200,
		"={{ JSON.stringify({ status: $json.new === true ? 'received' : 'duplicate', state: $json.state ?? null, inbox_id: $json.id ?? null, key: $('"+NodeBuildReceipt+"').item.json.key }) }}"))
	g.connect(NodeSaveReceipt, 0, NodeRespondReceipt)
	addWorkerStart(g, r, ids, 4, "$('"+NodeSaveReceipt+"').item")
	g.addNote(NodeBuildReceipt, inboxNote(r, "Receiver: the receipt", receiverNote)...)
	return nil
}

// addWorkerStart follows the receipt's 200 from column col: only a new
// receipt that found no worker draining starts one, read from saved (the
// Save Receipt node's item), as pgsql.Inbox.ReceiveAndWake decided; a worker
// that drains already takes the new row. The provider has its answer: the
// worker runs in an execution of its own.
func addWorkerStart(g *graph, r resolved, ids map[string]string, col int, saved string) {
	g.add(ifNode(g, NodeNewReceipt, g.at(col, 0), "={{ "+saved+".json.new }}", opBooleanTrue, ""))
	g.connect(NodeRespondReceipt, 0, NodeNewReceipt)
	g.add(ifNode(g, NodeWorkerNeeded, g.at(col+1, 0), "={{ "+saved+".json.wake }}", opBooleanTrue, ""))
	g.connect(NodeNewReceipt, 0, NodeWorkerNeeded)
	g.add(node{Name: NodeDrainItem, Type: typeSet, Position: g.at(col+2, 0), Parameters: drainItem(g.seed + "/handoff")})
	g.connect(NodeWorkerNeeded, 0, NodeDrainItem)
	g.add(executeWorkflowNode(NodeHandOff, g.at(col+3, 0), ids[FileWorker], "once", false))
	g.connect(NodeDrainItem, 0, NodeHandOff)
	g.addNote(NodeWebhook, setupNote(g, r, "inbox.md")...)
}

const receiverNote = "Verifies the signature on the raw body, saves the event in inbox_events (once per account and event id), and answers 200 only after the commit; " +
	"the database down: 503, and the provider retries. A worker that drains takes the new row; when none does, this starts one, in an execution of its own."

// receiptOf is what r's receipt reads from a delivery: the key's preset
// and scope, and where the rules' provider keeps the type and the account.
func receiptOf(r resolved) templates.Receipt {
	p := r.Rules.Provider
	return templates.Receipt{
		Preset: r.Preset, Scope: r.Scope, DefaultAccount: r.Account, Headers: receiptHeaders(r),
		TypeHeader: p.Type.Header, TypePath: p.Type.Body, AccountHeader: p.Account.Header, AccountPath: p.Account.Body,
	}
}

// receiverNodeGraph is receiverGraph with the community node (HashingNode):
// one node, Save Receipt, checks the signature, builds the receipt key and
// saves it with the same statement, in n8n's own process (no task runner,
// no Crypto node); its outputs are Received, Rejected (401 for the
// signature, 400 for an empty body), Start Worker (received, and no worker
// drains) and Error (nothing saved: 503). A delivery runs as many nodes as
// the workflow without inbox (Webhook, one statement, Respond): the
// Code node receiver's two If nodes after the answer are outputs here.
func receiverNodeGraph(g *graph, r resolved, ids map[string]string) {
	receipt := receiptOf(r)
	settings := map[string]any{
		"defaultAccount": receipt.DefaultAccount, "keptHeaders": strings.Join(receipt.Headers, ","),
		"typeHeader": receipt.TypeHeader, "typePath": strings.Join(receipt.TypePath, "."),
		"accountHeader": receipt.AccountHeader, "accountPath": strings.Join(receipt.AccountPath, "."),
		"drainLeaseSeconds": int64(r.ClaimLease.Seconds()),
		"workerOutput":      true,
	}
	if r.DBSchema != "" {
		settings["schema"] = r.DBSchema
	}
	params := map[string]any{"receipt": settings, "signature": r.Verify}
	if r.Verify != "" {
		params["toleranceSeconds"] = int64(r.Tolerance.Seconds())
	}
	if r.Preset != "" && r.Preset != "stripe" {
		params["preset"] = r.Preset
	}
	if r.Scope != "" {
		params["scope"] = r.Scope
	}
	save := guardNode(r, NodeSaveReceipt, g.at(1, 0), "receive", params)
	save.Parameters["options"] = map[string]any{"errorOutput": true}
	if r.Verify != "" {
		save.Credentials["crypto"] = credentialRef{Name: r.VerifyCredential}
	}
	g.add(save)
	g.connect(NodeWebhook, 0, NodeSaveReceipt)
	answer := "JSON.stringify({ status: $json.new === true ? 'received' : 'duplicate', state: $json.state ?? null, inbox_id: $json.id ?? null, key: $json.key })"
	if r.checksSlackURL() {
		// The node answers Slack's URL check by Received, saving nothing.
		answer = "$json.status === 'url_verification' ? JSON.stringify({ challenge: $json.challenge }) : " + answer
	}
	g.add(respondNode(NodeRespondReceipt, g.at(2, 0), 200, "={{ "+answer+" }}"))
	g.connect(NodeSaveReceipt, 0, NodeRespondReceipt)
	g.add(respondNode(NodeRespondRejected, g.at(2, 1), "={{ $json.statusCode }}",
		"={{ JSON.stringify({ status: 'rejected', code: $json.code, error: $json.error }) }}"))
	g.connect(NodeSaveReceipt, 1, NodeRespondRejected)
	// Start Worker: a new receipt that found no worker draining is answered,
	// then hands off (n8n's execution order, v1, runs the upper branch
	// first). Its item has drain, for the worker.
	g.connect(NodeSaveReceipt, 2, NodeRespondReceipt)
	g.add(executeWorkflowNode(NodeHandOff, g.at(3, 1), ids[FileWorker], "once", false))
	g.connect(NodeSaveReceipt, 2, NodeHandOff)
	g.add(respondNode(NodeRespond503Save, g.at(2, 2), 503,
		`{"status":"unavailable","error":"the event could not be saved; retry later"}`, [2]string{"Retry-After", "5"}))
	g.connect(NodeSaveReceipt, 3, NodeRespond503Save)
	g.addNote(NodeWebhook, setupNote(g, r, "inbox.md")...)
	g.addNote(NodeSaveReceipt, inboxNote(r, "Receiver: the receipt (Idempotency Guard, Save Inbox Receipt)", receiverNote)...)
}

// Node names of the target workflow (--receiver keysvc).
const (
	NodeInboxEntry    = "Forwarded Events"
	NodeReportBatch   = "Report Batch"
	NodeRespondTarget = "Respond 200 accepted"
)

// targetGraph is what keysvc's inbox forwards saved events to: one event
// (its row named in X-Idemhook-Inbox-Id) or a batch ({"events": [{"inbox_id":
// …}, …]}, keysvc's endpoint "batch"). It decides the rows in this very
// execution, as the worker does, and answers each: {"results": [{"inbox_id",
// "status", "state"}]}, status 200 for a row taken further (decided, or
// claimed by another worker, or finished before), 503 for one still
// received (another transaction held it), which keysvc sends again alone;
// a forward of one event is answered 503 then. A failed decision stays on its
// row for the recoverer. Posting an id here can only process an event
// keysvc already verified and saved.
func targetGraph(g *graph, r resolved, ids map[string]string) error {
	g.add(webhookNode(g, r, false))
	g.add(node{Name: NodeInboxEntry, Type: typeSet, Position: g.at(1, 0), Parameters: map[string]any{
		"mode": "manual",
		"assignments": map[string]any{"assignments": []any{
			map[string]any{"id": UUIDFrom(g.seed + "/set/ids"), "name": "ids", "type": "string",
				"value": "={{ Array.isArray($json.body?.events) ? $json.body.events.map(e => String(e?.inbox_id ?? '')).join(',') : String($json.headers['x-idemhook-inbox-id'] ?? '') }}"},
			map[string]any{"id": UUIDFrom(g.seed + "/set/drain"), "name": "drain", "type": "boolean", "value": false},
			map[string]any{"id": UUIDFrom(g.seed + "/set/batch"), "name": "batch", "type": "boolean", "value": "={{ Array.isArray($json.body?.events) }}"},
		}},
		"options": map[string]any{},
	}})
	g.connect(NodeWebhook, 0, NodeInboxEntry)
	g.col = 2
	last := addDecision(g, r, ids, NodeInboxEntry)
	report := postgresNode(NodeReportBatch, g.at(g.col, 0), r.inbox.Offered(), "={{ [ $('"+NodeInboxEntry+"').first().json.ids ] }}", r.CredentialName)
	report.ExecuteOnce, report.AlwaysOutputData = true, true
	g.add(report)
	g.connect(last, 0, NodeReportBatch)
	// A forward of one event is answered by its status alone (keysvc reads
	// no body then): 503 when its row is still received, so it comes again.
	g.add(respondNode(NodeRespondTarget, g.at(g.col+1, 0),
		"={{ $('"+NodeInboxEntry+"').first().json.batch || $('"+NodeReportBatch+"').all().every(i => i.json.state !== 'received') ? 200 : 503 }}",
		"={{ JSON.stringify({ status: 'accepted', results: $('"+NodeReportBatch+"').all().filter(i => i.json.inbox_id !== undefined).map(i => ({ inbox_id: String(i.json.inbox_id), state: i.json.state, status: i.json.state === 'received' ? 503 : 200 })) }) }}"))
	g.connect(NodeReportBatch, 0, NodeRespondTarget)
	g.addNote(NodeWebhook, setupNote(g, r, "inbox.md")...)
	g.addNote(NodeInboxEntry, inboxNote(r, "Target: keysvc's inbox forwards here",
		"keysvc verified and saved the events; this decides the rows it names (X-Idemhook-Inbox-Id, or a batch's inbox_id), each in a transaction of its own, "+
			"and answers each. A forward sent twice runs the decision once: the row is claimed once, and the effect key is unique.")...)
	return nil
}

// endpointsExample is keysvc's --endpoints file for the target workflow.
func endpointsExample(r resolved) ([]byte, error) {
	endpoint := map[string]any{
		"name":         endpointName(r.WebhookPath),
		"account":      r.Account,
		"target":       "http://n8n:5678/webhook/" + r.WebhookPath,
		"events":       r.Events,
		"max_attempts": 25,
		"concurrency":  4,
		// The target workflow decides a batch in one execution.
		"batch": DrainBatch,
	}
	if r.Verify != "" {
		endpoint["provider"] = r.Verify
	}
	return marshal(map[string]any{"endpoints": []any{endpoint}})
}

// endpointName is the keysvc endpoint named after a webhook path: its
// letters lower-cased, each run of other characters one '-' ("Hooks/Stripe"
// is hooks-stripe), cut to keysvc's 58 characters. The generator's tests
// load the result with keysvc/inbox.LoadEndpoints, whose rule this meets.
func endpointName(webhookPath string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(webhookPath) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	name := strings.TrimRight(b.String()[:min(b.Len(), 58)], "-")
	if name == "" {
		return "inbox"
	}
	return name
}

// receiptHeaders lists the request headers kept with a receipt: the content
// type and whatever the provider's signature, id, type and account are read
// from, so the event can be verified again, decided, or forwarded later.
func receiptHeaders(r resolved) []string {
	headers := []string{"Content-Type"}
	if r.Verify != "" {
		headers = append(headers, provider.Headers(r.Verify)...)
	}
	headers = append(headers, eventkey.Preset(r.Preset).Headers()...)
	for _, h := range r.Rules.Provider.Headers() {
		if !slices.ContainsFunc(headers, func(k string) bool { return strings.EqualFold(k, h) }) {
			headers = append(headers, h)
		}
	}
	return headers
}

// The drain: how many received rows a worker claims at once, how long it
// waits for more once it has none, how many batches one execution decides
// at most (n8n keeps every run's data in memory until the execution ends;
// the next receipt starts the next worker), and how often it claims at
// most unless its batch was full: a run costs n8n about a dozen node
// executions whatever its size, and they share n8n's one thread with the
// receiver, so claiming each receipt as it came made the provider wait for
// the worker (one sender, community node receiver: receipt p50 1.48 × the
// workflow without inbox; 1.13 × in the bench run with this pace and the
// outbox's one statement, docs/speed.md). An effect waits for the pace at
// most.
const (
	DrainBatch  = 20
	drainLinger = 2 * time.Second
	drainRuns   = 200
	drainPace   = 200 * time.Millisecond
)

// outboxPace is how often a dispatcher a worker woke passes at most,
// unless its last claim was full: each pass costs n8n five node executions
// whatever its size, on the thread that answers the provider, and a
// draining worker writes tasks every drainPace. A call waits for the pace
// at most.
const outboxPace = time.Second

// drainItem is the Set node parameters of the item that starts a draining
// worker: no offered rows, drain.
func drainItem(seed string) map[string]any {
	return map[string]any{
		"mode": "manual",
		"assignments": map[string]any{"assignments": []any{
			map[string]any{"id": UUIDFrom(seed + "/ids"), "name": "ids", "type": "string", "value": ""},
			map[string]any{"id": UUIDFrom(seed + "/drain"), "name": "drain", "type": "boolean", "value": true},
		}},
		"options": map[string]any{},
	}
}

// workerGraph decides inbox rows in batches: the rows it is offered
// (ids, by the recoverer) or, draining (started by the receiver), every
// received row, DrainBatch at a time, until none comes within drainLinger.
// Each row is decided in its own transaction; the outbox is woken once per
// batch. Drain Next answers with a row only to go on, so the loop needs no
// If node: the execution ends when it answers none.
func workerGraph(g *graph, r resolved, ids map[string]string) error {
	g.add(node{Name: NodeWorkerStart, Type: typeExecTrig, Position: g.at(0, 0), Parameters: map[string]any{"inputSource": "passthrough"}})
	g.col = 1
	last := addDecision(g, r, ids, NodeWorkerStart)
	next := postgresNode(NodeDrainNext, g.at(g.col, 0), r.inbox.DrainNextCall(drainRuns, drainLinger, r.ClaimLease, drainPace),
		"={{ [ $('"+NodeClaimEvents+"').all().filter(i => i.json.id !== undefined).length >= "+fmt.Sprint(DrainBatch)+", $runIndex, "+
			"$('"+NodeWorkerStart+"').first().json.drain === true ] }}", r.CredentialName)
	next.ExecuteOnce = true
	g.add(next)
	g.connect(last, 0, NodeDrainNext)
	g.connect(NodeDrainNext, 0, NodeClaimEvents)
	g.addNote(NodeWorkerStart, inboxNote(r, "Worker: the effect",
		"Claims a batch (the rows the recoverer offers, or, started by the receiver, every received row, "+fmt.Sprint(DrainBatch)+" at a time, until none comes for "+
			duration.Format(drainLinger)+") and decides each row's effect in a transaction of its own (idemhook_apply_batch commits after each row): the effect key, the business change and "+
			"the outbox tasks together, or none. A failed decision stays on its row, with the database's message, and is retried.")...)
	return nil
}

// addDecision adds, after from (whose first item has ids, the offered rows,
// and drain), the claim of a batch, the decision of its rows, each in a
// transaction of its own, the errors the decision could not record, and the
// outbox woken once for the batch. The decision is one CALL of
// idemhook_apply_batch, which commits after each row: a statement per row
// cost n8n an expression and a round trip per event on the thread that
// answers the provider. It returns the node to go on from, Apply Event,
// whose next node must sit below row 0: the recording and the wake are a
// branch of their own above it, which n8n's execution order (v1: branches
// top to bottom, each to its end) runs first. Record Batch answers with a
// row only when the outbox is to be woken, so the wake needs no If node
// before it.
func addDecision(g *graph, r resolved, ids map[string]string, from string) string {
	col := g.col
	claim := postgresNode(NodeClaimEvents, g.at(col, 0), r.inbox.ClaimBatch(r.ClaimLease, r.ClaimLease, r.MaxAttempts, DrainBatch),
		"={{ [ $runIndex === 0 ? String($json.ids ?? '') : '', $('"+from+"').first().json.drain === true ] }}", r.CredentialName)
	claim.ExecuteOnce, claim.AlwaysOutputData = true, true
	g.add(claim)
	g.connect(from, 0, NodeClaimEvents)
	// An empty batch comes as one empty item, without id: the call decides
	// nothing. An error that ends the call comes on the same output, as its
	// item, so the batch always goes on as one.
	claimed := "$('" + NodeClaimEvents + "').all().filter(i => i.json.id !== undefined)"
	apply := postgresNode(NodeApplyEvent, g.at(col+1, 0), r.inbox.ApplyBatchCall(r.DeferLimit, r.RetryBackoff),
		"={{ [ "+claimed+".map(i => i.json.id).join(','), "+claimed+".map(i => i.json.attempts).join(','), "+
			jsString(strings.Join(r.Events, ","))+" ] }}", r.CredentialName)
	apply.ExecuteOnce, apply.AlwaysOutputData = true, true
	apply.OnError = "continueRegularOutput"
	g.add(apply)
	g.connect(NodeClaimEvents, 0, NodeApplyEvent)
	// A call that ended early committed the rows it decided and left the
	// others processing: each of those gets the error, with the execution
	// that saw it, and its retry after the backoff (the recording fences on
	// state and attempt). The tasks the early rows wrote are not counted,
	// so the outbox is woken all the same.
	answer := "$('" + NodeApplyEvent + "').first().json"
	record := postgresNode(NodeRecordBatch, g.at(col+2, -1), r.inbox.RecordBatch(r.RetryBackoff, dispatchLease(r)),
		"={{ [ JSON.stringify("+answer+".error === undefined ? [] : "+claimed+".map(c => "+
			"({ id: c.json.id, attempts: c.json.attempts, message: 'the decision did not finish in n8n (execution ' + $execution.id + '): ' + "+
			"String("+answer+".message || "+answer+".error.message || "+answer+".error.description || 'no message') }))), "+
			answer+".error === undefined ? ("+answer+".tasks || 0) : 1 ] }}", r.CredentialName)
	record.ExecuteOnce = true
	g.add(record)
	g.connect(NodeApplyEvent, 0, NodeRecordBatch)
	if ids[FileOutbox] != "" { // else the tasks wait in outbox_tasks
		g.add(executeWorkflowNode(NodeWakeOutbox, g.at(col+3, -1), ids[FileOutbox], "once", false))
		g.connect(NodeRecordBatch, 0, NodeWakeOutbox)
	}
	g.col = col + 2
	return NodeApplyEvent
}

// recovererGraph re-offers unfinished rows to the worker on a schedule (or
// on demand) and reports what is stuck.
func recovererGraph(g *graph, r resolved, ids map[string]string) error {
	addSweepTriggers(g, r)
	find := postgresNode(NodeFindDue, g.at(1, 0), r.inbox.DueEventIDs(r.ClaimLease, DefaultRecoverBatch), "", r.CredentialName)
	find.ExecuteOnce = true
	g.add(find)
	g.connect(NodeSweepTimer, 0, NodeFindDue)
	g.connect(NodeSweepOnCall, 0, NodeFindDue)
	g.add(ifNode(g, NodeAnyDue, g.at(2, 0), "={{ $json.ids }}", opStringExist, ""))
	g.connect(NodeFindDue, 0, NodeAnyDue)
	// The worker's execution ends with no item (Drain Next answers none
	// when it stops): the count comes after it all the same.
	reoffer := executeWorkflowNode(NodeReoffer, g.at(3, 0), ids[FileWorker], "once", true)
	reoffer.AlwaysOutputData = true
	g.add(reoffer)
	g.connect(NodeAnyDue, 0, NodeReoffer)
	count := postgresNode(NodeCountStuck, g.at(4, 1), r.inbox.StuckWork(), "", r.CredentialName)
	count.ExecuteOnce = true
	g.add(count)
	g.connect(NodeReoffer, 0, NodeCountStuck)
	g.connect(NodeAnyDue, 1, NodeCountStuck)
	g.addNote(NodeSweepTimer, inboxNote(r, "Recoverer: nothing left behind",
		"Every "+duration.Format(r.SweepEvery)+", offers the worker what is due: a receipt whose hand-off was lost, a row whose worker died or whose retry is due, a deferred row; "+
			"accounts take turns. Count Stuck Work says what needs a human.")...)
	return nil
}

// outboxGraph delivers due tasks in two phases, each claimed on its own: the
// tasks whose last call may have been performed (ambiguous, or sending when
// their dispatcher died) are looked up first, and those the API never
// performed go back to pending; then every pending task is sent with its
// stable operation key. The last node waits, as the only waiter of the
// table, for the next task to fall due within the sweep interval (at most a
// minute), and runs the phases again when one does, so that a task is
// retried at its backoff and not at the next sweep.
//
// A pass is three branches of one node's output, which n8n's execution
// order (v1) runs top to bottom, each to its end: the lookups, the sends,
// then the wait. A claim that finds nothing, and a wait that finds nothing
// due, answer with no item, which ends their branch: no If node decides
// it (each cost n8n a node execution and an expression per pass).
func outboxGraph(g *graph, r resolved, _ map[string]string) error {
	addSweepTriggers(g, r)
	// One call and its recording; the HTTP node makes a batch's calls at once.
	lease := r.OutboxTimeout + 20*time.Second
	claim := func(name string, pos [2]int, phase string) node {
		n := postgresNode(name, pos, r.inbox.ClaimTasks(lease, r.OutboxBatch, phase), "", r.CredentialName)
		n.ExecuteOnce = true
		return n
	}
	pass := func(from string) {
		for _, to := range []string{NodeClaimLookups, NodeClaimSends, NodeWaitDue} {
			g.connect(from, 0, to)
		}
	}
	g.add(claim(NodeClaimLookups, g.at(1, -2), pgsql.PhaseLookup))
	// The calls read their task from their own item (the claim's row): no
	// item of another node is looked up.
	g.add(outboxCall(r, httpCall{Method: "GET", URL: "={{ " + jsString(r.OutboxURL+"/") + " + encodeURIComponent($json.operation_key) }}"}).node(NodeLookup, g.at(2, -2)))
	g.connect(NodeClaimLookups, 0, NodeLookup)
	g.add(recordAnswers(r, NodeRecordLookup, g.at(3, -2), NodeClaimLookups, pgsql.PhaseLookup))
	g.connect(NodeLookup, 0, NodeRecordLookup)

	g.add(claim(NodeClaimSends, g.at(1, -1), pgsql.PhaseSend))
	g.add(outboxCall(r, httpCall{
		Method: "POST", URL: r.OutboxURL,
		Headers:  [][2]string{{"Idempotency-Key", "={{ $json.operation_key }}"}},
		JSONBody: "={{ JSON.stringify($json.payload) }}",
	}).node(NodeCallAPI, g.at(2, -1)))
	g.connect(NodeClaimSends, 0, NodeCallAPI)
	g.add(recordAnswers(r, NodeRecordSend, g.at(3, -1), NodeClaimSends, pgsql.PhaseSend))
	g.connect(NodeCallAPI, 0, NodeRecordSend)

	// Woken by a worker, a dispatcher stays a moment for the next batch's
	// tasks and holds the dispatch lease (the workers wake no other while
	// it does), and passes at most every outboxPace unless a claim was
	// full; run by the schedule or by hand, it does none of these.
	woken := "$('" + NodeSweepOnCall + "').isExecuted && $('" + NodeSweepOnCall + "').first().json.wake_outbox === true && $runIndex < " + fmt.Sprint(drainRuns)
	claimFull := func(n string) string {
		return "($('" + n + "').isExecuted ? $('" + n + "').all().length : 0) >= " + fmt.Sprint(r.OutboxBatch)
	}
	wait := postgresNode(NodeWaitDue, g.at(1, 0), r.inbox.LingerForTask(min(r.SweepEvery, time.Minute), dispatchLease(r)),
		"={{ [ "+woken+" ? "+fmt.Sprint(drainLinger.Milliseconds())+" : 0, "+
			woken+" && !("+claimFull(NodeClaimLookups)+" || "+claimFull(NodeClaimSends)+") ? "+fmt.Sprint(outboxPace.Milliseconds())+" : 0 ] }}", r.CredentialName)
	wait.ExecuteOnce = true
	g.add(wait)
	pass(NodeSweepTimer)
	pass(NodeSweepOnCall)
	pass(NodeWaitDue) // a task fell due: the next pass
	g.addNote(NodeSweepTimer, inboxNote(r, "Outbox: external calls",
		"Calls "+r.OutboxURL+" once per task, with its operation key as Idempotency-Key on every attempt. A call that may have been performed is looked up first, "+
			"and resent only when the API says it never happened. Retries wait their backoff.")...)
	return nil
}

// dispatchLease is how long a dispatcher a worker woke holds the outbox
// for itself (the workers wake no other meanwhile): a pass of its two
// phases, each at most a call's timeout, and room. A dispatcher that died
// holds it that long; its tasks then wait for the next batch or the sweep.
// Without an outbox workflow no dispatcher is woken and the lease is only
// written: the default stands in, so --outbox-timeout changes nothing there.
func dispatchLease(r resolved) time.Duration {
	timeout := r.OutboxTimeout
	if r.OutboxURL == "" {
		timeout = DefaultOutboxTimeout
	}
	return 2*timeout + 5*time.Second
}

// recordAnswers records the answers of a pass's calls (the HTTP node's
// items) in one statement, pgsql.Inbox.OutboxResults, each with the task
// of the claim's item at the same index: the calls take the claimed rows
// in order, and the HTTP node answers
// each item with one item, in order, an error included. Each answer is its
// status and body (text, in "data"), or the transport error code when no
// answer came: the items reach the expression as copies whose error keeps
// its message ("connect ECONNREFUSED 127.0.0.1:8080") but not its code, so
// the code is read from the message. One expression and one statement per pass, where a statement
// per call cost n8n an expression and a round trip each.
func recordAnswers(r resolved, name string, pos [2]int, claim, phase string) node {
	n := postgresNode(name, pos, r.inbox.OutboxResults(r.OutboxMaxAttempts, r.OutboxBackoff),
		"={{ [ [[$('"+claim+"').all(), $input.all()]].map(p => JSON.stringify(p[1].map((a, i) => ({ "+
			"id: p[0][i].json.id, attempts: p[0][i].json.attempts, phase: '"+phase+"', status: String(a.json.statusCode ?? ''), "+
			"error: a.json.error ? (String(a.json.error.code || a.json.error.message || a.json.error).match(/\\bE[A-Z][A-Z_]{2,}\\b/) || "+
			"[String(a.json.error.code || a.json.error.message || a.json.error)])[0] : '', "+
			"body: String(a.json.data ?? '') }))))[0] ] }}", r.CredentialName)
	n.ExecuteOnce = true
	return n
}

func outboxCall(r resolved, c httpCall) httpCall {
	c.Bearer, c.Timeout, c.TextResponse, c.ErrorsInline = r.OutboxCredential, r.OutboxTimeout, true, true
	return c
}

func inboxCleanupGraph(g *graph, r resolved, _ map[string]string) error {
	g.add(node{Name: NodeCleanupSchedule, Type: typeSchedule, Position: g.at(0, 0), Parameters: map[string]any{
		"rule": map[string]any{"interval": []any{map[string]any{"field": "days", "daysInterval": 1, "triggerAtHour": 3}}},
	}})
	g.add(node{Name: NodeCleanupOnDemand, Type: typeExecTrig, Position: g.at(0, 1), Parameters: map[string]any{"inputSource": "passthrough"}})
	del := postgresNode(NodeDeleteDone, g.at(1, 0), r.inbox.Cleanup(r.Retention, pgsql.CleanupBatchSize), "", r.CredentialName)
	del.ExecuteOnce = true
	g.add(del)
	g.connect(NodeCleanupSchedule, 0, NodeDeleteDone)
	g.connect(NodeCleanupOnDemand, 0, NodeDeleteDone)
	g.addNote(NodeCleanupSchedule, cleanupNote(r, "finished inbox work (processed, ignored, rejected, forwarded) and sent tasks")...)
	return nil
}

// addSweepTriggers adds the schedule and the on-demand trigger of the
// recoverer and the outbox dispatcher.
func addSweepTriggers(g *graph, r resolved) {
	interval := map[string]any{"field": "minutes", "minutesInterval": int(r.SweepEvery / time.Minute)}
	switch {
	case r.SweepEvery == 24*time.Hour:
		interval = map[string]any{"field": "days", "daysInterval": 1}
	case r.SweepEvery >= time.Hour:
		interval = map[string]any{"field": "hours", "hoursInterval": int(r.SweepEvery / time.Hour)}
	}
	g.add(node{Name: NodeSweepTimer, Type: typeSchedule, Position: g.at(0, 0), Parameters: map[string]any{
		"rule": map[string]any{"interval": []any{interval}},
	}})
	// The worker wakes the outbox through this trigger; tests and operators
	// run either workflow now through it.
	g.add(node{Name: NodeSweepOnCall, Type: typeExecTrig, Position: g.at(0, 1), Parameters: map[string]any{"inputSource": "passthrough"}})
}

// executeWorkflowNode runs the published workflow id, once per item or once
// for all items, waiting for it or not.
func executeWorkflowNode(name string, pos [2]int, id, mode string, wait bool) node {
	return node{Name: name, Type: typeExecWorkflow, Position: pos, Parameters: map[string]any{
		"source":     "database",
		"workflowId": map[string]any{"__rl": true, "value": id, "mode": "id"},
		"mode":       mode,
		"options":    map[string]any{"waitForSubWorkflow": wait},
	}}
}

// inboxSchema is the schema.sql of the inbox pattern: its tables, the
// example domain of a preset, and the decision compiled from the rules.
func inboxSchema(r resolved) (string, error) {
	ddl, err := r.inbox.DDL(r.Rules.Decision())
	if err != nil {
		return "", &OptionError{Option: "rules", Value: r.Rules.Source, Reason: err.Error()}
	}
	// %q: a file name is the user's text, and it must not end the comment.
	return fmt.Sprintf("-- idemhook schema (pattern: inbox, rules: %q). Safe to run more than once.\n%s", filepath.Base(r.Rules.Source), ddl), nil
}

// Notes returns what a user of o should know about the files that an error
// would be too strong for: today, that the inbox pattern without an outbox
// URL writes no outbox workflow.
func Notes(o Options) ([]string, error) {
	r, err := o.resolve()
	if err != nil {
		return nil, err
	}
	if r.Pattern == PatternInbox && r.OutboxURL == "" {
		return []string{"no --outbox-url: the outbox workflow is not written, and the worker's outbox tasks wait in " +
			r.inbox.Outbox().String() + " (pending) until you generate with --outbox-url URL and deploy again"}, nil
	}
	return nil, nil
}
