package generator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/internal/pgsql"
)

// ResponseMode is how a Webhook node answers: its responseMode parameter.
type ResponseMode string

const (
	// ResponseNode answers from a Respond to Webhook node.
	ResponseNode ResponseMode = "responseNode"
	// LastNode answers with the output of the last node that ran (n8n
	// 2.x refuses a Respond node in this mode, from Webhook typeVersion 2).
	LastNode ResponseMode = "lastNode"
	// OnReceived answers at once, before any node runs: the provider has
	// its answer before the guard has decided anything.
	OnReceived ResponseMode = "onReceived"
)

// NodeGuardNew stands in a Fragment for what a new event runs: the user's
// own nodes take its place.
const NodeGuardNew = "idemhook: the workflow's own nodes"

// Fragment is the guard `idemhook guard` puts into a user's workflow,
// between its Webhook and the nodes after it.
type Fragment struct {
	// Workflow is a workflow document holding the guard's nodes and
	// connections, from a stand-in trigger named NodeWebhook (the user's
	// Webhook takes its place) to NodeGuardNew. Positions count from the
	// trigger's at x = 0; Columns is how many 220-px columns the guard
	// takes after it.
	Workflow []byte
	Columns  int
	// MarkDone, with the lease guard, is a node (JSON) to put after each
	// last node of the user's path: it marks the execution's key done.
	// Empty with the reserve guard.
	MarkDone []byte
	// ErrorWorkflow is what n8n runs when an execution of the guarded
	// workflow fails (the workflow's settings name it): it releases the
	// failed execution's key, so that the provider's retry is processed.
	ErrorWorkflow   []byte
	ErrorWorkflowID string
	// Release is the error workflow's release alone (a node, JSON), to put
	// in front of the nodes of a user's own error workflow: it gives the
	// failed execution's key up and goes on when it fails itself (the
	// database down), so the user's nodes run whatever happened to it.
	Release []byte
	// Schema creates the events table, with the column that records the
	// execution holding each key.
	Schema string
}

// ErrorWorkflowName is the name of a guarded workflow's error workflow.
func ErrorWorkflowName(workflow string) string {
	return workflow + " – release on failure (idemhook)"
}

// FragmentGuards and FragmentHashings are the --guard and --hashing modes
// GuardFragment takes: the key is built in n8n, and held apart from the
// user's own nodes.
var (
	FragmentGuards   = []Guard{GuardLease, GuardAtMostOnce}
	FragmentHashings = []Hashing{HashingCodeNode, HashingCryptoNode, HashingNode}
)

// GuardFragment returns the guard for o (its key, signature check, guard
// mode, tables and credential) to put into a user's workflow whose Webhook
// answers as mode. seed makes the node and workflow ids unique to that
// workflow.
//
// The guard's own answers follow the mode: Respond nodes for ResponseNode;
// for LastNode, a Set node whose output is the answer body (with the
// Webhook's own status) or, where the provider must retry (the database
// unreachable, an attempt in progress, a forged signature, an empty body),
// a Stop and Error node, which n8n answers with a 500; for OnReceived, a No
// Operation node (the provider has its answer already) or a Stop and
// Error node, which leaves the failed execution in n8n's list. The
// reservation records the execution that holds the key: a failed execution
// is given up by ErrorWorkflow, wherever in the user's nodes it failed.
//
// It returns an *OptionError for what a user's workflow cannot be guarded
// with: the inbox pattern, keysvc hashing, and the transactional guard
// (whose reservation is part of the business write's own statement).
func GuardFragment(o Options, mode ResponseMode, seed string) (Fragment, error) {
	r, err := o.resolve()
	if err != nil {
		return Fragment{}, err
	}
	if err := checkGuardable(r); err != nil {
		return Fragment{}, err
	}
	answer, err := fragmentAnswerer(mode)
	if err != nil {
		return Fragment{}, err
	}
	r.byExecution = true
	f := Fragment{Schema: fmt.Sprintf("-- idemhook schema (guard: %s, in your workflow). Safe to run more than once.\n%s%s",
		r.Guard, pgsql.EventsDDL(r.events, r.Guard == GuardLease), pgsql.ExecutionDDL(r.events))}
	if f.Workflow, f.Columns, err = fragmentWorkflow(r, mode, answer, seed); err != nil {
		return Fragment{}, err
	}
	if r.Guard == GuardLease {
		if f.MarkDone, err = fragmentMarkDone(r); err != nil {
			return Fragment{}, err
		}
	}
	f.ErrorWorkflowID = workflowID("guard-errors/" + seed)
	if f.ErrorWorkflow, err = fragmentErrorWorkflow(r, f.ErrorWorkflowID); err != nil {
		return Fragment{}, err
	}
	if f.Release, err = fragmentRelease(r); err != nil {
		return Fragment{}, err
	}
	return f, nil
}

