package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc/inbox"
)

// setState puts entry id in state (and last_error reason) as a delivery or
// the target would have.
func setState(t *testing.T, schema string, id int64, state, reason string) {
	t.Helper()
	if _, err := pg.Business.Exec(context.Background(), "UPDATE "+schema+".inbox_events SET state = $2, last_error = nullif($3, '') WHERE id = $1", id, state, reason); err != nil {
		t.Fatal(err)
	}
}

func ids(p inbox.Page) []int64 {
	out := []int64{}
	for _, e := range p.Entries {
		out = append(out, e.ID)
	}
	return out
}

// The list filters by endpoint, state, event type and time, newest first,
// in pages that follow each other; the summary counts every endpoint's
// entries by state.
func TestInboxListAndSummary(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	const schema = "ks_inbox_list"
	in := openStopped(t, schema, `{"endpoints":[{"name":"a","target":"http://127.0.0.1:1/"},{"name":"b","target":"https://hooks.example/secret-path"}]}`)
	t.Cleanup(func() { pg.Business.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	var a []int64
	for i := range 5 {
		a = append(a, receive(t, in, "a", fmt.Sprintf(`{"id":"evt_l_%d","type":"t%d"}`, i, i%2)))
	}
	b := receive(t, in, "b", `{"id":"evt_l_b","type":"t0"}`)
	setState(t, schema, a[0], "failed", "gave up after 25 deliveries: the target answered 500")
	setState(t, schema, a[1], "forwarded", "")
	mid := time.Now()
	time.Sleep(10 * time.Millisecond)
	late := receive(t, in, "a", `{"id":"evt_l_late","type":"t1"}`)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		q    inbox.Query
		want []int64
	}{
		{"everything, newest first", inbox.Query{}, []int64{late, b, a[4], a[3], a[2], a[1], a[0]}},
		{"one endpoint", inbox.Query{Endpoint: "b"}, []int64{b}},
		{"an endpoint that is not there", inbox.Query{Endpoint: "c"}, []int64{}},
		{"one state", inbox.Query{States: []string{"failed"}}, []int64{a[0]}},
		{"two states", inbox.Query{States: []string{"failed", "forwarded"}}, []int64{a[1], a[0]}},
		{"an event type", inbox.Query{EventType: "t1"}, []int64{late, a[3], a[1]}},
		{"since", inbox.Query{Since: mid}, []int64{late}},
		{"until", inbox.Query{Until: mid, Endpoint: "a", States: []string{"received"}}, []int64{a[4], a[3], a[2]}},
		{"a page", inbox.Query{Limit: 2, Before: a[4]}, []int64{a[3], a[2]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := in.List(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(p); !slices.Equal(got, tc.want) {
				t.Errorf("%+v listed %v, want %v", tc.q, got, tc.want)
			}
		})
	}
	// Pages of 3 cover everything once.
	var all []int64
	q := inbox.Query{Limit: 3}
	for {
		p, err := in.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ids(p)...)
		if p.NextBefore == 0 {
			break
		}
		q.Before = p.NextBefore
	}
	if len(all) != 7 || all[0] != late || all[6] != a[0] {
		t.Errorf("pages of 3: %v", all)
	}
	p, _ := in.List(ctx, inbox.Query{States: []string{"failed"}})
	if e := p.Entries[0]; e.LastError == "" || e.NextAttemptAt == nil {
		t.Errorf("the failed entry lists without its reason or its queued job: %+v", e)
	}
	sum, err := in.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, e := range sum.Endpoints {
		for _, s := range e.States {
			got[e.Name+"/"+s.State] = s.Count
		}
		if e.Name == "b" && (e.TargetHost != "hooks.example" || !e.Configured) {
			t.Errorf("endpoint b summarised as %+v: want its target's host only", e)
		}
	}
	if fmt.Sprint(got) != "map[a/failed:1 a/forwarded:1 a/received:4 b/received:1]" {
		t.Errorf("summary %v", got)
	}
	if v := metricValue(t, in, "keysvc_inbox_backlog", map[string]string{"endpoint": "a", "state": "received"}); v != 4 {
		t.Errorf("backlog a/received: %v, want 4", v)
	}
	if v := metricValue(t, in, "keysvc_inbox_backlog", map[string]string{"endpoint": "b", "state": "failed"}); v != 0 {
		t.Errorf("backlog b/failed: %v, want 0", v)
	}
}

// An action counts what it would change (a dry run), refuses when the
// count changed since, and changes exactly the entries it counted: a
// replay makes failed and forwarded entries received with a delivery
// queued, a retry makes a waiting delivery due now; each is kept in the
// entry's history with who asked. Bad requests change nothing.
func TestInboxActions(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	const schema = "ks_inbox_act"
	in := openStopped(t, schema, `{"endpoints":[{"name":"a","target":"http://127.0.0.1:1/"}]}`)
	t.Cleanup(func() { pg.Business.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	ctx := context.Background()
	var e []int64
	for i := range 4 {
		e = append(e, receive(t, in, "a", fmt.Sprintf(`{"id":"evt_act_%d","type":"t"}`, i)))
	}
	// e[0] failed and e[1] forwarded (their jobs finished), e[2] waits an
	// hour for its next attempt, e[3] is being delivered.
	for _, id := range e[:2] {
		if _, err := pg.Business.Exec(ctx, "UPDATE "+schema+".river_job SET state = 'completed', finalized_at = now() WHERE (args->>'inbox_id')::bigint = $1", id); err != nil {
			t.Fatal(err)
		}
	}
	setState(t, schema, e[0], "failed", "gave up")
	setState(t, schema, e[1], "forwarded", "")
	if _, err := pg.Business.Exec(ctx, "UPDATE "+schema+".river_job SET state = 'scheduled', scheduled_at = now() + interval '1 hour' WHERE (args->>'inbox_id')::bigint = $1", e[2]); err != nil {
		t.Fatal(err)
	}
	ownJob(t, schema, e[3], "keysvc_alive")
	two, one := 2, 1
	for _, tc := range []struct {
		name    string
		a       inbox.Action
		wantErr error
		want    []int64 // matched
		done    int
	}{
		{"an unknown action", inbox.Action{Kind: "delete"}, inbox.ErrUnknownAction, nil, 0},
		{"too many ids", inbox.Action{Kind: inbox.ActionReplay, IDs: make([]int64, inbox.MaxSelection+1)}, inbox.ErrSelectionTooLarge, nil, 0},
		{"a dry run", inbox.Action{Kind: inbox.ActionReplay, DryRun: true}, nil, []int64{e[0], e[1]}, 0},
		{"a count that changed", inbox.Action{Kind: inbox.ActionReplay, Expect: &one}, inbox.ErrSelectionChanged, []int64{e[0], e[1]}, 0},
		{"replay what was counted", inbox.Action{Kind: inbox.ActionReplay, Expect: &two, Actor: "ops"}, nil, []int64{e[0], e[1]}, 2},
		{"replay again: nothing left", inbox.Action{Kind: inbox.ActionReplay, Actor: "ops"}, nil, []int64{}, 0},
		{"retry by id, the running one left alone", inbox.Action{Kind: inbox.ActionRetryNow, IDs: []int64{e[2], e[3]}, Actor: "ops"}, nil, []int64{e[2]}, 1},
		{"a filter that excludes the action's states", inbox.Action{Kind: inbox.ActionReplay, Query: inbox.Query{States: []string{"received"}}}, nil, []int64{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := in.Act(ctx, tc.a)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if tc.want != nil && (!slices.Equal(res.IDs, tc.want) || res.Done != tc.done) {
				t.Errorf("matched %v done %d, want %v done %d", res.IDs, res.Done, tc.want, tc.done)
			}
		})
	}
	for _, id := range e[:2] {
		entry, _ := in.Entry(ctx, "a", id)
		last := entry.Deliveries[len(entry.Deliveries)-1]
		var queued int
		pg.Business.QueryRow(ctx, "SELECT count(*) FROM "+schema+".river_job WHERE state = 'available' AND (args->>'inbox_id')::bigint = $1", id).Scan(&queued)
		if entry.State != "received" || last.Kind != "replay" || last.Actor != "ops" || queued != 1 {
			t.Errorf("replayed entry %d: %s, history ends %+v, %d deliveries queued", id, entry.State, last, queued)
		}
	}
	var state string
	pg.Business.QueryRow(ctx, "SELECT state::text FROM "+schema+".river_job WHERE (args->>'inbox_id')::bigint = $1", e[2]).Scan(&state)
	if state != "available" {
		t.Errorf("the retried delivery is %s, want available", state)
	}
	// More than MaxSelection by filter is refused, and changes nothing.
	if _, err := pg.Business.Exec(ctx, "INSERT INTO "+schema+`.inbox_events (account, event_id, body, state, endpoint)
SELECT 'default', 'bulk:' || i, '\x7b7d', 'failed', 'a' FROM generate_series(1, $1) i`, inbox.MaxSelection+1); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Act(ctx, inbox.Action{Kind: inbox.ActionReplay}); !errors.Is(err, inbox.ErrSelectionTooLarge) {
		t.Errorf("a replay of %d entries: %v, want ErrSelectionTooLarge", inbox.MaxSelection+1, err)
	}
	var failed int
	pg.Business.QueryRow(ctx, "SELECT count(*) FROM "+schema+".inbox_events WHERE state = 'failed'").Scan(&failed)
	if failed != inbox.MaxSelection+1 {
		t.Errorf("%d entries still failed, want all %d", failed, inbox.MaxSelection+1)
	}
}
