package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

	"github.com/chromedp/chromedp"
	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/headless"
	"github.com/idemhook/idemhook/internal/nodered"
	"github.com/idemhook/idemhook/internal/sandbox"
)

// stepRecorder stands in for the API a Node-RED user's step calls: it
// counts the runs of the step per key, and fails the first runs of the keys
// told to fail.
type stepRecorder struct {
	*httptest.Server
	mu    sync.Mutex
	runs  map[string]int
	fails map[string]int // runs still to fail, per event id
	held  map[string]chan struct{}
	// holding counts the runs waiting on a held event.
	holding atomic.Int32
}

func newStepRecorder(t *testing.T) *stepRecorder {
	r := &stepRecorder{runs: map[string]int{}, fails: map[string]int{}, held: map[string]chan struct{}{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var run struct{ Key, Event string }
		b, _ := io.ReadAll(req.Body)
		json.Unmarshal(b, &run)
		r.mu.Lock()
		held := r.held[run.Event]
		r.mu.Unlock()
		if held != nil {
			r.holding.Add(1)
			<-held
			r.holding.Add(-1)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fails[run.Event] > 0 {
			r.fails[run.Event]--
			http.Error(w, "the CRM is down", http.StatusServiceUnavailable)
			return
		}
		r.runs[run.Key]++
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *stepRecorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[key]
}

// hold makes the runs of event wait until the returned release is called:
// a step that is still running.
func (r *stepRecorder) hold(event string) (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.held[event] = ch
	r.mu.Unlock()
	return func() { close(ch) }
}

func (r *stepRecorder) failNext(event string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails[event] = n
}

// recordingStep is the user's step of the tests: it posts the event's key
// and id to RECORDER_URL, and fails when that fails.
const recordingStep = `const body = JSON.stringify({ key: msg.key, event: (msg.payload && msg.payload.id) || '' });
await new Promise((resolve, reject) => {
  const req = http.request(env.get('RECORDER_URL'), { method: 'POST', headers: { 'Content-Type': 'application/json' } }, (res) => {
    let text = '';
    res.on('data', (c) => { text += c; });
    res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error('the step failed: ' + res.statusCode + ' ' + text))));
  });
  req.on('error', reject);
  req.end(body);
});
return msg;
`

// redFlow generates the Node-RED flow for opts, as idemhook generate
// --target node-red does, with the step replaced by recordingStep, as a user
// puts their own into it.
func redFlow(t *testing.T, opts generator.Options) []map[string]any {
	t.Helper()
	no, err := nodered.FromGenerate(opts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := nodered.Flow(no)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []map[string]any
	if err := json.Unmarshal(raw, &nodes); err != nil {
		t.Fatal(err)
	}
	replaced := false
	for _, n := range nodes {
		if n["name"] == nodered.NodeStep {
			n["func"] = recordingStep
			n["libs"] = []any{map[string]any{"var": "http", "module": "http"}}
			replaced = true
		}
	}
	if !replaced {
		t.Fatalf("no %q node in the flow", nodered.NodeStep)
	}
	return nodes
}

type redSetup struct {
	red      *sandbox.NodeRED
	keysvc   *keysvcProc
	recorder *stepRecorder
}

const redToken = "e2e-node-red-keysvc-admin-token"

// startRed runs keysvc (on the stack's PostgreSQL, with a token and the
// Stripe secret) and Node-RED with flows, reading keysvc's URL and token
// from its environment.
func startRed(t *testing.T, table string, flows ...[]map[string]any) *redSetup {
	t.Helper()
	s := &redSetup{recorder: newStepRecorder(t)}
	s.keysvc = launchKeysvc(t, table, []string{"--table", table, "--create-schema"}, []string{"KEYSVC_TOKEN=" + redToken, "KEYSVC_SECRET_STRIPE=" + stripeSecret})
	var all []map[string]any
	for _, f := range flows {
		all = append(all, f...)
	}
	raw, _ := json.Marshal(all)
	var err error
	s.red, err = sandbox.StartNodeRED(context.Background(), raw, []string{"KEYSVC_URL=" + s.keysvc.url, "KEYSVC_TOKEN=" + redToken,
		"RECORDER_URL=" + s.recorder.URL, "KEYSVC_TARGET_TOKEN=" + redTargetToken}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.red.Close()
		if t.Failed() {
			t.Logf("Node-RED's log: %s", s.red.Log)
		}
	})
	return s
}

const redTargetToken = "e2e-node-red-target-token"

// redAnswer is the flow's answer: its JSON, and the response it came in.
type redAnswer struct {
	Status   string `json:"status"`
	Key      string `json:"key"`
	Released bool   `json:"released"`
	response
}

func answerOf(r response) redAnswer {
	a := redAnswer{response: r}
	json.Unmarshal([]byte(r.body), &a)
	return a
}

func redPost(t *testing.T, url, contentType string, body []byte, header map[string]string) redAnswer {
	t.Helper()
	return answerOf(post(t, url, contentType, body, header))
}

// redSend is redPost for goroutines.
func redSend(url, contentType string, body []byte, header map[string]string) (redAnswer, error) {
	r, err := send(url, contentType, body, header)
	return answerOf(r), err
}

// keysvc's guard as a Node-RED 5 flow, in real Node-RED, with keysvc on
// PostgreSQL 16: the seed's run (A, A again with another signature header,
// B: the step runs twice; processed, duplicate, processed), a body without
// id keyed by SHA-256, 20 simultaneous deliveries of one event (the step
// runs once), a step that fails (the key is released and the retry runs
// it), keysvc stopped (503, the step not run), Stripe-signed deliveries
// (genuine 200, forged and stale 401 with nothing reserved), and every
// conformance vector through the flow giving the key idemhook key gives.
func TestNodeRED(t *testing.T) {
	needStack(t)
	plain := generator.Options{WebhookPath: "nr-plain"}
	signed := generator.Options{WebhookPath: "nr-stripe", Verify: "stripe"}
	flows := [][]map[string]any{redFlow(t, plain), redFlow(t, signed)}
	type group struct{ preset, scope string }
	var groups []group
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[group]bool{}
	for _, v := range vectors {
		g := group{v.Preset, v.Scope}
		if g.preset == "" || v.Error == "invalid_scope" || seen[g] {
			continue
		}
		seen[g] = true
		groups = append(groups, g)
		flows = append(flows, redFlow(t, generator.Options{WebhookPath: fmt.Sprintf("nr-vectors-%d", len(groups)), Preset: g.preset, Scope: g.scope}))
	}
	s := startRed(t, "nr_events", flows...)
	base := s.red.URL + "/"

	t.Run("seed run", func(t *testing.T) {
		a := []byte(`{"id":"evt_nr_A","type":"payment_intent.succeeded"}`)
		b := []byte(`{"id":"evt_nr_B","type":"payment_intent.succeeded"}`)
		got := []redAnswer{
			redPost(t, base+"nr-plain", "application/json", a, map[string]string{"Stripe-Signature": "t=1,v1=first"}),
			redPost(t, base+"nr-plain", "application/json", a, map[string]string{"Stripe-Signature": "t=2,v1=retry"}),
			redPost(t, base+"nr-plain", "application/json", b, nil),
		}
		for i, want := range []string{"processed", "duplicate", "processed"} {
			if got[i].status != 200 || got[i].Status != want {
				t.Errorf("delivery %d: %d %s, want 200 %s", i+1, got[i].status, got[i].body, want)
			}
		}
		if s.recorder.count("evt:evt_nr_A")+s.recorder.count("evt:evt_nr_B") != 2 || got[0].Key != "evt:evt_nr_A" {
			t.Errorf("the step ran %d and %d times, want once each (key %q)", s.recorder.count("evt:evt_nr_A"), s.recorder.count("evt:evt_nr_B"), got[0].Key)
		}
		noID := []byte("order=o_77&note=no id here")
		sum := sha256.Sum256(noID)
		want := "sha256:" + hex.EncodeToString(sum[:])
		if r := redPost(t, base+"nr-plain", "application/x-www-form-urlencoded", noID, nil); r.Status != "processed" || r.Key != want {
			t.Errorf("a body without id: %d %s, want processed %s", r.status, r.body, want)
		}
		if r := redPost(t, base+"nr-plain", "application/x-www-form-urlencoded", noID, nil); r.Status != "duplicate" || s.recorder.count(want) != 1 {
			t.Errorf("the same body without id again: %s, the step ran %d times", r.body, s.recorder.count(want))
		}
	})

	t.Run("20 simultaneous deliveries", func(t *testing.T) {
		ev := []byte(`{"id":"evt_nr_concurrent","type":"invoice.paid"}`)
		var wg sync.WaitGroup
		// The flow leases by default: a delivery while the first runs is
		// answered 409 (keysvc's, passed on), one after it a duplicate.
		var processed, duplicates, busy atomic.Int32
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := redSend(base+"nr-plain", "application/json", ev, nil)
				switch {
				case err == nil && r.Status == "processed":
					processed.Add(1)
				case err == nil && r.Status == "duplicate":
					duplicates.Add(1)
				case err == nil && r.status == 409:
					busy.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := s.recorder.count("evt:evt_nr_concurrent"); n != 1 || processed.Load() != 1 || duplicates.Load()+busy.Load() != 19 {
			t.Errorf("the step ran %d times; %d processed, %d duplicates, %d answered 409; want 1, 1, and 19 duplicates or 409", n, processed.Load(), duplicates.Load(), busy.Load())
		}
	})

	t.Run("a step that fails", func(t *testing.T) {
		ev := []byte(`{"id":"evt_nr_fails","type":"invoice.paid"}`)
		s.recorder.failNext("evt_nr_fails", 1)
		if r := redPost(t, base+"nr-plain", "application/json", ev, nil); r.status != 500 || r.Status != "failed" || !r.Released {
			t.Errorf("the failing step: %d %s, want 500 failed, released", r.status, r.body)
		}
		if r := redPost(t, base+"nr-plain", "application/json", ev, nil); r.Status != "processed" || s.recorder.count("evt:evt_nr_fails") != 1 {
			t.Errorf("the retry: %d %s, the step ran %d times; want processed, once", r.status, r.body, s.recorder.count("evt:evt_nr_fails"))
		}
	})

	t.Run("Stripe signatures", func(t *testing.T) {
		ev := []byte(`{"id":"evt_nr_signed","type":"checkout.session.completed"}`)
		forged := map[string]string{"Stripe-Signature": fmt.Sprintf("t=%d,v1=%s", time.Now().Unix(), strings.Repeat("ab", 32))}
		stale := stripeSignedAt(stripeSecret, ev, time.Now().Add(-time.Hour))
		for name, h := range map[string]map[string]string{"forged": forged, "stale": stale} {
			if r := redPost(t, base+"nr-stripe", "application/json", ev, h); r.status != 401 {
				t.Errorf("%s signature: %d %s, want 401", name, r.status, r.body)
			}
		}
		if s.recorder.count("evt:evt_nr_signed") != 0 || hasKey(t, "nr_events", "evt:evt_nr_signed") {
			t.Error("a forged or stale delivery reserved the key or ran the step")
		}
		if r := redPost(t, base+"nr-stripe", "application/json", ev, stripeSigned(stripeSecret, ev)); r.status != 200 || r.Status != "processed" || s.recorder.count("evt:evt_nr_signed") != 1 {
			t.Errorf("the genuine delivery: %d %s", r.status, r.body)
		}
	})

	t.Run("every vector", func(t *testing.T) {
		agree := 0
		for _, v := range vectors {
			path := "nr-plain"
			if v.Preset != "" {
				i := -1
				for j, g := range groups {
					if g.preset == v.Preset && g.scope == v.Scope {
						i = j
					}
				}
				if i < 0 {
					continue // a scope the generator refuses
				}
				path = fmt.Sprintf("nr-vectors-%d", i+1)
			}
			if headersUnsendable(v.Headers) {
				continue
			}
			body, _ := v.Body()
			contentType := "application/octet-stream"
			if v.JSON {
				contentType = "application/json"
			}
			header := map[string]string{}
			for k, val := range v.Headers {
				header[k] = val
			}
			if ct, ok := v.Headers["content-type"]; ok {
				contentType = ct
			}
			args := []string{"key"}
			if v.Preset != "" {
				args = append(args, "--preset", v.Preset, "--scope", v.Scope)
			}
			for k, val := range v.Headers {
				args = append(args, "--header", k+": "+val)
			}
			file := filepath.Join(t.TempDir(), "body")
			os.WriteFile(file, body, 0o600)
			cli := runIdemhook(t, append(args, file)...)
			r := redPost(t, base+path, contentType, body, header)
			switch {
			case isSlackURLCheck(v, body):
				// Slack's URL check: keysvc answers it and reserves nothing
				// (issue 61); the flow echoes its challenge.
				if r.status != 200 || !strings.Contains(r.body, `"challenge"`) || hasKey(t, "nr_events", strings.TrimSuffix(cli.stdout, "\n")) {
					t.Errorf("%s: Node-RED %d %s; want 200, the challenge echoed and nothing reserved", v.Name, r.status, r.body)
					continue
				}
			case v.Error != "":
				if r.status != 400 || cli.code != 2 {
					t.Errorf("%s: Node-RED %d %s, idemhook key exit %d; want 400 and 2", v.Name, r.status, r.body, cli.code)
					continue
				}
			case r.Key != strings.TrimSuffix(cli.stdout, "\n") || (r.Status != "processed" && r.Status != "duplicate"):
				t.Errorf("%s: Node-RED %d %s, idemhook key %q", v.Name, r.status, r.body, strings.TrimSuffix(cli.stdout, "\n"))
				continue
			}
			agree++
		}
		t.Logf("the Node-RED flow gives idemhook key's key for %d vectors", agree)
		if agree < 150 {
			t.Errorf("only %d vectors went through", agree)
		}
	})

	t.Run("keysvc stopped", func(t *testing.T) {
		s.keysvc.kill()
		r := redPost(t, base+"nr-plain", "application/json", []byte(`{"id":"evt_nr_down"}`), nil)
		if r.status != 503 || r.retryAfter == "" || s.recorder.count("evt:evt_nr_down") != 0 {
			t.Errorf("keysvc down: %d %s Retry-After %q, the step ran %d times; want 503 with Retry-After, none", r.status, r.body, r.retryAfter, s.recorder.count("evt:evt_nr_down"))
		}
		s.keysvc.start()
		if r := redPost(t, base+"nr-plain", "application/json", []byte(`{"id":"evt_nr_down"}`), nil); r.Status != "processed" {
			t.Errorf("keysvc back: %d %s", r.status, r.body)
		}
	})

}

// Under --guard lease: a retry during a running attempt is refused with
// 409, and one after it is a duplicate. Then Node-RED killed (SIGKILL) and
// started again in the middle of a load under lease, the sender retrying as a provider does (a 409, a
// 5xx or no answer is sent again): every event is answered 200 and its
// step ran, with its one key. A step runs twice only for an attempt that
// Node-RED's kill cut after the step and before Mark done (its lease then
// expires and a retry runs the step again): such repeats are counted and
// printed, and they cannot outnumber the attempts in flight at the kill.
func TestNodeREDRestartUnderLease(t *testing.T) {
	needStack(t)
	opts := generator.Options{WebhookPath: "nr-lease", ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease, Lease: 3 * time.Second}}
	s := startRed(t, "nr_lease_events", redFlow(t, opts))
	url := s.red.URL + "/nr-lease"
	run := time.Now().UnixNano() // the events of this run only (-count)

	// While an attempt runs the step, a retry gets 409 with Retry-After
	// and runs nothing; the attempt marks the key done, and a retry after
	// it is a duplicate.
	held := fmt.Appendf(nil, `{"id":"evt_nr_held_%d","type":"invoice.paid"}`, run)
	release := s.recorder.hold(fmt.Sprintf("evt_nr_held_%d", run))
	first := make(chan redAnswer, 1)
	go func() {
		a, _ := redSend(url, "application/json", held, nil)
		first <- a
	}()
	waitFor(t, 30*time.Second, "the first attempt in its step", func() bool { return s.recorder.holding.Load() == 1 })
	if r := redPost(t, url, "application/json", held, nil); r.status != 409 || r.retryAfter == "" {
		t.Errorf("a retry while the attempt runs: %d %s Retry-After %q, want 409 with Retry-After", r.status, r.body, r.retryAfter)
	}
	release()
	if a := <-first; a.status != 200 || a.Status != "processed" {
		t.Errorf("the attempt: %d %s, want 200 processed", a.status, a.body)
	}
	key := fmt.Sprintf("evt:evt_nr_held_%d", run)
	if r := redPost(t, url, "application/json", held, nil); r.Status != "duplicate" || s.recorder.count(key) != 1 {
		t.Errorf("a retry after the attempt: %d %s, the step ran %d times; want duplicate, once", r.status, r.body, s.recorder.count(key))
	}

	const events, senders = 150, 6
	var answered, inFlight atomic.Int32
	var wg sync.WaitGroup
	jobs := make(chan int, events)
	for i := range events {
		jobs <- i
	}
	close(jobs)
	var lost atomic.Int32
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				body := fmt.Appendf(nil, `{"id":"evt_nr_lease_%d_%d","type":"invoice.paid"}`, run, i)
				deadline := time.Now().Add(90 * time.Second)
				for {
					inFlight.Add(1)
					r, err := redSend(url, "application/json", body, nil)
					inFlight.Add(-1)
					if err == nil && r.status == 200 {
						answered.Add(1)
						break
					}
					if time.Now().After(deadline) {
						lost.Add(1)
						break
					}
					time.Sleep(200 * time.Millisecond) // a 409 while the lease runs, a 5xx, or Node-RED down
				}
			}
		}()
	}
	waitFor(t, time.Minute, "a third of the events answered", func() bool { return answered.Load() >= events/3 })
	cut := inFlight.Load()
	s.red.Kill()
	time.Sleep(500 * time.Millisecond)
	if err := s.red.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	twice, never := 0, 0
	for i := range events {
		switch n := s.recorder.count(fmt.Sprintf("evt:evt_nr_lease_%d_%d", run, i)); {
		case n == 0:
			never++
		case n > 1:
			twice++
		}
	}
	t.Logf("%d events, %d attempts in flight at the kill; answered 200: %d; the step ran twice for %d, never for %d", events, cut, answered.Load(), twice, never)
	if lost.Load() > 0 || never > 0 || twice > int(cut) {
		t.Errorf("%d events never answered 200, %d never ran the step, %d ran it twice (%d attempts were in flight)", lost.Load(), never, twice, cut)
	}
}

