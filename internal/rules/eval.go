package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemhook/idemhook/internal/pgsql"
)

// Evaluation is what the rules decide about an event before the database
// is read: the rule that applies, and either the decision (when a check
// settles it) or the effect key, the task keys and what the row's state
// will decide. The planner page shows it; it reads the compiled decision
// (Decision), so it takes the function's steps in the function's order.
type Evaluation struct {
	Type, Account string
	// Rule is the rule that applies, "" when none does.
	Rule string
	// State and Outcome are the decision when it is known without the
	// row; "" when the row decides. Detail says why.
	State, Outcome, Detail string
	// The row the effect is about, and the keys.
	Entity, Table, ID string
	EffectKey         string
	TaskKeys          []string
	// Row says, per state of the row, what the function decides.
	Row []RowCase
}

// RowCase is what one state of the row leads to.
type RowCase struct {
	State, Decision string
}

// docValue is a JSON value as PostgreSQL's jsonb holds it: parsed with
// numbers kept as written.
type docValue = any

// parseDoc parses a body as the function does (convert_from(body,
// 'UTF8')::jsonb), or returns ok false where that fails: invalid UTF-8,
// not JSON, or a \u0000 escape, which jsonb refuses.
func parseDoc(body []byte) (docValue, bool) {
	if !utf8.Valid(body) || bytes.Contains(body, []byte(`\u0000`)) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if dec.More() {
		return nil, false
	}
	return v, true
}

// at reads path p of v as jsonb's #> does: object keys, array indexes
// (negative from the end); missing is (nil, false).
func at(v docValue, p []string) (docValue, bool) {
	for _, seg := range p {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil {
				return nil, false
			}
			if i < 0 {
				i += len(x)
			}
			if i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// first is coalesce(doc #> p1, doc #> p2, …): JSON null counts as present.
func first(doc docValue, paths [][]string) (docValue, bool) {
	for _, p := range paths {
		if v, ok := at(doc, p); ok {
			return v, true
		}
	}
	return nil, false
}

func jsonType(v docValue) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}

// text is v #>> '{}': a string as is, a number as numeric prints it, null
// as nothing (ok false), objects and arrays as jsonb prints them.
func text(v docValue) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case json.Number:
		return numericText(string(x)), true
	case bool:
		return strconv.FormatBool(x), true
	}
	var b strings.Builder
	writeJSONB(&b, v)
	return b.String(), true
}

// numericText is a JSON number as PostgreSQL's numeric prints it: the
// digits as written, an exponent applied.
func numericText(s string) string {
	d, ok := parseDecimal(s)
	if !ok {
		return s
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	if !hasExp {
		if d.isZero() {
			return strings.TrimPrefix(s, "-")
		}
		return s
	}
	e, err := strconv.Atoi(exp)
	if err != nil {
		return s
	}
	_, frac, _ := strings.Cut(mant, ".")
	return d.text(max(0, len(frac)-e))
}

// writeJSONB writes v as jsonb's text output: object keys shortest first,
// then bytewise, ", " and ": " between.
func writeJSONB(b *strings.Builder, v docValue) {
	switch x := v.(type) {
	case map[string]any:
		writeJSONBObject(b, x)
	case []any:
		b.WriteString("[")
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSONB(b, e)
		}
		b.WriteString("]")
	case string:
		writeJSONBString(b, x)
	case json.Number:
		b.WriteString(numericText(string(x)))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	default:
		b.WriteString("null")
	}
}

// writeJSONBObject writes an object as jsonb keeps it: its keys shortest
// first, then bytewise.
func writeJSONBObject(b *strings.Builder, x map[string]any) {
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) < len(keys[j])
		}
		return keys[i] < keys[j]
	})
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		writeJSONBString(b, k)
		b.WriteString(": ")
		writeJSONB(b, x[k])
	}
	b.WriteString("}")
}

// writeJSONBString writes a string quoted and escaped as jsonb prints it.
func writeJSONBString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c < 0x20:
			fmt.Fprintf(b, `\u%04x`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
}

// jsonEqual is jsonb's =: numbers compare as numbers.
func jsonEqual(a, b docValue) bool {
	an, aok := a.(json.Number)
	bn, bok := b.(json.Number)
	if aok && bok {
		x, ok1 := parseDecimal(string(an))
		y, ok2 := parseDecimal(string(bn))
		return ok1 && ok2 && x.equal(y)
	}
	if aok != bok {
		return false
	}
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return bytes.Equal(ab, bb)
}

// holds is the compiled condition's test.
func holds(c pgsql.Condition, doc docValue, fields map[string]docValue) bool {
	var v docValue
	var ok bool
	if c.Field != "" {
		v, ok = fields[c.Field]
	} else {
		v, ok = first(doc, c.Paths)
	}
	if !ok {
		v = nil
	}
	switch {
	case c.Type == "string":
		s, isStr := v.(string)
		return isStr && s != ""
	case c.Type != "":
		return ok && v != nil && jsonType(v) == c.Type
	case len(c.Equals) > 0:
		if !ok {
			return false
		}
		return slices.ContainsFunc(c.Equals, func(e string) bool {
			want, _ := parseDoc([]byte(e))
			return jsonEqual(v, want)
		})
	}
	s, present := text(v)
	return ok && present && s != ""
}

// Event is what Evaluate reads: the body and headers (lower-case names)
// as received; Type and Account, when set, as the receiver stored them
// (else the provider's, and "default").
type Event struct {
	Body          []byte
	Headers       map[string]string
	Type, Account string
}

