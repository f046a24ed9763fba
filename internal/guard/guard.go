// Package guard puts idemhook's guard into a workflow a user already runs:
// between its Webhook trigger and the nodes after it, the key is built from
// the exact bytes, reserved once in PostgreSQL, and a duplicate is answered
// without running the user's nodes; a new event reaches them exactly as the
// Webhook gave it before.
//
// The Webhook node is renamed (NAME (raw body)) and keeps the raw body, which
// the key needs; a node of the guard's takes the Webhook's old name and gives
// the user's nodes the item the Webhook gave without the raw-body option, so
// that $('NAME').item, $node["NAME"] and $input all read what they read
// before (see the restore script for what it undoes). The reservation
// records the n8n execution holding the key, and the workflow's error
// workflow (written beside it) gives the key up when that execution fails,
// wherever in the user's nodes it failed; with the lease guard, the key is
// also marked done after each last node of the user's path.
package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/verify"
	"github.com/tidwall/pretty"
)

// Options tune Guard: the generate options that apply (key, preset,
// signature, guard mode, events table, credential, retention, execution
// settings) and the Webhook to guard when the workflow has several.
type Options struct {
	Generate generator.Options
	Webhook  string
	// ErrorWorkflow is the workflow's own error workflow, the one its
	// settings name: guard puts the key's release in front of its nodes.
	// Guard needs it when the settings name one (other than the workflow
	// itself), and fails with an *ErrorWorkflowNeededError without it.
	ErrorWorkflow *Workflow
}

// ErrorWorkflowNeededError is Guard's answer to a workflow whose settings
// name an error workflow it was not given: the release goes into that
// workflow, so guard needs its export (live, the CLI reads it by ID).
type ErrorWorkflowNeededError struct{ ID string }

func (e *ErrorWorkflowNeededError) Error() string {
	return fmt.Sprintf("the workflow's settings run error workflow %s: give its export with --error-workflow FILE; guard puts the key's release in front of its nodes, and the workflow keeps naming it", e.ID)
}

// Result is a guarded workflow and the files that go with it.
type Result struct {
	// Workflow is the guarded workflow, importable as the original was.
	Workflow []byte
	// Files go beside it: the error workflow, the cleanup workflow,
	// schema.sql and credentials.example.json, by file name.
	Files map[string][]byte
	// Inserted names the nodes guard added, in the workflow's order.
	Inserted []string
	// ErrorWorkflow is the error workflow a failed execution runs and that
	// gives its key up: the user's own (its id, or the workflow's own for
	// an Error Trigger of its own), now with the release in front of its
	// nodes, or guard's (Files[FileErrorWorkflow] holds the file to import
	// in both first cases). KeptErrorWorkflow tells which.
	ErrorWorkflow     string
	KeptErrorWorkflow bool
	// Webhook is the guarded trigger's new name; Restore the node that took
	// its old one.
	Webhook, Restore string
	// Notes say what the user should know: a webhookId added, what the
	// response mode means for a duplicate, what the raw-body option changes.
	Notes []string
}

// Files written beside a guarded workflow.
const (
	FileErrorWorkflow = "release-on-failure-workflow.json"
	FileCleanup       = generator.FileCleanup
	FileSchema        = "schema.sql"
	FileCredentials   = "credentials.example.json"
)

const webhookType = "n8n-nodes-base.webhook"

// Guard returns w with the guard inserted after its Webhook (opts.Webhook
// when it has several). It refuses, with a *RefusedError, a workflow
// without a Webhook trigger, with several and none chosen, one whose
// Webhook answers GET only or streams its answer, one with nothing after the
// Webhook, one that is already guarded (found as idemhook verify finds a
// guard), and one whose settings name an error workflow of their own. An
// invalid option is a *generator.OptionError.
func Guard(w *Workflow, opts Options) (*Result, error) {
	gd, err := w.guardable(opts)
	if err != nil {
		return nil, err
	}
	if err := gd.layOut(); err != nil {
		return nil, err
	}
	if err := gd.rewire(); err != nil {
		return nil, err
	}
	return gd.result()
}

