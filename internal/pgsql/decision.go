package pgsql

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Decision is a set of effect rules compiled for the inbox worker's
// idemhook_apply_event: every name resolved, every default applied, in the
// order the function evaluates them. Package rules builds it from a
// validated rules file (rules.Compile); ApplyEventDDL turns it into the
// function.
//
// The emitter lives here, not in package rules, because this package
// writes every statement idemhook runs: the function shares its fencing,
// its error handling and its final update of the inbox row with the
// statements beside it (ClaimEvent, ClaimBatch, RecordBatch, DueEvents), and one
// reviewer of SQL reads one package. What reaches the SQL text from a
// Decision is only ever an identifier validated as ParseTable validates
// (tables, columns, names) or a constant written by Literal; values of the
// event are read with jsonb operators at run time and never spliced.
type Decision struct {
	// TypeHeader, when set, is the (lower-case) header an event's type is
	// read from; else the type is inbox_events.event_type.
	TypeHeader string
	Rules      []DecisionRule
	// Domains are example domain tables that schema.sql creates (see
	// Domains); a user's own rules name tables that exist.
	Domains []string
}

// DecisionRule is one rule, evaluated when the event's type is one of
// Types and every When condition holds.
type DecisionRule struct {
	Name   string
	Types  []string
	When   []Condition
	Fields []JSONField
	// Checks, in order, before the row is read: the first that fails
	// decides (rejected, or ignored).
	Checks []Check
	Entity Entity
	// ID is the field holding the row's id.
	ID string
	// Match, in order, once the row is found and the effect is new.
	Match []Match
	// From are the states the transition applies in; Create lets it
	// insert a missing row (with state To).
	From   []string
	Create bool
	// To is the state after the effect, "" to keep it.
	To string
	// DeferAbsent, when set, is the outcome of an event whose row does not
	// exist (it waits); Defer the states in which it waits, with theirs.
	DeferAbsent string
	Defer       []StateOutcome
	// Reject is the outcome of any other state (and of a missing row that
	// is neither waited for nor created).
	Reject string
	// After, in order, once the state allows the transition.
	After  []Match
	Set    []Assign
	Effect Template
	Tasks  []OutboxTask
	// DeferLimit replaces p_defer_limit when set.
	DeferLimit time.Duration
}

// JSONField is a named value of the event: the first of Paths present.
type JSONField struct {
	Name  string
	Paths [][]string
}

// Value is what a condition tests: a field, or paths read in place.
type Value struct {
	Field string
	Paths [][]string
}

// Condition: with neither Type nor Equals, the value is present (not
// missing, not null, not ""); Type: its JSON type (a string also not
// empty); Equals: it equals one of these JSON texts.
type Condition struct {
	Value
	Type   string
	Equals []string
}

// Check is a condition that must hold, with the outcome when it does not
// and Describe, the text of the requirement for last_error.
type Check struct {
	Condition
	Ignore   bool
	Outcome  string
	Describe string
}

// Match compares field Field with column Column of the row: Compare is
// text, text_ci or numeric, Op eq, ne, lt, le, gt or ge.
type Match struct {
	Field, Column, Compare, Op string
	Ignore                     bool
	Outcome                    string
}

// StateOutcome is a state and its outcome.
type StateOutcome struct{ State, Outcome string }

// Assign sets Column from Field, through the column's type.
type Assign struct{ Column, Field string }

// Entity is the row a rule changes. A Table without a schema is in the
// inbox's schema.
type Entity struct {
	Name                       string
	Table                      Table
	Key, Account, State, Touch string
}

// TemplatePart is a literal, or the text of a field, the row's id, the
// event's account or its type.
type TemplatePart struct {
	Literal              string
	Field                string
	ID, Account, TypeVar bool
}

// Template is text made of parts.
type Template []TemplatePart

// OutboxTask is a task the effect writes.
type OutboxTask struct {
	Key     Template
	Kind    string
	Payload []PayloadMember
}

// PayloadMember is one member of a task's payload: a template's text, a
// column of the row after the effect, or a field's JSON value.
type PayloadMember struct {
	Name     string
	Template Template
	Column   string
	Field    string
}

