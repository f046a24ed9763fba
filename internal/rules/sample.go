package rules

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
)

// Sample is one sample event of `idemhook rules test`: an event, what
// exists before it, and the decision expected of it. A sample file is
// YAML or JSON (docs/inbox.md, "Rules in CI"):
//
//	description: a refund before its payment waits
//	event: {id: evt_1, type: charge.refunded, data: {object: {...}}}  # or body: raw text
//	headers: {Stripe-Signature: "..."}    # optional
//	account: acct_1                        # optional: else the provider's, else "default"
//	type: charge.refunded                  # optional: else the provider's (the body's type)
//	received_ago: 25h                      # optional: how old the receipt is
//	rows: {orders: [{id: o1, amount: 100, currency: eur}]}   # rows before it
//	effects: [confirm_order:o1:pi_1]       # effects recorded before it
//	expect:
//	  state: deferred
//	  outcome: order_not_confirmed
//	  effect: none                         # the effect key this event records, or none
//	  tasks: []                            # the operation keys it writes (omit: not checked)
//	  rows: {orders: [{id: o1, state: pending}]}  # rows that must exist after it
type Sample struct {
	File        string
	Description string
	Body        []byte
	Headers     map[string]string
	Account     string
	Type        string
	ReceivedAgo time.Duration
	Rows        []TableRows
	Effects     []string
	Expect      Expectation
}

// TableRows are rows of one table, each a column → JSON value map.
type TableRows struct {
	Table pgsql.Table
	Rows  []map[string]any
}

// Expectation is what a sample's event must lead to. Effect is nil when
// not checked, "" for none; Tasks nil when not checked.
type Expectation struct {
	State, Outcome string
	Effect         *string
	Tasks          []string
	Rows           []TableRows
}

// ParseSample reads a sample file; every problem names the file, line and
// field, as Parse does.
func ParseSample(name string, data []byte) (*Sample, error) {
	s, err := parseFile(name, data, (*parser).sample)
	if err != nil {
		return nil, err
	}
	s.File = name
	return s, nil
}

// LoadSamples reads every *.yaml, *.yml and *.json file of dir, in name
// order. A folder without one is an error: a CI step that tests nothing
// must not pass.
func LoadSamples(dir string) ([]*Sample, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*Sample
	var errs Errors
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		s, err := ParseSample(path, data)
		if err != nil {
			if es, ok := err.(Errors); ok {
				errs = append(errs, es...)
				continue
			}
			if e, ok := err.(*Error); ok {
				errs = append(errs, e)
				continue
			}
			return nil, err
		}
		out = append(out, s)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no sample (*.yaml, *.yml or *.json)", dir)
	}
	return out, nil
}

var outcomeStates = []string{pgsql.StateProcessed, pgsql.StateIgnored, pgsql.StateRejected, pgsql.StateDeferred, pgsql.StateFailed, pgsql.StateProcessing}

// sample reads a sample file: the event, what exists before it and the
// decision expected of it.
func (p *parser) sample(n *node) *Sample {
	s := &Sample{}
	f := p.mapping(n, "", "description", "event", "body", "headers", "account", "type", "received_ago", "rows", "effects", "expect")
	if f == nil {
		return s
	}
	if v, w := f.get("description"); v != nil {
		s.Description, _ = p.str(v, w, nil, "a description")
	}
	s.Body = p.sampleBody(n, f)
	s.Headers = p.sampleHeaders(f)
	if v, w := f.get("account"); v != nil {
		s.Account, _ = p.str(v, w, nil, "an account")
	}
	if v, w := f.get("type"); v != nil {
		s.Type, _ = p.str(v, w, typePattern, "an event type")
	}
	s.ReceivedAgo = p.receivedAgo(f)
	rn, rw := f.get("rows")
	s.Rows = p.tableRows(rn, rw)
	en, ew := f.get("effects")
	for i, item := range p.list(en, ew, false) {
		if k, ok := p.str(item, fmt.Sprintf("%s[%d]", ew, i), nil, "an effect key"); ok {
			s.Effects = append(s.Effects, k)
		}
	}
	xn, xw := p.required(f, "expect")
	if xf := p.mapping(xn, xw, "state", "outcome", "effect", "tasks", "rows"); xf != nil {
		s.Expect = p.expectation(xf)
	}
	return s
}

