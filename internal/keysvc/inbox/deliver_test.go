package inbox_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/keysvc/inbox/inboxtest"
)

// waitEntry polls entry id of endpoint every few milliseconds until it is in
// state, and fails after timeout.
func waitEntry(t *testing.T, in *inbox.Inbox, endpoint string, id int64, state string, timeout time.Duration) {
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
		inbox.Options{RecoverAfter: time.Hour})
	for i := range 5 {
		healthy.Store(false)
		id := receive(t, in, "stripe", fmt.Sprintf(`{"id":"evt_replay_%d","type":"payment_intent.succeeded"}`, i))
		waitEntry(t, in, "stripe", id, "failed", 10*time.Second)
		healthy.Store(true)
		e, _ := in.Endpoint("stripe")
		if err := in.Replay(context.Background(), e, id, "test"); err != nil {
			t.Fatal(err)
		}
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
		inbox.Options{Backoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, RecoverAfter: time.Hour})
	id := receive(t, in, "stripe", `{"id":"evt_n8n_starting","type":"payment_intent.succeeded"}`)
	// Each retry is a scheduled River job, which River's scheduler makes
	// available on its own tick (every 5 s), whatever the backoff: two
	// retries take up to about 10 s before the third call.
	waitEntry(t, in, "stripe", id, "forwarded", 30*time.Second)
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
	fast := inboxtest.NewRecorder()
	fastSrv := httptest.NewServer(fast)
	defer fastSrv.Close()
	in := openInbox(t, "ks_inbox_conc", fmt.Sprintf(`{"endpoints":[{"name":"slow","provider":"stripe","target":%q,"concurrency":2},{"name":"fast","provider":"stripe","target":%q}]}`, slow.URL, fastSrv.URL),
		inbox.Options{})
	const backlog = 12
	var ids []int64
	for i := range backlog {
		ids = append(ids, receive(t, in, "slow", fmt.Sprintf(`{"id":"evt_slow_%d","type":"t"}`, i)))
	}
	waitEntry(t, in, "fast", receive(t, in, "fast", `{"id":"evt_fast","type":"t"}`), "forwarded", 10*time.Second)
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
