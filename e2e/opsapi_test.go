package e2e

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/sandbox"
)

// opsAPI is the external API of the outbox tests: a real HTTP server that
// honours the documented contract (POST {url} with Idempotency-Key performs
// the operation once per key; GET {url}/{key} says whether it happened) and
// records every call. A plan per key scripts how successive POSTs behave.
type opsAPI struct {
	url  string // base URL of the operations: http://127.0.0.1:P/v1/operations
	addr string
	srv  *http.Server

	mu        sync.Mutex
	calls     []opsCall
	performed map[string]int // key → times the operation was performed
	plans     map[string][]opsStep
	held      chan struct{} // closed to release held calls
}

type opsCall struct {
	Method, Key string
	Payload     string
	At          time.Time
}

// opsStep is how the API answers one POST for a key.
type opsStep struct {
	perform bool          // record the operation as performed
	status  int           // answer this status (200 when 0)
	body    string        // and this body
	sleep   time.Duration // sleep before answering (longer than the dispatcher's timeout: no answer)
	reset   bool          // close the connection instead of answering
	hold    bool          // block until release (or the client goes away)
}

// newOpsAPI starts the API on a free port; with listen false it only
// reserves the address, and calls are refused until start. It stops when t
// ends (nil t: when the test binary exits).
func newOpsAPI(t *testing.T, listen bool) *opsAPI {
	// Started later (or again) on this address: see sandbox.FreePort.
	addr, err := sandbox.FreeAddr()
	if err != nil {
		panic(err)
	}
	a := &opsAPI{addr: addr, performed: map[string]int{}, plans: map[string][]opsStep{}, held: make(chan struct{})}
	a.url = "http://" + a.addr + "/v1/operations"
	if listen {
		if err := a.start(); err != nil {
			panic(err)
		}
	}
	if t != nil {
		t.Cleanup(a.stop)
	}
	return a
}

func (a *opsAPI) start() error {
	l, err := net.Listen("tcp", a.addr)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.held = make(chan struct{})
	a.mu.Unlock()
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve)}
	go a.srv.Serve(l)
	return nil
}

func (a *opsAPI) stop() {
	a.release()
	if a.srv != nil {
		a.srv.Close()
	}
}

// release lets held calls go on (they answer nothing useful: their clients
// are gone).
func (a *opsAPI) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.held:
	default:
		close(a.held)
	}
}

func (a *opsAPI) plan(key string, steps ...opsStep) {
	a.mu.Lock()
	a.plans[key] = steps
	a.mu.Unlock()
}

func (a *opsAPI) serve(w http.ResponseWriter, r *http.Request) {
	payload, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/operations/"):
		key := strings.TrimPrefix(r.URL.Path, "/v1/operations/")
		a.mu.Lock()
		a.calls = append(a.calls, opsCall{Method: "GET", Key: key, At: time.Now()})
		done := a.performed[key] > 0
		a.mu.Unlock()
		if done {
			w.Write([]byte(`{"operation_key":"` + key + `","status":"performed"}`))
			return
		}
		http.Error(w, `{"error":"no such operation"}`, http.StatusNotFound)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/operations":
		key := r.Header.Get("Idempotency-Key")
		a.mu.Lock()
		a.calls = append(a.calls, opsCall{Method: "POST", Key: key, Payload: string(payload), At: time.Now()})
		step := opsStep{perform: true}
		if steps := a.plans[key]; len(steps) > 0 {
			step, a.plans[key] = steps[0], steps[1:]
		}
		// The contract: a key performs its operation once; a repeat
		// answers with the first result.
		if step.perform && a.performed[key] == 0 {
			a.performed[key]++
		}
		held := a.held
		a.mu.Unlock()
		if step.hold {
			select {
			case <-held:
			case <-r.Context().Done():
			}
			return
		}
		time.Sleep(step.sleep)
		if step.reset {
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
			return
		}
		if step.status == 0 {
			step.status = http.StatusOK
		}
		if step.body == "" {
			step.body = `{"status":"performed"}`
		}
		w.WriteHeader(step.status)
		w.Write([]byte(step.body))
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

// count returns how many calls of method were made for key.
func (a *opsAPI) count(method, key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.calls {
		if c.Method == method && c.Key == key {
			n++
		}
	}
	return n
}

// times lists when the calls of method for key arrived, in order.
func (a *opsAPI) times(method, key string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Time
	for _, c := range a.calls {
		if c.Method == method && c.Key == key {
			out = append(out, c.At)
		}
	}
	return out
}

// postsByKey counts the POSTs per Idempotency-Key.
func (a *opsAPI) postsByKey() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for _, c := range a.calls {
		if c.Method == "POST" {
			out[c.Key]++
		}
	}
	return out
}

// waitFor waits until cond holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitDrained waits until remaining() is 0 for as long as it keeps going
// down, and returns how long that took. How fast a backlog drains depends on
// the machine (n8n on two cores takes about four inbox events a second); a
// drain that stops does not: it fails once stall passes without progress,
// or after 15 minutes in all.
func waitDrained(t *testing.T, stall time.Duration, what string, remaining func() int) time.Duration {
	t.Helper()
	start := time.Now()
	least, progressed := remaining(), time.Now()
	for least > 0 {
		time.Sleep(500 * time.Millisecond)
		if n := remaining(); n < least {
			least, progressed = n, time.Now()
		}
		if time.Since(progressed) > stall || time.Since(start) > 15*time.Minute {
			t.Fatalf("%s: %d left after %s, the last progress %s ago", what, least, time.Since(start).Round(time.Second), time.Since(progressed).Round(time.Second))
		}
	}
	return time.Since(start)
}
