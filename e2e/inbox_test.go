package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/jackc/pgx/v5"
)

// The inbox pattern's tests run on one deployment (schema ib, its own
// webhook path and outbox API): every test uses its own orders and events.
var (
	inboxOnce sync.Once
	inbox     inboxDeployment
	inboxErr  string
)

const inboxSecretCredential = "Stripe signing secret (e2e inbox)"

type inboxDeployment struct {
	deployment
	db  pgsql.Inbox
	api *opsAPI
}

func inboxOptions(prefix, outboxURL string) generator.Options {
	return generator.Options{
		Pattern:      generator.PatternInbox,
		WebhookPath:  prefix + "-inbox",
		WorkflowName: "e2e " + prefix,
		InboxOptions: generator.InboxOptions{
			DBSchema:  prefix,
			OutboxURL: outboxURL,
			// The recoverer and the dispatcher run on demand in the tests (a
			// daily schedule never fires during a run).
			SweepEvery:    24 * time.Hour,
			ClaimLease:    5 * time.Second,
			RetryBackoff:  time.Second,
			OutboxBackoff: 200 * time.Millisecond,
			OutboxTimeout: 2 * time.Second,
			OutboxBatch:   2,
		},
		VerifyCredential: inboxSecretCredential,
	}
}

var secretOnce sync.Once

func deployInbox(t *testing.T, opts generator.Options, api *opsAPI) inboxDeployment {
	t.Helper()
	secretOnce.Do(func() { importSecretCredential(t, inboxSecretCredential, stripeSecret) })
	d := deploy(t, opts)
	return inboxDeployment{deployment: d, db: pgsql.Inbox{Schema: opts.DBSchema}, api: api}
}

// sharedInbox is the deployment most inbox tests share.
func sharedInbox(t *testing.T) inboxDeployment {
	t.Helper()
	needStack(t)
	inboxOnce.Do(func() {
		api := newOpsAPI(nil, true) // lives for the whole test binary
		ok := t.Run("deploy shared inbox", func(t *testing.T) {
			inbox = deployInbox(t, inboxOptions("ib", api.url), api)
		})
		if !ok {
			inboxErr = "the shared inbox deployment failed"
		}
	})
	if inboxErr != "" {
		t.Fatal(inboxErr)
	}
	return inbox
}

// stripeEvent is a Stripe event of type typ whose data.object is object.
func stripeEvent(id, typ string, object map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": id, "object": "event", "type": typ, "api_version": "2024-06-20", "livemode": false,
		"data": map[string]any{"object": object},
	})
	return b
}

func paymentSucceeded(evt, pi, order string, amount int) []byte {
	return stripeEvent(evt, "payment_intent.succeeded", map[string]any{
		"id": pi, "object": "payment_intent", "amount": amount, "amount_received": amount, "currency": "eur",
		"status": "succeeded", "metadata": map[string]any{"order_id": order},
	})
}

func checkoutCompleted(evt, cs, pi, order string, amount int) []byte {
	return stripeEvent(evt, "checkout.session.completed", map[string]any{
		"id": cs, "object": "checkout.session", "payment_intent": pi, "amount_total": amount, "currency": "eur",
		"payment_status": "paid", "metadata": map[string]any{"order_id": order},
	})
}

func chargeRefunded(evt, ch, pi, order string, amount int) []byte {
	return stripeEvent(evt, "charge.refunded", map[string]any{
		"id": ch, "object": "charge", "payment_intent": pi, "amount": amount, "amount_refunded": amount, "refunded": true,
		"currency": "eur", "metadata": map[string]any{"order_id": order},
	})
}

// deliver signs body as Stripe does (a new signature every time) and posts
// it; a transport error is status 0, so goroutines may call it.
func (d inboxDeployment) deliver(t *testing.T, body []byte) response {
	r, err := send(d.url, "application/json", body, stripeSigned(stripeSecret, body))
	if err != nil {
		return response{body: err.Error()}
	}
	return r
}

func (d inboxDeployment) newOrder(t *testing.T, id string, amount int) {
	t.Helper()
	execSQL(t, "INSERT INTO "+d.db.Orders().String()+" (id, amount, currency) VALUES ($1, $2, 'eur')", id, amount)
}

