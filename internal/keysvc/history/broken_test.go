package history_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/history"
)

// earlyNew answers a reservation "new" when it finds the key absent, and
// commits it afterwards: a reservation answered before its commit. Two
// deliveries of one event that both look before either commits are both
// told "new".
type earlyNew struct{ keysvc.Store }

func (s earlyNew) Reserve(ctx context.Context, key string) (keysvc.Reservation, bool, error) {
	r, err := s.Lookup(ctx, key)
	if err == nil {
		return r, false, nil
	}
	go func() {
		time.Sleep(2 * time.Millisecond)
		_, _, _ = s.Store.Reserve(context.WithoutCancel(ctx), key)
	}()
	return keysvc.Reservation{Key: key, State: keysvc.StateDone}, true, nil
}

// doubleLease grants a lease another attempt holds, as a store that lost
// its row lock would: the second holder is told it acquired attempt 1.
type doubleLease struct {
	keysvc.Store
	mu      sync.Mutex
	granted map[string]bool
}

func (s *doubleLease) AcquireLease(ctx context.Context, key string, lease time.Duration) (keysvc.Reservation, keysvc.Outcome, error) {
	r, outcome, err := s.Store.AcquireLease(ctx, key, lease)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && outcome == keysvc.Busy && !s.granted[key] {
		s.granted[key] = true // once per key: a second holder, not a stream of them
		return r, keysvc.Acquired, nil
	}
	return r, outcome, err
}

func boltStore(t *testing.T) keysvc.Store {
	t.Helper()
	s, err := keysvc.OpenBolt(filepath.Join(t.TempDir(), "keysvc.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runAgainst runs the workload's clients against keysvc's handler on store,
// over real HTTP, for ops operations, and checks the history.
func runAgainst(t *testing.T, store keysvc.Store, label string, ops int) (history.Report, history.EffectReport) {
	t.Helper()
	srv := httptest.NewServer(keysvc.New(keysvc.Config{Store: store}))
	defer srv.Close()
	rec := &history.Recorder{}
	fx := history.NewEffects()
	unexpected := func(s string) { t.Errorf("unexpected answer: %s", s) }
	w := history.Workload{Clients: 16, Prefix: label, Lease: time.Hour, ShortLease: time.Second,
		HotEvents: 2, HotDeliveries: 40, ContendedKeys: 2, ContendedOps: 60, Timeout: 5 * time.Second, Operations: ops}
	history.Run(context.Background(), srv.URL, srv.Client(), w, rec, fx, unexpected)
	effects := fx.Verify(context.Background(), history.NewClient(srv.URL, srv.Client(), rec, 5*time.Second, unexpected))
	rep, err := history.Check(rec, t.TempDir(), label)
	if err != nil {
		t.Fatal(err)
	}
	return rep, effects
}

// The checker fails a store that answers a reservation "new" before its
// commit, and one that grants a lease twice: Porcupine finds keys no
// order explains and writes its visualisation, and the effect counter
// finds steps that ran twice. The same clients against the embedded store
// as it is find nothing.
func TestCheckerFailsABrokenStore(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) keysvc.Store
	}{
		{"a reservation answered new before its commit", func(t *testing.T) keysvc.Store { return earlyNew{boltStore(t)} }},
		{"a lease granted twice", func(t *testing.T) keysvc.Store {
			return &doubleLease{Store: boltStore(t), granted: map[string]bool{}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, effects := runAgainst(t, c.store(t), "broken", 2000)
			t.Logf("%s; effects: %d keys, %d anomalies", rep, effects.Keys, len(effects.Anomalies))
			if len(rep.Illegal) == 0 {
				t.Errorf("the checker passed a broken store: %s", rep)
			}
			if _, err := os.Stat(rep.Visualization); err != nil {
				t.Errorf("no visualisation of the failure: %v", err)
			}
			if len(effects.Anomalies) == 0 {
				t.Errorf("the effect counter found no step run twice")
			}
		})
	}
	t.Run("the embedded store as it is", func(t *testing.T) {
		rep, effects := runAgainst(t, boltStore(t), "bolt", 2000)
		t.Logf("%s; effects: %d keys, %d completed", rep, effects.Keys, effects.Completed)
		if rep.Failed() || len(effects.Anomalies) > 0 {
			t.Errorf("%s; effect anomalies %v", rep, effects.Anomalies)
		}
		if rep.Operations < 2000 || effects.Completed == 0 {
			t.Errorf("too little checked: %s, %d completions", rep, effects.Completed)
		}
	})
}

var _ http.Handler = (*keysvc.Server)(nil)
