package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/internal/n8napi"
)

// Workflow is an exported n8n workflow as guard edits it: every field of
// the file is kept, those guard does not know included (pinData, meta,
// tags, shared, versionId), and so is every field of every node.
type Workflow struct {
	doc         map[string]any
	nodes       []map[string]any
	connections map[string]any
}

// RefusedError says why guard will not edit a workflow, and what to do.
// Every error of Parse and Guard about the workflow itself is one.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

func refuse(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// maxExport bounds what Parse reads; real exports are far smaller.
const maxExport = 16 << 20

// Parse reads an export as n8n writes it: the editor's or the CLI's (an
// object, or an array of one object), or the public API's (with its extra
// top-level fields), with LF or CRLF line ends. It refuses, with a
// *RefusedError, what is not a workflow or what n8n itself would refuse to
// import: no nodes, a node without a name or type, two nodes of one name, a
// connection from or to a node that is not there.
func Parse(raw []byte) (*Workflow, error) {
	doc, err := decodeExport(raw)
	if err != nil {
		return nil, err
	}
	w := &Workflow{doc: doc}
	names, err := w.readNodes()
	if err != nil {
		return nil, err
	}
	if err := w.readConnections(names); err != nil {
		return nil, err
	}
	return w, nil
}

// decodeExport returns the one workflow object an export holds, refusing
// what is not JSON or holds no single object.
func decodeExport(raw []byte) (map[string]any, error) {
	if len(raw) > maxExport {
		return nil, refuse("the export is %d bytes; an n8n workflow export is at most %d MiB", len(raw), maxExport>>20)
	}
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, refuse("the file is not JSON: %v", err)
	}
	if dec.More() {
		return nil, refuse("the file holds more than one JSON value: give one exported workflow")
	}
	if list, ok := v.([]any); ok {
		if len(list) != 1 {
			return nil, refuse("the file is an array of %d workflows: guard edits one at a time (export each on its own)", len(list))
		}
		v = list[0]
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, refuse("the file is not an n8n workflow: want a JSON object with nodes and connections")
	}
	return doc, nil
}

// readNodes takes w's nodes from its document, refusing nodes n8n would
// not import, and returns their names.
func (w *Workflow) readNodes() (map[string]bool, error) {
	nodes, ok := w.doc["nodes"].([]any)
	if !ok || len(nodes) == 0 {
		return nil, refuse("the file has no nodes: it is not an exported n8n workflow")
	}
	names := map[string]bool{}
	for i, n := range nodes {
		node, ok := n.(map[string]any)
		if !ok {
			return nil, refuse("node %d is not an object", i+1)
		}
		name, _ := node["name"].(string)
		typ, _ := node["type"].(string)
		if strings.TrimSpace(name) == "" || typ == "" {
			return nil, refuse("node %d has no name or no type; n8n would not import it", i+1)
		}
		if names[name] {
			return nil, refuse("two nodes are named %q; n8n would not import the workflow", name)
		}
		names[name] = true
		w.nodes = append(w.nodes, node)
	}
	return names, nil
}

// readConnections takes w's connections from its document, refusing one
// from or to a node that is not among names.
func (w *Workflow) readConnections(names map[string]bool) error {
	switch c := w.doc["connections"].(type) {
	case nil:
		w.connections = map[string]any{}
	case map[string]any:
		w.connections = c
	default:
		return refuse("the file's connections are not an object")
	}
	for from, v := range w.connections {
		if !names[from] {
			return refuse("a connection leaves from %q, which is not a node of the workflow; n8n would not run it", from)
		}
		for _, t := range targetsOf(v) {
			if !names[t.node] {
				return refuse("node %q connects to %q, which is not a node of the workflow; n8n would not run it", from, t.node)
			}
		}
	}
	return nil
}

// Name is the workflow's name ("" when the export has none).
func (w *Workflow) Name() string { s, _ := w.doc["name"].(string); return s }

// ID is the workflow's id in the n8n it came from ("" when none).
func (w *Workflow) ID() string {
	if id, ok := w.doc["id"]; ok && id != nil {
		return fmt.Sprint(id)
	}
	return ""
}

