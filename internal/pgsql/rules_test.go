package pgsql_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/jackc/pgx/v5/pgxpool"
)

// inboxEvents inserts and decides events in one schema.
type inboxEvents struct {
	t     *testing.T
	in    pgsql.Inbox
	db    *pgxpool.Pool
	n     int
	allow string
}

// apply saves body as a new receipt of type typ and runs the decision on
// it; it returns the row's id, state and outcome.
func (e *inboxEvents) apply(typ, body string) (int64, string, string) {
	e.t.Helper()
	e.n++
	var id int64
	if err := e.db.QueryRow(context.Background(), "INSERT INTO "+e.in.Inbox().String()+" (account, event_id, event_type, body) VALUES ('default', $1, $2, convert_to($3, 'UTF8')) RETURNING id",
		fmt.Sprintf("evt:r%d", e.n), typ, body).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	state, outcome := e.decide(id)
	return id, state, outcome
}

// decide claims row id (due now) and runs the decision on it.
func (e *inboxEvents) decide(id int64) (string, string) {
	e.t.Helper()
	exec(e.t, e.db, "UPDATE "+e.in.Inbox().String()+" SET next_attempt_at = now() WHERE id = $1 AND state = 'deferred'", id)
	var attempts int
	if err := e.db.QueryRow(context.Background(), e.in.ClaimEvent(60e9, 5), id).Scan(new(int64), new(string), &attempts); err != nil {
		e.t.Fatalf("claim %d: %v", id, err)
	}
	var state, outcome string
	if err := e.db.QueryRow(context.Background(), e.in.ApplyEventCall(24*3600e9, 30e9), id, attempts, e.allow).Scan(new(int64), &state, &outcome, new(string), new(int)); err != nil {
		e.t.Fatalf("apply %d: %v", id, err)
	}
	return state, outcome
}

func (e *inboxEvents) strings(sql string, args ...any) []string {
	e.t.Helper()
	return strings_(e.t, e.db, sql)
}

func stripeBody(id, typ string, created int, object map[string]any) string {
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "created": created, "data": map[string]any{"object": object}})
	return string(b)
}

// Partial refunds are effects of their own, keyed by the charge and its
// cumulative amount_refunded: two partial refunds of one order are two
// effects and two tasks, a repeat of either is none, and the full refund
// after them refunds the order.
func TestPartialRefunds(t *testing.T) {
	in, db := newInbox(t)
	e := &inboxEvents{t: t, in: in, db: db, allow: allowed}
	exec(t, db, "INSERT INTO "+in.Orders().String()+" (id, state, amount, currency, payment_intent) VALUES ('o', 'confirmed', 100, 'eur', 'pi_1')")
	steps := []struct {
		name             string
		refunded         int
		full             bool
		state, outcome   string
		effects, tasks   int
		orderStateAfters string
	}{
		{"first partial refund (30)", 30, false, "processed", "applied", 1, 1, "confirmed"},
		{"second partial refund (cumulative 70)", 70, false, "processed", "applied", 2, 2, "confirmed"},
		{"a repeat of the first, by another event", 30, false, "processed", "effect_exists", 2, 2, "confirmed"},
		{"a repeat of the second", 70, false, "processed", "effect_exists", 2, 2, "confirmed"},
		{"the rest: refunded in full", 100, true, "processed", "applied", 3, 3, "refunded"},
		{"a partial refund after the full one", 80, false, "rejected", "refund_mismatch", 3, 3, "refunded"},
	}
	for _, s := range steps {
		_, state, outcome := e.apply("charge.refunded", event("charge.refunded", refund("ch_1", "pi_1", "o", s.refunded, s.full)))
		effects := e.strings("SELECT effect_key FROM " + in.Effects().String() + " ORDER BY created_at, effect_key")
		tasks := e.strings("SELECT operation_key FROM " + in.Outbox().String() + " ORDER BY id")
		orderState := e.strings("SELECT state FROM " + in.Orders().String())
		if state != s.state || outcome != s.outcome || len(effects) != s.effects || len(tasks) != s.tasks || orderState[0] != s.orderStateAfters {
			t.Errorf("%s: %s/%s, effects %v, tasks %v, order %v; want %s/%s, %d effects, %d tasks, order %s",
				s.name, state, outcome, effects, tasks, orderState, s.state, s.outcome, s.effects, s.tasks, s.orderStateAfters)
		}
	}
	want := "partial_refund:o:ch_1:30 partial_refund:o:ch_1:70 refund_order:o:ch_1"
	if got := strings.Join(e.strings("SELECT effect_key FROM "+in.Effects().String()+" ORDER BY effect_key"), " "); got != want {
		t.Errorf("effects %s, want %s", got, want)
	}
}

