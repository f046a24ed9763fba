// Package nodered writes keysvc's guard as a Node-RED flow (Node-RED 5):
// an HTTP In node takes the delivery's exact bytes, keysvc verifies,
// derives and reserves its key, a Switch on keysvc's answer runs the user's
// step for a new event only, and the flow answers as the n8n workflow of
// keysvc mode does (generator, --hashing keysvc): 200 processed or
// duplicate with the key, keysvc's 4xx passed on, 503 with Retry-After
// when keysvc cannot be reached or fails, 500 after the step failed and
// its key was released. keysvc's URL and token are read from the
// environment, never written into the flow.
package nodered

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/signature/provider"
)

// Files written by Files.
const (
	FileFlows  = "flows.json"
	FileReadme = "README.md"
)

// The environment the flow reads (Node-RED's env.get).
const (
	EnvURL         = "KEYSVC_URL"
	EnvToken       = "KEYSVC_TOKEN"
	EnvTargetToken = "KEYSVC_TARGET_TOKEN"
)

// Flags are the generate options the Node-RED flow takes: the others are
// n8n's (credentials, tables, Code node hashing, execution data).
var Flags = []string{"path", "name", "guard", "lease", "verify", "preset", "scope", "receiver"}

// Options are the flow's, read from generate's.
type Options struct {
	Path, Name string
	Lease      time.Duration // 0: the reserve guard
	Verify     string        // the provider keysvc verifies ("" for none)
	Preset     string
	Scope      string
	// InboxTarget makes the flow the target of keysvc's durable inbox: it
	// takes the forward's Idempotency-Key (the same on every attempt) as the
	// key, and the bearer token KEYSVC_TARGET_TOKEN the inbox sends.
	InboxTarget bool
}

// routePath is what Node-RED serves raw: fixed, lower case (it matches a
// raw-body route's path case-sensitively, and one with :params is parsed).
var routePath = regexp.MustCompile(`^[a-z0-9_-]+(/[a-z0-9_-]+)*$`)

// FromGenerate reads the flow's options from generate's, with generate's
// defaults (the lease guard). It fails, with a *generator.OptionError, for a
// guard other than lease or at-most-once, a path Node-RED would not serve raw, an unknown
// provider or preset, an invalid scope, a receiver other than keysvc, and
// --verify with --receiver keysvc (the inbox verified the delivery).
func FromGenerate(o generator.Options) (Options, error) {
	bad := func(option, value, reason string) (Options, error) {
		return Options{}, &generator.OptionError{Option: option, Value: value, Reason: reason}
	}
	out := Options{Path: o.WebhookPath, Name: o.WorkflowName, Verify: o.Verify, Preset: o.Preset, Scope: o.Scope}
	if out.Path == "" {
		out.Path = generator.DefaultWebhookPath
	}
	if out.Name == "" {
		out.Name = generator.DefaultWorkflowName
	}
	if !routePath.MatchString(out.Path) || len(out.Path) > 200 {
		return bad("webhook path", out.Path, "Node-RED serves the raw body of a fixed lower-case path only: use a-z, 0-9, '-' and '_' in '/'-separated segments")
	}
	if strings.ContainsAny(out.Name, "\x00\r\n") || len(out.Name) > 128 {
		return bad("workflow name", out.Name, "must be 1-128 characters on one line")
	}
	switch o.Guard {
	case generator.GuardAtMostOnce:
	case "", generator.GuardLease:
		out.Lease = o.Lease
		if out.Lease == 0 {
			out.Lease = 5 * time.Minute
		}
		if out.Lease < time.Second || out.Lease > 24*time.Hour {
			return bad("lease", out.Lease.String(), "between 1s and 24h")
		}
	default:
		return bad("guard mode", string(o.Guard), "the Node-RED flow holds the key in keysvc: use lease or at-most-once")
	}
	switch o.Receiver {
	case "", generator.ReceiverN8N:
	case generator.ReceiverKeysvc:
		out.InboxTarget = true
	default:
		return bad("receiver", string(o.Receiver), "use keysvc (the flow is the target of keysvc's durable inbox), or leave it out")
	}
	if out.Verify == "none" {
		out.Verify = ""
	}
	if out.Verify != "" {
		if _, err := provider.Parse(out.Verify); err != nil {
			return bad("verify provider", out.Verify, "use "+provider.List())
		}
		if out.InboxTarget {
			return bad("verify provider", out.Verify, "behind keysvc's inbox the delivery was verified when keysvc received it (a forward comes later than the signature's tolerance): leave --verify out")
		}
	}
	if out.Preset == "" {
		out.Preset = out.Verify
	}
	p, err := eventkey.ParsePreset(out.Preset)
	if err != nil {
		return bad("preset", out.Preset, "use "+provider.List())
	}
	if err := p.CheckScope(out.Scope); err != nil {
		return bad("scope", out.Scope, err.Error())
	}
	return out, nil
}

