package e2e

import (
	"bytes"
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

	"github.com/idemhook/idemhook/internal/generator"
)

// reception is one forward the target got from keysvc.
type reception struct {
	id, key    string // X-Idemhook-Inbox-Id, Idempotency-Key
	start, end time.Time
	status     int  // n8n's answer (502: n8n unreachable; 0: none yet)
	answered   bool // keysvc was still there to hear it
	// hungUp is when keysvc closed the call (killed, or its timeout or
	// lease fence ended it); zero while it waits.
	hungUp time.Time
	header http.Header
	body   []byte
}

// openUntil is when keysvc's side of this forward ended: it hung up, or
// heard the answer. Zero while it is still open.
func (r reception) openUntil() time.Time {
	if !r.hungUp.IsZero() && (r.end.IsZero() || r.hungUp.Before(r.end)) {
		return r.hungUp
	}
	return r.end
}

// mayBeDone says whether the target may have taken this forward: it
// answered 2xx (whether keysvc heard it or not), or had not answered when
// keysvc hung up. A forward after such a one is a re-send; one after a
// refusal (a 5xx, even one keysvc gave up waiting for) is a retry the
// target asked for.
func (r reception) mayBeDone() bool { return r.status == 0 || r.status/100 == 2 }

// targetProxy is a target keysvc forwards to: it records every forward it
// gets (a target with no unique constraint), passes it to a backend (n8n's
// target workflow) and relays the backend's answer. The backend runs a
// forward to its end even when keysvc hangs up, as n8n does.
type targetProxy struct {
	srv *httptest.Server

	mu  sync.Mutex
	got []reception
	// onAnswer, when set, runs once, after n8n answered a forward 2xx and
	// before keysvc hears it.
	onAnswer func(id string)
}

// toN8N is a targetProxy's backend: n8n's webhook at path.
func toN8N(path string) func(ctx context.Context, header http.Header, body []byte) (int, []byte) {
	return func(ctx context.Context, header http.Header, body []byte) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.WebhookURL+"/webhook/"+path, bytes.NewReader(body))
		req.Header = header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return http.StatusBadGateway, []byte(err.Error())
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, answer
	}
}

// slowOK is a targetProxy's backend that takes 3 s and answers 200: a
// target that keeps no state of keysvc's, so that every forward keysvc
// sends again reaches it, and slow enough that its endpoint always has
// deliveries in flight during a load.
func slowOK(context.Context, http.Header, []byte) (int, []byte) {
	time.Sleep(3 * time.Second)
	return http.StatusOK, []byte(`{"status":"accepted"}`)
}

func newTargetProxy(t *testing.T, backend func(ctx context.Context, header http.Header, body []byte) (int, []byte)) *targetProxy {
	p := &targetProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// Recorded as it arrives: the backend may act on it long before it
		// answers (n8n saving its execution after a database restart).
		p.mu.Lock()
		n := len(p.got)
		p.got = append(p.got, reception{id: r.Header.Get("X-Idemhook-Inbox-Id"), key: r.Header.Get("Idempotency-Key"), start: time.Now(), header: r.Header.Clone(), body: body})
		p.mu.Unlock()
		// The server ends the request's context when keysvc's connection
		// closes: keysvc killed, or its call ended by its timeout or fence.
		stopWatching := context.AfterFunc(r.Context(), func() {
			p.mu.Lock()
			p.got[n].hungUp = time.Now()
			p.mu.Unlock()
		})
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Minute)
		defer cancel()
		status, answer := backend(ctx, r.Header.Clone(), body)
		if status/100 == 2 {
			p.mu.Lock()
			hook := p.onAnswer
			p.onAnswer = nil
			p.mu.Unlock()
			if hook != nil {
				hook(r.Header.Get("X-Idemhook-Inbox-Id"))
			}
		}
		stopWatching()
		p.mu.Lock()
		p.got[n].status, p.got[n].answered, p.got[n].end = status, r.Context().Err() == nil, time.Now()
		p.mu.Unlock()
		w.WriteHeader(status)
		w.Write(answer)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// receptions returns the forwards of entry id, oldest first (every entry's
// when id is 0).
func (p *targetProxy) receptions(id int64) []reception {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []reception
	for _, r := range p.got {
		if id == 0 || r.id == fmt.Sprint(id) {
			out = append(out, r)
		}
	}
	return out
}

