package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
)

// The inbox pattern with the community node saving the receipt
// (`idemhook generate --pattern inbox --hashing node`), on the suite's n8n,
// which loaded the packed package: schema ibn, its own receiver, worker and
// outbox; the rest of the pattern is the one the other inbox tests prove.
func TestCommunityNodeInbox(t *testing.T) {
	needStack(t)
	api := newOpsAPI(t, true)
	opts := inboxOptions("ibn", api.url)
	opts.Hashing = generator.HashingNode
	d := deployInbox(t, opts, api)
	ctx := context.Background()

	t.Run("the seed: one event twice with new signatures, another event, one effect each", func(t *testing.T) {
		d.newOrder(t, "n1", 2000)
		d.newOrder(t, "n2", 3000)
		a := paymentSucceeded("evt_ibn_1", "pi_ibn_1", "n1", 2000)
		first := d.deliver(t, a)
		wantReceipt(t, "event A", first, "received")
		if !strings.Contains(first.body, `"key":"evt:evt_ibn_1"`) {
			t.Errorf("event A's answer names another key: %s", first.body)
		}
		// Stripe signs each attempt anew: another timestamp, another header.
		again := post(t, d.url, "application/json", a, stripeSignedAt(stripeSecret, a, time.Now().Add(-time.Minute)))
		wantReceipt(t, "event A again, signed a minute earlier", again, "duplicate")
		wantReceipt(t, "event B", d.deliver(t, paymentSucceeded("evt_ibn_2", "pi_ibn_2", "n2", 3000)), "received")
		d.waitRow(t, "evt_ibn_1", "processed")
		d.waitRow(t, "evt_ibn_2", "processed")
		for order, effect := range map[string]string{"n1": "confirm_order:n1:pi_ibn_1", "n2": "confirm_order:n2:pi_ibn_2"} {
			if e := d.effects(t, order); len(e) != 1 || e[0] != effect {
				t.Errorf("effects of %s: %v, want [%s]", order, e, effect)
			}
			if s := d.orderState(t, order); s != "confirmed" {
				t.Errorf("order %s is %s, want confirmed", order, s)
			}
		}
		d.waitTask(t, "order_confirmation:n1", "sent")
		if n := d.api.count("POST", "order_confirmation:n1"); n != 1 {
			t.Errorf("the external API was called %d times for order_confirmation:n1, want 1", n)
		}
	})

	t.Run("the row the Code node's receiver saves: account, event id, type, body, kept headers", func(t *testing.T) {
		code := sharedInbox(t)
		body := stripeEvent("evt_ibn_same", "customer.created", map[string]any{"id": "cus_ibn"})
		header := stripeSigned(stripeSecret, body)
		wantReceipt(t, "to the Code node's receiver", post(t, code.url, "application/json", body, header), "received")
		wantReceipt(t, "to the community node's receiver", post(t, d.url, "application/json", body, header), "received")
		row := func(d inboxDeployment) string {
			var s string
			if err := st.Business.QueryRow(ctx, "SELECT concat_ws('|', account, event_id, event_type, encode(body, 'base64'), headers::text) FROM "+
				d.db.Inbox().String()+" WHERE event_id = 'evt:evt_ibn_same'").Scan(&s); err != nil {
				t.Fatalf("the receipt in %s: %v", d.db.Inbox(), err)
			}
			return s
		}
		if c, n := row(code), row(d); c != n {
			t.Errorf("the receipts differ:\nCode node:      %s\ncommunity node: %s", c, n)
		}
	})

	t.Run("32 concurrent deliveries of one new event: one row, one effect", func(t *testing.T) {
		d.newOrder(t, "n3", 1500)
		ev := paymentSucceeded("evt_ibn_3", "pi_ibn_3", "n3", 1500)
		answers := make([]response, 32)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() { defer wg.Done(); answers[i] = d.deliver(t, ev) }()
		}
		wg.Wait()
		received := 0
		for i, r := range answers {
			if r.status != 200 {
				t.Errorf("delivery %d: %d %s, want 200", i, r.status, r.body)
			}
			if strings.Contains(r.body, `"status":"received"`) {
				received++
			}
		}
		if received != 1 {
			t.Errorf("%d deliveries answered received, want 1 (the others duplicate)", received)
		}
		d.waitRow(t, "evt_ibn_3", "processed")
		var rows int
		if err := st.Business.QueryRow(ctx, "SELECT count(*) FROM "+d.db.Inbox().String()+" WHERE event_id = 'evt:evt_ibn_3'").Scan(&rows); err != nil || rows != 1 {
			t.Errorf("%d inbox rows for one event (%v), want 1", rows, err)
		}
		if e := d.effects(t, "n3"); len(e) != 1 {
			t.Errorf("effects of n3: %v, want one", e)
		}
	})

	t.Run("rejected: forged, unsigned, stale, empty; nothing saved", func(t *testing.T) {
		body := paymentSucceeded("evt_ibn_4", "pi_ibn_4", "n4", 100)
		empty := []byte{}
		for _, c := range []struct {
			name   string
			body   []byte
			header map[string]string
			status int
			code   string
		}{
			{"another secret", body, stripeSigned("whsec_attacker", body), 401, "invalid_signature"},
			{"no signature", body, nil, 401, "missing_signature"},
			{"signed ten minutes ago", body, stripeSignedAt(stripeSecret, body, time.Now().Add(-10*time.Minute)), 401, "signature_too_old"},
			{"an empty body, signed", empty, stripeSigned(stripeSecret, empty), 400, "empty_body"},
		} {
			r := post(t, d.url, "application/json", c.body, c.header)
			if r.status != c.status || !strings.Contains(r.body, `"code":"`+c.code+`"`) {
				t.Errorf("%s: %d %s, want %d with code %s", c.name, r.status, r.body, c.status, c.code)
			}
		}
		var rows int
		if err := st.Business.QueryRow(ctx, "SELECT count(*) FROM "+d.db.Inbox().String()+" WHERE event_id IN ('evt:evt_ibn_4', '')").Scan(&rows); err != nil || rows != 0 {
			t.Errorf("%d rows saved for rejected deliveries (%v), want 0", rows, err)
		}
		wantReceipt(t, "the genuine delivery after them", d.deliver(t, body), "received")
	})

	t.Run("its table missing: 503 and the provider's retry, nothing saved", func(t *testing.T) {
		missing := inboxOptions("ibnx", api.url)
		missing.Hashing = generator.HashingNode
		missing.WebhookPath = "ibnx-inbox"
		x := deployInbox(t, missing, api)
		execSQL(t, "ALTER TABLE "+x.db.Inbox().String()+" RENAME TO inbox_events_gone")
		body := paymentSucceeded("evt_ibn_5", "pi_ibn_5", "n5", 100)
		r := x.deliver(t, body)
		if r.status != 503 || r.retryAfter == "" {
			t.Errorf("a receipt without its table: %d %s (Retry-After %q), want 503 with Retry-After", r.status, r.body, r.retryAfter)
		}
		execSQL(t, fmt.Sprintf("ALTER TABLE %s.inbox_events_gone RENAME TO inbox_events", missing.DBSchema))
		wantReceipt(t, "the provider's retry once the table is back", x.deliver(t, body), "received")
	})

	// The worker and the recoverer are the Code node receiver's; the
	// receipt and the wake-up (Start Worker) are the node's own.
	t.Run("n8n killed mid-batch", func(t *testing.T) { testInboxKilledMidBatch(t, d) })
}
