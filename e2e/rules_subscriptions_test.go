package e2e

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/rules"
)

// subscriptionEvent is a Stripe customer.subscription.* event.
func subscriptionEvent(evt, typ, sub, customer, status string, created int) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": evt, "object": "event", "type": typ, "created": created, "api_version": "2025-03-31.basil", "livemode": false,
		"data": map[string]any{"object": map[string]any{
			"id": sub, "object": "subscription", "customer": customer, "status": status,
			"items": map[string]any{"data": []any{map[string]any{"price": map[string]any{"id": "price_pro"}, "quantity": 1, "current_period_end": created + 2592000}}},
		}},
	})
	return b
}

// invoicePaid is a Stripe invoice.paid event in the 2025 shape (the
// subscription under parent.subscription_details).
func invoicePaid(evt, invoice, sub, customer string, created int) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": evt, "object": "event", "type": "invoice.paid", "created": created, "api_version": "2025-03-31.basil",
		"data": map[string]any{"object": map[string]any{
			"id": invoice, "object": "invoice", "customer": customer, "amount_paid": 1900, "currency": "eur",
			"parent": map[string]any{"subscription_details": map[string]any{"subscription": sub}},
			"lines":  map[string]any{"data": []any{map[string]any{"period": map[string]any{"end": created + 2592000}}}},
		}},
	})
	return b
}