type inboxRow struct {
	ID        int64
	State     string
	Outcome   string
	Attempts  int
	LastError string
}

func (d inboxDeployment) row(t *testing.T, eventID string) (inboxRow, bool) {
	t.Helper()
	return d.receipt(t, "evt:"+eventID)
}

// receipt is the inbox row of the receipt key (for a provider's delivery
// id: "shopify:…", "gh:…").
func (d inboxDeployment) receipt(t *testing.T, key string) (inboxRow, bool) {
	t.Helper()
	var r inboxRow
	err := st.Business.QueryRow(context.Background(), "SELECT id, state, coalesce(outcome, ''), attempts, coalesce(last_error, '') FROM "+
		d.db.Inbox().String()+" WHERE event_id = $1", key).Scan(&r.ID, &r.State, &r.Outcome, &r.Attempts, &r.LastError)
	if err != nil {
		return r, false
	}
	return r, true
}

// waitRow waits until the event's inbox row reaches one of states.
func (d inboxDeployment) waitRow(t *testing.T, eventID string, states ...string) inboxRow {
	t.Helper()
	return d.waitReceipt(t, "evt:"+eventID, states...)
}

// waitReceipt waits until the receipt's inbox row reaches one of states.
func (d inboxDeployment) waitReceipt(t *testing.T, key string, states ...string) inboxRow {
	t.Helper()
	const timeout = 30 * time.Second
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		r, found := d.receipt(t, key)
		if found && slices.Contains(states, r.State) {
			return r
		}
		if time.Now().After(deadline) {
			if !found {
				t.Fatalf("timed out after %s waiting for the inbox row of %s to be %v: there is no such row", timeout, key, states)
			}
			t.Fatalf("timed out after %s waiting for the inbox row of %s to be %v: it is %+v", timeout, key, states, r)
		}
	}
}

// waitRows waits until the inbox rows of every event are in state, and says
// which are not when timeout ends.
func (d inboxDeployment) waitRows(t *testing.T, eventIDs []string, state string, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		var behind []string
		for _, id := range eventIDs {
			if r, found := d.row(t, id); !found || r.State != state {
				behind = append(behind, fmt.Sprintf("%s (%+v)", id, r))
			}
		}
		if len(behind) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d of %d inbox rows are not %s: %s", timeout, len(behind), len(eventIDs), state, strings.Join(behind, ", "))
		}
	}
}

func (d inboxDeployment) orderState(t *testing.T, id string) string {
	t.Helper()
	var s string
	if err := st.Business.QueryRow(context.Background(), "SELECT state FROM "+d.db.Orders().String()+" WHERE id = $1", id).Scan(&s); err != nil {
		t.Fatalf("order %s: %v", id, err)
	}
	return s
}

// effects lists the effect keys recorded for order (any kind).
func (d inboxDeployment) effects(t *testing.T, order string) []string {
	t.Helper()
	return d.effectsWith(t, "_order:"+order+":")
}

// effectsWith lists the recorded effect keys that contain token.
func (d inboxDeployment) effectsWith(t *testing.T, token string) []string {
	t.Helper()
	rows, err := st.Business.Query(context.Background(), "SELECT effect_key FROM "+d.db.Effects().String()+
		" WHERE strpos(effect_key, $1) > 0 ORDER BY effect_key", token)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		rows.Scan(&k)
		out = append(out, k)
	}
	return out
}

// waitTaskSent waits until the outbox task is sent.
func (d inboxDeployment) waitTask(t *testing.T, key string, states ...string) string {
	t.Helper()
	var state string
	waitFor(t, 30*time.Second, "outbox task "+key+" to be "+strings.Join(states, "|"), func() bool {
		_ = st.Business.QueryRow(context.Background(), "SELECT state FROM "+d.db.Outbox().String()+" WHERE operation_key = $1", key).Scan(&state)
		for _, s := range states {
			if state == s {
				return true
			}
		}
		return false
	})
	return state
}

func wantReceipt(t *testing.T, what string, r response, status string) {
	t.Helper()
	if r.status != 200 || !strings.Contains(r.body, `"status":"`+status+`"`) {
		t.Errorf("%s: %d %s, want 200 %s", what, r.status, r.body, status)
	}
}

