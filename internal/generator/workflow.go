package generator

import (
	"errors"
	"fmt"
	"strings"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/templates"
)

// Node names. Tests, the docs and users' own nodes refer to them.
const (
	NodeWebhook         = "Webhook"
	NodeKeyBuilt        = "Key Built?"
	NodeRespond400      = "Respond 400 empty body"
	NodeBuildKey        = "Build Idempotency Key"
	NodeHashBody        = "Hash Body"
	NodeReserve         = "Reserve Key"
	NodeRowReturned     = "Row Returned?"
	NodeRespond200      = "Respond 200"
	NodeRespondDup      = "Respond 200 duplicate"
	NodeRelease         = "Release Key"
	NodeRespond500      = "Respond 500 released"
	NodeRespond503DB    = "Respond 503 database unavailable"
	NodeAcquireLease    = "Reserve Key (lease)"
	NodeLeaseAcquired   = "Row Returned? (lease acquired)"
	NodeAlreadyDone     = "Already Done?"
	NodeRespond409      = "Respond 409 in progress"
	NodeHeldElsewhere   = "Held by Another Attempt?"
	NodeMarkDone        = "Mark Done"
	NodeStepSucceeded   = "Step Succeeded?"
	NodeCleanupSchedule = "Every Day"
	NodeCleanupOnDemand = "On Demand"
	NodeCleanupDelete   = "Delete Old Keys"
)

// BusinessNodeName is the name of the example business step, which users
// replace with their own nodes.
func BusinessNodeName(businessTable string) string {
	return "Business Step (insert " + businessTable + ")"
}

// Expressions that read the key built for the current item, and the
// attempt that holds its lease.
const (
	keyExpr       = "$('" + NodeBuildKey + "').item.json.key"
	eventTypeExpr = "$('" + NodeBuildKey + "').item.json.eventType"
	attemptExpr   = "$('" + NodeAcquireLease + "').item.json.attempt"
)

// WorkflowIDs returns the ids of the main and cleanup workflows. They depend
// only on the webhook path: changing any other option and re-importing
// updates the same workflows.
func WorkflowIDs(o Options) (main, cleanup string, err error) {
	r, err := o.resolve()
	if err != nil {
		return "", "", err
	}
	return workflowID("main/" + r.WebhookPath), workflowID("cleanup/" + r.WebhookPath), nil
}

// ErrInboxFiles is returned by Workflow and CleanupWorkflow for the inbox
// pattern, whose workflows come from Files.
var ErrInboxFiles = errors.New("the inbox pattern writes several workflows: use Files")

// ErrNoCleanupWorkflow is returned by CleanupWorkflow when keysvc holds the
// keys (HashingKeysvc, or the community node on keysvc): keysvc prunes them
// after its own --retention.
var ErrNoCleanupWorkflow = errors.New("keysvc keeps the keys and prunes them after its --retention: there is no cleanup workflow")

// Workflow returns the importable webhook workflow for o.
func Workflow(o Options) ([]byte, error) {
	r, err := o.resolve()
	if err != nil {
		return nil, err
	}
	if r.Pattern == PatternInbox {
		return nil, ErrInboxFiles
	}
	id := workflowID("main/" + r.WebhookPath)
	g := newGraph(id)

	// The key is built from the exact bytes, never from n8n's parse.
	g.add(webhookNode(g, r, true))
	if r.Hashing == HashingKeysvc {
		addKeysvcFlow(g, r)
	} else if err := addLocalFlow(g, r); err != nil {
		return nil, err
	}
	g.addNote(NodeWebhook, setupNote(g, r, "modes.md#"+modeAnchor(r))...)
	g.addNote(firstGuardNode(r), guardNote(r)...)
	business := BusinessNodeName(r.BusinessTable)
	if r.Guard == GuardTransactional {
		business = NodeReserveAndWrite
	}
	g.addNote(business, businessNote(r)...)
	return g.render(id, r.WorkflowName, r.Executions)
}

