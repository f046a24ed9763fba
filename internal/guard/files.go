package guard

import (
	"encoding/json"
	"fmt"

	"github.com/idemhook/idemhook/internal/generator"
)

// markDoneAfterLastNodes puts the lease guard's Mark Done after every end
// of the user's path: each node of it with no output connected, and each
// unconnected output of an If or Switch (a branch that ends there). An
// error output is not an end: the key's lease expires, and the provider's
// retry runs the event again. With lastNode, a Code node after Mark Done
// gives the last node's output back, so that the answer does not change.
func (w *Workflow) markDoneAfterLastNodes(res *Result, template []byte, mode generator.ResponseMode, taken map[string]bool) error {
	path := w.reach([]string{res.Restore})
	for _, name := range path {
		if name == res.Restore {
			continue
		}
		n := w.node(name)
		outs := w.mainOutputs(name)
		for _, out := range openOutputs(n, outs) {
			done := map[string]any{}
			if err := json.Unmarshal(template, &done); err != nil {
				return err
			}
			label := name
			if out > 0 {
				label = fmt.Sprintf("%s (output %d)", name, out+1)
			}
			done["name"] = unique("Mark Done after "+label, taken)
			done["id"] = generator.UUIDFrom("mark-done/" + res.Webhook + "/" + done["name"].(string))
			p := position(n)
			setPosition(done, p[0]+columnWidth, p[1]+float64(out)*180)
			w.nodes = append(w.nodes, done)
			res.Inserted = append(res.Inserted, done["name"].(string))
			for len(outs) <= out {
				outs = append(outs, nil)
			}
			outs[out] = append(outs[out], map[string]any{"node": done["name"], "type": "main", "index": 0})
			w.setMainOutputs(name, outs)
			if mode != generator.LastNode {
				continue
			}
			answer := map[string]any{
				"id": generator.UUIDFrom("answer/" + res.Webhook + "/" + label), "name": unique("Answer as "+label, taken),
				"type": "n8n-nodes-base.code", "typeVersion": generator.TypeVersions["n8n-nodes-base.code"],
				"position": []any{p[0] + 2*columnWidth, p[1] + float64(out)*180},
				"parameters": map[string]any{"mode": "runOnceForAllItems", "language": "javaScript",
					"jsCode": fmt.Sprintf("// idemhook guard: the answer is the output of the last node that ran;\n"+
						"// give %s's back, which Mark Done took.\nreturn $(%s).all(%d);\n", jsString(name), jsString(name), out)},
			}
			w.nodes = append(w.nodes, answer)
			res.Inserted = append(res.Inserted, answer["name"].(string))
			w.setMainOutputs(done["name"].(string), [][]any{{map[string]any{"node": answer["name"], "type": "main", "index": 0}}})
		}
	}
	return nil
}

// openOutputs lists the outputs of n that end its branch: its output 0 when
// nothing is connected to it, or the unconnected outputs of an If (2) or a
// Switch (one per rule, and the fallback when it has its own). An error
// output (the last, with "continueErrorOutput") is never one.
func openOutputs(n map[string]any, outs [][]any) []int {
	count := 1
	params, _ := n["parameters"].(map[string]any)
	switch n["type"] {
	case "n8n-nodes-base.if":
		count = 2
	case "n8n-nodes-base.switch":
		rules, _ := params["rules"].(map[string]any)
		values, _ := rules["values"].([]any)
		count = len(values)
		if opts, _ := params["options"].(map[string]any); opts["fallbackOutput"] == "extra" {
			count++
		}
	}
	var open []int
	for i := range count {
		if i >= len(outs) || len(outs[i]) == 0 {
			open = append(open, i)
		}
	}
	return open
}

// companions writes the files that go beside a guarded workflow.
func (res *Result) companions(o generator.Options, frag generator.Fragment) error {
	res.Files[FileSchema] = []byte(frag.Schema)
	cleanup, err := generator.CleanupWorkflow(o)
	if err != nil {
		return err
	}
	res.Files[FileCleanup] = cleanup
	creds, err := generator.CredentialsExample(o)
	if err != nil {
		return err
	}
	res.Files[FileCredentials] = creds
	return nil
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
