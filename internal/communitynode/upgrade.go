package communitynode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Versions of the Idempotency Guard node (typeVersion), the same in both
// packages. n8n saves a workflow without the parameters equal to their
// default, so a changed default is a new version (n8n's rule for breaking
// node changes): version 1 reserves by default, version 2 (packages 0.3
// on) acquires a lease.
const (
	VersionReserve = 1
	VersionLease   = 2
	// NodeVersion is the version a new node gets, and the generator writes.
	NodeVersion = VersionLease
)

// DefaultOperation is the operation a node of typeVersion version runs when
// its saved parameters name none (n8n leaves a default out): reserve for
// version 1, acquireLease from version 2.
func DefaultOperation(version float64) string {
	if version >= VersionLease {
		return "acquireLease"
	}
	return "reserve"
}

// OperationOf is the operation of an Idempotency Guard node as n8n saved it
// (a workflow's node: its typeVersion and parameters).
func OperationOf(node map[string]any) string {
	params, _ := node["parameters"].(map[string]any)
	if op, ok := params["operation"].(string); ok && op != "" {
		return op
	}
	version, _ := node["typeVersion"].(float64)
	return DefaultOperation(version)
}

// ErrNotAWorkflow is UpgradeWorkflow's answer to a file that is not an n8n
// workflow export (one workflow, or an array of them).
var ErrNotAWorkflow = errors.New("not an n8n workflow export (a JSON object with nodes, or an array of them)")

// Upgrade is one node UpgradeWorkflow changed.
type Upgrade struct {
	Workflow, Node string
	From, To       string // node types
	Why            string
}

func (u Upgrade) String() string {
	return fmt.Sprintf("%q in %q: %s -> %s (%s)", u.Node, u.Workflow, u.From, u.To, u.Why)
}

// The parameters and credentials only one store's node reads.
var (
	postgresOnlyOptions = []string{"eventsTable", "recordExecution"}
	keysvcOnlyOptions   = []string{"provider", "timeoutSeconds"}
)

// UpgradeWorkflow rewrites the nodes of an exported workflow (or an array
// of workflows) that n8n-nodes-idemhook 0.1.0 saved, so that they run on
// the packages of today. 0.1.0's Idempotency Guard held both stores under
// one type, PostgreSQL by default (parameter store); 0.2.0 kept that type
// for keysvc only and moved the PostgreSQL store and Save Inbox Receipt to
// n8n-nodes-idemhook-postgres:
//   - a node on PostgreSQL (store postgres or left out, with a Postgres
//     credential, or Save Inbox Receipt) becomes n8n-nodes-idemhook-postgres'
//     node of version 1 (which, like 0.1.0, reserves by default), keeping
//     its parameters, its Postgres and Crypto credentials and its name (the
//     expressions that read its output go on working); the keysvc options
//     are dropped;
//   - a node on keysvc keeps its type, without the store parameter and the
//     PostgreSQL options.
//
// A node saved by 0.2.0 or later is left as it is. The workflow's other
// content is kept (its members in Go's order of keys). Changes lists what
// was done; none for a workflow that needed nothing.
func UpgradeWorkflow(raw []byte) (out []byte, changes []Upgrade, err error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var workflows []map[string]any
		if err := json.Unmarshal(raw, &workflows); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrNotAWorkflow, err)
		}
		for _, w := range workflows {
			c, err := upgradeOne(w)
			if err != nil {
				return nil, nil, err
			}
			changes = append(changes, c...)
		}
		out, err = json.MarshalIndent(workflows, "", "  ")
		return append(out, '\n'), changes, err
	}
	var w map[string]any
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrNotAWorkflow, err)
	}
	if changes, err = upgradeOne(w); err != nil {
		return nil, nil, err
	}
	out, err = json.MarshalIndent(w, "", "  ")
	return append(out, '\n'), changes, err
}

// upgradeOne rewrites the 0.1.0 nodes of one workflow in place.
func upgradeOne(w map[string]any) ([]Upgrade, error) {
	nodes, ok := w["nodes"].([]any)
	if !ok {
		return nil, ErrNotAWorkflow
	}
	name, _ := w["name"].(string)
	var changes []Upgrade
	for _, n := range nodes {
		node, ok := n.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: a node is not an object", ErrNotAWorkflow)
		}
		if u, changed := upgradeNode(node); changed {
			u.Workflow = name
			changes = append(changes, u)
		}
	}
	return changes, nil
}

// upgradeNode rewrites node when 0.1.0 saved it.
func upgradeNode(node map[string]any) (Upgrade, bool) {
	typ, _ := node["type"].(string)
	version, _ := node["typeVersion"].(float64)
	if (typ != KeysvcType && typ != KeysvcCustomType) || version != VersionReserve {
		return Upgrade{}, false
	}
	params, _ := node["parameters"].(map[string]any)
	creds, _ := node["credentials"].(map[string]any)
	store, hasStore := params["store"].(string)
	_, hasPostgres := creds["postgres"]
	_, hasKeysvc := creds[KeysvcCredential]
	onPostgres := store == Postgres.Store || params["operation"] == "receive" || (!hasStore && hasPostgres && !hasKeysvc)
	if !onPostgres && !hasStore {
		return Upgrade{}, false // saved by 0.2.0 or later
	}
	name, _ := node["name"].(string)
	delete(params, "store")
	options, _ := params["options"].(map[string]any)
	if !onPostgres {
		dropKeys(options, postgresOnlyOptions)
		delete(creds, "postgres")
		return Upgrade{Node: name, From: typ, To: typ, Why: "0.1.0's keysvc store: the store parameter and the PostgreSQL options dropped"}, true
	}
	to := PostgresType
	if typ == KeysvcCustomType {
		to = PostgresCustomType
	}
	node["type"] = to
	dropKeys(options, keysvcOnlyOptions)
	delete(creds, KeysvcCredential)
	return Upgrade{Node: name, From: typ, To: to, Why: "0.1.0's PostgreSQL store, in n8n-nodes-idemhook-postgres since 0.2.0; version 1, which reserves by default as 0.1.0 did"}, true
}

func dropKeys(m map[string]any, keys []string) {
	for _, k := range keys {
		delete(m, k)
	}
}
