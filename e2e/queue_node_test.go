package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/sandbox"
)

// nodeKillEvents is how many events are in flight on the workers when
// they are killed: more than one worker's share, so that both hold some.
const nodeKillEvents = 6

// testWorkersKilled deploys the guard of hashing and guard ("" for the
// default) on q (queue mode), holds every business step of nodeKillEvents
// new events at a gate after the guard reserved (or leased) their keys,
// SIGKILLs both workers while they hold them, restarts them, opens the gate,
// and returns what each event's first delivery was answered and the options.
func testWorkersKilled(t *testing.T, q *sandbox.Stack, prefix string, hashing generator.Hashing, guard generator.Guard) (generator.Options, deployment, []response) {
	t.Helper()
	ctx := context.Background()
	opts := seedOptions(prefix, hashing)
	opts.Guard = guard
	opts.Lease = 20 * time.Second
	d := deploy(t, opts)
	gate := prefix + "_gate"
	execSQL(t, `CREATE TABLE IF NOT EXISTS `+gate+` (id int PRIMARY KEY)`)
	execSQL(t, `INSERT INTO `+gate+` VALUES (1) ON CONFLICT DO NOTHING`)
	execSQL(t, `CREATE OR REPLACE FUNCTION `+prefix+`_wait_at_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM `+gate+` WHERE id = 1 FOR UPDATE;
  RETURN NEW;
END $$`)
	execSQL(t, `CREATE OR REPLACE TRIGGER `+prefix+`_wait_at_gate BEFORE INSERT ON `+opts.BusinessTable+` FOR EACH ROW EXECUTE FUNCTION `+prefix+`_wait_at_gate()`)
	hold, err := st.Business.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, `SELECT 1 FROM `+gate+` WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	firsts := make([]response, nodeKillEvents)
	var wg sync.WaitGroup
	for i := range nodeKillEvents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := sendWithTimeout(d.url, "application/json", fmt.Appendf(nil, `{"id":"evt_%s_%d","type":"t"}`, prefix, i), nil, 90*time.Second)
			if err != nil {
				r = response{body: err.Error()}
			}
			firsts[i] = r
		}()
	}
	atGate := func() int {
		var n int
		st.Business.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%`+opts.BusinessTable+`%'`).Scan(&n)
		return n
	}
	waitFor(t, 60*time.Second, "every business step to wait at the gate, its key held", func() bool { return atGate() == nodeKillEvents })
	for w := 1; w <= sandbox.QueueWorkers; w++ {
		if err := q.KillWorker(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	// PostgreSQL notices the dead workers' connections
	// (client_connection_check_interval) and rolls their steps back.
	waitFor(t, 30*time.Second, "the killed workers' business steps to end", func() bool { return atGate() == 0 })
	hold.Rollback(ctx)
	for w := 1; w <= sandbox.QueueWorkers; w++ {
		if err := q.StartWorker(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if n := countRows(t, opts.BusinessTable); n != 0 {
		t.Fatalf("%d business rows after the kill, want none: the steps were rolled back", n)
	}
	return opts, d, firsts
}

// The community node on queue mode's workers, both SIGKILLed while every
// business step of six events waited after the node had reserved (or
// leased) its key: what the provider was answered, what its retry gets,
// and what runs the step.
func testQueueNodeWorkersKilled(t *testing.T, q *sandbox.Stack) {
	t.Run("at-most-once: the key stays reserved; released, the retry runs the step", func(t *testing.T) {
		opts, d, firsts := testWorkersKilled(t, q, "qkr", generator.HashingNode, generator.GuardAtMostOnce)
		for i, r := range firsts {
			t.Logf("event %d, first delivery: %d %.160q", i, r.status, r.body)
			if r.status == 200 {
				t.Errorf("event %d: the delivery whose worker died was answered 200 (%s): the provider would not retry", i, r.body)
			}
		}
		key := fmt.Sprintf("evt:evt_qkr_%d", 0)
		retry := post(t, d.url, "application/json", []byte(`{"id":"evt_qkr_0","type":"t"}`), nil)
		if retry.status != 200 || !strings.Contains(retry.body, `"duplicate"`) || !hasKey(t, opts.EventsTable, key) {
			t.Errorf("the retry of an event whose step never ran: %d %s (key held: %v), want 200 duplicate, the key held", retry.status, retry.body, hasKey(t, opts.EventsTable, key))
		}
		// What docs/scale-out.md says to do: release the key (by key, or
		// every key whose execution n8n lists as crashed), then the
		// provider's retry, or a resend from its dashboard, runs the step.
		execSQL(t, "DELETE FROM "+opts.EventsTable+" WHERE key = $1", key)
		if r := post(t, d.url, "application/json", []byte(`{"id":"evt_qkr_0","type":"t"}`), nil); r.status != 200 || !strings.Contains(r.body, `"processed"`) {
			t.Errorf("the retry after the release: %d %s, want 200 processed", r.status, r.body)
		}
		if n := countRows(t, opts.BusinessTable); n != 1 {
			t.Errorf("%d business rows after the release and the retry, want 1", n)
		}
	})
	t.Run("lease: the retry is refused until the lease expires, then runs the step once, with the same key", func(t *testing.T) {
		testRetriesAfterLease(t, "qkl", generator.HashingNode, q)
	})
}

// The default guard (the lease, the Code node) on queue mode's workers,
// both SIGKILLed while every business step of six events waited after the
// guard had leased its key: each retry is refused until the lease expires,
// then takes it over and runs the step once.
func testQueueDefaultWorkersKilled(t *testing.T, q *sandbox.Stack) {
	testRetriesAfterLease(t, "qkd", generator.HashingCodeNode, q)
}

// testRetriesAfterLease kills q's workers while hashing's lease guard holds
// nodeKillEvents keys, then retries each event as a provider would: 409
// within the dead attempt's lease, then each step once, on attempt 2.
func testRetriesAfterLease(t *testing.T, prefix string, hashing generator.Hashing, q *sandbox.Stack) {
	opts, d, firsts := testWorkersKilled(t, q, prefix, hashing, "")
	for i, r := range firsts {
		t.Logf("event %d, first delivery: %d %.160q", i, r.status, r.body)
		if r.status == 200 {
			t.Errorf("event %d: the delivery whose worker died was answered 200 (%s)", i, r.body)
		}
	}
	expires := time.Now()
	var until time.Time
	if err := st.Business.QueryRow(context.Background(), "SELECT max(lease_until) FROM "+opts.EventsTable).Scan(&until); err == nil {
		expires = until
	}
	if time.Until(expires) > time.Second {
		if r := post(t, d.url, "application/json", fmt.Appendf(nil, `{"id":"evt_%s_0","type":"t"}`, prefix), nil); r.status != 409 {
			t.Errorf("a retry within the dead attempt's lease: %d %s, want 409", r.status, r.body)
		}
	}
	time.Sleep(time.Until(expires) + time.Second)
	for i := range nodeKillEvents {
		body := fmt.Appendf(nil, `{"id":"evt_%s_%d","type":"t"}`, prefix, i)
		r, ok := deliverUntil(func() response { return postNoFatal(d.url, "application/json", body) }, func(first time.Time) time.Time { return first.Add(time.Minute) })
		if !ok || !strings.Contains(r.body, `"processed"`) {
			t.Errorf("event %d after its lease expired: %d %s, want 200 processed", i, r.status, r.body)
		}
	}
	rows := countPerEvent(t, "SELECT substr(event_key, $2) FROM "+opts.BusinessTable+" WHERE event_key LIKE $1", "evt:evt\\_"+prefix+"\\_%", len("evt:evt_"+prefix+"_")+1)
	var attempts []int
	for i := range nodeKillEvents {
		if rows[i] != 1 {
			t.Errorf("event %d ran its step %d times, want once", i, rows[i])
		}
		var a int
		st.Business.QueryRow(context.Background(), "SELECT attempts FROM "+opts.EventsTable+" WHERE key = $1", fmt.Sprintf("evt:evt_%s_%d", prefix, i)).Scan(&a)
		attempts = append(attempts, a)
	}
	t.Logf("attempts per event after the takeover: %v", attempts)
	for i, a := range attempts {
		if a != 2 {
			t.Errorf("event %d: %d attempts, want 2 (the dead one, the one that took the lease over)", i, a)
		}
	}
}
