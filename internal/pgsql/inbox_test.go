package pgsql_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pg is a real PostgreSQL 16 for the statements' tests (nil with -short).
var pg *sandbox.Stack

func TestMain(m *testing.M) { sandbox.RunWithPostgres(m, "pgsql", &pg) }

var schemaSeq atomic.Int64

// presetDecision is the compiled rules preset called name.
func presetDecision(t *testing.T, name string) pgsql.Decision {
	t.Helper()
	rs, err := rules.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return rs.Decision()
}

// newInbox creates the inbox pattern's schema in a fresh PostgreSQL
// schema, with the decision compiled from the stripe-orders preset (the
// rules the hand-written function had).
func newInbox(t *testing.T) (pgsql.Inbox, *pgxpool.Pool) {
	t.Helper()
	return newInboxFor(t, presetDecision(t, rules.DefaultPreset))
}

func newInboxFor(t *testing.T, d pgsql.Decision) (pgsql.Inbox, *pgxpool.Pool) {
	t.Helper()
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	in := pgsql.Inbox{Schema: fmt.Sprintf("t%d", schemaSeq.Add(1))}
	ctx := context.Background()
	ddl, err := in.DDL(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Business.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	// Idempotent: a second run changes nothing and fails nothing.
	if _, err := pg.Business.Exec(ctx, ddl); err != nil {
		t.Fatalf("schema run twice: %v", err)
	}
	t.Cleanup(func() { pg.Business.Exec(context.Background(), "DROP SCHEMA "+in.Schema+" CASCADE") })
	return in, pg.Business
}

// outboxAnswers is OutboxResults' parameter for one answer.
func outboxAnswers(id int64, attempts int, phase, status, errCode, body string) string {
	b, _ := json.Marshal([]map[string]any{{"id": id, "attempts": attempts, "phase": phase, "status": status, "error": errCode, "body": body}})
	return string(b)
}

func exec(t *testing.T, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func event(typ string, object map[string]any) string {
	b, _ := json.Marshal(map[string]any{"id": "evt", "type": typ, "data": map[string]any{"object": object}})
	return string(b)
}

func pi(id, order string, amount any) map[string]any {
	return map[string]any{"id": id, "amount": amount, "amount_received": amount, "currency": "eur", "metadata": map[string]any{"order_id": order}}
}

func refund(charge, piID, order string, amount any, full bool) map[string]any {
	return map[string]any{"id": charge, "payment_intent": piID, "amount_refunded": amount, "refunded": full, "currency": "eur",
		"metadata": map[string]any{"order_id": order}}
}

var allowed = "payment_intent.succeeded,checkout.session.completed,charge.refunded,invoice.paid"

// Every rule of idemhook_apply_event compiled from the stripe-orders preset,
// one row each: the inbox row's final state and outcome, and what the
// business kept. These are the hand-written function's cases, unchanged but
// for the partial refund.
func TestApplyEvent(t *testing.T) {
	type order struct {
		state, pi string
		amount    int
	}
	cases := []struct {
		name       string
		order      *order // order "o" of account "default", if any
		typ, body  string
		receivedAt string // SQL interval ago; default now
		state      string
		outcome    string
		orderAfter string
		effects    int
		tasks      int
	}{
		{"payment confirms a pending order", &order{"pending", "", 100}, "payment_intent.succeeded", event("payment_intent.succeeded", pi("pi_1", "o", 100)),
			"", "processed", "applied", "confirmed", 1, 1},
		{"paid checkout confirms", &order{"pending", "", 100}, "checkout.session.completed",
			event("checkout.session.completed", map[string]any{"payment_intent": "pi_1", "amount_total": 100, "currency": "EUR", "payment_status": "paid", "metadata": map[string]any{"order_id": "o"}}),
			"", "processed", "applied", "confirmed", 1, 1},
		{"unpaid checkout waits for the payment", &order{"pending", "", 100}, "checkout.session.completed",
			event("checkout.session.completed", map[string]any{"payment_intent": "pi_1", "amount_total": 100, "currency": "eur", "payment_status": "unpaid", "metadata": map[string]any{"order_id": "o"}}),
			"", "ignored", "not_paid", "pending", 0, 0},
		{"type outside the allowlist", &order{"pending", "", 100}, "customer.created", event("customer.created", pi("pi_1", "o", 100)),
			"", "ignored", "type_not_allowed", "pending", 0, 0},
		{"allowed type without a rule", &order{"pending", "", 100}, "invoice.paid", event("invoice.paid", pi("pi_1", "o", 100)),
			"", "rejected", "no_rule", "pending", 0, 0},
		{"body that is not JSON", &order{"pending", "", 100}, "payment_intent.succeeded", "not json",
			"", "rejected", "no_data_object", "pending", 0, 0},
		{"missing order id", &order{"pending", "", 100}, "payment_intent.succeeded", event("payment_intent.succeeded", map[string]any{"id": "pi_1", "amount": 100, "currency": "eur"}),
			"", "rejected", "missing_order_id", "pending", 0, 0},
		{"missing payment intent", &order{"pending", "", 100}, "payment_intent.succeeded", event("payment_intent.succeeded", pi("", "o", 100)),
			"", "rejected", "missing_payment_intent", "pending", 0, 0},
		{"amount that is not a number", &order{"pending", "", 100}, "payment_intent.succeeded", event("payment_intent.succeeded", pi("pi_1", "o", "100")),
			"", "rejected", "missing_amount", "pending", 0, 0},
		{"amount that does not match", &order{"pending", "", 100}, "payment_intent.succeeded", event("payment_intent.succeeded", pi("pi_1", "o", 99)),
			"", "rejected", "amount_mismatch", "pending", 0, 0},
		{"unknown order waits", nil, "payment_intent.succeeded", event("payment_intent.succeeded", pi("pi_1", "o", 100)),
			"", "deferred", "order_unknown", "", 0, 0},
		{"unknown order past the defer limit", nil, "payment_intent.succeeded", event("payment_intent.succeeded", pi("pi_1", "o", 100)),
			"2 days", "failed", "order_unknown", "", 0, 0},
		{"second payment for a confirmed order", &order{"confirmed", "pi_0", 100}, "payment_intent.succeeded", event("payment_intent.succeeded", pi("pi_1", "o", 100)),
			"", "rejected", "order_not_pending", "confirmed", 0, 0},
		{"refund before the payment waits", &order{"pending", "", 100}, "charge.refunded", event("charge.refunded", refund("ch_1", "pi_1", "o", 100, true)),
			"", "deferred", "order_not_confirmed", "pending", 0, 0},
		{"refund of a confirmed order", &order{"confirmed", "pi_1", 100}, "charge.refunded", event("charge.refunded", refund("ch_1", "pi_1", "o", 100, true)),
			"", "processed", "applied", "refunded", 1, 1},
		// The hand-written function rejected partial refunds; the preset
		// applies each as an effect of its own (see TestPartialRefunds).
		{"partial refund", &order{"confirmed", "pi_1", 100}, "charge.refunded", event("charge.refunded", refund("ch_1", "pi_1", "o", 40, false)),
			"", "processed", "applied", "confirmed", 1, 1},
		{"refund of another payment", &order{"confirmed", "pi_0", 100}, "charge.refunded", event("charge.refunded", refund("ch_1", "pi_1", "o", 100, true)),
			"", "rejected", "refund_mismatch", "confirmed", 0, 0},
	}
	in, db := newInbox(t)
	ctx := context.Background()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			exec(t, db, "TRUNCATE "+in.Inbox().String()+", "+in.Effects().String()+", "+in.Orders().String()+", "+in.Outbox().String())
			if c.order != nil {
				exec(t, db, "INSERT INTO "+in.Orders().String()+" (id, state, amount, currency, payment_intent) VALUES ('o', $1, $2, 'eur', nullif($3, ''))",
					c.order.state, c.order.amount, c.order.pi)
			}
			ago := c.receivedAt
			if ago == "" {
				ago = "0 seconds"
			}
			var id int64
			if err := db.QueryRow(ctx, "INSERT INTO "+in.Inbox().String()+" (account, event_id, event_type, body, received_at) VALUES ('default', $1, $2, convert_to($3, 'UTF8'), now() - $4::interval) RETURNING id",
				fmt.Sprintf("evt:%d", i), c.typ, c.body, ago).Scan(&id); err != nil {
				t.Fatal(err)
			}
			claimAndApply(t, db, in, id)
			var state, outcome, lastError string
			var effects, tasks int
			db.QueryRow(ctx, "SELECT state, coalesce(outcome, ''), coalesce(last_error, '') FROM "+in.Inbox().String()+" WHERE id = $1", id).Scan(&state, &outcome, &lastError)
			db.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+in.Effects().String()+"), (SELECT count(*) FROM "+in.Outbox().String()+")").Scan(&effects, &tasks)
			if state != c.state || outcome != c.outcome || effects != c.effects || tasks != c.tasks {
				t.Errorf("state %s, outcome %s, %d effects, %d tasks (%s); want %s, %s, %d, %d", state, outcome, effects, tasks, lastError, c.state, c.outcome, c.effects, c.tasks)
			}
			if state != "processed" && lastError == "" {
				t.Errorf("a %s row carries no reason", state)
			}
			if c.order != nil {
				var after string
				db.QueryRow(ctx, "SELECT state FROM "+in.Orders().String()+" WHERE id = 'o'").Scan(&after)
				if after != c.orderAfter {
					t.Errorf("order is %s, want %s", after, c.orderAfter)
				}
			}
		})
	}
}

