package keysvc_test

import (
	"context"
	"fmt"
	"io"
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

	"github.com/idemhook/idemhook/keysvc"
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

// The endpoints file refuses what would fail later, and says which endpoint
// and why.
func TestLoadEndpointsRefusesBadConfig(t *testing.T) {
	secrets := map[signature.Provider][]string{signature.ProviderStripe: {inboxSecret}}
	t.Setenv("TARGET_TOKEN", "tok")
	for _, tc := range []struct{ name, json, want string }{
		{"unknown field", `{"endpoints":[{"name":"a","target":"http://x","tagret":"y"}]}`, "unknown field"},
		{"no endpoints", `{"endpoints":[]}`, "no endpoints"},
		{"bad name", `{"endpoints":[{"name":"A/b","target":"http://x"}]}`, "name must be"},
		{"duplicate name", `{"endpoints":[{"name":"a","target":"http://x"},{"name":"a","target":"http://y"}]}`, "appears twice"},
		{"unknown provider", `{"endpoints":[{"name":"a","provider":"paypal","target":"http://x"}]}`, "paypal"},
		{"target with credentials", `{"endpoints":[{"name":"a","target":"http://u:p@x"}]}`, "without credentials"},
		{"target not http", `{"endpoints":[{"name":"a","target":"ftp://x"}]}`, "http(s) URL"},
		{"event type with a comma", `{"endpoints":[{"name":"a","target":"http://x","events":["a,b"]}]}`, "event type"},
		{"missing token variable", `{"endpoints":[{"name":"a","target":"http://x","target_token_env":"NOPE_NOT_SET"}]}`, "NOPE_NOT_SET is not set"},
		{"token in two places", `{"endpoints":[{"name":"a","target":"http://x","target_token_env":"TARGET_TOKEN","target_token_file":"/x"}]}`, "not both"},
		{"provider without a secret", `{"endpoints":[{"name":"a","provider":"github","target":"http://x"}]}`, "KEYSVC_SECRET_GITHUB"},
		{"max attempts out of range", `{"endpoints":[{"name":"a","target":"http://x","max_attempts":-1}]}`, "max_attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := keysvc.LoadEndpoints(writeEndpoints(t, tc.json), secrets)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	eps, err := keysvc.LoadEndpoints(writeEndpoints(t, `{"endpoints":[{"name":"stripe","provider":"stripe","target":"https://n8n/webhook/x","target_token_env":"TARGET_TOKEN"}]}`), secrets)
	if err != nil || len(eps) != 1 || eps[0].Account != "default" || eps[0].MaxAttempts != keysvc.DefaultMaxDeliveries {
		t.Errorf("a valid file: %+v, %v", eps, err)
	}
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
func openInbox(t *testing.T, schema, endpoints string, opts keysvc.InboxOptions) *keysvc.Inbox {
	t.Helper()
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	eps, err := keysvc.LoadEndpoints(writeEndpoints(t, endpoints), map[signature.Provider][]string{signature.ProviderStripe: {inboxSecret}})
	if err != nil {
		t.Fatal(err)
	}
	opts.Schema, opts.CreateSchema = schema, true
	in, err := keysvc.OpenInbox(ctx, pg.Business, eps, opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	if err := in.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		in.Close(ctx)
		pg.Business.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	})
	return in
}

// recordingTarget answers 200 and counts the deliveries per inbox id.
type recordingTarget struct {
	mu    sync.Mutex
	calls map[string]int
}

func (rt *recordingTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt.mu.Lock()
	rt.calls[r.Header.Get("X-Idemhook-Inbox-Id")]++
	rt.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// Receive is one transaction: the receipt and its queued delivery commit
// together; 50 concurrent deliveries of one event save one row and deliver
// it once; an ignored type is saved and never delivered.
func TestInboxReceiveAndDeliver(t *testing.T) {
	ctx := context.Background()
	target := &recordingTarget{calls: map[string]int{}}
	srv := httptest.NewServer(target)
	defer srv.Close()
	in := openInbox(t, "ks_inbox_rd", fmt.Sprintf(`{"endpoints":[{"name":"stripe","provider":"stripe","target":%q,"events":["payment_intent.succeeded"]}]}`, srv.URL),
		keysvc.InboxOptions{Backoff: 100 * time.Millisecond})
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
	target.mu.Lock()
	defer target.mu.Unlock()
	var ids []string
	for k, n := range target.calls {
		ids = append(ids, fmt.Sprintf("%s×%d", k, n))
	}
	sort.Strings(ids)
	if len(target.calls) != 1 || target.calls[fmt.Sprint(id)] != 1 {
		t.Errorf("the target saw %v, want entry %d once", ids, id)
	}
}

// stripeHeaders signs body as Stripe does, now.
func stripeHeaders(body []byte) map[string]string {
	h := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: inboxSecret, Timestamp: time.Now()}).Header
	return map[string]string{"Stripe-Signature": h, "Content-Type": "application/json"}
}

// waitEntry polls entry id of endpoint every few milliseconds until it is in
// state, and fails after timeout.
func waitEntry(t *testing.T, in *keysvc.Inbox, endpoint string, id int64, state string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		e, err := in.Entry(context.Background(), endpoint, id)
		if err == nil && e.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("entry %d is not %s after %s: %+v %v", id, state, timeout, e, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A replay sent the moment an entry reads failed is delivered: the entry's
// last state and the end of its delivery job commit together, so the
// replay's queued delivery is never taken for the job that just failed (the
// recoverer, an hour away here, would otherwise be what delivers it).
func TestInboxReplayRightAfterFailure(t *testing.T) {
	var healthy atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer target.Close()
	in := openInbox(t, "ks_inbox_replay", fmt.Sprintf(`{"endpoints":[{"name":"stripe","provider":"stripe","target":%q,"max_attempts":1}]}`, target.URL),
		keysvc.InboxOptions{RecoverAfter: time.Hour})
	c := start(t, keysvc.Config{Store: newBoltStore(t), Inbox: in})
	for i := range 5 {
		healthy.Store(false)
		body := []byte(fmt.Sprintf(`{"id":"evt_replay_%d","type":"payment_intent.succeeded"}`, i))
		r := c.do("POST", "/v1/inbox/stripe", body, stripeHeaders(body))
		id := int64(r.json["inbox_id"].(float64))
		waitEntry(t, in, "stripe", id, "failed", 10*time.Second)
		healthy.Store(true)
		c.do("POST", fmt.Sprintf("/v1/inbox/stripe/%d/replay", id), nil, nil).want(t, http.StatusAccepted, "")
		waitEntry(t, in, "stripe", id, "forwarded", 10*time.Second)
	}
}

// n8n answers 200 "n8n is starting up. Please wait" to everything while it
// migrates at startup, before any webhook exists: such an answer is retried,
// never taken for a delivery (it lost events after every n8n restart).
func TestInboxN8NStartingUpIsNotADelivery(t *testing.T) {
	var calls atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "n8n is starting up. Please wait")
			return
		}
		io.WriteString(w, `{"status":"accepted"}`)
	}))
	defer target.Close()
	in := openInbox(t, "ks_inbox_n8n_start", fmt.Sprintf(`{"endpoints":[{"name":"stripe","provider":"stripe","target":%q}]}`, target.URL),
		keysvc.InboxOptions{Backoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, RecoverAfter: time.Hour})
	c := start(t, keysvc.Config{Store: newBoltStore(t), Inbox: in})
	body := []byte(`{"id":"evt_n8n_starting","type":"payment_intent.succeeded"}`)
	r := c.do("POST", "/v1/inbox/stripe", body, stripeHeaders(body))
	id := int64(r.json["inbox_id"].(float64))
	waitEntry(t, in, "stripe", id, "forwarded", 10*time.Second)
	e, err := in.Entry(context.Background(), "stripe", id)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 || len(e.Deliveries) != 3 {
		t.Fatalf("%d calls, deliveries %+v: want two answers of n8n starting up retried, then the delivery", calls.Load(), e.Deliveries)
	}
	if !strings.Contains(e.Deliveries[0].Error, "starting up") || e.Deliveries[2].Error != "" {
		t.Errorf("deliveries %+v: want the first to say n8n was starting up, the last no error", e.Deliveries)
	}
}