// guarding is one Guard call at work: the Webhook it guards and what the
// refusals found out about it, the guard's nodes as generated and named,
// and the record and result it fills in as it goes.
type guarding struct {
	w    *Workflow
	opts Options
	// hook is the Webhook guarded, params and hookOptions its parameters
	// and their options, hookName its name before guard, and first the
	// links to the user's first nodes after it.
	hook, params, hookOptions map[string]any
	hookName                  string
	mode                      generator.ResponseMode
	first                     []any
	// settings are the workflow's; ownErrorWorkflow the error workflow
	// they named before guard.
	settings         map[string]any
	ownErrorWorkflow string
	// g are the generate options the guard is made with, seed what its
	// ids derive from, frag the guard and guardDoc its workflow.
	g        generator.Options
	seed     string
	frag     generator.Fragment
	guardDoc struct {
		Nodes       []map[string]any `json:"nodes"`
		Connections map[string]any   `json:"connections"`
	}
	// taken are the node names in use, renames the guard's names as they
	// will be in the workflow.
	taken   map[string]bool
	renames map[string]string
	// origin is the Webhook's position, shift how far right the user's
	// nodes after it move.
	origin     [2]float64
	shift      float64
	hadRawBody bool
	rec        record
	res        *Result
}

// guardable refuses a workflow Guard does not guard (see Guard), and
// starts the work on one it does. A Webhook without parameters or options,
// and a workflow without settings, are given empty ones for the guard to
// fill in.
func (w *Workflow) guardable(opts Options) (*guarding, error) {
	hook, err := w.webhook(opts.Webhook)
	if err != nil {
		return nil, err
	}
	if existing, err := w.n8n(); err == nil {
		if found, err := verify.Find(existing); err == nil {
			return nil, refuse("the workflow is already guarded: %q reserves the key after %q (guard it once; run idemhook verify to check it)", found.Reserve, found.Webhook)
		}
	}
	gd := &guarding{w: w, opts: opts, hook: hook, res: &Result{Files: map[string][]byte{}}}
	if err := gd.checkWebhook(); err != nil {
		return nil, err
	}
	if err := gd.checkErrorWorkflow(); err != nil {
		return nil, err
	}
	return gd, nil
}

// checkWebhook refuses a Webhook the guard cannot stand behind: one that
// takes no body, answers in a response mode guard does not handle, keeps
// the body as a file, has one output per HTTP method, or has nothing after
// it.
func (gd *guarding) checkWebhook() error {
	hook := gd.hook
	params, _ := hook["parameters"].(map[string]any)
	if params == nil {
		params = map[string]any{}
		hook["parameters"] = params
	}
	hookName, _ := hook["name"].(string)
	if err := checkMethod(hookName, params); err != nil {
		return err
	}
	mode := generator.ResponseMode(stringOr(params["responseMode"], string(generator.OnReceived)))
	switch mode {
	case generator.ResponseNode, generator.LastNode, generator.OnReceived:
	default:
		return refuse("Webhook %q answers with response mode %q: guard handles onReceived, lastNode and responseNode", hookName, mode)
	}
	hookOptions, _ := params["options"].(map[string]any)
	noOptions := hookOptions == nil
	if noOptions {
		hookOptions = map[string]any{}
		params["options"] = hookOptions
	}
	if hookOptions["binaryData"] == true {
		return refuse("Webhook %q keeps the body as a binary file (its Binary Data option): guard needs the raw-body option instead; turn Binary Data off and read the file from the raw body, or guard it by hand", hookName)
	}
	if len(gd.w.mainOutputs(hookName)) > 1 {
		return refuse("Webhook %q has one output per HTTP method: guard handles a Webhook with one output", hookName)
	}
	first := firstTargets(gd.w, hookName)
	if len(first) == 0 {
		return refuse("nothing runs after Webhook %q: there is nothing to guard", hookName)
	}
	gd.params, gd.hookOptions, gd.hookName, gd.mode, gd.first = params, hookOptions, hookName, mode, first
	gd.rec = record{Version: recordVersion, Webhook: nodeRef(hook), Name: hookName, NoOptions: noOptions}
	return nil
}

