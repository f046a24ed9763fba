// Package pgsql holds every SQL statement idemhook runs against PostgreSQL:
// the schema, the reservation, the release, the lease transitions and the
// cleanup. The generated n8n workflows and keysvc both take their SQL from
// here, so a workflow and keysvc can share one processed_events table.
//
// Table names are the only text spliced into statements; they are validated
// by ParseTable first. Keys and every other value are bound parameters ($1).
package pgsql

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// IdentifierError is returned by ParseTable for a name it refuses.
type IdentifierError struct {
	Name   string
	Reason string
}

func (e *IdentifierError) Error() string {
	return fmt.Sprintf("invalid SQL identifier %q: %s", e.Name, e.Reason)
}

// IdentifierPattern is one part of a table name: a plain lower-case
// identifier needs no quoting; upper case or punctuation would need quoting
// rules that users get wrong, so they are refused.
const IdentifierPattern = `^[a-z_][a-z0-9_]{0,62}$`

var identPattern = regexp.MustCompile(IdentifierPattern)

// PostgreSQL's reserved key words (SQL Key Words appendix, "reserved" and
// "reserved (can be function or type)"): unusable as bare table names.
var reservedWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`all analyse analyze and any array as asc asymmetric authorization binary both case cast
		check collate collation column concurrently constraint create cross current_catalog current_date current_role
		current_schema current_time current_timestamp current_user default deferrable desc distinct do else end except
		false fetch for foreign freeze from full grant group having ilike in initially inner intersect into is isnull
		join lateral leading left like limit localtime localtimestamp natural not notnull null offset on only or order
		outer overlaps placing primary references returning right select session_user similar some symmetric
		system_user table tablesample then to trailing true union unique user using variadic verbose when where
		window with`) {
		reservedWords[w] = true
	}
}

// ReservedWords lists the words ParseTable refuses as a part of a name,
// sorted: the n8n community node validates table names by the same rules.
func ReservedWords() []string {
	return slices.Sorted(maps.Keys(reservedWords))
}

// Table is a validated, optionally schema-qualified table name.
type Table struct {
	Schema string // empty for the search_path default
	Name   string
}

// ParseTable validates a table name such as "processed_events" or
// "webhooks.processed_events": one or two dot-separated parts, each a
// lower-case identifier of at most 63 bytes that is not a reserved word.
func ParseTable(s string) (Table, error) {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return Table{}, &IdentifierError{s, "use table or schema.table"}
	}
	for _, p := range parts {
		if !identPattern.MatchString(p) {
			return Table{}, &IdentifierError{s, "each part must be lower-case letters, digits and '_', not starting with a digit, at most 63 bytes"}
		}
		if reservedWords[p] {
			return Table{}, &IdentifierError{s, fmt.Sprintf("%q is a reserved word in PostgreSQL", p)}
		}
	}
	if len(parts) == 2 {
		return Table{Schema: parts[0], Name: parts[1]}, nil
	}
	return Table{Name: parts[0]}, nil
}

// MustParseTable is ParseTable for names fixed in the source.
func MustParseTable(s string) Table {
	t, err := ParseTable(s)
	if err != nil {
		panic(err)
	}
	return t
}

func (t Table) String() string {
	if t.Schema != "" {
		return t.Schema + "." + t.Name
	}
	return t.Name
}

// ParseColumn validates a column name by the rules of one part of
// ParseTable: a lower-case identifier of at most 63 bytes that is not a
// reserved word. Columns are spliced into statements as they are, so they
// follow the tables' rules.
func ParseColumn(s string) error {
	t, err := ParseTable(s)
	if err == nil && t.Schema != "" {
		return &IdentifierError{s, "a column name has no '.'"}
	}
	return err
}
