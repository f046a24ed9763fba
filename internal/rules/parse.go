package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemhook/idemhook/internal/pgsql"
)

// The shapes of the names and constants of a rules file. effects.schema.json
// states the same patterns; TestSchemaAgreesWithParse keeps them together.
// Everything the compiled function reads of a file is one of these, and
// each is emitted as a quoted SQL literal all the same (pgsql.Literal).
var (
	// Names of entities, rules and fields become parts of PL/pgSQL
	// variable names.
	namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
	// Outcomes are the codes inbox_events.outcome keeps.
	outcomePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	statePattern   = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,63}$`)
	// Event types as the generator's --events takes them.
	typePattern    = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,100}$`)
	segmentPattern = regexp.MustCompile(`^[A-Za-z0-9_@-]{1,100}$`)
	kindPattern    = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,62}$`)
	memberPattern  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)
	// The literal text of a key template: keys are identifiers, not prose.
	keyLiteralPattern = regexp.MustCompile(`^[A-Za-z0-9_.:/#@=+-]*$`)
)

// Outcomes the compiled function gives itself; a rules file cannot reuse
// them for its own reasons.
var builtinOutcomes = []string{"applied", "effect_exists", "not_claimed", "error", "type_not_allowed", "no_rule",
	"no_matching_rule", "key_too_long", "too_many_attempts", "delivery_failed", "forwarded"}

// JSON types a condition may require.
var jsonTypes = []string{"string", "number", "boolean", "object", "array"}

// Limits that keep a compiled function of a sane size.
const (
	maxRules     = 100
	maxItems     = 50 // checks, fields, matches, tasks, payload members per list
	maxPaths     = 10 // alternatives of one field
	maxSegments  = 20
	maxTextBytes = 500
)

// Parse reads a rules file (YAML, or JSON) and validates it. name is the
// file's name for messages. Every problem is reported, as Errors, each with
// the file, line and field; nothing is compiled from a file that has one.
func Parse(name string, data []byte) (*Rules, error) {
	rs, err := parseFile(name, data, (*parser).rules)
	if err != nil {
		return nil, err
	}
	rs.Source = name
	return rs, nil
}

// parseFile reads a YAML or JSON file into a tree and hands it to read;
// any problem read reports fails the whole file.
func parseFile[T any](name string, data []byte, read func(*parser, *node) *T) (*T, error) {
	tree, err := parseTree(name, data)
	if err != nil {
		return nil, err
	}
	p := &parser{rep: reporter{file: name}}
	v := read(p, tree)
	if err := p.rep.err(); err != nil {
		return nil, err
	}
	return v, nil
}

type parser struct {
	rep reporter
}

func (p *parser) bad(n *node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.line
	}
	p.rep.add(line, field, format, args...)
}

// fields reads a mapping with the allowed keys; an unknown key is an error
// naming the ones allowed.
type fields struct {
	n     *node
	where string
}

// mapping checks that n is a mapping; with allowed keys, that it has no
// other (with none, any key is allowed: the caller checks each).
func (p *parser) mapping(n *node, where string, allowed ...string) *fields {
	if n == nil {
		return nil
	}
	if n.kind != mapNode {
		p.bad(n, where, "want a mapping, got %s", n.describe())
		return nil
	}
	for i, k := range n.keys {
		if len(allowed) > 0 && !slices.Contains(allowed, k) {
			p.rep.add(n.keyLines[i], join(where, k), "unknown key; the keys here are %s", strings.Join(allowed, ", "))
		}
	}
	return &fields{n: n, where: where}
}

// named checks a mapping whose keys are names the file chooses: at most
// maxItems of them, each matching pattern (else the error format, with the
// name). The caller skips the keys that do not match.
func (p *parser) named(n *node, where string, pattern *regexp.Regexp, format string) *fields {
	f := p.mapping(n, where)
	if f == nil {
		return nil
	}
	if len(f.n.keys) > maxItems {
		p.bad(n, where, "more than %d members", maxItems)
	}
	for i, name := range f.n.keys {
		if !pattern.MatchString(name) {
			p.rep.add(f.n.keyLines[i], join(where, name), format, name)
		}
	}
	return f
}

