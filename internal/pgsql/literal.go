package pgsql

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// LiteralError is returned by Literal for text it will not put into SQL.
type LiteralError struct {
	Text   string
	Reason string
}

func (e *LiteralError) Error() string {
	return fmt.Sprintf("cannot be an SQL literal: %q %s", e.Text, e.Reason)
}

// Literal returns s as an SQL string literal that reads back as s whatever
// the server's standard_conforming_strings, inside a dollar-quoted function
// body or not: single quotes are doubled; a backslash or a '$' makes it an
// escape string (E'…') with '\' doubled and '$' written \x24, so no
// literal can end a $fn$ body. It refuses invalid UTF-8, NUL and every
// other control character (C0, DEL, C1): no constant of a rules file needs
// them, and a line break would hide text from a reader of the SQL.
func Literal(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", &LiteralError{s, "is not valid UTF-8"}
	}
	escape := false
	for _, c := range s {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return "", &LiteralError{s, fmt.Sprintf("holds the control character %U", c)}
		}
		if c == '\\' || c == '$' {
			escape = true
		}
	}
	body := strings.ReplaceAll(s, "'", "''")
	if !escape {
		return "'" + body + "'", nil
	}
	body = strings.ReplaceAll(body, `\`, `\\`)
	body = strings.ReplaceAll(body, "$", `\x24`)
	return "E'" + body + "'", nil
}