func claimAndApply(t *testing.T, db *pgxpool.Pool, in pgsql.Inbox, id int64) string {
	t.Helper()
	ctx := context.Background()
	var state string
	var attempts int
	if err := db.QueryRow(ctx, in.ClaimEvent(time.Minute, 5), id).Scan(new(int64), &state, &attempts); err != nil {
		t.Fatalf("claim %d: %v", id, err)
	}
	var outcome string
	if err := db.QueryRow(ctx, in.ApplyEventCall(24*time.Hour, 30*time.Second), id, attempts, allowed).Scan(new(int64), new(string), &outcome, new(string), new(int)); err != nil {
		t.Fatalf("apply %d: %v", id, err)
	}
	return outcome
}

// A second event proposing the same effect is processed as effect_exists and
// changes nothing; a confirmation makes the refund waiting for it due.
func TestApplyEventEffectExistsAndWakesDeferred(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	exec(t, db, "INSERT INTO "+in.Orders().String()+" (id, amount, currency) VALUES ('o', 100, 'eur')")
	insert := func(eventID, typ, body string) int64 {
		var id int64
		if err := db.QueryRow(ctx, "INSERT INTO "+in.Inbox().String()+" (account, event_id, event_type, body) VALUES ('default', $1, $2, convert_to($3, 'UTF8')) RETURNING id",
			eventID, typ, body).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	refundID := insert("evt:r", "charge.refunded", event("charge.refunded", refund("ch_1", "pi_1", "o", 100, true)))
	if got := claimAndApply(t, db, in, refundID); got != "order_not_confirmed" {
		t.Fatalf("refund first: %s", got)
	}
	var due bool
	db.QueryRow(ctx, "SELECT next_attempt_at <= now() FROM "+in.Inbox().String()+" WHERE id = $1", refundID).Scan(&due)
	if due {
		t.Fatal("a deferred refund is due at once; want a backoff")
	}
	first := insert("evt:a", "payment_intent.succeeded", event("payment_intent.succeeded", pi("pi_1", "o", 100)))
	second := insert("evt:b", "checkout.session.completed", event("checkout.session.completed",
		map[string]any{"payment_intent": "pi_1", "amount_total": 100, "currency": "eur", "payment_status": "paid", "metadata": map[string]any{"order_id": "o"}}))
	if got := claimAndApply(t, db, in, first); got != "applied" {
		t.Fatalf("first: %s", got)
	}
	if got := claimAndApply(t, db, in, second); got != "effect_exists" {
		t.Errorf("second event proposing the same effect: %s, want effect_exists", got)
	}
	db.QueryRow(ctx, "SELECT next_attempt_at <= now() FROM "+in.Inbox().String()+" WHERE id = $1", refundID).Scan(&due)
	if !due {
		t.Error("the confirmation did not make the waiting refund due")
	}
}

// The claim lets one worker in, takes over an expired claim, fences the late
// worker out and fails a row whose claims kept expiring.
func TestClaimEvent(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	var id int64
	db.QueryRow(ctx, "INSERT INTO "+in.Inbox().String()+" (account, event_id, body) VALUES ('default', 'evt:c', '') RETURNING id").Scan(&id)
	claim := func() (string, int, bool) {
		var state string
		var attempts int
		err := db.QueryRow(ctx, in.ClaimEvent(time.Minute, 3), id).Scan(new(int64), &state, &attempts)
		if err == pgx.ErrNoRows {
			return "", 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return state, attempts, true
	}
	if s, a, ok := claim(); !ok || s != "processing" || a != 1 {
		t.Fatalf("first claim: %s %d %v", s, a, ok)
	}
	if _, _, ok := claim(); ok {
		t.Fatal("a held claim was claimed again")
	}
	expire := func() {
		exec(t, db, "UPDATE "+in.Inbox().String()+" SET claimed_until = now() - interval '1 second' WHERE id = $1", id)
	}
	expire()
	if s, a, ok := claim(); !ok || s != "processing" || a != 2 {
		t.Fatalf("claim after expiry: %s %d %v", s, a, ok)
	}
	// The worker of attempt 1 comes back late: fenced out.
	var outcome string
	db.QueryRow(ctx, in.ApplyEventCall(time.Hour, 30*time.Second), id, 1, allowed).Scan(new(int64), new(string), &outcome, new(string), new(int))
	if outcome != "not_claimed" {
		t.Errorf("a late worker's apply: %s, want not_claimed", outcome)
	}
	expire()
	claim() // attempt 3
	expire()
	if s, a, ok := claim(); !ok || s != "failed" || a != 3 {
		t.Errorf("claim after 3 expired claims: %s %d %v, want failed at attempt 3", s, a, ok)
	}
}

// idemhook_outbox_result: every answer's next state, the backoff, the
// attempt budget and the fencing.
func TestOutboxResult(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	backoff := 10 * time.Second
	cases := []struct {
		phase    string
		status   string
		errCode  string
		attempts int
		state    string
		resend   bool
	}{
		{"send", "200", "", 1, "sent", false},
		{"send", "201", "", 1, "sent", false},
		{"send", "500", "", 1, "pending", false},
		{"send", "503", "", 1, "pending", false},
		{"send", "429", "", 1, "pending", false},
		{"send", "408", "", 1, "pending", false},
		{"send", "409", "", 1, "pending", false},
		{"send", "500", "", 3, "failed", false},
		{"send", "400", "", 1, "failed", false},
		{"send", "404", "", 1, "failed", false},
		{"send", "422", "", 1, "failed", false},
		{"send", "", "ECONNREFUSED", 1, "pending", false},
		{"send", "", "ENOTFOUND", 1, "pending", false},
		{"send", "", "ECONNREFUSED", 3, "failed", false},
		{"send", "", "ECONNABORTED", 1, "ambiguous", false},
		{"send", "", "ECONNRESET", 1, "ambiguous", false},
		{"send", "", "ETIMEDOUT", 3, "ambiguous", false},
		{"send", "", "socket hang up", 1, "ambiguous", false},
		{"lookup", "200", "", 1, "sent", false},
		{"lookup", "404", "", 1, "pending", true},
		{"lookup", "500", "", 1, "ambiguous", false},
		{"lookup", "", "ECONNREFUSED", 1, "ambiguous", false},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s %s%s after %d", c.phase, c.status, c.errCode, c.attempts), func(t *testing.T) {
			key := fmt.Sprintf("op:%d", i)
			var id int64
			db.QueryRow(ctx, "INSERT INTO "+in.Outbox().String()+" (operation_key, kind, payload, state, attempts) VALUES ($1, 'k', '{}', 'sending', $2) RETURNING id",
				key, c.attempts).Scan(&id)
			var state string
			var resend bool
			if err := db.QueryRow(ctx, in.OutboxResults(3, backoff), outboxAnswers(id, c.attempts, c.phase, c.status, c.errCode, "answer body")).
				Scan(new(int64), new(string), &state, &resend); err != nil {
				t.Fatal(err)
			}
			var stored string
			var delay time.Duration
			db.QueryRow(ctx, "SELECT state, next_attempt_at - now() FROM "+in.Outbox().String()+" WHERE id = $1", id).Scan(&stored, &delay)
			if state != c.state || stored != c.state || resend != c.resend {
				t.Errorf("got %s (stored %s, resend %v), want %s (resend %v)", state, stored, resend, c.state, c.resend)
			}
			if c.phase == pgsql.PhaseLookup && c.status == "404" {
				// Not performed: due again at once, for the send phase.
				if delay > time.Second {
					t.Errorf("a task the API never performed is due in %s, want now", delay)
				}
			} else if stored == "pending" || stored == "ambiguous" {
				// Exponential with jitter: base × 2^(attempts-1) × [0.5, 1].
				full := backoff << (c.attempts - 1)
				if delay < full/2-time.Second || delay > full {
					t.Errorf("retry in %s, want between %s and %s", delay, full/2, full)
				}
			}
		})
	}
	t.Run("a pass's answers in one statement", func(t *testing.T) {
		var answers []map[string]any
		want := map[int64]string{}
		for i, c := range []struct{ status, state string }{{"200", "sent"}, {"500", "pending"}, {"422", "failed"}} {
			var id int64
			db.QueryRow(ctx, "INSERT INTO "+in.Outbox().String()+" (operation_key, kind, payload, state, attempts) VALUES ($1, 'k', '{}', 'sending', 1) RETURNING id",
				fmt.Sprintf("op:pass%d", i)).Scan(&id)
			answers = append(answers, map[string]any{"id": id, "attempts": 1, "phase": "send", "status": c.status, "error": "", "body": "b"})
			want[id] = c.state
		}
		b, _ := json.Marshal(answers)
		rows, err := db.Query(ctx, in.OutboxResults(3, backoff), string(b))
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]string{}
		for rows.Next() {
			var id int64
			var state string
			if err := rows.Scan(&id, new(string), &state, new(bool)); err != nil {
				t.Fatal(err)
			}
			got[id] = state
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		for id, state := range want {
			var stored string
			db.QueryRow(ctx, "SELECT state FROM "+in.Outbox().String()+" WHERE id = $1", id).Scan(&stored)
			if got[id] != state || stored != state {
				t.Errorf("task %d: returned %q, stored %q, want %q", id, got[id], stored, state)
			}
		}
	})
	t.Run("a late dispatcher is fenced out", func(t *testing.T) {
		var id int64
		db.QueryRow(ctx, "INSERT INTO "+in.Outbox().String()+" (operation_key, kind, payload, state, attempts) VALUES ('op:late', 'k', '{}', 'sending', 2) RETURNING id").Scan(&id)
		var state string
		db.QueryRow(ctx, in.OutboxResults(3, backoff), outboxAnswers(id, 1, "send", "200", "", "")).Scan(new(int64), new(string), &state, new(bool))
		if state != "sending" {
			t.Errorf("attempt 1 recorded over attempt 2: state %s", state)
		}
	})
}