// modeAnchor is the section of docs/modes.md about r's mode.
func modeAnchor(r resolved) string {
	switch {
	case r.Hashing == HashingKeysvc:
		return "keysvc"
	case r.Guard != GuardLease:
		return string(r.Guard)
	case r.Hashing == HashingCryptoNode:
		return "crypto-node"
	case r.Hashing == HashingNode:
		return "node"
	}
	return "lease"
}

// firstGuardNode is the node the guard starts with, after the Webhook.
func firstGuardNode(r resolved) string {
	switch {
	case r.Hashing == HashingKeysvc:
		return NodeKeysvcReserve
	case r.Verify != "":
		return NodePrepareSignature
	case r.Hashing == HashingCryptoNode:
		return NodeHashBody
	case r.Hashing == HashingNode:
		return NodeGuard
	}
	return NodeBuildKey
}

// businessStep is the example business step: an insert into the business
// table whose error output releases the key, so the provider's retry is
// processed.
func businessStep(r resolved, pos [2]int, keyExpr, eventTypeExpr string) node {
	query := pgsql.BusinessInsert(r.business)
	if r.Guard == GuardLease {
		query = pgsql.BusinessInsertReturning(r.business) // for Step Succeeded?
	}
	n := postgresNode(BusinessNodeName(r.BusinessTable), pos, query,
		"={{ [ "+keyExpr+", "+eventTypeExpr+" ] }}", r.CredentialName)
	n.OnError = "continueErrorOutput"
	return n
}

// webhookNode is the workflow's trigger on r's path; it answers from a
// Respond node. rawBody keeps the request's exact bytes as binary data.
func webhookNode(g *graph, r resolved, rawBody bool) node {
	options := map[string]any{}
	if rawBody {
		options["rawBody"] = true
	}
	return node{Name: NodeWebhook, Type: typeWebhook, Position: g.at(0, 0), WebhookID: UUIDFrom("webhook/" + r.WebhookPath),
		Parameters: map[string]any{
			"httpMethod":   "POST",
			"path":         r.WebhookPath,
			"responseMode": "responseNode",
			"options":      options,
		}}
}

// addLocalFlow builds the key in n8n and reserves it with the Postgres node,
// then runs the example business step for a new event, releasing the key
// when it fails.
func addLocalFlow(g *graph, r resolved) error {
	if r.Guard == GuardTransactional {
		from, err := addVerifyNodes(g, r)
		if err != nil {
			return err
		}
		afterKey, err := addKeyNodes(g, r)
		if err != nil {
			return err
		}
		g.connect(from, 0, afterKey.first)
		addTransactional(g, r, afterKey.last)
		return nil
	}
	business := BusinessNodeName(r.BusinessTable)
	key := keyExprOf(r)
	respond := func(status, extra string) string {
		return "={{ JSON.stringify({ status: '" + status + "', key: " + key + extra + " }) }}"
	}
	// With a lease, Step Succeeded? comes between the step and Mark Done,
	// one column further right; at-most-once stays the seed's template.
	shift := 0
	if r.Guard == GuardLease {
		shift = 1
	}
	err := addGuardHead(g, r, respondNode, func(from string) {
		g.add(businessStepOf(r, g.at(4, -1)))
		g.connect(from, 0, business)
		if r.Guard == GuardLease {
			succeeded := addStepSucceeded(g, business, guardItemOf(r), g.at(5, -1))
			g.add(markDoneOf(r, g.at(6, -1)))
			g.connect(succeeded, 0, NodeMarkDone)
			g.add(respondNode(NodeRespond200, g.at(7, -1), 200, respond("processed", "")))
			g.connect(NodeMarkDone, 0, NodeRespond200)
			return
		}
		g.add(respondNode(NodeRespond200, g.at(5, -1), 200, respond("processed", "")))
		g.connect(business, 0, NodeRespond200)
	})
	if err != nil {
		return err
	}
	release := postgresNode(NodeRelease, g.at(5+shift, 0), pgsql.Release(r.events), "={{ [ "+key+" ] }}", r.CredentialName)
	switch {
	case r.Hashing == HashingNode:
		release = nodeRelease(r, g.at(5+shift, 0))
	case r.Guard == GuardLease:
		release = postgresNode(NodeRelease, g.at(5+shift, 0), pgsql.ReleaseLease(r.events),
			"={{ [ "+key+", "+attemptExpr+" ] }}", r.CredentialName)
	}
	g.add(release)
	g.connect(business, 1, NodeRelease)
	// A 5xx makes the provider retry; the key is free again by then.
	g.add(respondNode(NodeRespond500, g.at(6+shift, 0), 500, respond("failed", ", released: true")))
	g.connect(NodeRelease, 0, NodeRespond500)
	return nil
}