// keysvc's durable inbox forwards to a Node-RED flow generated for it
// (--receiver keysvc): each signed event, delivered twice to keysvc, runs
// the step once under the receipt key keysvc forwards it with; a forward
// replayed by hand is a duplicate; a request without the target token is
// refused.
func TestNodeREDBehindKeysvcInbox(t *testing.T) {
	needStack(t)
	opts := generator.Options{WebhookPath: "nr-target", InboxOptions: generator.InboxOptions{Receiver: generator.ReceiverKeysvc}}
	rec := newStepRecorder(t)
	red, err := sandbox.PrepareNodeRED(context.Background(), mustJSON(t, redFlow(t, opts)), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(red.Close)
	endpoints := map[string]any{"endpoints": []map[string]any{
		{"name": "node-red", "provider": "stripe", "target": red.URL + "/nr-target", "target_token_env": "NR_TARGET_TOKEN", "max_attempts": 50},
	}}
	file := filepath.Join(t.TempDir(), "endpoints.json")
	os.WriteFile(file, mustJSON(t, endpoints), 0o600)
	k := launchKeysvc(t, "nri", []string{"--table", "nri_events", "--create-schema", "--endpoints", file, "--inbox-schema", "nri",
		"--inbox-backoff", "200ms", "--inbox-max-backoff", "2s"},
		[]string{"KEYSVC_SECRET_STRIPE=" + stripeSecret, "NR_TARGET_TOKEN=" + redTargetToken, "KEYSVC_TOKEN=" + redToken})
	red.Env = []string{"KEYSVC_URL=" + k.url, "KEYSVC_TOKEN=" + redToken, "RECORDER_URL=" + rec.URL, "KEYSVC_TARGET_TOKEN=" + redTargetToken}
	if err := red.Start(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A request that is not keysvc's forward.
	if r := redPost(t, red.URL+"/nr-target", "application/json", []byte(`{"id":"evt_x"}`), map[string]string{"Idempotency-Key": "k1"}); r.status != 401 {
		t.Errorf("without the target token: %d %s, want 401", r.status, r.body)
	}
	const events = 10
	auth := map[string]string{"Authorization": "Bearer " + redToken}
	var receipts []string
	for i := range events {
		body := fmt.Appendf(nil, `{"id":"evt_nr_inbox_%d","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_%d"}}}`, i, i)
		for range 2 { // the provider delivers it twice
			r := redPost(t, k.url+"/v1/inbox/node-red", "application/json", body, stripeSigned(stripeSecret, body))
			if r.status != 200 {
				t.Fatalf("keysvc's inbox: %d %s", r.status, r.body)
			}
			if r.Key != "" && len(receipts) == i {
				receipts = append(receipts, r.Key)
			}
		}
	}
	waitFor(t, time.Minute, "every event's step", func() bool {
		for _, key := range receipts {
			if rec.count(key) == 0 {
				return false
			}
		}
		return true
	})
	// A forward sent again, by hand: the flow answers it as a duplicate.
	entries := redList(t, k.url+"/v1/console/inbox/entries?endpoint=node-red", auth)
	if len(entries) == 0 {
		t.Fatal("no inbox entry listed")
	}
	replay, err := send(fmt.Sprintf("%s/v1/inbox/node-red/%v/replay", k.url, entries[0]), "", nil, auth)
	if err != nil || replay.status != 202 {
		t.Fatalf("replay: %v %d %s", err, replay.status, replay.body)
	}
	time.Sleep(2 * time.Second)
	for _, key := range receipts {
		if n := rec.count(key); n != 1 {
			t.Errorf("the step ran %d times for receipt key %s, want once", n, key)
		}
	}
	if len(receipts) != events {
		t.Errorf("%d receipt keys for %d events", len(receipts), events)
	}
}

// The files idemhook generate --target node-red writes: Node-RED 5 loads
// flows.json as its flows file (its admin API then lists every node of it,
// and the log holds no error), and the editor shows the flow (the
// screenshot of docs/node-red.md).
func TestNodeREDImportsTheGeneratedFlow(t *testing.T) {
	needStack(t)
	dir := t.TempDir()
	if r := runIdemhook(t, "generate", "--target", "node-red", "--out", dir, "--path", "stripe-events", "--verify", "stripe", "--guard", "lease"); r.code != 0 {
		t.Fatalf("idemhook generate: exit %d: %s", r.code, r.stderr)
	}
	raw, err := os.ReadFile(filepath.Join(dir, nodered.FileFlows))
	if err != nil {
		t.Fatal(err)
	}
	var written []map[string]any
	if err := json.Unmarshal(raw, &written); err != nil {
		t.Fatal(err)
	}
	red, err := sandbox.StartNodeRED(context.Background(), raw, []string{"KEYSVC_URL=http://127.0.0.1:1", "KEYSVC_TOKEN=unused"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(red.Close)
	resp, err := http.Get(red.URL + "/flows")
	if err != nil {
		t.Fatal(err)
	}
	var loaded []map[string]any
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(b, &loaded); err != nil {
		t.Fatalf("GET /flows: %d %s", resp.StatusCode, b)
	}
	ids := map[any]bool{}
	for _, n := range loaded {
		ids[n["id"]] = true
	}
	for _, n := range written {
		if !ids[n["id"]] {
			t.Errorf("Node-RED did not load %v %q", n["type"], n["name"])
		}
	}
	if log, _ := os.ReadFile(red.Log); strings.Contains(string(log), "[error]") {
		t.Errorf("Node-RED logged an error loading the flow:\n%s", log)
	}

	ctx := headless.StartWindow(t, 1800, 560)
	if err := chromedp.Do(ctx, chromedp.Navigate(red.URL+"/")); err != nil {
		t.Fatal(err)
	}
	var shown bool
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !shown; time.Sleep(500 * time.Millisecond) {
		shown, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body.innerText.includes(`+jsQuote(nodered.NodeStep)+`)`))
	}
	if !shown {
		t.Fatalf("the editor does not show %q", nodered.NodeStep)
	}
	// The whole flow: the palette and the sidebar closed, zoomed to fit.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`RED.actions.invoke("core:toggle-sidebar", false); RED.actions.invoke("core:toggle-palette", false); RED.actions.invoke("core:zoom-fit"); true`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	saveArtifact(t, "node-red.png", png)
}

// redList lists the ids of keysvc's console entries at url.
func redList(t *testing.T, url string, header map[string]string) []any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Entries []struct {
			ID any `json:"id"`
		} `json:"entries"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
	var ids []any
	for _, e := range page.Entries {
		ids = append(ids, e.ID)
	}
	return ids
}
