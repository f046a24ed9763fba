package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemhook/idemhook/generator"
)

// targetProxy sits between keysvc and n8n's target workflow and records the
// Idempotency-Key of every delivery per inbox id; n8n down is a 502.
type targetProxy struct {
	srv  *httptest.Server
	path string // the n8n webhook path

	mu   sync.Mutex
	keys map[string][]string // X-Idemhook-Inbox-Id → Idempotency-Key of each delivery
}

func newTargetProxy(t *testing.T, webhookPath string) *targetProxy {
	p := &targetProxy{path: webhookPath, keys: map[string][]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		id := r.Header.Get("X-Idemhook-Inbox-Id")
		p.keys[id] = append(p.keys[id], r.Header.Get("Idempotency-Key"))
		p.mu.Unlock()
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, st.WebhookURL+"/webhook/"+p.path, strings.NewReader(string(body)))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *targetProxy) deliveries(id int64) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{}, p.keys[fmt.Sprint(id)]...)
}

type keysvcInbox struct {
	inboxDeployment
	keysvc *keysvcProc
	proxy  *targetProxy
	dead   *opsAPI // the target of the "dead" endpoint, down until a test starts it
}

// startKeysvcInbox deploys the inbox pattern with keysvc as its receiver:
// keysvc saves and forwards to the generated target workflow (through the
// recording proxy), n8n's worker decides the effects.
func startKeysvcInbox(t *testing.T) keysvcInbox {
	t.Helper()
	needStack(t)
	api := newOpsAPI(t, true)
	opts := inboxOptions("ki", api.url)
	opts.Receiver = generator.ReceiverKeysvc
	// Every test that starts it redeploys the same workflows on purpose:
	// each keysvc and each assertion uses event ids of its own.
	shareName(opts.WorkflowName)
	d := deployInbox(t, opts, api)
	proxy := newTargetProxy(t, opts.WebhookPath)
	dead := newOpsAPI(t, false)
	endpoints := map[string]any{"endpoints": []map[string]any{
		{"name": "stripe", "provider": "stripe", "target": proxy.srv.URL, "events": generator.DefaultEvents, "max_attempts": 200},
		{"name": "dead", "provider": "stripe", "target": dead.url, "max_attempts": 2},
	}}
	raw, _ := json.Marshal(endpoints)
	file := filepath.Join(t.TempDir(), "endpoints.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	k := launchKeysvc(t, "ki", []string{"--table", "ki_processed_events", "--create-schema", "--endpoints", file, "--inbox-schema", "ki",
		"--inbox-backoff", "200ms", "--inbox-max-backoff", "3s", "--inbox-recover-after", "20s", "--inbox-delivery-timeout", "10s"},
		[]string{"KEYSVC_SECRET_STRIPE=" + stripeSecret})
	return keysvcInbox{inboxDeployment: d, keysvc: k, proxy: proxy, dead: dead}
}

// sendToInbox posts a Stripe-signed event to keysvc's endpoint once.
func (k keysvcInbox) sendToInbox(endpoint string, body []byte) response {
	r, err := send(k.keysvc.url+"/v1/inbox/"+endpoint, "application/json", body, stripeSigned(stripeSecret, body))
	if err != nil {
		return response{body: err.Error()}
	}
	return r
}

// deliverLikeStripe retries until keysvc answers 2xx, as a provider does.
func (k keysvcInbox) deliverLikeStripe(endpoint string, body []byte) (response, bool) {
	return deliverLikeProvider(func() response { return k.sendToInbox(endpoint, body) })
}

func (k keysvcInbox) entry(t *testing.T, endpoint string, id any) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/inbox/%s/%v", k.keysvc.url, endpoint, id), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e map[string]any
	json.NewDecoder(resp.Body).Decode(&e)
	return e
}

func receiptOf(t *testing.T, r response) (status string, id int64) {
	t.Helper()
	var rec struct {
		Status  string `json:"status"`
		InboxID int64  `json:"inbox_id"`
	}
	if err := json.Unmarshal([]byte(r.body), &rec); err != nil {
		t.Fatalf("receipt %d %q: %v", r.status, r.body, err)
	}
	return rec.Status, rec.InboxID
}