// addStepSucceeded adds the If node after the business step that lets go
// on as its success every item but the one the guard gave the step: the
// step's own output (an item with pgsql.StepOutputColumn, the example's),
// or any output of the user's own nodes, which is not the guard's item.
// The guard's item itself goes to Release Key and is answered 500, so the
// provider retries. n8n 2.41.1 hands a node that has an error output its
// input back on the success output when the node throws instead of
// returning an error item; the Postgres node does when it cannot read its
// credential from n8n's own database (restarting, or out of reach), before
// its query runs. Taken for the step's success, that answered 200 processed
// (with a lease, Mark Done marked the key done first) for a step that never
// ran: the event was lost, as one in 75 were in a crash run under a
// PostgreSQL restart. guardItem is a JavaScript test, over $json, of the
// item the guard passes to the step. It returns the If's name.
func addStepSucceeded(g *graph, business, guardItem string, pos [2]int) string {
	g.add(ifNode(g, NodeStepSucceeded, pos, "={{ $json."+pgsql.StepOutputColumn+" !== undefined || !("+guardItem+") }}", opBooleanTrue, ""))
	g.connect(business, 0, NodeStepSucceeded)
	g.connect(NodeStepSucceeded, 1, NodeRelease)
	return NodeStepSucceeded
}

// guardItemOf tests, over $json, the item r's guard passes to the business
// step: the lease row AcquireLease returned, or the community node's item
// with its new key.
func guardItemOf(r resolved) string {
	if r.Hashing == HashingNode {
		return "$json.idempotency !== undefined && $json.idempotency !== null && $json.idempotency.status === 'new'"
	}
	return "$json.outcome === '" + string(pgsql.OutcomeAcquired) + "'"
}

// markDoneOf is the lease guard's Mark Done after the business step: the
// community node's Complete, or the statement that marks the key done only
// while this attempt holds its lease (pgsql.MarkAttemptDone). The example
// step already marked it done in its own statement; Mark Done is there for
// the user's own steps, which replace it.
func markDoneOf(r resolved, pos [2]int) node {
	if r.Hashing == HashingNode {
		return nodeMarkDone(r, pos)
	}
	return postgresNode(NodeMarkDone, pos, pgsql.MarkAttemptDone(r.events), "={{ [ "+keyExprOf(r)+", "+attemptExpr+" ] }}", r.CredentialName)
}

// answerer makes the node that gives one of the guard's own answers: a
// Respond node where the Webhook answers from one (respondNode), or what
// stands for one in the other response modes (see Fragment).
type answerer func(name string, pos [2]int, status any, body string, headers ...[2]string) node

