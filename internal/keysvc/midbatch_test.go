package keysvc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
)

// A batch decides its keys in one statement and reads the ones it did not
// take in a second; a key released between the two was answered from
// nothing: a lease on a done key came back busy (409, though no attempt
// held it: found by TestKeyAPIUnderFaults, cmd/keysvc), and a reservation
// of a leased key came back a duplicate in state done (though it never was).
// A key released in between is now decided again: at that time it is
// absent, and the lease or the reservation takes it.
func TestKeyReleasedBetweenABatchAndItsLookup(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	const keys = 3000 // in rounds of 300
	ctx := context.Background()
	t.Run("a lease on a done key", func(t *testing.T) {
		s := newPGStore(t)
		wrong := raceWithRelease(t, s, keys, func(k string) error {
			_, _, err := s.Reserve(ctx, k) // done
			return err
		}, func(k string) (string, error) {
			_, outcome, err := s.AcquireLease(ctx, k, time.Hour)
			if outcome == keysvc.Busy {
				return "busy, though no attempt ever held it", err
			}
			return "", err
		})
		if wrong > 0 {
			t.Errorf("%d of %d leases answered busy", wrong, keys)
		}
	})
	t.Run("a reservation of a leased key", func(t *testing.T) {
		s := newPGStore(t)
		wrong := raceWithRelease(t, s, keys, func(k string) error {
			_, _, err := s.AcquireLease(ctx, k, time.Hour) // processing
			return err
		}, func(k string) (string, error) {
			r, reserved, err := s.Reserve(ctx, k)
			if !reserved && r.State != keysvc.StateProcessing {
				return fmt.Sprintf("a duplicate in state %q, though it was only ever processing", r.State), err
			}
			return "", err
		})
		if wrong > 0 {
			t.Errorf("%d of %d reservations answered a state the key never had", wrong, keys)
		}
	})
}

// A completion answers the row it made done. It answered a second read of
// the key, which a release and a new lease could reach first: "processing",
// for a key it had just completed (found by TestKeyAPIUnderFaults' soak run,
// 5 keys in 1,234,983 operations).
func TestCompletionAnswersTheRowItCompleted(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	s := newPGStore(t)
	const keys = 3000
	keyOf := func(i int) string { return fmt.Sprintf("evt:completed-then-leased-%d", i) }
	for i := range keys {
		if _, _, err := s.AcquireLease(ctx, keyOf(i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	wrong := 0
	for from := 0; from < keys; from += 300 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := from; i < from+300; i++ {
			wg.Go(func() {
				<-start
				r, err := s.MarkDone(ctx, keyOf(i))
				if err == nil && r.State != keysvc.StateDone {
					mu.Lock()
					wrong++
					mu.Unlock()
				} else if err != nil && err != keysvc.ErrNotFound {
					t.Error(err)
				}
			})
			wg.Go(func() {
				<-start
				if err := s.Release(ctx, keyOf(i)); err == nil {
					_, _, _ = s.AcquireLease(ctx, keyOf(i), time.Hour)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	if wrong > 0 {
		t.Errorf("%d of %d completions answered a state other than done", wrong, keys)
	}
}

// raceWithRelease prepares n keys, then runs decide on each while another
// goroutine releases it, 300 at once (so that the decisions share
// batches), and counts the decisions that say what cannot be.
func raceWithRelease(t *testing.T, s keysvc.Store, n int, prepare func(string) error, decide func(string) (string, error)) (wrong int) {
	t.Helper()
	keyOf := func(i int) string { return fmt.Sprintf("evt:released-mid-batch-%d", i) }
	for i := range n {
		if err := prepare(keyOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	const round = 300
	for from := 0; from < n; from += round {
		wrong += raceRound(t, s, keyOf, from, min(n, from+round), decide)
	}
	return wrong
}

func raceRound(t *testing.T, s keysvc.Store, keyOf func(int) string, from, to int, decide func(string) (string, error)) (wrong int) {
	ctx := context.Background()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := from; i < to; i++ {
		wg.Go(func() {
			<-start
			what, err := decide(keyOf(i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
			}
			if what != "" {
				wrong++
				if wrong <= 3 {
					t.Logf("%s: %s", keyOf(i), what)
				}
			}
		})
		wg.Go(func() {
			<-start
			if err := s.Release(ctx, keyOf(i)); err != nil && err != keysvc.ErrNotFound {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	return wrong
}