// checkErrorWorkflow refuses to go on without the error workflow the
// settings name (other than the workflow itself), which the release goes
// into, or with another one than it.
func (gd *guarding) checkErrorWorkflow() error {
	w, given := gd.w, gd.opts.ErrorWorkflow
	settings, _ := w.doc["settings"].(map[string]any)
	if settings == nil {
		gd.rec.NoSettings = true
		settings = map[string]any{}
		w.doc["settings"] = settings
	}
	ownErrorWorkflow, _ := settings["errorWorkflow"].(string)
	gd.settings, gd.ownErrorWorkflow = settings, ownErrorWorkflow
	switch {
	case ownErrorWorkflow != "" && ownErrorWorkflow != w.ID() && given == nil:
		return &ErrorWorkflowNeededError{ID: ownErrorWorkflow}
	case ownErrorWorkflow != "" && ownErrorWorkflow != w.ID() && given.ID() != ownErrorWorkflow:
		return refuse("the error workflow given is %s (%q), but the workflow's settings name %s", given.ID(), given.Name(), ownErrorWorkflow)
	}
	return nil
}

// layOut makes the guard's nodes, names them beside the user's, and makes
// room for them between the Webhook and the nodes after it.
func (gd *guarding) layOut() error {
	if err := gd.generate(); err != nil {
		return err
	}
	gd.nameNodes()
	gd.makeRoom()
	return nil
}

// generate makes the guard for the Webhook's response mode with the
// generate options, seeded by the workflow and the Webhook so that the
// ids it gives are the same each time.
func (gd *guarding) generate() error {
	gd.g = gd.opts.Generate
	if gd.g.WorkflowName == "" {
		gd.g.WorkflowName = gd.w.Name()
	}
	if gd.g.WorkflowName == "" {
		gd.g.WorkflowName = "Guarded workflow"
	}
	gd.seed = gd.w.ID() + "/" + gd.hookName
	frag, err := generator.GuardFragment(gd.g, gd.mode, gd.seed)
	if err != nil {
		return err
	}
	gd.frag = frag
	return json.Unmarshal(frag.Workflow, &gd.guardDoc)
}

// nameNodes picks names no node of the workflow has for the guard's nodes
// and the renamed Webhook; the restore node will take the Webhook's name.
func (gd *guarding) nameNodes() {
	res := gd.res
	taken := map[string]bool{}
	for _, n := range gd.w.names() {
		taken[n] = true
	}
	res.Restore = gd.hookName
	res.Webhook = unique(gd.hookName+" (raw body)", taken)
	// The guard's names, and the stand-in trigger's, as they will be.
	renames := map[string]string{generator.NodeWebhook: res.Webhook}
	for _, n := range gd.guardDoc.Nodes {
		name := n["name"].(string)
		if name == generator.NodeWebhook || name == generator.NodeGuardNew {
			continue
		}
		renames[name] = unique(name, taken)
	}
	gd.taken, gd.renames = taken, renames
}

// makeRoom moves the user's nodes right of the Webhook right by the
// guard's width, and records which it moved and how far.
func (gd *guarding) makeRoom() {
	gd.origin = position(gd.hook)
	// The guard's last column holds the restore node; the user's first
	// nodes end up one column right of it, as they were one right of the
	// Webhook.
	last := gd.frag.Columns
	for _, n := range gd.guardDoc.Nodes {
		last = max(last, int(position(n)[0])/columnWidth)
	}
	gd.shift = float64(last * columnWidth)
	gd.rec.Shift = gd.shift
	for _, n := range gd.w.nodes {
		if p := position(n); n["name"] != gd.hookName && p[0] > gd.origin[0] {
			setPosition(n, p[0]+gd.shift, p[1])
			gd.rec.Shifted = append(gd.rec.Shifted, nodeRef(n))
		}
	}
}