// Test 1 of the design: the same event delivered twice, each time with a
// new signature → one inbox row, processed; the order confirmed once; one
// effect; one call of the confirmation to the external API.
func TestInboxSameEventTwice(t *testing.T) {
	d := sharedInbox(t)
	d.newOrder(t, "o1", 2000)
	ev := paymentSucceeded("evt_ib_1", "pi_ib_1", "o1", 2000)
	wantReceipt(t, "first delivery", d.deliver(t, ev), "received")
	d.waitRow(t, "evt_ib_1", "processed")
	wantReceipt(t, "second delivery", d.deliver(t, ev), "duplicate")

	var rows int
	st.Business.QueryRow(context.Background(), "SELECT count(*) FROM "+d.db.Inbox().String()+" WHERE event_id = 'evt:evt_ib_1'").Scan(&rows)
	if rows != 1 {
		t.Errorf("%d inbox rows for one event, want 1", rows)
	}
	if s := d.orderState(t, "o1"); s != "confirmed" {
		t.Errorf("order o1 is %s, want confirmed", s)
	}
	if e := d.effects(t, "o1"); len(e) != 1 || e[0] != "confirm_order:o1:pi_ib_1" {
		t.Errorf("effects of o1: %v, want [confirm_order:o1:pi_ib_1]", e)
	}
	d.waitTask(t, "order_confirmation:o1", "sent")
	if n := d.api.count("POST", "order_confirmation:o1"); n != 1 {
		t.Errorf("the external API was called %d times for order_confirmation:o1, want 1", n)
	}
}

// Test 2: checkout.session.completed and payment_intent.succeeded for the
// same order and payment → two inbox rows processed, one effect, the order
// confirmed once, one confirmation call.
func TestInboxTwoEventsOneEffect(t *testing.T) {
	d := sharedInbox(t)
	d.newOrder(t, "o2", 4500)
	wantReceipt(t, "checkout.session.completed", d.deliver(t, checkoutCompleted("evt_ib_2a", "cs_ib_2", "pi_ib_2", "o2", 4500)), "received")
	wantReceipt(t, "payment_intent.succeeded", d.deliver(t, paymentSucceeded("evt_ib_2b", "pi_ib_2", "o2", 4500)), "received")
	a := d.waitRow(t, "evt_ib_2a", "processed")
	b := d.waitRow(t, "evt_ib_2b", "processed")
	outcomes := []string{a.Outcome, b.Outcome}
	sort.Strings(outcomes)
	if outcomes[0] != "applied" || outcomes[1] != "effect_exists" {
		t.Errorf("outcomes %v, want one applied and one effect_exists", outcomes)
	}
	if e := d.effects(t, "o2"); len(e) != 1 {
		t.Errorf("effects of o2: %v, want one", e)
	}
	if s := d.orderState(t, "o2"); s != "confirmed" {
		t.Errorf("order o2 is %s, want confirmed", s)
	}
	d.waitTask(t, "order_confirmation:o2", "sent")
	if n := d.api.count("POST", "order_confirmation:o2"); n != 1 {
		t.Errorf("the external API was called %d times for order_confirmation:o2, want 1", n)
	}
}

