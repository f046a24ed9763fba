// Package duration reads durations as every command of idemhook does: a Go
// duration ("90s", "720h", "1h30m") or a whole number of days ("30d"), so
// that `idemhook generate --retention 30d` and `keysvc --retention 30d`
// mean the same.
package duration

import (
	"errors"
	"flag"
	"strconv"
	"strings"
	"time"
)

// ErrSyntax is wrapped by Parse's errors.
var ErrSyntax = errors.New("want a duration such as 30d, 720h or 90s")

// Parse reads s: a whole number of days with the suffix d, or anything
// time.ParseDuration reads ("0" included).
func Parse(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 || days > 36500 {
			return 0, errors.New("want a positive whole number of days such as 30d")
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, ErrSyntax
	}
	return d, nil
}

// Format writes d as Parse reads it, the shortest way: 30d, 5m, 1h30m.
func Format(d time.Duration) string {
	const day = 24 * time.Hour
	if d > 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

type value struct{ d *time.Duration }

func (v value) String() string {
	if v.d == nil {
		return ""
	}
	return Format(*v.d)
}

func (v value) Set(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// Var defines a duration flag on fs that Parse reads, with default def.
func Var(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(value{p}, name, usage)
}
