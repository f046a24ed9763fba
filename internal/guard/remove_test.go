package guard_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/guard"
)

// plain decodes an export into plain JSON values (an array of one is its
// workflow), for comparing documents whatever their layout and number
// types.
func plain(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if list, ok := v.([]any); ok {
		v = list[0]
	}
	return v.(map[string]any)
}

func parse(t *testing.T, raw []byte) *guard.Workflow {
	t.Helper()
	w, err := guard.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Remove undoes Guard from the workflow alone: every fixture, guarded
// with each guard, comes back as it was exported.
func TestRemoveGivesTheExportBack(t *testing.T) {
	for _, file := range exports(t) {
		for _, mode := range []generator.Guard{generator.GuardAtMostOnce, generator.GuardLease} {
			t.Run(filepath.Base(file)+"/"+string(mode), func(t *testing.T) {
				res, raw := guardFile(t, file, generator.Options{ReserveOptions: generator.ReserveOptions{Guard: mode}})
				removed, err := guard.Remove(parse(t, res.Workflow), guard.RemoveOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if want, got := plain(t, raw), plain(t, removed.Workflow); !reflect.DeepEqual(want, got) {
					t.Errorf("removed differs from the export:\nexport  %s\nremoved %s", mustJSON(t, want), mustJSON(t, got))
				}
				if removed.GuardErrorWorkflow == "" || removed.UserErrorWorkflow != "" {
					t.Errorf("guard's error workflow %q, the user's %q; want guard's", removed.GuardErrorWorkflow, removed.UserErrorWorkflow)
				}
			})
		}
	}
}

// Edits made after guard stay: a node added after the user's first node,
// and a changed parameter.
func TestRemoveKeepsTheUsersEdits(t *testing.T) {
	res, _ := guardFile(t, "testdata/exports/v2-switch-http.json", generator.Options{})
	doc := plain(t, res.Workflow)
	for _, n := range doc["nodes"].([]any) {
		if m := n.(map[string]any); m["name"] == "Tell CRM" {
			m["parameters"].(map[string]any)["url"] = "http://crm.example/v2"
		}
	}
	removed, err := guard.Remove(parse(t, mustJSON(t, doc)), guard.RemoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(removed.Workflow), "http://crm.example/v2") {
		t.Error("the edit made after guard is gone")
	}
	if _, err := guard.Remove(parse(t, removed.Workflow), guard.RemoveOptions{}); !isRefused(err) {
		t.Errorf("Remove of a workflow without a guard: %v, want a refusal", err)
	}
}

func isRefused(err error) bool {
	var r *guard.RefusedError
	return errors.As(err, &r)
}

// A workflow that names an error workflow keeps it: guard needs its export,
// puts the release in front of its nodes (the Error Trigger's item handed
// on unchanged), and leaves the setting alone; a second workflow sharing it
// and the events table adds nothing, another table a second release;
// Remove gives both workflows back.
func TestGuardKeepsTheUsersErrorWorkflow(t *testing.T) {
	raw := readFile(t, "testdata/error-workflow/orders.json")
	alertsRaw := readFile(t, "testdata/error-workflow/alerts.json")
	opts := generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce, EventsTable: "orders_events"}}
	var need *guard.ErrorWorkflowNeededError
	if _, err := guard.Guard(parse(t, raw), guard.Options{Generate: opts}); !errors.As(err, &need) || need.ID != "AlertsWf0000001" {
		t.Fatalf("without the error workflow: %v, want ErrorWorkflowNeededError for AlertsWf0000001", err)
	}
	wrong := strings.ReplaceAll(string(alertsRaw), "AlertsWf0000001", "OtherWf00000001")
	if _, err := guard.Guard(parse(t, raw), guard.Options{Generate: opts, ErrorWorkflow: parse(t, []byte(wrong))}); !isRefused(err) {
		t.Errorf("with another error workflow: %v, want a refusal", err)
	}
	res, err := guard.Guard(parse(t, raw), guard.Options{Generate: opts, ErrorWorkflow: parse(t, alertsRaw)})
	if err != nil {
		t.Fatal(err)
	}
	after := read(t, res.Workflow)
	if after.Settings["errorWorkflow"] != "AlertsWf0000001" || !res.KeptErrorWorkflow || res.ErrorWorkflow != "AlertsWf0000001" {
		t.Errorf("settings.errorWorkflow %v, result %q kept %v; want the user's", after.Settings["errorWorkflow"], res.ErrorWorkflow, res.KeptErrorWorkflow)
	}
	alerts := read(t, res.Files[guard.FileErrorWorkflow])
	chain := func(d doc) []string {
		var out []string
		for name := "Error Trigger"; name != ""; {
			out = append(out, name)
			next := ""
			if c, ok := d.Connections[name].(map[string]any); ok {
				if outs := c["main"].([]any); len(outs) > 0 && len(outs[0].([]any)) > 0 {
					next = outs[0].([]any)[0].(map[string]any)["node"].(string)
				}
			}
			name = next
		}
		return out
	}
	want := []string{"Error Trigger", "Release idemhook keys (orders_events)", "Error data for your nodes (idemhook)", "Record Alert"}
	if got := chain(alerts); !reflect.DeepEqual(got, want) {
		t.Errorf("the error workflow runs %v, want %v", got, want)
	}
	release := alerts.node("Release idemhook keys (orders_events)")
	if q := release["parameters"].(map[string]any)["query"].(string); !strings.Contains(q, "orders_events") || !strings.Contains(q, "execution_id") || release["onError"] != "continueRegularOutput" {
		t.Errorf("the release: %v", release)
	}
	if code := alerts.node("Error data for your nodes (idemhook)")["parameters"].(map[string]any)["jsCode"].(string); !strings.Contains(code, `$("Error Trigger").all()`) {
		t.Errorf("the hand-on node does not give the trigger's items: %s", code)
	}
	if alerts.raw["id"] != "AlertsWf0000001" || alerts.raw["name"] != "Alerts to the on-call table" {
		t.Errorf("the error workflow is no longer the user's: %v %v", alerts.raw["id"], alerts.raw["name"])
	}

	// Another workflow sharing it and the table adds nothing; another table
	// a second release, before the hand-on node.
	other := strings.ReplaceAll(string(raw), "OrdersCrm000001", "OrdersCrm000002")
	same, err := guard.Guard(parse(t, []byte(other)), guard.Options{Generate: opts, ErrorWorkflow: parse(t, res.Files[guard.FileErrorWorkflow])})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain(t, same.Files[guard.FileErrorWorkflow]), plain(t, res.Files[guard.FileErrorWorkflow])) {
		t.Error("a second workflow on the same table changed the error workflow")
	}
	opts2 := opts
	opts2.EventsTable = "refunds_events"
	two, err := guard.Guard(parse(t, []byte(other)), guard.Options{Generate: opts2, ErrorWorkflow: parse(t, res.Files[guard.FileErrorWorkflow])})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"Error Trigger", "Release idemhook keys (orders_events)", "Release idemhook keys (refunds_events)", "Error data for your nodes (idemhook)", "Record Alert"}
	if got := chain(read(t, two.Files[guard.FileErrorWorkflow])); !reflect.DeepEqual(got, want) {
		t.Errorf("with two tables the error workflow runs %v, want %v", got, want)
	}

	// Remove: the workflow and its error workflow as exported.
	removed, err := guard.Remove(parse(t, res.Workflow), guard.RemoveOptions{ErrorWorkflow: parse(t, res.Files[guard.FileErrorWorkflow])})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain(t, raw), plain(t, removed.Workflow)) {
		t.Errorf("removed differs from the export:\n%s", removed.Workflow)
	}
	if !reflect.DeepEqual(plain(t, alertsRaw), plain(t, removed.ErrorWorkflow)) {
		t.Errorf("the error workflow differs from its export:\n%s", removed.ErrorWorkflow)
	}
	if removed.UserErrorWorkflow != "AlertsWf0000001" || removed.GuardErrorWorkflow != "" {
		t.Errorf("removed: user's %q, guard's %q", removed.UserErrorWorkflow, removed.GuardErrorWorkflow)
	}
	// Taking out one table's release of two keeps the other's.
	both, err := guard.Remove(parse(t, two.Workflow), guard.RemoveOptions{ErrorWorkflow: parse(t, two.Files[guard.FileErrorWorkflow])})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain(t, res.Files[guard.FileErrorWorkflow]), plain(t, both.ErrorWorkflow)) {
		t.Errorf("after removing the refunds guard the error workflow is not the orders guard's:\n%s", both.ErrorWorkflow)
	}
}