// Test 3: the refund arrives before the payment → deferred (not failed, not
// lost); the payment confirms the order; the recoverer then applies the
// refund: order refunded, every row traceable to its event.
func TestInboxReversedOrder(t *testing.T) {
	d := sharedInbox(t)
	d.newOrder(t, "o3", 1500)
	wantReceipt(t, "refund first", d.deliver(t, chargeRefunded("evt_ib_3r", "ch_ib_3", "pi_ib_3", "o3", 1500)), "received")
	r := d.waitRow(t, "evt_ib_3r", "deferred")
	if r.Outcome != "order_not_confirmed" || r.LastError == "" {
		t.Errorf("deferred refund: %+v, want outcome order_not_confirmed with the reason", r)
	}
	wantReceipt(t, "payment", d.deliver(t, paymentSucceeded("evt_ib_3p", "pi_ib_3", "o3", 1500)), "received")
	d.waitRow(t, "evt_ib_3p", "processed")
	if s := d.orderState(t, "o3"); s != "confirmed" {
		t.Fatalf("order o3 is %s after its payment, want confirmed", s)
	}
	runWorkflow(t, d.ids[generator.FileRecoverer])
	r = d.waitRow(t, "evt_ib_3r", "processed")
	if r.Outcome != "applied" || r.Attempts != 2 {
		t.Errorf("refund after the recoverer: %+v, want applied on attempt 2", r)
	}
	if s := d.orderState(t, "o3"); s != "refunded" {
		t.Errorf("order o3 is %s, want refunded", s)
	}
	// Every effect and task names the inbox row that caused it.
	var traced int
	st.Business.QueryRow(context.Background(), `SELECT count(*) FROM `+d.db.Effects().String()+` f JOIN `+d.db.Inbox().String()+
		` i ON i.id = f.inbox_id WHERE f.effect_key IN ('confirm_order:o3:pi_ib_3', 'refund_order:o3:ch_ib_3')
		  AND i.event_id IN ('evt:evt_ib_3p', 'evt:evt_ib_3r')`).Scan(&traced)
	if traced != 2 {
		t.Errorf("%d of 2 effects trace back to their inbox rows", traced)
	}
	d.waitTask(t, "refund_notice:o3:ch_ib_3", "sent")
	d.waitTask(t, "order_confirmation:o3", "sent")
	for _, k := range []string{"order_confirmation:o3", "refund_notice:o3:ch_ib_3"} {
		if n := d.api.count("POST", k); n != 1 {
			t.Errorf("%s was called %d times, want 1", k, n)
		}
	}
}

// Test 4: n8n is killed (SIGKILL) after the receipt was acknowledged and
// while the worker is inside the effect transaction. Nothing is half done;
// after the restart the recoverer completes the event: exactly one effect.
func TestInboxWorkerKilled(t *testing.T) {
	d := sharedInbox(t)
	ctx := context.Background()
	d.newOrder(t, "o4", 3000)
	// Hold the order row so the worker's effect transaction waits inside.
	tx, err := st.Business.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+d.db.Orders().String()+" WHERE id = 'o4' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	wantReceipt(t, "delivery", d.deliver(t, paymentSucceeded("evt_ib_4", "pi_ib_4", "o4", 3000)), "received")
	waitFor(t, 20*time.Second, "the worker to wait inside its effect transaction", func() bool {
		var n int
		st.Business.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%idemhook_apply_batch%'`).Scan(&n)
		return n == 1
	})
	if err := st.KillN8N(ctx); err != nil {
		t.Fatal(err)
	}
	// PostgreSQL notices the dead client and rolls the transaction back;
	// only then does the lock go, so the dead worker cannot commit.
	waitFor(t, 20*time.Second, "the dead worker's transaction to end", func() bool {
		var n int
		st.Business.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%idemhook_apply_batch%' AND pid <> pg_backend_pid()`).Scan(&n)
		return n == 0
	})
	tx.Rollback(ctx)
	r, _ := d.row(t, "evt_ib_4")
	if r.State != "processing" || len(d.effects(t, "o4")) != 0 {
		t.Fatalf("after the kill: row %+v, effects %v; want processing and none", r, d.effects(t, "o4"))
	}
	if err := st.StartN8N(ctx, runnerPath, d.opts.WebhookPath); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d.opts.ClaimLease) // the dead worker's claim expires
	runWorkflow(t, d.ids[generator.FileRecoverer])
	r = d.waitRow(t, "evt_ib_4", "processed")
	if e := d.effects(t, "o4"); len(e) != 1 || r.Attempts != 2 {
		t.Errorf("after the recoverer: effects %v, row %+v; want one effect, attempt 2", e, r)
	}
	if s := d.orderState(t, "o4"); s != "confirmed" {
		t.Errorf("order o4 is %s, want confirmed", s)
	}
}

