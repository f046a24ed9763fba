package pgsql_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/jackc/pgx/v5/pgxpool"
)

// handwrittenSQL is pgsql/inbox.sql as it was before the decision was
// compiled from rules: its idemhook_apply_event is the hand-written
// function for the example domain, kept verbatim, only as the reference of
// the differential test.
//
//go:embed testdata/handwritten_inbox.sql
var handwrittenSQL string

// newHandwritten creates the fixture's schema (its tables and its
// hand-written function) in a fresh PostgreSQL schema.
func newHandwritten(t *testing.T) pgsql.Inbox {
	t.Helper()
	in := pgsql.Inbox{Schema: fmt.Sprintf("hw%d", schemaSeq.Add(1))}
	tpl := template.Must(template.New("handwritten").Parse(handwrittenSQL))
	var b strings.Builder
	if err := tpl.Execute(&b, map[string]any{
		"Schema": in.Schema, "Inbox": in.Inbox(), "Effects": in.Effects(), "Orders": in.Orders(), "Outbox": in.Outbox(),
		"ApplyEvent": in.ApplyEvent(), "OutboxResult": in.OutboxResult(), "OutboxWait": in.OutboxWait(), "Deliveries": in.Deliveries(),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Business.Exec(context.Background(), b.String()); err != nil {
		t.Fatalf("the hand-written fixture: %v", err)
	}
	t.Cleanup(func() { pg.Business.Exec(context.Background(), "DROP SCHEMA "+in.Schema+" CASCADE") })
	return in
}

// A scenario is an order (or none) and the events that reach the worker
// for it, in order; concurrent pairs are applied in two transactions at
// once. After the last event, every deferred row is retried once (a
// reordering resolves).
type scenario struct {
	name   string
	order  *order
	events []corpusEvent
}

type order struct {
	id, currency string
	amount       int
}

type corpusEvent struct {
	typ  string
	body string
	// concurrent: applied at the same time as the next event.
	concurrent bool
}

// corpus generates Stripe-shaped scenarios from a fixed seed: valid
// payments, checkouts and refunds, each field missing or mistyped in turn,
// wrong amounts and currencies, unpaid checkouts, unknown orders,
// reorderings (the refund first), repeats (another event proposing the
// same effect), concurrent pairs, and types outside the rules.
func corpus() []scenario {
	rng := rand.New(rand.NewPCG(20261130, 1))
	var out []scenario
	n := 0
	next := func() string { n++; return fmt.Sprintf("d%03d", n) }
	payment := func(o, piID string, amount any, currency string) map[string]any {
		return map[string]any{"id": piID, "object": "payment_intent", "amount": amount, "amount_received": amount, "currency": currency,
			"status": "succeeded", "metadata": map[string]any{"order_id": o}}
	}
	checkout := func(o, piID string, amount any, currency, status string) map[string]any {
		return map[string]any{"id": "cs_" + piID, "object": "checkout.session", "payment_intent": piID, "amount_total": amount,
			"currency": currency, "payment_status": status, "metadata": map[string]any{"order_id": o}}
	}
	charge := func(o, ch, piID string, refunded any, full any, currency string) map[string]any {
		return map[string]any{"id": ch, "object": "charge", "payment_intent": piID, "amount": 1000, "amount_refunded": refunded,
			"refunded": full, "currency": currency, "metadata": map[string]any{"order_id": o}}
	}
	ev := func(typ string, object map[string]any) corpusEvent {
		b, _ := json.Marshal(map[string]any{"id": "evt_" + next(), "object": "event", "type": typ, "data": map[string]any{"object": object}})
		return corpusEvent{typ: typ, body: string(b)}
	}
	raw := func(typ, body string) corpusEvent { return corpusEvent{typ: typ, body: body} }
	without := func(obj map[string]any, path ...string) map[string]any {
		c := map[string]any{}
		b, _ := json.Marshal(obj)
		json.Unmarshal(b, &c)
		m := c
		for _, p := range path[:len(path)-1] {
			m = m[p].(map[string]any)
		}
		delete(m, path[len(path)-1])
		return c
	}
	set := func(obj map[string]any, key string, v any) map[string]any {
		c := without(obj, "__none__")
		c[key] = v
		return c
	}
	add := func(name string, o *order, events ...corpusEvent) {
		out = append(out, scenario{name: name, order: o, events: events})
	}
	for i := range 30 {
		id := next()
		amount := 100 + rng.IntN(9900)
		cur := []string{"eur", "usd", "gbp"}[rng.IntN(3)]
		o := &order{id: id, currency: cur, amount: amount}
		piID, ch := "pi_"+id, "ch_"+id
		pay := payment(id, piID, amount, cur)
		co := checkout(id, piID, amount, strings.ToUpper(cur), "paid")
		full := charge(id, ch, piID, amount, true, cur)
		switch i % 10 {
		case 0: // payment, then its checkout (the same effect), then a full refund
			add("confirm, checkout, refund", o, ev("payment_intent.succeeded", pay), ev("checkout.session.completed", co), ev("charge.refunded", full))
		case 1: // the refund first: deferred, then applied after the payment
			add("refund before payment", o, ev("charge.refunded", full), ev("payment_intent.succeeded", pay))
		case 2: // repeats of each
			add("repeats", o, ev("payment_intent.succeeded", pay), ev("payment_intent.succeeded", pay), ev("charge.refunded", full), ev("charge.refunded", full))
		case 3: // two events proposing one effect, at the same time
			p, c := ev("payment_intent.succeeded", pay), ev("checkout.session.completed", co)
			p.concurrent = true
			add("concurrent proposals", o, p, c)
		case 4: // a second payment for a confirmed order
			add("second payment", o, ev("payment_intent.succeeded", pay), ev("payment_intent.succeeded", payment(id, piID+"b", amount, cur)))
		case 5: // the wrong amount, then the right one
			add("wrong then right amount", o, ev("payment_intent.succeeded", payment(id, piID, amount+1, cur)), ev("payment_intent.succeeded", pay))
		case 6: // the wrong currency; an unpaid checkout; then the paid one
			add("currency, unpaid", o, ev("payment_intent.succeeded", payment(id, piID, amount, "jpy")),
				ev("checkout.session.completed", checkout(id, piID, amount, cur, "unpaid")), ev("checkout.session.completed", co))
		case 7: // the order does not exist: every event waits
			add("unknown order", nil, ev("payment_intent.succeeded", payment(id, piID, amount, cur)), ev("charge.refunded", full))
		case 8: // a refund of another payment, and one of the wrong amount
			add("refund mismatches", o, ev("payment_intent.succeeded", pay), ev("charge.refunded", charge(id, ch, "pi_other", amount, true, cur)),
				ev("charge.refunded", charge(id, ch+"x", piID, amount-1, true, cur)))
		case 9: // concurrent refunds of one charge after the payment
			r1, r2 := ev("charge.refunded", full), ev("charge.refunded", full)
			r1.concurrent = true
			add("concurrent refunds", o, ev("payment_intent.succeeded", pay), r1, r2)
		}
	}
	// Each field of each event missing or mistyped, against a pending order.
	type variant struct {
		typ string
		obj map[string]any
	}
	for i := range 3 {
		id := next()
		o := &order{id: id, currency: "eur", amount: 500}
		base := []variant{
			{"payment_intent.succeeded", payment(id, "pi_"+id, 500, "eur")},
			{"checkout.session.completed", checkout(id, "pi_"+id, 500, "eur", "paid")},
			{"charge.refunded", charge(id, "ch_"+id, "pi_"+id, 500, true, "eur")},
		}[i]
		var mutations []map[string]any
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range base.obj {
				if !yield(k) {
					return
				}
			}
		}) {
			mutations = append(mutations, without(base.obj, k))
			for _, v := range []any{"", nil, 0, "500", true, map[string]any{}} {
				mutations = append(mutations, set(base.obj, k, v))
			}
		}
		mutations = append(mutations, without(base.obj, "metadata", "order_id"), set(base.obj, "metadata", "o"),
			set(base.obj, "metadata", map[string]any{"order_id": 7}), set(base.obj, "amount_received", nil))
		for j, m := range mutations {
			// One order per mutation, so that no mutation's effect hides
			// another's decision.
			mid := fmt.Sprintf("%s_%02d", id, j)
			if md, ok := m["metadata"].(map[string]any); ok && md["order_id"] == id {
				md["order_id"] = mid
			}
			mo := &order{id: mid, currency: o.currency, amount: o.amount}
			events := []corpusEvent{ev(base.typ, m)}
			if base.typ == "charge.refunded" {
				events = append([]corpusEvent{ev("payment_intent.succeeded", payment(mid, "pi_"+id, 500, "eur"))}, events...)
			}
			add(fmt.Sprintf("%s mutation %d", base.typ, j), mo, events...)
		}
	}
	// Bodies that are not events, and types the rules do not handle.
	o := &order{id: next(), currency: "eur", amount: 100}
	add("not events", o, raw("payment_intent.succeeded", "not json"), raw("payment_intent.succeeded", `[1,2]`),
		raw("charge.refunded", `{"data":{"object":"x"}}`), raw("checkout.session.completed", `{"data":null}`),
		ev("customer.created", payment(o.id, "pi_x", 100, "eur")), ev("invoice.paid", payment(o.id, "pi_x", 100, "eur")))
	return out
}

