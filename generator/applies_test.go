package generator_test

import (
	"errors"
	"testing"

	"github.com/idemhook/idemhook/generator"
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
