package generator

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/signature"
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
	reserve := httpNode(NodeKeysvcReserve, g.at(1, 0), "POST", reserveURL, r.KeysvcCredential)
	if headers := forwardedHeaders(r); len(headers) > 0 {
		var params []map[string]string
		for _, h := range headers {
			lower := strings.ToLower(h)
			params = append(params, map[string]string{"name": h, "value": "={{ $('" + NodeWebhook + "').item.json.headers['" + lower + "'] || '' }}"})
		}
		reserve.Parameters["sendHeaders"] = true
		reserve.Parameters["specifyHeaders"] = "keypair"
		reserve.Parameters["headerParameters"] = map[string]any{"parameters": params}
	}
	reserve.Parameters["sendBody"] = true
	reserve.Parameters["contentType"] = "binaryData"
	reserve.Parameters["inputDataFieldName"] = "data"
	// Network failures still raise; the error output answers 503.
	reserve.OnError = "continueErrorOutput"
	g.add(reserve)
	g.connect(NodeWebhook, 0, NodeKeysvcReserve)
	g.add(respondNode(NodeRespond503, g.at(2, 2), 503,
		`{"status":"unavailable","error":"the key service could not be reached; retry later"}`, [2]string{"Retry-After", "5"}))
	g.connect(NodeKeysvcReserve, 1, NodeRespond503)

	status := "={{ $json.statusCode }}"
	opNumberEq := map[string]any{"type": "number", "operation": "equals"}
	g.add(ifNode(g, NodeReserved, g.at(2, 0), status, opNumberEq, 201))
	g.connect(NodeKeysvcReserve, 0, NodeReserved)
	g.add(ifNode(g, NodeDuplicate, g.at(3, 1), status, opNumberEq, 200))
	g.connect(NodeReserved, 1, NodeDuplicate)
	respond := func(status, extra string) string {
		return "={{ JSON.stringify({ status: '" + status + "', key: " + keysvcKeyExpr + extra + " }) }}"
	}
	g.add(respondNode(NodeRespondDup, g.at(4, 1), 200, respond("duplicate", "")))
	g.connect(NodeDuplicate, 0, NodeRespondDup)
	g.add(respondNode(NodeRespondKeysvc, g.at(4, 2), "={{ $json.statusCode >= 400 && $json.statusCode < 500 ? $json.statusCode : 503 }}",
		"={{ JSON.stringify($json.body) }}", [2]string{"Retry-After", "={{ $json.headers['retry-after'] || '5' }}"}))
	g.connect(NodeDuplicate, 1, NodeRespondKeysvc)

	business := BusinessNodeName(r.BusinessTable)
	g.add(businessStep(r, g.at(3, -1), keysvcKeyExpr, "(() => { const b = $('"+NodeWebhook+"').item.json.body; return "+eventTypeOfBody+"; })()"))
	g.connect(NodeReserved, 0, business)

	keyPath := "={{ '" + r.KeysvcURL + "/v1/reservations/' + encodeURIComponent(" + keysvcKeyExpr + ")"
	if r.Guard == GuardLease {
		g.add(httpNode(NodeMarkDone, g.at(4, -1), "POST", keyPath+" + '/done' }}", r.KeysvcCredential))
		g.connect(business, 0, NodeMarkDone)
		g.add(respondNode(NodeRespond200, g.at(5, -1), 200, respond("processed", "")))
		g.connect(NodeMarkDone, 0, NodeRespond200)
	} else {
		g.add(respondNode(NodeRespond200, g.at(4, -1), 200, respond("processed", "")))
		g.connect(business, 0, NodeRespond200)
	}
	g.add(httpNode(NodeRelease, g.at(4, 0), "DELETE", keyPath+" }}", r.KeysvcCredential))
	g.connect(business, 1, NodeRelease)
	g.add(respondNode(NodeRespond500, g.at(5, 0), 500, respond("failed", ", released: true")))
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
		add(signature.Provider(r.Verify).Headers())
	}
	add(eventkey.Preset(r.Preset).Headers())
	return out
}

// httpNode calls an HTTP API. The full response (status, headers, body)
// comes back without raising on non-2xx, so the workflow branches on the
// status. With bearerCredential set, it authenticates with the n8n "Bearer
// Auth" credential of that name; the token never enters the workflow.
func httpNode(name string, pos [2]int, method, url, bearerCredential string) node {
	n := node{Name: name, Type: typeHTTP, Position: pos, Parameters: map[string]any{
		"method": method,
		"url":    url,
		"options": map[string]any{
			"timeout": 10000,
			"response": map[string]any{"response": map[string]any{
				"fullResponse": true, "neverError": true, "responseFormat": "json",
			}},
		},
	}}
	if bearerCredential != "" {
		n.Parameters["authentication"] = "genericCredentialType"
		n.Parameters["genericAuthType"] = "httpBearerAuth"
		n.Credentials = map[string]credentialRef{"httpBearerAuth": {Name: bearerCredential}}
	}
	return n
}
