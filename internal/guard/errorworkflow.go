package guard

import (
	"encoding/json"
	"fmt"

	"github.com/idemhook/idemhook/internal/generator"
)

// A workflow that already has an error workflow keeps it: n8n runs one
// error workflow per failed execution, the one the settings name (or,
// without the setting, the workflow itself when it holds an Error
// Trigger), so guard puts the key's release in front of that workflow's own
// nodes instead of naming one of its own. After its Error Trigger come the
// release (which goes on when it fails itself) and a Code node that hands
// the user's nodes the Error Trigger's item, unchanged: they run as before,
// with the same execution and workflow data, once the key is given up.

const typeErrorTrigger = "n8n-nodes-base.errorTrigger"

// errorTrigger returns the Error Trigger n8n starts w at when it runs it as
// an error workflow (the last of its Error Triggers, as n8n picks), refusing
// a workflow with none or with several.
func (w *Workflow) errorTrigger(what string) (map[string]any, error) {
	var found []map[string]any
	for _, n := range w.nodes {
		if n["type"] == typeErrorTrigger && n["disabled"] != true {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return nil, refuse("%s has no Error Trigger: n8n runs none of it when an execution fails; give it one, or clear the workflow's error workflow setting", what)
	case 1:
		return found[0], nil
	}
	return nil, refuse("%s has %d Error Triggers, and n8n starts at the last one only: keep one", what, len(found))
}

// hasErrorTrigger tells whether n8n would run w itself when it fails and
// its settings name no error workflow.
func (w *Workflow) hasErrorTrigger() bool {
	for _, n := range w.nodes {
		if n["type"] == typeErrorTrigger && n["disabled"] != true {
			return true
		}
	}
	return false
}

// releaseIDs are the ids of the nodes guard puts into an error workflow for
// an events table: the release, and the Code node after the releases that
// gives the user's nodes the trigger's item.
func releaseIDs(table string) (release, handOn string) {
	return generator.UUIDFrom("error-workflow-release/" + table), generator.UUIDFrom("error-workflow-hand-on")
}

// addRelease puts frag's release for table after x's Error Trigger, in
// front of x's own nodes. It reports false when x releases that table's
// keys already (another guarded workflow shares it).
func (x *Workflow) addRelease(what string, releaseNode []byte, table string) (bool, error) {
	trigger, err := x.errorTrigger(what)
	if err != nil {
		return false, err
	}
	releaseID, handOnID := releaseIDs(table)
	if x.nodeByID(releaseID) != nil {
		return false, nil
	}
	taken := map[string]bool{}
	for _, n := range x.names() {
		taken[n] = true
	}
	tname := trigger["name"].(string)
	p := position(trigger)
	release := map[string]any{}
	if err := json.Unmarshal(releaseNode, &release); err != nil {
		return false, err
	}
	release["id"] = releaseID
	release["name"] = unique(fmt.Sprintf("Release idemhook keys (%s)", table), taken)
	release["notes"] = "Put in by idemhook guard: gives the key of the failed execution up, so the provider's retry is processed; then your nodes run as before. idemhook guard --remove takes it out."

	handOn := x.nodeByID(handOnID)
	if handOn == nil {
		// The first release: T → release → hand-on → the user's nodes.
		handOn = map[string]any{
			"id": handOnID, "name": unique("Error data for your nodes (idemhook)", taken), "type": "n8n-nodes-base.code",
			"typeVersion": generator.TypeVersions["n8n-nodes-base.code"],
			"parameters": map[string]any{"mode": "runOnceForAllItems", "language": "javaScript",
				"jsCode": fmt.Sprintf("// idemhook guard: the keys are given up; your nodes get %s's item, as before.\nreturn $(%s).all().map((item, i) => ({ json: item.json, pairedItem: { item: i } }));\n", tname, jsString(tname))},
		}
		x.shift(x.reach(targetNames(firstTargets(x, tname))), 2*columnWidth)
		setPosition(release, p[0]+columnWidth, p[1])
		setPosition(handOn, p[0]+2*columnWidth, p[1])
		x.nodes = append(x.nodes, release, handOn)
		x.setMainOutputs(handOn["name"].(string), [][]any{firstTargets(x, tname)})
		x.setMainOutputs(release["name"].(string), [][]any{{link(handOn["name"].(string))}})
		x.setMainOutputs(tname, [][]any{{link(release["name"].(string))}})
		return true, nil
	}
	// Another table's release is there: the new one goes last, before the
	// hand-on node.
	hname := handOn["name"].(string)
	for _, n := range x.nodes {
		name := n["name"].(string)
		outs := x.mainOutputs(name)
		if len(outs) == 0 || len(outs[0]) == 0 || outs[0][0].(map[string]any)["node"] != hname {
			continue
		}
		hp := position(handOn)
		setPosition(release, hp[0], hp[1]+160)
		x.nodes = append(x.nodes, release)
		x.setMainOutputs(release["name"].(string), [][]any{{link(hname)}})
		x.setMainOutputs(name, [][]any{{link(release["name"].(string))}})
		return true, nil
	}
	return false, fmt.Errorf("guard: %s: nothing leads to %q", what, hname)
}

// removeRelease takes table's release out of x, and the hand-on node with
// the last release, leaving x as it was before guard. It reports false when
// x has no release of table.
func (x *Workflow) removeRelease(table string) bool {
	releaseID, handOnID := releaseIDs(table)
	release := x.nodeByID(releaseID)
	if release == nil {
		return false
	}
	x.bypass(release["name"].(string))
	handOn := x.nodeByID(handOnID)
	if handOn == nil {
		return true
	}
	hname := handOn["name"].(string)
	for _, n := range x.nodes {
		if n["type"] == typeErrorTrigger {
			if outs := x.mainOutputs(n["name"].(string)); len(outs) > 0 && len(outs[0]) == 1 && outs[0][0].(map[string]any)["node"] == hname {
				x.shift(x.reach(targetNames(firstTargets(x, hname))), -2*columnWidth)
				x.bypass(hname)
				return true
			}
		}
	}
	return true
}

// bypass deletes node, its predecessors' links to it going to its first
// output's targets instead.
func (w *Workflow) bypass(node string) {
	targets := firstTargets(w, node)
	for _, v := range w.connections {
		byType, _ := v.(map[string]any)
		list, _ := byType["main"].([]any)
		for i, o := range list {
			links, _ := o.([]any)
			var kept []any
			for _, l := range links {
				if l.(map[string]any)["node"] == node {
					kept = append(kept, targets...)
				} else {
					kept = append(kept, l)
				}
			}
			if kept == nil {
				kept = []any{}
			}
			list[i] = kept
		}
	}
	w.deleteNode(node)
}

// shift moves the nodes named dx to the right.
func (w *Workflow) shift(names []string, dx float64) {
	for _, name := range names {
		if n := w.node(name); n != nil {
			p := position(n)
			setPosition(n, p[0]+dx, p[1])
		}
	}
}

func targetNames(links []any) []string {
	var out []string
	for _, l := range links {
		if m, ok := l.(map[string]any); ok {
			if name, ok := m["node"].(string); ok {
				out = append(out, name)
			}
		}
	}
	return out
}

func link(node string) map[string]any {
	return map[string]any{"node": node, "type": "main", "index": 0}
}