// sampleBody reads a sample's event body: event, the body as YAML or
// JSON, or body, its raw text; exactly one.
func (p *parser) sampleBody(n *node, f *fields) []byte {
	ev, ew := f.get("event")
	body, bw := f.get("body")
	switch {
	case ev != nil && body != nil:
		p.bad(n, "", "give event (the body as YAML or JSON) or body (its raw text), not both")
	case ev != nil:
		b, err := json.Marshal(ev.toValue())
		if err != nil {
			p.bad(ev, ew, "cannot be a JSON body: %v", err)
		}
		return b
	case body != nil:
		if body.kind != scalarNode || body.tag != "str" {
			p.bad(body, bw, "want the raw body as a string, got %s", body.describe())
			return nil
		}
		return []byte(body.value)
	default:
		p.bad(n, "event", "required (or body)")
	}
	return nil
}

// sampleHeaders reads a sample's headers, their names lower-cased as the
// receivers keep them (nil when it has none).
func (p *parser) sampleHeaders(f *fields) map[string]string {
	hn, hw := f.get("headers")
	if hn == nil {
		return nil
	}
	hf := p.mapping(hn, hw)
	if hf == nil {
		return nil
	}
	headers := map[string]string{}
	for i, k := range hf.n.keys {
		if v, ok := p.str(hf.n.vals[i], join(hw, k), nil, "a header value"); ok {
			headers[strings.ToLower(k)] = v
		}
	}
	return headers
}

// receivedAgo reads a sample's received_ago: how old its receipt is (0
// when not given).
func (p *parser) receivedAgo(f *fields) time.Duration {
	v, w := f.get("received_ago")
	if v == nil {
		return 0
	}
	txt, ok := p.str(v, w, nil, "a duration")
	if !ok {
		return 0
	}
	d, err := parseDuration(txt)
	if err != nil || d < 0 {
		p.bad(v, w, "%q: want a duration such as 25h or 2d", txt)
	}
	return d
}

// expectation reads a sample's expect: the state and outcome its event
// must end in, and, when given, its effect key, its task keys and the
// rows that must exist after it.
func (p *parser) expectation(xf *fields) Expectation {
	var x Expectation
	if v, w := p.required(xf, "state"); v != nil {
		if st, ok := p.str(v, w, nil, "a state"); ok {
			if !slices.Contains(outcomeStates, st) {
				p.bad(v, w, "%q: a decision ends %s", st, strings.Join(outcomeStates, ", "))
			}
			x.State = st
		}
	}
	if v, w := p.required(xf, "outcome"); v != nil {
		x.Outcome, _ = p.str(v, w, outcomePattern, "an outcome")
	}
	if v, w := xf.get("effect"); v != nil {
		var k string
		if v.tag != "null" {
			k, _ = p.str(v, w, nil, "an effect key, or none")
		}
		if k == "none" {
			k = ""
		}
		x.Effect = &k
	}
	if v, w := xf.get("tasks"); v != nil {
		x.Tasks = []string{}
		for i, item := range p.list(v, w, false) {
			if k, ok := p.str(item, fmt.Sprintf("%s[%d]", w, i), nil, "an operation key"); ok {
				x.Tasks = append(x.Tasks, k)
			}
		}
	}
	rn, rw := xf.get("rows")
	x.Rows = p.tableRows(rn, rw)
	return x
}

func (p *parser) tableRows(n *node, where string) []TableRows {
	f := p.mapping(n, where)
	if f == nil {
		return nil
	}
	var out []TableRows
	for i, name := range f.n.keys {
		w := join(where, name)
		t, err := pgsql.ParseTable(name)
		if err != nil {
			p.rep.add(f.n.keyLines[i], w, "%v", err)
			continue
		}
		tr := TableRows{Table: t}
		for j, item := range p.list(f.n.vals[i], w, false) {
			iw := fmt.Sprintf("%s[%d]", w, j)
			rf := p.mapping(item, iw)
			if rf == nil {
				continue
			}
			row := map[string]any{}
			for k, col := range rf.n.keys {
				if err := pgsql.ParseColumn(col); err != nil {
					p.rep.add(rf.n.keyLines[k], join(iw, col), "%v", err)
					continue
				}
				row[col] = rf.n.vals[k].toValue()
			}
			if len(row) == 0 {
				p.bad(item, iw, "a row names at least one column")
			}
			tr.Rows = append(tr.Rows, row)
		}
		out = append(out, tr)
	}
	return out
}