// checkGuardable refuses what a user's workflow cannot be guarded with:
// the inbox pattern, keysvc hashing and the transactional guard.
func checkGuardable(r resolved) error {
	switch {
	case r.Pattern != PatternReserve:
		return optionError("pattern", string(r.Pattern), "guard puts a reservation into your workflow; the inbox pattern is workflows of its own: generate them")
	case !slices.Contains(FragmentHashings, r.Hashing):
		return optionError("hashing mode", string(r.Hashing), "guard builds the key in n8n: use code-node, crypto-node or node (a keysvc-mode workflow is generated: idemhook generate --hashing keysvc)")
	case !slices.Contains(FragmentGuards, r.Guard):
		return optionError("guard mode", string(r.Guard), "the transactional guard reserves in the business write's own statement, which guard cannot write into your node: use lease (the default) or at-most-once")
	}
	return nil
}

// fragmentAnswerer gives the guard's own answers in a workflow whose
// Webhook answers as mode.
func fragmentAnswerer(mode ResponseMode) (answerer, error) {
	switch mode {
	case ResponseNode:
		return respondNode, nil
	case LastNode, OnReceived:
		return standIn(mode), nil
	}
	return nil, fmt.Errorf("generator: unknown response mode %q", mode)
}

// fragmentWorkflow renders the guard's nodes, from the stand-in Webhook to
// NodeGuardNew, with its note, and the columns the guard takes.
func fragmentWorkflow(r resolved, mode ResponseMode, answer answerer, seed string) ([]byte, int, error) {
	g := newGraph(seed)
	g.add(node{Name: NodeWebhook, Type: typeWebhook, Position: g.at(0, 0), Parameters: map[string]any{}})
	columns := 0
	err := addGuardHead(g, r, answer, func(from string) {
		columns = g.col + 4
		g.add(node{Name: NodeGuardNew, Type: typeNoOp, Position: g.at(4, -1), Parameters: map[string]any{}})
		g.connect(from, 0, NodeGuardNew)
	})
	if err != nil {
		return nil, 0, err
	}
	g.addNote(firstGuardNode(r), append(fragmentGuardNote(r, mode), "", "Put in by `idemhook guard`: your nodes after it get the item your Webhook gave; a failed execution's key is given up by the workflow's error workflow. [Guard a workflow you already have]("+Docs+"guard.md)")...)
	workflow, err := g.render(workflowID("guard/"+seed), r.WorkflowName, r.Executions)
	if err != nil {
		return nil, 0, err
	}
	return workflow, columns, nil
}

// fragmentMarkDone is the lease guard's Mark Done node (Fragment.MarkDone).
func fragmentMarkDone(r resolved) ([]byte, error) {
	done := postgresNode(NodeMarkDone, [2]int{}, pgsql.MarkExecutionDone(r.events), "={{ [ $execution.id ] }}", r.CredentialName)
	done.ExecuteOnce = true
	done.TypeVersion = TypeVersions[typePostgres]
	return marshal(done)
}

