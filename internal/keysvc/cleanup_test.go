package keysvc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
)

// Each store deletes N expired reservations in ⌈N / batch⌉ transactions,
// keeps the live ones, and a reservation made while the cleanup runs is
// kept.
func TestCleanupDeletesInBatches(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		ctx := context.Background()
		const expired, live, batch = 23, 5, 5
		for i := range expired {
			if _, ok, err := store.Reserve(ctx, fmt.Sprintf("old-%d", i)); err != nil || !ok {
				t.Fatalf("reserve: %v %v", ok, err)
			}
		}
		time.Sleep(50 * time.Millisecond)
		cutoff := time.Now()
		time.Sleep(50 * time.Millisecond)
		for i := range live {
			store.Reserve(ctx, fmt.Sprintf("live-%d", i))
		}
		var during sync.WaitGroup
		during.Add(1)
		go func() {
			defer during.Done()
			for i := range 20 {
				if _, ok, err := store.Reserve(ctx, fmt.Sprintf("new-%d", i)); err != nil || !ok {
					t.Errorf("a reservation during the cleanup: %v %v", ok, err)
				}
			}
		}()
		c, err := store.Cleanup(ctx, cutoff, batch)
		during.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if c.Deleted != expired || c.Transactions != (expired+batch-1)/batch {
			t.Errorf("cleanup: %+v, want %d deleted in %d transactions", c, expired, (expired+batch-1)/batch)
		}
		for _, k := range []string{"old-0", fmt.Sprintf("old-%d", expired-1)} {
			if _, err := store.Lookup(ctx, k); err != keysvc.ErrNotFound {
				t.Errorf("%s after the cleanup: %v, want not found", k, err)
			}
		}
		for i := range live {
			if _, err := store.Lookup(ctx, fmt.Sprintf("live-%d", i)); err != nil {
				t.Errorf("live-%d: %v", i, err)
			}
		}
		for i := range 20 {
			if _, err := store.Lookup(ctx, fmt.Sprintf("new-%d", i)); err != nil {
				t.Errorf("new-%d, reserved during the cleanup: %v", i, err)
			}
		}
	})
}
