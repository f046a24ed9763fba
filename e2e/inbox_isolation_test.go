package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
)

// Payments that arrived before their orders are deferred; the orders are
// created, and the confirmation of some of them fails inside the effect's
// transaction (a trigger raises, as a transient fault of one business write
// would). The recoverer offers every row to one worker execution: each row
// is decided on its own, so the others are processed in that cycle, and each
// failing row keeps the database's message and completes, once, after the
// fault is gone.
func TestInboxFailingRowsDoNotHoldBackOthers(t *testing.T) {
	d := sharedInbox(t)
	for _, c := range []struct{ rows, failing int }{{5, 1}, {50, 5}} {
		t.Run(fmt.Sprintf("%d rows, %d failing", c.rows, c.failing), func(t *testing.T) {
			prefix := fmt.Sprintf("iso%d", c.rows)
			var events, failingEvents []string
			orders := map[string]string{} // event → order
			var failingOrders []string
			for i := range c.rows {
				evt, order := fmt.Sprintf("evt_ib_%s_%02d", prefix, i), fmt.Sprintf("%s_o%02d", prefix, i)
				wantReceipt(t, evt, d.deliver(t, paymentSucceeded(evt, "pi_"+evt, order, 1000)), "received")
				events, orders[evt] = append(events, evt), order
				if i%(c.rows/c.failing) == c.rows/c.failing/2 {
					failingEvents, failingOrders = append(failingEvents, evt), append(failingOrders, order)
				}
			}
			d.waitRows(t, events, "deferred", time.Minute)
			for _, evt := range events {
				d.newOrder(t, orders[evt], 1000)
			}
			fn := "ib.fail_" + prefix
			execSQL(t, `CREATE OR REPLACE FUNCTION `+fn+`() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id = ANY (ARRAY['`+strings.Join(failingOrders, "','")+`']) AND NEW.state = 'confirmed' THEN
    RAISE EXCEPTION 'order % is locked by the warehouse sync', NEW.id;
  END IF;
  RETURN NEW;
END $$`)
			execSQL(t, `CREATE OR REPLACE TRIGGER fail_`+prefix+` BEFORE UPDATE ON `+d.db.Orders().String()+` FOR EACH ROW EXECUTE FUNCTION `+fn+`()`)
			t.Cleanup(func() {
				st.Business.Exec(context.Background(), `DROP TRIGGER IF EXISTS fail_`+prefix+` ON `+d.db.Orders().String())
			})
			d.waitDue(t, events)

			out := runWorkflow(t, d.ids[generator.FileRecoverer])
			for _, evt := range events {
				r, _ := d.row(t, evt)
				if slices.Contains(failingEvents, evt) {
					if r.State != "processing" || r.Outcome != "error" || !strings.Contains(r.LastError, "order "+orders[evt]+" is locked by the warehouse sync") {
						t.Errorf("failing %s after the cycle: %+v; want processing/error with the trigger's message", evt, r)
					}
					continue
				}
				if r.State != "processed" || r.Outcome != "applied" {
					t.Errorf("%s beside the failing rows, after one recoverer cycle: %+v; want processed/applied", evt, r)
				}
				if e := d.effects(t, orders[evt]); len(e) != 1 || d.orderState(t, orders[evt]) != "confirmed" {
					t.Errorf("order %s: effects %v, state %s; want one effect, confirmed", orders[evt], e, d.orderState(t, orders[evt]))
				}
			}
			if len(out) != 1 || fmt.Sprint(out[0]["inbox_retrying"]) == "0" || !strings.Contains(fmt.Sprint(out[0]["last_errors"]), "locked by the warehouse sync") {
				t.Errorf("the recoverer's count of stuck work: %v; want the retrying rows and their message", out)
			}

			execSQL(t, `DROP TRIGGER fail_`+prefix+` ON `+d.db.Orders().String())
			d.waitDue(t, failingEvents)
			runWorkflow(t, d.ids[generator.FileRecoverer])
			for _, evt := range failingEvents {
				r := d.waitRow(t, evt, "processed")
				if e := d.effects(t, orders[evt]); r.Outcome != "applied" || r.LastError != "" || len(e) != 1 {
					t.Errorf("%s after the repair: %+v, effects %v; want applied once, no error left", evt, r, e)
				}
			}
			for _, evt := range events {
				d.waitTask(t, "order_confirmation:"+orders[evt], "sent")
				if n := d.api.count("POST", "order_confirmation:"+orders[evt]); n != 1 {
					t.Errorf("order_confirmation:%s was called %d times, want 1", orders[evt], n)
				}
			}
		})
	}

	// A statement cancelled while it waits for a lock (statement_timeout,
	// an operator) is one row's fault: recorded on that row, with the
	// database's message, and the rows offered with it are processed.
	t.Run("a cancelled statement among three rows", func(t *testing.T) {
		d.cutWhileWaiting(t, "cancel", "pg_cancel_backend", func(t *testing.T, events []string) {
			r, _ := d.row(t, events[0])
			if r.State != "processing" || !strings.Contains(r.LastError, "canceling statement due to user request") {
				t.Errorf("the cancelled row: %+v; want processing with the database's message", r)
			}
			for _, evt := range events[1:] {
				if r, _ := d.row(t, evt); r.State != "processed" {
					t.Errorf("%s, offered with the cancelled row: %+v; want processed", evt, r)
				}
			}
		})
	})

	// The worker's connection cut while it waits: the decision cannot
	// record that itself, so its error output does, on each row the
	// connection was deciding, and every row completes later: none is lost.
	t.Run("the worker's connection cut among three rows", func(t *testing.T) {
		d.cutWhileWaiting(t, "terminate", "pg_terminate_backend", func(t *testing.T, events []string) {
			for _, evt := range events {
				r, _ := d.row(t, evt)
				if r.State == "processed" {
					continue // decided before the cut
				}
				if r.State != "processing" || !strings.Contains(r.LastError, "the decision did not finish in n8n (execution ") {
					t.Errorf("%s after the cut: %+v; want processing with what n8n kept of the error", evt, r)
				}
			}
		})
	})
}

