package pgsql_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/pgsql"
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
	if err := db.QueryRow(context.Background(), in.DrainNextCall(3, linger, time.Minute), full, run, true).Scan(&again); err != nil {
		t.Fatal(err)
	}
	return again
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
				if !drainNext(t, db, in, n == 7, run%2, 0) {
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
	var recorded int
	var wake bool
	if err := db.QueryRow(ctx, in.RecordBatch(time.Second), string(errs), 2).Scan(&recorded, &wake); err != nil {
		t.Fatal(err)
	}
	if recorded != 1 || !wake {
		t.Errorf("recorded %d errors, wake %v; want 1 (the other attempt is stale) and a wake", recorded, wake)
	}
	var lastError string
	db.QueryRow(ctx, "SELECT coalesce(last_error, '') FROM "+in.Inbox().String()+" WHERE id = $1", a).Scan(&lastError)
	if lastError != "connection lost" {
		t.Errorf("row a's error %q", lastError)
	}
	// A dispatcher waits on the outbox (a task due in 3 s keeps it there).
	exec(t, db, "INSERT INTO "+in.Outbox().String()+" (operation_key, kind, payload, next_attempt_at) VALUES ('op:w', 'k', '{}', now() + interval '3 seconds')")
	waiting := make(chan struct{})
	go func() {
		close(waiting)
		db.Exec(ctx, in.WaitForDueTask(time.Minute))
	}()
	<-waiting
	time.Sleep(500 * time.Millisecond)
	if err := db.QueryRow(ctx, in.RecordBatch(time.Second), "[]", 2).Scan(&recorded, &wake); err != nil {
		t.Fatal(err)
	}
	if wake {
		t.Error("a dispatcher waits, and the batch wakes another")
	}
	if err := db.QueryRow(ctx, in.RecordBatch(time.Second), "[]", 0).Scan(&recorded, &wake); err != nil || wake {
		t.Errorf("no task written: wake %v %v", wake, err)
	}
}

// A lingering dispatcher takes a task written after it started waiting.
func TestOutboxWaitLingers(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	go func() {
		time.Sleep(400 * time.Millisecond)
		exec(t, db, "INSERT INTO "+in.Outbox().String()+" (operation_key, kind, payload) VALUES ('op:new', 'k', '{}')")
	}()
	start := time.Now()
	var due bool
	if err := db.QueryRow(ctx, in.LingerForTask(time.Minute), 3000).Scan(&due); err != nil {
		t.Fatal(err)
	}
	if !due || time.Since(start) > 2*time.Second {
		t.Errorf("a task written during the linger: due %v after %s, want true soon after it", due, time.Since(start))
	}
	exec(t, db, "UPDATE "+in.Outbox().String()+" SET state = 'sent'")
	start = time.Now()
	if err := db.QueryRow(ctx, in.LingerForTask(time.Minute), 300).Scan(&due); err != nil || due || time.Since(start) > 2*time.Second {
		t.Errorf("nothing written: due %v after %s (%v), want false after the linger", due, time.Since(start), err)
	}
}