// Evaluate evaluates the rules for an event without a database; allowed
// is the allowlist (nil: every type the rules handle, the generator's
// default).
func (rs *Rules) Evaluate(e Event, allowed []string) Evaluation {
	d := rs.Decision()
	doc, isJSON := parseDoc(e.Body)
	ev := Evaluation{}
	ev.Type, ev.Account = rs.typeAndAccount(e)
	if allowed == nil {
		allowed = rs.Types()
	}
	if !slices.Contains(allowed, ev.Type) {
		return ev.decided(pgsql.StateIgnored, "type_not_allowed", fmt.Sprintf("event type %q is not in the allowlist", ev.Type))
	}
	if !isJSON {
		doc = nil
	}
	for _, r := range d.Rules {
		if slices.Contains(r.Types, ev.Type) && !slices.ContainsFunc(r.When, func(c pgsql.Condition) bool { return !holds(c, doc, nil) }) {
			return ev.applyRule(r, doc)
		}
	}
	if slices.Contains(rs.Types(), ev.Type) {
		return ev.decided(pgsql.StateIgnored, "no_matching_rule", fmt.Sprintf("no rule for event type %q applies to this event's data", ev.Type))
	}
	return ev.decided(pgsql.StateRejected, "no_rule", fmt.Sprintf("event type %q is allowed but the rules have no rule for it", ev.Type))
}

// typeAndAccount are the event's type and account: as the receiver
// stored them, else the provider's, and the account "default" when the
// provider reads none.
func (rs *Rules) typeAndAccount(e Event) (typ, account string) {
	typ, account = e.Type, e.Account
	if typ == "" {
		typ = rs.Provider.TypeOf(lowerHeaders(e.Headers), e.Body)
	}
	if account == "" {
		if a, ok := rs.Provider.AccountOf(lowerHeaders(e.Headers), e.Body); ok {
			account = a
		} else {
			account = "default"
		}
	}
	return typ, account
}

// decided is ev with the decision known without the row.
func (ev Evaluation) decided(state, outcome, detail string) Evaluation {
	ev.State, ev.Outcome, ev.Detail = state, outcome, detail
	return ev
}

// applyRule takes the steps of rule r, which applies to the event (doc
// its body): its checks, the id and the keys; the row decides the rest.
func (ev Evaluation) applyRule(r pgsql.DecisionRule, doc docValue) Evaluation {
	ev.Rule, ev.Entity, ev.Table = r.Name, r.Entity.Name, r.Entity.Table.String()
	fields := map[string]docValue{}
	for _, f := range r.Fields {
		if v, ok := first(doc, f.Paths); ok {
			fields[f.Name] = v
		}
	}
	for _, c := range r.Checks {
		if !holds(c.Condition, doc, fields) {
			state := pgsql.StateRejected
			if c.Ignore {
				state = pgsql.StateIgnored
			}
			return ev.decided(state, c.Outcome, c.Describe)
		}
	}
	ev.ID, _ = text(fields[r.ID])
	if ev.ID == "" {
		return ev.decided(pgsql.StateRejected, "missing_"+r.Entity.Name+"_id", "the "+r.Entity.Name+" id is missing")
	}
	ev.EffectKey = ev.render(r.Effect, fields)
	for _, t := range r.Tasks {
		ev.TaskKeys = append(ev.TaskKeys, ev.render(t.Key, fields))
	}
	if len(ev.ID) > pgsql.MaxKeyBytes || len(ev.EffectKey) > pgsql.MaxKeyBytes || slices.ContainsFunc(ev.TaskKeys, func(k string) bool { return len(k) > pgsql.MaxKeyBytes }) {
		return ev.decided(pgsql.StateRejected, "key_too_long", fmt.Sprintf("the %s id, the effect key or an operation key is longer than %d bytes", r.Entity.Name, pgsql.MaxKeyBytes))
	}
	ev.Row = rowCases(r)
	ev.Detail = fmt.Sprintf("rule %s: the %s row %q decides; an effect already recorded under %s is not made again", r.Name, r.Entity.Name, ev.ID, ev.EffectKey)
	return ev
}

// render is the text of key template t for this event, as the function
// computes it: fields are the rule's fields the event holds.
func (ev Evaluation) render(t pgsql.Template, fields map[string]docValue) string {
	var b strings.Builder
	for _, p := range t {
		switch {
		case p.ID:
			b.WriteString(ev.ID)
		case p.Account:
			b.WriteString(ev.Account)
		case p.TypeVar:
			b.WriteString(ev.Type)
		case p.Field != "":
			s, _ := text(fields[p.Field])
			b.WriteString(s)
		default:
			b.WriteString(p.Literal)
		}
	}
	return b.String()
}

// rowCases lists what each state of the row leads to.
func rowCases(r pgsql.DecisionRule) []RowCase {
	to := r.To
	if to == "" {
		to = "its state unchanged"
	}
	var out []RowCase
	switch {
	case r.Create:
		out = append(out, RowCase{Absent, "processed, applied: the row is created " + to})
	case r.DeferAbsent != "":
		out = append(out, RowCase{Absent, "deferred, " + r.DeferAbsent + ": waits for the row"})
	default:
		out = append(out, RowCase{Absent, "rejected, " + r.Reject})
	}
	checks := ""
	if len(r.Match)+len(r.After) > 0 {
		checks = " if the row's columns match the event"
	}
	for _, s := range r.From {
		out = append(out, RowCase{s, "processed, applied (→ " + to + ")" + checks})
	}
	for _, d := range r.Defer {
		out = append(out, RowCase{d.State, "deferred, " + d.Outcome + ": waits for its transition"})
	}
	out = append(out, RowCase{"any other", "rejected, " + r.Reject})
	return out
}

// lowerHeaders are headers as the receivers keep them (lower-case names).
type lowerHeaders map[string]string

func (h lowerHeaders) Get(name string) string { return h[strings.ToLower(name)] }