// Two dispatchers claiming at once get disjoint tasks (FOR UPDATE SKIP
// LOCKED), a claimed task is not due again until its claim expires, and each
// phase takes only its own tasks: pending ones are sent, uncertain ones (an
// expired claim) looked up first.
func TestClaimTasksDisjoint(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	exec(t, db, "INSERT INTO "+in.Outbox().String()+" (operation_key, kind, payload) SELECT 'op:' || i, 'k', '{}' FROM generate_series(1, 10) i")
	tx1, _ := db.Begin(ctx)
	defer tx1.Rollback(ctx)
	tx2, _ := db.Begin(ctx)
	defer tx2.Rollback(ctx)
	keys := func(tx pgx.Tx, phase string) []string {
		rows, err := tx.Query(ctx, in.ClaimTasks(time.Minute, 6, phase))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var key string
			rows.Scan(new(int64), &key, new(string), new(map[string]any), new(int))
			out = append(out, key)
		}
		return out
	}
	if l := keys(tx1, pgsql.PhaseLookup); len(l) != 0 {
		t.Errorf("the lookup phase claimed pending tasks %v", l)
	}
	a, b := keys(tx1, pgsql.PhaseSend), keys(tx2, pgsql.PhaseSend)
	if len(a) != 6 || len(b) != 4 {
		t.Errorf("claimed %d and %d of 10 tasks, want 6 and 4", len(a), len(b))
	}
	seen := map[string]bool{}
	for _, k := range append(a, b...) {
		if seen[k] {
			t.Errorf("%s claimed by both dispatchers", k)
		}
		seen[k] = true
	}
	tx1.Commit(ctx)
	tx2.Commit(ctx)
	claimed := func(phase string) int {
		var n int
		if err := db.QueryRow(ctx, "WITH c AS ("+in.ClaimTasks(time.Minute, 100, phase)+") SELECT count(*) FROM c").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, phase := range []string{pgsql.PhaseLookup, pgsql.PhaseSend} {
		if n := claimed(phase); n != 0 {
			t.Errorf("%d claimed tasks were claimed again (%s) before their claim expired", n, phase)
		}
	}
	exec(t, db, "UPDATE "+in.Outbox().String()+" SET claimed_until = now() - interval '1 second' WHERE operation_key = 'op:1'")
	if n := claimed(pgsql.PhaseSend); n != 0 {
		t.Errorf("the send phase claimed %d tasks whose call may have been performed", n)
	}
	var key string
	db.QueryRow(ctx, in.ClaimTasks(time.Minute, 100, pgsql.PhaseLookup)).Scan(new(int64), &key, new(string), new(map[string]any), new(int))
	if key != "op:1" {
		t.Errorf("the lookup phase claimed %q, want op:1, whose claim expired", key)
	}
}