// addGuardHead adds the guard up to its decision: the signature check, the
// key, the empty-body answer, the reservation (lease or at-most-once) with its
// answer when the database does not answer, and the decision with its
// answers for a duplicate and, with a lease, for an attempt in progress.
// onNew adds what a new event runs, from the decision's first output; it is
// called where those nodes go in the file's order.
func addGuardHead(g *graph, r resolved, answer answerer, onNew func(from string)) error {
	if r.nodeOnKeysvc() {
		// keysvc verifies the signature itself, before it reserves.
		addNodeGuardHead(g, r, answer, NodeWebhook, onNew)
		return nil
	}
	from, err := addVerifyNodesAnswering(g, r, answer)
	if err != nil {
		return err
	}
	if r.Hashing == HashingNode {
		addNodeGuardHead(g, r, answer, from, onNew)
		return nil
	}
	if err := addKeyBuilt(g, r, answer, from); err != nil {
		return err
	}
	// keyParams binds the key, and in a workflow `idemhook guard` edited
	// the execution that holds it.
	keyParams := "={{ [ $json.key ] }}"
	reserveSQL, acquireSQL := pgsql.Reserve(r.events), pgsql.AcquireLease(r.events, r.Lease)
	if r.byExecution {
		keyParams = "={{ [ $json.key, $execution.id ] }}"
		reserveSQL, acquireSQL = pgsql.ReserveForExecution(r.events), pgsql.AcquireLeaseForExecution(r.events, r.Lease)
	}
	switch r.Guard {
	case GuardAtMostOnce:
		addReserveDecision(g, r, answer, reserveSQL, keyParams, onNew)
	case GuardLease:
		addLeaseDecision(g, r, answer, acquireSQL, keyParams, onNew)
	}
	return nil
}

// addKeyBuilt adds the key nodes after from, and the If node that sends an
// empty body, which has no key, to a 400 that reserves nothing.
func addKeyBuilt(g *graph, r resolved, answer answerer, from string) error {
	afterKey, err := addKeyNodes(g, r)
	if err != nil {
		return err
	}
	g.connect(from, 0, afterKey.first)
	g.add(ifNode(g, NodeKeyBuilt, g.at(1, 0), "={{ $json.key }}", opStringNotEmpty, ""))
	g.connect(afterKey.last, 0, NodeKeyBuilt)
	g.connect(NodeKeyBuilt, 1, g.addNode(answer(NodeRespond400, g.at(2, 2), 400,
		`{"status":"rejected","error":"empty body: there is nothing to derive an idempotency key from"}`)))
	return nil
}

// guardAnswerBody is the body of the guard's answer with status: the
// status and the key.
func guardAnswerBody(status string) string {
	return "={{ JSON.stringify({ status: '" + status + "', key: " + keyExpr + " }) }}"
}

// addUnavailable answers from's error output, a reservation that failed
// (the database is unreachable): nothing was reserved and nothing ran, so
// the provider is told to retry. It returns the answer's node.
func addUnavailable(g *graph, answer answerer, from string) string {
	unavailable := g.addNode(answer(NodeRespond503DB, g.at(3, 3), 503,
		`{"status":"unavailable","error":"the idempotency key could not be reserved (the database did not answer); nothing was processed: retry later"}`,
		[2]string{"Retry-After", "5"}))
	g.connect(from, 1, unavailable)
	return unavailable
}

// addReserveDecision adds the reserve guard's reservation (reserveSQL,
// bound to keyParams) and its decision: a returned row is a new event
// (onNew), none a duplicate.
func addReserveDecision(g *graph, r resolved, answer answerer, reserveSQL, keyParams string, onNew func(from string)) {
	reserve := postgresNode(NodeReserve, g.at(2, 0), reserveSQL, keyParams, r.CredentialName)
	reserve.OnError = "continueErrorOutput"
	g.add(reserve)
	g.connect(NodeKeyBuilt, 0, NodeReserve)
	addUnavailable(g, answer, NodeReserve)
	// On a conflict the Postgres node outputs {"success": true} rather
	// than no item, so test for the returned column.
	g.add(ifNode(g, NodeRowReturned, g.at(3, 0), "={{ $json.key }}", opStringExist, ""))
	g.connect(NodeReserve, 0, NodeRowReturned)
	onNew(NodeRowReturned)
	g.connect(NodeRowReturned, 1, g.addNode(answer(NodeRespondDup, g.at(4, 1), 200, guardAnswerBody("duplicate"))))
}