// Files returns flows.json and README.md for o.
func Files(o Options) (map[string][]byte, error) {
	flows, err := Flow(o)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{FileFlows: flows, FileReadme: []byte(readme(o))}, nil
}

// node is a Node-RED node of the flow, its fields as flows.json holds them.
type node map[string]any

// flow lays the nodes out on one tab; ids are derived from the path, so
// that flows of several paths can share one Node-RED.
type flow struct {
	tab   string
	seed  string
	nodes []node
}

func (f *flow) id(name string) string {
	sum := sha256.Sum256([]byte("idemhook/node-red/" + f.seed + "/" + name))
	return hex.EncodeToString(sum[:8])
}

func (f *flow) add(name, typ string, x, y int, fields node, wires ...[]string) {
	n := node{"id": f.id(name), "type": typ, "z": f.tab, "name": name, "x": x, "y": y}
	for k, v := range fields {
		n[k] = v
	}
	if typ != "catch" || wires != nil {
		ws := make([]any, len(wires))
		for i, w := range wires {
			ids := make([]string, len(w))
			for j, to := range w {
				ids[j] = f.id(to)
			}
			ws[i] = ids
		}
		n["wires"] = ws
	}
	f.nodes = append(f.nodes, n)
}

func function(code string, outputs int) node {
	return node{"func": code, "outputs": outputs, "timeout": 0, "noerr": 0, "initialize": "", "finalize": "", "libs": []any{}}
}

func request(method string) node {
	// senderr: an error goes to the Catch nodes only, not also out of the
	// normal output (which would answer twice).
	return node{"method": method, "ret": "obj", "paytoqs": "ignore", "url": "", "tls": "", "persist": false, "proxy": "",
		"insecureHTTPParser": false, "authType": "", "senderr": true, "headers": []any{}}
}

// Node names the tests and the README refer to.
const (
	NodeIn        = "Webhook"
	NodePrepare   = "Prepare reservation"
	NodeReserve   = "Reserve via keysvc"
	NodeDecide    = "keysvc's answer"
	NodeEvent     = "Event for your step"
	NodeStep      = "Your business step"
	NodeMarkDone  = "Mark done"
	NodeDone      = "Mark done via keysvc"
	NodeRelease   = "Release the key"
	NodeReleased  = "Release via keysvc"
	NodeResponse  = "Answer"
	NodeStepFails = "Your step failed"
)

// Flow returns the flows.json of o: one tab holding the guard.
func Flow(o Options) ([]byte, error) {
	f := newFlow(o)
	f.addReservation(o)
	f.addNewEvent(o)
	f.addAnswers()
	f.addFailures(o)

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f.nodes); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newFlow starts o's flow with its tab, whose info says what the flow
// does and what Node-RED's environment must set.
func newFlow(o Options) *flow {
	f := &flow{seed: o.Path}
	f.tab = f.id("tab")
	tab := node{"id": f.tab, "type": "tab", "label": o.Name, "disabled": false, "env": []any{},
		"info": "Put in by `idemhook generate --target node-red`: keysvc verifies, derives and reserves each delivery's key; " +
			"only a new event reaches your step. Set KEYSVC_URL and KEYSVC_TOKEN (an admin token) in Node-RED's environment. See README.md."}
	f.nodes = append(f.nodes, tab)
	return f
}