// rewire puts the guard in the workflow's paths: a delivery goes from the
// Webhook through the guard's nodes, and a new event on through the
// restore node to the user's nodes (and, with the lease guard, to Mark
// Done after their last ones); a failed execution gives its key up in the
// error workflow the settings name.
func (gd *guarding) rewire() error {
	gd.keepRawBody()
	guardEntry := gd.renames[entry(gd.guardDoc.Connections)]
	gd.placeGuardNodes()
	newFrom, err := gd.connectGuardNodes()
	if err != nil {
		return err
	}
	gd.insertRestore(newFrom)
	gd.w.setMainOutputs(gd.res.Webhook, [][]any{{map[string]any{"node": guardEntry, "type": "main", "index": 0}}})
	if gd.frag.MarkDone != nil {
		if err := gd.w.markDoneAfterLastNodes(gd.res, gd.frag.MarkDone, gd.mode, gd.taken); err != nil {
			return err
		}
	}
	return gd.setSettings()
}

// keepRawBody has the Webhook keep the raw body, which the key needs,
// under its new name, and gives it a webhookId when it has none, which
// n8n's URL for it would otherwise change with.
func (gd *guarding) keepRawBody() {
	hook, hookOptions, res := gd.hook, gd.hookOptions, gd.res
	gd.hadRawBody = hookOptions["rawBody"] == true
	if v, ok := hookOptions["rawBody"]; ok {
		gd.rec.RawBody = &v
	}
	hookOptions["rawBody"] = true
	gd.w.rename(gd.hookName, res.Webhook)
	if id, _ := hook["webhookId"].(string); id == "" {
		gd.rec.AddedWebhookID = true
		hook["webhookId"] = generator.UUIDFrom("webhookId/" + gd.seed)
		res.Notes = append(res.Notes, fmt.Sprintf("the Webhook had no webhookId: n8n would have served it at /webhook/<workflow id>/%s/<path> after an import; it now has one, and is served at /webhook/%s",
			strings.ToLower(strings.ReplaceAll(gd.hookName, " ", "%20")), stringOr(gd.params["path"], "")))
	}
}

// placeGuardNodes adds the guard's nodes under their names, placed from
// the Webhook's position, their expressions reading the guard's nodes as
// renamed.
func (gd *guarding) placeGuardNodes() {
	for _, n := range gd.guardDoc.Nodes {
		name := n["name"].(string)
		if name == generator.NodeWebhook || name == generator.NodeGuardNew {
			continue
		}
		rewriteReferences(n, gd.renames)
		n["name"] = gd.renames[name]
		p := position(n)
		setPosition(n, gd.origin[0]+p[0], gd.origin[1]+p[1]-fragmentRow0)
		gd.w.nodes = append(gd.w.nodes, n)
		gd.res.Inserted = append(gd.res.Inserted, gd.renames[name])
	}
}

// connectGuardNodes gives the guard's nodes their connections, as renamed,
// but for the one to the fragment's stand-in for the user's nodes, and
// returns the node that connection left: a new event's way on.
func (gd *guarding) connectGuardNodes() (string, error) {
	var newFrom string
	for from, v := range gd.guardDoc.Connections {
		byType, _ := v.(map[string]any)
		outs, _ := byType["main"].([]any)
		var list [][]any
		for i, o := range outs {
			links, _ := o.([]any)
			var kept []any
			for _, l := range links {
				m := l.(map[string]any)
				if m["node"] == generator.NodeGuardNew {
					newFrom = gd.renames[from]
					if i != 0 {
						return "", fmt.Errorf("guard: the fragment's new events leave %q by output %d", from, i)
					}
					continue
				}
				m["node"] = gd.renames[m["node"].(string)]
				kept = append(kept, m)
			}
			list = append(list, kept)
		}
		gd.w.setMainOutputs(gd.renames[from], list)
	}
	if newFrom == "" {
		return "", fmt.Errorf("guard: the fragment has no way on for a new event")
	}
	return newFrom, nil
}

