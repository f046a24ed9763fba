package generator_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
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
