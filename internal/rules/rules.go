// Package rules makes the inbox pattern's effect rules the user's own: a
// rules file (YAML or JSON, validated against effects.schema.json) says, for
// each event type the worker handles, which row the event is about, what
// data it must carry, which state transition it makes, its effect key,
// when it waits, and which outbox tasks it writes. The generator compiles
// the rules into the worker's idemhook_apply_event function (Compile hands
// them to package pgsql, which writes all SQL); the planner page evaluates
// them in the browser (Evaluate); `idemhook rules test` runs sample events
// through the compiled function (package rules/samples).
//
// The files of the package, one concept each: rules.go the model, node.go
// the position-carrying tree of a YAML or JSON file, parse.go its
// validation, provider.go where a provider's events keep their type and
// account, compile.go the hand-over to pgsql, eval.go the evaluation
// without a database, presets.go the built-in rules.
package rules

import (
	"slices"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
)

// Rules is a validated rules file.
type Rules struct {
	// Source names where the rules came from: a file name, or "preset NAME".
	Source string
	// Provider says where an event's type and account are read.
	Provider Provider
	// Entities are the rows effects change, by name.
	Entities []*Entity
	// Checks run before every rule's own checks.
	Checks []Check
	// Rules in file order: for an event, the first whose On holds its type
	// and whose When holds applies.
	Rules []*Rule
	// Domain is the example domain whose tables the preset's schema
	// creates (pgsql.Domains); "" for a file, whose tables exist already.
	Domain string
}

// Entity is a table whose rows effects change.
type Entity struct {
	// Name is what rules call it; {Name} in a template is the row's id.
	Name  string
	Table pgsql.Table
	// Key is the column the id is matched against; Account, when set, the
	// column matched against the event's account; State the column a
	// transition reads and writes; Touch, when set, a column every effect
	// sets to now().
	Key, Account, State, Touch string
	Line                       int
}

// Path is a path into the event's JSON body: object keys, or array
// indexes in decimal.
type Path []string

// Field is a named value of the event: the first of Paths that is present
// (not missing; JSON null counts as present, as with jsonb's coalesce).
type Field struct {
	Name  string
	Paths []Path
}

// Condition tests one value of the event: Field (a rule's field) or Paths.
// With neither Type nor Equals it holds when the value is present: not
// missing, not null, and not an empty string. Type narrows that to one
// JSON type; Equals to one of the listed JSON scalars.
type Condition struct {
	Field  string
	Paths  []Path
	Type   string
	Equals []any // string, json.Number or bool
	Line   int
	// Where is the condition's place in the file, for messages.
	Where string
}

// Check is a condition an event must meet; when it does not, the event
// is rejected with Outcome, or ignored with it when Ignore.
type Check struct {
	Condition
	Outcome string
	Ignore  bool
}

// Comparisons of Match.
const (
	CompareText    = "text"    // the value's text equals the column's (the default)
	CompareTextCI  = "text_ci" // the same, case-insensitive
	CompareNumeric = "numeric" // a JSON number compared with the column as numbers, with Op
)

// Match compares a field of the event with a column of the row; when the
// comparison fails, the event is rejected (or ignored) with Outcome.
type Match struct {
	Field, Column string
	Compare       string
	// Op is eq (the default), ne, lt, le, gt or ge: "field Op column".
	Op      string
	Outcome string
	Ignore  bool
	Line    int
}

// Absent is the state of a row that does not exist.
const Absent = "absent"

// Transition is the state change of a rule's effect.
type Transition struct {
	// From lists the states the effect applies in; Absent among them lets
	// the effect create the row.
	From []string
	// To is the row's state after the effect; "" keeps it.
	To string
	// Defer lists the states (Absent included) in which the event waits,
	// each with its outcome: the row does not exist yet, or its state
	// comes earlier.
	Defer []StateOutcome
	// Reject is the outcome of any other state.
	Reject string
	// Match is compared once the state allows the transition.
	Match []Match
	// Set assigns columns from fields, through the columns' own types.
	Set []Set
}

// StateOutcome is a state and the outcome an event gets in it.
type StateOutcome struct{ State, Outcome string }

// Set assigns the value of Field to Column.
type Set struct{ Column, Field string }

// Template is a key or text with {name} placeholders: a field, the
// entity's name (its id), account or type.
type Template struct {
	Text  string
	Parts []Part
}

// Part of a template: a literal or a placeholder's name.
type Part struct {
	Literal string
	Var     string
}

// Vars lists the template's placeholders.
func (t Template) Vars() []string {
	var out []string
	for _, p := range t.Parts {
		if p.Var != "" && !slices.Contains(out, p.Var) {
			out = append(out, p.Var)
		}
	}
	return out
}

// Task is an outbox task an effect writes: its operation key, kind and
// payload (a JSON object).
type Task struct {
	Key     Template
	Kind    string
	Payload []PayloadItem
}

// PayloadItem is one member of a task's payload: a template's text, a
// column of the row after the effect, or a field's JSON value.
type PayloadItem struct {
	Name     string
	Template *Template
	Column   string
	Field    string
}

// Rule is what one kind of event does.
type Rule struct {
	Name string
	On   []string
	When []Condition
	// Entity is the row the event is about; ID where its id is.
	Entity *Entity
	ID     []Path
	Fields []Field
	Checks []Check
	// Match is compared once the row is found and before its state is.
	Match      []Match
	Transition Transition
	// Effect is the effect key: one effect per distinct key.
	Effect Template
	Tasks  []Task
	// DeferLimit, when set, replaces the worker's --defer-limit for this
	// rule's deferred events.
	DeferLimit time.Duration
	Line       int
}

// Types lists the event types the rules handle, in file order.
func (rs *Rules) Types() []string {
	var out []string
	for _, r := range rs.Rules {
		for _, t := range r.On {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// field returns the rule's field called name, or nil.
func (r *Rule) field(name string) *Field {
	for i := range r.Fields {
		if r.Fields[i].Name == name {
			return &r.Fields[i]
		}
	}
	return nil
}

// creates reports whether the rule's effect may create its row.
func (r *Rule) creates() bool { return slices.Contains(r.Transition.From, Absent) }