// outcome of a scenario in one schema.
type outcome struct {
	Events  []string // event_id state outcome
	Orders  []string
	Effects []string // effect_key ← event_id
	Tasks   []string // operation_key kind payload ← event_id
}

// play runs a scenario through the schema's function.
func play(t *testing.T, db *pgxpool.Pool, in pgsql.Inbox, s scenario) {
	t.Helper()
	ctx := context.Background()
	if s.order != nil {
		exec(t, db, "INSERT INTO "+in.Orders().String()+" (id, amount, currency) VALUES ($1, $2, $3)", s.order.id, s.order.amount, s.order.currency)
	}
	insert := func(i int, e corpusEvent) int64 {
		var id int64
		if err := db.QueryRow(ctx, "INSERT INTO "+in.Inbox().String()+" (account, event_id, event_type, body) VALUES ('default', $1, $2, convert_to($3, 'UTF8')) RETURNING id",
			fmt.Sprintf("evt:%d", i), e.typ, e.body).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	for i := 0; i < len(s.events); i++ {
		e := s.events[i]
		if !e.concurrent || i+1 == len(s.events) {
			claimAndApply(t, db, in, insert(i, e))
			continue
		}
		// The first event's transaction holds the order row while the
		// second's decision starts and waits for it.
		a, b := insert(i, e), insert(i+1, s.events[i+1])
		i++
		claim := func(id int64) int {
			var attempts int
			if err := db.QueryRow(ctx, in.ClaimEvent(time.Minute, 5), id).Scan(new(int64), new(string), &attempts); err != nil {
				t.Fatal(err)
			}
			return attempts
		}
		attA, attB := claim(a), claim(b)
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, in.ApplyEventCall(24*time.Hour, 30*time.Second), a, attA, allowed); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := db.Exec(ctx, in.ApplyEventCall(24*time.Hour, 30*time.Second), b, attB, allowed)
			done <- err
		}()
		waitLocked(t, db, in)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// Retry every deferred row once, oldest first: a reordering resolves.
	rows, err := db.Query(ctx, "SELECT id FROM "+in.Inbox().String()+" WHERE state = 'deferred' ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	deferred, _ := collectIDs(rows)
	for _, id := range deferred {
		exec(t, db, "UPDATE "+in.Inbox().String()+" SET next_attempt_at = now() WHERE id = $1", id)
		claimAndApply(t, db, in, id)
	}
}

// waitLocked waits until a decision of the schema waits for a lock, or a
// second has passed (the second event may not touch the row at all).
func waitLocked(t *testing.T, db *pgxpool.Pool, in pgsql.Inbox) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int
		db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%'||$1||'%'`, in.ApplyEvent().String()).Scan(&n)
		if n > 0 {
			return
		}
	}
}

