// Package verify proves that a user's own n8n workflow still guards: it
// finds the guard by what the nodes do (not by their names), sends
// deliveries to the workflow running in a scratch n8n, and reads from n8n's
// own execution data which nodes ran for each delivery.
package verify

import (
	"cmp"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/pgsql"
)

const (
	typeWebhook  = "n8n-nodes-base.webhook"
	typePostgres = "n8n-nodes-base.postgres"
	typeHTTP     = "n8n-nodes-base.httpRequest"
	typeIf       = "n8n-nodes-base.if"
	typeSwitch   = "n8n-nodes-base.switch"
	typeSet      = "n8n-nodes-base.set"
	typeNoOp     = "n8n-nodes-base.noOp"
	typeRespond  = "n8n-nodes-base.respondToWebhook"
	// typeExecuteWorkflow calls another workflow (the inbox receiver hands
	// receipts to its worker this way).
	typeExecuteWorkflow = "n8n-nodes-base.executeWorkflow"
	typeErrorTrigger    = "n8n-nodes-base.errorTrigger"
)

// Guard is what Find recognised in a workflow. Names are node names.
type Guard struct {
	Webhook, Path, Method string
	// Reserve runs INSERT … ON CONFLICT on EventsTable, or calls keysvc's
	// POST /v1/reservations at KeysvcBase (Keysvc).
	Reserve, EventsTable string
	Keysvc               bool
	// KeysvcBase is the keysvc URL the workflow's HTTP Request nodes name
	// literally ("" when an expression builds it).
	KeysvcBase string
	// Lease: the reservation holds a lease (state and lease_until).
	Lease bool
	// Node: Reserve is idemhook's community node, the Idempotency Guard,
	// which decides too (Decision is Reserve; New is its first output).
	Node bool
	// Receipt: Reserve is the node's Save Inbox Receipt, the inbox
	// receiver's: a new event is a receipt saved now (json.new), on
	// Received or on Start Worker (NewOutput, which hands it off).
	Receipt bool
	// Decision is the If or Switch node after Reserve that sends a new
	// event one way and a duplicate another; "" for Transactional.
	Decision string
	// SubWorkflowCalls are the nodes that run other workflows: verify runs
	// the workflow alone, with a stand-in for each (the inbox receiver's
	// hand-off to its worker).
	SubWorkflowCalls []string
	// PlainEvents: Reserve writes an events table of idemhook's schema
	// (key first), which verify can create; otherwise (the inbox's
	// receipts) its schema must be given.
	PlainEvents bool
	// Transactional: the business write is in Reserve's own statement,
	// which reports in its "new" column whether it reserved (and wrote).
	Transactional bool
	// NewOutput is the Decision output a new event takes: the one from
	// which the key is released or marked done, or -1 when that does not
	// tell (Run then takes the output the first new event went through).
	NewOutput int
	// Releases are the nodes that delete or update the event's row.
	Releases []string

	g graph
}

// Business lists the nodes that run only for a new event: those reachable
// from the Decision's new output without taking an error output, Respond
// nodes aside.
func (gd Guard) Business() []string {
	if gd.Transactional || gd.NewOutput < 0 {
		return nil
	}
	var out []string
	for _, n := range gd.g.reach(gd.g.out(gd.Decision, gd.NewOutput), false) {
		if gd.g.nodes[n]["type"] != typeRespond {
			out = append(out, n)
		}
	}
	return out
}

// FirstBusiness is the first node the new output runs (not a Respond).
func (gd Guard) FirstBusiness() string {
	if gd.Transactional || gd.NewOutput < 0 {
		return ""
	}
	for _, n := range gd.g.out(gd.Decision, gd.NewOutput) {
		if gd.g.nodes[n]["type"] != typeRespond {
			return n
		}
	}
	return ""
}

// HandOff is the workflow call a new event goes on to when the business
// branch does nothing else: it only routes (If, Switch, Set, No Op nodes)
// to sub-workflow calls, as the inbox receiver hands a new receipt to its
// worker. "" otherwise.
func (gd Guard) HandOff() string {
	call := ""
	for _, n := range gd.Business() {
		switch t := gd.g.nodes[n]["type"]; {
		case slices.Contains(gd.SubWorkflowCalls, n):
			if call == "" {
				call = n
			}
		case t == typeIf || t == typeSwitch || t == typeSet || t == typeNoOp:
		default:
			return ""
		}
	}
	return call
}