// The worker decides: a type outside the allowlist is ignored, missing or
// inconsistent data is rejected with its reason, and nothing is written to
// the business for either.
func TestInboxDecisions(t *testing.T) {
	d := sharedInbox(t)
	d.newOrder(t, "o5", 1000)
	cases := []struct {
		name, event  string
		body         []byte
		state, cause string
	}{
		{"type outside the allowlist", "evt_ib_5a", stripeEvent("evt_ib_5a", "customer.created", map[string]any{"id": "cus_1", "metadata": map[string]any{"order_id": "o5"}}),
			"ignored", "type_not_allowed"},
		{"missing metadata.order_id", "evt_ib_5b", stripeEvent("evt_ib_5b", "payment_intent.succeeded", map[string]any{"id": "pi_ib_5", "amount": 1000, "amount_received": 1000, "currency": "eur"}),
			"rejected", "missing_order_id"},
		{"amount that does not match", "evt_ib_5c", paymentSucceeded("evt_ib_5c", "pi_ib_5", "o5", 999), "rejected", "amount_mismatch"},
		{"unpaid checkout", "evt_ib_5d", stripeEvent("evt_ib_5d", "checkout.session.completed", map[string]any{"id": "cs_5", "payment_intent": "pi_ib_5",
			"amount_total": 1000, "currency": "eur", "payment_status": "unpaid", "metadata": map[string]any{"order_id": "o5"}}), "ignored", "not_paid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantReceipt(t, c.name, d.deliver(t, c.body), "received")
			r := d.waitRow(t, c.event, c.state)
			if r.Outcome != c.cause || r.LastError == "" {
				t.Errorf("%s: %+v, want outcome %s with a reason", c.name, r, c.cause)
			}
			t.Logf("%s → %s: %s", c.name, r.State, r.LastError)
		})
	}
	if s := d.orderState(t, "o5"); s != "pending" {
		t.Errorf("order o5 is %s, want pending: no event may have changed it", s)
	}
	if e := d.effects(t, "o5"); len(e) != 0 {
		t.Errorf("effects of o5: %v, want none", e)
	}
}

// 50 concurrent deliveries of one event → one inbox row, one effect; 20
// concurrent distinct events proposing the same effect → one effect.
func TestInboxConcurrency(t *testing.T) {
	d := sharedInbox(t)
	d.newOrder(t, "o6", 700)
	d.newOrder(t, "o7", 800)
	one := paymentSucceeded("evt_ib_6", "pi_ib_6", "o6", 700)
	answers := parallel(50, func(i int) response { return d.deliver(t, one) })
	received := 0
	for _, a := range answers {
		if a.status != 200 {
			t.Errorf("concurrent delivery: %d %s, want 200", a.status, a.body)
		}
		if strings.Contains(a.body, `"status":"received"`) {
			received++
		}
	}
	if received != 1 {
		t.Errorf("%d of 50 concurrent deliveries were answered received, want 1", received)
	}
	d.waitRow(t, "evt_ib_6", "processed")

	answers = parallel(20, func(i int) response {
		return d.deliver(t, paymentSucceeded(fmt.Sprintf("evt_ib_7_%02d", i), "pi_ib_7", "o7", 800))
	})
	for i, a := range answers {
		if a.status != 200 {
			t.Errorf("distinct event %d: %d %s", i, a.status, a.body)
		}
	}
	for i := range 20 {
		d.waitRow(t, fmt.Sprintf("evt_ib_7_%02d", i), "processed")
	}
	if e := d.effects(t, "o6"); len(e) != 1 {
		t.Errorf("effects of o6 after 50 deliveries: %v, want one", e)
	}
	if e := d.effects(t, "o7"); len(e) != 1 {
		t.Errorf("effects of o7 after 20 distinct events: %v, want one", e)
	}
	var rows int
	st.Business.QueryRow(context.Background(), "SELECT count(*) FROM "+d.db.Inbox().String()+" WHERE event_id = 'evt:evt_ib_6'").Scan(&rows)
	if rows != 1 {
		t.Errorf("%d inbox rows for evt_ib_6, want 1", rows)
	}
	for _, k := range []string{"order_confirmation:o6", "order_confirmation:o7"} {
		d.waitTask(t, k, "sent")
		if n := d.api.count("POST", k); n != 1 {
			t.Errorf("%s was called %d times, want 1", k, n)
		}
	}
}

// A forged signature → 401 and no inbox row; the genuine delivery after it
// is received.
func TestInboxForgedSignature(t *testing.T) {
	d := sharedInbox(t)
	body := paymentSucceeded("evt_ib_8", "pi_ib_8", "o8", 100)
	forged := post(t, d.url, "application/json", body, stripeSigned("whsec_attacker", body))
	if forged.status != 401 {
		t.Errorf("forged delivery: %d %s, want 401", forged.status, forged.body)
	}
	if _, found := d.row(t, "evt_ib_8"); found {
		t.Fatal("a forged delivery created an inbox row")
	}
	wantReceipt(t, "genuine delivery", d.deliver(t, body), "received")
}

