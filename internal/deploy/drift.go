package deploy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/internal/fingerprint"
	"github.com/idemhook/idemhook/internal/n8napi"
)

// Node names that tell what a missing group of nodes was for; a missing
// node of a group is reported once, as the group.
var nodeGroups = []struct {
	nodes []string
	what  string
}{
	{[]string{"Prepare Signature Check", "Compute Signature", "Signature Valid?"}, "no signature check in front of the key"},
}

// Drift lists how got (a workflow as n8n holds it) differs from want (as
// the files describe it), one sentence each, node by node: nodes missing or
// extra, a node's type or version, each parameter that differs, its
// credentials, its error handling, its connections, and the workflow's
// settings. Node ids and positions, which n8n and the editor assign, are not
// compared. A credential's id is compared only when want names one (deploy
// binds ids; generated files bind by name); a sub-workflow reference is
// compared as want gives it, so give want the ids n8n assigned.
func Drift(want, got n8napi.Workflow) []string {
	var out []string
	wantNodes, gotNodes := byName(want.Nodes), byName(got.Nodes)
	reported := map[string]bool{}
	for _, g := range nodeGroups {
		for _, n := range g.nodes {
			if _, ok := wantNodes[n]; ok {
				if _, live := gotNodes[n]; !live {
					out = append(out, g.what)
					for _, m := range g.nodes {
						reported[m] = true
					}
					break
				}
			}
		}
	}
	for _, name := range sortedKeys(wantNodes) {
		w := wantNodes[name]
		g, ok := gotNodes[name]
		switch {
		case !ok && !reported[name]:
			out = append(out, fmt.Sprintf("%s: no such node (the options give a %s node)", name, shortType(w["type"])))
		case ok:
			out = append(out, nodeDrift(name, w, g)...)
		}
	}
	for _, name := range sortedKeys(gotNodes) {
		if _, ok := wantNodes[name]; !ok {
			out = append(out, fmt.Sprintf("%s: a %s node the options do not give", name, shortType(gotNodes[name]["type"])))
		}
	}
	if !reflect.DeepEqual(fingerprint.Connections(want.Connections), fingerprint.Connections(got.Connections)) {
		out = append(out, connectionDrift(want.Connections, got.Connections)...)
	}
	for _, k := range sortedKeys(want.Settings) {
		if !sameJSON(want.Settings[k], got.Settings[k]) {
			out = append(out, fmt.Sprintf("settings: %s is %s, the options give %s", k, jsonText(got.Settings[k]), jsonText(want.Settings[k])))
		}
	}
	return out
}

func nodeDrift(name string, w, g map[string]any) []string {
	var out []string
	if w["type"] != g["type"] {
		return []string{fmt.Sprintf("%s: a %s node, the options give a %s node", name, shortType(g["type"]), shortType(w["type"]))}
	}
	if !sameJSON(w["typeVersion"], g["typeVersion"]) {
		out = append(out, fmt.Sprintf("%s: typeVersion %v, the options give %v", name, g["typeVersion"], w["typeVersion"]))
	}
	wp, _ := w["parameters"].(map[string]any)
	gp, _ := g["parameters"].(map[string]any)
	for _, k := range unionKeys(wp, gp) {
		if !sameJSON(wp[k], gp[k]) {
			out = append(out, fmt.Sprintf("%s: %s differs%s", name, k, valueHint(wp[k], gp[k])))
		}
	}
	for _, k := range []string{"onError", "executeOnce", "alwaysOutputData", "webhookId", "disabled"} {
		if !sameJSON(w[k], g[k]) {
			out = append(out, fmt.Sprintf("%s: %s is %s, the options give %s", name, k, jsonText(g[k]), jsonText(w[k])))
		}
	}
	wc, _ := w["credentials"].(map[string]any)
	gc, _ := g["credentials"].(map[string]any)
	for _, typ := range unionKeys(wc, gc) {
		wr, _ := wc[typ].(map[string]any)
		gr, _ := gc[typ].(map[string]any)
		switch {
		case gr == nil:
			out = append(out, fmt.Sprintf("%s: no %s credential", name, typ))
		case wr == nil:
			out = append(out, fmt.Sprintf("%s: a %s credential the options do not give", name, typ))
		case wr["name"] != gr["name"]:
			out = append(out, fmt.Sprintf("%s: %s credential %s, the options give %s", name, typ, jsonText(gr["name"]), jsonText(wr["name"])))
		case wr["id"] != nil && wr["id"] != "" && wr["id"] != gr["id"]:
			out = append(out, fmt.Sprintf("%s: bound to %s credential %v, not %v", name, typ, gr["id"], wr["id"]))
		}
	}
	return out
}

// valueHint shows short values: "path differs (n8n has "a", the options
// give "b")"; long ones (a query, a script) are only named.
func valueHint(want, got any) string {
	w, g := jsonText(want), jsonText(got)
	if len(w) > 60 || len(g) > 60 {
		return ""
	}
	return fmt.Sprintf(" (n8n has %s, the options give %s)", g, w)
}

// connectionDrift names each node whose outgoing connections differ.
func connectionDrift(want, got map[string]any) []string {
	w, g := fingerprint.Connections(want), fingerprint.Connections(got)
	var out []string
	names := map[string]bool{}
	for k := range w {
		names[k] = true
	}
	for k := range g {
		names[k] = true
	}
	for _, n := range sortedKeys(names) {
		if !reflect.DeepEqual(w[n], g[n]) {
			out = append(out, fmt.Sprintf("%s: its connections differ (n8n: %s; the options: %s)", n, describeOutputs(g[n]), describeOutputs(w[n])))
		}
	}
	return out
}

func describeOutputs(outs [][]string) string {
	if len(outs) == 0 {
		return "none"
	}
	parts := make([]string, len(outs))
	for i, o := range outs {
		names := make([]string, len(o))
		for j, t := range o {
			names[j], _, _ = strings.Cut(t, "#")
		}
		parts[i] = fmt.Sprintf("%d → %s", i, strings.Join(names, ", "))
	}
	return strings.Join(parts, "; ")
}

func byName(nodes []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, n := range nodes {
		if name, ok := n["name"].(string); ok {
			out[name] = n
		}
	}
	return out
}

func shortType(t any) string {
	s, _ := t.(string)
	return strings.TrimPrefix(s, "n8n-nodes-base.")
}

// sameJSON compares two decoded JSON values as JSON: 2 and 2.0 are one
// number, a missing value and null are one.
func sameJSON(a, b any) bool {
	return jsonText(a) == jsonText(b)
}

func jsonText(v any) string {
	if v == nil {
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func unionKeys(a, b map[string]any) []string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return sortedKeys(keys)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