// Decides is the node that tells a new event from a duplicate: the
// Decision, or the transactional reservation itself.
func (gd Guard) Decides() string {
	if gd.Transactional {
		return gd.Reserve
	}
	return gd.Decision
}

// HasErrorOutput tells whether node sends its failures to an error output
// ("On Error: Continue (using error output)").
func (gd Guard) HasErrorOutput(node string) bool {
	return gd.g.nodes[node]["onError"] == "continueErrorOutput"
}

// NotAGuardError: Find did not recognise a guard in the workflow.
type NotAGuardError struct{ Reason string }

func (e *NotAGuardError) Error() string { return "no idempotency guard found: " + e.Reason }

// UnsupportedError: the workflow guards in a way verify cannot check yet.
type UnsupportedError struct{ What string }

func (e *UnsupportedError) Error() string { return "verify cannot check this guard yet: " + e.What }

var (
	// insertOnConflict captures the table an INSERT … ON CONFLICT writes.
	insertOnConflict = regexp.MustCompile(`(?is)\binsert\s+into\s+((?:"[^"]+"|[\w$]+)(?:\.(?:"[^"]+"|[\w$]+))?)(?:\s+as\s+\w+)?\s*\(.*?\bon\s+conflict\b`)
	// keysvcReserve matches keysvc's reservation URL, not a key's
	// (/v1/reservations/{key}, which releases or marks done).
	keysvcReserve = regexp.MustCompile(`/v1/reservations(?:$|[?'"])`)
	keysvcKey     = regexp.MustCompile(`/v1/reservations/`)
	// keyColumnFirst tells an INSERT into idemhook's events table (key).
	keyColumnFirst = regexp.MustCompile(`(?is)\binsert\s+into\s+\S+(?:\s+as\s+\w+)?\s*\(\s*key\b`)
	// reportsNew finds the transactional guard's "… AS new" column.
	reportsNew = regexp.MustCompile(`(?is)\bas\s+"?new"?\b`)
)

// Find recognises the guard of w: one Webhook node, a Postgres node that
// reserves with INSERT … ON CONFLICT, and the If or Switch after it. It
// returns a *NotAGuardError or an *UnsupportedError when it cannot.
func Find(w n8napi.Workflow) (Guard, error) {
	gd, err := findReservation(w)
	if err != nil {
		return Guard{}, err
	}
	g := gd.g
	if gd.Node {
		gd.Decision, gd.NewOutput = gd.Reserve, 0
		if gd.Receipt {
			gd.NewOutput = 2 // Start Worker
		}
		for _, name := range g.order {
			if operation := communitynode.OperationOf(g.nodes[name]); slices.Contains(communitynode.Types(), fmt.Sprint(g.nodes[name]["type"])) && (operation == "release" || operation == "complete") {
				gd.Releases = append(gd.Releases, name)
			}
		}
		return gd, nil
	}
	for _, name := range g.reach(g.outs(gd.Reserve, false), false) {
		if t := g.nodes[name]["type"]; t == typeIf || t == typeSwitch {
			gd.Decision = name
			break
		}
	}
	if gd.Decision == "" {
		if q, _ := param(g.nodes[gd.Reserve], "query"); gd.Keysvc || !reportsNew.MatchString(q) {
			return Guard{}, &UnsupportedError{fmt.Sprintf("no If or Switch after %q, and its statement does not say whether it reserved (a column \"new\", as --guard transactional's does)", gd.Reserve)}
		}
		gd.Transactional = true
		return gd, nil
	}

	table := regexp.QuoteMeta(strings.Trim(gd.EventsTable, `"`))
	writesKey := regexp.MustCompile(`(?is)\b(?:delete\s+from|update)\s+"?` + table + `"?\b`)
	for _, name := range g.order {
		q, _ := param(g.nodes[name], "query")
		url, _ := param(g.nodes[name], "url")
		switch t := g.nodes[name]["type"]; {
		case name == gd.Reserve:
		case gd.Keysvc && t == typeHTTP && keysvcKey.MatchString(url),
			!gd.Keysvc && t == typePostgres && writesKey.MatchString(q):
			gd.Releases = append(gd.Releases, name)
		}
	}
	var releasing []int
	for i := range g.outputs(gd.Decision) {
		reached := g.reach(g.out(gd.Decision, i), true)
		if slices.ContainsFunc(gd.Releases, func(r string) bool { return slices.Contains(reached, r) }) {
			releasing = append(releasing, i)
		}
	}
	if len(releasing) == 1 {
		gd.NewOutput = releasing[0]
	}
	return gd, nil
}