// keysvc as a durable inbox in front of n8n: verify, save and queue in one
// transaction, acknowledge after the commit, forward until acknowledged.
func TestKeysvcInbox(t *testing.T) {
	k := startKeysvcInbox(t)
	ctx := context.Background()

	t.Run("refused and ignored deliveries", func(t *testing.T) {
		body := paymentSucceeded("evt_ki_forged", "pi_ki_f", "kio-f", 100)
		forged, _ := send(k.keysvc.url+"/v1/inbox/stripe", "application/json", body, stripeSigned("whsec_attacker", body))
		if forged.status != 401 || !strings.Contains(forged.body, "invalid_signature") {
			t.Errorf("forged delivery: %d %s, want 401 invalid_signature", forged.status, forged.body)
		}
		if _, found := k.row(t, "evt_ki_forged"); found {
			t.Error("a forged delivery was saved")
		}
		if r := k.sendToInbox("nobody", body); r.status != 404 || !strings.Contains(r.body, "unknown_endpoint") {
			t.Errorf("unknown endpoint: %d %s, want 404 unknown_endpoint", r.status, r.body)
		}
		other := stripeEvent("evt_ki_other", "customer.created", map[string]any{"id": "cus_1"})
		r := k.sendToInbox("stripe", other)
		status, id := receiptOf(t, r)
		if r.status != 200 || status != "ignored" {
			t.Fatalf("type outside the allowlist: %d %s, want 200 ignored", r.status, r.body)
		}
		time.Sleep(time.Second)
		if e := k.entry(t, "stripe", id); e["state"] != "ignored" || len(e["deliveries"].([]any)) != 0 || len(k.proxy.deliveries(id)) != 0 {
			t.Errorf("an ignored event: %v, forwarded %d times; want ignored and never forwarded", e, len(k.proxy.deliveries(id)))
		}
	})

	t.Run("delivered, decided once, traced", func(t *testing.T) {
		k.newOrder(t, "kio-1", 100)
		body := paymentSucceeded("evt_ki_1", "pi_ki_1", "kio-1", 100)
		r := k.sendToInbox("stripe", body)
		status, id := receiptOf(t, r)
		if r.status != 200 || status != "received" {
			t.Fatalf("delivery: %d %s, want 200 received", r.status, r.body)
		}
		if dup := k.sendToInbox("stripe", body); !strings.Contains(dup.body, `"status":"duplicate"`) {
			t.Errorf("second delivery: %d %s, want duplicate", dup.status, dup.body)
		}
		k.waitRow(t, "evt_ki_1", "processed")
		if s := k.orderState(t, "kio-1"); s != "confirmed" {
			t.Errorf("order kio-1 is %s, want confirmed", s)
		}
		// keysvc records the attempt once the target has answered.
		var e map[string]any
		waitFor(t, 10*time.Second, "the delivery to be recorded", func() bool {
			e = k.entry(t, "stripe", id)
			d, _ := e["deliveries"].([]any)
			return len(d) > 0
		})
		deliveries, _ := e["deliveries"].([]any)
		if e["state"] != "processed" || len(deliveries) != 1 || deliveries[0].(map[string]any)["status"] != float64(200) {
			t.Errorf("entry %v, want processed with one delivery answered 200", e)
		}
		if keys := k.proxy.deliveries(id); len(keys) != 1 || keys[0] != "evt:evt_ki_1" {
			t.Errorf("the target saw Idempotency-Key %v, want [evt:evt_ki_1]", keys)
		}
	})

	t.Run("a target down longer than the retries: failed, visible, replayed", func(t *testing.T) {
		body := paymentSucceeded("evt_ki_dead", "pi_ki_d", "kio-d", 100)
		r := k.sendToInbox("dead", body)
		_, id := receiptOf(t, r)
		var e map[string]any
		waitFor(t, 30*time.Second, "the entry to fail", func() bool {
			e = k.entry(t, "dead", id)
			return e["state"] == "failed"
		})
		deliveries := e["deliveries"].([]any)
		if len(deliveries) != 2 || deliveries[0].(map[string]any)["status"] != nil || !strings.Contains(fmt.Sprint(e["last_error"]), "refused") {
			t.Errorf("failed entry %v, want 2 attempts without answer and the reason", e)
		}
		if err := k.dead.start(); err != nil {
			t.Fatal(err)
		}
		replay, _ := send(fmt.Sprintf("%s/v1/inbox/dead/%d/replay", k.keysvc.url, id), "", nil, nil)
		if replay.status != 202 {
			t.Fatalf("replay: %d %s, want 202", replay.status, replay.body)
		}
		// Sooner than the recoverer (--inbox-recover-after 20s), which would
		// deliver an entry whose replay was lost.
		waitFor(t, 15*time.Second, "the replayed entry to be forwarded", func() bool { return k.entry(t, "dead", id)["state"] == "forwarded" })
		if again, _ := send(fmt.Sprintf("%s/v1/inbox/dead/%d/replay", k.keysvc.url, id), "", nil, nil); again.status != 202 {
			t.Errorf("replay of a forwarded entry: %d %s, want 202", again.status, again.body)
		}
		if r, _ := send(fmt.Sprintf("%s/v1/inbox/stripe/%d/replay", k.keysvc.url, id), "", nil, nil); r.status != 404 {
			t.Errorf("replay through another endpoint: %d %s, want 404", r.status, r.body)
		}
	})

	t.Run("n8n stopped for 60 s: acknowledged all along, delivered after", func(t *testing.T) {
		const n = 30
		var events []string
		for i := range n {
			k.newOrder(t, fmt.Sprintf("kio-down-%d", i), 100)
			events = append(events, fmt.Sprintf("evt_ki_down_%d", i))
		}
		if err := st.KillN8N(ctx); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		for i := range n {
			r := k.sendToInbox("stripe", paymentSucceeded(events[i], fmt.Sprintf("pi_ki_down_%d", i), fmt.Sprintf("kio-down-%d", i), 100))
			if r.status != 200 {
				t.Errorf("delivery %d while n8n is down: %d %s, want 200", i, r.status, r.body)
			}
			time.Sleep(2 * time.Second)
		}
		t.Logf("n8n was down for %s; keysvc acknowledged %d events meanwhile", time.Since(stopped).Round(time.Second), n)
		if err := st.StartN8N(ctx, runnerPath, k.opts.WebhookPath); err != nil {
			t.Fatal(err)
		}
		// The backlog drains at the endpoint's concurrency; the deadline is
		// generous because two cores run n8n, PostgreSQL and keysvc at once.
		back := time.Now()
		k.waitRows(t, events, "processed", 3*time.Minute)
		t.Logf("n8n back: the %d events were processed within %s", n, time.Since(back).Round(time.Second))
		for i := range n {
			if s := k.orderState(t, fmt.Sprintf("kio-down-%d", i)); s != "confirmed" {
				t.Errorf("order kio-down-%d is %s, want confirmed", i, s)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get(k.keysvc.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{"keysvc_inbox_queue_depth ", `keysvc_inbox_deliveries_total{outcome="forwarded"}`, `keysvc_inbox_deliveries_total{outcome="failed"} 1`,
			"keysvc_inbox_ack_seconds_count ", "process_resident_memory_bytes "} {
			if !strings.Contains(string(b), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

// 1,000 distinct events, each delivered twice, while keysvc is killed with
// SIGKILL twice and PostgreSQL is restarted once: every acknowledged event
// reaches the target with one stable Idempotency-Key, and its business
// effect happens once.
func TestKeysvcInboxUnderFaults(t *testing.T) {
	k := startKeysvcInbox(t)
	ctx := context.Background()
	const events = 1000
	execSQL(t, "INSERT INTO "+k.db.Orders().String()+" (id, amount, currency) SELECT 'kf-' || i, 100, 'eur' FROM generate_series(0, $1 - 1) i", events)

	var acked, failed atomic.Int64
	ackedEvents := make([]atomic.Bool, events)
	jobs := make(chan int, 2*events)
	for i := range events {
		jobs <- i
		jobs <- i
	}
	close(jobs)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				body := paymentSucceeded(fmt.Sprintf("evt_kf_%d", i), fmt.Sprintf("pi_kf_%d", i), fmt.Sprintf("kf-%d", i), 100)
				if _, ok := k.deliverLikeStripe("stripe", body); ok {
					ackedEvents[i].Store(true)
					acked.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	faults := []struct {
		at   int64
		what string
		do   func()
	}{
		{300, "keysvc killed", func() { k.keysvc.kill(); time.Sleep(time.Second); k.keysvc.start() }},
		{900, "PostgreSQL restarted (immediate)", func() {
			if err := st.RestartPostgres(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{1500, "keysvc killed", func() { k.keysvc.kill(); time.Sleep(time.Second); k.keysvc.start() }},
	}
	for _, f := range faults {
		for acked.Load() < f.at {
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("after %d acknowledgements: %s", acked.Load(), f.what)
		f.do()
	}
	wg.Wait()
	t.Logf("sent %d deliveries of %d events: %d acknowledged, %d never acknowledged", 2*events, events, acked.Load(), failed.Load())

	count := func(state string) int {
		var n int
		st.Business.QueryRow(ctx, "SELECT count(*) FROM "+k.db.Inbox().String()+" WHERE event_id LIKE 'evt:evt_kf_%' AND state = $1", state).Scan(&n)
		return n
	}
	processed := func() int { return count("processed") }
	// keysvc forwards everything it saved; then the work that n8n's crashed
	// executions left in processing is the n8n recoverer's.
	took := waitDrained(t, time.Minute, "keysvc forwarding every saved event", func() int { return count("received") })
	t.Logf("the last saved event was forwarded %s after the last acknowledgement", took.Round(time.Second))
	deadline := time.Now().Add(3 * time.Minute)
	for processed() < events && time.Now().Before(deadline) {
		time.Sleep(5 * time.Second)
		runWorkflowNoFatal(k.ids[generator.FileRecoverer])
	}
	var rows, effects, confirmed int
	st.Business.QueryRow(ctx, "SELECT count(*) FROM "+k.db.Inbox().String()+" WHERE event_id LIKE 'evt:evt_kf_%'").Scan(&rows)
	st.Business.QueryRow(ctx, "SELECT count(*) FROM "+k.db.Effects().String()+" WHERE effect_key LIKE 'confirm_order:kf-%'").Scan(&effects)
	st.Business.QueryRow(ctx, "SELECT count(*) FROM "+k.db.Orders().String()+" WHERE id LIKE 'kf-%' AND state = 'confirmed'").Scan(&confirmed)
	t.Logf("inbox rows %d, processed %d, effects %d, orders confirmed %d", rows, processed(), effects, confirmed)
	lost := 0
	for i := range events {
		if ackedEvents[i].Load() {
			if _, found := k.row(t, fmt.Sprintf("evt_kf_%d", i)); !found {
				lost++
			}
		}
	}
	if lost != 0 || failed.Load() != 0 {
		t.Errorf("%d acknowledged events have no inbox row; %d deliveries were never acknowledged", lost, failed.Load())
	}
	if rows != events || processed() != events || effects != events || confirmed != events {
		t.Errorf("want %d of each", events)
	}
	// Every event reached the target at least once, always with its key.
	rowsByID, err := st.Business.Query(ctx, "SELECT id, event_id FROM "+k.db.Inbox().String()+" WHERE event_id LIKE 'evt:evt_kf_%'")
	if err != nil {
		t.Fatal(err)
	}
	unstable, neverDelivered, redelivered := 0, 0, 0
	for rowsByID.Next() {
		var id int64
		var key string
		rowsByID.Scan(&id, &key)
		keys := k.proxy.deliveries(id)
		if len(keys) == 0 {
			neverDelivered++
		}
		if len(keys) > 1 {
			redelivered++
		}
		for _, got := range keys {
			if got != key {
				unstable++
			}
		}
	}
	rowsByID.Close()
	t.Logf("forwarded once: %d, more than once: %d, never: %d", events-redelivered-neverDelivered, redelivered, neverDelivered)
	if unstable != 0 {
		t.Errorf("%d deliveries carried another Idempotency-Key than their event's", unstable)
	}
	if neverDelivered != 0 {
		t.Errorf("%d acknowledged events never reached the target", neverDelivered)
	}
}