// reservationQuery is the query of keysvc's reservation for o ("" or
// "?…"): the lease, the provider keysvc verifies, the preset and the
// scope.
func reservationQuery(o Options) string {
	query := url.Values{}
	if o.Lease > 0 {
		query.Set("lease", fmt.Sprintf("%ds", int64(o.Lease.Seconds())))
	}
	if o.Verify != "" {
		query.Set("provider", o.Verify)
	}
	if o.Preset != "" && o.Preset != o.Verify {
		query.Set("preset", o.Preset)
	}
	if o.Scope != "" {
		query.Set("scope", o.Scope)
	}
	if len(query) == 0 {
		return ""
	}
	return "?" + query.Encode()
}

// forwardedHeaders are the request headers passed on to keysvc: the
// provider's signature headers, then the preset's id headers.
func forwardedHeaders(o Options) []string {
	forward := []string{}
	if o.Verify != "" {
		forward = append(forward, provider.Headers(o.Verify)...)
	}
	for _, h := range eventkey.Preset(o.Preset).Headers() {
		if !slices.Contains(forward, h) {
			forward = append(forward, h)
		}
	}
	return forward
}

// addReservation adds the Webhook, the reservation sent to keysvc, and the
// Switch on keysvc's answer: a new event, a duplicate, or anything else.
func (f *flow) addReservation(o Options) {
	f.add(NodeIn, "http in", 120, 100, node{"url": "/" + o.Path, "method": "post", "upload": false, "skipBodyParsing": true, "swaggerDoc": ""},
		[]string{NodePrepare})
	f.add(NodePrepare, "function", 330, 100, prepare(o, reservationQuery(o), forwardedHeaders(o)), []string{NodeReserve}, []string{NodeResponse})
	f.add(NodeReserve, "http request", 560, 100, request("POST"), []string{NodeDecide})
	f.add(NodeDecide, "switch", 760, 100, node{"property": "statusCode", "propertyType": "msg",
		"rules": []any{
			map[string]any{"t": "eq", "v": "201", "vt": "num"},
			map[string]any{"t": "eq", "v": "200", "vt": "num"},
			map[string]any{"t": "else"},
		}, "checkall": "false", "repair": false, "outputs": 3},
		[]string{NodeEvent}, []string{"Answer duplicate"}, []string{"Answer with keysvc's status"})
}

// addNewEvent adds what a new event runs: the event for the user's step,
// the step, and with a lease the key marked done.
func (f *flow) addNewEvent(o Options) {
	f.add(NodeEvent, "function", 980, 40, function(eventCode, 1), []string{NodeStep})
	after := "Answer processed"
	if o.Lease > 0 {
		after = NodeMarkDone
	}
	f.add(NodeStep, "function", 1200, 40, function(stepCode, 1), []string{after})
	if o.Lease > 0 {
		f.add(NodeMarkDone, "function", 1420, 40, function(keyCall("POST", "/done", "the answer"), 1), []string{NodeDone})
		f.add(NodeDone, "http request", 1620, 40, request("POST"), []string{"Answer processed"})
	}
}

// addAnswers adds the flow's answers, each wired to the one HTTP Response
// node, and that node.
func (f *flow) addAnswers() {
	answer := func(name string, x, y int, code string) {
		f.add(name, "function", x, y, function(code, 1), []string{NodeResponse})
	}
	answer("Answer processed", 1840, 40, answerCode(200, `{ status: 'processed', key: msg.key }`, ""))
	// keysvc answers Slack's URL check 200 with its challenge, reserving
	// nothing: Slack accepts the URL when the answer echoes it.
	answer("Answer duplicate", 1000, 120, answerCode(200, `(msg.payload.status === 'url_verification' ? { challenge: msg.payload.challenge } : { status: 'duplicate', key: msg.payload.key })`, ""))
	answer("Answer with keysvc's status", 1000, 180, passOnCode)
	answer("Answer 503 keysvc unreachable", 1000, 260, answerCaught(503, `{ status: 'unavailable', error: 'the key service could not be reached; retry later' }`, "5", "keysvc could not be reached"))
	answer("Answer 500 failed", 1840, 340, answerCaught(500, `{ status: 'failed', key: msg.key, released: msg.statusCode === 204 }`, "", ""))
	answer("Answer 500 failed, key kept", 1840, 420, answerCaught(500, `{ status: 'failed', key: msg.key, released: false }`, "", "your step failed and its key could not be released"))
	f.add(NodeResponse, "http response", 2080, 200, node{"statusCode": "", "headers": map[string]any{}})
}