// OutboxWait lets one dispatcher wait for the next due task: it answers at
// once when one is due, after the wait when one falls due within the window,
// false when none will, and false at once to a second waiter.
func TestOutboxWait(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	wait := func(window time.Duration) (bool, time.Duration) {
		start := time.Now()
		var due bool
		if err := db.QueryRow(ctx, in.WaitForDueTask(window)).Scan(&due); err != nil {
			t.Fatal(err)
		}
		return due, time.Since(start)
	}
	if due, _ := wait(time.Second); due {
		t.Error("no task at all, and the wait says one is due")
	}
	exec(t, db, "INSERT INTO "+in.Outbox().String()+" (operation_key, kind, payload, next_attempt_at) VALUES ('op:later', 'k', '{}', now() + interval '1 hour')")
	if due, _ := wait(2 * time.Second); due {
		t.Error("a task due in an hour is due within a 2 s window")
	}
	exec(t, db, "INSERT INTO "+in.Outbox().String()+" (operation_key, kind, payload, next_attempt_at) VALUES ('op:soon', 'k', '{}', clock_timestamp() + interval '1500 milliseconds')")
	// A second dispatcher, while the first waits, does not wait too.
	second := make(chan bool)
	go func() {
		time.Sleep(300 * time.Millisecond)
		var due bool
		db.QueryRow(ctx, in.WaitForDueTask(time.Minute)).Scan(&due)
		second <- due
	}()
	due, took := wait(time.Minute)
	if !due || took < time.Second || took > 5*time.Second {
		t.Errorf("a task due in 1.5 s: due %v after %s, want true after about 1.5 s", due, took)
	}
	if <-second {
		t.Error("a second dispatcher waited beside the first")
	}
	if due, took := wait(time.Minute); !due || took > time.Second {
		t.Errorf("a task already due: due %v after %s, want true at once", due, took)
	}
}