func join(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

func (f *fields) get(key string) (*node, string) {
	if f == nil {
		return nil, ""
	}
	return f.n.get(key), join(f.where, key)
}

// required reports a missing key against the mapping's line.
func (p *parser) required(f *fields, key string) (*node, string) {
	n, where := f.get(key)
	if n == nil && f != nil {
		p.bad(f.n, where, "required")
	}
	return n, where
}

// str reads a string scalar matching pattern (nil: any text without control
// characters, at most maxTextBytes).
func (p *parser) str(n *node, where string, pattern *regexp.Regexp, what string) (string, bool) {
	if n == nil {
		return "", false
	}
	if n.kind != scalarNode || n.tag != "str" {
		p.bad(n, where, "want %s (a string), got %s", what, n.describe())
		return "", false
	}
	if pattern != nil && !pattern.MatchString(n.value) {
		p.bad(n, where, "%q is not %s", n.value, what)
		return "", false
	}
	if pattern == nil {
		if err := checkText(n.value); err != nil {
			p.bad(n, where, "%v", err)
			return "", false
		}
	}
	return n.value, true
}

// checkText refuses what no constant of a rules file may hold: invalid
// UTF-8, NUL and other control characters, and more than maxTextBytes.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if len(s) > maxTextBytes {
		return fmt.Errorf("longer than %d bytes", maxTextBytes)
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return fmt.Errorf("%q holds a control character (%U)", s, c)
		}
	}
	return nil
}

// list reads a sequence; a single scalar counts as a list of one when one
// is allowed.
func (p *parser) list(n *node, where string, scalarOK bool) []*node {
	if n == nil {
		return nil
	}
	if n.kind == seqNode {
		if len(n.items) > maxItems && !strings.HasSuffix(where, "rules") {
			p.bad(n, where, "more than %d items", maxItems)
			return nil
		}
		return n.items
	}
	if scalarOK && n.kind == scalarNode {
		return []*node{n}
	}
	p.bad(n, where, "want a list, got %s", n.describe())
	return nil
}

func (p *parser) rules(n *node) *Rules {
	rs := &Rules{}
	f := p.mapping(n, "", "version", "provider", "entities", "checks", "rules")
	if f == nil {
		return rs
	}
	if v, where := p.required(f, "version"); v != nil && (v.tag != "int" || v.value != "1") {
		p.bad(v, where, "want 1, the only version of the rules format, got %s", v.describe())
	}
	if v, where := p.required(f, "provider"); v != nil {
		if name, ok := p.str(v, where, nil, "a provider"); ok {
			if rs.Provider, ok = providerNamed(name); !ok {
				p.bad(v, where, "unknown provider %q; use %s", name, strings.Join(ProviderNames(), ", "))
			}
		}
	}
	ents, where := p.required(f, "entities")
	if ef := p.mapping(ents, where); ef != nil {
		// Keys are checked one by one below: any name is allowed.
		for i, name := range ef.n.keys {
			e := p.entity(ef.n.vals[i], join(where, name), name, ef.n.keyLines[i])
			if e != nil {
				rs.Entities = append(rs.Entities, e)
			}
		}
		if len(ef.n.keys) == 0 {
			p.bad(ents, where, "name at least one entity")
		}
	}
	// Common checks read paths only: fields are a rule's own.
	cn, where := f.get("checks")
	for i, c := range p.list(cn, where, false) {
		if chk, ok := p.check(c, fmt.Sprintf("%s[%d]", where, i), nil); ok {
			rs.Checks = append(rs.Checks, chk)
		}
	}
	rn, where := p.required(f, "rules")
	items := p.list(rn, where, false)
	if rn != nil && len(items) == 0 && rn.kind == seqNode {
		p.bad(rn, where, "write at least one rule")
	}
	if len(items) > maxRules {
		p.bad(rn, where, "more than %d rules", maxRules)
		items = items[:maxRules]
	}
	for i, item := range items {
		if r := p.rule(item, fmt.Sprintf("%s[%d]", where, i), rs); r != nil {
			if slices.ContainsFunc(rs.Rules, func(o *Rule) bool { return o.Name == r.Name }) {
				p.bad(item, fmt.Sprintf("%s[%d].name", where, i), "a rule named %q comes earlier", r.Name)
			}
			rs.Rules = append(rs.Rules, r)
		}
	}
	return rs
}

