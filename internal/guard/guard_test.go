package guard_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/guard"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/verify"
)

// exports lists the fixtures: exported workflows of the shapes real ones
// have, written for these tests.
func exports(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/exports/*.json")
	if err != nil || len(files) < 15 {
		t.Fatalf("%d fixtures (%v), want at least 15", len(files), err)
	}
	return files
}

// webhookOf names the Webhook a fixture guards (its first, but for the
// fixture with two).
func webhookOf(file string) string {
	if strings.Contains(file, "two-webhooks") {
		return "Stripe Hook"
	}
	return ""
}

type doc struct {
	Nodes       []map[string]any `json:"nodes"`
	Connections map[string]any   `json:"connections"`
	Settings    map[string]any   `json:"settings"`
	raw         map[string]any
}

func read(t *testing.T, raw []byte) doc {
	t.Helper()
	var d doc
	if err := json.Unmarshal(raw, &d); err != nil {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil || len(list) != 1 {
			t.Fatalf("not a workflow: %v", err)
		}
		return read(t, list[0])
	}
	json.Unmarshal(raw, &d.raw)
	return d
}

func (d doc) node(name string) map[string]any {
	for _, n := range d.Nodes {
		if n["name"] == name {
			return n
		}
	}
	return nil
}

func guardFile(t *testing.T, file string, o generator.Options) (*guard.Result, []byte) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	w, err := guard.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	res, err := guard.Guard(w, guard.Options{Generate: o, Webhook: webhookOf(file)})
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return res, raw
}

// Every fixture is guarded: verify finds the guard after the renamed
// Webhook; the user's nodes keep their names, types, parameters,
// credentials and connections, and move right only if they were right of
// the Webhook; the node named as the Webhook was gives the item back; the
// error workflow is named in the settings; nothing overlaps.
func TestGuardKeepsTheUsersNodes(t *testing.T) {
	for _, file := range exports(t) {
		for _, mode := range []generator.Guard{generator.GuardAtMostOnce, generator.GuardLease} {
			t.Run(filepath.Base(file)+"/"+string(mode), func(t *testing.T) {
				res, raw := guardFile(t, file, generator.Options{ReserveOptions: generator.ReserveOptions{Guard: mode}})
				before, after := read(t, raw), read(t, res.Workflow)
				hookName := webhookOf(file)
				if hookName == "" {
					for _, n := range before.Nodes {
						if n["type"] == "n8n-nodes-base.webhook" {
							hookName = n["name"].(string)
							break
						}
					}
				}
				if res.Restore != hookName || res.Webhook != hookName+" (raw body)" {
					t.Errorf("restore %q, webhook %q; want %q and %q", res.Restore, res.Webhook, hookName, hookName+" (raw body)")
				}
				hook := after.node(res.Webhook)
				if hook == nil || hook["parameters"].(map[string]any)["options"].(map[string]any)["rawBody"] != true || hook["webhookId"] == "" {
					t.Fatalf("the guarded Webhook: %v", hook)
				}
				if r := after.node(res.Restore); r == nil || r["type"] != "n8n-nodes-base.code" {
					t.Errorf("node %q does not give the item back: %v", res.Restore, r)
				}
				hookX := position(before.node(hookName))[0]
				for _, n := range before.Nodes {
					name := n["name"].(string)
					if name == hookName {
						continue
					}
					got := after.node(name)
					if got == nil {
						t.Errorf("node %q is gone", name)
						continue
					}
					for _, k := range []string{"type", "typeVersion", "parameters", "credentials", "onError", "webhookId"} {
						if !reflect.DeepEqual(normalise(n[k]), normalise(got[k])) {
							t.Errorf("node %q: %s changed from %v to %v", name, k, n[k], got[k])
						}
					}
					p, q := position(n), position(got)
					if (p[0] > hookX) != (q[0] > p[0]) || p[1] != q[1] {
						t.Errorf("node %q moved from %v to %v (the Webhook is at x %v)", name, p, q, hookX)
					}
					if name == res.Restore {
						continue
					}
					if want, got := normalise(before.Connections[name]), normalise(after.Connections[name]); name != hookName && !isLeaf(before, name) && !reflect.DeepEqual(want, got) {
						t.Errorf("the connections of %q changed: %v, now %v", name, want, got)
					}
				}
				if ew := after.Settings["errorWorkflow"]; ew == nil || !strings.Contains(string(res.Files[guard.FileErrorWorkflow]), `"id": "`+ew.(string)+`"`) {
					t.Errorf("settings.errorWorkflow %v does not name the error workflow written beside it", ew)
				}
				if before.Settings["executionOrder"] == nil && after.Settings["executionOrder"] != nil {
					t.Error("a legacy workflow was switched to executionOrder v1")
				}
				checkNoOverlap(t, after)
				// Every connection joins two nodes of the workflow: n8n
				// refuses a workflow that names a node it lacks.
				if again, err := guard.Parse(res.Workflow); err != nil {
					t.Errorf("the guarded workflow does not read back: %v", err)
				} else if _, err := guard.Guard(again, guard.Options{Webhook: strings.Replace(webhookOf(file), "Stripe", "Shopify", 1)}); err == nil || !strings.Contains(err.Error(), "already guarded") {
					t.Errorf("guarding the guarded workflow again: %v", err)
				}
				w := n8nWorkflow(t, res.Workflow)
				found, err := verify.Find(w)
				if err != nil {
					t.Fatalf("verify does not find the guard: %v", err)
				}
				if found.Webhook != res.Webhook {
					t.Errorf("verify found the guard after %q, want %q", found.Webhook, res.Webhook)
				}
				if biz := found.Business(); !slices.Contains(biz, res.Restore) && found.NewOutput >= 0 {
					t.Errorf("the new-event branch %v does not reach %q", biz, res.Restore)
				}
				for _, f := range []string{guard.FileErrorWorkflow, guard.FileCleanup, guard.FileSchema, guard.FileCredentials} {
					if len(res.Files[f]) == 0 {
						t.Errorf("%s is not written", f)
					}
				}
				if !strings.Contains(string(res.Files[guard.FileSchema]), "execution_id") {
					t.Error("schema.sql does not record the execution holding a key")
				}
			})
		}
	}
}

// isLeaf: the lease guard connects Mark Done after a last node.
func isLeaf(d doc, name string) bool {
	c, ok := d.Connections[name].(map[string]any)
	if !ok {
		return true
	}
	for _, o := range c["main"].([]any) {
		if len(o.([]any)) == 0 {
			return true
		}
	}
	return false
}

// The lease guard marks the key done after every end of the user's path,
// a branch of an If or a Switch that ends unconnected included; with
// lastNode, the node after Mark Done gives the last node's output back.
func TestLeaseMarksDoneAtEveryEnd(t *testing.T) {
	res, _ := guardFile(t, "testdata/exports/v2-switch-http.json", generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease}})
	after := read(t, res.Workflow)
	for _, end := range []string{"Tell CRM", "Payment Seen", "Other"} {
		if after.node("Mark Done after "+end) == nil {
			t.Errorf("no Mark Done after %q; inserted %v", end, res.Inserted)
		}
	}
	res, _ = guardFile(t, "testdata/exports/v2.1-lastnode-code.json", generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease}})
	after = read(t, res.Workflow)
	answer := after.node("Answer as Result")
	if answer == nil || !strings.Contains(answer["parameters"].(map[string]any)["jsCode"].(string), `return $("Result").all(0);`) {
		t.Errorf("lastNode: no node gives Result's output back after Mark Done: %v", answer)
	}
	res, _ = guardFile(t, "testdata/exports/v2.1-lastnode-code.json", generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce}})
	if slices.ContainsFunc(res.Inserted, func(n string) bool { return strings.HasPrefix(n, "Mark Done") }) {
		t.Errorf("the at-most-once guard marks done: %v", res.Inserted)
	}
}

// A user's node named like one of the guard's keeps its name and the
// references to it; the guard's node takes another name, and the guard's
// expressions follow it.
func TestGuardNamesDoNotCollide(t *testing.T) {
	// The fixture's user named a node "Reserve Key", the at-most-once
	// guard's reservation.
	res, _ := guardFile(t, "testdata/exports/name-collision.json", generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce}})
	after := read(t, res.Workflow)
	mine := after.node("Build Idempotency Key")
	if mine == nil || mine["type"] != "n8n-nodes-base.set" {
		t.Fatalf("the user's Build Idempotency Key: %v", mine)
	}
	respond := after.node("Respond")["parameters"].(map[string]any)["responseBody"].(string)
	if !strings.Contains(respond, "$('Build Idempotency Key').item.json.myKey") {
		t.Errorf("the user's reference changed: %s", respond)
	}
	ours := after.node("Build Idempotency Key (idemhook)")
	if ours == nil || ours["type"] != "n8n-nodes-base.code" {
		t.Fatalf("the guard's key node is not %q: inserted %v", "Build Idempotency Key (idemhook)", res.Inserted)
	}
	raw := string(res.Workflow)
	if !strings.Contains(raw, "$('Build Idempotency Key (idemhook)').item.json.key") {
		t.Error("the guard's answers do not read the guard's key node under its new name")
	}
	if after.node("Reserve Key (idemhook)") == nil || after.node("Reserve Key")["type"] != "n8n-nodes-base.noOp" {
		t.Errorf("Reserve Key: the user's node renamed, or the guard's not: %v", res.Inserted)
	}
}

// What guard refuses, with a sentence that says why.
func TestGuardRefuses(t *testing.T) {
	generated, err := os.ReadFile("../../templates/workflows/default/workflow.json")
	if err != nil {
		t.Fatal(err)
	}
	twoHooks, _ := os.ReadFile("testdata/exports/two-webhooks.json")
	cases := []struct {
		name string
		raw  []byte
		opts guard.Options
		says string
	}{
		{"GET only", fixture(t, "refused/get-only.json"), guard.Options{}, "answers GET only"},
		{"no Webhook", fixture(t, "refused/no-webhook.json"), guard.Options{}, "no Webhook trigger"},
		{"two Webhooks, none named", twoHooks, guard.Options{}, "name the one to guard with --webhook NAME"},
		{"a Webhook that is not there", twoHooks, guard.Options{Webhook: "Paddle Hook"}, `no enabled Webhook node is named "Paddle Hook"`},
		{"already guarded", generated, guard.Options{}, "already guarded"},
		{"malformed JSON", fixture(t, "refused/malformed.json"), guard.Options{}, "not JSON"},
		{"a connection to no node", fixture(t, "refused/dangling.json"), guard.Options{}, `connects to "Gone"`},
		{"two nodes of one name", fixture(t, "refused/duplicate-names.json"), guard.Options{}, `two nodes are named "Done"`},
		{"an array of two", []byte("[" + string(twoHooks) + "," + string(twoHooks) + "]"), guard.Options{}, "an array of 2 workflows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := guard.Parse(c.raw)
			if err == nil {
				_, err = guard.Guard(w, c.opts)
			}
			var refused *guard.RefusedError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("got %v, want a refusal saying %q", err, c.says)
			}
		})
	}
	// What guard writes is guarded: a second run refuses it.
	res, _ := guardFile(t, "testdata/exports/v2-respond-first.json", generator.Options{})
	w, err := guard.Parse(res.Workflow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := guard.Guard(w, guard.Options{}); err == nil || !strings.Contains(err.Error(), "already guarded") {
		t.Errorf("guarding twice: %v", err)
	}
	// Options that cannot apply to a user's workflow are option errors.
	w, _ = guard.Parse(fixture(t, "exports/v2-respond-first.json"))
	for _, o := range []generator.Options{{Hashing: generator.HashingKeysvc}, {ReserveOptions: generator.ReserveOptions{Guard: generator.GuardTransactional}}, {Preset: "nope"}} {
		var oe *generator.OptionError
		if _, err := guard.Guard(w, guard.Options{Generate: o}); !errors.As(err, &oe) {
			t.Errorf("%+v: %v, want an option error", o, err)
		}
	}
}

// CRLF and the API's form read as the same workflow as the plain export.
func TestGuardReadsExportsAsN8NWritesThem(t *testing.T) {
	for _, f := range []string{"crlf.json", "api-form.json"} {
		res, raw := guardFile(t, "testdata/exports/"+f, generator.Options{})
		if f == "crlf.json" && !strings.Contains(string(raw), "\r\n") {
			t.Fatal("the CRLF fixture has no CRLF")
		}
		after := read(t, res.Workflow)
		if f == "api-form.json" {
			for _, k := range []string{"tags", "shared", "versionId", "meta", "pinData", "createdAt"} {
				if _, ok := after.raw[k]; !ok {
					t.Errorf("%s: the field %q of the export is gone", f, k)
				}
			}
		}
	}
	res, _ := guardFile(t, "testdata/exports/v2-no-webhookid.json", generator.Options{})
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "no webhookId") }) {
		t.Errorf("a webhookId was added without a word: %v", res.Notes)
	}
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func n8nWorkflow(t *testing.T, raw []byte) n8napi.Workflow {
	t.Helper()
	var w n8napi.Workflow
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatal(err)
	}
	return w
}

func position(n map[string]any) [2]float64 {
	p, _ := n["position"].([]any)
	var out [2]float64
	for i := 0; i < 2 && i < len(p); i++ {
		out[i], _ = p[i].(float64)
	}
	return out
}

// normalise reads v as JSON does, so that 2 and 2.0 compare equal.
func normalise(v any) any {
	b, _ := json.Marshal(v)
	var out any
	json.Unmarshal(b, &out)
	return out
}

// checkNoOverlap: no two boxes intersect, as n8n draws them: a node about
// 100 × 100 px from its position, a sticky note its width × height.
func checkNoOverlap(t *testing.T, d doc) {
	t.Helper()
	size := func(n map[string]any) (float64, float64) {
		if n["type"] == "n8n-nodes-base.stickyNote" {
			p := n["parameters"].(map[string]any)
			w, _ := p["width"].(float64)
			h, _ := p["height"].(float64)
			return w, h
		}
		return 100, 100
	}
	for i, a := range d.Nodes {
		for _, b := range d.Nodes[i+1:] {
			p, q := position(a), position(b)
			aw, ah := size(a)
			bw, bh := size(b)
			if p[0] < q[0]+bw && q[0] < p[0]+aw && p[1] < q[1]+bh && q[1] < p[1]+ah {
				t.Errorf("%q at %v overlaps %q at %v", a["name"], p, b["name"], q)
			}
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