// addLeaseDecision adds the lease guard's acquisition (acquireSQL, bound
// to keyParams) and its decision: an acquired lease is a new event
// (onNew), a key done a duplicate, else an attempt in progress (409).
func addLeaseDecision(g *graph, r resolved, answer answerer, acquireSQL, keyParams string, onNew func(from string)) {
	acquire := postgresNode(NodeAcquireLease, g.at(2, 0), acquireSQL, keyParams, r.CredentialName)
	acquire.OnError = "continueErrorOutput"
	g.add(acquire)
	g.connect(NodeKeyBuilt, 0, NodeAcquireLease)
	unavailable := addUnavailable(g, answer, NodeAcquireLease)
	g.add(ifNode(g, NodeLeaseAcquired, g.at(3, 0), "={{ $json.outcome }}", opStringEq, pgsql.OutcomeAcquired))
	g.connect(NodeAcquireLease, 0, NodeLeaseAcquired)
	onNew(NodeLeaseAcquired)
	g.add(ifNode(g, NodeAlreadyDone, g.at(4, 1), "={{ $json.outcome }}", opStringEq, pgsql.OutcomeDone))
	g.connect(NodeLeaseAcquired, 1, NodeAlreadyDone)
	g.connect(NodeAlreadyDone, 0, g.addNode(answer(NodeRespondDup, g.at(5, 1), 200, guardAnswerBody("duplicate"))))
	// Busy is held by another attempt; anything else is no answer of the
	// statement's: the reservation's input, handed back by n8n when the
	// node threw before its query (its credential unreadable), and nothing
	// was reserved, so the provider retries it soon.
	g.add(ifNode(g, NodeHeldElsewhere, g.at(5, 2), "={{ $json.outcome }}", opStringEq, pgsql.OutcomeBusy))
	g.connect(NodeAlreadyDone, 1, NodeHeldElsewhere)
	retryAfter := fmt.Sprint(int64(min(r.Lease, 300e9) / 1e9))
	g.connect(NodeHeldElsewhere, 0, g.addNode(answer(NodeRespond409, g.at(6, 2), 409, guardAnswerBody("in_progress"), [2]string{"Retry-After", retryAfter})))
	g.connect(NodeHeldElsewhere, 1, unavailable)
}

// Node names of the transactional guard.
const (
	NodeReserveAndWrite = "Reserve and Write"
	NodeRespondResult   = "Respond"
	NodeRespond500Txn   = "Respond 500 not processed"
)

// addTransactional reserves and writes in one statement after the key
// nodes; the answer follows from its one row (an empty key is a 400, folded
// into the statement, which reserves nothing for it). A failed statement
// rolled both back: answer 500, and the provider's retry runs it again. An
// item without the statement's boolean "new" is the key nodes' item, which
// n8n hands on as the statement's success when the node throws before its
// query (see addStepSucceeded): nothing ran, so that is a 500 too, where it
// was answered 200 duplicate.
func addTransactional(g *graph, r resolved, after string) {
	save := postgresNode(NodeReserveAndWrite, g.at(1, 0), pgsql.ReserveAndWrite(r.events, r.business),
		"={{ [ $json.key, $json.eventType ] }}", r.CredentialName)
	save.OnError = "continueErrorOutput"
	g.add(save)
	g.connect(after, 0, NodeReserveAndWrite)
	g.add(respondNode(NodeRespondResult, g.at(2, 0), "={{ $json.key === '' ? 400 : typeof $json.new === 'boolean' ? 200 : 500 }}",
		"={{ JSON.stringify($json.key === '' ? { status: 'rejected', error: 'empty body: there is nothing to derive an idempotency key from' } : typeof $json.new === 'boolean' ? { status: $json.new ? 'processed' : 'duplicate', key: $json.key } : { status: 'failed', error: 'the statement did not run; retry' }) }}"))
	g.connect(NodeReserveAndWrite, 0, NodeRespondResult)
	g.add(respondNode(NodeRespond500Txn, g.at(2, 1), 500,
		"={{ JSON.stringify({ status: 'failed', error: 'the reservation and the business write were rolled back; retry' }) }}"))
	g.connect(NodeReserveAndWrite, 1, NodeRespond500Txn)
}

type span struct{ first, last string }

