package generator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/generator"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   generator.Options
		option string // empty: valid
	}{
		{"defaults", generator.Options{}, ""},
		{"nested path", generator.Options{WebhookPath: "stripe/live-events"}, ""},
		{"leading slash trimmed", generator.Options{WebhookPath: "/stripe"}, ""},
		{"schema-qualified tables", generator.Options{EventsTable: "hooks.processed_events", BusinessTable: "app.orders"}, ""},
		{"path with space", generator.Options{WebhookPath: "my hook"}, "webhook path"},
		{"path with query", generator.Options{WebhookPath: "hook?x=1"}, "webhook path"},
		{"path with dot-dot", generator.Options{WebhookPath: "../admin"}, "webhook path"},
		{"path with empty segment", generator.Options{WebhookPath: "a//b"}, "webhook path"},
		{"injection in events table", generator.Options{EventsTable: "events; DROP TABLE x"}, "events table"},
		{"quoted events table", generator.Options{EventsTable: `"Events"`}, "events table"},
		{"upper case table", generator.Options{EventsTable: "Events"}, "events table"},
		{"three-part name", generator.Options{EventsTable: "db.s.t"}, "events table"},
		{"reserved word", generator.Options{BusinessTable: "order"}, "business table"},
		{"reserved word in schema", generator.Options{BusinessTable: "select.log"}, "business table"},
		{"leading digit", generator.Options{BusinessTable: "1log"}, "business table"},
		{"64-byte identifier", generator.Options{BusinessTable: strings.Repeat("a", 64)}, "business table"},
		{"same tables", generator.Options{EventsTable: "t", BusinessTable: "t"}, "business table"},
		{"empty-looking name", generator.Options{WorkflowName: "   "}, "workflow name"},
		{"multi-line credential", generator.Options{CredentialName: "a\nb"}, "credential name"},
		{"retention under an hour", generator.Options{Retention: time.Minute}, "retention"},
		{"negative retention", generator.Options{Retention: -time.Hour}, "retention"},
		{"unknown hashing", generator.Options{Hashing: "md5"}, "hashing mode"},
		{"unknown guard", generator.Options{Guard: "lock"}, "guard mode"},
		{"lease too short", generator.Options{Guard: generator.GuardLease, Lease: time.Second}, "lease"},
		{"lease too long", generator.Options{Guard: generator.GuardLease, Lease: 48 * time.Hour}, "lease"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if tc.option == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var oe *generator.OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("Validate = %v, want an *OptionError for %s", err, tc.option)
			}
			if oe.Option != tc.option {
				t.Fatalf("error names option %q (%v), want %q", oe.Option, err, tc.option)
			}
			// Every generator entry point refuses the same options.
			if _, err := generator.Workflow(tc.opts); !errors.As(err, &oe) {
				t.Fatalf("Workflow accepted invalid options: %v", err)
			}
			if _, err := generator.Schema(tc.opts); !errors.As(err, &oe) {
				t.Fatalf("Schema accepted invalid options: %v", err)
			}
		})
	}
}
