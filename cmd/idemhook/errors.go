package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/idemhook/idemhook/internal/sandbox"
)

// Exit codes: 1 when the work failed, 2 when the command line or the input
// was wrong.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// usageError is a mistake in the command line or in the input it names
// (a file, a value, the environment it reads): run again as it is, the
// command fails the same way. exitWith maps it to exit 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef is a usage error saying format.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// asUsage marks err, when not nil, as a usage error.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err}
}

// commandError is an error of a part of a command that has a name of its
// own ("rules test", "guard --remove"): exitWith names that part.
type commandError struct {
	command string
	err     error
}

func (e *commandError) Error() string { return e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }

// within names command as the source of err, when not nil.
func within(command string, err error) error {
	if err == nil {
		return nil
	}
	return &commandError{command, err}
}

// exitWith is where the CLI's errors are written, by one rule
// (docs/cli.md): one line on stderr, "idemhook COMMAND: CAUSE", the cause
// first; exit 2 for a usage error, 1 for any other (the work failed), 0
// for nil and for flag.ErrHelp (the usage was printed, as asked). An error
// of several lines (a tool's output it quotes) is joined into one with
// "; ".
func exitWith(stderr io.Writer, command string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var part *commandError
	if errors.As(err, &part) {
		command = part.command
	}
	prefix := "idemhook"
	if command != "" {
		prefix += " " + command
	}
	fmt.Fprintf(stderr, "%s: %s\n", prefix, oneLine(err.Error()))
	var usage *usageError
	if errors.As(err, &usage) {
		return exitUsage
	}
	return exitFail
}

// oneLine joins the non-blank lines of msg with "; ".
func oneLine(msg string) string {
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

// suggest returns the choice word was most likely meant to be: the one
// choice it begins, or the nearest within two edits (and fewer than its
// length); "" when none is close.
func suggest(word string, choices []string) string {
	if word == "" {
		return ""
	}
	var prefixed []string
	for _, c := range choices {
		if strings.HasPrefix(c, word) && c != word {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	best, bestDist := "", 3
	for _, c := range choices {
		if d := editDistance(word, c); d < bestDist && d < len(word) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// sandboxError marks as a usage error what this machine cannot run as it
// is: a platform without builds (*sandbox.PlatformError), a cache folder
// the PostgreSQL user cannot reach (*sandbox.UnreachableError).
func sandboxError(err error) error {
	var platform *sandbox.PlatformError
	var unreachable *sandbox.UnreachableError
	if errors.As(err, &platform) || errors.As(err, &unreachable) {
		return asUsage(err)
	}
	return err
}