// The acknowledgement latency of the receipt (verified, saved, then
// answered), reported beside the reserve pattern's answer with the same
// signature check (which runs the business step before it answers).
// Reported, not asserted: wall-clock time is not a test.
func TestInboxAckLatency(t *testing.T) {
	d := sharedInbox(t)
	opts := seedOptions("ib9", generator.HashingCodeNode)
	opts.Verify, opts.VerifyCredential = "stripe", inboxSecretCredential
	reserve := deploy(t, opts)
	const n = 20
	measure := func(send func(i int) response) time.Duration {
		var times []time.Duration
		for i := range n {
			start := time.Now()
			if r := send(i); r.status != 200 {
				t.Fatalf("delivery %d: %d %s", i, r.status, r.body)
			}
			times = append(times, time.Since(start))
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		return times[n/2]
	}
	inboxP50 := measure(func(i int) response {
		return d.deliver(t, stripeEvent(fmt.Sprintf("evt_ib_9_%d", i), "customer.created", map[string]any{"id": "cus"}))
	})
	reserveP50 := measure(func(i int) response {
		body := []byte(fmt.Sprintf(`{"id":"evt_ib9_%d","type":"t"}`, i))
		return post(t, reserve.url, "application/json", body, stripeSigned(stripeSecret, body))
	})
	t.Logf("acknowledgement p50 over %d sequential new events: inbox receiver (verify + save) %s, reserve pattern (reserve + business step) %s, ratio %.2f",
		n, inboxP50.Round(time.Millisecond), reserveP50.Round(time.Millisecond), float64(inboxP50)/float64(reserveP50))
}

// parallel runs f n times at once and returns the results in order.
func parallel(n int, f func(i int) response) []response {
	out := make([]response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = f(i)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// The effect transaction fails (here a trigger on the orders table raises):
// nothing of the effect is kept, the error is recorded on the inbox row, and
// once the fault is repaired the recoverer completes the event.
func TestInboxEffectFailureIsRetried(t *testing.T) {
	d := sharedInbox(t)
	d.newOrder(t, "o10", 1200)
	orders := d.db.Orders().String()
	execSQL(t, `CREATE OR REPLACE FUNCTION ib.fail_o10() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id = 'o10' AND NEW.state = 'confirmed' THEN RAISE EXCEPTION 'orders is read-only today'; END IF;
  RETURN NEW;
END $$`)
	execSQL(t, `CREATE OR REPLACE TRIGGER fail_o10 BEFORE UPDATE ON `+orders+` FOR EACH ROW EXECUTE FUNCTION ib.fail_o10()`)
	wantReceipt(t, "delivery", d.deliver(t, paymentSucceeded("evt_ib_10", "pi_ib_10", "o10", 1200)), "received")
	var r inboxRow
	waitFor(t, 20*time.Second, "the error to be recorded", func() bool {
		r, _ = d.row(t, "evt_ib_10")
		return strings.Contains(r.LastError, "read-only today")
	})
	if r.State != "processing" || len(d.effects(t, "o10")) != 0 || d.orderState(t, "o10") != "pending" {
		t.Fatalf("after the failure: row %+v, effects %v, order %s; want processing, none, pending", r, d.effects(t, "o10"), d.orderState(t, "o10"))
	}
	execSQL(t, `DROP TRIGGER fail_o10 ON `+orders)
	time.Sleep(d.opts.ClaimLease)
	runWorkflow(t, d.ids[generator.FileRecoverer])
	r = d.waitRow(t, "evt_ib_10", "processed")
	if e := d.effects(t, "o10"); len(e) != 1 || r.Attempts != 2 || r.LastError != "" {
		t.Errorf("after the repair: effects %v, row %+v; want one effect on attempt 2, no error left", e, r)
	}
}

// n8n is killed (SIGKILL) in the middle of a drained batch: a worker has
// claimed eight events at once (they came while it was held on an earlier
// one), decided the first four, each in its own transaction, and waits
// inside the fifth's. The four stay applied, the fifth's transaction is
// rolled back, the last three stay claimed and untouched; after the restart
// the recoverer re-offers the rest once the dead worker's claims expire,
// and every event of the batch is applied once, with one outbox call each.
func TestInboxKilledMidBatch(t *testing.T) {
	testInboxKilledMidBatch(t, sharedInbox(t))
}

// testInboxKilledMidBatch is TestInboxKilledMidBatch on d, whose receiver
// may be the Code node's or the community node's (whose Start Worker
// output starts the worker).
func testInboxKilledMidBatch(t *testing.T, d inboxDeployment) {
	ctx := context.Background()
	const n = 8
	d.newOrder(t, "mb-hold", 100)
	for i := 1; i <= n; i++ {
		d.newOrder(t, fmt.Sprintf("mb-%d", i), 100)
	}
	lock := func(order string) pgx.Tx {
		tx, err := st.Business.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(ctx) })
		if _, err := tx.Exec(ctx, "SELECT 1 FROM "+d.db.Orders().String()+" WHERE id = $1 FOR UPDATE", order); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	waitingInApply := func() int {
		var k int
		st.Business.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%idemhook_apply_batch%'`).Scan(&k)
		return k
	}
	hold, fifth := lock("mb-hold"), lock("mb-5")
	wantReceipt(t, "the held event", d.deliver(t, paymentSucceeded("evt_mb_hold", "pi_mb_hold", "mb-hold", 100)), "received")
	waitFor(t, 20*time.Second, "the worker to wait inside the held event's transaction", func() bool { return waitingInApply() == 1 })
	var events []string
	for i := 1; i <= n; i++ {
		events = append(events, fmt.Sprintf("evt_mb_%d", i))
		wantReceipt(t, events[i-1], d.deliver(t, paymentSucceeded(events[i-1], fmt.Sprintf("pi_mb_%d", i), fmt.Sprintf("mb-%d", i), 100)), "received")
	}
	hold.Rollback(ctx) // the worker goes on: the held event, then the eight as one batch
	waitFor(t, 30*time.Second, "the batch's first four events decided and the worker inside the fifth", func() bool {
		for _, e := range events[:4] {
			if r, _ := d.row(t, e); r.State != "processed" {
				return false
			}
		}
		return waitingInApply() == 1
	})
	for _, e := range events[4:] {
		if r, _ := d.row(t, e); r.State != "processing" || r.Attempts != 1 {
			t.Fatalf("before the kill, %s is %+v: want it claimed in the worker's batch (processing, attempt 1)", e, r)
		}
	}
	if err := st.KillN8N(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the dead worker's transaction to end", func() bool {
		var k int
		st.Business.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%idemhook_apply_batch%' AND query NOT LIKE '%pg_stat_activity%'`).Scan(&k)
		return k == 0
	})
	fifth.Rollback(ctx)
	for i, e := range events {
		r, _ := d.row(t, e)
		effects := d.effects(t, fmt.Sprintf("mb-%d", i+1))
		if i < 4 && (r.State != "processed" || len(effects) != 1) {
			t.Errorf("after the kill, %s is %+v with effects %v: want it applied, once", e, r, effects)
		}
		if i >= 4 && (r.State != "processing" || len(effects) != 0) {
			t.Errorf("after the kill, %s is %+v with effects %v: want it still claimed, nothing applied", e, r, effects)
		}
	}
	if err := st.StartN8N(ctx, runnerPath, d.opts.WebhookPath); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d.opts.ClaimLease) // the dead worker's claims expire
	runWorkflow(t, d.ids[generator.FileRecoverer])
	d.waitRows(t, events, "processed", 30*time.Second)
	for i, e := range events {
		order := fmt.Sprintf("mb-%d", i+1)
		r, _ := d.row(t, e)
		wantAttempts := 1
		if i >= 4 {
			wantAttempts = 2
		}
		if effects := d.effects(t, order); len(effects) != 1 || r.Attempts != wantAttempts || d.orderState(t, order) != "confirmed" {
			t.Errorf("%s: effects %v, row %+v, order %s; want one effect on attempt %d, the order confirmed", e, effects, r, d.orderState(t, order), wantAttempts)
		}
		key := "order_confirmation:" + order
		d.waitTask(t, key, "sent")
		if c := d.api.count("POST", key); c != 1 {
			t.Errorf("%s was called %d times, want 1", key, c)
		}
	}
}
