package rules

import (
	"fmt"
	"strings"
)

// Error is one problem with a rules or sample file: the file, the line
// (0 when the whole file is at fault) and the field, as a path such as
// rules[2].transition.from[0].
type Error struct {
	File   string
	Line   int
	Field  string
	Reason string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Reason)
	return b.String()
}

// Errors is every problem found in one file, in file order. Parse returns
// one when the file has any.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// maxErrors bounds what one file reports: past it, the rest is noise.
const maxErrors = 50

// reporter collects errors against one file.
type reporter struct {
	file string
	errs Errors
}

func (r *reporter) add(line int, field, format string, args ...any) {
	if len(r.errs) < maxErrors {
		r.errs = append(r.errs, &Error{File: r.file, Line: line, Field: field, Reason: fmt.Sprintf(format, args...)})
	}
}

func (r *reporter) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return r.errs
}
