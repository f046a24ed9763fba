package generator

import (
	"fmt"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/pgsql"
)

// Node names of the community node mode (HashingNode).
const (
	NodeGuard        = "Idempotency Guard"
	NodeRetryLater   = "Retry Later?"
	NodeRejected     = "Rejected?"
	NodeRespond500NS = "Respond 500 guard not set up"
	// NodeRespondRefused passes keysvc's refusal of a delivery on: 400 for
	// an empty body, 401 for a signature it did not verify, 413 for a body
	// over its limit.
	NodeRespondRefused = "Respond with keysvc's refusal"
)

// Expressions that read what the Idempotency Guard added to the Webhook's
// one item. .first() rather than .item: n8n spends milliseconds tracing an
// item back to the guard (the bench's node times: Respond 200 took 9 ms
// with .item, 4 with .first(), in one run), and a webhook execution has one
// item.
const (
	nodeKeyExpr     = "$('" + NodeGuard + "').first().json.idempotency.key"
	nodeAttemptExpr = "$('" + NodeGuard + "').first().json.idempotency.attempt"
)

// keyExprOf reads the key r's guard built for the current item.
func keyExprOf(r resolved) string {
	if r.Hashing == HashingNode {
		return nodeKeyExpr
	}
	return keyExpr
}

// businessStepOf is the example business step of r: with the community
// node it follows the guard directly and reads its key from $json.
func businessStepOf(r resolved, pos [2]int) node {
	key, eventType, attempt := keyExpr, eventTypeExpr, attemptExpr
	if r.Hashing == HashingNode {
		key, eventType, attempt = "$json.idempotency.key", "$json.idempotency.eventType", "$json.idempotency.attempt"
	}
	if r.Guard == GuardLease && !r.nodeOnKeysvc() {
		// The row and the key's done in one statement: once, whatever dies when.
		n := postgresNode(BusinessNodeName(r.BusinessTable), pos, pgsql.BusinessInsertDone(r.events, r.business),
			"={{ [ "+key+", "+eventType+", "+attempt+" ] }}", r.CredentialName)
		n.OnError = "continueErrorOutput"
		return n
	}
	return businessStep(r, pos, key, eventType)
}

// guardNode is the Idempotency Guard running operation in r's store: the
// events table with r's Postgres credential, or keysvc with its own.
func guardNode(r resolved, name string, pos [2]int, operation string, params map[string]any) node {
	options := map[string]any{}
	creds := credentials(r.CredentialName)
	if r.nodeOnKeysvc() {
		creds = map[string]credentialRef{communitynode.KeysvcCredential: {Name: r.KeysvcCredential}}
	} else {
		if r.EventsTable != DefaultEventsTable {
			options["eventsTable"] = r.EventsTable
		}
		if r.byExecution {
			options["recordExecution"] = true
		}
	}
	p := map[string]any{"operation": operation, "options": options}
	for k, v := range params {
		p[k] = v
	}
	return node{Name: name, Type: r.NodeType, Position: pos, Credentials: creds, Parameters: p}
}

