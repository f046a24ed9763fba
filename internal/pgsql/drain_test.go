package pgsql_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// receiveAndWake saves event key as the n8n receiver does and returns the
// row's id and whether it asks for a worker.
func receiveAndWake(t *testing.T, db *pgxpool.Pool, in pgsql.Inbox, key string) (int64, bool) {
	t.Helper()
	var id int64
	var isNew, wake bool
	if err := db.QueryRow(context.Background(), in.ReceiveAndWake(time.Minute), "default", key, "t", "e30=", "{}").Scan(&id, new(string), &isNew, &wake); err != nil {
		t.Fatal(err)
	}
	return id, wake
}

// claimBatch runs ClaimBatch and returns the ids it claimed, in order.
func claimBatch(t *testing.T, db *pgxpool.Pool, in pgsql.Inbox, offered string, drain bool, limit int) []int64 {
	t.Helper()
	rows, err := db.Query(context.Background(), in.ClaimBatch(time.Minute, time.Minute, 5, limit), offered, drain)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		var state string
		var attempts int
		if err := rows.Scan(&id, &state, &attempts); err != nil {
			t.Fatal(err)
		}
		if state != "processing" {
			t.Errorf("claimed row %d is %s, want processing", id, state)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func drainNext(t *testing.T, db *pgxpool.Pool, in pgsql.Inbox, full bool, run int, linger time.Duration) (again bool) {
	t.Helper()
	return drainNextPaced(t, db, in, full, run, linger, 0)
}

func drainNextPaced(t *testing.T, db *pgxpool.Pool, in pgsql.Inbox, full bool, run int, linger, pace time.Duration) (again bool) {
	t.Helper()
	return rowCame(t, db, in.DrainNextCall(3, linger, time.Minute, pace), full, run, true)
}

// rowCame runs sql, a statement that answers yes by returning one row
// (true) and no by returning none, and says which.
func rowCame(t *testing.T, db *pgxpool.Pool, sql string, args ...any) bool {
	t.Helper()
	var yes bool
	err := db.QueryRow(context.Background(), sql, args...).Scan(&yes)
	if errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if !yes {
		t.Fatalf("%s: a row that says false; want a row only for true", sql)
	}
	return true
}

// The receiver starts a worker only when none drains: the first receipt
// wakes one, the next ones mark the drainer pending; the worker claims the
// received rows oldest first, up to its batch, goes on while rows or
// receipts keep coming, waits a moment for more, and gives the lease up,
// after which the next receipt wakes a worker again.
func TestDrainWakesOneWorker(t *testing.T) {
	in, db := newInbox(t)
	var ids []int64
	wakes := 0
	for i := range 5 {
		id, wake := receiveAndWake(t, db, in, fmt.Sprintf("evt:d%d", i))
		ids = append(ids, id)
		if wake {
			wakes++
		}
	}
	if wakes != 1 {
		t.Fatalf("5 receipts woke %d workers, want 1", wakes)
	}
	if _, wake := receiveAndWake(t, db, in, "evt:d0"); wake {
		t.Error("a duplicate woke a worker")
	}
	if got := claimBatch(t, db, in, "", true, 3); !slices.Equal(got, ids[:3]) {
		t.Fatalf("first batch %v, want the 3 oldest %v", got, ids[:3])
	}
	if again := drainNext(t, db, in, true, 0, time.Second); !again {
		t.Fatal("a full batch: the worker stops, want it to claim again")
	}
	if got := claimBatch(t, db, in, "", true, 3); !slices.Equal(got, ids[3:]) {
		t.Fatalf("second batch %v, want %v", got, ids[3:])
	}
	// Receipts came in since the worker was woken: it looks once more.
	if again := drainNext(t, db, in, false, 1, 0); !again {
		t.Fatal("pending receipts: the worker stops, want it to look again")
	}
	if got := claimBatch(t, db, in, "", true, 3); len(got) != 0 {
		t.Fatalf("nothing left, claimed %v", got)
	}
	// A receipt while the worker waits: it goes on.
	go func() {
		time.Sleep(300 * time.Millisecond)
		receiveAndWake(t, db, in, "evt:late")
	}()
	start := time.Now()
	again := drainNext(t, db, in, false, 1, 5*time.Second)
	if !again || time.Since(start) > 4*time.Second {
		t.Fatalf("a receipt during the wait: again %v after %s, want true at once", again, time.Since(start))
	}
	if got := claimBatch(t, db, in, "", true, 3); len(got) != 1 {
		t.Fatalf("claimed %v, want the late receipt", got)
	}
	if again := drainNext(t, db, in, false, 1, 200*time.Millisecond); again {
		t.Fatal("nothing came: the worker goes on, want it to stop")
	}
	if _, wake := receiveAndWake(t, db, in, "evt:after"); !wake {
		t.Error("a receipt after the worker stopped woke none")
	}
	// The last run of an execution stops, work left or not, and gives the
	// lease up: the next receipt starts a worker.
	if again := drainNext(t, db, in, true, 2, 0); again {
		t.Error("the last run of an execution goes on")
	}
	if _, wake := receiveAndWake(t, db, in, "evt:after-last"); !wake {
		t.Error("a receipt after an execution's last run woke none")
	}
}

// A worker that finds receipts pending claims them no sooner than its pace
// after its last claim, so the receipts of the interval make one batch; a
// receipt after a quiet spell longer than the pace, and a full batch, are
// claimed at once.
func TestDrainPace(t *testing.T) {
	in, db := newInbox(t)
	const pace = 3 * time.Second
	if _, wake := receiveAndWake(t, db, in, "evt:p0"); !wake {
		t.Fatal("the first receipt woke no worker")
	}
	if got := claimBatch(t, db, in, "", true, 20); len(got) != 1 {
		t.Fatalf("first batch %v, want the one receipt", got)
	}
	claimed := time.Now()
	var later []int64
	for i := range 4 {
		id, wake := receiveAndWake(t, db, in, fmt.Sprintf("evt:p%d", i+1))
		if wake {
			t.Fatal("a receipt while the worker waits for its pace woke another worker")
		}
		later = append(later, id)
	}
	if again := drainNextPaced(t, db, in, false, 0, time.Second, pace); !again {
		t.Fatal("pending receipts: the worker stops")
	}
	if waited := time.Since(claimed); waited < pace-100*time.Millisecond {
		t.Errorf("the worker went on %s after its last claim, before its pace of %s", waited, pace)
	}
	if got := claimBatch(t, db, in, "", true, 20); !slices.Equal(got, later) {
		t.Fatalf("second batch %v, want the receipts of the interval in one %v", got, later)
	}
	// A full batch goes on at once.
	start := time.Now()
	if again := drainNextPaced(t, db, in, true, 0, time.Second, pace); !again || time.Since(start) > pace/2 {
		t.Errorf("a full batch: again %v after %s, want true at once", again, time.Since(start))
	}
	claimBatch(t, db, in, "", true, 20)
	// A receipt after a quiet spell longer than the pace, at once.
	time.Sleep(pace + 100*time.Millisecond)
	receiveAndWake(t, db, in, "evt:quiet")
	start = time.Now()
	if again := drainNextPaced(t, db, in, false, 0, time.Second, pace); !again || time.Since(start) > pace/2 {
		t.Errorf("a receipt after a quiet spell: again %v after %s, want true at once", again, time.Since(start))
	}
}

// Receipts racing a worker that stops are never stranded: each is claimed
// by a worker or wakes one.
func TestDrainLosesNoReceipt(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	const receipts = 300
	var mu sync.Mutex
	woken := 0
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < receipts; i += 4 {
				time.Sleep(time.Duration(i%3) * time.Millisecond) // receipts come and go, and the worker stops between them
				if _, wake := receiveAndWake(t, db, in, fmt.Sprintf("evt:race%d", i)); wake {
					mu.Lock()
					woken++
					mu.Unlock()
				}
			}
		}()
	}
	// Workers, one at a time, each started by a wake: drain, stop, and
	// let the next wake start the next.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	claimed := 0
	workers := 0
	for {
		mu.Lock()
		start := woken > workers
		if start {
			workers++
		}
		mu.Unlock()
		if start {
			for run := 0; ; run++ {
				n := len(claimBatch(t, db, in, "", true, 7))
				claimed += n
				if !drainNextPaced(t, db, in, n == 7, run%2, 0, 3*time.Millisecond) {
					break
				}
			}
			continue
		}
		select {
		case <-done:
			mu.Lock()
			left := woken > workers
			mu.Unlock()
			if !left {
				var received int
				db.QueryRow(ctx, "SELECT count(*) FROM "+in.Inbox().String()+" WHERE state = 'received'").Scan(&received)
				if received != 0 || claimed != receipts {
					t.Fatalf("%d receipts, %d claimed by %d workers, %d left received with no worker to come", receipts, claimed, workers, received)
				}
				t.Logf("%d receipts claimed by %d workers", receipts, workers)
				return
			}
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ClaimBatch takes the offered rows that are due, whatever the drain, and
// leaves a held row and a finished one alone; RecordBatch keeps an error on
// its own row, for its own attempt, and says to wake the outbox only when
// tasks were written and no dispatcher waits.
func TestClaimBatchOfferedAndRecordBatch(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	a, _ := receiveAndWake(t, db, in, "evt:a")
	b, _ := receiveAndWake(t, db, in, "evt:b")
	c, _ := receiveAndWake(t, db, in, "evt:c")
	exec(t, db, "UPDATE "+in.Inbox().String()+" SET state = 'processed' WHERE id = $1", c)
	offered := fmt.Sprintf("%d,%d,%d,x;DROP,", a, b, c)
	if got := claimBatch(t, db, in, offered, false, 10); !slices.Equal(got, []int64{a, b}) {
		t.Fatalf("offered %q: claimed %v, want %d and %d", offered, got, a, b)
	}
	if got := claimBatch(t, db, in, offered, false, 10); len(got) != 0 {
		t.Fatalf("claimed rows again while held: %v", got)
	}
	errs, _ := json.Marshal([]map[string]any{{"id": a, "attempts": 1, "message": "connection lost"}, {"id": b, "attempts": 7, "message": "stale"}})
	record := func(errs string, tasks int) bool {
		return rowCame(t, db, in.RecordBatch(time.Second, time.Minute), errs, tasks)
	}
	if wake := record(string(errs), 2); !wake {
		t.Errorf("a batch with tasks did not wake the outbox")
	}
	for id, want := range map[int64]string{a: "connection lost", b: ""} { // b's attempt 7 is stale
		var lastError string
		db.QueryRow(ctx, "SELECT coalesce(last_error, '') FROM "+in.Inbox().String()+" WHERE id = $1", id).Scan(&lastError)
		if lastError != want {
			t.Errorf("row %d's error %q, want %q", id, lastError, want)
		}
	}
	// The dispatcher woken holds the lease: the next batches wake no other.
	if wake := record("[]", 3); wake {
		t.Error("a dispatcher holds the lease, and a batch wakes another")
	}
	if wake := record("[]", 0); wake {
		t.Error("a batch without tasks woke the outbox")
	}
}

// A dispatcher a worker woke takes the tasks written after it started
// waiting (marked pending by the batches that found its lease live), and
// gives its lease up once nothing comes: the next batch wakes one again.
func TestOutboxWaitLingers(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	batch := func(tasks int) bool {
		return rowCame(t, db, in.RecordBatch(time.Second, time.Minute), "[]", tasks)
	}
	linger := func(ms int) (bool, time.Duration) {
		start := time.Now()
		due := rowCame(t, db, in.LingerForTask(time.Minute, time.Minute), ms, 0)
		return due, time.Since(start)
	}
	if !batch(1) {
		t.Fatal("the first batch with tasks woke no dispatcher")
	}
	if due, _ := linger(100); !due {
		t.Fatal("the woken dispatcher does not take the batch's tasks")
	}
	written := make(chan struct{})
	go func() {
		defer close(written)
		time.Sleep(400 * time.Millisecond)
		db.Exec(ctx, "INSERT INTO "+in.Outbox().String()+" (operation_key, kind, payload, next_attempt_at) VALUES ('op:new', 'k', '{}', now() + interval '1 hour')")
		batch(1) // its task is not due: the pending mark is what the dispatcher sees
	}()
	due, took := linger(3000)
	<-written
	if !due || took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("tasks written during the linger: due %v after %s, want true soon after them", due, took)
	}
	if batch(1) {
		t.Error("the dispatcher holds the lease, and a batch woke another")
	}
	if due, _ := linger(300); !due {
		t.Error("a batch's pending tasks were not taken")
	}
	if due, took := linger(300); due || took > 2*time.Second {
		t.Errorf("nothing written: due %v after %s, want false after the linger", due, took)
	}
	if !batch(1) {
		t.Error("the dispatcher gave its lease up, and the next batch woke none")
	}
}

// A dispatcher a worker woke passes no sooner than its pace: the batches
// written meanwhile are one pass. Without a pace (the schedule's
// dispatcher, or a full claim) a due task is answered at once.
func TestOutboxWaitPace(t *testing.T) {
	in, db := newInbox(t)
	const pace = 2 * time.Second
	batch := func(tasks int) bool {
		return rowCame(t, db, in.RecordBatch(time.Second, time.Minute), "[]", tasks)
	}
	linger := func(lingerMs int, pace time.Duration) (bool, time.Duration) {
		start := time.Now()
		due := rowCame(t, db, in.LingerForTask(time.Minute, time.Minute), lingerMs, pace.Milliseconds())
		return due, time.Since(start)
	}
	if !batch(1) {
		t.Fatal("the first batch with tasks woke no dispatcher")
	}
	if due, took := linger(5000, pace); !due || took < pace-100*time.Millisecond {
		t.Errorf("a pending batch: due %v after %s, want true after the pace of %s", due, took, pace)
	}
	batch(1)
	if due, took := linger(5000, 0); !due || took > pace/2 {
		t.Errorf("a pending batch, no pace: due %v after %s, want true at once", due, took)
	}
	db.Exec(context.Background(), "INSERT INTO "+in.Outbox().String()+" (operation_key, kind, payload, next_attempt_at) VALUES ('op:due', 'k', '{}', now())")
	if due, took := linger(0, 0); !due || took > pace/2 {
		t.Errorf("a due task, the schedule's dispatcher: due %v after %s, want true at once", due, took)
	}
}
