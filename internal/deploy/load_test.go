package deploy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/n8napi"
)

func TestLoadOrdersCalledWorkflowsFirst(t *testing.T) {
	for _, opts := range []generator.Options{
		{},
		{Pattern: generator.PatternInbox},
		{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{Receiver: generator.ReceiverKeysvc}},
		{Hashing: generator.HashingKeysvc}, // no cleanup workflow: keysvc prunes its keys
	} {
		files, err := generator.Files(opts)
		if err != nil {
			t.Fatal(err)
		}
		ws, err := Load(files)
		if err != nil {
			t.Fatal(err)
		}
		want, err := generator.WorkflowFiles(opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != len(want) {
			t.Fatalf("%+v: loaded %d workflows, the generator wrote %d", opts, len(ws), len(want))
		}
		position := map[string]int{}
		for i, w := range ws {
			position[w.GeneratedID] = i
		}
		for _, wf := range want {
			i, ok := position[wf.ID]
			if !ok {
				t.Fatalf("%+v: %s (%s) not loaded", opts, wf.File, wf.ID)
			}
			if ws[i].File != wf.File || ws[i].WebhookPath != wf.WebhookPath {
				t.Errorf("%+v: loaded %s with path %q, want %s with %q", opts, ws[i].File, ws[i].WebhookPath, wf.File, wf.WebhookPath)
			}
			if ws[i].Doc.ID != "" || ws[i].Doc.Active {
				t.Errorf("%s: id or active kept; the API refuses them on create", wf.File)
			}
		}
		for i, w := range ws {
			for _, n := range w.Doc.Nodes {
				ref := subWorkflowRef(n)
				if ref == nil {
					continue
				}
				j, ok := position[ref["value"].(string)]
				if !ok || j >= i {
					t.Errorf("%s runs %v, which is not loaded before it", w.File, ref["value"])
				}
			}
		}
	}
}

func TestLoadRefuses(t *testing.T) {
	for name, files := range map[string]map[string][]byte{
		"no workflow": {"schema.sql": []byte("create table x ()"), "credentials.example.json": []byte(`[{"name":"x"}]`)},
		"no name":     {"a.json": []byte(`{"nodes":[],"connections":{}}`)},
		"cycle": {
			"a.json": []byte(`{"id":"A","name":"a","connections":{},"nodes":[{"type":"n8n-nodes-base.executeWorkflow","parameters":{"workflowId":{"value":"B"}}}]}`),
			"b.json": []byte(`{"id":"B","name":"b","connections":{},"nodes":[{"type":"n8n-nodes-base.executeWorkflow","parameters":{"workflowId":{"value":"A"}}}]}`),
		},
	} {
		if _, err := Load(files); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

func TestBindCredentials(t *testing.T) {
	pg := CredentialRef{Type: "postgres", Name: "Postgres (idemhook)"}
	creds := []n8napi.Credential{
		{ID: "1", Type: "postgres", Name: "Postgres (idemhook)"},
		{ID: "2", Type: "postgres", Name: "Postgres (other)"},
		{ID: "3", Type: "httpHeaderAuth", Name: "Postgres (idemhook)"},
	}
	twice := append(slices.Clone(creds), n8napi.Credential{ID: "4", Type: "postgres", Name: "Postgres (idemhook)"})
	for _, tc := range []struct {
		name   string
		creds  []n8napi.Credential
		picked []string
		want   string
		err    any
	}{
		{name: "one by name and type", creds: creds, want: "1"},
		{name: "missing", creds: creds[1:], err: new(*MissingCredentialError)},
		{name: "two of the name", creds: twice, err: new(*AmbiguousCredentialError)},
		{name: "two, one picked", creds: twice, picked: []string{"4"}, want: "4"},
		{name: "two, a foreign id picked", creds: twice, picked: []string{"2"}, err: new(*AmbiguousCredentialError)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bound, err := bindCredentials([]CredentialRef{pg}, tc.creds, tc.picked)
			if tc.err != nil {
				if err == nil || !errors.As(err, tc.err) {
					t.Fatalf("got %v, %v; want %T", bound, err, tc.err)
				}
				if a, ok := err.(*AmbiguousCredentialError); ok && !strings.Contains(a.Error(), "1, 4") {
					t.Errorf("%v: does not list the ids", a)
				}
				return
			}
			if err != nil || bound[pg] != tc.want {
				t.Fatalf("got %v, %v; want %s", bound, err, tc.want)
			}
		})
	}
}

func TestPrepareBindsAndRewrites(t *testing.T) {
	files, err := generator.Files(generator.Options{Pattern: generator.PatternInbox})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := Load(files)
	if err != nil {
		t.Fatal(err)
	}
	bound := map[CredentialRef]string{}
	for i, ref := range Credentials(ws) {
		bound[ref] = "cred-" + string(rune('a'+i))
	}
	assigned := map[string]string{}
	for i, w := range ws {
		doc, err := prepare(w, bound, assigned)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range doc.Nodes {
			creds, _ := n["credentials"].(map[string]any)
			for typ, v := range creds {
				ref := v.(map[string]any)
				if want := bound[CredentialRef{Type: typ, Name: ref["name"].(string)}]; ref["id"] != want {
					t.Errorf("%s %q: credential id %v, want %s", w.File, n["name"], ref["id"], want)
				}
			}
			if ref := subWorkflowRef(n); ref != nil && !strings.HasPrefix(ref["value"].(string), "n8n-") {
				t.Errorf("%s %q: runs %v, not the id n8n assigned", w.File, n["name"], ref["value"])
			}
		}
		assigned[w.GeneratedID] = "n8n-" + string(rune('0'+i))
	}
	// The generated document itself is left as it was.
	again, _ := Load(files)
	if !slices.EqualFunc(ws, again, func(a, b Workflow) bool {
		return a.GeneratedID == b.GeneratedID && len(a.Doc.Nodes) == len(b.Doc.Nodes)
	}) {
		t.Error("prepare changed the loaded workflows")
	}
	for _, w := range ws {
		for _, n := range w.Doc.Nodes {
			if ref := subWorkflowRef(n); ref != nil && strings.HasPrefix(ref["value"].(string), "n8n-") {
				t.Errorf("%s: prepare rewrote the loaded document", w.File)
			}
		}
	}
}