func (p *parser) entity(n *node, where, name string, line int) *Entity {
	if !namePattern.MatchString(name) {
		p.rep.add(line, where, "entity name %q: use lower-case letters, digits and '_', starting with a letter, at most 40 bytes", name)
	}
	if slices.Contains([]string{"account", "type"}, name) {
		p.rep.add(line, where, "%q is a placeholder of its own in templates: name the entity otherwise", name)
	}
	f := p.mapping(n, where, "table", "key", "account", "state", "touch")
	if f == nil {
		return nil
	}
	e := &Entity{Name: name, Line: line}
	if v, w := p.required(f, "table"); v != nil {
		if s, ok := p.str(v, w, nil, "a table"); ok {
			t, err := pgsql.ParseTable(s)
			if err != nil {
				p.bad(v, w, "%v", err)
			}
			e.Table = t
		}
	}
	column := func(key string, required bool) string {
		var v *node
		var w string
		if required {
			v, w = p.required(f, key)
		} else {
			v, w = f.get(key)
		}
		s, ok := p.str(v, w, nil, "a column")
		if !ok {
			return ""
		}
		if err := pgsql.ParseColumn(s); err != nil {
			p.bad(v, w, "%v", err)
			return ""
		}
		return s
	}
	e.Key, e.Account, e.State, e.Touch = column("key", true), column("account", false), column("state", true), column("touch", false)
	return e
}

// rule reads one rule of the file; rs holds the entities read before
// it.
func (p *parser) rule(n *node, where string, rs *Rules) *Rule {
	f := p.mapping(n, where, "name", "on", "when", "entity", "id", "fields", "checks", "match", "transition", "effect", "tasks", "defer_limit")
	if f == nil {
		return nil
	}
	r := &Rule{Line: n.line}
	if v, w := p.required(f, "name"); v != nil {
		r.Name, _ = p.str(v, w, namePattern, "a rule name (lower-case letters, digits and '_', starting with a letter, at most 40 bytes)")
	}
	r.On = p.eventTypes(f)
	r.Entity = p.ruleEntity(f, rs)
	if v, w := p.required(f, "id"); v != nil {
		r.ID = p.paths(v, w)
	}
	r.Fields = p.ruleFields(f, r.Entity)
	wn, ww := f.get("when")
	for i, c := range p.list(wn, ww, false) {
		if cond, ok := p.condition(c, fmt.Sprintf("%s[%d]", ww, i), r, false); ok {
			r.When = append(r.When, cond)
		}
	}
	cn, cw := f.get("checks")
	for i, c := range p.list(cn, cw, false) {
		if chk, ok := p.check(c, fmt.Sprintf("%s[%d]", cw, i), r); ok {
			r.Checks = append(r.Checks, chk)
		}
	}
	mn, mw := f.get("match")
	r.Match = p.matches(mn, mw, r)
	tn, tw := p.required(f, "transition")
	if tn != nil {
		r.Transition = p.transition(tn, tw, r)
	}
	if v, w := p.required(f, "effect"); v != nil {
		if t, ok := p.template(v, w, r, true); ok {
			r.Effect = t
		}
	}
	r.Tasks = p.ruleTasks(f, r)
	r.DeferLimit = p.deferLimit(f)
	return r
}

// eventTypes reads a rule's on: the event types it handles, one or a
// list, each once.
func (p *parser) eventTypes(f *fields) []string {
	var types []string
	on, w := p.required(f, "on")
	for i, t := range p.list(on, w, true) {
		tw := fmt.Sprintf("%s[%d]", w, i)
		if typ, ok := p.str(t, tw, typePattern, "an event type (letters, digits, '.', '_', ':', '/' and '-', at most 100)"); ok {
			if slices.Contains(types, typ) {
				p.bad(t, tw, "%q is listed twice", typ)
			}
			types = append(types, typ)
		}
	}
	if on != nil && len(types) == 0 && on.kind == seqNode {
		p.bad(on, w, "name at least one event type")
	}
	return types
}

