package generator

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/signature/provider"
)

// Node names of the keysvc mode.
const (
	NodeKeysvcReserve = "Reserve via keysvc"
	NodeReserved      = "Reserved?"
	NodeDuplicate     = "Duplicate?"
	NodeRespondKeysvc = "Respond with keysvc's answer"
	NodeRespond503    = "Respond 503 keysvc unreachable"
)

// keysvcKeyExpr reads the key keysvc answered with.
const keysvcKeyExpr = "$('" + NodeKeysvcReserve + "').item.json.body.key"

// addKeysvcFlow sends the raw body to keysvc, which derives and reserves
// the key. keysvc's status decides the branch: 201 runs the business step,
// 200 is a duplicate, a 4xx is passed on (400 empty body, 409 lease held),
// and anything else, including keysvc being unreachable, answers 503 so the
// provider retries: never a 200 that reserved nothing.
func addKeysvcFlow(g *graph, r resolved) {
	addKeysvcReserve(g, r)
	addKeysvcDecision(g, r)
	addKeysvcNewEvent(g, r)
}

// keysvcReserveURL is keysvc's reservation URL for r: the lease, the
// provider keysvc verifies, the preset and the scope in its query.
func keysvcReserveURL(r resolved) string {
	query := url.Values{}
	if r.Guard == GuardLease {
		query.Set("lease", fmt.Sprintf("%ds", int64(r.Lease.Seconds())))
	}
	// keysvc verifies the signature itself, with the secret it holds.
	if r.Verify != "" {
		query.Set("provider", r.Verify)
	}
	if r.Preset != "" && r.Preset != r.Verify {
		query.Set("preset", r.Preset)
	}
	if r.Scope != "" {
		query.Set("scope", r.Scope)
	}
	reserveURL := r.KeysvcURL + "/v1/reservations"
	if len(query) > 0 {
		reserveURL += "?" + query.Encode()
	}
	return reserveURL
}

// addKeysvcReserve adds the call that sends the raw body and the headers
// keysvc needs to keysvc, and the 503 for a keysvc that could not be
// reached.
func addKeysvcReserve(g *graph, r resolved) {
	// Network failures still raise; the error output answers 503.
	call := httpCall{Method: "POST", URL: keysvcReserveURL(r), Bearer: r.KeysvcCredential, BinaryBody: "data", ErrorOutput: true}
	for _, h := range forwardedHeaders(r) {
		call.Headers = append(call.Headers, [2]string{h, "={{ $('" + NodeWebhook + "').item.json.headers['" + strings.ToLower(h) + "'] || '' }}"})
	}
	g.add(call.node(NodeKeysvcReserve, g.at(1, 0)))
	g.connect(NodeWebhook, 0, NodeKeysvcReserve)
	g.add(respondNode(NodeRespond503, g.at(2, 2), 503,
		`{"status":"unavailable","error":"the key service could not be reached; retry later"}`, [2]string{"Retry-After", "5"}))
	g.connect(NodeKeysvcReserve, 1, NodeRespond503)
}

// keysvcAnswerBody is the body of an answer with status and the key keysvc
// answered with; extra adds fields.
func keysvcAnswerBody(status, extra string) string {
	return "={{ JSON.stringify({ status: '" + status + "', key: " + keysvcKeyExpr + extra + " }) }}"
}

// addKeysvcDecision branches on keysvc's status: 201 goes on to the
// business step (addKeysvcNewEvent), 200 is a duplicate, and anything else
// is passed on (a 4xx) or answered 503.
func addKeysvcDecision(g *graph, r resolved) {
	status := "={{ $json.statusCode }}"
	opNumberEq := map[string]any{"type": "number", "operation": "equals"}
	g.add(ifNode(g, NodeReserved, g.at(2, 0), status, opNumberEq, 201))
	g.connect(NodeKeysvcReserve, 0, NodeReserved)
	g.add(ifNode(g, NodeDuplicate, g.at(3, 1), status, opNumberEq, 200))
	g.connect(NodeReserved, 1, NodeDuplicate)
	duplicate := keysvcAnswerBody("duplicate", "")
	if r.checksSlackURL() {
		// keysvc verified Slack's URL check and reserved nothing: echo its challenge.
		duplicate = "={{ $json.body.status === 'url_verification' ? JSON.stringify({ challenge: $json.body.challenge }) : JSON.stringify({ status: 'duplicate', key: " + keysvcKeyExpr + " }) }}"
	}
	g.add(respondNode(NodeRespondDup, g.at(4, 1), 200, duplicate))
	g.connect(NodeDuplicate, 0, NodeRespondDup)
	g.add(respondNode(NodeRespondKeysvc, g.at(4, 2), "={{ $json.statusCode >= 400 && $json.statusCode < 500 ? $json.statusCode : 503 }}",
		"={{ JSON.stringify($json.body) }}", [2]string{"Retry-After", "={{ $json.headers['retry-after'] || '5' }}"}))
	g.connect(NodeDuplicate, 1, NodeRespondKeysvc)
}