// addNodeGuardHead is addGuardHead with the community node: one node reads
// the raw body, builds the key with the Code node's code and reserves it
// (or acquires its lease); its outputs are the decision. An item it cannot
// decide (an empty body, the database down, the guard not set up) goes to
// its Error output, the last, where the answer follows from the cause.
func addNodeGuardHead(g *graph, r resolved, answer answerer, from string, onNew func(from string)) {
	params := map[string]any{}
	if r.Preset != "" && r.Preset != "stripe" {
		params["preset"] = r.Preset
	}
	if r.Scope != "" {
		params["scope"] = r.Scope
	}
	operation, errorOutput := "reserve", 2
	if r.Guard == GuardLease {
		operation, errorOutput = "acquireLease", 3
		params["leaseSeconds"] = int64(r.Lease.Seconds())
	}
	guard := guardNode(r, NodeGuard, g.at(1, 0), operation, params)
	// Its own Error output rather than n8n's On Error setting, which costs
	// every execution the few milliseconds n8n spends preparing to move
	// error items (measured: 6 ms of the node's 11 went after it returned).
	guard.Parameters["options"].(map[string]any)["errorOutput"] = true
	if r.nodeOnKeysvc() && r.Verify != "" {
		guard.Parameters["options"].(map[string]any)["provider"] = r.Verify
	}
	g.add(guard)
	g.connect(from, 0, NodeGuard)
	respond := func(status string) string {
		return "={{ JSON.stringify({ status: '" + status + "', key: $json.idempotency.key }) }}"
	}
	onNew(NodeGuard)
	duplicate := respond("duplicate")
	if r.nodeOnKeysvc() && r.checksSlackURL() {
		// keysvc verified Slack's URL check and reserved nothing: the node
		// routes it here with the challenge to echo.
		duplicate = "={{ $json.idempotency.status === 'url_verification' ? JSON.stringify({ challenge: $json.idempotency.challenge }) : JSON.stringify({ status: 'duplicate', key: $json.idempotency.key }) }}"
	}
	g.connect(NodeGuard, 1, g.addNode(answer(NodeRespondDup, g.at(2, 1), 200, duplicate)))
	if r.Guard == GuardLease {
		retryAfter := fmt.Sprint(int64(min(r.Lease, 300e9) / 1e9))
		g.connect(NodeGuard, 2, g.addNode(answer(NodeRespond409, g.at(2, 2), 409, respond("in_progress"), [2]string{"Retry-After", retryAfter})))
	}

	// The error output: the provider retries what may pass later (the
	// database down: 503, a setup to fix: 500); an empty body gets 400. The
	// answers say what happened without the guard's message, which names
	// tables and credentials: that is in the execution's data.
	row := errorOutput + 1
	g.add(ifNode(g, NodeRetryLater, g.at(2, row), "={{ $json.details.status }}", opStringEq, "unavailable"))
	g.connect(NodeGuard, errorOutput, NodeRetryLater)
	store := "the database"
	if r.nodeOnKeysvc() {
		store = "keysvc"
	}
	g.connect(NodeRetryLater, 0, g.addNode(answer(NodeRespond503DB, g.at(3, row), 503,
		`{"status":"unavailable","error":"the idempotency key could not be reserved (`+store+` did not answer); nothing was processed: retry later"}`,
		[2]string{"Retry-After", "5"})))
	g.add(ifNode(g, NodeRejected, g.at(3, row+1), "={{ $json.details.status }}", opStringEq, "rejected"))
	g.connect(NodeRetryLater, 1, NodeRejected)
	rejected := answer(NodeRespond400, g.at(4, row+1), 400, `{"status":"rejected","error":"empty body: there is nothing to derive an idempotency key from"}`)
	if r.nodeOnKeysvc() {
		// keysvc's own verdict on the delivery: 400 for an empty body, 401
		// for a signature it did not verify, 413 for a body over its limit.
		rejected = answer(NodeRespondRefused, g.at(4, row+1), "={{ $json.details.httpStatus }}", "={{ JSON.stringify({ status: 'rejected', error: $json.error }) }}")
	}
	g.connect(NodeRejected, 0, g.addNode(rejected))
	g.connect(NodeRejected, 1, g.addNode(answer(NodeRespond500NS, g.at(4, row+2), 500,
		`{"status":"failed","error":"the idempotency guard could not run (its credential, its table or its settings: see the execution in n8n); nothing was processed"}`)))
}

// nodeRelease gives the key up after the business step failed: the
// Idempotency Guard's release operation (with the lease's attempt, so that
// only the holder releases).
func nodeRelease(r resolved, pos [2]int) node {
	params := map[string]any{"key": "={{ " + nodeKeyExpr + " }}"}
	if r.Guard == GuardLease && !r.nodeOnKeysvc() {
		params["attempt"] = "={{ " + nodeAttemptExpr + " }}"
	}
	return guardNode(r, NodeRelease, pos, "release", params)
}

// nodeMarkDone ends the lease of a key whose step succeeded.
func nodeMarkDone(r resolved, pos [2]int) node {
	return guardNode(r, NodeMarkDone, pos, "complete", map[string]any{"key": "={{ " + nodeKeyExpr + " }}"})
}