// ruleEntity reads a rule's entity: one of the file's entities, by name
// (nil when it names none of them).
func (p *parser) ruleEntity(f *fields, rs *Rules) *Entity {
	v, w := p.required(f, "entity")
	if v == nil {
		return nil
	}
	name, ok := p.str(v, w, nil, "an entity")
	if !ok {
		return nil
	}
	i := slices.IndexFunc(rs.Entities, func(e *Entity) bool { return e.Name == name })
	if i < 0 {
		p.bad(v, w, "no entity %q under entities", name)
		return nil
	}
	return rs.Entities[i]
}

// ruleFields reads a rule's fields, each a name and its paths. A field
// cannot take the name of a placeholder of its own: account, type or the
// rule's entity e.
func (p *parser) ruleFields(f *fields, e *Entity) []Field {
	fn, fw := f.get("fields")
	ff := p.named(fn, fw, namePattern, "field name %q: use lower-case letters, digits and '_', starting with a letter, at most 40 bytes")
	if ff == nil {
		return nil
	}
	var out []Field
	for i, name := range ff.n.keys {
		kw := join(fw, name)
		if !namePattern.MatchString(name) {
			continue
		}
		if name == "account" || name == "type" || (e != nil && name == e.Name) {
			p.rep.add(ff.n.keyLines[i], kw, "%q is a placeholder of its own in templates: name the field otherwise", name)
			continue
		}
		out = append(out, Field{Name: name, Paths: p.paths(ff.n.vals[i], kw)})
	}
	return out
}

// ruleTasks reads the tasks of rule r, whose keys must differ: one effect
// writes one task per key.
func (p *parser) ruleTasks(f *fields, r *Rule) []Task {
	var tasks []Task
	kn, kw := f.get("tasks")
	for i, t := range p.list(kn, kw, false) {
		if task, ok := p.task(t, fmt.Sprintf("%s[%d]", kw, i), r); ok {
			if slices.ContainsFunc(tasks, func(o Task) bool { return o.Key.Text == task.Key.Text }) {
				p.bad(t, fmt.Sprintf("%s[%d].key", kw, i), "another task of this rule has the key %q: one effect writes one task per key", task.Key.Text)
			}
			tasks = append(tasks, task)
		}
	}
	return tasks
}

// deferLimit reads a rule's defer_limit (0 when it has none).
func (p *parser) deferLimit(f *fields) time.Duration {
	v, w := f.get("defer_limit")
	if v == nil {
		return 0
	}
	s, ok := p.str(v, w, nil, "a duration")
	if !ok {
		return 0
	}
	d, err := parseDuration(s)
	if err != nil || d < time.Minute || d > 30*24*time.Hour || d%time.Second != 0 {
		p.bad(v, w, "%q: want a duration between 1m and 30d in whole seconds, such as 2h or 7d", s)
	}
	return d
}

func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, err
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// paths reads a path ("data.object.id") or a list of them (the first that
// is present).
func (p *parser) paths(n *node, where string) []Path {
	items := p.list(n, where, true)
	if n != nil && n.kind == seqNode && len(items) == 0 {
		p.bad(n, where, "give at least one path")
	}
	if len(items) > maxPaths {
		p.bad(n, where, "more than %d paths", maxPaths)
		return nil
	}
	var out []Path
	for i, item := range items {
		w := where
		if n.kind == seqNode {
			w = fmt.Sprintf("%s[%d]", where, i)
		}
		if path, ok := p.path(item, w); ok {
			out = append(out, path)
		}
	}
	return out
}

// path reads one dotted path. Its segments are object keys or array
// indexes, each of letters, digits, '_', '-' and '@': a path never carries
// quotes or other text that could reach SQL as anything but a literal.
func (p *parser) path(n *node, where string) (Path, bool) {
	s, ok := p.str(n, where, nil, "a path such as data.object.id")
	if !ok {
		return nil, false
	}
	segs := strings.Split(s, ".")
	if len(segs) > maxSegments {
		p.bad(n, where, "%q has more than %d segments", s, maxSegments)
		return nil, false
	}
	for _, seg := range segs {
		if !segmentPattern.MatchString(seg) {
			p.bad(n, where, "path %q: each '.'-separated segment must be letters, digits, '_', '-' or '@' (got %q)", s, seg)
			return nil, false
		}
	}
	return Path(segs), true
}