// MaxKeyBytes bounds an effect key, an operation key and a row id: longer
// ones are rejected as key_too_long rather than failing in the indexes
// that keep them unique.
const MaxKeyBytes = 1000

// table is e's table in the inbox's schema when it names none.
func (in Inbox) entityTable(e Entity) Table {
	if e.Table.Schema == "" {
		return in.table(e.Table.Name)
	}
	return e.Table
}

// sqlText writes SQL and keeps the first error: a literal Literal refused,
// or an identifier that is not one.
type sqlText struct {
	b   strings.Builder
	err error
}

func (w *sqlText) f(format string, args ...any) { fmt.Fprintf(&w.b, format, args...) }

func (w *sqlText) lit(s string) string {
	l, err := Literal(s)
	if err != nil && w.err == nil {
		w.err = err
	}
	return l
}

func (w *sqlText) ident(s string) string {
	if err := ParseColumn(s); err != nil && w.err == nil {
		w.err = err
	}
	return s
}

// name checks a name that only ever appears behind a prefix (f_, e_, k_,
// a_): a plain identifier, reserved words allowed.
func (w *sqlText) name(s string) string {
	if !identPattern.MatchString(s) && w.err == nil {
		w.err = &IdentifierError{s, "a rule, field or entity name must be lower-case letters, digits and '_'"}
	}
	return s
}

func (w *sqlText) path(p []string) string {
	parts := make([]string, len(p))
	for i, s := range p {
		parts[i] = w.lit(s)
	}
	return "doc #> ARRAY[" + strings.Join(parts, ", ") + "]::text[]"
}

func (w *sqlText) paths(ps [][]string) string {
	if len(ps) == 1 {
		return w.path(ps[0])
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = w.path(p)
	}
	return "coalesce(" + strings.Join(parts, ", ") + ")"
}

func (w *sqlText) value(v Value) string {
	if v.Field != "" {
		return "f_" + w.name(v.Field)
	}
	return "(" + w.paths(v.Paths) + ")"
}

func (w *sqlText) list(items []string) string {
	parts := make([]string, len(items))
	for i, s := range items {
		parts[i] = w.lit(s)
	}
	return "ARRAY[" + strings.Join(parts, ", ") + "]::text[]"
}

// condition is an expression true when c holds (never NULL).
func (w *sqlText) condition(c Condition) string {
	v := w.value(c.Value)
	switch {
	case c.Type == "string":
		return fmt.Sprintf("coalesce(jsonb_typeof(%s) = 'string' AND %s #>> '{}' <> '', false)", v, v)
	case c.Type != "":
		return fmt.Sprintf("coalesce(jsonb_typeof(%s) = %s, false)", v, w.lit(c.Type))
	case len(c.Equals) > 0:
		vals := make([]string, len(c.Equals))
		for i, e := range c.Equals {
			if !json.Valid([]byte(e)) && w.err == nil {
				w.err = fmt.Errorf("a condition's value %q is not JSON", e)
			}
			vals[i] = w.lit(e) + "::jsonb"
		}
		return fmt.Sprintf("coalesce(%s = ANY (ARRAY[%s]), false)", v, strings.Join(vals, ", "))
	}
	return fmt.Sprintf("coalesce(%s #>> '{}', '') <> ''", v)
}