// insertRestore adds the node that gives the user's nodes their item back
// between newFrom and the user's first nodes. It takes the Webhook's old
// name, so that their references keep reading it.
func (gd *guarding) insertRestore(newFrom string) {
	w, res := gd.w, gd.res
	restore := map[string]any{
		"id": generator.UUIDFrom("restore/" + gd.seed), "name": res.Restore, "type": "n8n-nodes-base.code",
		"typeVersion": generator.TypeVersions["n8n-nodes-base.code"],
		"position":    []any{gd.origin[0] + gd.shift, gd.origin[1]},
		"parameters": map[string]any{"mode": "runOnceForAllItems", "language": "javaScript",
			"jsCode": restoreScript(res.Webhook, gd.hadRawBody, webhookVersion(gd.hook), stringOr(gd.hookOptions["binaryPropertyName"], "data"))},
	}
	w.nodes = append(w.nodes, restore)
	res.Inserted = append(res.Inserted, res.Restore)
	outs := w.mainOutputs(newFrom)
	outs[0] = append(outs[0], map[string]any{"node": res.Restore, "type": "main", "index": 0})
	w.setMainOutputs(newFrom, outs)
	w.setMainOutputs(res.Restore, [][]any{gd.first})
}

// setSettings gives the workflow the settings the guard's workflow has,
// its error workflow among them unless the user's one releases the key,
// and records what they were before.
func (gd *guarding) setSettings() error {
	var fragSettings struct {
		Settings map[string]any `json:"settings"`
	}
	_ = json.Unmarshal(gd.frag.Workflow, &fragSettings)
	delete(fragSettings.Settings, "executionOrder") // a legacy export keeps its own order
	gd.rec.EventsTable = gd.g.WithDefaults().EventsTable
	if err := gd.releaseOnFailure(fragSettings.Settings); err != nil {
		return err
	}
	rec, settings := &gd.rec, gd.settings
	for k, v := range fragSettings.Settings {
		rec.Settings = append(rec.Settings, k)
		if old, ok := settings[k]; ok {
			if rec.SettingsBefore == nil {
				rec.SettingsBefore = map[string]any{}
			}
			rec.SettingsBefore[k] = old
		}
		settings[k] = v
	}
	slices.Sort(rec.Settings)
	if _, ok := settings["executionOrder"]; !ok {
		gd.res.Notes = append(gd.res.Notes, "the workflow has no executionOrder setting (n8n's legacy v0 order); it is kept: the guard runs in either order")
	}
	return nil
}

// releaseOnFailure settles which error workflow gives a failed execution's
// key up: the user's (the one the settings name, or the workflow itself
// for its own Error Trigger), with the release put in front of its nodes,
// or else guard's, which fragSettings then name.
func (gd *guarding) releaseOnFailure(fragSettings map[string]any) error {
	w, res, rec, own := gd.w, gd.res, &gd.rec, gd.ownErrorWorkflow
	switch {
	case own != "" && own != w.ID():
		// The user's error workflow keeps running, the release in front.
		x := gd.opts.ErrorWorkflow
		what := fmt.Sprintf("error workflow %s (%q)", x.ID(), x.Name())
		added, err := x.addRelease(what, gd.frag.Release, rec.EventsTable)
		if err != nil {
			return err
		}
		if res.Files[FileErrorWorkflow], err = x.marshal(); err != nil {
			return err
		}
		res.ErrorWorkflow, res.KeptErrorWorkflow, rec.ErrorWorkflow = x.ID(), true, x.ID()
		if added {
			res.Notes = append(res.Notes, fmt.Sprintf("your %s stays the workflow's: its nodes now run after a node that gives the failed execution's key up, with the item they had; import and publish %s (it keeps that workflow's id)", what, FileErrorWorkflow))
		} else {
			res.Notes = append(res.Notes, fmt.Sprintf("your %s already gives up the keys of %s (another guarded workflow shares it): unchanged", what, rec.EventsTable))
		}
	case (own != "" && own == w.ID()) || (own == "" && w.hasErrorTrigger()):
		// n8n runs the workflow itself when it fails: its Error Trigger's
		// path gets the release.
		if _, err := w.addRelease("the workflow", gd.frag.Release, rec.EventsTable); err != nil {
			return err
		}
		res.ErrorWorkflow, res.KeptErrorWorkflow, rec.ErrorWorkflow = w.ID(), true, recordSelf
		res.Notes = append(res.Notes, "the workflow's own Error Trigger stays what n8n runs when an execution fails: its nodes now run after a node that gives the failed execution's key up")
	default:
		fragSettings["errorWorkflow"] = gd.frag.ErrorWorkflowID
		res.ErrorWorkflow = gd.frag.ErrorWorkflowID
		res.Files[FileErrorWorkflow] = gd.frag.ErrorWorkflow
	}
	return nil
}