// fragmentErrorWorkflow renders the error workflow id
// (Fragment.ErrorWorkflow): the failed execution's key released.
func fragmentErrorWorkflow(r resolved, id string) ([]byte, error) {
	e := newGraph(id)
	e.add(node{Name: NodeExecutionFailed, Type: typeErrorTrigger, Position: e.at(0, 0), Parameters: map[string]any{}})
	e.add(postgresNode(NodeReleaseExecution, e.at(1, 0), pgsql.ReleaseExecution(r.events), "={{ [ $json.execution.id ] }}", r.CredentialName))
	e.connect(NodeExecutionFailed, 0, NodeReleaseExecution)
	return e.render(id, ErrorWorkflowName(r.WorkflowName), Executions{})
}

// fragmentRelease is the error workflow's release alone, going on when it
// fails itself (Fragment.Release).
func fragmentRelease(r resolved) ([]byte, error) {
	release := postgresNode(NodeReleaseExecution, [2]int{}, pgsql.ReleaseExecution(r.events), "={{ [ $json.execution.id ] }}", r.CredentialName)
	release.TypeVersion = TypeVersions[typePostgres]
	release.ExecuteOnce, release.AlwaysOutputData, release.OnError = true, true, "continueRegularOutput"
	return marshal(release)
}

// Node names of a guarded workflow's error workflow.
const (
	NodeExecutionFailed  = "Execution Failed"
	NodeReleaseExecution = "Release Its Key"
)

// standIn answers for a Webhook that takes no Respond node: see
// GuardFragment.
func standIn(mode ResponseMode) answerer {
	return func(name string, pos [2]int, status any, body string, _ ...[2]string) node {
		code, _ := status.(int)
		what := strings.TrimSpace(strings.TrimPrefix(name, fmt.Sprintf("Respond %d", code)))
		switch {
		case code >= 300 && (mode == LastNode || code >= 500):
			return node{Name: "Stop: " + what, Type: typeStopAndError, Position: pos, Parameters: map[string]any{
				"errorType": "errorMessage", "errorMessage": stopMessage(code, what),
			}}
		case mode == LastNode:
			return node{Name: "Answer " + what, Type: typeSet, Position: pos, Parameters: map[string]any{
				"mode": "raw", "jsonOutput": body, "options": map[string]any{},
			}}
		}
		return node{Name: "End: " + what, Type: typeNoOp, Position: pos, Parameters: map[string]any{}}
	}
}

// stopMessage is the error a Stop and Error node raises for an answer of
// status code: why the provider is made to retry.
func stopMessage(code int, what string) string {
	switch code {
	case 409:
		return "idemhook: another execution of this event is in progress; the provider's retry will find it done, or take over when its lease expires"
	case 503:
		return "idemhook: the idempotency key could not be reserved (the database did not answer); nothing was processed"
	}
	return "idemhook: " + what
}

// fragmentGuardNote is guardNote for a guard in a workflow whose Webhook
// answers as mode: only a Webhook that answers from a Respond node gives
// the guard's own answers (401, 400, 409, 503); the note says what the
// other modes give instead.
func fragmentGuardNote(r resolved, mode ResponseMode) []string {
	if mode == ResponseNode {
		return guardNote(r)
	}
	held, busy, forged := "reserved once", "", ""
	if r.Guard == GuardLease {
		held, busy = "leased for "+r.Lease.String(), "an attempt in progress, "
	}
	if r.Verify != "" {
		forged = "a forged " + r.Verify + " signature, "
	}
	lines := []string{"## The guard", "", "The key is built from the exact bytes and " + held + ": a new event runs your nodes, a replay runs nothing."}
	if mode == OnReceived {
		return append(lines, "Your Webhook answers at once, before the guard runs: every delivery gets its answer and the provider retries none. "+
			"A delivery the guard cannot decide ("+busy+forged+"an empty body, the database down) stops its execution, which n8n lists as failed, and none of your nodes run: "+
			"replay it from n8n's execution list. For answers the provider acts on (retry later, signature refused), set the Webhook to answer from a Respond to Webhook node.")
	}
	return append(lines, "Your Webhook answers with its last node's output: a replay gets the guard's answer, with your Webhook's status. "+
		"Where the provider must retry ("+busy+forged+"an empty body, the database down), a Stop and Error node fails the execution and n8n answers 500.")
}
