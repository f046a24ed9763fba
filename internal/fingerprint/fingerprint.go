// Package fingerprint digests what an n8n workflow does, so that a workflow
// idemhook generated can be told from one a user edited after it was
// deployed, whatever idemhook version generated it.
package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
)

// Workflow is the part of an n8n workflow document a fingerprint reads, as
// n8n's public API and its exports write it.
type Workflow struct {
	Nodes       []map[string]any `json:"nodes"`
	Connections map[string]any   `json:"connections"`
	Settings    map[string]any   `json:"settings"`
}

// Of is a digest of what w does: its nodes (but sticky notes),
// each node's type, version, parameters, credentials by name, error
// handling and webhook id, its connections and its settings. What n8n or
// the editor assigns (node ids, positions, credential ids, a sub-workflow's
// id) and what only explains (sticky notes, a node's notes) are left out,
// so a workflow keeps its fingerprint through an import, a deploy and a
// move on the canvas, and loses it with any edit that changes what it does.
// idemhook writes the fingerprint of each workflow it generates into the
// workflow (Note); `idemhook check` compares it with the live
// workflow's own to tell a workflow an older idemhook generated from one a
// user edited.
func Of(w Workflow) string {
	type canonicalNode struct {
		Name, Type                             string
		TypeVersion                            any
		Parameters                             any
		Credentials                            map[string]any
		OnError, ExecuteOnce, AlwaysOutputData any
		WebhookID, Disabled                    any
	}
	var nodes []canonicalNode
	for _, n := range w.Nodes {
		if n["type"] == stickyNoteType {
			continue
		}
		creds := map[string]any{}
		if c, ok := n["credentials"].(map[string]any); ok {
			for typ, ref := range c {
				r, _ := ref.(map[string]any)
				creds[typ] = r["name"]
			}
		}
		params := n["parameters"]
		if p, ok := params.(map[string]any); ok && n["type"] == executeWorkflowType {
			params = withoutKey(p, "workflowId") // the id n8n assigned to the sub-workflow
		}
		name, _ := n["name"].(string)
		typ, _ := n["type"].(string)
		nodes = append(nodes, canonicalNode{name, typ, n["typeVersion"], params, creds,
			n["onError"], n["executeOnce"], n["alwaysOutputData"], n["webhookId"], n["disabled"]})
	}
	slices.SortFunc(nodes, func(a, b canonicalNode) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	raw, _ := json.Marshal(struct {
		Nodes       []canonicalNode
		Connections map[string][][]string
		Settings    map[string]any
	}{nodes, Connections(w.Connections), w.Settings})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// Note is the text idemhook puts in the notes of a generated
// workflow's first node, for the fingerprint of the workflow it generated.
func Note(fingerprint string) string {
	return "idemhook fingerprint " + fingerprint + ": `idemhook check` compares it with this workflow's nodes to tell an older idemhook's workflow from an edit."
}

var fingerprintNote = regexp.MustCompile(`\bidemhook fingerprint ([0-9a-f]{16})\b`)

// Recorded is the fingerprint written in the notes of one of w's
// nodes when idemhook generated it, or "" when none is.
func Recorded(w Workflow) string {
	for _, n := range w.Nodes {
		if notes, ok := n["notes"].(string); ok {
			if m := fingerprintNote.FindStringSubmatch(notes); m != nil {
				return m[1]
			}
		}
	}
	return ""
}

const (
	stickyNoteType      = "n8n-nodes-base.stickyNote"
	executeWorkflowType = "n8n-nodes-base.executeWorkflow"
)

func withoutKey(m map[string]any, key string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// Connections reads n8n connections as node → output → sorted
// "target#input", dropping empty outputs at the end (the editor keeps some,
// the generator none): the same wiring written in any order reads the same.
func Connections(conns map[string]any) map[string][][]string {
	out := map[string][][]string{}
	for from, v := range conns {
		types, _ := v.(map[string]any)
		outputs, _ := types["main"].([]any)
		var list [][]string
		for _, o := range outputs {
			links, _ := o.([]any)
			var targets []string
			for _, l := range links {
				lm, _ := l.(map[string]any)
				targets = append(targets, fmt.Sprintf("%v#%v", lm["node"], lm["index"]))
			}
			sort.Strings(targets)
			list = append(list, targets)
		}
		for len(list) > 0 && len(list[len(list)-1]) == 0 {
			list = list[:len(list)-1]
		}
		if len(list) > 0 {
			out[from] = list
		}
	}
	return out
}
