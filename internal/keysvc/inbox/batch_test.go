package inbox_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc/inbox"
)

// batchTarget is a target that takes batch forwards: it records each
// forward (its events' ids and keys, or the one of a single forward) and
// answers each event with answer's status.
type batchTarget struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hold   chan struct{} // while open, forwards wait (so that a backlog forms)
	sent   [][]string    // per forward: "id=key" of each event
	answer func(n int, id string) int
	// whole is a status for the whole forward of events (0 for none, -1
	// to hang up without an answer); multi counts the forwards of more than
	// one event before this one.
	whole func(multi, events int) int
	multi int
}

func newBatchTarget(t *testing.T) *batchTarget {
	b := &batchTarget{answer: func(int, string) int { return 200 }, whole: func(int, int) int { return 0 }, hold: make(chan struct{})}
	close(b.hold)
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		hold := b.hold
		b.mu.Unlock()
		<-hold
		var events []string
		var results []map[string]any
		b.mu.Lock()
		n := len(b.sent)
		if r.Header.Get("X-Idemhook-Batch") == "" {
			id := r.Header.Get("X-Idemhook-Inbox-Id")
			events = append(events, id+"="+r.Header.Get("Idempotency-Key"))
		} else {
			var body struct {
				Events []struct {
					InboxID string `json:"inbox_id"`
					Key     string `json:"key"`
					Body    string `json:"body"`
				} `json:"events"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				t.Errorf("a batch forward that is not JSON: %v", err)
			}
			for _, e := range body.Events {
				if raw, err := base64.StdEncoding.DecodeString(e.Body); err != nil || len(raw) == 0 {
					t.Errorf("event %s: body %q is not the received bytes in base64", e.InboxID, e.Body)
				}
				events = append(events, e.InboxID+"="+e.Key)
				results = append(results, map[string]any{"inbox_id": e.InboxID, "status": b.answer(n, e.InboxID)})
			}
		}
		b.sent = append(b.sent, events)
		whole := b.whole(b.multi, len(events))
		if len(events) > 1 {
			b.multi++
		}
		b.mu.Unlock()
		if whole == -1 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		if whole != 0 {
			w.WriteHeader(whole)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"results": results})
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *batchTarget) forwards() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]string(nil), b.sent...)
}

// A backlog is forwarded in batches of at most the endpoint's batch, each
// event with its own receipt key; an event the target refuses is sent again
// alone, with the same key, and the others of its batch are not sent again.
func TestInboxBatchForwards(t *testing.T) {
	target := newBatchTarget(t)
	target.hold = make(chan struct{})
	var poison string
	target.answer = func(n int, id string) int {
		if id == poison {
			return 503
		}
		return 200
	}
	in := openInbox(t, "ks_inbox_batch", fmt.Sprintf(`{"endpoints":[{"name":"stripe","provider":"stripe","target":%q,"batch":5,"concurrency":1}]}`, target.srv.URL),
		inbox.Options{Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, RecoverAfter: time.Hour})
	var ids []int64
	for i := range 12 {
		ids = append(ids, receive(t, in, "stripe", fmt.Sprintf(`{"id":"evt_batch_%d","type":"payment_intent.succeeded"}`, i)))
	}
	poison = strconv.FormatInt(ids[7], 10)
	close(target.hold) // the first forward, of one event, waited while the others were saved
	for _, id := range ids {
		waitEntry(t, in, "stripe", id, "forwarded", 20*time.Second)
	}
	fw := target.forwards()
	perEvent := map[string]int{}
	keys := map[string]map[string]bool{}
	most := 0
	for _, f := range fw {
		most = max(most, len(f))
		for _, ev := range f {
			id, key, _ := cut(ev)
			perEvent[id]++
			if keys[id] == nil {
				keys[id] = map[string]bool{}
			}
			keys[id][key] = true
		}
	}
	t.Logf("forwards: %v", fw)
	if most != 5 {
		t.Errorf("the largest forward carried %d events, want the batch, 5", most)
	}
	for i, id := range ids {
		s := strconv.FormatInt(id, 10)
		want := 1
		if s == poison {
			want = 2
		}
		if perEvent[s] != want || len(keys[s]) != 1 || !keys[s][fmt.Sprintf("evt:evt_batch_%d", i)] {
			t.Errorf("event %s: forwarded %d times with keys %v, want %d with its own receipt key", s, perEvent[s], keys[s], want)
		}
	}
	last := fw[len(fw)-1]
	if len(last) != 1 || last[0] != poison+"=evt:evt_batch_7" {
		t.Errorf("the refused event's re-send %v, want it alone, same key", last)
	}
	e, err := in.Entry(context.Background(), "stripe", ids[7])
	if err != nil || len(e.Deliveries) != 2 || e.Deliveries[0].Status == nil || *e.Deliveries[0].Status != 503 {
		t.Errorf("the refused event's deliveries %+v (%v): want its 503, then the delivery", e.Deliveries, err)
	}
}

// A batch forward that gets no answer sends its events again together; one
// answered 500 as a whole sends each of them alone.
func TestInboxBatchRefusedOrUnanswered(t *testing.T) {
	target := newBatchTarget(t)
	target.hold = make(chan struct{})
	target.whole = func(multi, events int) int {
		switch {
		case events < 2:
			return 0
		case multi == 0:
			return -1
		case multi == 1:
			return 500
		}
		return 0
	}
	in := openInbox(t, "ks_inbox_batch_refused", fmt.Sprintf(`{"endpoints":[{"name":"stripe","provider":"stripe","target":%q,"batch":4,"concurrency":1}]}`, target.srv.URL),
		inbox.Options{Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, RecoverAfter: time.Hour})
	var ids []int64
	for i := range 6 {
		ids = append(ids, receive(t, in, "stripe", fmt.Sprintf(`{"id":"evt_refused_%d","type":"t"}`, i)))
	}
	close(target.hold)
	for _, id := range ids {
		waitEntry(t, in, "stripe", id, "forwarded", 20*time.Second)
	}
	fw := target.forwards()
	t.Logf("forwards: %v", fw)
	var multi [][]string
	refusedAt := -1
	for i, f := range fw {
		if len(f) > 1 {
			multi = append(multi, f)
			if len(multi) == 2 {
				refusedAt = i
			}
		}
	}
	if len(multi) != 3 || !sameSet(multi[0], multi[2]) {
		t.Fatalf("forwards of several events %v: want the unanswered one sent again as it was, and no other", multi)
	}
	alone := map[string]bool{}
	for _, f := range fw[refusedAt+1:] {
		if len(f) == 1 {
			alone[f[0]] = true
		}
	}
	for _, ev := range multi[1] {
		if !alone[ev] {
			t.Errorf("event %s of the forward answered 500 was not sent again alone (forwards %v)", ev, fw)
		}
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}

func cut(ev string) (id, key string, ok bool) {
	for i := range len(ev) {
		if ev[i] == '=' {
			return ev[:i], ev[i+1:], true
		}
	}
	return ev, "", false
}