// value reads what a condition or match reads: field (a rule's field) or
// path; exactly one.
func (p *parser) value(f *fields, r *Rule) (field string, paths []Path, ok bool) {
	fv, fw := f.get("field")
	pv, pw := f.get("path")
	switch {
	case fv != nil && pv != nil:
		p.bad(f.n, f.where, "give field or path, not both")
	case fv != nil:
		name, ok := p.str(fv, fw, nil, "a field")
		if !ok {
			return "", nil, false
		}
		if r == nil {
			p.bad(fv, fw, "the common checks read paths: fields are a rule's own")
			return "", nil, false
		}
		if r.field(name) == nil {
			p.bad(fv, fw, "no field %q in this rule's fields", name)
			return "", nil, false
		}
		return name, nil, true
	case pv != nil:
		paths := p.paths(pv, pw)
		return "", paths, len(paths) > 0
	default:
		p.bad(f.n, f.where, "give field or path")
	}
	return "", nil, false
}

func (p *parser) condition(n *node, where string, r *Rule, isCheck bool) (Condition, bool) {
	keys := []string{"field", "path", "type", "equals", "in"}
	if isCheck {
		keys = append(keys, "reject", "ignore")
	}
	f := p.mapping(n, where, keys...)
	if f == nil {
		return Condition{}, false
	}
	c := Condition{Line: n.line, Where: where}
	var ok bool
	c.Field, c.Paths, ok = p.value(f, r)
	if v, w := f.get("type"); v != nil {
		if c.Type, _ = p.str(v, w, nil, "a JSON type"); c.Type != "" && !slices.Contains(jsonTypes, c.Type) {
			p.bad(v, w, "%q: use %s", c.Type, strings.Join(jsonTypes, ", "))
			ok = false
		}
	}
	ev, ew := f.get("equals")
	in, iw := f.get("in")
	switch {
	case ev != nil && in != nil:
		p.bad(n, where, "give equals or in, not both")
		ok = false
	case ev != nil:
		if s, good := p.scalar(ev, ew); good {
			c.Equals = []any{s}
		} else {
			ok = false
		}
	case in != nil:
		items := p.list(in, iw, false)
		if in.kind == seqNode && len(items) == 0 {
			p.bad(in, iw, "list at least one value")
			ok = false
		}
		for i, item := range items {
			if s, good := p.scalar(item, fmt.Sprintf("%s[%d]", iw, i)); good {
				c.Equals = append(c.Equals, s)
			} else {
				ok = false
			}
		}
	}
	if c.Type != "" && len(c.Equals) > 0 {
		p.bad(n, where, "give type or a value to equal, not both")
		ok = false
	}
	return c, ok
}

// scalar reads a JSON scalar to compare with: a string, a number or a
// boolean.
func (p *parser) scalar(n *node, where string) (any, bool) {
	if n.kind != scalarNode || n.tag == "null" {
		p.bad(n, where, "want a string, a number or a boolean, got %s", n.describe())
		return nil, false
	}
	switch n.tag {
	case "bool":
		return n.value == "true", true
	case "int", "float":
		num := yamlNumber(n.value)
		if !json.Valid([]byte(num)) {
			p.bad(n, where, "%s is not a number JSON can hold", n.value)
			return nil, false
		}
		return json.Number(num), true
	}
	if err := checkText(n.value); err != nil {
		p.bad(n, where, "%v", err)
		return nil, false
	}
	return n.value, true
}