// result keeps the record of what guard changed in the restore node, so
// that Remove can undo it, and renders the guarded workflow and the files
// that go beside it.
func (gd *guarding) result() (*Result, error) {
	w, res := gd.w, gd.res
	res.Notes = append(res.Notes, modeNote(gd.mode), bodiesNote(gd.g.Hashing, gd.hadRawBody))
	for _, name := range res.Inserted {
		gd.rec.Inserted = append(gd.rec.Inserted, nodeRef(w.node(name)))
	}
	if err := gd.rec.keepIn(w.node(res.Restore)); err != nil {
		return nil, err
	}
	var err error
	if res.Workflow, err = w.marshal(); err != nil {
		return nil, err
	}
	if err := res.companions(gd.g, gd.frag); err != nil {
		return nil, err
	}
	return res, nil
}

// The fragment's geometry: columns 220 px apart, row 0 at y = 300.
const (
	columnWidth  = 220
	fragmentRow0 = 300
)

// webhook returns the Webhook node to guard.
func (w *Workflow) webhook(name string) (map[string]any, error) {
	var hooks []string
	for _, n := range w.nodes {
		if n["type"] == webhookType && n["disabled"] != true {
			hooks = append(hooks, n["name"].(string))
		}
	}
	switch {
	case name != "":
		if !slices.Contains(hooks, name) {
			return nil, refuse("no enabled Webhook node is named %q; the workflow's are: %s", name, listOr(hooks, "none"))
		}
		return w.node(name), nil
	case len(hooks) == 0:
		return nil, refuse("the workflow has no Webhook trigger: guard puts the guard between a Webhook node and the nodes after it (other triggers carry no delivery to deduplicate)")
	case len(hooks) > 1:
		return nil, refuse("the workflow has %d Webhook nodes (%s): name the one to guard with --webhook NAME", len(hooks), strings.Join(hooks, ", "))
	}
	return w.node(hooks[0]), nil
}

// checkMethod refuses a Webhook that takes no body.
func checkMethod(name string, params map[string]any) error {
	var methods []string
	switch m := params["httpMethod"].(type) {
	case nil:
		methods = []string{"GET"} // n8n's default for the Webhook node
	case string:
		methods = []string{m}
	case []any:
		for _, v := range m {
			methods = append(methods, fmt.Sprint(v))
		}
	}
	for _, m := range methods {
		if m != "GET" && m != "HEAD" {
			return nil
		}
	}
	return refuse("Webhook %q answers %s only: a GET delivery has no body to key, and providers deliver with POST; set its HTTP Method to POST", name, strings.Join(methods, ", "))
}

func firstTargets(w *Workflow, node string) []any {
	outs := w.mainOutputs(node)
	if len(outs) == 0 {
		return nil
	}
	return outs[0]
}

// entry is the node the fragment's stand-in trigger feeds.
func entry(conns map[string]any) string {
	byType, _ := conns[generator.NodeWebhook].(map[string]any)
	outs, _ := byType["main"].([]any)
	links, _ := outs[0].([]any)
	return links[0].(map[string]any)["node"].(string)
}

// rename renames node from to to, with the connections from and to it. The
// user's expressions are not touched: they now read the node that takes
// the old name.
func (w *Workflow) rename(from, to string) {
	w.node(from)["name"] = to
	if v, ok := w.connections[from]; ok {
		w.connections[to] = v
		delete(w.connections, from)
	}
	for _, v := range w.connections {
		byType, _ := v.(map[string]any)
		for _, outs := range byType {
			list, _ := outs.([]any)
			for _, o := range list {
				links, _ := o.([]any)
				for _, l := range links {
					if m, ok := l.(map[string]any); ok && m["node"] == from {
						m["node"] = to
					}
				}
			}
		}
	}
}