// An endpoint's concurrency bounds its deliveries in flight, and a target
// that holds them does not hold back another endpoint's.
func TestInboxConcurrencyPerEndpoint(t *testing.T) {
	release := make(chan struct{})
	var inFlight, most atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	fast := &recordingTarget{calls: map[string]int{}}
	fastSrv := httptest.NewServer(fast)
	defer fastSrv.Close()
	in := openInbox(t, "ks_inbox_conc", fmt.Sprintf(`{"endpoints":[{"name":"slow","provider":"stripe","target":%q,"concurrency":2},{"name":"fast","provider":"stripe","target":%q}]}`, slow.URL, fastSrv.URL),
		keysvc.InboxOptions{})
	c := start(t, keysvc.Config{Store: newBoltStore(t), Inbox: in})
	const backlog = 12
	var ids []int64
	for i := range backlog {
		body := []byte(fmt.Sprintf(`{"id":"evt_slow_%d","type":"t"}`, i))
		r := c.do("POST", "/v1/inbox/slow", body, stripeHeaders(body))
		ids = append(ids, int64(r.json["inbox_id"].(float64)))
	}
	body := []byte(`{"id":"evt_fast","type":"t"}`)
	r := c.do("POST", "/v1/inbox/fast", body, stripeHeaders(body))
	waitEntry(t, in, "fast", int64(r.json["inbox_id"].(float64)), "forwarded", 10*time.Second)
	for deadline := time.Now().Add(10 * time.Second); inFlight.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // room for a third delivery, were one allowed
	if n := inFlight.Load(); n != 2 {
		t.Errorf("%d deliveries in flight to the slow target, want its concurrency, 2", n)
	}
	close(release)
	for _, id := range ids {
		waitEntry(t, in, "slow", id, "forwarded", 20*time.Second)
	}
	if m := most.Load(); m != 2 {
		t.Errorf("at most %d deliveries were in flight to the slow target, want 2", m)
	}
}