// addKeysvcNewEvent adds what a new event runs: the business step, then
// (with a lease, after keysvc marked the key done) a 200; when the step
// fails, keysvc releases the key and the answer is a 500.
func addKeysvcNewEvent(g *graph, r resolved) {
	business := BusinessNodeName(r.BusinessTable)
	g.add(businessStep(r, g.at(3, -1), keysvcKeyExpr, "(() => { const b = $('"+NodeWebhook+"').item.json.body; return "+eventTypeOfBody+"; })()"))
	g.connect(NodeReserved, 0, business)

	keyPath := "={{ '" + r.KeysvcURL + "/v1/reservations/' + encodeURIComponent(" + keysvcKeyExpr + ")"
	shift := 0
	if r.Guard == GuardLease {
		shift = 1
		// keysvc's answer that reserved the key: what the step was given.
		succeeded := addStepSucceeded(g, business, "$json.statusCode === 201 && $json.body !== null && typeof $json.body === 'object' && $json.body.key !== undefined", g.at(4, -1))
		g.add(httpCall{Method: "POST", URL: keyPath + " + '/done' }}", Bearer: r.KeysvcCredential}.node(NodeMarkDone, g.at(5, -1)))
		g.connect(succeeded, 0, NodeMarkDone)
		g.add(respondNode(NodeRespond200, g.at(6, -1), 200, keysvcAnswerBody("processed", "")))
		g.connect(NodeMarkDone, 0, NodeRespond200)
	} else {
		g.add(respondNode(NodeRespond200, g.at(4, -1), 200, keysvcAnswerBody("processed", "")))
		g.connect(business, 0, NodeRespond200)
	}
	g.add(httpCall{Method: "DELETE", URL: keyPath + " }}", Bearer: r.KeysvcCredential}.node(NodeRelease, g.at(4+shift, 0)))
	g.connect(business, 1, NodeRelease)
	g.add(respondNode(NodeRespond500, g.at(5+shift, 0), 500, keysvcAnswerBody("failed", ", released: true")))
	g.connect(NodeRelease, 0, NodeRespond500)
}

// forwardedHeaders lists the webhook's headers keysvc needs: the provider's
// signature headers and the preset's id headers.
func forwardedHeaders(r resolved) []string {
	var out []string
	seen := map[string]bool{}
	add := func(hs []string) {
		for _, h := range hs {
			if !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	if r.Verify != "" {
		add(provider.Headers(r.Verify))
	}
	add(eventkey.Preset(r.Preset).Headers())
	return out
}

// httpCall is what an HTTP Request node sends. The full response (status,
// headers, body) comes back without raising on non-2xx, so the workflow
// branches on the status.
type httpCall struct {
	Method, URL string
	// Bearer names the n8n "Bearer Auth" credential to authenticate with;
	// the token never enters the workflow.
	Bearer string
	// Headers are name and value (an expression) pairs.
	Headers [][2]string
	// JSONBody is an expression giving the JSON body; BinaryBody the binary
	// property sent as the body as is. At most one is set.
	JSONBody, BinaryBody string
	// Timeout defaults to 10 s.
	Timeout time.Duration
	// TextResponse keeps the answer's body as text, which no body can fail
	// to parse as, instead of parsing it as JSON.
	TextResponse bool
	// ErrorOutput sends a call that got no answer (a network failure, a
	// timeout) to the node's error output instead of failing the execution;
	// ErrorsInline passes it on the node's one output as an item with an
	// error field.
	ErrorOutput, ErrorsInline bool
}

// node is the HTTP Request node making c.
func (c httpCall) node(name string, pos [2]int) node {
	timeout, format := 10*time.Second, "json"
	if c.Timeout > 0 {
		timeout = c.Timeout
	}
	if c.TextResponse {
		format = "text"
	}
	params := map[string]any{
		"method": c.Method,
		"url":    c.URL,
		"options": map[string]any{
			"timeout": timeout.Milliseconds(),
			"response": map[string]any{"response": map[string]any{
				"fullResponse": true, "neverError": true, "responseFormat": format,
			}},
		},
	}
	n := node{Name: name, Type: typeHTTP, Position: pos, Parameters: params}
	switch {
	case c.ErrorOutput:
		n.OnError = "continueErrorOutput"
	case c.ErrorsInline:
		n.OnError = "continueRegularOutput"
	}
	if c.Bearer != "" {
		params["authentication"] = "genericCredentialType"
		params["genericAuthType"] = "httpBearerAuth"
		n.Credentials = map[string]credentialRef{"httpBearerAuth": {Name: c.Bearer}}
	}
	if len(c.Headers) > 0 {
		var entries []map[string]string
		for _, h := range c.Headers {
			entries = append(entries, map[string]string{"name": h[0], "value": h[1]})
		}
		params["sendHeaders"] = true
		params["specifyHeaders"] = "keypair"
		params["headerParameters"] = map[string]any{"parameters": entries}
	}
	switch {
	case c.JSONBody != "":
		params["sendBody"] = true
		params["specifyBody"] = "json"
		params["jsonBody"] = c.JSONBody
	case c.BinaryBody != "":
		params["sendBody"] = true
		params["contentType"] = "binaryData"
		params["inputDataFieldName"] = c.BinaryBody
	}
	return n
}