// outcome reads the reject or ignore of a check or match: exactly one.
func (p *parser) outcome(f *fields) (string, bool, bool) {
	rv, rw := f.get("reject")
	iv, iw := f.get("ignore")
	switch {
	case rv != nil && iv != nil:
		p.bad(f.n, f.where, "give reject or ignore, not both")
	case rv != nil:
		s, ok := p.outcomeName(rv, rw)
		return s, false, ok
	case iv != nil:
		s, ok := p.outcomeName(iv, iw)
		return s, true, ok
	default:
		p.bad(f.n, f.where, "give the outcome: reject: REASON or ignore: REASON")
	}
	return "", false, false
}

func (p *parser) outcomeName(n *node, where string) (string, bool) {
	s, ok := p.str(n, where, outcomePattern, "an outcome (lower-case letters, digits and '_', starting with a letter, at most 63 bytes)")
	if ok && slices.Contains(builtinOutcomes, s) {
		p.bad(n, where, "%q is an outcome the worker gives itself: name yours otherwise", s)
		return "", false
	}
	return s, ok
}

func (p *parser) check(n *node, where string, r *Rule) (Check, bool) {
	c, ok := p.condition(n, where, r, true)
	if !ok {
		return Check{}, false
	}
	f := &fields{n: n, where: where}
	outcome, ignore, ok := p.outcome(f)
	return Check{Condition: c, Outcome: outcome, Ignore: ignore}, ok
}

func (p *parser) matches(n *node, where string, r *Rule) []Match {
	var out []Match
	for i, item := range p.list(n, where, false) {
		w := fmt.Sprintf("%s[%d]", where, i)
		f := p.mapping(item, w, "field", "column", "compare", "op", "reject", "ignore")
		if f == nil {
			continue
		}
		m := Match{Line: item.line, Compare: CompareText, Op: "eq"}
		ok := true
		if v, fw := p.required(f, "field"); v != nil {
			m.Field, ok = p.str(v, fw, nil, "a field")
			if ok && r.field(m.Field) == nil {
				p.bad(v, fw, "no field %q in this rule's fields", m.Field)
				ok = false
			}
		}
		if v, cw := p.required(f, "column"); v != nil {
			if m.Column, ok = p.str(v, cw, nil, "a column"); ok {
				if err := pgsql.ParseColumn(m.Column); err != nil {
					p.bad(v, cw, "%v", err)
				}
			}
		}
		if v, cw := f.get("compare"); v != nil {
			m.Compare, _ = p.str(v, cw, nil, "a comparison")
			if !slices.Contains([]string{CompareText, CompareTextCI, CompareNumeric}, m.Compare) {
				p.bad(v, cw, "%q: use text, text_ci or numeric", m.Compare)
			}
		}
		if v, ow := f.get("op"); v != nil {
			m.Op, _ = p.str(v, ow, nil, "an operator")
			switch {
			case !slices.Contains([]string{"eq", "ne", "lt", "le", "gt", "ge"}, m.Op):
				p.bad(v, ow, "%q: use eq, ne, lt, le, gt or ge", m.Op)
			case m.Compare != CompareNumeric && m.Op != "eq" && m.Op != "ne":
				p.bad(v, ow, "%q orders numbers: use it with compare: numeric", m.Op)
			}
		}
		var good bool
		m.Outcome, m.Ignore, good = p.outcome(f)
		if ok && good {
			out = append(out, m)
		}
	}
	return out
}

// transition reads the transition of rule r: the states it applies in,
// the state it leads to, where events wait, its matches and its sets.
func (p *parser) transition(n *node, where string, r *Rule) Transition {
	var t Transition
	f := p.mapping(n, where, "from", "to", "defer", "reject", "match", "set")
	if f == nil {
		return t
	}
	t.From = p.fromStates(f)
	if v, w := f.get("to"); v != nil {
		t.To, _ = p.state(v, w, false)
	} else if slices.Contains(t.From, Absent) {
		p.bad(n, join(where, "to"), "required when the transition may create the row (from: absent): the state it is created in")
	}
	if v, w := f.get("reject"); v != nil {
		t.Reject, _ = p.outcomeName(v, w)
	} else {
		t.Reject = r.entityName() + "_state_not_allowed"
	}
	t.Defer = p.deferStates(f, t.From)
	// A row that does not exist yet is waited for unless the rules say
	// otherwise: events arrive in any order.
	if !slices.Contains(t.From, Absent) && !slices.ContainsFunc(t.Defer, func(d StateOutcome) bool { return d.State == Absent }) {
		t.Defer = append([]StateOutcome{{State: Absent, Outcome: r.entityName() + "_unknown"}}, t.Defer...)
	}
	mn, mw := f.get("match")
	t.Match = p.matches(mn, mw, r)
	t.Set = p.transitionSets(f, r)
	return t
}

