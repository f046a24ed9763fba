package keysvc_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/keysvc/inbox/inboxtest"
	"github.com/idemhook/idemhook/signature"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"
)

const inboxSecret = "whsec_inboxTestSecret"

func writeEndpoints(t testing.TB, json string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "endpoints.json")
	if err := os.WriteFile(file, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Without PostgreSQL (the embedded store) the inbox routes answer 501 and
// say what to set.
func TestInboxWithoutPostgres(t *testing.T) {
	c := start(t, keysvc.Config{Store: newBoltStore(t)})
	r := c.do("POST", "/v1/inbox/stripe", []byte(`{"id":"evt_1"}`), nil)
	r.want(t, http.StatusNotImplemented, "inbox_unavailable")
	if !strings.Contains(r.str("error"), "DATABASE_URL") {
		t.Errorf("the 501 does not name DATABASE_URL: %s", r.body)
	}
}

// openInbox opens and starts an inbox on the test PostgreSQL in a schema of
// its own (dropped at the end) with the endpoints file's endpoints.
func openInbox(t testing.TB, schema, endpoints string, opts inbox.Options) *inbox.Inbox {
	t.Helper()
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	return inboxtest.Open(t, pg.Business, schema, endpoints, map[signature.Provider][]string{signature.ProviderStripe: {inboxSecret}}, opts)
}

// Receive is one transaction: the receipt and its queued delivery commit
// together; 50 concurrent deliveries of one event save one row and deliver
// it once; an ignored type is saved and never delivered.
func TestInboxReceiveAndDeliver(t *testing.T) {
	ctx := context.Background()
	target := inboxtest.NewRecorder()
	srv := httptest.NewServer(target)
	defer srv.Close()
	in := openInbox(t, "ks_inbox_rd", fmt.Sprintf(`{"endpoints":[{"name":"stripe","provider":"stripe","target":%q,"events":["payment_intent.succeeded"]}]}`, srv.URL),
		inbox.Options{Backoff: 100 * time.Millisecond})
	c := start(t, keysvc.Config{Store: newBoltStore(t), Inbox: in})

	body := []byte(`{"id":"evt_rd_1","type":"payment_intent.succeeded","data":{"object":{}}}`)
	var received atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: inboxSecret, Timestamp: time.Now()}).Header
			r := c.do("POST", "/v1/inbox/stripe", body, map[string]string{"Stripe-Signature": h, "Content-Type": "application/json"})
			if r.status != 200 {
				t.Errorf("concurrent delivery: %d %s", r.status, r.body)
			}
			if r.str("status") == "received" {
				received.Add(1)
			}
		}()
	}
	wg.Wait()
	if received.Load() != 1 {
		t.Errorf("%d of 50 concurrent deliveries were received, want 1", received.Load())
	}
	var id int64
	pg.Business.QueryRow(ctx, "SELECT id FROM ks_inbox_rd.inbox_events WHERE event_id = 'evt:evt_rd_1'").Scan(&id)
	deadline := time.Now().Add(20 * time.Second)
	for {
		e, err := in.Entry(ctx, "stripe", id)
		if err == nil && e.State == "forwarded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("entry %d not forwarded: %+v %v", id, e, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ignored := []byte(`{"id":"evt_rd_2","type":"customer.created"}`)
	h := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: ignored, Secret: inboxSecret, Timestamp: time.Now()}).Header
	if r := c.do("POST", "/v1/inbox/stripe", ignored, map[string]string{"Stripe-Signature": h}); r.str("status") != "ignored" {
		t.Errorf("type outside the allowlist: %s, want ignored", r.body)
	}
	time.Sleep(time.Second)
	calls := target.Calls()
	var ids []string
	for k, n := range calls {
		ids = append(ids, fmt.Sprintf("%s×%d", k, n))
	}
	sort.Strings(ids)
	if len(calls) != 1 || calls[fmt.Sprint(id)] != 1 {
		t.Errorf("the target saw %v, want entry %d once", ids, id)
	}
}

// On an endpoint whose provider is slack, Slack's url_verification is
// answered its challenge after the signature check and saved nowhere; a
// forged one gets 401; an event of the same endpoint is saved as before.
func TestInboxSlackURLVerification(t *testing.T) {
	ctx := context.Background()
	target := inboxtest.NewRecorder()
	srv := httptest.NewServer(target)
	defer srv.Close()
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	const secret = "slack inbox secret"
	in := inboxtest.Open(t, pg.Business, "ks_inbox_slack", fmt.Sprintf(`{"endpoints":[{"name":"slack","provider":"slack","target":%q}]}`, srv.URL),
		map[signature.Provider][]string{signature.ProviderSlack: {secret}}, inbox.Options{Backoff: 100 * time.Millisecond})
	c := start(t, keysvc.Config{Store: newBoltStore(t), Inbox: in})
	count := func() int {
		var n int
		if err := pg.Business.QueryRow(ctx, "SELECT count(*) FROM ks_inbox_slack.inbox_events").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	check := []byte(`{"token":"Zq8WbT1xLr","challenge":"c7Hn2VqPz0sK4mYd","type":"url_verification"}`)
	r := c.do("POST", "/v1/inbox/slack", check, signedHeaders(t, signature.ProviderSlack, secret, time.Now(), check))
	r.want(t, 200, "")
	if r.str("status") != "url_verification" || r.str("challenge") != "c7Hn2VqPz0sK4mYd" {
		t.Errorf("url_verification: %s, want the challenge echoed", r.body)
	}
	c.do("POST", "/v1/inbox/slack", check, signedHeaders(t, signature.ProviderSlack, "not the secret", time.Now(), check)).want(t, 401, "invalid_signature")
	if n := count(); n != 0 {
		t.Errorf("the URL check saved %d rows, want none", n)
	}

	event := []byte(`{"type":"event_callback","event_id":"Ev0SLACKINBOX1","event":{"type":"app_mention"}}`)
	if r := c.do("POST", "/v1/inbox/slack", event, signedHeaders(t, signature.ProviderSlack, secret, time.Now(), event)); r.status != 200 || r.str("status") != "received" {
		t.Errorf("an event after the check: %d %s, want 200 received", r.status, r.body)
	}
	if n := count(); n != 1 {
		t.Errorf("%d rows after one event, want 1", n)
	}
}
