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

// compileRule compiles r with the file's common checks.
func (rs *Rules) compileRule(r *Rule) pgsql.DecisionRule {
	e := r.Entity
	out := pgsql.DecisionRule{
		Name:       r.Name,
		Types:      r.On,
		Entity:     pgsql.Entity{Name: e.Name, Table: e.Table, Key: e.Key, Account: e.Account, State: e.State, Touch: e.Touch},
		ID:         idField,
		To:         r.Transition.To,
		Reject:     r.Transition.Reject,
		Effect:     compileTemplate(r.Effect, e.Name),
		Fields:     compileFields(r),
		When:       compileWhen(r),
		Checks:     rs.compileChecks(r),
		Match:      compileMatches(r.Match),
		After:      compileMatches(r.Transition.Match),
		Set:        compileSets(r.Transition.Set),
		Tasks:      compileTasks(r.Tasks, e.Name),
		DeferLimit: r.DeferLimit,
	}
	out.Create, out.From = splitAbsent(r.Transition.From)
	out.DeferAbsent, out.Defer = compileDefer(r.Transition.Defer)
	return out
}

// compileFields lists the rule's fields, the id first: it is read as a
// field of its own.
func compileFields(r *Rule) []pgsql.JSONField {
	out := []pgsql.JSONField{{Name: idField, Paths: pathsOf(r.ID)}}
	for _, f := range r.Fields {
		out = append(out, pgsql.JSONField{Name: f.Name, Paths: pathsOf(f.Paths)})
	}
	return out
}

// compileWhen compiles the rule's When conditions to read paths: they
// are read before the rule's fields are, so a field is read as its paths.
func compileWhen(r *Rule) []pgsql.Condition {
	var out []pgsql.Condition
	for _, c := range r.When {
		paths := c.Paths
		if c.Field != "" {
			paths = r.field(c.Field).Paths
		}
		out = append(out, compileCondition(Condition{Paths: paths, Type: c.Type, Equals: c.Equals}))
	}
	return out
}

// compileChecks lists the checks of rule r in the order the function
// runs them: the common checks, the rule's own, then a presence check
// (outcome missing_FIELD) for each field a key template reads that none
// of those reads already.
func (rs *Rules) compileChecks(r *Rule) []pgsql.Check {
	var out []pgsql.Check
	checked := map[string]bool{}
	for _, c := range append(slices.Clone(rs.Checks), r.Checks...) {
		out = append(out, pgsql.Check{
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
		out = append(out, pgsql.Check{Condition: compileCondition(c), Outcome: "missing_" + v,
			Describe: describe(r, c) + ", as a key reads it"})
	}
	return out
}

// compileMatches compiles a rule's or a transition's matches.
func compileMatches(ms []Match) []pgsql.Match {
	var out []pgsql.Match
	for _, m := range ms {
		out = append(out, compileMatch(m))
	}
	return out
}

// splitAbsent splits a transition's from: whether it may create the row
// (from absent), and the states of an existing row it applies in.
func splitAbsent(from []string) (create bool, states []string) {
	for _, s := range from {
		if s == Absent {
			create = true
		} else {
			states = append(states, s)
		}
	}
	return create, states
}

// compileDefer splits a transition's defer: the outcome of an event whose
// row is absent ("" when it does not wait for it), and the states of an
// existing row it waits in.
func compileDefer(defers []StateOutcome) (absent string, states []pgsql.StateOutcome) {
	for _, d := range defers {
		if d.State == Absent {
			absent = d.Outcome
		} else {
			states = append(states, pgsql.StateOutcome{State: d.State, Outcome: d.Outcome})
		}
	}
	return absent, states
}

// compileSets compiles a transition's set: each column from a field.
func compileSets(sets []Set) []pgsql.Assign {
	var out []pgsql.Assign
	for _, s := range sets {
		out = append(out, pgsql.Assign{Column: s.Column, Field: s.Field})
	}
	return out
}

// compileTasks compiles the rule's tasks; entity is the rule's entity
// name, as compileTemplate takes it.
func compileTasks(tasks []Task, entity string) []pgsql.OutboxTask {
	var out []pgsql.OutboxTask
	for _, t := range tasks {
		task := pgsql.OutboxTask{Key: compileTemplate(t.Key, entity), Kind: t.Kind}
		for _, m := range t.Payload {
			pm := pgsql.PayloadMember{Name: m.Name, Column: m.Column, Field: m.Field}
			if m.Template != nil {
				pm.Template = compileTemplate(*m.Template, entity)
			}
			task.Payload = append(task.Payload, pm)
		}
		out = append(out, task)
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