func collectIDs(rows interface {
	Next() bool
	Scan(...any) error
	Close()
	Err() error
}) ([]int64, error) {
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func strings_(t *testing.T, db *pgxpool.Pool, sql string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// result reads what a scenario left: every inbox row's state and outcome,
// the order rows, the effects and the outbox tasks, each with the event
// that caused it.
func result(t *testing.T, db *pgxpool.Pool, in pgsql.Inbox) outcome {
	return outcome{
		Events: strings_(t, db, "SELECT event_id || ' ' || state || ' ' || coalesce(outcome, '') FROM "+in.Inbox().String()+" ORDER BY id"),
		Orders: strings_(t, db, "SELECT concat_ws(' ', id, account, state, amount, currency, payment_intent) FROM "+in.Orders().String()+" ORDER BY id"),
		Effects: strings_(t, db, "SELECT f.effect_key || ' <- ' || coalesce(i.event_id, '') FROM "+in.Effects().String()+" f LEFT JOIN "+
			in.Inbox().String()+" i ON i.id = f.inbox_id ORDER BY f.effect_key"),
		Tasks: strings_(t, db, "SELECT concat_ws(' ', o.operation_key, o.kind, o.payload::text, '<-', i.event_id) FROM "+in.Outbox().String()+" o LEFT JOIN "+
			in.Inbox().String()+" i ON i.id = o.inbox_id ORDER BY o.operation_key"),
	}
}

// The compiled stripe-orders preset decides as the hand-written function
// did, event for event: a corpus of generated Stripe events (valid,
// missing fields, wrong amounts and currencies, unpaid checkouts, unknown
// orders, reorderings, repeats, concurrent proposals) runs through both
// and leaves the same inbox states and
// outcomes, order rows, effects and outbox tasks. Each function has its
// own fresh schema, emptied before each scenario. The one difference is
// the partial refund, which the fixture rejects and the preset applies;
// those events are compared apart.
func TestCompiledPresetMatchesHandwritten(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	scenarios := corpus()
	events, partial := 0, 0
	rs, err := rules.Preset(rules.DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	d := rs.Decision()
	outcomes, partials := map[string]int{}, map[string]int{}
	evaluated, disagreed := 0, 0
	// One fresh schema for each function, emptied before each scenario.
	hw := newHandwritten(t)
	compiled, db := newInboxFor(t, d)
	for _, s := range scenarios {
		events += len(s.events)
		t.Run(s.name, func(t *testing.T) {
			for _, in := range []pgsql.Inbox{hw, compiled} {
				exec(t, db, "TRUNCATE "+in.Inbox().String()+", "+in.Effects().String()+", "+in.Orders().String()+", "+in.Outbox().String()+" RESTART IDENTITY")
			}
			play(t, db, hw, s)
			play(t, db, compiled, s)
			want, got := result(t, db, hw), result(t, db, compiled)
			// A partial refund: the fixture's row says partial_refund; the
			// preset's applies it (its own effect and task).
			for i, line := range want.Events {
				if strings.HasSuffix(line, " rejected partial_refund") && i < len(got.Events) {
					partial++
					f := strings.Fields(got.Events[i])
					partials[f[1]+"/"+f[len(f)-1]]++
					got.Events[i] = want.Events[i]
				}
			}
			got.Effects = slices.DeleteFunc(got.Effects, func(s string) bool { return strings.HasPrefix(s, "partial_refund:") })
			got.Tasks = slices.DeleteFunc(got.Tasks, func(s string) bool { return strings.HasPrefix(s, "partial_refund_notice:") })
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the compiled preset decides otherwise (-hand-written +compiled):\n%s", diff)
			}
			decided, ok := checkEvaluation(t, db, compiled, rs, s)
			evaluated += decided
			disagreed += len(s.events) - ok
			for _, line := range want.Events {
				f := strings.Fields(line)
				outcomes[f[1]+"/"+f[len(f)-1]]++
			}
		})
	}
	if events < 200 {
		t.Errorf("the corpus has %d events, want at least 200", events)
	}
	t.Logf("%d scenarios, %d events; outcomes of the hand-written function: %v", len(scenarios), events, outcomes)
	t.Logf("%d events the fixture rejects as partial_refund, compared apart; the preset decided them %v", partial, partials)
	t.Logf("rules.Evaluate (the planner's) disagreed with the compiled function on %d of %d events; %d were decided without the row", disagreed, events, evaluated)
}

// checkEvaluation compares rules.Evaluate, which decides without the
// database, with what the compiled function did to each of the scenario's
// events: the same decision when no row is needed, else the same effect
// key when one was recorded. It returns how many were decided without the
// row, and how many agreed.
func checkEvaluation(t *testing.T, db *pgxpool.Pool, in pgsql.Inbox, rs *rules.Rules, s scenario) (decided, agreed int) {
	t.Helper()
	for i, e := range s.events {
		ev := rs.Evaluate(rules.Event{Body: []byte(e.body), Type: e.typ, Account: "default"}, strings.Split(allowed, ","))
		var state, outcome, effect string
		db.QueryRow(context.Background(), "SELECT i.state, coalesce(i.outcome, ''), coalesce(f.effect_key, '') FROM "+in.Inbox().String()+" i LEFT JOIN "+
			in.Effects().String()+" f ON f.inbox_id = i.id WHERE i.event_id = $1", fmt.Sprintf("evt:%d", i)).Scan(&state, &outcome, &effect)
		if ev.State != "" {
			decided++
			if ev.State != state || ev.Outcome != outcome {
				t.Errorf("event %d: Evaluate says %s/%s without the row, the function %s/%s", i, ev.State, ev.Outcome, state, outcome)
				continue
			}
		} else if effect != "" && effect != ev.EffectKey {
			t.Errorf("event %d: Evaluate's effect key %q, the function recorded %q", i, ev.EffectKey, effect)
			continue
		} else if effect == "" && outcome == "applied" {
			t.Errorf("event %d applied without an effect of its own", i)
			continue
		}
		agreed++
	}
	return decided, agreed
}
