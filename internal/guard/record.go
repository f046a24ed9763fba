package guard

import (
	"encoding/json"
	"fmt"
	"strings"
)

// record is what guard changed in a workflow, kept in the notes of the node
// that took the Webhook's name, so that Remove can undo it from the
// workflow alone: the user's edits since (their own nodes, parameters and
// connections) stay, and only what guard put in goes. Nodes are named by
// their ids where they have one (see nodeRef), so that renaming them does
// not lose them.
type record struct {
	Version int `json:"v"`
	// Webhook is the guarded Webhook; Name its name before guard.
	Webhook string `json:"webhook"`
	Name    string `json:"name"`
	// RawBody is its raw-body option before guard (nil: not set).
	RawBody        *any `json:"rawBody,omitempty"`
	NoOptions      bool `json:"noOptions,omitempty"`
	AddedWebhookID bool `json:"addedWebhookId,omitempty"`
	// Inserted are the nodes guard added; Shifted the user's nodes it moved
	// Shift px to the right.
	Inserted []string `json:"inserted"`
	Shifted  []string `json:"shifted,omitempty"`
	Shift    float64  `json:"shift"`
	// Settings are the settings guard set; SettingsBefore the values those
	// of them had; NoSettings that the export had no settings at all.
	Settings       []string       `json:"settings"`
	SettingsBefore map[string]any `json:"settingsBefore,omitempty"`
	NoSettings     bool           `json:"noSettings,omitempty"`
	// EventsTable is the table the guard reserves in; ErrorWorkflow the
	// user's error workflow that gives its keys up ("" when guard named its
	// own, recordSelf for the workflow's own Error Trigger).
	EventsTable   string `json:"eventsTable"`
	ErrorWorkflow string `json:"errorWorkflow,omitempty"`
}

const (
	recordVersion = 1
	recordSelf    = "self"
	// recordPrefix starts the notes line that holds the record.
	recordPrefix = "idemhook-guard-record: "
)

// keepIn writes the record into node's notes.
func (r record) keepIn(node map[string]any) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	node["notes"] = "Put in by idemhook guard: gives the nodes after it the item the Webhook gave before the guard.\n" +
		"`idemhook guard --remove` takes the guard out again with the line below: keep it.\n" + recordPrefix + string(b)
	return nil
}

// findRecord returns the node that keeps w's record, and the record.
func (w *Workflow) findRecord() (map[string]any, record, bool) {
	for _, n := range w.nodes {
		notes, _ := n["notes"].(string)
		_, line, found := strings.Cut(notes, recordPrefix)
		if !found {
			continue
		}
		line, _, _ = strings.Cut(line, "\n")
		var r record
		if json.Unmarshal([]byte(line), &r) == nil && r.Version == recordVersion {
			return n, r, true
		}
	}
	return nil, record{}, false
}

// nodeRef names a node in a record: "id:…", or "name:…" for a node without
// an id (legacy exports).
func nodeRef(n map[string]any) string {
	if id, _ := n["id"].(string); id != "" {
		return "id:" + id
	}
	return "name:" + fmt.Sprint(n["name"])
}

func (w *Workflow) byRef(ref string) map[string]any {
	if id, ok := strings.CutPrefix(ref, "id:"); ok {
		return w.nodeByID(id)
	}
	return w.node(strings.TrimPrefix(ref, "name:"))
}

// marshal writes w's nodes and connections back into its document and
// renders it as n8n's exports are laid out.
func (w *Workflow) marshal() ([]byte, error) {
	nodes := make([]any, len(w.nodes))
	for i, n := range w.nodes {
		nodes[i] = n
	}
	w.doc["nodes"] = nodes
	w.doc["connections"] = w.connections
	return marshal(w.doc)
}

// Recorded tells what guard recorded in w: the events table its guard
// reserves in, and the user's error workflow it put the release into (""
// when guard named one of its own; w's own id for its own Error Trigger).
// ok is false when w holds no guard record.
func (w *Workflow) Recorded() (eventsTable, errorWorkflow string, ok bool) {
	_, rec, ok := w.findRecord()
	if rec.ErrorWorkflow == recordSelf {
		rec.ErrorWorkflow = w.ID()
	}
	return rec.EventsTable, rec.ErrorWorkflow, ok
}
