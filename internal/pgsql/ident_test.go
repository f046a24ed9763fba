package pgsql

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseTable(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // empty: refused
	}{
		{"processed_events", "processed_events"},
		{"hooks.processed_events", "hooks.processed_events"},
		{"_t1", "_t1"},
		{strings.Repeat("a", 63), strings.Repeat("a", 63)},
		{strings.Repeat("a", 64), ""},
		{"", ""},
		{"a.", ""},
		{".a", ""},
		{"a.b.c", ""},
		{"Events", ""},
		{`"events"`, ""},
		{"events; DROP TABLE x", ""},
		{"ev-ents", ""},
		{"9lives", ""},
		{"user", ""},
		{"public.table", ""},
		{"événements", ""},
	} {
		got, err := ParseTable(tc.in)
		if tc.want == "" {
			var ie *IdentifierError
			if !errors.As(err, &ie) {
				t.Errorf("ParseTable(%q) = %v, %v; want an *IdentifierError", tc.in, got, err)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("ParseTable(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestIntervalText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour:      "1 day",
		30 * 24 * time.Hour: "30 days",
		90 * time.Minute:    "5400 seconds",
	} {
		if got := intervalText(d); got != want {
			t.Errorf("intervalText(%v) = %q, want %q", d, got, want)
		}
	}
}