// A workflow whose own Error Trigger n8n runs when it fails (no setting)
// keeps it: the release goes in front of that trigger's nodes, and no
// error workflow is named or written.
func TestGuardKeepsTheWorkflowsOwnErrorTrigger(t *testing.T) {
	raw := readFile(t, "testdata/error-workflow/self.json")
	res, err := guard.Guard(parse(t, raw), guard.Options{Generate: generator.Options{ReserveOptions: generator.ReserveOptions{EventsTable: "shipments_events"}}})
	if err != nil {
		t.Fatal(err)
	}
	after := read(t, res.Workflow)
	if _, named := after.Settings["errorWorkflow"]; named || res.Files[guard.FileErrorWorkflow] != nil || !res.KeptErrorWorkflow {
		t.Errorf("settings %v, error workflow file %d bytes, kept %v; want none named and none written", after.Settings, len(res.Files[guard.FileErrorWorkflow]), res.KeptErrorWorkflow)
	}
	links := after.Connections["When It Fails"].(map[string]any)["main"].([]any)[0].([]any)
	if len(links) != 1 || links[0].(map[string]any)["node"] != "Release idemhook keys (shipments_events)" {
		t.Errorf("the Error Trigger leads to %v, want the release", links)
	}
	removed, err := guard.Remove(parse(t, res.Workflow), guard.RemoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain(t, raw), plain(t, removed.Workflow)) {
		t.Errorf("removed differs from the export:\n%s", removed.Workflow)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An export without an id (as the editor's copy and paste gives) and without
// an Error Trigger gets guard's own error workflow, named in its settings.
func TestGuardWithoutAnIDNamesItsErrorWorkflow(t *testing.T) {
	doc := plain(t, readFile(t, "testdata/exports/v2-switch-http.json"))
	delete(doc, "id")
	res, err := guard.Guard(parse(t, mustJSON(t, doc)), guard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ew := read(t, res.Workflow).Settings["errorWorkflow"]; ew == nil || ew != res.ErrorWorkflow || res.KeptErrorWorkflow || res.Files[guard.FileErrorWorkflow] == nil {
		t.Errorf("settings.errorWorkflow %v, result %q kept %v: want guard's own, written", ew, res.ErrorWorkflow, res.KeptErrorWorkflow)
	}
}
