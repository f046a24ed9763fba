//go:build js && wasm

// Command planner-wasm is the planner page's WebAssembly module: the Go key
// spec, the generator and the effect rules, unchanged, for the page's
// script. It defines globalThis.idemhook with these functions and then
// waits forever:
//
//	explain(body Uint8Array, headers string, preset string, scope string) → {rule, fallback, sentence, key, source, error}
//	effect(body Uint8Array, headers string, rules string) → {type, account, rule, state, outcome, detail, entity, table, id, effectKey, taskKeys, row: [{state, decision}]} | {error}
//	rulesPresets() → [name]
//	options() → [{name, option, usage, default, choices, pattern}]
//	providers() → [{name, label, verify, preset, rules, receiver}]
//	defaults(flags {name: value}) → {pattern, verify, preset, path, name, hashing, guard, receiver} | {error}
//	generate(flags {name: value}) → {files: {name: text}, names: [name], workflows: [{file, webhookPath}], zip: Uint8Array} | {error, flag}
//
// The page computes the key's SHA-256 itself with crypto.subtle.digest; key
// here is the Go derivation it is checked against. Nothing leaves the page.
package main

import (
	"errors"
	"slices"
	"strings"
	"syscall/js"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/idemhook/idemhook/internal/storezip"
)

func main() {
	js.Global().Set("idemhook", js.ValueOf(map[string]any{
		"explain":      js.FuncOf(explain),
		"effect":       js.FuncOf(effect),
		"rulesPresets": js.FuncOf(rulesPresets),
		"options":      js.FuncOf(options),
		"providers":    js.FuncOf(providers),
		"defaults":     js.FuncOf(defaults),
		"generate":     js.FuncOf(generate),
	}))
	select {}
}

// headers parses "Name: value" lines; names are matched case-insensitively
// (as lower case: net/textproto's canonical form would bring net into the
// module).
type headers map[string]string

func (h headers) Get(name string) string { return h[strings.ToLower(name)] }

func parseHeaders(text string) headers {
	h := headers{}
	for _, line := range strings.Split(text, "\n") {
		name, value, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
		if ok && strings.TrimSpace(name) != "" {
			h[strings.ToLower(strings.TrimSpace(name))] = strings.TrimSpace(value)
		}
	}
	return h
}

func explain(_ js.Value, args []js.Value) any {
	if len(args) != 4 {
		return map[string]any{"error": "explain(body, headers, preset, scope)"}
	}
	body := make([]byte, args[0].Get("length").Int())
	js.CopyBytesToGo(body, args[0])
	e, err := eventkey.ExplainFor(eventkey.Preset(args[2].String()), parseHeaders(args[1].String()), body, args[3].String())
	if err != nil {
		return map[string]any{"error": err.Error(), "rule": "invalid_preset_or_scope"}
	}
	return map[string]any{
		"rule": string(e.Rule), "fallback": string(e.Fallback), "sentence": e.Sentence,
		"key": e.Key.Value, "source": string(e.Key.Source),
	}
}

// effect evaluates a rules preset for the delivery: what the worker would
// decide before it reads the database, and the effect key.
func effect(_ js.Value, args []js.Value) any {
	if len(args) != 3 {
		return map[string]any{"error": "effect(body, headers, rules)"}
	}
	body := make([]byte, args[0].Get("length").Int())
	js.CopyBytesToGo(body, args[0])
	rs, err := rules.Preset(args[2].String())
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	lower := map[string]string{}
	for k, v := range parseHeaders(args[1].String()) {
		lower[strings.ToLower(k)] = v
	}
	e := rs.Evaluate(rules.Event{Body: body, Headers: lower}, nil)
	taskKeys := make([]any, len(e.TaskKeys))
	for i, k := range e.TaskKeys {
		taskKeys[i] = k
	}
	row := make([]any, len(e.Row))
	for i, c := range e.Row {
		row[i] = map[string]any{"state": c.State, "decision": c.Decision}
	}
	return map[string]any{
		"type": e.Type, "account": e.Account, "rule": e.Rule, "state": e.State, "outcome": e.Outcome, "detail": e.Detail,
		"entity": e.Entity, "table": e.Table, "id": e.ID, "effectKey": e.EffectKey, "taskKeys": taskKeys, "row": row,
	}
}