// addFailures adds the Catch nodes and what they run: keysvc unreachable
// answers 503; the user's step failing releases its key and answers 500.
func (f *flow) addFailures(o Options) {
	unreachable := []string{NodePrepare, NodeReserve}
	if o.Lease > 0 {
		unreachable = append(unreachable, NodeMarkDone, NodeDone)
	}
	f.add("keysvc unreachable", "catch", 760, 260, node{"scope": f.ids(unreachable...), "uncaught": false}, []string{"Answer 503 keysvc unreachable"})
	f.add(NodeStepFails, "catch", 1200, 340, node{"scope": f.ids(NodeStep), "uncaught": false}, []string{NodeRelease})
	f.add(NodeRelease, "function", 1420, 340, function(keyCall("DELETE", "", "the release"), 1), []string{NodeReleased})
	f.add(NodeReleased, "http request", 1620, 340, request("DELETE"), []string{"Answer 500 failed"})
	f.add("Release unreachable", "catch", 1420, 420, node{"scope": f.ids(NodeRelease, NodeReleased), "uncaught": false}, []string{"Answer 500 failed, key kept"})
}

func (f *flow) ids(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = f.id(n)
	}
	return out
}

func jsString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// prepare builds the reservation: keysvc's URL and token from the
// environment, the raw bytes as the body, the request's content type and
// the provider's and the preset's headers as they came.
func prepare(o Options, query string, forward []string) node {
	var b strings.Builder
	b.WriteString("// idemhook: the delivery, as it came, to keysvc, which verifies it, derives its key and reserves it.\n")
	b.WriteString("const base = env.get('" + EnvURL + "');\n")
	b.WriteString("if (!base) throw new Error('" + EnvURL + " is not set in Node-RED\\'s environment');\n")
	b.WriteString("const token = env.get('" + EnvToken + "');\n")
	b.WriteString("const req = msg.req.headers;\n")
	b.WriteString("msg.headers = {};\n")
	b.WriteString("if (token) msg.headers['Authorization'] = 'Bearer ' + token;\n")
	b.WriteString("if (req['content-type']) msg.headers['Content-Type'] = req['content-type'];\n")
	b.WriteString("for (const name of " + jsString(forward) + ") {\n  const v = req[name.toLowerCase()];\n  if (v !== undefined) msg.headers[name] = v;\n}\n")
	lib := []any{}
	if o.InboxTarget {
		lib = []any{map[string]any{"var": "crypto", "module": "crypto"}}
		b.WriteString(`// keysvc's durable inbox forwards the event with its receipt key, the same
// on every attempt, and the bearer token of the endpoint's target_token.
const want = Buffer.from('Bearer ' + (env.get('` + EnvTargetToken + `') || ''));
const got = Buffer.from(String(req['authorization'] || ''));
if (!env.get('` + EnvTargetToken + `') || got.length !== want.length || !crypto.timingSafeEqual(got, want)) {
  msg.statusCode = 401;
  msg.headers = { 'Content-Type': 'application/json' };
  msg.payload = JSON.stringify({ status: 'rejected', error: 'the forward does not carry ` + EnvTargetToken + `' });
  node.send([null, msg]);
  return null;
}
if (!req['idempotency-key']) {
  msg.statusCode = 400;
  msg.headers = { 'Content-Type': 'application/json' };
  msg.payload = JSON.stringify({ status: 'rejected', error: 'no Idempotency-Key: this flow takes the forwards of keysvc\'s inbox' });
  node.send([null, msg]);
  return null;
}
msg.headers['Idempotency-Key'] = req['idempotency-key'];
`)
	}
	b.WriteString("msg.url = base.replace(/\\/+$/, '') + '/v1/reservations" + query + "';\n")
	b.WriteString("msg.requestTimeout = 10000;\n")
	b.WriteString("msg.body = msg.payload; // the exact bytes (the Webhook does not parse them)\n")
	b.WriteString("return [msg, null];\n")
	n := function(b.String(), 2)
	n["libs"] = lib
	return n
}