// state reads a state of a transition; absent (no row) only where
// absentOK, as effects do not delete rows.
func (p *parser) state(v *node, w string, absentOK bool) (string, bool) {
	s, ok := p.str(v, w, statePattern, "a state (letters, digits, '_', '.', ':' and '-', at most 63)")
	if ok && s == Absent && !absentOK {
		p.bad(v, w, "a row cannot become absent: effects do not delete rows")
		return "", false
	}
	return s, ok
}

// fromStates reads a transition's from: the states it applies in, one or
// a list, each once.
func (p *parser) fromStates(f *fields) []string {
	var from []string
	fn, fw := p.required(f, "from")
	for i, item := range p.list(fn, fw, true) {
		w := fmt.Sprintf("%s[%d]", fw, i)
		if s, ok := p.state(item, w, true); ok {
			if slices.Contains(from, s) {
				p.bad(item, w, "%q is listed twice", s)
			}
			from = append(from, s)
		}
	}
	if fn != nil && fn.kind == seqNode && len(from) == 0 {
		p.bad(fn, fw, "list at least one state")
	}
	return from
}

// deferStates reads a transition's defer: the states an event waits in,
// each with its outcome; none of them one of from, where it applies.
func (p *parser) deferStates(f *fields, from []string) []StateOutcome {
	dn, dw := f.get("defer")
	df := p.mapping(dn, dw)
	if df == nil {
		return nil
	}
	var out []StateOutcome
	for i, s := range df.n.keys {
		w := join(dw, s)
		if !statePattern.MatchString(s) {
			p.rep.add(df.n.keyLines[i], w, "%q is not a state", s)
			continue
		}
		if slices.Contains(from, s) {
			p.rep.add(df.n.keyLines[i], w, "%q is a state the transition applies in: it cannot also wait in it", s)
			continue
		}
		if outcome, ok := p.outcomeName(df.n.vals[i], w); ok {
			out = append(out, StateOutcome{State: s, Outcome: outcome})
		}
	}
	return out
}

// transitionSets reads a transition's set: columns of the row, each from
// a field of rule r. The entity's own columns are the transition's to
// set, not the file's.
func (p *parser) transitionSets(f *fields, r *Rule) []Set {
	sn, sw := f.get("set")
	sf := p.mapping(sn, sw)
	if sf == nil {
		return nil
	}
	var out []Set
	for i, col := range sf.n.keys {
		w := join(sw, col)
		if err := pgsql.ParseColumn(col); err != nil {
			p.rep.add(sf.n.keyLines[i], w, "%v", err)
			continue
		}
		if r.Entity != nil && slices.Contains([]string{r.Entity.Key, r.Entity.Account, r.Entity.State, r.Entity.Touch}, col) {
			p.rep.add(sf.n.keyLines[i], w, "%q is the entity's key, account, state or touch column: the transition sets those itself", col)
			continue
		}
		field, ok := p.str(sf.n.vals[i], w, nil, "a field")
		if ok && r.field(field) == nil {
			p.bad(sf.n.vals[i], w, "no field %q in this rule's fields", field)
			continue
		}
		if ok {
			out = append(out, Set{Column: col, Field: field})
		}
	}
	return out
}

func (r *Rule) entityName() string {
	if r.Entity == nil {
		return "entity"
	}
	return r.Entity.Name
}

