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
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	target := &recordingTarget{calls: map[string]int{}}
	srv := httptest.NewServer(target)
	defer srv.Close()
	file := writeEndpoints(t, fmt.Sprintf(`{"endpoints":[{"name":"stripe","provider":"stripe","target":%q,"events":["payment_intent.succeeded"]}]}`, srv.URL))
	eps, err := keysvc.LoadEndpoints(file, map[signature.Provider][]string{signature.ProviderStripe: {inboxSecret}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := keysvc.OpenInbox(ctx, pg.Business, eps, keysvc.InboxOptions{Schema: "ks_inbox_rd", CreateSchema: true, Backoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Business.Exec(context.Background(), "DROP SCHEMA ks_inbox_rd CASCADE") })
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := in.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
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