// The new event for the user's step: the key, the body (parsed when it is
// JSON, the bytes otherwise) and the raw bytes.
const eventCode = `// idemhook: a new event, reserved. Your step gets msg.key (the idempotency key), msg.payload (the
// body, parsed when it is JSON), msg.rawBody (its bytes) and msg.req (the request, its headers).
msg.key = msg.payload.key;
msg.rawBody = msg.body;
delete msg.body;
try {
  msg.payload = JSON.parse(msg.rawBody.toString('utf8'));
} catch (e) {
  msg.payload = msg.rawBody;
}
delete msg.headers;
delete msg.statusCode;
return msg;
`

// stepCode is the placeholder the user replaces: a failure thrown here
// (or node.error(err, msg)) releases the key, so the provider's retry runs
// the step again.
const stepCode = `// >>> YOUR BUSINESS STEP: replace this node's code (or put your nodes here, and add their ids to the
// scope of the "Your step failed" Catch node). It runs once per event: msg.key is the event's
// idempotency key (pass it on to APIs that take an Idempotency-Key), msg.payload the event.
// Throw (or node.error(err, msg)) when it fails: the key is released and the provider's retry runs it again.
// The answer the provider gets comes after it.
return msg;
`

// keyCall builds a call on the event's key: mark it done, or release it.
func keyCall(method, suffix, what string) string {
	return `// idemhook: ` + what + ` of the event's key in keysvc (an admin token).
const base = env.get('` + EnvURL + `');
const token = env.get('` + EnvToken + `');
msg.url = base.replace(/\/+$/, '') + '/v1/reservations/' + encodeURIComponent(msg.key) + '` + suffix + `';
msg.headers = token ? { 'Authorization': 'Bearer ' + token } : {};
msg.payload = '';
msg.requestTimeout = 10000;
return msg;
`
}

// answerCode answers status with body (a JavaScript expression), as JSON
// text the flow writes itself (an object payload would be JSONP for a
// ?callback= query).
func answerCode(status int, body, retryAfter string) string {
	return answerCaught(status, body, retryAfter, "")
}

// answerCaught is answerCode after a Catch node: it logs the error it
// caught (what failed, and Node-RED's message: no body, key or token) in
// Node-RED's log first.
func answerCaught(status int, body, retryAfter, what string) string {
	logged := ""
	if what != "" {
		logged = "node.warn('idemhook: " + what + ": ' + ((msg.error && msg.error.message) || 'unknown error'));\n"
	}
	headers := `{ 'Content-Type': 'application/json' }`
	if retryAfter != "" {
		headers = `{ 'Content-Type': 'application/json', 'Retry-After': '` + retryAfter + `' }`
	}
	return logged + fmt.Sprintf("const body = %s;\nmsg.statusCode = %d;\nmsg.headers = %s;\nmsg.payload = JSON.stringify(body);\nreturn msg;\n", body, status, headers)
}

// passOnCode answers keysvc's 4xx as keysvc gave it (400 empty body, 401 a
// forged signature, 409 a lease held) and anything else as 503, so that
// the provider retries: never a 200 that reserved nothing.
const passOnCode = `const status = msg.statusCode >= 400 && msg.statusCode < 500 ? msg.statusCode : 503;
const retryAfter = (msg.headers && msg.headers['retry-after']) || '5';
msg.statusCode = status;
msg.payload = typeof msg.payload === 'string' ? msg.payload : JSON.stringify(msg.payload);
msg.headers = { 'Content-Type': 'application/json', 'Retry-After': retryAfter };
return msg;
`