// node returns the node called name, or nil.
func (w *Workflow) node(name string) map[string]any {
	for _, n := range w.nodes {
		if n["name"] == name {
			return n
		}
	}
	return nil
}

func (w *Workflow) names() []string {
	out := make([]string, len(w.nodes))
	for i, n := range w.nodes {
		out[i], _ = n["name"].(string)
	}
	return out
}

// target is one end of a connection: node, and the input it feeds.
type target struct {
	node  string
	input any
	typ   string
}

// targetsOf lists every target of a node's connections, main or not.
func targetsOf(v any) []target {
	var out []target
	byType, _ := v.(map[string]any)
	for typ, outputs := range byType {
		list, _ := outputs.([]any)
		for _, o := range list {
			links, _ := o.([]any)
			for _, l := range links {
				m, _ := l.(map[string]any)
				if name, ok := m["node"].(string); ok {
					out = append(out, target{node: name, input: m["index"], typ: typ})
				}
			}
		}
	}
	return out
}

// mainOutputs returns node's main outputs, each a list of links.
func (w *Workflow) mainOutputs(node string) [][]any {
	byType, _ := w.connections[node].(map[string]any)
	list, _ := byType["main"].([]any)
	out := make([][]any, len(list))
	for i, o := range list {
		out[i], _ = o.([]any)
	}
	return out
}

func (w *Workflow) setMainOutputs(node string, outs [][]any) {
	byType, _ := w.connections[node].(map[string]any)
	if byType == nil {
		byType = map[string]any{}
	}
	list := make([]any, len(outs))
	for i, o := range outs {
		if o == nil {
			o = []any{}
		}
		list[i] = o
	}
	byType["main"] = list
	w.connections[node] = byType
}

// reach lists the nodes reachable from start by main connections, start
// included, in breadth-first order.
func (w *Workflow) reach(start []string) []string {
	var out []string
	seen := map[string]bool{}
	queue := slices.Clone(start)
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
		for _, o := range w.mainOutputs(n) {
			for _, l := range o {
				if m, ok := l.(map[string]any); ok {
					if t, ok := m["node"].(string); ok {
						queue = append(queue, t)
					}
				}
			}
		}
	}
	return out
}

// n8n returns w as the public API's client reads workflows, for package
// verify's Find.
func (w *Workflow) n8n() (n8napi.Workflow, error) {
	raw, err := json.Marshal(w.doc)
	if err != nil {
		return n8napi.Workflow{}, err
	}
	var out n8napi.Workflow
	err = json.Unmarshal(raw, &out)
	return out, err
}

// nodeByID returns the node whose id is id, or nil.
func (w *Workflow) nodeByID(id string) map[string]any {
	for _, n := range w.nodes {
		if n["id"] == id {
			return n
		}
	}
	return nil
}

// deleteNode removes node, its connections and every link to it.
func (w *Workflow) deleteNode(name string) {
	w.nodes = slices.DeleteFunc(w.nodes, func(n map[string]any) bool { return n["name"] == name })
	delete(w.connections, name)
	for from, v := range w.connections {
		byType, _ := v.(map[string]any)
		touched := false
		for typ, outs := range byType {
			list, _ := outs.([]any)
			removed := false
			for i, o := range list {
				links, _ := o.([]any)
				kept := []any{}
				for _, l := range links {
					if m, ok := l.(map[string]any); !ok || m["node"] != name {
						kept = append(kept, l)
					}
				}
				removed = removed || len(kept) < len(links)
				list[i] = kept
			}
			// Outputs that led to the node only (guard opened them) are
			// dropped when they end the list, and so is a node's entry when
			// nothing is left of it.
			for removed && len(list) > 0 && len(list[len(list)-1].([]any)) == 0 {
				list = list[:len(list)-1]
			}
			touched = touched || removed
			if removed && len(list) == 0 {
				delete(byType, typ)
			} else {
				byType[typ] = list
			}
		}
		if touched && len(byType) == 0 {
			delete(w.connections, from)
		}
	}
}

// ErrorWorkflowID is the error workflow the workflow's settings name, or "".
func (w *Workflow) ErrorWorkflowID() string {
	settings, _ := w.doc["settings"].(map[string]any)
	id, _ := settings["errorWorkflow"].(string)
	return id
}
