package generator_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/rules"
)

// An option of one pattern given with the other is refused, not ignored:
// the files would not be what was asked for.
func TestCheckApplies(t *testing.T) {
	var na *generator.NotApplicableError
	inbox := generator.Options{Pattern: generator.PatternInbox}
	for _, c := range []struct {
		o   generator.Options
		set []string
		bad string
	}{
		{generator.Options{}, []string{"outbox-url"}, "outbox-url"},
		{generator.Options{}, []string{"path", "sweep-every"}, "sweep-every"},
		{inbox, []string{"guard"}, "guard"},
		{inbox, []string{"events-table"}, "events-table"},
		{inbox, []string{"outbox-url", "path", "verify"}, ""},
		{generator.Options{}, []string{"guard", "lease", "verify", "save-success"}, ""},
		{generator.Options{}, []string{"not-a-flag"}, ""}, // the flag package refuses those
	} {
		err := generator.CheckApplies(c.o, c.set)
		if c.bad == "" && err != nil || c.bad != "" && (!errors.As(err, &na) || na.Flag != c.bad) {
			t.Errorf("%s %v: %v, want a refusal of %q", c.o.Pattern, c.set, err, c.bad)
		}
	}
	// The planner's form goes through OptionsFromFlags, which refuses too.
	if _, err := generator.OptionsFromFlags(map[string]string{"outbox-url": "https://api.example/v1"}); !errors.As(err, &na) {
		t.Errorf("OptionsFromFlags with an inbox option and no pattern: %v", err)
	}
}

// An option with a default refuses an empty or zero value, which the
// options would read as "the default" without a word (issue 41:
// --retention 0 kept keys 30 days, --credential "" named the default
// credential); an option whose empty value is its "none" (no scope, the
// search_path, n8n's setting) takes it, as leaving it out does.
func TestZeroValuesAreRefused(t *testing.T) {
	emptyIsNone := map[string]bool{"preset": true, "scope": true, "save-success": true, "save-errors": true, "save-manual": true,
		"keysvc-credential": true, "db-schema": true, "outbox-url": true, "outbox-credential": true}
	for _, f := range generator.Flags {
		var o generator.Options
		err := f.Set(&o, "")
		switch {
		case emptyIsNone[f.Name] && err != nil:
			t.Errorf("--%s \"\": %v, want it taken as none", f.Name, err)
		case !emptyIsNone[f.Name] && err == nil:
			t.Errorf("--%s \"\" was taken, and would stand for the default", f.Name)
		}
		if strings.Contains(f.Usage, "`DURATION`") || strings.Contains(f.Usage, "`NUMBER`") {
			if err := f.Set(&o, "0"); !strings.Contains(fmt.Sprint(err), "empty or zero would mean the default") {
				t.Errorf("--%s 0: %v, want it refused as the default", f.Name, err)
			}
		}
	}
	if _, err := generator.OptionsFromFlags(map[string]string{"retention": "0s"}); err == nil || !strings.Contains(err.Error(), `invalid value "0s" for --retention: empty or zero would mean the default`) {
		t.Errorf("the planner's --retention 0s: %v", err)
	}
}

// A Go caller sets the other pattern's options in a struct the generator
// would not read (ReserveOptions with the inbox pattern, InboxOptions with
// the reserve pattern): Validate refuses the first, named as the CLI names
// its flag, rather than generate something else than was asked for.
func TestOtherPatternsOptionsAreRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		o      generator.Options
		option string
	}{
		{"a lease with the inbox", generator.Options{Pattern: generator.PatternInbox,
			ReserveOptions: generator.ReserveOptions{Lease: time.Minute}}, "lease"},
		{"an events table with the inbox", generator.Options{Pattern: generator.PatternInbox,
			ReserveOptions: generator.ReserveOptions{EventsTable: "shop.processed_events"}}, "events table"},
		{"a schema with the reserve pattern", generator.Options{
			InboxOptions: generator.InboxOptions{DBSchema: "shop"}}, "database schema"},
		{"rules with the reserve pattern", generator.Options{Pattern: generator.PatternReserve,
			InboxOptions: generator.InboxOptions{Rules: mustPreset(t, "stripe-orders")}}, "rules"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := generator.Files(c.o)
			var oe *generator.OptionError
			if !errors.As(err, &oe) || oe.Option != c.option || !strings.Contains(oe.Reason, "applies to the") {
				t.Fatalf("Files = %v, want the %s refused as another pattern's", err, c.option)
			}
			if generator.FlagOf(oe.Option) == nil {
				t.Errorf("%q names no flag", oe.Option)
			}
		})
	}
	// Each pattern's own, and the defaults it fills in, pass.
	for _, o := range []generator.Options{
		{ReserveOptions: generator.ReserveOptions{Lease: time.Minute, Guard: generator.GuardLease}},
		{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{DBSchema: "shop"}},
		generator.Options{Pattern: generator.PatternInbox}.WithDefaults(),
		generator.Options{}.WithDefaults(),
	} {
		if err := o.Validate(); err != nil {
			t.Errorf("%s pattern: %v", o.Pattern, err)
		}
	}
}

// Every field of ReserveOptions and InboxOptions is one flag's, which
// applies to that pattern only, and every other flag to both: the groups
// are where the CLI and the planner page learn which options a pattern
// reads.
func TestEveryPatternOptionHasItsFlag(t *testing.T) {
	for pattern, group := range map[generator.Pattern]any{
		generator.PatternReserve: generator.ReserveOptions{}, generator.PatternInbox: generator.InboxOptions{}} {
		typ := reflect.TypeOf(group)
		var flags []string
		for _, f := range generator.Flags {
			if f.Pattern == pattern {
				flags = append(flags, f.Name)
			}
		}
		if len(flags) != typ.NumField() {
			t.Errorf("%s has %d fields and %d flags apply to the %s pattern only (%v)", typ.Name(), typ.NumField(), len(flags), pattern, flags)
		}
	}
	var shared []string
	for _, f := range generator.Flags {
		if f.Pattern == "" {
			shared = append(shared, f.Name)
		}
	}
	for _, name := range []string{"path", "name", "verify", "hashing", "pattern", "save-success"} {
		if !slices.Contains(shared, name) {
			t.Errorf("--%s is not shared by both patterns (shared: %v)", name, shared)
		}
	}
}

func mustPreset(t *testing.T, name string) *rules.Rules {
	t.Helper()
	r, err := rules.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
