package pgsql_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/jackc/pgx/v5/pgxpool"
)

// leaseTables creates the lease guard's events table and the example
// business table in a fresh schema.
func leaseTables(t *testing.T) (db *pgxpool.Pool, events, business pgsql.Table) {
	t.Helper()
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	schema := fmt.Sprintf("l%d", schemaSeq.Add(1))
	events, business = pgsql.MustParseTable(schema+".events"), pgsql.MustParseTable(schema+".business")
	if _, err := pg.Business.Exec(ctx, "CREATE SCHEMA "+schema+";"+pgsql.EventsDDL(events, true)+pgsql.BusinessDDL(business)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Business.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	return pg.Business, events, business
}

// acquire runs AcquireLease for key and returns its outcome and attempt.
func acquire(t *testing.T, db *pgxpool.Pool, events pgsql.Table, key string, lease time.Duration) (pgsql.Outcome, int) {
	t.Helper()
	var outcome string
	var attempt *int
	var until *time.Time
	if err := db.QueryRow(context.Background(), pgsql.AcquireLease(events, lease), key).Scan(new(string), &outcome, &attempt, &until); err != nil {
		t.Fatalf("acquire %s: %v", key, err)
	}
	if attempt == nil {
		return pgsql.Outcome(outcome), 0
	}
	return pgsql.Outcome(outcome), *attempt
}

// expire ends key's lease now, as time would.
func expire(t *testing.T, db *pgxpool.Pool, events pgsql.Table, key string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), "UPDATE "+events.String()+" SET lease_until = now() - interval '1 second' WHERE key = $1", key); err != nil {
		t.Fatal(err)
	}
}

func businessRows(t *testing.T, db *pgxpool.Pool, business pgsql.Table, key string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM "+business.String()+" WHERE event_key = $1", key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func state(t *testing.T, db *pgxpool.Pool, events pgsql.Table, key string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), "SELECT state FROM "+events.String()+" WHERE key = $1", key).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// wantLeaseLost fails t unless err is the fenced statements' refusal.
func wantLeaseLost(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), pgsql.LeaseLostPrefix) {
		t.Errorf("%s: got %v, want the error %q", what, err, pgsql.LeaseLostPrefix+"…")
	}
}

// The lease guard's example step writes its business row and marks the key
// done in one statement, only for the attempt that holds the lease; every
// other attempt writes nothing and fails.
func TestBusinessInsertDoneIsFenced(t *testing.T) {
	db, events, business := leaseTables(t)
	ctx := context.Background()
	insertDone := pgsql.BusinessInsertDone(events, business)

	// The holder writes once and the key is done.
	outcome, attempt := acquire(t, db, events, "evt:1", time.Minute)
	if outcome != pgsql.OutcomeAcquired || attempt != 1 {
		t.Fatalf("first acquire: %s, attempt %d", outcome, attempt)
	}
	var got string
	if err := db.QueryRow(ctx, insertDone, "evt:1", "payment_intent.succeeded", attempt).Scan(&got); err != nil || got != "evt:1" {
		t.Fatalf("the holder's step: %q, %v", got, err)
	}
	if n, s := businessRows(t, db, business, "evt:1"), state(t, db, events, "evt:1"); n != 1 || s != "done" {
		t.Fatalf("after the holder's step: %d business rows, state %s; want 1, done", n, s)
	}
	// Run again by the same attempt (an n8n retry of the node): nothing more.
	_, err := db.Exec(ctx, insertDone, "evt:1", "payment_intent.succeeded", attempt)
	wantLeaseLost(t, "the step again on a done key", err)
	if outcome, _ := acquire(t, db, events, "evt:1", time.Minute); outcome != pgsql.OutcomeDone {
		t.Errorf("a retry after the step: %s, want done", outcome)
	}

	// An attempt whose lease expired and was taken over writes nothing;
	// the attempt that took it over writes once.
	acquire(t, db, events, "evt:2", time.Minute)
	expire(t, db, events, "evt:2")
	outcome, second := acquire(t, db, events, "evt:2", time.Minute)
	if outcome != pgsql.OutcomeAcquired || second != 2 {
		t.Fatalf("takeover: %s, attempt %d", outcome, second)
	}
	_, err = db.Exec(ctx, insertDone, "evt:2", "", 1)
	wantLeaseLost(t, "the first attempt's step after the takeover", err)
	if n := businessRows(t, db, business, "evt:2"); n != 0 {
		t.Errorf("the first attempt wrote %d business rows after losing its lease", n)
	}
	if _, err := db.Exec(ctx, insertDone, "evt:2", "", second); err != nil {
		t.Fatalf("the second attempt's step: %v", err)
	}
	if n := businessRows(t, db, business, "evt:2"); n != 1 {
		t.Errorf("evt:2 has %d business rows, want 1", n)
	}

	// A key nobody holds (never reserved, or released): nothing written.
	_, err = db.Exec(ctx, insertDone, "evt:none", "", 1)
	wantLeaseLost(t, "the step on a key nobody holds", err)
}