// cutWhileWaiting delivers three payments before their orders exist, then
// holds the first order's row while the recoverer offers all three to one
// worker execution, and runs fn (pg_cancel_backend or pg_terminate_backend)
// on the worker's statement as it waits; check looks at the rows after that
// cycle. Once the lock is gone, every row completes, each order with one
// effect.
func (d inboxDeployment) cutWhileWaiting(t *testing.T, prefix, fn string, check func(t *testing.T, events []string)) {
	t.Helper()
	ctx := context.Background()
	var events, orders []string
	for i := range 3 {
		evt, order := fmt.Sprintf("evt_ib_%s_%d", prefix, i), fmt.Sprintf("%s_o%d", prefix, i)
		wantReceipt(t, evt, d.deliver(t, paymentSucceeded(evt, "pi_"+evt, order, 700)), "received")
		events, orders = append(events, evt), append(orders, order)
	}
	d.waitRows(t, events, "deferred", time.Minute)
	for _, order := range orders {
		d.newOrder(t, order, 700)
	}
	tx, err := st.Business.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+d.db.Orders().String()+" WHERE id = $1 FOR UPDATE", orders[0]); err != nil {
		t.Fatal(err)
	}
	d.waitDue(t, events)
	done := make(chan error, 1)
	go func() { _, err := runWorkflowNoFatal(d.ids[generator.FileRecoverer]); done <- err }()
	var pid int
	waitFor(t, 30*time.Second, "the worker to wait for the held order", func() bool {
		return st.Business.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%idemhook_apply_batch%'`).Scan(&pid) == nil
	})
	execSQL(t, "SELECT "+fn+"($1)", pid)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	tx.Rollback(ctx)
	check(t, events)
	d.waitDue(t, events)
	runWorkflow(t, d.ids[generator.FileRecoverer])
	for i, evt := range events {
		if r := d.waitRow(t, evt, "processed"); r.Outcome != "applied" || len(d.effects(t, orders[i])) != 1 {
			t.Errorf("%s once the lock is gone: %+v, effects %v; want applied once", evt, r, d.effects(t, orders[i]))
		}
	}
}

// waitDue waits until each event's row that is not finished is due for the
// recoverer: deferred and past its backoff, or processing past its claim.
func (d inboxDeployment) waitDue(t *testing.T, eventIDs []string) {
	t.Helper()
	keys := make([]string, len(eventIDs))
	for i, e := range eventIDs {
		keys[i] = "evt:" + e
	}
	d.waitDueKeys(t, keys)
}

// waitDueKeys is waitDue for receipt keys.
func (d inboxDeployment) waitDueKeys(t *testing.T, keys []string) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("%d rows to fall due", len(keys)), func() bool {
		var waiting int
		st.Business.QueryRow(context.Background(), `SELECT count(*) FROM `+d.db.Inbox().String()+` WHERE event_id = ANY ($1)
			AND ((state = 'deferred' AND next_attempt_at > now()) OR (state = 'processing' AND claimed_until >= now()) OR state = 'received')`, keys).Scan(&waiting)
		return waiting == 0
	})
}
