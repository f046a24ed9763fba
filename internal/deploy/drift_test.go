package deploy

import (
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/n8napi"
)

// mainWorkflow is the webhook workflow generate writes for o, as Load reads
// it.
func mainWorkflow(t *testing.T, o generator.Options) n8napi.Workflow {
	t.Helper()
	for _, w := range loaded(t, o) {
		if w.File == generator.FileWorkflow {
			return w.Doc
		}
	}
	t.Fatal("no workflow.json")
	return n8napi.Workflow{}
}

func TestDrift(t *testing.T) {
	live := mainWorkflow(t, generator.Options{})
	edited := func(edit func(w *n8napi.Workflow)) n8napi.Workflow {
		w, err := live.Clone()
		if err != nil {
			t.Fatal(err)
		}
		edit(&w)
		return w
	}
	node := func(w *n8napi.Workflow, name string) map[string]any {
		for _, n := range w.Nodes {
			if n["name"] == name {
				return n
			}
		}
		t.Fatalf("no node %q", name)
		return nil
	}
	cases := []struct {
		name string
		want n8napi.Workflow // what the options give
		got  n8napi.Workflow // what n8n holds
		says []string
	}{
		{"the same workflow", live, live, nil},
		{"ids and positions n8n assigns", live, edited(func(w *n8napi.Workflow) {
			for _, n := range w.Nodes {
				n["id"], n["position"] = "assigned-by-n8n", []any{-1, -1}
			}
		}), nil},
		{"a signature check the live workflow lacks", mainWorkflow(t, generator.Options{Verify: "stripe"}), live,
			[]string{"no signature check in front of the key"}},
		{"another hashing mode", mainWorkflow(t, generator.Options{Hashing: generator.HashingKeysvc}), live,
			[]string{generator.NodeKeysvcReserve + ": no such node", generator.NodeBuildKey + ": a code node the options do not give"}},
		{"another guard", mainWorkflow(t, generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce}}), live,
			[]string{generator.NodeReserve + ": no such node", generator.NodeAcquireLease + ": a postgres node the options do not give"}},
		{"another events table", mainWorkflow(t, generator.Options{ReserveOptions: generator.ReserveOptions{EventsTable: "other_events"}}), live,
			[]string{generator.NodeAcquireLease + ": query differs"}},
		{"another path", mainWorkflow(t, generator.Options{WebhookPath: "other"}), live,
			[]string{`Webhook: path differs (n8n has "idempotent-webhook", the options give "other")`}},
		{"another credential", mainWorkflow(t, generator.Options{CredentialName: "Postgres (prod)"}), live,
			[]string{generator.NodeAcquireLease + `: postgres credential "Postgres (idemhook)", the options give "Postgres (prod)"`}},
		{"an error output removed", live, edited(func(w *n8napi.Workflow) {
			delete(node(w, generator.BusinessNodeName(generator.DefaultBusinessTable)), "onError")
		}), []string{generator.BusinessNodeName(generator.DefaultBusinessTable) + `: onError is null, the options give "continueErrorOutput"`}},
		{"a connection moved", live, edited(func(w *n8napi.Workflow) {
			w.Connections[generator.NodeLeaseAcquired] = map[string]any{"main": []any{
				[]any{map[string]any{"node": generator.NodeAlreadyDone, "type": "main", "index": 0}},
				[]any{map[string]any{"node": generator.BusinessNodeName(generator.DefaultBusinessTable), "type": "main", "index": 0}},
			}}
		}), []string{generator.NodeLeaseAcquired + ": its connections differ"}},
		{"a setting changed", live, edited(func(w *n8napi.Workflow) { w.Settings["executionOrder"] = "v0" }),
			[]string{`settings: executionOrder is "v0", the options give "v1"`}},
		{"a node of the user's", live, edited(func(w *n8napi.Workflow) {
			w.Nodes = append(w.Nodes, map[string]any{"name": "Slack", "type": "n8n-nodes-base.slack", "parameters": map[string]any{}})
		}), []string{"Slack: a slack node the options do not give"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Drift(c.want, c.got)
			if len(c.says) == 0 && len(got) != 0 {
				t.Fatalf("differences %q, want none", got)
			}
			joined := strings.Join(got, "\n")
			for _, s := range c.says {
				if !strings.Contains(joined, s) {
					t.Errorf("differences:\n%s\nwant one saying %q", joined, s)
				}
			}
		})
	}
}