// template reads a template. A key template's literal text is limited to
// keyLiteralPattern; any other (a payload's text) is free text without
// control characters. A placeholder names a field of the rule, the
// entity (its id), account or type.
func (p *parser) template(n *node, where string, r *Rule, key bool) (Template, bool) {
	s, ok := p.str(n, where, nil, "a template")
	if !ok {
		return Template{}, false
	}
	t := Template{Text: s}
	rest := s
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			t.Parts = append(t.Parts, Part{Literal: rest})
			break
		}
		if rest[open] == '}' {
			p.bad(n, where, "template %q: a '}' without its '{'", s)
			return Template{}, false
		}
		if open > 0 {
			t.Parts = append(t.Parts, Part{Literal: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			p.bad(n, where, "template %q: a '{' without its '}'", s)
			return Template{}, false
		}
		name := rest[open+1 : open+end]
		if !namePattern.MatchString(name) {
			p.bad(n, where, "template %q: {%s} is not a placeholder (a field, %s, account or type)", s, name, r.entityName())
			return Template{}, false
		}
		if r.field(name) == nil && name != "account" && name != "type" && name != r.entityName() {
			p.bad(n, where, "template %q: {%s} is not a field of this rule, nor %s, account or type", s, name, r.entityName())
			return Template{}, false
		}
		t.Parts = append(t.Parts, Part{Var: name})
		rest = rest[open+end+1:]
	}
	if key {
		if len(t.Vars()) == 0 {
			p.bad(n, where, "template %q has no placeholder: every event would propose the same key", s)
			return Template{}, false
		}
		for _, part := range t.Parts {
			if part.Var == "" && !keyLiteralPattern.MatchString(part.Literal) {
				p.bad(n, where, "key template %q: its text may hold letters, digits and _ . : / # @ = + - only (got %q)", s, part.Literal)
				return Template{}, false
			}
		}
	}
	return t, true
}

// task reads one task of rule r: its key template, kind and payload.
func (p *parser) task(n *node, where string, r *Rule) (Task, bool) {
	f := p.mapping(n, where, "key", "kind", "payload")
	if f == nil {
		return Task{}, false
	}
	var t Task
	ok := true
	if v, w := p.required(f, "key"); v != nil {
		var good bool
		if t.Key, good = p.template(v, w, r, true); !good {
			ok = false
		}
	}
	if v, w := p.required(f, "kind"); v != nil {
		var good bool
		if t.Kind, good = p.str(v, w, kindPattern, "a kind (lower-case letters, digits, '_', '.' and '-', starting with a letter)"); !good {
			ok = false
		}
	}
	pn, pw := f.get("payload")
	pf := p.named(pn, pw, memberPattern, "member name %q: use letters, digits, '_', '.' and '-', at most 63")
	if pf == nil {
		return t, ok
	}
	for i, name := range pf.n.keys {
		if !memberPattern.MatchString(name) {
			ok = false
			continue
		}
		item, good := p.payloadItem(pf.n.vals[i], join(pw, name), name, r)
		if !good {
			ok = false
			continue
		}
		t.Payload = append(t.Payload, item)
	}
	return t, ok
}

// payloadItem reads member name of a task's payload: a template (a
// scalar), or a mapping naming a column of the row or a field of rule r,
// exactly one.
func (p *parser) payloadItem(v *node, w, name string, r *Rule) (PayloadItem, bool) {
	item := PayloadItem{Name: name}
	if v.kind == scalarNode {
		tpl, ok := p.template(v, w, r, false)
		if !ok {
			return PayloadItem{}, false
		}
		item.Template = &tpl
		return item, true
	}
	vf := p.mapping(v, w, "column", "field")
	if vf == nil {
		return PayloadItem{}, false
	}
	cv, cw := vf.get("column")
	fv, fw := vf.get("field")
	switch {
	case (cv == nil) == (fv == nil):
		p.bad(v, w, "give column or field, exactly one")
		return PayloadItem{}, false
	case cv != nil:
		item.Column, _ = p.str(cv, cw, nil, "a column")
		if err := pgsql.ParseColumn(item.Column); err != nil {
			p.bad(cv, cw, "%v", err)
			return PayloadItem{}, false
		}
	default:
		item.Field, _ = p.str(fv, fw, nil, "a field")
		if r.field(item.Field) == nil {
			p.bad(fv, fw, "no field %q in this rule's fields", item.Field)
			return PayloadItem{}, false
		}
	}
	return item, true
}