// deliveries returns the Idempotency-Key of every forward of entry id.
func (p *targetProxy) deliveries(id int64) []string {
	var keys []string
	for _, r := range p.receptions(id) {
		keys = append(keys, r.key)
	}
	return keys
}

type keysvcInbox struct {
	inboxDeployment
	keysvc    *keysvcProc
	proxy     *targetProxy // in front of n8n's target workflow (endpoint stripe)
	plain     *targetProxy // a target that keeps no state (endpoint plain)
	dead      *opsAPI      // the target of the "dead" endpoint, down until a test starts it
	args, env []string
}

// startKeysvcInbox deploys the inbox pattern with keysvc as its receiver:
// keysvc saves and forwards to the generated target workflow (through the
// recording proxy), n8n's worker decides the effects. flags are added to
// keysvc's (a later flag wins).
func startKeysvcInbox(t *testing.T, flags ...string) keysvcInbox {
	t.Helper()
	needStack(t)
	api := newOpsAPI(t, true)
	opts := inboxOptions("ki", api.url)
	opts.Receiver = generator.ReceiverKeysvc
	// Every test that starts it redeploys the same workflows on purpose:
	// each keysvc and each assertion uses event ids of its own.
	shareName(opts.WorkflowName)
	d := deployInbox(t, opts, api)
	proxy := newTargetProxy(t, toN8N(opts.WebhookPath))
	plain := newTargetProxy(t, slowOK)
	dead := newOpsAPI(t, false)
	endpoints := map[string]any{"endpoints": []map[string]any{
		{"name": "stripe", "provider": "stripe", "target": proxy.srv.URL, "events": generator.DefaultEvents, "max_attempts": 200},
		{"name": "plain", "provider": "stripe", "target": plain.srv.URL, "max_attempts": 200},
		{"name": "dead", "provider": "stripe", "target": dead.url, "max_attempts": 2},
		// n8n's target workflow, forwarded to in batches of up to 10.
		{"name": "batched", "provider": "stripe", "target": st.WebhookURL + "/webhook/" + opts.WebhookPath, "events": generator.DefaultEvents,
			"max_attempts": 200, "batch": 10},
	}}
	raw, _ := json.Marshal(endpoints)
	file := filepath.Join(t.TempDir(), "endpoints.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--table", "ki_processed_events", "--create-schema", "--endpoints", file, "--inbox-schema", "ki",
		"--inbox-backoff", "200ms", "--inbox-max-backoff", "3s", "--inbox-recover-after", "20s", "--inbox-delivery-timeout", "10s"}, flags...)
	env := []string{"KEYSVC_SECRET_STRIPE=" + stripeSecret}
	k := launchKeysvc(t, "ki", args, env)
	return keysvcInbox{inboxDeployment: d, keysvc: k, proxy: proxy, plain: plain, dead: dead, args: args, env: env}
}