// addKeyNodes adds the nodes that turn the raw body into
// {key, source, eventType} and returns the first and last of them.
func addKeyNodes(g *graph, r resolved) (span, error) {
	switch r.Hashing {
	case HashingCryptoNode:
		g.add(node{Name: NodeHashBody, Type: typeCrypto, Position: g.at(1, 0), Parameters: map[string]any{
			"action":             "hash",
			"type":               "SHA256",
			"binaryData":         true,
			"binaryPropertyName": "data",
			"encoding":           "hex",
			"dataPropertyName":   "bodySha256",
		}})
		g.add(node{Name: NodeBuildKey, Type: typeSet, Position: g.at(2, 0), Parameters: map[string]any{
			"mode":       "raw",
			"jsonOutput": cryptoKeyJSON,
			"options":    map[string]any{},
		}})
		g.connect(NodeHashBody, 0, NodeBuildKey)
		g.col += 2
		return span{NodeHashBody, NodeBuildKey}, nil
	default:
		script, err := templates.KeyScript(r.Preset, r.Scope)
		if err != nil {
			return span{}, err
		}
		g.add(node{Name: NodeBuildKey, Type: typeCode, Position: g.at(1, 0), Parameters: map[string]any{
			"mode":     "runOnceForAllItems",
			"language": "javaScript",
			"jsCode":   script,
		}})
		g.col++
		return span{NodeBuildKey, NodeBuildKey}, nil
	}
}

// eventTypeOfBody reads the event type from n8n's parsed body b; it plays
// no part in the key.
const eventTypeOfBody = "b !== null && typeof b === 'object' && typeof b.type === 'string' ? b.type : ''"

// emptySHA256 is the SHA-256 of zero bytes. Expressions cannot see the size
// of binary data, but the only body with this hash is the empty one.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// cryptoKeyJSON is the crypto-node mode's key node: one expression that
// evaluates the id (templates.CryptoIDExpression) once and gives {key,
// source, eventType}, key and source empty for an empty body. One
// expression rather than one per field, because n8n 2.41 spends
// milliseconds on every expression it evaluates (the bench's node times).
var cryptoKeyJSON = "={{ JSON.stringify(((id, b) => { const empty = $json.bodySha256 === '" + emptySHA256 + "'; " +
	"return { key: empty ? '' : id !== null ? 'evt:' + id : 'sha256:' + $json.bodySha256, " +
	"source: empty ? '' : id !== null ? 'event_id' : 'body_sha256', " +
	"eventType: " + eventTypeOfBody + " }; })(" + templates.CryptoIDExpression + ", $('" + NodeWebhook + "').item.json.body)) }}"

// CleanupWorkflow returns the scheduled workflow that deletes keys older
// than the retention. It is separate from the webhook workflow so a slow
// delete never delays a delivery.
func CleanupWorkflow(o Options) ([]byte, error) {
	r, err := o.resolve()
	if err != nil {
		return nil, err
	}
	if r.Pattern == PatternInbox {
		return nil, ErrInboxFiles
	}
	if r.KeysInKeysvc() {
		return nil, ErrNoCleanupWorkflow
	}
	id := workflowID("cleanup/" + r.WebhookPath)
	g := newGraph(id)
	g.add(node{Name: NodeCleanupSchedule, Type: typeSchedule, Position: g.at(0, 0), Parameters: map[string]any{
		"rule": map[string]any{"interval": []any{map[string]any{"field": "days", "daysInterval": 1, "triggerAtHour": 3}}},
	}})
	// The on-demand trigger lets `n8n execute --id=ID` or another workflow
	// run the cleanup now.
	g.add(node{Name: NodeCleanupOnDemand, Type: typeExecTrig, Position: g.at(0, 1), Parameters: map[string]any{
		"inputSource": "passthrough",
	}})
	g.add(postgresNode(NodeCleanupDelete, g.at(1, 0), pgsql.Cleanup(r.events, r.Retention, pgsql.CleanupBatchSize), "", r.CredentialName))
	g.connect(NodeCleanupSchedule, 0, NodeCleanupDelete)
	g.connect(NodeCleanupOnDemand, 0, NodeCleanupDelete)
	g.addNote(NodeCleanupSchedule, cleanupNote(r, "keys")...)
	return g.render(id, r.WorkflowName+" – cleanup", r.Executions)
}