// guardReserves tells an enabled Idempotency Guard that reserves or
// acquires a lease (its default operation is its version's).
func guardReserves(n map[string]any) bool {
	if n["disabled"] == true || !slices.Contains(communitynode.Types(), fmt.Sprint(n["type"])) {
		return false
	}
	operation := communitynode.OperationOf(n)
	return operation == "reserve" || operation == "acquireLease"
}

// guardReceives tells an enabled Idempotency Guard that saves the inbox
// pattern's receipt.
func guardReceives(n map[string]any) bool {
	return n["disabled"] != true && slices.Contains(communitynode.Types(), fmt.Sprint(n["type"])) && communitynode.OperationOf(n) == "receive"
}

// guardOption is an option of the Idempotency Guard's Options collection.
func guardOption(n map[string]any, name string) string {
	params, _ := n["parameters"].(map[string]any)
	options, _ := params["options"].(map[string]any)
	s, _ := options[name].(string)
	return s
}

func param(n map[string]any, name string) (string, bool) {
	params, _ := n["parameters"].(map[string]any)
	s, ok := params[name].(string)
	return s, ok
}

// graph is a workflow's nodes and main connections by node name.
type graph struct {
	nodes map[string]map[string]any
	order []string // as in the file
	conns map[string][][]string
}

func newGraph(w n8napi.Workflow) graph {
	g := graph{nodes: map[string]map[string]any{}, conns: map[string][][]string{}}
	for _, n := range w.Nodes {
		name, _ := n["name"].(string)
		g.nodes[name] = n
		g.order = append(g.order, name)
	}
	for src, v := range w.Connections {
		byType, _ := v.(map[string]any)
		outputs, _ := byType["main"].([]any)
		for _, o := range outputs {
			var targets []string
			list, _ := o.([]any)
			for _, c := range list {
				m, _ := c.(map[string]any)
				if t, ok := m["node"].(string); ok {
					targets = append(targets, t)
				}
			}
			g.conns[src] = append(g.conns[src], targets)
		}
	}
	return g
}

func (g graph) outputs(node string) [][]string { return g.conns[node] }

func (g graph) out(node string, i int) []string {
	if i < len(g.conns[node]) {
		return g.conns[node][i]
	}
	return nil
}

// isErrorOutput tells whether output i of node is its error output.
func (g graph) isErrorOutput(node string, i int) bool {
	return g.nodes[node]["onError"] == "continueErrorOutput" && i == len(g.conns[node])-1 && i > 0
}

// outs lists the targets of node's outputs, error outputs only when
// withErrors.
func (g graph) outs(node string, withErrors bool) []string {
	var out []string
	for i, targets := range g.conns[node] {
		if withErrors || !g.isErrorOutput(node, i) {
			out = append(out, targets...)
		}
	}
	return out
}

// reach lists, breadth first, the nodes reachable from start (included).
func (g graph) reach(start []string, withErrors bool) []string {
	var out []string
	seen := map[string]bool{}
	queue := slices.Clone(start)
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
		queue = append(queue, g.outs(n, withErrors)...)
	}
	return out
}

// reservation returns the first node after hook that reserves a key, or "".
func reservation(g graph, hook string) string {
	for _, name := range g.reach([]string{hook}, true) {
		n := g.nodes[name]
		q, _ := param(n, "query")
		url, _ := param(n, "url")
		if n["disabled"] != true && ((n["type"] == typePostgres && insertOnConflict.MatchString(q)) || (n["type"] == typeHTTP && keysvcReserve.MatchString(url)) || guardReserves(n)) {
			return name
		}
	}
	return ""
}