func subscription(id, customer, status string, periodEnd int) map[string]any {
	return map[string]any{"id": id, "object": "subscription", "customer": customer, "status": status,
		"items": map[string]any{"data": []any{map[string]any{"price": map[string]any{"id": "price_pro"}, "quantity": 2, "current_period_end": periodEnd}}}}
}

func invoice(id, sub, customer string, amount int, newShape bool) map[string]any {
	inv := map[string]any{"id": id, "object": "invoice", "customer": customer, "amount_paid": amount, "currency": "eur",
		"lines": map[string]any{"data": []any{map[string]any{"period": map[string]any{"end": 1760000000}}}}}
	if newShape {
		inv["parent"] = map[string]any{"subscription_details": map[string]any{"subscription": sub}}
	} else {
		inv["subscription"] = sub
	}
	return inv
}

// The stripe-subscriptions preset: an account opened, changed, paid and
// closed; events out of order wait for the subscription; an older update
// is ignored; the cancellation and the deletion are one effect.
func TestSubscriptionsPreset(t *testing.T) {
	in, db := newInboxFor(t, presetDecision(t, "stripe-subscriptions"))
	e := &inboxEvents{t: t, in: in, db: db, allow: "customer.subscription.created,customer.subscription.updated,customer.subscription.deleted,invoice.paid"}
	row := func() string {
		r := e.strings("SELECT concat_ws(' ', state, customer, status, price, quantity, current_period_end, last_event_at, paid_through, latest_invoice) FROM " +
			in.Subscriptions().String() + " WHERE id = 'sub_1'")
		if len(r) == 0 {
			return "absent"
		}
		return r[0]
	}
	updatedEarly, state, outcome := e.apply("customer.subscription.updated", stripeBody("evt_u1", "customer.subscription.updated", 1700000100, subscription("sub_1", "cus_1", "active", 1700500000)))
	if state != "deferred" || outcome != "subscription_unknown" {
		t.Fatalf("an update before the creation: %s/%s, want deferred/subscription_unknown", state, outcome)
	}
	paidEarly, state, outcome := e.apply("invoice.paid", stripeBody("evt_i1", "invoice.paid", 1700000050, invoice("in_1", "sub_1", "cus_1", 2000, true)))
	if state != "deferred" || outcome != "subscription_unknown" {
		t.Fatalf("an invoice before the creation: %s/%s, want deferred/subscription_unknown", state, outcome)
	}
	steps := []struct {
		name, typ, body string
		id              int64 // a deferred row to retry instead
		state, outcome  string
		row             string
	}{
		{name: "created", typ: "customer.subscription.created", body: stripeBody("evt_c", "customer.subscription.created", 1700000000, subscription("sub_1", "cus_1", "incomplete", 1700400000)),
			state: "processed", outcome: "applied", row: "open cus_1 incomplete price_pro 2 1700400000 1700000000"},
		{name: "the early update, retried", id: updatedEarly, state: "processed", outcome: "applied", row: "open cus_1 active price_pro 2 1700500000 1700000100"},
		{name: "the early invoice, retried", id: paidEarly, state: "processed", outcome: "applied", row: "open cus_1 active price_pro 2 1700500000 1700000100 1760000000 in_1"},
		{name: "an older update, late", typ: "customer.subscription.updated", body: stripeBody("evt_u0", "customer.subscription.updated", 1700000090, subscription("sub_1", "cus_1", "past_due", 1700500000)),
			state: "ignored", outcome: "stale_update", row: "open cus_1 active price_pro 2 1700500000 1700000100 1760000000 in_1"},
		{name: "the invoice again, in the old shape", typ: "invoice.paid", body: stripeBody("evt_i1b", "invoice.paid", 1700000060, invoice("in_1", "sub_1", "cus_1", 2000, false)),
			state: "processed", outcome: "effect_exists"},
		{name: "an invoice of another customer", typ: "invoice.paid", body: stripeBody("evt_i2", "invoice.paid", 1700000070, invoice("in_2", "sub_1", "cus_2", 2000, true)),
			state: "rejected", outcome: "customer_mismatch"},
		{name: "a one-off invoice", typ: "invoice.paid", body: stripeBody("evt_i3", "invoice.paid", 1700000070, map[string]any{"id": "in_3", "customer": "cus_1", "amount_paid": 5, "currency": "eur"}),
			state: "ignored", outcome: "not_a_subscription_invoice"},
		{name: "created again", typ: "customer.subscription.created", body: stripeBody("evt_c2", "customer.subscription.created", 1700000000, subscription("sub_1", "cus_1", "active", 1700400000)),
			state: "processed", outcome: "effect_exists"},
		{name: "canceled by an update", typ: "customer.subscription.updated", body: stripeBody("evt_u2", "customer.subscription.updated", 1700000200, subscription("sub_1", "cus_1", "canceled", 1700500000)),
			state: "processed", outcome: "applied", row: "closed cus_1 canceled price_pro 2 1700500000 1700000200 1760000000 in_1"},
		{name: "then deleted: the same effect", typ: "customer.subscription.deleted", body: stripeBody("evt_d", "customer.subscription.deleted", 1700000201, subscription("sub_1", "cus_1", "canceled", 1700500000)),
			state: "processed", outcome: "effect_exists"},
		{name: "an update after the close", typ: "customer.subscription.updated", body: stripeBody("evt_u3", "customer.subscription.updated", 1700000300, subscription("sub_1", "cus_1", "active", 1700500000)),
			state: "rejected", outcome: "account_closed"},
		{name: "a subscription without a customer", typ: "customer.subscription.created", body: stripeBody("evt_c3", "customer.subscription.created", 1700000000, subscription("sub_2", "", "active", 1)),
			state: "rejected", outcome: "missing_customer"},
	}
	for _, s := range steps {
		var state, outcome string
		if s.id != 0 {
			state, outcome = e.decide(s.id)
		} else {
			_, state, outcome = e.apply(s.typ, s.body)
		}
		if state != s.state || outcome != s.outcome {
			t.Errorf("%s: %s/%s, want %s/%s", s.name, state, outcome, s.state, s.outcome)
		}
		if s.row != "" && row() != s.row {
			t.Errorf("%s: subscription %q, want %q", s.name, row(), s.row)
		}
	}
	wantEffects := "change_account:sub_1:evt_u1 close_account:sub_1 open_account:sub_1 pay_account:sub_1:in_1"
	if got := strings.Join(e.strings("SELECT effect_key FROM "+in.Effects().String()+" ORDER BY effect_key"), " "); got != wantEffects {
		t.Errorf("effects %s, want %s", got, wantEffects)
	}
	wantTasks := "account_changed:sub_1:evt_u1 account_closed:sub_1 account_opened:sub_1 invoice_receipt:in_1"
	if got := strings.Join(e.strings("SELECT operation_key FROM "+in.Outbox().String()+" ORDER BY operation_key"), " "); got != wantTasks {
		t.Errorf("tasks %s, want %s", got, wantTasks)
	}
	payload := e.strings("SELECT payload::text FROM " + in.Outbox().String() + " WHERE operation_key = 'invoice_receipt:in_1'")
	if len(payload) != 1 || payload[0] != `{"kind": "invoice_receipt", "invoice": "in_1", "currency": "eur", "customer": "cus_1", "amount_paid": 2000, "subscription": "sub_1"}` {
		t.Errorf("the receipt's payload: %v", payload)
	}
}

