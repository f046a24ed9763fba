// Package deploy puts idemhook's generated workflows into a running n8n
// through its public API: it binds their credentials by id, creates or
// updates each workflow by name, rewrites sub-workflow references to the
// ids n8n assigned, publishes them and proves each one live. Check proves
// the same without changing anything.
//
// The n8n CLI route (import:workflow) binds credentials by name and
// silently leaves a node unbound when two credentials share the name; the
// API route binds by id and refuses ambiguity instead.
package deploy

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"

	"github.com/idemhook/idemhook/internal/n8napi"
)

// Workflow is one generated workflow file.
type Workflow struct {
	File string
	// GeneratedID is the id in the file: sub-workflow references in the
	// other files point to it.
	GeneratedID string
	Doc         n8napi.Workflow
	// WebhookPath is the production path of its Webhook node, if any.
	WebhookPath string
	// TargetID, when set, is the workflow in n8n to update, whatever its
	// name (idemhook guard --apply edits a user's workflow in place).
	TargetID string
}

// Load reads the workflows among files (a generated folder: file name →
// bytes) and orders them so that every workflow comes after the ones it
// runs as sub-workflows. Files that are not workflows are skipped.
func Load(files map[string][]byte) ([]Workflow, error) {
	var out []Workflow
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if path.Ext(name) != ".json" {
			continue
		}
		var doc struct {
			n8napi.Workflow
			ID string `json:"id"`
		}
		if err := json.Unmarshal(files[name], &doc); err != nil || doc.Nodes == nil || doc.Connections == nil {
			continue // credentials.example.json, keysvc-endpoints.example.json
		}
		w := Workflow{File: name, GeneratedID: doc.ID, Doc: doc.Workflow}
		w.Doc.ID, w.Doc.Active = "", false
		if w.Doc.Name == "" {
			return nil, fmt.Errorf("%s: the workflow has no name", name)
		}
		for _, n := range w.Doc.Nodes {
			if n["type"] == webhookType {
				if p, ok := param(n, "path"); ok {
					w.WebhookPath = p
				}
			}
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no workflow among %d files", len(files))
	}
	return order(out)
}

const (
	webhookType     = "n8n-nodes-base.webhook"
	execWorkflowTyp = "n8n-nodes-base.executeWorkflow"
)

func param(n map[string]any, name string) (string, bool) {
	params, _ := n["parameters"].(map[string]any)
	s, ok := params[name].(string)
	return s, ok
}

// subWorkflowRef returns the Execute Workflow node's workflowId resource
// locator, or nil for any other node.
func subWorkflowRef(n map[string]any) map[string]any {
	if n["type"] != execWorkflowTyp {
		return nil
	}
	params, _ := n["parameters"].(map[string]any)
	ref, _ := params["workflowId"].(map[string]any)
	return ref
}

// order sorts ws so that a workflow follows those it references.
func order(ws []Workflow) ([]Workflow, error) {
	byID := map[string]int{}
	for i, w := range ws {
		if w.GeneratedID != "" {
			byID[w.GeneratedID] = i
		}
	}
	var out []Workflow
	state := make([]int, len(ws)) // 0 new, 1 visiting, 2 done
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 1:
			return fmt.Errorf("%s: workflows reference each other in a cycle", ws[i].File)
		case 2:
			return nil
		}
		state[i] = 1
		for _, id := range references(ws[i].Doc) {
			if j, ok := byID[id]; ok && j != i {
				if err := visit(j); err != nil {
					return err
				}
			}
		}
		state[i] = 2
		out = append(out, ws[i])
		return nil
	}
	for i := range ws {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// references lists the ids of the workflows w runs: its sub-workflows and
// its error workflow (settings.errorWorkflow).
func references(w n8napi.Workflow) []string {
	var out []string
	for _, n := range w.Nodes {
		if ref := subWorkflowRef(n); ref != nil {
			if id, ok := ref["value"].(string); ok {
				out = append(out, id)
			}
		}
	}
	if id, ok := w.Settings["errorWorkflow"].(string); ok && id != "" {
		out = append(out, id)
	}
	return out
}

// Credentials lists the credentials (type and name) the workflows' nodes
// use, each once, but for those a node names by id already (a user's own
// nodes in a workflow idemhook guard edited): deploy binds the others.
func Credentials(ws []Workflow) []CredentialRef {
	var out []CredentialRef
	for _, w := range ws {
		for _, n := range w.Doc.Nodes {
			creds, _ := n["credentials"].(map[string]any)
			for typ, v := range creds {
				ref, _ := v.(map[string]any)
				if id, _ := ref["id"].(string); id != "" {
					continue
				}
				name, _ := ref["name"].(string)
				k := CredentialRef{Type: typ, Name: name}
				if !slices.Contains(out, k) {
					out = append(out, k)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type+out[i].Name < out[j].Type+out[j].Name })
	return out
}

// CredentialRef names an n8n credential as a node refers to it.
type CredentialRef struct{ Type, Name string }