// findReservation finds the Webhook and the node that reserves, the part
// of the guard every pattern has (the transactional guard has no decision
// after it).
func findReservation(w n8napi.Workflow) (Guard, error) {
	g := newGraph(w)
	hook, err := guardedWebhook(g)
	if err != nil {
		return Guard{}, err
	}
	gd := Guard{Webhook: hook, NewOutput: -1, g: g}
	for _, name := range g.order {
		if g.nodes[name]["type"] == typeExecuteWorkflow {
			gd.SubWorkflowCalls = append(gd.SubWorkflowCalls, name)
		}
	}
	gd.Path, _ = param(g.nodes[gd.Webhook], "path")
	gd.Method, _ = param(g.nodes[gd.Webhook], "httpMethod")
	if gd.Method == "" {
		gd.Method = "GET" // n8n's default for the Webhook node
	}
	if gd.Path == "" {
		return Guard{}, &NotAGuardError{fmt.Sprintf("Webhook node %q has no path", gd.Webhook)}
	}
	if err := findReserve(&gd); err != nil {
		return Guard{}, err
	}
	return gd, nil
}

// guardedWebhook finds the Webhook node whose deliveries the guard checks,
// among the workflow's enabled ones.
func guardedWebhook(g graph) (string, error) {
	var hooks []string
	for _, name := range g.order {
		if g.nodes[name]["type"] == typeWebhook && g.nodes[name]["disabled"] != true {
			hooks = append(hooks, name)
		}
	}
	if len(hooks) == 0 {
		return "", &NotAGuardError{"the workflow has no Webhook node"}
	}
	// Of several Webhooks, the guarded one is checked: the one a
	// reservation follows.
	var guarded []string
	for _, h := range hooks {
		if reservation(g, h) != "" {
			guarded = append(guarded, h)
		}
	}
	switch {
	case len(hooks) == 1:
		guarded = hooks
	case len(guarded) == 0:
		return "", &NotAGuardError{fmt.Sprintf("no Postgres node after any of the %d Webhook nodes (%s) runs INSERT … ON CONFLICT on an events table", len(hooks), strings.Join(hooks, ", "))}
	case len(guarded) > 1:
		return "", &UnsupportedError{fmt.Sprintf("%d guarded Webhook nodes (%s): verify checks a workflow with one", len(guarded), strings.Join(guarded, ", "))}
	}
	return guarded[0], nil
}

// findReserve sets gd.Reserve to the first node after gd.Webhook that
// reserves the event's key, and records how it does: the Idempotency
// Guard reserving (or taking a lease) or saving the inbox's receipt, a
// Postgres INSERT … ON CONFLICT, or a POST to keysvc's reservations.
func findReserve(gd *Guard) error {
	g := gd.g
	downstream := g.reach([]string{gd.Webhook}, true)
	for _, name := range downstream {
		n := g.nodes[name]
		if guardReserves(n) {
			gd.Reserve, gd.Node, gd.PlainEvents = name, true, true
			gd.EventsTable = cmp.Or(guardOption(n, "eventsTable"), "processed_events")
			gd.Lease = communitynode.OperationOf(n) == "acquireLease"
			if p, _ := communitynode.OfType(fmt.Sprint(n["type"])); p == communitynode.Keysvc {
				return &UnsupportedError{fmt.Sprintf("node %q reserves on keysvc's store; verify checks the Idempotency Guard on PostgreSQL", name)}
			}
			break
		}
		if guardReceives(n) {
			gd.Reserve, gd.Node, gd.Receipt = name, true, true
			params, _ := n["parameters"].(map[string]any)
			receipt, _ := params["receipt"].(map[string]any)
			schema, _ := receipt["schema"].(string)
			gd.EventsTable = pgsql.Inbox{Schema: schema}.Inbox().String()
			break
		}
		q, _ := param(n, "query")
		if n["type"] == typePostgres && n["disabled"] != true {
			if m := insertOnConflict.FindStringSubmatch(q); m != nil {
				gd.Reserve, gd.EventsTable = name, m[1]
				gd.PlainEvents = keyColumnFirst.MatchString(q)
				gd.Lease = strings.Contains(q, "lease_until")
				break
			}
		}
		if url, _ := param(n, "url"); n["type"] == typeHTTP && n["disabled"] != true && keysvcReserve.MatchString(url) {
			if method, _ := param(n, "method"); method == http.MethodPost {
				gd.Reserve, gd.Keysvc = name, true
				if base, _, ok := strings.Cut(url, "/v1/reservations"); ok && strings.HasPrefix(base, "http") {
					gd.KeysvcBase = base
				}
				break
			}
		}
	}
	if gd.Reserve == "" {
		return &NotAGuardError{"no Postgres node after the Webhook runs INSERT … ON CONFLICT on an events table (a reservation turned into a SELECT, or removed, no longer guards)"}
	}
	return nil
}