// Schema returns the SQL that creates the tables the workflows use. It is
// idempotent: running it again changes nothing.
func Schema(o Options) (string, error) {
	r, err := o.resolve()
	if err != nil {
		return "", err
	}
	if r.Pattern == PatternInbox {
		return inboxSchema(r)
	}
	var b strings.Builder
	if r.KeysInKeysvc() {
		b.WriteString("-- idemhook schema (keysvc keeps the keys in its own store and prunes them after its --retention:\n" +
			"-- only the example business step's table is here). Safe to run more than once.\n")
	} else {
		fmt.Fprintf(&b, "-- idemhook schema (guard: %s). Safe to run more than once.\n", r.Guard)
		b.WriteString(pgsql.EventsDDL(r.events, r.Guard == GuardLease))
	}
	b.WriteString(pgsql.BusinessDDL(r.business))
	return b.String(), nil
}

// CredentialsExample returns an `n8n import:credentials` file for the
// Postgres credential the workflows reference, with placeholder values only.
func CredentialsExample(o Options) ([]byte, error) {
	r, err := o.resolve()
	if err != nil {
		return nil, err
	}
	postgres := map[string]any{
		"id":   workflowID("credential/" + r.CredentialName),
		"name": r.CredentialName,
		"type": "postgres",
		"data": map[string]any{
			"host":                   "localhost",
			"port":                   5432,
			"database":               "idemhook",
			"user":                   "idemhook",
			"password":               "CHANGE_ME",
			"ssl":                    "disable",
			"allowUnauthorizedCerts": false,
			"maxConnections":         100,
		},
	}
	creds := []map[string]any{postgres}
	if r.Verify != "" && r.Hashing != HashingKeysvc && r.Receiver != ReceiverKeysvc && !r.nodeOnKeysvc() {
		// The provider's signing secret, encrypted by n8n on import.
		creds = append(creds, map[string]any{
			"id":   workflowID("credential/" + r.VerifyCredential),
			"name": r.VerifyCredential,
			"type": "crypto",
			"data": map[string]any{"hmacSecret": "CHANGE_ME"},
		})
	}
	// keysvc's token (the guard scope), for the node or the HTTP Request
	// nodes that call keysvc.
	switch {
	case r.nodeOnKeysvc():
		creds = append(creds, map[string]any{
			"id": workflowID("credential/" + r.KeysvcCredential), "name": r.KeysvcCredential, "type": communitynode.KeysvcCredential,
			"data": map[string]any{"url": r.KeysvcURL, "token": "CHANGE_ME"},
		})
	case r.Pattern == PatternReserve && r.Hashing == HashingKeysvc && r.KeysvcCredential != "":
		creds = append(creds, map[string]any{
			"id": workflowID("credential/" + r.KeysvcCredential), "name": r.KeysvcCredential, "type": "httpBearerAuth",
			"data": map[string]any{"token": "CHANGE_ME"},
		})
	}
	return marshal(creds)
}

// Files returns every file `idemhook generate` writes, by file name.
func Files(o Options) (map[string][]byte, error) {
	r, err := o.resolve()
	if err != nil {
		return nil, err
	}
	var files map[string][]byte
	if r.Pattern == PatternInbox {
		if files, err = inboxWorkflows(r); err != nil {
			return nil, err
		}
	} else {
		wf, err := Workflow(o)
		if err != nil {
			return nil, err
		}
		files = map[string][]byte{FileWorkflow: wf}
		if !r.KeysInKeysvc() {
			if files[FileCleanup], err = CleanupWorkflow(o); err != nil {
				return nil, err
			}
		}
	}
	schema, err := Schema(o)
	if err != nil {
		return nil, err
	}
	creds, err := CredentialsExample(o)
	if err != nil {
		return nil, err
	}
	files["schema.sql"] = []byte(schema)
	files["credentials.example.json"] = creds
	if r.Pattern == PatternInbox && r.Receiver == ReceiverKeysvc {
		if files[FileEndpoints], err = endpointsExample(r); err != nil {
			return nil, err
		}
	}
	return files, nil
}