// The design's five tests and the inbox's guarantees for a domain that is
// not the example's: the stripe-subscriptions rules preset deployed in n8n
// (its own schema and webhook path, one deployment for every case), with
// deliveries signed as Stripe signs them.
func TestRulesSubscriptions(t *testing.T) {
	needStack(t)
	start := time.Now()
	api := newOpsAPI(t, true)
	opts := inboxOptions("rs", api.url)
	rs, err := rules.Preset("stripe-subscriptions")
	if err != nil {
		t.Fatal(err)
	}
	opts.Rules = rs
	d := deployInbox(t, opts, api)
	ctx := context.Background()
	subs := d.db.Subscriptions().String()
	effects := func(sub string) []string { return d.effectsWith(t, ":"+sub) }
	subState := func(sub string) string {
		var s string
		if err := st.Business.QueryRow(ctx, "SELECT state || ' ' || coalesce(status, '') FROM "+subs+" WHERE id = $1", sub).Scan(&s); err != nil {
			return "absent"
		}
		return s
	}
	open := func(t *testing.T, evt, sub string) {
		t.Helper()
		wantReceipt(t, "created", d.deliver(t, subscriptionEvent(evt, "customer.subscription.created", sub, "cus_"+sub, "active", 1700000000)), "received")
		d.waitRow(t, evt, "processed")
	}

	// 1. The same event twice, each time signed anew: one receipt, one
	// account, one effect, one call of the external task.
	t.Run("the same event twice", func(t *testing.T) {
		ev := subscriptionEvent("evt_rs_1", "customer.subscription.created", "sub_rs_1", "cus_sub_rs_1", "active", 1700000000)
		wantReceipt(t, "first delivery", d.deliver(t, ev), "received")
		d.waitRow(t, "evt_rs_1", "processed")
		wantReceipt(t, "second delivery", d.deliver(t, ev), "duplicate")
		if e := effects("sub_rs_1"); len(e) != 1 || e[0] != "open_account:sub_rs_1" {
			t.Errorf("effects %v, want [open_account:sub_rs_1]", e)
		}
		if s := subState("sub_rs_1"); s != "open active" {
			t.Errorf("the account is %q, want open active", s)
		}
		d.waitTask(t, "account_opened:sub_rs_1", "sent")
		if n := d.api.count("POST", "account_opened:sub_rs_1"); n != 1 {
			t.Errorf("account_opened:sub_rs_1 was called %d times, want 1", n)
		}
	})

	// 2. Different events proposing one effect: the update to canceled and
	// the deletion both close the account; it is closed once.
	t.Run("two events, one effect", func(t *testing.T) {
		open(t, "evt_rs_2c", "sub_rs_2")
		wantReceipt(t, "updated to canceled", d.deliver(t, subscriptionEvent("evt_rs_2u", "customer.subscription.updated", "sub_rs_2", "cus_sub_rs_2", "canceled", 1700000100)), "received")
		wantReceipt(t, "deleted", d.deliver(t, subscriptionEvent("evt_rs_2d", "customer.subscription.deleted", "sub_rs_2", "cus_sub_rs_2", "canceled", 1700000101)), "received")
		a, b := d.waitRow(t, "evt_rs_2u", "processed"), d.waitRow(t, "evt_rs_2d", "processed")
		outcomes := []string{a.Outcome, b.Outcome}
		sort.Strings(outcomes)
		if outcomes[0] != "applied" || outcomes[1] != "effect_exists" {
			t.Errorf("outcomes %v, want one applied and one effect_exists", outcomes)
		}
		if e := effects("sub_rs_2"); len(e) != 2 || e[0] != "close_account:sub_rs_2" {
			t.Errorf("effects %v, want the opening and one close_account:sub_rs_2", e)
		}
		d.waitTask(t, "account_closed:sub_rs_2", "sent")
		if n := d.api.count("POST", "account_closed:sub_rs_2"); n != 1 {
			t.Errorf("account_closed:sub_rs_2 was called %d times, want 1", n)
		}
	})

	// 3. Reversed order: the invoice and an update arrive before the
	// subscription exists; they are kept, deferred with their reason, and
	// applied after the creation (which makes them due) by the recoverer.
	t.Run("reversed order retained then applied", func(t *testing.T) {
		wantReceipt(t, "invoice first", d.deliver(t, invoicePaid("evt_rs_3i", "in_rs_3", "sub_rs_3", "cus_sub_rs_3", 1700000050)), "received")
		wantReceipt(t, "update first", d.deliver(t, subscriptionEvent("evt_rs_3u", "customer.subscription.updated", "sub_rs_3", "cus_sub_rs_3", "active", 1700000060)), "received")
		for _, evt := range []string{"evt_rs_3i", "evt_rs_3u"} {
			if r := d.waitRow(t, evt, "deferred"); r.Outcome != "subscription_unknown" || r.LastError == "" {
				t.Errorf("%s: %+v, want deferred subscription_unknown with its reason", evt, r)
			}
		}
		open(t, "evt_rs_3c", "sub_rs_3")
		d.waitDue(t, []string{"evt_rs_3i", "evt_rs_3u"})
		runWorkflow(t, d.ids[generator.FileRecoverer])
		for _, evt := range []string{"evt_rs_3i", "evt_rs_3u"} {
			if r := d.waitRow(t, evt, "processed"); r.Outcome != "applied" || r.Attempts != 2 {
				t.Errorf("%s after the recoverer: %+v, want applied on attempt 2", evt, r)
			}
		}
		want := "change_account:sub_rs_3:evt_rs_3u open_account:sub_rs_3 pay_account:sub_rs_3:in_rs_3"
		if e := strings.Join(effects("sub_rs_3"), " "); e != want {
			t.Errorf("effects %s, want %s", e, want)
		}
	})

	// 4. n8n killed (SIGKILL) after the effect's transaction began and before
	// the external task: nothing is half done; the recoverer completes it
	// after the restart, once.
	t.Run("worker killed inside the effect", func(t *testing.T) {
		open(t, "evt_rs_4c", "sub_rs_4")
		tx, err := st.Business.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "SELECT 1 FROM "+subs+" WHERE id = 'sub_rs_4' FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
		wantReceipt(t, "invoice", d.deliver(t, invoicePaid("evt_rs_4i", "in_rs_4", "sub_rs_4", "cus_sub_rs_4", 1700000100)), "received")
		waitFor(t, 20*time.Second, "the worker to wait inside its effect transaction", func() bool {
			var n int
			st.Business.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%rs.idemhook_apply_batch%'`).Scan(&n)
			return n == 1
		})
		if err := st.KillN8N(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the dead worker's transaction to end", func() bool {
			var n int
			st.Business.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%rs.idemhook_apply_batch%' AND pid <> pg_backend_pid()`).Scan(&n)
			return n == 0
		})
		tx.Rollback(ctx)
		var tasks int
		st.Business.QueryRow(ctx, "SELECT count(*) FROM "+d.db.Outbox().String()+" WHERE operation_key = 'invoice_receipt:in_rs_4'").Scan(&tasks)
		if r, _ := d.row(t, "evt_rs_4i"); r.State != "processing" || len(effects("sub_rs_4")) != 1 || tasks != 0 {
			t.Fatalf("after the kill: row %+v, effects %v, %d tasks; want processing, the opening only, no task", r, effects("sub_rs_4"), tasks)
		}
		if err := st.StartN8N(ctx, runnerPath, opts.WebhookPath); err != nil {
			t.Fatal(err)
		}
		time.Sleep(opts.ClaimLease)
		runWorkflow(t, d.ids[generator.FileRecoverer])
		if r := d.waitRow(t, "evt_rs_4i", "processed"); r.Attempts != 2 || r.Outcome != "applied" {
			t.Errorf("after the recoverer: %+v, want applied on attempt 2", r)
		}
		if e := effects("sub_rs_4"); len(e) != 2 {
			t.Errorf("effects %v, want the opening and one payment", e)
		}
		d.waitTask(t, "invoice_receipt:in_rs_4", "sent")
		if n := d.api.count("POST", "invoice_receipt:in_rs_4"); n != 1 {
			t.Errorf("invoice_receipt:in_rs_4 was called %d times, want 1", n)
		}
	})

	// 5. An uncertain external result: the API performs the opening's task
	// and answers after the outbox's timeout; the outbox looks it up and
	// records it sent, without calling it again.
	t.Run("uncertain external result reconciled", func(t *testing.T) {
		api.plan("account_opened:sub_rs_5", opsStep{perform: true, sleep: 4 * time.Second})
		open(t, "evt_rs_5", "sub_rs_5")
		d.waitTask(t, "account_opened:sub_rs_5", "sent")
		if p, g := api.count("POST", "account_opened:sub_rs_5"), api.count("GET", "account_opened:sub_rs_5"); p != 1 || g != 1 {
			t.Errorf("%d POSTs and %d lookups, want 1 and 1", p, g)
		}
	})

	t.Run("an irrelevant type is ignored, with no write", func(t *testing.T) {
		wantReceipt(t, "customer.created", d.deliver(t, stripeEvent("evt_rs_6", "customer.created", map[string]any{"id": "sub_rs_6"})), "received")
		r := d.waitRow(t, "evt_rs_6", "ignored")
		if r.Outcome != "type_not_allowed" || len(effects("sub_rs_6")) != 0 || subState("sub_rs_6") != "absent" {
			t.Errorf("%+v, effects %v, account %s; want type_not_allowed and nothing written", r, effects("sub_rs_6"), subState("sub_rs_6"))
		}
	})

	t.Run("missing or inconsistent data is rejected with its reason", func(t *testing.T) {
		wantReceipt(t, "no customer", d.deliver(t, subscriptionEvent("evt_rs_7a", "customer.subscription.created", "sub_rs_7", "", "active", 1700000000)), "received")
		wantReceipt(t, "another customer", d.deliver(t, invoicePaid("evt_rs_7b", "in_rs_7", "sub_rs_1", "cus_someone_else", 1700000300)), "received")
		for evt, outcome := range map[string]string{"evt_rs_7a": "missing_customer", "evt_rs_7b": "customer_mismatch"} {
			if r := d.waitRow(t, evt, "rejected"); r.Outcome != outcome || r.LastError == "" {
				t.Errorf("%s: %+v, want rejected %s with its reason", evt, r, outcome)
			}
		}
		if subState("sub_rs_7") != "absent" || len(effects("in_rs_7")) != 0 {
			t.Error("a rejected event wrote to the business")
		}
	})

	t.Run("a forged signature is refused, nothing stored", func(t *testing.T) {
		body := subscriptionEvent("evt_rs_8", "customer.subscription.created", "sub_rs_8", "cus_8", "active", 1700000000)
		if r := post(t, d.url, "application/json", body, stripeSigned("whsec_attacker", body)); r.status != 401 {
			t.Errorf("forged delivery: %d %s, want 401", r.status, r.body)
		}
		if _, found := d.row(t, "evt_rs_8"); found || subState("sub_rs_8") != "absent" {
			t.Error("a forged delivery was stored")
		}
	})

	t.Run("30 concurrent deliveries of one event: one effect", func(t *testing.T) {
		ev := subscriptionEvent("evt_rs_9", "customer.subscription.created", "sub_rs_9", "cus_9", "active", 1700000000)
		answers := parallel(30, func(int) response { return d.deliver(t, ev) })
		received := 0
		for _, a := range answers {
			if a.status != 200 {
				t.Errorf("concurrent delivery: %d %s", a.status, a.body)
			}
			if strings.Contains(a.body, `"status":"received"`) {
				received++
			}
		}
		if received != 1 {
			t.Errorf("%d of 30 deliveries were answered received, want 1", received)
		}
		d.waitRow(t, "evt_rs_9", "processed")
		if e := effects("sub_rs_9"); len(e) != 1 {
			t.Errorf("effects %v, want one", e)
		}
		d.waitTask(t, "account_opened:sub_rs_9", "sent")
		if n := d.api.count("POST", "account_opened:sub_rs_9"); n != 1 {
			t.Errorf("account_opened:sub_rs_9 was called %d times, want 1", n)
		}
	})
	t.Logf("the subscriptions preset's end-to-end cases took %s", time.Since(start).Round(time.Second))
}
