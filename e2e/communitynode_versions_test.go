package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/n8napi"
)

// editGuards applies f to every Idempotency Guard node of the workflow.
func editGuards(t *testing.T, f func(node map[string]any)) func(files map[string][]byte) {
	return func(files map[string][]byte) {
		var w map[string]any
		if err := json.Unmarshal(files["workflow.json"], &w); err != nil {
			t.Fatal(err)
		}
		for _, n := range w["nodes"].([]any) {
			node := n.(map[string]any)
			if _, ok := communitynode.OfType(node["type"].(string)); ok {
				f(node)
			}
		}
		files["workflow.json"] = mustJSON(t, w)
	}
}

// guardOutputs is how many outputs the Idempotency Guard had in the
// workflow's first execution (its decision's, and its Error output).
func guardOutputs(t *testing.T, d deployment) int {
	t.Helper()
	ctx := context.Background()
	execs, err := st.WaitExecutions(ctx, d.workflowID, 1)
	if err != nil {
		t.Fatal(err)
	}
	run, err := api.ExecutionRun(ctx, n8napi.ID(execs[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	return len(run.Outputs[generator.NodeGuard])
}

// n8n leaves a parameter at its default out of a saved workflow, so the
// node's versions keep their own defaults: a version 1 node saved without
// its operation (as 0.2.0 saved a Reserve) still reserves (New, Duplicate,
// Error), and a version 2 node saved without one acquires a lease (New,
// Duplicate, In Progress, Error), on either package.
func TestNodeVersionsKeepTheirDefaults(t *testing.T) {
	needStack(t)
	dropOperation := func(version float64) func(node map[string]any) {
		return func(node map[string]any) {
			params := node["parameters"].(map[string]any)
			if op := params["operation"]; op == "reserve" || op == "acquireLease" {
				delete(params, "operation")
			}
			node["typeVersion"] = version
		}
	}
	// A workflow that reserves, as 0.2.0's default did (at-most-once today):
	// the lease's workflow fences its step by the attempt a lease gives.
	v1 := seedOptions("nv1", generator.HashingNode)
	v1.Guard = generator.GuardAtMostOnce
	d1 := deployEdited(t, v1, editGuards(t, dropOperation(1)))
	v2 := keysvcNodeWorkflow(t, "nv2", func(o *generator.Options) { o.Guard = generator.GuardLease })
	d2 := deployEdited(t, v2, editGuards(t, dropOperation(2)))
	for _, c := range []struct {
		what    string
		d       deployment
		opts    generator.Options
		outputs int
	}{{"version 1 (PostgreSQL package), reserve", d1, v1, 3}, {"version 2 (keysvc package), a lease", d2, v2, 4}} {
		wantStoredOnce(t, c.what, c.opts, post(t, c.d.url, "application/json", []byte(`{"id":"evt_nv","type":"t"}`), nil), "evt:evt_nv")
		if n := guardOutputs(t, c.d); n != c.outputs {
			t.Errorf("%s: the guard had %d outputs, want %d", c.what, n, c.outputs)
		}
	}
}

// A workflow n8n-nodes-idemhook 0.1.0 saved with its PostgreSQL store (the
// node type of the keysvc package today, version 1, a Postgres credential)
// fails its execution with a message that names the command that moves
// it, reserving nothing and running no step; `idemhook node-upgrade`'s
// rewrite of the same workflow then runs on n8n-nodes-idemhook-postgres.
func TestNodeUpgradeOf010(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	opts := seedOptions("nu1", generator.HashingNode)
	as010 := editGuards(t, func(node map[string]any) {
		node["type"], node["typeVersion"] = communitynode.KeysvcType, 1
	})
	d := deployEdited(t, opts, as010)
	event := []byte(`{"id":"evt_nu","type":"t"}`)
	if r := post(t, d.url, "application/json", event, nil); r.status != 500 {
		t.Errorf("0.1.0's node on today's package: %d %.300s, want 500", r.status, r.body)
	}
	execs, err := st.WaitExecutions(ctx, d.workflowID, 1)
	if err != nil {
		t.Fatal(err)
	}
	run, err := api.ExecutionRun(ctx, n8napi.ID(execs[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	if said := run.Errors[generator.NodeGuard]; execs[0].Status != "error" || !strings.Contains(said, "idemhook node-upgrade") || !strings.Contains(said, communitynode.PostgresName) {
		t.Errorf("the execution: %s, the guard's error %q; want a failed execution naming idemhook node-upgrade and %s", execs[0].Status, said, communitynode.PostgresName)
	}
	if countRows(t, opts.EventsTable) != 0 || countRows(t, opts.BusinessTable) != 0 {
		t.Error("0.1.0's node reserved or ran the step")
	}

	// The same workflow under a path of its own (a workflow updated in
	// place may be served in its earlier version for a few seconds), on the
	// same tables, upgraded.
	upgraded := opts
	upgraded.WebhookPath, upgraded.WorkflowName = "nu1b-hook", "e2e nu1b"
	d = deployEdited(t, upgraded, func(files map[string][]byte) {
		as010(files)
		var changes []communitynode.Upgrade
		var err error
		if files["workflow.json"], changes, err = communitynode.UpgradeWorkflow(files["workflow.json"]); err != nil || len(changes) == 0 {
			t.Fatalf("node-upgrade: %v, %v", changes, err)
		}
	})
	wantStoredOnce(t, "after node-upgrade", opts, post(t, d.url, "application/json", event, nil), "evt:evt_nu")
}