func rulesPresets(js.Value, []js.Value) any {
	names := rules.PresetNames()
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = n
	}
	return out
}

func options(js.Value, []js.Value) any {
	out := make([]any, 0, len(generator.Flags))
	for _, f := range generator.Flags {
		choices := make([]any, len(f.Choices))
		for i, c := range f.Choices {
			choices[i] = c
		}
		out = append(out, map[string]any{
			"name": f.Name, "option": f.Option, "usage": strings.ReplaceAll(f.Usage, "`", ""),
			"default": f.Default, "choices": choices, "pattern": string(f.Pattern),
		})
	}
	return out
}

// flagValues reads a {flag: value} object.
func flagValues(obj js.Value) map[string]string {
	values := map[string]string{}
	keys := js.Global().Get("Object").Call("keys", obj)
	for i := range keys.Length() {
		name := keys.Index(i).String()
		values[name] = obj.Get(name).String()
	}
	return values
}

// defaults gives the values the generator uses for what the flags leave
// out, where a default depends on other options (the inbox pattern's
// --verify on its rules, --preset on --verify): the page names the provider
// a choice implies, and leaves out of its command what is implied anyway.
func defaults(_ js.Value, args []js.Value) any {
	if len(args) != 1 {
		return map[string]any{"error": "defaults({flag: value})"}
	}
	opts, err := generator.OptionsFromFlags(flagValues(args[0]))
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	d := opts.WithDefaults()
	return map[string]any{
		"pattern": string(d.Pattern), "verify": d.Verify, "preset": d.Preset, "path": d.WebhookPath, "name": d.WorkflowName,
		"hashing": string(d.Hashing), "guard": string(d.Guard), "receiver": string(d.Receiver),
	}
}

func generate(_ js.Value, args []js.Value) any {
	if len(args) != 1 {
		return map[string]any{"error": "generate({flag: value})"}
	}
	opts, err := generator.OptionsFromFlags(flagValues(args[0]))
	var fe *generator.FlagError
	if errors.As(err, &fe) {
		return map[string]any{"error": err.Error(), "flag": fe.Flag}
	}
	files, err := generator.Files(opts)
	var oe *generator.OptionError
	if errors.As(err, &oe) {
		flag := ""
		if f := generator.FlagOf(oe.Option); f != nil {
			flag = f.Name
		}
		return map[string]any{"error": err.Error(), "flag": flag}
	}
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	names := make([]string, 0, len(files))
	out := map[string]any{}
	for name, b := range files {
		names = append(names, name)
		out[name] = string(b)
	}
	slices.Sort(names)
	zipped, err := storezip.Write(names, files)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	zipBytes := js.Global().Get("Uint8Array").New(len(zipped))
	js.CopyBytesToJS(zipBytes, zipped)
	nameList := make([]any, len(names))
	for i, n := range names {
		nameList[i] = n
	}
	// The workflows in deploy order; the one with a webhook path is the
	// one the provider calls, which the page draws first.
	wfs, err := generator.WorkflowFiles(opts)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	workflows := make([]any, len(wfs))
	for i, w := range wfs {
		workflows[i] = map[string]any{"file": w.File, "webhookPath": w.WebhookPath}
	}
	return map[string]any{"files": out, "names": nameList, "workflows": workflows, "zip": zipBytes}
}

// providers lists generator.ProviderChoices: what the page's one provider
// control sets.
func providers(js.Value, []js.Value) any {
	var out []any
	for _, c := range generator.ProviderChoices() {
		out = append(out, map[string]any{"name": c.Name, "label": c.Label, "verify": c.Verify, "preset": c.Preset,
			"rules": c.Rules, "receiver": string(c.Receiver)})
	}
	return out
}