// replica starts another keysvc on the same database, schema and endpoints.
func (k keysvcInbox) replica(t *testing.T, name string) *keysvcProc {
	return launchKeysvc(t, name, k.args, k.env)
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

	// Forwarding is at least once: the target may get a forward again (keysvc
	// killed after the target acted, a timeout). The generated target
	// workflow drops it by the entry it names: the worker claims a row only
	// while it is received.
	// An endpoint with a batch: keysvc forwards the saved events several at
	// a time, n8n's target workflow decides each in its own transaction and
	// answers each, and keysvc records one acknowledged delivery per event.
	t.Run("batched forwards, one answer per event", func(t *testing.T) {
		const n = 40
		var events []string
		for i := range n {
			k.newOrder(t, fmt.Sprintf("kio-b-%d", i), 100)
			events = append(events, fmt.Sprintf("evt_ki_b_%d", i))
		}
		for i, ev := range events {
			if r := k.sendToInbox("batched", paymentSucceeded(ev, fmt.Sprintf("pi_ki_b_%d", i), fmt.Sprintf("kio-b-%d", i), 100)); r.status != 200 {
				t.Fatalf("delivery %d: %d %s", i, r.status, r.body)
			}
		}
		k.waitRows(t, events, "processed", time.Minute)
		for i, ev := range events {
			row, _ := k.row(t, ev)
			if e := k.effects(t, fmt.Sprintf("kio-b-%d", i)); len(e) != 1 || k.orderState(t, fmt.Sprintf("kio-b-%d", i)) != "confirmed" || row.Attempts != 1 {
				t.Errorf("%s: effects %v, row %+v; want one effect on the first attempt, the order confirmed", ev, e, row)
			}
			var answered, ok int
			waitFor(t, 10*time.Second, "the forward of "+ev+" to be recorded", func() bool {
				st.Business.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE status = 200) FROM "+k.db.Deliveries().String()+" WHERE inbox_id = $1", row.ID).Scan(&answered, &ok)
				return answered > 0
			})
			if answered != 1 || ok != 1 {
				t.Errorf("%s: %d deliveries recorded, %d answered 200; want one, answered 200", ev, answered, ok)
			}
		}
		resp, err := http.Get(k.keysvc.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var forwards, carried float64
		for _, line := range strings.Split(string(b), "\n") {
			fmt.Sscanf(line, `keysvc_inbox_batch_events_count{endpoint="batched"} %g`, &forwards)
			fmt.Sscanf(line, `keysvc_inbox_batch_events_sum{endpoint="batched"} %g`, &carried)
		}
		t.Logf("%d events forwarded in %.0f forwards (n8n executions of the target workflow)", n, forwards)
		if carried != n || forwards < 1 || forwards >= n {
			t.Errorf("%.0f forwards carried %.0f events; want the %d events in fewer forwards than events", forwards, carried, n)
		}
	})

	t.Run("a re-sent forward produces no second effect", func(t *testing.T) {
		k.newOrder(t, "kio-r", 100)
		r := k.sendToInbox("stripe", paymentSucceeded("evt_ki_resend", "pi_ki_r", "kio-r", 100))
		_, id := receiptOf(t, r)
		first := k.waitRow(t, "evt_ki_resend", "processed")
		var got []reception
		waitFor(t, 10*time.Second, "the forward to be recorded", func() bool { got = k.proxy.receptions(id); return len(got) == 1 })
		// Sent again exactly as keysvc sent it, twice in a row and twice at once.
		resend := func() int {
			req, _ := http.NewRequest(http.MethodPost, st.WebhookURL+"/webhook/"+k.opts.WebhookPath, bytes.NewReader(got[0].body))
			req.Header = got[0].header.Clone()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		statuses := []int{resend(), resend()}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := resend()
				mu.Lock()
				statuses = append(statuses, s)
				mu.Unlock()
			}()
		}
		wg.Wait()
		var tasks int
		st.Business.QueryRow(ctx, "SELECT count(*) FROM "+k.db.Outbox().String()+" WHERE operation_key = 'order_confirmation:kio-r'").Scan(&tasks)
		after, _ := k.row(t, "evt_ki_resend")
		effects := k.effects(t, "kio-r")
		t.Logf("forward of entry %d sent again 4 times (answers %v): effects %d, outbox tasks %d, row %s after %d attempts (was %d)",
			id, statuses, len(effects), tasks, after.State, after.Attempts, first.Attempts)
		for _, s := range statuses {
			if s != 200 {
				t.Errorf("a re-sent forward was answered %d, want 200: the target acknowledges what it already has", s)
			}
		}
		if len(effects) != 1 || tasks != 1 || after.State != "processed" || after.Attempts != first.Attempts {
			t.Errorf("after re-sent forwards: effects %v, %d outbox tasks, row %+v; want one effect, one task, the row as it was", effects, tasks, after)
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

// fault is one fault a load test injected, and when.
type fault struct {
	at   time.Time
	what string
	kill bool // a keysvc killed, else PostgreSQL stopped
}

// resendCause says which fault made keysvc send r again after prev (a
// forward keysvc took for done or never heard answered): the first fault
// between the two, or "no answer" when none was (a call that timed out).
func resendCause(prev, r reception, faults []fault) (fault, bool) {
	for _, f := range faults {
		if !f.at.Before(prev.start) && f.at.Before(r.start) {
			return f, true
		}
	}
	return fault{}, false
}

// forwardReport is what a target got of one endpoint's entries during a
// load: every forward, and which of them were re-sends.
type forwardReport struct {
	keys    map[string]string // inbox id → event key
	byEntry map[string][]reception
	answers map[string]int // by status, or "not heard by keysvc"
	resent  map[string]int // by cause
	resends []string
	// overlaps describes each forward that reached the target while an
	// earlier one of its entry was still there; afterHangUp counts those
	// whose earlier forward keysvc had already hung up on (the target still
	// at work, keysvc no longer waiting).
	overlaps    []string
	afterHangUp int
	// resentAfter is how long after each kill its re-sends reached the
	// target.
	resentAfter map[string][]time.Duration

	received, receptions, retried, overlapping, unstable int
}

// reportForwards reads the entries whose event ids are like eventLike and
// what proxy got of them. A re-send is a forward after one that keysvc
// heard answered 2xx, or never heard answered; a forward after refusals
// only is a retry. Two calls of one entry open in keysvc at once would be
// two keysvcs delivering one job (overlapping); a forward while the target
// still works on one keysvc hung up on (killed, timed out) is at least once
// doing its job, and the target's key makes it harmless (afterHangUp).
func reportForwards(t *testing.T, k keysvcInbox, proxy *targetProxy, eventLike string, faults []fault) forwardReport {
	t.Helper()
	r := forwardReport{keys: map[string]string{}, byEntry: map[string][]reception{}, answers: map[string]int{}, resent: map[string]int{},
		resentAfter: map[string][]time.Duration{}}
	rows, err := st.Business.Query(context.Background(), "SELECT id::text, event_id FROM "+k.db.Inbox().String()+" WHERE event_id LIKE $1", eventLike)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, key string
		rows.Scan(&id, &key)
		r.keys[id] = key
	}
	rows.Close()
	for _, rec := range proxy.receptions(0) {
		if _, ours := r.keys[rec.id]; !ours {
			continue
		}
		r.byEntry[rec.id] = append(r.byEntry[rec.id], rec)
		if rec.answered {
			r.answers[fmt.Sprint(rec.status)]++
		} else {
			r.answers["not heard by keysvc"]++
		}
	}
	r.received = len(r.byEntry)
	for id, got := range r.byEntry {
		r.receptions += len(got)
		for i, rec := range got {
			if rec.key != r.keys[id] {
				r.unstable++
			}
			if i == 0 {
				continue
			}
			for _, earlier := range got[:i] {
				if !earlier.end.IsZero() && !rec.start.Before(earlier.end) {
					continue
				}
				kind := "keysvc's call still open"
				if until := earlier.openUntil(); until.IsZero() || rec.start.Before(until) {
					r.overlapping++
				} else {
					r.afterHangUp++
					kind = fmt.Sprintf("keysvc had hung up at %s", until.Format("15:04:05.000"))
				}
				r.overlaps = append(r.overlaps, fmt.Sprintf("entry %s: forwarded at %s while the one of %s was at the target (answered %d at %s; %s)",
					id, rec.start.Format("15:04:05.000"), earlier.start.Format("15:04:05.000"), earlier.status, earlier.end.Format("15:04:05.000"), kind))
				break
			}
			var prev *reception
			for j := i - 1; j >= 0; j-- {
				if got[j].mayBeDone() {
					prev = &got[j]
					break
				}
			}
			if prev == nil {
				r.retried++
				continue
			}
			cause := "no answer (a timeout)"
			if f, ok := resendCause(*prev, rec, faults); ok {
				cause = f.what
				if f.kill {
					r.resentAfter[f.what] = append(r.resentAfter[f.what], rec.start.Sub(f.at).Round(100*time.Millisecond))
				}
			}
			r.resent[cause]++
			r.resends = append(r.resends, fmt.Sprintf("entry %s: answered %d (heard: %v) %s to %s, sent again at %s: %s", id, prev.status, prev.answered,
				prev.start.Format("15:04:05.000"), prev.end.Format("15:04:05.000"), rec.start.Format("15:04:05.000"), cause))
		}
	}
	return r
}

// 1,000 distinct events to n8n's target workflow and 500 to a target that
// keeps no state, each delivered twice, to two keysvc replicas on one
// database (a delivery's retries alternate between them, as behind a load
// balancer), while replica a, then b, then a again is killed with SIGKILL
// (and started a second later), and PostgreSQL is stopped immediately
// between n8n's 2xx and keysvc's bookkeeping and started again three
// seconds later. Each target records every forward, as one with no unique
// constraint would. Counted and printed: deliveries sent and acknowledged,
// entries forwarded, forwards received, re-sends by cause, the deliveries
// in flight at each kill and how soon they were taken over, each replica's
// share, and events lost; and every effect in n8n happens once.
func TestKeysvcInboxUnderFaults(t *testing.T) {
	k := startKeysvcInbox(t, "--inbox-delivery-timeout", "30s") // the default; rescue after the default 15 s
	a := k.keysvc
	b := k.replica(t, "ki-b")
	replicas := []*keysvcProc{a, b}
	ctx := context.Background()
	const events, plainEvents = 1000, 500
	const concurrency = 4 // each endpoint's, per keysvc
	execSQL(t, "INSERT INTO "+k.db.Orders().String()+" (id, amount, currency) SELECT 'kf-' || i, 100, 'eur' FROM generate_series(0, $1 - 1) i", events)

	type delivery struct {
		endpoint string
		i        int
	}
	var sent, acked, unacked atomic.Int64
	ackedEvents := map[string][]atomic.Bool{"stripe": make([]atomic.Bool, events), "plain": make([]atomic.Bool, plainEvents)}
	jobs := make(chan delivery, 2*(events+plainEvents))
	for i := range events {
		jobs <- delivery{"stripe", i}
		if i < plainEvents {
			jobs <- delivery{"plain", i}
		}
		jobs <- delivery{"stripe", i}
		if i < plainEvents {
			jobs <- delivery{"plain", i}
		}
	}
	close(jobs)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range jobs {
				body := paymentSucceeded(fmt.Sprintf("evt_kf_%d", d.i), fmt.Sprintf("pi_kf_%d", d.i), fmt.Sprintf("kf-%d", d.i), 100)
				if d.endpoint == "plain" {
					body = stripeEvent(fmt.Sprintf("evt_kp_%d", d.i), "customer.created", map[string]any{"id": fmt.Sprintf("cus_%d", d.i)})
				}
				if _, ok := deliverLikeProvider(func() response {
					n := sent.Add(1)
					r, err := send(replicas[n%2].url+"/v1/inbox/"+d.endpoint, "application/json", body, stripeSigned(stripeSecret, body))
					if err != nil {
						return response{body: err.Error()}
					}
					return r
				}); ok {
					ackedEvents[d.endpoint][d.i].Store(true)
					acked.Add(1)
				} else {
					unacked.Add(1)
				}
				time.Sleep(time.Second) // the deliveries keep coming while the faults happen
			}
		}()
	}
	kill := func(p *keysvcProc, name string) func() fault {
		return func() fault {
			f := fault{at: time.Now(), what: "keysvc " + name + " killed", kill: true}
			p.kill()
			time.Sleep(time.Second)
			p.start()
			return f
		}
	}
	var outage struct {
		id         string
		start, end time.Time
	}
	stopPostgres := func() fault {
		restarted := make(chan error, 1)
		k.proxy.mu.Lock()
		k.proxy.onAnswer = func(id string) {
			outage.id, outage.start = id, time.Now()
			if err := st.StopPostgres(ctx); err != nil {
				restarted <- err
				return
			}
			go func() {
				time.Sleep(3 * time.Second)
				err := st.StartPostgres(ctx)
				outage.end = time.Now()
				restarted <- err
			}()
		}
		k.proxy.mu.Unlock()
		if err := <-restarted; err != nil {
			t.Fatal(err)
		}
		return fault{at: outage.start, what: "PostgreSQL stopped between a target's 2xx and keysvc's bookkeeping"}
	}
	var faults []fault
	for _, f := range []struct {
		after int // forwards n8n's target received
		do    func() fault
	}{{150, kill(a, "a")}, {350, stopPostgres}, {550, kill(b, "b")}, {750, kill(a, "a again")}} {
		for len(k.proxy.receptions(0)) < f.after {
			time.Sleep(50 * time.Millisecond)
		}
		done := f.do()
		t.Logf("after %d forwards and %d acknowledgements: %s", f.after, acked.Load(), done.what)
		faults = append(faults, done)
	}
	wg.Wait()
	total := 2 * (events + plainEvents)
	t.Logf("the provider sent %d deliveries of %d events (%d attempts): %d acknowledged, %d never acknowledged", total, events+plainEvents, sent.Load(), acked.Load(), unacked.Load())

	count := func(state string) int {
		var n int
		st.Business.QueryRow(ctx, "SELECT count(*) FROM "+k.db.Inbox().String()+" WHERE (event_id LIKE 'evt:evt_kf_%' OR event_id LIKE 'evt:evt_kp_%') AND state = $1", state).Scan(&n)
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
	var effects, confirmed int
	st.Business.QueryRow(ctx, "SELECT count(*) FROM "+k.db.Effects().String()+" WHERE effect_key LIKE 'confirm_order:kf-%'").Scan(&effects)
	st.Business.QueryRow(ctx, "SELECT count(*) FROM "+k.db.Orders().String()+" WHERE id LIKE 'kf-%' AND state = 'confirmed'").Scan(&confirmed)
	forwarded := func(eventLike string) int {
		var n int
		st.Business.QueryRow(ctx, "SELECT count(DISTINCT d.inbox_id) FROM "+k.db.Deliveries().String()+" d JOIN "+k.db.Inbox().String()+
			" e ON e.id = d.inbox_id WHERE e.event_id LIKE $1 AND d.status BETWEEN 200 AND 299 AND d.kind = 'answered'", eventLike).Scan(&n)
		return n
	}
	reports := map[string]forwardReport{
		"stripe": reportForwards(t, k, k.proxy, "evt:evt_kf_%", faults),
		"plain":  reportForwards(t, k, k.plain, "evt:evt_kp_%", faults),
	}
	// The deliveries in flight at each kill, rescued: how many, how soon.
	// A rescue belongs to the kill that ended the attempt it took over (the
	// first kill after the target got that attempt), which is not always
	// the last kill before the rescue: a replica killed soon after another
	// is killed before the first one's deliveries are rescued.
	rescuedAt := map[string][]time.Duration{}
	rescues, err := st.Business.Query(ctx, "SELECT e.endpoint, e.id::text, d.at FROM "+k.db.Deliveries().String()+" d JOIN "+k.db.Inbox().String()+
		" e ON e.id = d.inbox_id WHERE (e.event_id LIKE 'evt:evt_kf_%' OR e.event_id LIKE 'evt:evt_kp_%') AND d.kind = 'rescued'")
	if err != nil {
		t.Fatal(err)
	}
	for rescues.Next() {
		var endpoint, id string
		var at time.Time
		rescues.Scan(&endpoint, &id, &at)
		var inFlight time.Time // when the target got the attempt taken over, if it did
		for _, rec := range reports[endpoint].byEntry[id] {
			if rec.start.Before(at) {
				inFlight = rec.start
			}
		}
		var by *fault
		for i := range faults {
			f := &faults[i]
			if !f.kill || !f.at.Before(at) {
				continue
			}
			by = f
			if !inFlight.IsZero() && !f.at.Before(inFlight) {
				break
			}
		}
		if by == nil || (!inFlight.IsZero() && by.at.Before(inFlight)) {
			t.Errorf("entry %s was rescued at %s, not in flight at any kill", id, at.Format("15:04:05.000"))
			continue
		}
		rescuedAt[endpoint+": "+by.what] = append(rescuedAt[endpoint+": "+by.what], at.Sub(by.at).Round(100*time.Millisecond))
	}
	rescues.Close()
	// Which replica completed each delivery job (River's attempted_by
	// names the keysvc, whose name holds its pid).
	replicaOf := map[string]string{}
	for name, p := range map[string]*keysvcProc{"a": a, "b": b} {
		for _, pid := range p.pids {
			replicaOf[fmt.Sprintf("_%d_", pid)] = name
		}
	}
	jobsBy := map[string]int{}
	done, err := st.Business.Query(ctx, `SELECT attempted_by[array_upper(attempted_by, 1)] FROM ki.river_job
WHERE kind = 'idemhook_inbox_delivery' AND state = 'completed' AND args->>'endpoint' IN ('stripe', 'plain')`)
	if err != nil {
		t.Fatal(err)
	}
	for done.Next() {
		var w string
		done.Scan(&w)
		for pid, name := range replicaOf {
			if strings.Contains(w, pid) {
				jobsBy[name]++
			}
		}
	}
	done.Close()

	t.Logf("sent %d deliveries (%d attempts), acknowledged %d, never acknowledged %d", total, sent.Load(), acked.Load(), unacked.Load())
	for _, endpoint := range []string{"stripe", "plain"} {
		r := reports[endpoint]
		lost := 0
		for i := range ackedEvents[endpoint] {
			prefix := map[string]string{"stripe": "evt:evt_kf_", "plain": "evt:evt_kp_"}[endpoint]
			found := false
			for id, key := range r.keys {
				if key == fmt.Sprint(prefix, i) && len(r.byEntry[id]) > 0 {
					found = true
				}
			}
			if ackedEvents[endpoint][i].Load() && !found {
				lost++
			}
		}
		like := map[string]string{"stripe": "evt:evt_kf_%", "plain": "evt:evt_kp_%"}[endpoint]
		t.Logf("%s: %d events; a 2xx recorded for %d; received by the target %d (%d forwards, answers %v); re-sent %v; retried after a refusal %d; two calls of one entry open at once %d; a forward while the target still worked on one keysvc had hung up on %d; lost %d",
			endpoint, len(ackedEvents[endpoint]), forwarded(like), r.received, r.receptions, r.answers, r.resent, r.retried, r.overlapping, r.afterHangUp, lost)
		for _, line := range r.resends {
			t.Logf("  %s re-send: %s", endpoint, line)
		}
		for _, line := range r.overlaps {
			t.Logf("  %s overlap: %s", endpoint, line)
		}
		if lost != 0 || r.unstable != 0 || r.overlapping != 0 {
			t.Errorf("%s: %d acknowledged events never reached the target, %d forwards carried another key, %d calls opened while keysvc had another of their entry open", endpoint, lost, r.unstable, r.overlapping)
		}
		for _, f := range faults {
			n, rescued := r.resent[f.what], rescuedAt[endpoint+": "+f.what]
			if f.kill {
				t.Logf("%s: %s: %d deliveries in flight rescued, after %v; %d re-sent, received again after %v", endpoint, f.what, len(rescued), rescued, n, r.resentAfter[f.what])
			}
			switch {
			case f.kill && (n > concurrency || len(rescued) > concurrency):
				t.Errorf("%s: %s: %d re-sends, %d rescues, want at most the endpoint's concurrency, %d", endpoint, f.what, n, len(rescued), concurrency)
			case !f.kill && n != 0:
				t.Errorf("%s: %s: %d re-sends, want none", endpoint, f.what, n)
			}
			for _, d := range append(rescued, r.resentAfter[f.what]...) {
				if d > 30*time.Second {
					t.Errorf("%s: %s: a delivery in flight was taken over or sent again %s after, want within 30 s", endpoint, f.what, d)
				}
			}
		}
	}
	t.Logf("delivery jobs completed by keysvc a: %d, by b: %d", jobsBy["a"], jobsBy["b"])
	t.Logf("n8n: processed %d, effects %d, orders confirmed %d", processed(), effects, confirmed)
	if unacked.Load() != 0 {
		t.Errorf("%d deliveries were never acknowledged", unacked.Load())
	}
	if processed() != events || effects != events || confirmed != events || count("forwarded") != plainEvents {
		t.Errorf("want %d events processed, effects, orders confirmed; %d forwarded to the plain target (%d)", events, plainEvents, count("forwarded"))
	}
	if jobsBy["a"] == 0 || jobsBy["b"] == 0 {
		t.Errorf("the replicas did not share the work: a %d, b %d", jobsBy["a"], jobsBy["b"])
	}
	// The forward answered while PostgreSQL was down was recorded once it
	// was back, and not sent again.
	var status, attemptsRecorded int
	st.Business.QueryRow(ctx, "SELECT count(*), max(status) FROM "+k.db.Deliveries().String()+" WHERE inbox_id = $1::bigint AND kind = 'answered'", outage.id).Scan(&attemptsRecorded, &status)
	t.Logf("entry %s, answered 200 while PostgreSQL was down (%s), was received by the target %d time(s); %d attempt recorded, status %d",
		outage.id, outage.end.Sub(outage.start).Round(100*time.Millisecond), len(reports["stripe"].byEntry[outage.id]), attemptsRecorded, status)
	if len(reports["stripe"].byEntry[outage.id]) != 1 || attemptsRecorded != 1 || status/100 != 2 {
		t.Errorf("the 2xx answered during the outage: want it received once and recorded once")
	}
}