// Event values are data: SQL, quotes, backslashes, a dollar quote, control
// characters and 100 kB strings in an event's fields reach the rows and the
// keys exactly as sent, or are rejected by a rule, and never change the
// statements that read them.
func TestEventValuesAreData(t *testing.T) {
	in, db := newInbox(t)
	e := &inboxEvents{t: t, in: in, db: db, allow: allowed}
	big := strings.Repeat("x", 100<<10)
	hostile := []string{
		"o'; DROP TABLE " + in.Orders().String() + "; --",
		`o\'); SELECT pg_sleep(10); --`,
		"o$fn$; DROP SCHEMA " + in.Schema + " CASCADE; $fn$",
		"o\u0001\u001f\t\r\n\u007f\u0085",
		`o" || '{"a":1}' || "`,
		"o ' \" \\ % _ * ? { } [ ] ; -- /* */",
	}
	for i, id := range hostile {
		t.Run(fmt.Sprintf("order id %q", id), func(t *testing.T) {
			piID := "pi_" + id
			exec(t, db, "INSERT INTO "+in.Orders().String()+" (id, amount, currency) VALUES ($1, 100, 'eur')", id)
			_, state, outcome := e.apply("payment_intent.succeeded", event("payment_intent.succeeded", pi(piID, id, 100)))
			if state != "processed" || outcome != "applied" {
				t.Fatalf("%s/%s, want processed/applied", state, outcome)
			}
			var gotPI, effect, task string
			db.QueryRow(context.Background(), "SELECT payment_intent FROM "+in.Orders().String()+" WHERE id = $1", id).Scan(&gotPI)
			db.QueryRow(context.Background(), "SELECT effect_key FROM "+in.Effects().String()+" WHERE effect_key = $1", "confirm_order:"+id+":"+piID).Scan(&effect)
			db.QueryRow(context.Background(), "SELECT payload ->> 'order_id' FROM "+in.Outbox().String()+" WHERE operation_key = $1", "order_confirmation:"+id).Scan(&task)
			if gotPI != piID || effect == "" || task != id {
				t.Errorf("stored payment intent %q, effect %q, task's order %q; want them exactly as sent (case %d)", gotPI, effect, task, i)
			}
		})
	}
	t.Run("a 100 kB field the rules do not read", func(t *testing.T) {
		exec(t, db, "INSERT INTO "+in.Orders().String()+" (id, amount, currency) VALUES ('big', 100, 'eur')")
		obj := pi("pi_big", "big", 100)
		obj["description"] = big
		if _, state, outcome := e.apply("payment_intent.succeeded", event("payment_intent.succeeded", obj)); state != "processed" || outcome != "applied" {
			t.Errorf("%s/%s, want processed/applied", state, outcome)
		}
	})
	t.Run("a 100 kB payment intent: the key would be too long", func(t *testing.T) {
		exec(t, db, "INSERT INTO "+in.Orders().String()+" (id, amount, currency) VALUES ('big2', 100, 'eur')")
		_, state, outcome := e.apply("payment_intent.succeeded", event("payment_intent.succeeded", pi(big, "big2", 100)))
		if state != "rejected" || outcome != "key_too_long" {
			t.Errorf("%s/%s, want rejected/key_too_long", state, outcome)
		}
	})
	t.Run("a 100 kB order id", func(t *testing.T) {
		_, state, outcome := e.apply("payment_intent.succeeded", event("payment_intent.succeeded", pi("pi_x", big, 100)))
		if state != "rejected" || outcome != "key_too_long" {
			t.Errorf("%s/%s, want rejected/key_too_long", state, outcome)
		}
	})
	var tables int
	db.QueryRow(context.Background(), "SELECT count(*) FROM pg_tables WHERE schemaname = $1", in.Schema).Scan(&tables)
	if tables != 5 { // inbox_events, effects, orders, outbox_tasks, inbox_drainer
		t.Errorf("%d tables left in %s, want 5", tables, in.Schema)
	}
}