// Mark Done after the user's own steps: the holder marks the key done (also
// when its step already did), any other attempt fails.
func TestMarkAttemptDoneIsFenced(t *testing.T) {
	db, events, business := leaseTables(t)
	ctx := context.Background()
	markDone := pgsql.MarkAttemptDone(events)

	_, attempt := acquire(t, db, events, "evt:a", time.Minute)
	if _, err := db.Exec(ctx, markDone, "evt:a", attempt); err != nil {
		t.Fatalf("the holder marks done: %v", err)
	}
	if s := state(t, db, events, "evt:a"); s != "done" {
		t.Errorf("state %s after Mark Done, want done", s)
	}
	// After the example step marked it done in its own statement.
	_, attempt = acquire(t, db, events, "evt:b", time.Minute)
	if _, err := db.Exec(ctx, pgsql.BusinessInsertDone(events, business), "evt:b", "", attempt); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, markDone, "evt:b", attempt); err != nil {
		t.Errorf("Mark Done after the step marked the key done: %v", err)
	}
	// Taken over: the first attempt is refused, the key stays processing.
	acquire(t, db, events, "evt:c", time.Minute)
	expire(t, db, events, "evt:c")
	acquire(t, db, events, "evt:c", time.Minute)
	_, err := db.Exec(ctx, markDone, "evt:c", 1)
	wantLeaseLost(t, "Mark Done by an attempt whose lease was taken over", err)
	if s := state(t, db, events, "evt:c"); s != "processing" {
		t.Errorf("state %s after a refused Mark Done, want processing", s)
	}
}

// Attempts racing on one key, each taking the lease over as soon as it
// expires and running the example step: one business row, however the race
// goes, and every attempt that was not refused saw the key done.
func TestBusinessInsertDoneRace(t *testing.T) {
	db, events, business := leaseTables(t)
	ctx := context.Background()
	insertDone := pgsql.BusinessInsertDone(events, business)
	for round := range 20 {
		key := fmt.Sprintf("evt:race-%d", round)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					// Every lease is expired at once: each attempt can take it over.
					var outcome string
					var attempt *int
					if err := db.QueryRow(ctx, pgsql.AcquireLease(events, 0), key).Scan(new(string), &outcome, &attempt, new(*time.Time)); err != nil {
						t.Error(err)
						return
					}
					if outcome == string(pgsql.OutcomeDone) {
						return
					}
					if attempt != nil {
						db.Exec(ctx, insertDone, key, "", *attempt) // refused when taken over meanwhile
					}
				}
			}()
		}
		wg.Wait()
		if n := businessRows(t, db, business, key); n > 1 {
			t.Errorf("%s: %d business rows, want at most 1", key, n)
		}
	}
}

// A retry while the holder's step statement runs (and holds the key's row
// lock) is answered busy at once, not after the step.
func TestAcquireLeaseDoesNotWaitForTheHolder(t *testing.T) {
	db, events, business := leaseTables(t)
	ctx := context.Background()
	_, attempt := acquire(t, db, events, "evt:held", time.Minute)
	step, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer step.Rollback(ctx)
	// The holder's step, its statement run and its transaction not yet
	// committed: the row is locked.
	if _, err := step.Exec(ctx, pgsql.BusinessInsertDone(events, business), "evt:held", "", attempt); err != nil {
		t.Fatal(err)
	}
	retry, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer retry.Rollback(ctx)
	if _, err := retry.Exec(ctx, "SET LOCAL lock_timeout = '2s'"); err != nil {
		t.Fatal(err)
	}
	var outcome string
	if err := retry.QueryRow(ctx, pgsql.AcquireLease(events, time.Minute), "evt:held").Scan(new(string), &outcome, new(*int), new(*time.Time)); err != nil || outcome != string(pgsql.OutcomeBusy) {
		t.Errorf("a retry during the holder's step: %q, %v; want busy at once", outcome, err)
	}
	retry.Rollback(ctx)
	if err := step.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if outcome, _ := acquire(t, db, events, "evt:held", time.Minute); outcome != pgsql.OutcomeDone {
		t.Errorf("a retry after the step committed: %s, want done", outcome)
	}
}
