package pgsql_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/jackc/pgx/v5/pgxpool"
)

// deletionsByTransaction installs on table a trigger that records the
// transaction of every row deleted, and, with pause, sleeps that long after
// each delete statement; it returns how many transactions deleted rows.
func deletionsByTransaction(t *testing.T, db *pgxpool.Pool, table string, pause time.Duration) func() int {
	t.Helper()
	ctx := context.Background()
	log := table + "_deletions"
	for _, sql := range []string{
		"CREATE TABLE " + log + " (tx bigint NOT NULL)",
		"CREATE FUNCTION " + table + "_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO " + log + " VALUES (txid_current()); RETURN OLD; END $$",
		"CREATE TRIGGER log_deletions AFTER DELETE ON " + table + " FOR EACH ROW EXECUTE FUNCTION " + table + "_log()",
		fmt.Sprintf("CREATE FUNCTION %s_pause() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(%f); RETURN NULL; END $$", table, pause.Seconds()),
		"CREATE TRIGGER pause AFTER DELETE ON " + table + " FOR EACH STATEMENT EXECUTE FUNCTION " + table + "_pause()",
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	return func() int {
		var n int
		if err := db.QueryRow(ctx, "SELECT count(DISTINCT tx) FROM "+log).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// The cleanup workflow's statement deletes N expired keys in ⌈N / batch⌉
// transactions, touches no live key, and a reservation made while it runs
// (between its batches) is kept.
func TestCleanupDeletesInBatches(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	db := pg.Business
	schema := fmt.Sprintf("c%d", schemaSeq.Add(1))
	table := pgsql.MustParseTable(schema + ".events")
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+schema+";"+pgsql.EventsDDL(table, true)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	const expired, live, batch = 25, 7, 10
	if _, err := db.Exec(ctx, "INSERT INTO "+table.String()+" (key, first_seen) SELECT 'old-' || i, now() - interval '40 days' - i * interval '1 minute' FROM generate_series(1, $1) i", expired); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "INSERT INTO "+table.String()+" (key, first_seen) SELECT 'live-' || i, now() - interval '29 days' FROM generate_series(1, $1) i", live); err != nil {
		t.Fatal(err)
	}
	transactions := deletionsByTransaction(t, db, schema+".events", 200*time.Millisecond)

	done := make(chan error, 1)
	go func() {
		_, err := db.Exec(ctx, pgsql.Cleanup(table, 30*24*time.Hour, batch))
		done <- err
	}()
	// Reservations while it runs: each answered at once, and kept.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 30 * time.Millisecond)
			if tag, err := db.Exec(ctx, pgsql.Reserve(table), fmt.Sprintf("new-%d", i)); err != nil || tag.RowsAffected() != 1 {
				t.Errorf("a reservation during the cleanup: %v (%d rows)", err, tag.RowsAffected())
			}
		}()
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("the cleanup statement: %v", err)
	}
	if n := transactions(); n != (expired+batch-1)/batch {
		t.Errorf("%d expired keys were deleted in %d transactions, want %d (batches of %d)", expired, n, (expired+batch-1)/batch, batch)
	}
	var left, kept, added int
	db.QueryRow(ctx, "SELECT count(*) FILTER (WHERE key LIKE 'old-%'), count(*) FILTER (WHERE key LIKE 'live-%'), count(*) FILTER (WHERE key LIKE 'new-%') FROM "+table.String()).Scan(&left, &kept, &added)
	if left != 0 || kept != live || added != 20 {
		t.Errorf("after the cleanup: %d expired keys left, %d of %d live kept, %d of 20 reserved during it", left, kept, live, added)
	}
}

// CleanupBatch, as keysvc runs it: each run deletes at most batch keys,
// the oldest first.
func TestCleanupBatch(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	db := pg.Business
	schema := fmt.Sprintf("c%d", schemaSeq.Add(1))
	table := pgsql.MustParseTable(schema + ".events")
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+schema+";"+pgsql.EventsDDL(table, false)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	db.Exec(ctx, "INSERT INTO "+table.String()+" (key, first_seen) SELECT 'k-' || lpad(i::text, 2, '0'), now() - i * interval '1 day' FROM generate_series(1, 12) i")
	cutoff := time.Now().Add(-2*24*time.Hour + time.Hour) // keys 2 to 12 are older
	var counts []int64
	for {
		tag, err := db.Exec(ctx, pgsql.CleanupBatch(table, 4), cutoff)
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, tag.RowsAffected())
		if tag.RowsAffected() < 4 {
			break
		}
	}
	if fmt.Sprint(counts) != "[4 4 3]" {
		t.Errorf("batches deleted %v, want [4 4 3]", counts)
	}
	var left []string
	rows, _ := db.Query(ctx, "SELECT key FROM "+table.String()+" ORDER BY key")
	for rows.Next() {
		var k string
		rows.Scan(&k)
		left = append(left, k)
	}
	if fmt.Sprint(left) != "[k-01]" {
		t.Errorf("left %v, want [k-01]", left)
	}
}

// The inbox's cleanup procedure deletes sent tasks and finished events with
// no task left to send, batch rows in each transaction, and keeps what
// waits for a human: failed, deferred, unfinished events, tasks not sent.
func TestInboxCleanupInBatches(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	const batch = 4
	// 10 old processed events with a sent task each, 1 processed event whose
	// task failed, 1 old failed event, 1 recent processed event.
	seed := fmt.Sprintf(`
INSERT INTO %[1]s (account, event_id, body, state, finished_at)
SELECT 'a', 'evt:done-' || i, '', 'processed', now() - interval '40 days' FROM generate_series(1, 10) i;
INSERT INTO %[1]s (account, event_id, body, state, finished_at) VALUES
  ('a', 'evt:task-failed', '', 'processed', now() - interval '40 days'),
  ('a', 'evt:failed', '', 'failed', now() - interval '40 days'),
  ('a', 'evt:recent', '', 'processed', now() - interval '1 day');
INSERT INTO %[2]s (operation_key, kind, payload, inbox_id, state, sent_at)
SELECT 'op-' || id, 'k', '{}', id, 'sent', now() - interval '40 days' FROM %[1]s WHERE event_id LIKE 'evt:done-%%';
INSERT INTO %[2]s (operation_key, kind, payload, inbox_id, state)
SELECT 'op-failed', 'k', '{}', id, 'failed' FROM %[1]s WHERE event_id = 'evt:task-failed';`, in.Inbox(), in.Outbox())
	if _, err := db.Exec(ctx, seed); err != nil {
		t.Fatal(err)
	}
	events := deletionsByTransaction(t, db, in.Inbox().String(), 0)
	var tasksDeleted, eventsDeleted int64
	if err := db.QueryRow(ctx, in.Cleanup(30*24*time.Hour, batch)).Scan(&tasksDeleted, &eventsDeleted); err != nil {
		t.Fatalf("the cleanup procedure: %v", err)
	}
	if tasksDeleted != 10 || eventsDeleted != 10 {
		t.Errorf("deleted %d tasks and %d events, want 10 and 10", tasksDeleted, eventsDeleted)
	}
	if n := events(); n != (10+batch-1)/batch {
		t.Errorf("10 events were deleted in %d transactions, want %d", n, (10+batch-1)/batch)
	}
	var left []string
	rows, err := db.Query(ctx, "SELECT event_id FROM "+in.Inbox().String()+" ORDER BY event_id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		rows.Scan(&k)
		left = append(left, k)
	}
	if fmt.Sprint(left) != "[evt:failed evt:recent evt:task-failed]" {
		t.Errorf("events left %v, want the failed one, the recent one and the one whose task failed", left)
	}
}