// rewriteReferences points the guard's own expressions at the guard's
// nodes as renamed: $('X'), $("X") and $node["X"].
func rewriteReferences(v any, renames map[string]string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = rewriteReferences(e, renames)
		}
	case []any:
		for i, e := range x {
			x[i] = rewriteReferences(e, renames)
		}
	case string:
		for from, to := range renames {
			if from == to {
				continue
			}
			for _, q := range []string{"'", `"`} {
				x = strings.ReplaceAll(x, "$("+q+from+q+")", "$("+q+to+q+")")
			}
			x = strings.ReplaceAll(x, `$node["`+from+`"]`, `$node["`+to+`"]`)
		}
		return x
	}
	return v
}

// unique returns name, or name with " (idemhook)" or a number after it,
// whichever no node has yet, and takes it.
func unique(name string, taken map[string]bool) string {
	candidate := name
	for i := 1; taken[candidate]; i++ {
		candidate = name + " (idemhook)"
		if i > 1 {
			candidate = fmt.Sprintf("%s (idemhook %d)", name, i)
		}
	}
	taken[candidate] = true
	return candidate
}

func position(n map[string]any) [2]float64 {
	p, _ := n["position"].([]any)
	var out [2]float64
	for i := 0; i < 2 && i < len(p); i++ {
		out[i] = number(p[i])
	}
	return out
}

func setPosition(n map[string]any, x, y float64) { n["position"] = []any{x, y} }

func number(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case json.Number:
		f, _ := x.Float64()
		return f
	}
	return 0
}

func webhookVersion(n map[string]any) float64 { return number(n["typeVersion"]) }

func stringOr(v any, def string) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return def
}

func listOr(items []string, empty string) string {
	if len(items) == 0 {
		return empty
	}
	return strings.Join(items, ", ")
}

// modeNote says what a duplicate gets in the Webhook's response mode.
func modeNote(mode generator.ResponseMode) string {
	switch mode {
	case generator.ResponseNode:
		return "response mode responseNode: a duplicate is answered 200 {\"status\":\"duplicate\"} by a Respond node of the guard's; a new event is answered by your Respond nodes, as before"
	case generator.LastNode:
		return "response mode lastNode: a duplicate is answered with the output of the guard's Answer duplicate node ({\"status\":\"duplicate\"}, with the Webhook's status); where the provider must retry (the database down, an attempt in progress) a Stop node fails the execution, which n8n answers with a 500"
	}
	return "response mode onReceived: n8n acknowledges every delivery before any node runs, so the provider has its 200 before the guard decides: a duplicate simply ends, and a delivery that arrives while the database is down is acknowledged and not processed (the failed execution stays in n8n's list). A response mode that answers after the guard (responseNode) lets the provider retry"
}

// bodiesNote says what differs for a body: the guard gives the user's nodes
// the item the Webhook gave, for every body (e2e TestGuardBodies), but for
// the bodies it has no key for, and the Webhook's own output now holds the
// bytes.
func bodiesNote(hashing generator.Hashing, hadRawBody bool) string {
	note := "bodies: your nodes get the item the Webhook gave them for every body (JSON, forms, text, XML, files, multipart forms with their files), " +
		"but an empty body, and a multipart form with no field and no file, have nothing to key: the guard answers them 400 and runs none of your nodes"
	if !hadRawBody {
		note += "; and the Webhook (raw body) node's own output holds each body's bytes inline in the execution data, a file's included, " +
			"where n8n's binary data service held only a reference to it (with large files, keep successful executions' data short: --save-success none)"
	}
	if hashing == generator.HashingCryptoNode {
		note += "; with --hashing crypto-node a multipart form has no key either: the Crypto node fails its execution (n8n answers 500)"
	}
	return note
}

// marshal writes v as JSON, laid out like n8n's exports.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return pretty.PrettyOptions(buf.Bytes(), &pretty.Options{Width: 100, Indent: "  "}), nil
}