// Constants of a rules file reach the function as literals: a condition's
// value holding quotes, a backslash and a dollar quote compiles, and
// matches exactly that text in an event.
func TestRuleConstantsAreLiterals(t *testing.T) {
	tricky := `pa'id\$fn$ -- ;`
	src, err := rules.PresetFile(rules.DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(tricky)
	text := strings.Replace(string(src), "{field: payment_status, equals: paid, ignore: not_paid}", "{field: payment_status, equals: "+string(quoted)+", ignore: not_paid}", 1)
	rs, err := rules.Parse("tricky.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	rs.Domain = "orders"
	in, db := newInboxFor(t, rs.Decision())
	e := &inboxEvents{t: t, in: in, db: db, allow: allowed}
	exec(t, db, "INSERT INTO "+in.Orders().String()+" (id, amount, currency) VALUES ('o', 100, 'eur'), ('p', 100, 'eur')")
	checkout := func(order, status string) string {
		return event("checkout.session.completed", map[string]any{"payment_intent": "pi_" + order, "amount_total": 100, "currency": "eur",
			"payment_status": status, "metadata": map[string]any{"order_id": order}})
	}
	if _, state, outcome := e.apply("checkout.session.completed", checkout("o", "paid")); outcome != "not_paid" {
		t.Errorf("status paid against the rule's %q: %s/%s, want ignored/not_paid", tricky, state, outcome)
	}
	if _, state, outcome := e.apply("checkout.session.completed", checkout("p", tricky)); outcome != "applied" {
		t.Errorf("status %q: %s/%s, want applied", tricky, state, outcome)
	}
}
