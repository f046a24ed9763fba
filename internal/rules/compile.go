package rules

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/internal/pgsql"
)

// idField is the field the compiled rule reads its row's id into. A rules
// file cannot name a field so: its names start with a letter.
const idField = "_id"

// Decision compiles the rules for the worker's function: package pgsql
// writes the SQL (pgsql.Inbox.DDL). Compiling adds what the function
// needs beyond the file: the common checks before each rule's own, a
// presence check for each field a key template reads that no check reads
// already (outcome missing_FIELD), a field for the id, and the default
// deferral of a missing row. It cannot fail on rules Parse accepted.
func (rs *Rules) Decision() pgsql.Decision {
	d := pgsql.Decision{}
	if rs.Provider.Type.Header != "" {
		d.TypeHeader = rs.Provider.Type.headerName()
	}
	if rs.Domain != "" {
		d.Domains = []string{rs.Domain}
	}
	for _, r := range rs.Rules {
		d.Rules = append(d.Rules, rs.compileRule(r))
	}
	return d
}

func (rs *Rules) compileRule(r *Rule) pgsql.DecisionRule {
	e := r.Entity
	out := pgsql.DecisionRule{
		Name:   r.Name,
		Types:  r.On,
		Entity: pgsql.Entity{Name: e.Name, Table: e.Table, Key: e.Key, Account: e.Account, State: e.State, Touch: e.Touch},
		ID:     idField,
		To:     r.Transition.To,
		Reject: r.Transition.Reject,
		Effect: compileTemplate(r.Effect, e.Name),
		// Fields are compiled below; the id is read as a field of its own.
		Fields:     []pgsql.JSONField{{Name: idField, Paths: pathsOf(r.ID)}},
		DeferLimit: r.DeferLimit,
	}
	for _, f := range r.Fields {
		out.Fields = append(out.Fields, pgsql.JSONField{Name: f.Name, Paths: pathsOf(f.Paths)})
	}
	for _, c := range r.When {
		// The When conditions are read before the rule's fields are.
		paths := c.Paths
		if c.Field != "" {
			paths = r.field(c.Field).Paths
		}
		out.When = append(out.When, compileCondition(Condition{Paths: paths, Type: c.Type, Equals: c.Equals}))
	}
	checked := map[string]bool{}
	for _, c := range append(slices.Clone(rs.Checks), r.Checks...) {
		out.Checks = append(out.Checks, pgsql.Check{
			Condition: compileCondition(c.Condition), Ignore: c.Ignore, Outcome: c.Outcome, Describe: describe(r, c.Condition),
		})
		if c.Field != "" {
			checked[c.Field] = true
		}
	}
	keyVars := r.Effect.Vars()
	for _, t := range r.Tasks {
		keyVars = append(keyVars, t.Key.Vars()...)
	}
	for _, v := range keyVars {
		if r.field(v) == nil || checked[v] {
			continue
		}
		checked[v] = true
		c := Condition{Field: v}
		out.Checks = append(out.Checks, pgsql.Check{Condition: compileCondition(c), Outcome: "missing_" + v,
			Describe: describe(r, c) + ", as a key reads it"})
	}
	for _, m := range r.Match {
		out.Match = append(out.Match, compileMatch(m))
	}
	for _, m := range r.Transition.Match {
		out.After = append(out.After, compileMatch(m))
	}
	for _, s := range r.Transition.From {
		if s == Absent {
			out.Create = true
		} else {
			out.From = append(out.From, s)
		}
	}
	for _, d := range r.Transition.Defer {
		if d.State == Absent {
			out.DeferAbsent = d.Outcome
		} else {
			out.Defer = append(out.Defer, pgsql.StateOutcome{State: d.State, Outcome: d.Outcome})
		}
	}
	for _, s := range r.Transition.Set {
		out.Set = append(out.Set, pgsql.Assign{Column: s.Column, Field: s.Field})
	}
	for _, t := range r.Tasks {
		task := pgsql.OutboxTask{Key: compileTemplate(t.Key, e.Name), Kind: t.Kind}
		for _, m := range t.Payload {
			pm := pgsql.PayloadMember{Name: m.Name, Column: m.Column, Field: m.Field}
			if m.Template != nil {
				pm.Template = compileTemplate(*m.Template, e.Name)
			}
			task.Payload = append(task.Payload, pm)
		}
		out.Tasks = append(out.Tasks, task)
	}
	return out
}

func pathsOf(ps []Path) [][]string {
	out := make([][]string, len(ps))
	for i, p := range ps {
		out[i] = []string(p)
	}
	return out
}

func compileCondition(c Condition) pgsql.Condition {
	out := pgsql.Condition{Value: pgsql.Value{Field: c.Field, Paths: pathsOf(c.Paths)}, Type: c.Type}
	for _, v := range c.Equals {
		b, _ := json.Marshal(v) // a string, a json.Number or a bool
		out.Equals = append(out.Equals, string(b))
	}
	return out
}

func compileMatch(m Match) pgsql.Match {
	return pgsql.Match{Field: m.Field, Column: m.Column, Compare: m.Compare, Op: m.Op, Ignore: m.Ignore, Outcome: m.Outcome}
}

// compileTemplate resolves the placeholders: entity is the rule's entity
// name, whose placeholder is the row's id.
func compileTemplate(t Template, entity string) pgsql.Template {
	out := make(pgsql.Template, 0, len(t.Parts))
	for _, p := range t.Parts {
		switch p.Var {
		case "":
			out = append(out, pgsql.TemplatePart{Literal: p.Literal})
		case "account":
			out = append(out, pgsql.TemplatePart{Account: true})
		case "type":
			out = append(out, pgsql.TemplatePart{TypeVar: true})
		case entity:
			out = append(out, pgsql.TemplatePart{ID: true})
		default:
			out = append(out, pgsql.TemplatePart{Field: p.Var})
		}
	}
	return out
}

// describe is the requirement c states, in words, for last_error.
func describe(r *Rule, c Condition) string {
	what := pathText(c.Paths)
	if c.Field != "" {
		what = pathText(r.field(c.Field).Paths)
	}
	switch {
	case c.Type != "":
		return what + " must be a JSON " + c.Type
	case len(c.Equals) == 1:
		b, _ := json.Marshal(c.Equals[0])
		return what + " must equal " + string(b)
	case len(c.Equals) > 1:
		vals := make([]string, len(c.Equals))
		for i, v := range c.Equals {
			b, _ := json.Marshal(v)
			vals[i] = string(b)
		}
		return what + " must be one of " + strings.Join(vals, ", ")
	}
	return what + " must be present"
}

func pathText(ps []Path) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strings.Join(p, ".")
	}
	return strings.Join(parts, " or ")
}

// String is the path as a rules file writes it.
func (p Path) String() string { return strings.Join(p, ".") }
