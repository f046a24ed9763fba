package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/keysvc/console"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/keysvc/inbox/inboxtest"
	"github.com/idemhook/idemhook/internal/pgsql"
)

// newPattern creates the inbox pattern's schema and fills it: events
// failed, rejected, deferred and processed; tasks failed, ambiguous, sent.
func newPattern(t *testing.T, schema string) (*console.Pattern, map[string]int64) {
	t.Helper()
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	tables := inboxtest.Pattern(t, pg.Business, schema)
	ids := map[string]int64{}
	for _, r := range []struct{ name, state, typ, reason, due string }{
		{"failed", "failed", "payment_intent.succeeded", "order o-1 is confirmed by another payment; gave up: deferred for longer than 24h", ""},
		{"rejected", "rejected", "charge.refunded", "a partial refund: the example domain applies full refunds only", ""},
		{"deferred", "deferred", "charge.refunded", "order o-3 is not confirmed yet", "now() + interval '10 minutes'"},
		{"processed", "processed", "payment_intent.succeeded", "", ""},
	} {
		due := "NULL"
		if r.due != "" {
			due = r.due
		}
		var id int64
		err := pg.Business.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (account, event_id, event_type, body, state, attempts, last_error, next_attempt_at)
VALUES ('default', $1, $2, '\x7b7d', $3, 3, nullif($4, ''), %s) RETURNING id`, tables.Inbox(), due), "evt:"+r.name, r.typ, r.state, r.reason).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids["event "+r.name] = id
	}
	for _, r := range []struct{ name, state string }{{"failed", "failed"}, {"ambiguous", "ambiguous"}, {"sent", "sent"}} {
		var id int64
		err := pg.Business.QueryRow(ctx, "INSERT INTO "+tables.Outbox().String()+` (operation_key, kind, payload, state, attempts, last_error)
VALUES ($1, 'order_confirmation', '{}', $2, 10, 'the API answered 500') RETURNING id`, "order_confirmation:"+r.name, r.state).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids["task "+r.name] = id
	}
	p, err := console.OpenPattern(ctx, pg.Business, schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, ids
}

// The pattern's views: failed and rejected events with their reason,
// deferred ones with their due time, tasks by state; a schema without the
// pattern's tables is refused at start, naming them.
func TestPatternViews(t *testing.T) {
	p, ids := newPattern(t, "cs_views")
	ctx := context.Background()
	page := func(q string, list string) console.Page {
		v, _ := url.ParseQuery(q)
		pg, err := console.ParsePage(v, list)
		if err != nil {
			t.Fatal(err)
		}
		return pg
	}
	events, err := p.Events(ctx, page("state=failed,rejected", console.ListEvents))
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 2 || events.Items[0].ID != ids["event rejected"] || !strings.Contains(events.Items[0].Reason, "partial refund") {
		t.Errorf("failed and rejected events: %+v", events.Items)
	}
	deferred, _ := p.Events(ctx, page("state=deferred", console.ListEvents))
	if len(deferred.Items) != 1 || deferred.Items[0].DueAt == nil {
		t.Errorf("deferred events: %+v, want one with its due time", deferred.Items)
	}
	byType, _ := p.Events(ctx, page("type=charge.refunded&limit=1", console.ListEvents))
	if len(byType.Items) != 1 || byType.NextBefore != ids["event deferred"] {
		t.Errorf("a page of one refund: %+v", byType)
	}
	tasks, _ := p.Tasks(ctx, page("state=failed,ambiguous", console.ListTasks))
	if len(tasks.Items) != 2 || tasks.Items[0].State != "ambiguous" || tasks.Items[1].LastError == "" {
		t.Errorf("failed and ambiguous tasks: %+v", tasks.Items)
	}
	sum, err := p.Summary(ctx)
	if err != nil || len(sum.Events) != 4 || len(sum.Tasks) != 3 {
		t.Errorf("summary %+v, %v", sum, err)
	}
	if _, err := console.OpenPattern(ctx, pg.Business, "cs_nothing_here", nil); !errors.Is(err, console.ErrPatternMissing) || !strings.Contains(err.Error(), "cs_nothing_here.inbox_events") {
		t.Errorf("a schema without the pattern: %v", err)
	}
	if _, err := console.OpenPattern(ctx, pg.Business, "Bad;Schema", nil); err == nil {
		t.Error("a schema that is not an identifier was taken")
	}
}

// Retries are the README's: a failed or rejected event is received again
// with a fresh budget, a failed task pending again with its key; a
// selection changes exactly what it counted, and nothing when the count
// moved; other states are left alone.
func TestPatternRetries(t *testing.T) {
	p, ids := newPattern(t, "cs_retry")
	ctx := context.Background()
	one, two := 1, 2
	events := func(s console.Selection) (inbox.ActionResult, error) { return p.RetryEvents(ctx, s, "test") }
	tasks := func(s console.Selection) (inbox.ActionResult, error) { return p.RetryTasks(ctx, s, "test") }
	for _, tc := range []struct {
		name    string
		retry   func(console.Selection) (inbox.ActionResult, error)
		sel     console.Selection
		wantErr error
		matched []int64
		done    int
	}{
		{"events, dry run", events, console.Selection{DryRun: true}, nil, []int64{ids["event failed"], ids["event rejected"]}, 0},
		{"events, a stale count", events, console.Selection{Expect: &one}, inbox.ErrSelectionChanged, nil, 0},
		{"events, only the deferred one by id", events, console.Selection{IDs: []int64{ids["event deferred"]}}, nil, []int64{}, 0},
		{"events, counted", events, console.Selection{Expect: &two}, nil, []int64{ids["event failed"], ids["event rejected"]}, 2},
		{"tasks, a filter without failed", tasks, console.Selection{Filter: console.Filter{States: []string{"ambiguous"}}}, nil, []int64{}, 0},
		{"tasks", tasks, console.Selection{}, nil, []int64{ids["task failed"]}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.retry(tc.sel)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if tc.matched != nil && (!slices.Equal(res.IDs, tc.matched) || res.Done != tc.done) {
				t.Errorf("matched %v done %d, want %v done %d", res.IDs, res.Done, tc.matched, tc.done)
			}
		})
	}
	var state string
	var attempts int
	pg.Business.QueryRow(ctx, "SELECT state, attempts FROM cs_retry.inbox_events WHERE id = $1", ids["event rejected"]).Scan(&state, &attempts)
	if state != "received" || attempts != 0 {
		t.Errorf("the retried event is %s after %d attempts, want received with a fresh budget", state, attempts)
	}
	pg.Business.QueryRow(ctx, "SELECT state, attempts FROM cs_retry.outbox_tasks WHERE id = $1", ids["task failed"]).Scan(&state, &attempts)
	if state != "pending" || attempts != 0 {
		t.Errorf("the retried task is %s after %d attempts, want pending", state, attempts)
	}
}

// The docs' manual retry of an event is the statement the console runs.
func TestDocsShowTheEventRetry(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/inbox.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), pgsql.Inbox{}.RetryEvents()) {
		t.Errorf("docs/inbox.md does not show the manual retry of an event as it is:\n%s", pgsql.Inbox{}.RetryEvents())
	}
}
