package guard

import "fmt"

// RemoveOptions tune Remove.
type RemoveOptions struct {
	// ErrorWorkflow is the user's error workflow that guard put the key's
	// release into (the one the settings name), to take the release out of
	// it; nil leaves it alone.
	ErrorWorkflow *Workflow
	// KeepRelease leaves the release where it is: another guarded workflow
	// reserves in the same table and shares that error workflow.
	KeepRelease bool
}

// Removed is a workflow with the guard taken out.
type Removed struct {
	// Workflow is the workflow as it was before guard, with the user's
	// edits since kept.
	Workflow []byte
	// EventsTable is the table the guard reserved in.
	EventsTable string
	// UserErrorWorkflow is the id of the user's error workflow that held
	// the release ("" when guard had named its own), ErrorWorkflow that
	// workflow without it (nil when it was not given, or KeepRelease).
	UserErrorWorkflow string
	ErrorWorkflow     []byte
	// GuardErrorWorkflow is the id of the error workflow guard wrote, which
	// nothing needs any more ("" when the user's was kept).
	GuardErrorWorkflow string
}

// Remove takes the guard out of w, from what the guard recorded in the
// workflow itself (see record): its nodes go, the Webhook gets its name,
// options and connections back, the user's nodes move back left, and the
// settings guard set get their values before it. It refuses, with a
// *RefusedError, a workflow that holds no guard record (not guarded, or
// guarded by an idemhook without one), and one whose Webhook is gone.
func Remove(w *Workflow, opts RemoveOptions) (*Removed, error) {
	restore, rec, ok := w.findRecord()
	if !ok {
		return nil, refuse("the workflow holds no idemhook guard record: it is not guarded, or was guarded by an idemhook older than --remove (import the backup --apply saved, or the export you guarded)")
	}
	hook := w.byRef(rec.Webhook)
	if hook == nil {
		return nil, refuse("the guarded Webhook (%s) is no longer in the workflow: import the backup --apply saved, or the export you guarded", rec.Webhook)
	}
	out := &Removed{EventsTable: rec.EventsTable}
	settings, _ := w.doc["settings"].(map[string]any)
	if rec.ErrorWorkflow == "" {
		out.GuardErrorWorkflow, _ = settings["errorWorkflow"].(string)
	}
	if err := w.takeOutGuardNodes(restore, hook, rec); err != nil {
		return nil, err
	}
	restoreWebhookOptions(hook, rec)
	w.moveBack(rec)
	w.restoreSettings(settings, rec)
	if err := w.takeOutRelease(rec, opts, out); err != nil {
		return nil, err
	}
	var err error
	if out.Workflow, err = w.marshal(); err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	return out, nil
}

// takeOutGuardNodes deletes the nodes guard inserted, and gives the Webhook
// its name back, leading to the nodes the restore node led to.
func (w *Workflow) takeOutGuardNodes(restore, hook map[string]any, rec record) error {
	targets := firstTargets(w, restore["name"].(string))
	for _, ref := range rec.Inserted {
		if n := w.byRef(ref); n != nil {
			w.deleteNode(n["name"].(string))
		}
	}
	hookName := hook["name"].(string)
	if other := w.node(rec.Name); other != nil && hookName != rec.Name {
		return refuse("a node is named %q, the name the Webhook had before guard: rename it first", rec.Name)
	}
	w.rename(hookName, rec.Name)
	w.setMainOutputs(rec.Name, [][]any{targets})
	return nil
}

// restoreWebhookOptions gives the Webhook its raw-body option as it was
// before guard, and drops the options object and the webhookId guard added.
func restoreWebhookOptions(hook map[string]any, rec record) {
	params, _ := hook["parameters"].(map[string]any)
	options, _ := params["options"].(map[string]any)
	if rec.RawBody == nil {
		delete(options, "rawBody")
	} else if options != nil {
		options["rawBody"] = *rec.RawBody
	}
	if rec.NoOptions && len(options) == 0 {
		delete(params, "options")
	}
	if rec.AddedWebhookID {
		delete(hook, "webhookId")
	}
}

// moveBack moves the user's nodes guard moved right back where they were.
func (w *Workflow) moveBack(rec record) {
	for _, ref := range rec.Shifted {
		if n := w.byRef(ref); n != nil {
			p := position(n)
			setPosition(n, p[0]-rec.Shift, p[1])
		}
	}
}

// restoreSettings gives the settings guard set the values they had before
// it, and drops the settings guard added to an export that had none.
func (w *Workflow) restoreSettings(settings map[string]any, rec record) {
	for _, k := range rec.Settings {
		if v, ok := rec.SettingsBefore[k]; ok {
			settings[k] = v
		} else {
			delete(settings, k)
		}
	}
	if rec.NoSettings && len(settings) == 0 {
		delete(w.doc, "settings")
	}
}

// takeOutRelease takes the key's release out of the error workflow guard
// put it into, unless opts keep it there: the workflow's own Error Trigger
// path, or the user's error workflow when opts give it, rendered into out.
func (w *Workflow) takeOutRelease(rec record, opts RemoveOptions, out *Removed) error {
	switch {
	case rec.ErrorWorkflow == recordSelf:
		if !opts.KeepRelease {
			w.removeRelease(rec.EventsTable)
		}
	case rec.ErrorWorkflow != "":
		out.UserErrorWorkflow = rec.ErrorWorkflow
		if x := opts.ErrorWorkflow; x != nil && !opts.KeepRelease {
			if x.ID() != rec.ErrorWorkflow {
				return refuse("the error workflow given is %s (%q), but the guard put its release into %s", x.ID(), x.Name(), rec.ErrorWorkflow)
			}
			if !x.removeRelease(rec.EventsTable) {
				return refuse("error workflow %s (%q) holds no release of %s: it is not the one guard put it into", x.ID(), x.Name(), rec.EventsTable)
			}
			var err error
			if out.ErrorWorkflow, err = x.marshal(); err != nil {
				return err
			}
		}
	}
	return nil
}