// One row's failing decision, among rows decided in one transaction (n8n's
// default batching), rolls back its own writes only: the others keep their
// effects, and the failing row keeps the database's message, a backoff and
// its claim.
func TestApplyEventErrorStaysOnItsRow(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	exec(t, db, "CREATE FUNCTION "+in.Schema+`.fail_o3() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id = 'o3' AND NEW.state = 'confirmed' THEN RAISE EXCEPTION 'order o3 is frozen'; END IF;
  RETURN NEW;
END $$`)
	exec(t, db, "CREATE TRIGGER fail_o3 BEFORE UPDATE ON "+in.Orders().String()+" FOR EACH ROW EXECUTE FUNCTION "+in.Schema+".fail_o3()")
	ids := claimedPayments(t, db, in, 5)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		var outcome string
		if err := tx.QueryRow(ctx, in.ApplyEventCall(time.Hour, 2*time.Second), id, 1, allowed).Scan(new(int64), new(string), &outcome, new(string), new(int)); err != nil {
			t.Fatalf("row %d: the call itself failed, so the transaction is lost: %v", id, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		var state, outcome, lastError string
		var retryIn time.Duration
		db.QueryRow(ctx, "SELECT state, coalesce(outcome, ''), coalesce(last_error, ''), coalesce(claimed_until - now(), '0') FROM "+in.Inbox().String()+" WHERE id = $1", id).
			Scan(&state, &outcome, &lastError, &retryIn)
		order := fmt.Sprintf("o%d", i+1)
		var orderState string
		db.QueryRow(ctx, "SELECT state FROM "+in.Orders().String()+" WHERE id = $1", order).Scan(&orderState)
		if order == "o3" {
			if state != "processing" || outcome != "error" || !strings.Contains(lastError, "order o3 is frozen") || orderState != "pending" {
				t.Errorf("the failing row: %s/%s %q, order %s; want processing/error with the trigger's message, order pending", state, outcome, lastError, orderState)
			}
			if retryIn < time.Second || retryIn > 2*time.Second {
				t.Errorf("the failing row is retried in %s, want the 2 s backoff", retryIn)
			}
			continue
		}
		if state != "processed" || outcome != "applied" || orderState != "confirmed" {
			t.Errorf("%s beside the failing row: %s/%s, order %s; want processed/applied, confirmed", order, state, outcome, orderState)
		}
	}
	var effects int
	db.QueryRow(ctx, "SELECT count(*) FROM "+in.Effects().String()).Scan(&effects)
	if effects != 4 {
		t.Errorf("%d effects, want 4", effects)
	}
	var stuck map[string]any
	rows, _ := db.Query(ctx, in.StuckWork())
	if recs, err := pgx.CollectRows(rows, pgx.RowToMap); err == nil && len(recs) == 1 {
		stuck = recs[0]
	}
	if fmt.Sprint(stuck["inbox_retrying"]) != "1" || !strings.Contains(fmt.Sprint(stuck["last_errors"]), "order o3 is frozen") {
		t.Errorf("stuck work %v: want 1 retrying, with its message", stuck)
	}
}

// claimedPayments creates orders o1 to on, one payment_intent.succeeded
// receipt for each (evt:1 to evt:n), and claims each at attempt 1. It
// returns the receipts' ids, in order.
func claimedPayments(t *testing.T, db *pgxpool.Pool, in pgsql.Inbox, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	exec(t, db, "INSERT INTO "+in.Orders().String()+" (id, amount, currency) SELECT 'o' || i, 100, 'eur' FROM generate_series(1, $1::integer) i", n)
	ids := make([]int64, n)
	for i := range ids {
		body := event("payment_intent.succeeded", pi(fmt.Sprintf("pi_%d", i+1), fmt.Sprintf("o%d", i+1), 100))
		if err := db.QueryRow(ctx, "INSERT INTO "+in.Inbox().String()+" (account, event_id, event_type, body) VALUES ('default', $1, 'payment_intent.succeeded', convert_to($2, 'UTF8')) RETURNING id",
			fmt.Sprintf("evt:%d", i+1), body).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(ctx, in.ClaimEvent(time.Minute, 5), ids[i]).Scan(new(int64), new(string), new(int)); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// A batch is decided by one CALL, and each of its rows commits on its own
// before the next is decided: while the fourth row waits on a lock, the
// first three are visible to another connection, the failing third with its
// error; the batch's other rows are applied.
func TestApplyBatchCommitsEachRow(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	exec(t, db, "CREATE FUNCTION "+in.Schema+`.hold_o3_o4() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id = 'o3' AND NEW.state = 'confirmed' THEN RAISE EXCEPTION 'order o3 is frozen'; END IF;
  IF NEW.id = 'o4' AND NEW.state = 'confirmed' THEN PERFORM pg_advisory_xact_lock(hashtext(TG_TABLE_SCHEMA)); END IF;
  RETURN NEW;
END $$`)
	exec(t, db, "CREATE TRIGGER hold_o3_o4 BEFORE UPDATE ON "+in.Orders().String()+" FOR EACH ROW EXECUTE FUNCTION "+in.Schema+".hold_o3_o4()")
	var ids []string
	for _, id := range claimedPayments(t, db, in, 5) {
		ids = append(ids, fmt.Sprint(id))
	}
	holder, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", in.Schema); err != nil {
		t.Fatal(err)
	}
	type result struct {
		tasks int
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = db.QueryRow(ctx, in.ApplyBatchCall(time.Hour, 2*time.Second), strings.Join(ids, ","), "1,1,1,1,1", allowed).Scan(&r.tasks)
		done <- r
	}()
	stateOf := func(order string) (state, outcome, lastError string) {
		db.QueryRow(ctx, "SELECT e.state, coalesce(e.outcome, ''), coalesce(e.last_error, '') FROM "+in.Inbox().String()+" e WHERE e.event_id = $1", "evt:"+order[1:]).
			Scan(&state, &outcome, &lastError)
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, _, e := stateOf("o3"); !strings.Contains(e, "order o3 is frozen"); _, _, e = stateOf("o3") {
		if time.Now().After(deadline) {
			t.Fatal("the third row's error is not committed while the fourth waits: the batch is one transaction")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, order := range []string{"o1", "o2"} {
		if state, outcome, _ := stateOf(order); state != "processed" || outcome != "applied" {
			t.Errorf("%s before the waiting row: %s/%s, want processed/applied, committed", order, state, outcome)
		}
	}
	if state, _, _ := stateOf("o4"); state != "processing" {
		t.Errorf("the waiting row is %s before its lock is released", state)
	}
	holder.Exec(ctx, "SELECT pg_advisory_unlock(hashtext($1))", in.Schema)
	r := <-done
	if r.err != nil {
		t.Fatalf("the call: %v", r.err)
	}
	for _, order := range []string{"o1", "o2", "o4", "o5"} {
		if state, outcome, _ := stateOf(order); state != "processed" || outcome != "applied" {
			t.Errorf("%s: %s/%s, want processed/applied", order, state, outcome)
		}
	}
	if state, outcome, _ := stateOf("o3"); state != "processing" || outcome != "error" {
		t.Errorf("the failing row: %s/%s, want processing/error (retried)", state, outcome)
	}
	var tasks int
	db.QueryRow(ctx, "SELECT count(*) FROM "+in.Outbox().String()).Scan(&tasks)
	if r.tasks != tasks || tasks == 0 {
		t.Errorf("the call counts %d tasks, the outbox holds %d", r.tasks, tasks)
	}
	if err := db.QueryRow(ctx, in.ApplyBatchCall(time.Hour, 2*time.Second), ids[0], "1,1", allowed).Scan(new(int)); err == nil ||
		!strings.Contains(err.Error(), "1 ids and 2 attempts") {
		t.Errorf("ids and attempts that do not pair: %v, want the call refused", err)
	}
	var none int
	if err := db.QueryRow(ctx, in.ApplyBatchCall(time.Hour, 2*time.Second), "", "", allowed).Scan(&none); err != nil || none != 0 {
		t.Errorf("an empty batch: %d tasks, %v", none, err)
	}
}

// The recoverer's batch is fair: accounts take turns, and within an account
// the row due longest goes first, so a flood of due rows in one account
// leaves room for the others.
func TestDueEventsTakeTurns(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	exec(t, db, "INSERT INTO "+in.Inbox().String()+` (account, event_id, body, state, next_attempt_at)
		SELECT 'busy', 'evt:busy-' || i, '', 'deferred', now() - interval '1 hour' + i * interval '1 second' FROM generate_series(1, 300) i`)
	exec(t, db, "INSERT INTO "+in.Inbox().String()+` (account, event_id, body, state, next_attempt_at)
		SELECT 'quiet', 'evt:quiet-' || i, '', 'deferred', now() - interval '1 minute' + i * interval '1 second' FROM generate_series(1, 3) i`)
	rows, err := db.Query(ctx, "SELECT i.event_id FROM ("+in.DueEvents(time.Minute, 100)+") d JOIN "+in.Inbox().String()+" i USING (id)")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	var quiet, busy []string
	for _, e := range got {
		if strings.HasPrefix(e, "evt:quiet") {
			quiet = append(quiet, e)
		} else {
			busy = append(busy, e)
		}
	}
	if len(got) != 100 || len(quiet) != 3 {
		t.Fatalf("a batch of %d with %d of the quiet account's 3 due rows, want 100 with all 3", len(got), len(quiet))
	}
	for i, e := range busy {
		if want := fmt.Sprintf("evt:busy-%d", i+1); e != want {
			t.Fatalf("the busy account's rows out of turn: row %d is %s, want %s (oldest due first)", i, e, want)
		}
	}
}

// A confirmation makes due the rows that wait for its order, not every
// deferred row of the account.
func TestConfirmationWakesOnlyItsWaiters(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	exec(t, db, "INSERT INTO "+in.Orders().String()+" (id, amount, currency) VALUES ('a', 100, 'eur'), ('b', 100, 'eur')")
	insert := func(eventID, typ, body string) int64 {
		var id int64
		db.QueryRow(ctx, "INSERT INTO "+in.Inbox().String()+" (account, event_id, event_type, body) VALUES ('default', $1, $2, convert_to($3, 'UTF8')) RETURNING id",
			eventID, typ, body).Scan(&id)
		return id
	}
	refundA := insert("evt:ra", "charge.refunded", event("charge.refunded", refund("ch_a", "pi_a", "a", 100, true)))
	refundB := insert("evt:rb", "charge.refunded", event("charge.refunded", refund("ch_b", "pi_b", "b", 100, true)))
	for _, id := range []int64{refundA, refundB} {
		if got := claimAndApply(t, db, in, id); got != "order_not_confirmed" {
			t.Fatalf("refund first: %s", got)
		}
	}
	claimAndApply(t, db, in, insert("evt:pa", "payment_intent.succeeded", event("payment_intent.succeeded", pi("pi_a", "a", 100))))
	due := func(id int64) bool {
		var d bool
		db.QueryRow(ctx, "SELECT next_attempt_at <= now() FROM "+in.Inbox().String()+" WHERE id = $1", id).Scan(&d)
		return d
	}
	if !due(refundA) || due(refundB) {
		t.Errorf("after order a's confirmation: refund of a due %v, refund of b due %v; want true, false", due(refundA), due(refundB))
	}
}

// Receive saves once per (account, event id); a duplicate returns the stored
// row and never resets its state.
func TestReceive(t *testing.T) {
	in, db := newInbox(t)
	ctx := context.Background()
	receive := func(account string) (id int64, state string, isNew bool) {
		if err := db.QueryRow(ctx, in.Receive(), account, "evt:r", "t", "eyJpZCI6InIifQ==", `{"content-type":"application/json"}`).Scan(&id, &state, &isNew); err != nil {
			t.Fatal(err)
		}
		return
	}
	id, state, isNew := receive("default")
	if !isNew || state != "received" {
		t.Fatalf("first receipt: %s new=%v", state, isNew)
	}
	exec(t, db, "UPDATE "+in.Inbox().String()+" SET state = 'processed' WHERE id = $1", id)
	id2, state, isNew := receive("default")
	if isNew || id2 != id || state != "processed" {
		t.Errorf("duplicate: id %d state %s new=%v, want id %d processed, not new", id2, state, isNew, id)
	}
	if _, _, isNew := receive("acct_other"); !isNew {
		t.Error("the same event id on another account is a duplicate; want a new receipt")
	}
	var body string
	db.QueryRow(ctx, "SELECT convert_from(body, 'UTF8') FROM "+in.Inbox().String()+" WHERE id = $1", id).Scan(&body)
	if body != `{"id":"r"}` {
		t.Errorf("stored body %q", body)
	}
	if ddl, _ := in.DDL(presetDecision(t, rules.DefaultPreset)); !strings.Contains(ddl, "UNIQUE (account, event_id)") {
		t.Error("the receipt key is not unique in the schema")
	}
}

// The docs' manual retry (docs/inbox.md, "The outbox and its contract") is
// the statement the tests run.
func TestDocsShowTheRetryStatement(t *testing.T) {
	page, err := os.ReadFile("../../docs/inbox.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), pgsql.Inbox{}.RetryTask()) {
		t.Errorf("docs/inbox.md does not show the manual retry as it is:\n%s", pgsql.Inbox{}.RetryTask())
	}
}