// A bound credential id is compared only when the wanted workflow names one.
func TestDriftCredentialIDs(t *testing.T) {
	want := mainWorkflow(t, generator.Options{})
	got, _ := want.Clone()
	for _, n := range got.Nodes {
		if c, ok := n["credentials"].(map[string]any); ok {
			c["postgres"].(map[string]any)["id"] = "bound-1"
		}
	}
	if d := Drift(want, got); len(d) != 0 {
		t.Errorf("files that bind by name against a bound workflow: %q, want no difference", d)
	}
	bound, _ := got.Clone()
	for _, n := range bound.Nodes {
		if c, ok := n["credentials"].(map[string]any); ok {
			c["postgres"].(map[string]any)["id"] = "bound-2"
		}
	}
	if d := Drift(bound, got); len(d) == 0 || !strings.Contains(d[0], "bound to postgres credential bound-1, not bound-2") {
		t.Errorf("another bound id: %q", d)
	}
}

// loaded is the files generate writes for o, as Load reads them.
func loaded(t *testing.T, o generator.Options) []Workflow {
	t.Helper()
	files, err := generator.Files(o)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := Load(files)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// Check tells where a live workflow's differences come from: only another
// version's notes, another guard's workflow (the default before), a
// workflow idemhook generated and nobody edited since, or an edit.
func TestDriftProblemsSayWhereTheDifferencesComeFrom(t *testing.T) {
	file := func(ws []Workflow) Workflow {
		for _, w := range ws {
			if w.File == generator.FileWorkflow {
				return w
			}
		}
		t.Fatal("no workflow.json")
		return Workflow{}
	}
	wanted := file(loaded(t, generator.Options{}))
	atMostOnce := generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce}}
	alternatives := []Alternative{{Options: "--guard at-most-once", Change: generator.GuardChange(generator.GuardAtMostOnce, generator.GuardLease), Workflows: loaded(t, atMostOnce)}}
	edit := func(w n8napi.Workflow, change func(n map[string]any)) n8napi.Workflow {
		c, err := w.Clone()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes {
			change(n)
		}
		return c
	}
	notesRewritten := edit(wanted.Doc, func(n map[string]any) {
		if n["name"] == "Note: Setup" {
			n["parameters"].(map[string]any)["content"] = "## Setup\n\nAn older version's words."
		}
	})
	otherTable := file(loaded(t, generator.Options{ReserveOptions: generator.ReserveOptions{EventsTable: "hooks_events"}})).Doc
	edited := edit(wanted.Doc, func(n map[string]any) {
		if n["name"] == generator.NodeMarkDone {
			n["parameters"].(map[string]any)["query"] = "SELECT 1"
		}
	})
	for _, c := range []struct {
		name     string
		live     n8napi.Workflow
		problems int
		says     string
	}{
		{"only the notes", notesRewritten, 1, "only the sticky notes' text differs"},
		{"the old default", file(loaded(t, atMostOnce)).Doc, 1, "this is the workflow of --guard at-most-once"},
		{"generated with other options, untouched", otherTable, -1, "Not edited since idemhook generated it"},
		{"edited", edited, -1, "it replaces the edits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			problems, err := driftProblems(wanted, c.live, nil, alternatives)
			if err != nil {
				t.Fatal(err)
			}
			var text []string
			for _, p := range problems {
				text = append(text, p.String())
			}
			joined := strings.Join(text, "\n")
			if len(problems) == 0 || (c.problems > 0 && len(problems) != c.problems) || !strings.Contains(joined, c.says) {
				t.Errorf("problems:\n%s\nwant %d saying %q", joined, c.problems, c.says)
			}
		})
	}
	old := file(loaded(t, atMostOnce)).Doc
	if problems, _ := driftProblems(wanted, old, nil, alternatives); len(problems) == 1 && !strings.Contains(problems[0].String(), "409") {
		t.Errorf("the old default's problem does not say what changes: %s", problems[0])
	}
}