var sqlOps = map[string]string{"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

// match is an expression true when the field compares as m says with the
// row's column (never NULL).
func (w *sqlText) match(m Match, row string) string {
	f := "f_" + w.name(m.Field)
	col := row + "." + w.ident(m.Column)
	op, ok := sqlOps[m.Op]
	if !ok && w.err == nil {
		w.err = fmt.Errorf("match operator %q", m.Op)
	}
	switch m.Compare {
	case "numeric":
		return fmt.Sprintf("coalesce(jsonb_typeof(%s) = 'number' AND (%s #>> '{}')::numeric %s %s::numeric, false)", f, f, op, col)
	case "text_ci":
		return fmt.Sprintf("coalesce(lower(%s #>> '{}') %s lower(%s::text), false)", f, op, col)
	case "text", "":
		return fmt.Sprintf("coalesce((%s #>> '{}') %s %s::text, false)", f, op, col)
	}
	if w.err == nil {
		w.err = fmt.Errorf("match comparison %q", m.Compare)
	}
	return "false"
}

// template is the text expression of t. A key's parts are never NULL (its
// fields are checked present first); a payload's missing field is "".
func (w *sqlText) template(t Template, key bool) string {
	if len(t) == 0 {
		return "''"
	}
	parts := make([]string, len(t))
	for i, p := range t {
		switch {
		case p.ID:
			parts[i] = "v_id"
		case p.Account:
			parts[i] = "ev.account"
		case p.TypeVar:
			parts[i] = "v_type"
		case p.Field != "" && key:
			parts[i] = "(f_" + w.name(p.Field) + " #>> '{}')"
		case p.Field != "":
			parts[i] = "coalesce(f_" + w.name(p.Field) + " #>> '{}', '')"
		default:
			parts[i] = w.lit(p.Literal)
		}
	}
	return strings.Join(parts, " || ")
}

// finish sets the decision's state, outcome and detail and leaves the
// decide block.
func (w *sqlText) finish(indent, state, outcome, detail string) {
	w.f("%sv_state := '%s'; v_outcome := %s;\n%sv_detail := %s;\n%sEXIT decide;\n", indent, state, w.lit(outcome), indent, detail, indent)
}

func (w *sqlText) outcomeState(ignore bool) string {
	if ignore {
		return "ignored"
	}
	return "rejected"
}

// The indentation of the decision block: its own statements (i1), a
// rule's (i2), and those a rule's IF holds (i3).
const i1, i2, i3 = "      ", "        ", "          "

// ApplyEventBody is the decision block of idemhook_apply_event for d: the
// statements between the function's fencing and its final update of the
// inbox row, which set v_state, v_outcome, v_detail, v_waiting and
// v_tasks. It fails on a Decision that names an invalid identifier or a
// constant Literal refuses (package rules refuses both first).
func (in Inbox) applyEventBody(d Decision) (declare, body string, err error) {
	if err := checkDecisionRules(d.Rules); err != nil {
		return "", "", err
	}
	w := &sqlText{}
	writeTypeAndDoc(w, d.TypeHeader)
	for _, r := range d.Rules {
		in.writeRule(w, r)
	}
	in.writeNoRule(w, handledTypes(d.Rules))
	if w.err != nil {
		return "", "", w.err
	}
	declare, err = in.declarations(d.Rules)
	if err != nil {
		return "", "", err
	}
	return declare, w.b.String(), nil
}

// checkDecisionRules refuses, at the first rule that has one, what the
// block cannot be written from: a rule name that is not an identifier, an
// entity name standing for two different entities (they share one row
// variable), and a When condition reading a field (fields are assigned
// only once the rule applies).
func checkDecisionRules(rules []DecisionRule) error {
	entities := map[string]Entity{}
	for _, r := range rules {
		if !identPattern.MatchString(r.Name) {
			return &IdentifierError{r.Name, "a rule name must be lower-case letters, digits and '_'"}
		}
		e, seen := entities[r.Entity.Name]
		if !seen {
			entities[r.Entity.Name] = r.Entity
		} else if e != r.Entity {
			return fmt.Errorf("rule %q: entity %q differs from an earlier rule's", r.Name, r.Entity.Name)
		}
		for _, c := range r.When {
			if c.Field != "" {
				return fmt.Errorf("rule %q: a when condition reads a path, not a field", r.Name)
			}
		}
	}
	return nil
}

// writeTypeAndDoc reads the event's type (from header typeHeader when
// set), ignores a type not in the allowlist, and parses the body into doc
// (NULL when it is not JSON).
func writeTypeAndDoc(w *sqlText, typeHeader string) {
	typeExpr := "ev.event_type"
	if typeHeader != "" {
		typeExpr = "coalesce(ev.headers ->> " + w.lit(typeHeader) + ", '')"
	}
	w.f("%sv_type := %s;\n", i1, typeExpr)
	w.f("%sIF NOT (v_type = ANY (p_allowed)) THEN\n", i1)
	w.finish(i2, "ignored", "type_not_allowed", "format('event type %L is not in the allowlist', v_type)")
	w.f("%sEND IF;\n%sBEGIN\n%s  doc := convert_from(ev.body, 'UTF8')::jsonb;\n%sEXCEPTION WHEN others THEN\n%s  doc := NULL;\n%sEND;\n", i1, i1, i1, i1, i1, i1)
}

// writeRule writes r guarded by its types and its When conditions, which
// read paths only (checkDecisionRules refused fields).
func (in Inbox) writeRule(w *sqlText, r DecisionRule) {
	w.f("\n%s-- rule %s\n", i1, r.Name)
	w.f("%sIF v_type = ANY (%s)", i1, w.list(r.Types))
	for _, c := range r.When {
		w.f("\n%s  AND %s", i1, w.condition(c))
	}
	w.f(" THEN\n")
	in.ruleBody(w, r)
	w.f("%sEND IF;\n", i1)
}

// handledTypes lists the event types some rule handles, each once, in the
// order the rules first name them.
func handledTypes(rules []DecisionRule) []string {
	var handled []string
	for _, r := range rules {
		for _, t := range r.Types {
			if !slices.Contains(handled, t) {
				handled = append(handled, t)
			}
		}
	}
	return handled
}

// writeNoRule decides an event no rule applied to: ignored when a rule
// handles its type (the event's data did not meet its conditions),
// rejected when none does.
func (in Inbox) writeNoRule(w *sqlText, handled []string) {
	w.f("\n%sIF v_type = ANY (%s) THEN\n", i1, w.list(handled))
	w.finish(i2, "ignored", "no_matching_rule", "format('no rule for event type %L applies to this event''s data', v_type)")
	w.f("%sEND IF;\n", i1)
	w.finish(i1, "rejected", "no_rule", fmt.Sprintf("format('event type %%L is allowed but %s has no rule for it', v_type)", in.ApplyEvent()))
}

// declarations is the function's DECLARE section for rules: the block's
// own variables, one per field any rule reads (sorted by name), and per
// entity (in the order the rules first name them) its row, key and
// account.
func (in Inbox) declarations(rules []DecisionRule) (string, error) {
	decl := &sqlText{}
	decl.f("  doc jsonb;\n  v_type text;\n  v_id text;\n  v_effect text;\n  v_task_keys text[];\n  v_found boolean;\n  v_n integer;\n  v_defer_limit interval;\n")
	fields := map[string]bool{}
	for _, r := range rules {
		for _, f := range r.Fields {
			fields[f.Name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		decl.f("  f_%s jsonb;\n", decl.name(name))
	}
	var declared []string
	for _, r := range rules {
		e := r.Entity
		if slices.Contains(declared, e.Name) {
			continue
		}
		declared = append(declared, e.Name)
		t := in.entityTable(e)
		decl.f("  e_%s %s%%ROWTYPE;\n  k_%s %s.%s%%TYPE;\n", decl.name(e.Name), t, e.Name, t, decl.ident(e.Key))
		if e.Account != "" {
			decl.f("  a_%s %s.%s%%TYPE;\n", e.Name, t, decl.ident(e.Account))
		}
	}
	return decl.b.String(), decl.err
}

// ruleBody writes one rule's statements: its fields, checks, the row, the
// effect and its writes.
func (in Inbox) ruleBody(w *sqlText, r DecisionRule) {
	row := "e_" + w.name(r.Entity.Name)
	writeFieldsAndChecks(w, r)
	writeKeys(w, r)
	where := in.lockRow(w, r, row)
	w.f("%sIF EXISTS (SELECT 1 FROM %s WHERE effect_key = v_effect) THEN\n", i2, in.Effects())
	w.finish(i3, "processed", "effect_exists", "format('effect %s was recorded by an earlier event', v_effect)")
	w.f("%sEND IF;\n", i2)
	in.checkRowState(w, r, row)
	w.f("%sINSERT INTO %s (effect_key, inbox_id) VALUES (v_effect, ev.id) ON CONFLICT DO NOTHING;\n%sIF NOT FOUND THEN\n", i2, in.Effects(), i2)
	w.finish(i3, "processed", "effect_exists", "format('effect %s was recorded concurrently', v_effect)")
	w.f("%sEND IF;\n", i2)
	in.writeRow(w, r, row, where)
	in.writeTasks(w, r, row)
	// Events that wait for this row are due now; other deferred rows of
	// the account keep their turn.
	w.f("%sUPDATE %s SET next_attempt_at = now()\n%sWHERE state = 'deferred' AND account = ev.account AND waiting_for = v_id AND next_attempt_at > now();\n", i2, in.Inbox(), i2)
	w.f("%sv_state := 'processed'; v_outcome := 'applied'; v_detail := v_effect;\n%sEXIT decide;\n", i2, i2)
}

// writeFieldsAndChecks sets the rule's defer limit and reads its fields,
// then writes its checks: the first that fails decides, before the row is
// read.
func writeFieldsAndChecks(w *sqlText, r DecisionRule) {
	w.f("%sv_defer_limit := %s;\n", i2, map[bool]string{true: fmt.Sprintf("interval '%d seconds'", int64(r.DeferLimit/time.Second)), false: "NULL"}[r.DeferLimit > 0])
	for _, f := range r.Fields {
		w.f("%sf_%s := %s;\n", i2, w.name(f.Name), w.paths(f.Paths))
	}
	for _, c := range r.Checks {
		w.f("%sIF NOT (%s) THEN\n", i2, w.condition(c.Condition))
		w.finish(i3, w.outcomeState(c.Ignore), c.Outcome,
			fmt.Sprintf("format('%%s: %%s (got %%s)', %s, %s, coalesce(left(%s::text, 200), 'nothing'))", w.lit(c.Outcome), w.lit(c.Describe), w.value(c.Value)))
		w.f("%sEND IF;\n", i2)
	}
}

// writeKeys reads the row's id, the effect key and the task keys, and
// rejects an event whose id is missing or whose id or keys are longer
// than MaxKeyBytes.
func writeKeys(w *sqlText, r DecisionRule) {
	e := r.Entity
	w.f("%sv_id := f_%s #>> '{}';\n", i2, w.name(r.ID))
	w.f("%sIF coalesce(v_id, '') = '' THEN\n", i2)
	w.finish(i3, "rejected", "missing_"+e.Name+"_id", fmt.Sprintf("format('the %s id is missing')", e.Name))
	w.f("%sEND IF;\n", i2)
	w.f("%sv_effect := %s;\n", i2, w.template(r.Effect, true))
	keys := make([]string, len(r.Tasks))
	for i, task := range r.Tasks {
		keys[i] = w.template(task.Key, true)
	}
	w.f("%sv_task_keys := ARRAY[%s]::text[];\n", i2, strings.Join(keys, ", "))
	w.f("%sIF octet_length(v_id) > %d OR octet_length(v_effect) > %d\n%s  OR EXISTS (SELECT 1 FROM unnest(v_task_keys) k WHERE octet_length(k) > %d) THEN\n", i2, MaxKeyBytes, MaxKeyBytes, i2, MaxKeyBytes)
	w.finish(i3, "rejected", "key_too_long", fmt.Sprintf("format('the %s id, the effect key or an operation key is longer than %d bytes')", e.Name, MaxKeyBytes))
	w.f("%sEND IF;\n", i2)
}

// lockRow reads the rule's row into row, locked: two events proposing one
// effect are serialised on it. A rule that may create the row first takes
// a lock on its id, so that two such events cannot both find it missing.
// A missing row the rule does not create waits or is rejected. lockRow
// returns the WHERE condition that finds the row.
func (in Inbox) lockRow(w *sqlText, r DecisionRule, row string) string {
	e := r.Entity
	t := in.entityTable(e)
	key, acct := "k_"+e.Name, "a_"+e.Name
	w.f("%s%s := v_id;\n", i2, key)
	where := fmt.Sprintf("%s = %s", w.ident(e.Key), key)
	if e.Account != "" {
		w.f("%s%s := ev.account;\n", i2, acct)
		where += fmt.Sprintf(" AND %s = %s", w.ident(e.Account), acct)
	}
	if r.Create {
		w.f("%sPERFORM pg_advisory_xact_lock(hashtextextended(%s || ':' || ev.account || ':' || v_id, 0));\n", i2, w.lit(t.String()))
	}
	w.f("%sSELECT * INTO %s FROM %s WHERE %s FOR UPDATE;\n%sv_found := FOUND;\n", i2, row, t, where, i2)
	switch {
	case r.DeferAbsent != "":
		w.f("%sIF NOT v_found THEN\n%s  v_waiting := v_id;\n", i2, i2)
		w.finish(i3, "deferred", r.DeferAbsent, fmt.Sprintf("format('no %s %%L for account %%L yet', v_id, ev.account)", e.Name))
		w.f("%sEND IF;\n", i2)
	case !r.Create:
		w.f("%sIF NOT v_found THEN\n", i2)
		w.finish(i3, "rejected", r.Reject, fmt.Sprintf("format('no %s %%L for account %%L', v_id, ev.account)", e.Name))
		w.f("%sEND IF;\n", i2)
	}
	return where
}

// checkRowState decides on a row that exists: its columns must match the
// event (Match), its state must be one the transition applies in (else
// the event waits, or is rejected), and then After must match.
func (in Inbox) checkRowState(w *sqlText, r DecisionRule, row string) {
	e := r.Entity
	w.f("%sIF v_found THEN\n", i2)
	in.matches(w, r.Match, row, e, i3)
	state := row + "." + w.ident(e.State) + "::text"
	w.f("%sIF %s = ANY (%s) THEN\n%s  NULL;\n", i3, state, w.list(r.From), i3)
	for _, d := range r.Defer {
		w.f("%sELSIF %s = %s THEN\n%s  v_waiting := v_id;\n", i3, state, w.lit(d.State), i3)
		w.finish(i3+"  ", "deferred", d.Outcome, fmt.Sprintf("format('%s %%s is %%s: the event waits for its transition', v_id, %s)", e.Name, state))
	}
	w.f("%sELSE\n", i3)
	w.finish(i3+"  ", "rejected", r.Reject, fmt.Sprintf("format('%s %%s is %%s: no transition from it', v_id, %s)", e.Name, state))
	w.f("%sEND IF;\n", i3)
	in.matches(w, r.After, row, e, i3)
	w.f("%sEND IF;\n", i2)
}

// rowSets are the rule's column assignments: the new state, the Set
// columns (each field through its column's type) and the touch column.
func (in Inbox) rowSets(w *sqlText, r DecisionRule) []string {
	e := r.Entity
	t := in.entityTable(e)
	typed := func(col, field string) string {
		return fmt.Sprintf("(jsonb_populate_record(NULL::%s, jsonb_build_object(%s, f_%s))).%s", t, w.lit(col), w.name(field), w.ident(col))
	}
	var sets []string
	if r.To != "" {
		sets = append(sets, fmt.Sprintf("%s = %s", w.ident(e.State), w.lit(r.To)))
	}
	for _, s := range r.Set {
		sets = append(sets, fmt.Sprintf("%s = %s", w.ident(s.Column), typed(s.Column, s.Field)))
	}
	if e.Touch != "" {
		sets = append(sets, w.ident(e.Touch)+" = now()")
	}
	return sets
}

// writeRow applies the effect to the row: it updates the row found by
// where, or, for a rule that creates it, inserts a missing one with the
// same assignments.
func (in Inbox) writeRow(w *sqlText, r DecisionRule, row, where string) {
	e := r.Entity
	t := in.entityTable(e)
	key, acct := "k_"+e.Name, "a_"+e.Name
	sets := in.rowSets(w, r)
	if r.Create {
		w.f("%sIF NOT v_found THEN\n", i2)
		cols, vals := []string{w.ident(e.Key)}, []string{key}
		if e.Account != "" {
			cols, vals = append(cols, w.ident(e.Account)), append(vals, acct)
		}
		for _, s := range sets {
			c, v, _ := strings.Cut(s, " = ")
			cols, vals = append(cols, c), append(vals, v)
		}
		w.f("%s  INSERT INTO %s (%s)\n%s  VALUES (%s)\n%s  RETURNING * INTO %s;\n%sELSE\n", i2, t, strings.Join(cols, ", "), i2, strings.Join(vals, ", "), i2, row, i2)
	}
	if len(sets) > 0 {
		w.f("%s  UPDATE %s SET %s\n%s  WHERE %s RETURNING * INTO %s;\n", i2, t, strings.Join(sets, ", "), i2, where, row)
	} else {
		w.f("%s  NULL; -- the effect changes no column of the row\n", i2)
	}
	if r.Create {
		w.f("%sEND IF;\n", i2)
	}
}

// writeTasks writes the rule's outbox tasks under the keys writeKeys
// computed, each once (a task already written is not written again), and
// counts those written in v_tasks.
func (in Inbox) writeTasks(w *sqlText, r DecisionRule, row string) {
	for i, task := range r.Tasks {
		members := make([]string, 0, 2*len(task.Payload))
		for _, m := range task.Payload {
			var v string
			switch {
			case m.Column != "":
				v = "to_jsonb(" + row + "." + w.ident(m.Column) + ")"
			case m.Field != "":
				v = "f_" + w.name(m.Field)
			default:
				v = w.template(m.Template, false)
			}
			members = append(members, w.lit(m.Name), v)
		}
		w.f("%sINSERT INTO %s (operation_key, kind, payload, inbox_id)\n%sVALUES (v_task_keys[%d], %s, jsonb_build_object(%s), ev.id)\n%sON CONFLICT (operation_key) DO NOTHING;\n",
			i2, in.Outbox(), i2, i+1, w.lit(task.Kind), strings.Join(members, ", "), i2)
		w.f("%sGET DIAGNOSTICS v_n = ROW_COUNT;\n%sv_tasks := v_tasks + v_n;\n", i2, i2)
	}
}

func (in Inbox) matches(w *sqlText, ms []Match, row string, e Entity, indent string) {
	for _, m := range ms {
		w.f("%sIF NOT (%s) THEN\n", indent, w.match(m, row))
		w.finish(indent+"  ", w.outcomeState(m.Ignore), m.Outcome,
			fmt.Sprintf("format('%%s: the event''s %s is %%s, %s %%s has %s %%s (%s %s)', %s, coalesce(left(f_%s::text, 200), 'nothing'), v_id, coalesce(left(%s.%s::text, 200), 'nothing'))",
				m.Field, e.Name, m.Column, m.Compare, m.Op, w.lit(m.Outcome), m.Field, row, m.Column))
		w.f("%sEND IF;\n", indent)
	}
}

// columns lists every (table, column) the decision reads or writes, for
// the check that runs before the function is created.
func (in Inbox) columns(d Decision) [][2]string {
	var out [][2]string
	add := func(t Table, col string) {
		c := [2]string{t.String(), col}
		if col != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	for _, r := range d.Rules {
		t := in.entityTable(r.Entity)
		for _, c := range []string{r.Entity.Key, r.Entity.Account, r.Entity.State, r.Entity.Touch} {
			add(t, c)
		}
		for _, m := range append(slices.Clone(r.Match), r.After...) {
			add(t, m.Column)
		}
		for _, s := range r.Set {
			add(t, s.Column)
		}
		for _, task := range r.Tasks {
			for _, m := range task.Payload {
				add(t, m.Column)
			}
		}
	}
	return out
}

// columnCheck is a DO block that fails, naming them, when a table or a
// column the rules name does not exist: PL/pgSQL would otherwise only find
// out at an event's decision.
func (in Inbox) columnCheck(d Decision) (string, error) {
	w := &sqlText{}
	var rows []string
	for _, c := range in.columns(d) {
		rows = append(rows, fmt.Sprintf("(%s, %s)", w.lit(c[0]), w.lit(c[1])))
	}
	if len(rows) == 0 {
		return "", nil
	}
	w.f(`DO $check$
DECLARE
  v_missing text;
BEGIN
  SELECT string_agg(DISTINCT c.tbl, ', ') INTO v_missing
  FROM (VALUES %s) c(tbl, col) WHERE to_regclass(c.tbl) IS NULL;
  IF v_missing IS NOT NULL THEN
    RAISE EXCEPTION 'the effect rules name tables that do not exist: %%', v_missing
      USING HINT = 'create them before this schema, or use a preset whose schema creates its tables';
  END IF;
  SELECT string_agg(c.tbl || '.' || c.col, ', ') INTO v_missing
  FROM (VALUES %s) c(tbl, col)
  WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass(c.tbl) AND a.attname = c.col AND NOT a.attisdropped AND a.attnum > 0);
  IF v_missing IS NOT NULL THEN
    RAISE EXCEPTION 'the effect rules name columns that do not exist: %%', v_missing;
  END IF;
END
$check$;
`, strings.Join(rows, ", "), strings.Join(rows, ", "))
	return w.b.String(), w.err
}
