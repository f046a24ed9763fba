package generator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
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
		{"schema-qualified tables", generator.Options{ReserveOptions: generator.ReserveOptions{EventsTable: "hooks.processed_events", BusinessTable: "app.orders"}}, ""},
		{"path with space", generator.Options{WebhookPath: "my hook"}, "webhook path"},
		{"path with query", generator.Options{WebhookPath: "hook?x=1"}, "webhook path"},
		{"path with dot-dot", generator.Options{WebhookPath: "../admin"}, "webhook path"},
		{"path with empty segment", generator.Options{WebhookPath: "a//b"}, "webhook path"},
		{"injection in events table", generator.Options{ReserveOptions: generator.ReserveOptions{EventsTable: "events; DROP TABLE x"}}, "events table"},
		{"quoted events table", generator.Options{ReserveOptions: generator.ReserveOptions{EventsTable: `"Events"`}}, "events table"},
		{"upper case table", generator.Options{ReserveOptions: generator.ReserveOptions{EventsTable: "Events"}}, "events table"},
		{"three-part name", generator.Options{ReserveOptions: generator.ReserveOptions{EventsTable: "db.s.t"}}, "events table"},
		{"reserved word", generator.Options{ReserveOptions: generator.ReserveOptions{BusinessTable: "order"}}, "business table"},
		{"reserved word in schema", generator.Options{ReserveOptions: generator.ReserveOptions{BusinessTable: "select.log"}}, "business table"},
		{"leading digit", generator.Options{ReserveOptions: generator.ReserveOptions{BusinessTable: "1log"}}, "business table"},
		{"64-byte identifier", generator.Options{ReserveOptions: generator.ReserveOptions{BusinessTable: strings.Repeat("a", 64)}}, "business table"},
		{"same tables", generator.Options{ReserveOptions: generator.ReserveOptions{EventsTable: "t", BusinessTable: "t"}}, "business table"},
		{"empty-looking name", generator.Options{WorkflowName: "   "}, "workflow name"},
		{"multi-line credential", generator.Options{CredentialName: "a\nb"}, "credential name"},
		{"retention under an hour", generator.Options{Retention: time.Minute}, "retention"},
		{"negative retention", generator.Options{Retention: -time.Hour}, "retention"},
		{"unknown hashing", generator.Options{Hashing: "md5"}, "hashing mode"},
		{"unknown guard", generator.Options{ReserveOptions: generator.ReserveOptions{Guard: "lock"}}, "guard mode"},
		{"lease too short", generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease, Lease: time.Second}}, "lease"},
		{"lease too long", generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease, Lease: 48 * time.Hour}}, "lease"},
		{"unknown pattern", generator.Options{Pattern: "queue"}, "pattern"},
		{"inbox defaults", inbox(generator.Options{}), ""},
		{"inbox without verification", inbox(generator.Options{Verify: "none"}), ""},
		{"inbox in its own schema", inbox(generator.Options{InboxOptions: generator.InboxOptions{DBSchema: "payments"}}), ""},
		{"inbox with crypto-node", inbox(generator.Options{Hashing: generator.HashingCryptoNode}), "hashing mode"},
		{"inbox with a lease guard", inbox(generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease}}), "guard mode"},
		{"inbox schema with a dot", inbox(generator.Options{InboxOptions: generator.InboxOptions{DBSchema: "a.b"}}), "database schema"},
		{"inbox schema reserved", inbox(generator.Options{InboxOptions: generator.InboxOptions{DBSchema: "select"}}), "database schema"},
		{"event type with a comma", inbox(generator.Options{InboxOptions: generator.InboxOptions{Events: []string{"a,b"}}}), "events"},
		{"event type twice", inbox(generator.Options{InboxOptions: generator.InboxOptions{Events: []string{"a", "a"}}}), "events"},
		{"empty event type", inbox(generator.Options{InboxOptions: generator.InboxOptions{Events: []string{""}}}), "events"},
		{"account with a newline", inbox(generator.Options{InboxOptions: generator.InboxOptions{Account: "a\nb"}}), "account"},
		{"sweep of 90 minutes", inbox(generator.Options{InboxOptions: generator.InboxOptions{SweepEvery: 90 * time.Minute}}), "sweep interval"},
		{"sweep of 30 seconds", inbox(generator.Options{InboxOptions: generator.InboxOptions{SweepEvery: 30 * time.Second}}), "sweep interval"},
		{"sweep of two days", inbox(generator.Options{InboxOptions: generator.InboxOptions{SweepEvery: 48 * time.Hour}}), "sweep interval"},
		{"claim lease of a second", inbox(generator.Options{InboxOptions: generator.InboxOptions{ClaimLease: time.Second}}), "claim lease"},
		{"outbox URL with a query", inbox(generator.Options{InboxOptions: generator.InboxOptions{OutboxURL: "http://api/x?y=1"}}), "outbox URL"},
		{"outbox URL with credentials", inbox(generator.Options{InboxOptions: generator.InboxOptions{OutboxURL: "http://u:p@api/x"}}), "outbox URL"},
		{"outbox batch zero", inbox(generator.Options{InboxOptions: generator.InboxOptions{OutboxBatch: -1}}), "outbox batch"},
		{"outbox timeout of 100ms", inbox(generator.Options{InboxOptions: generator.InboxOptions{OutboxTimeout: 100 * time.Millisecond}}), "outbox timeout"},
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
			// The planner page shows the error next to this flag's field.
			if generator.FlagOf(oe.Option) == nil {
				t.Errorf("no flag for the option %q", oe.Option)
			}
			// Every generator entry point refuses the same options.
			if _, err := generator.Files(tc.opts); !errors.As(err, &oe) {
				t.Fatalf("Files accepted invalid options: %v", err)
			}
			if tc.opts.Pattern == generator.PatternInbox {
				return
			}
			if _, err := generator.Workflow(tc.opts); !errors.As(err, &oe) {
				t.Fatalf("Workflow accepted invalid options: %v", err)
			}
			if _, err := generator.Schema(tc.opts); !errors.As(err, &oe) {
				t.Fatalf("Schema accepted invalid options: %v", err)
			}
		})
	}
}

func inbox(o generator.Options) generator.Options {
	o.Pattern = generator.PatternInbox
	return o
}
