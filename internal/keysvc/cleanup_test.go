package keysvc_test

import (
	"context"
	"fmt"
	"path/filepath"
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
		if c.Longest <= 0 {
			t.Errorf("cleanup: %+v, the longest transaction not measured", c)
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

// Load adds the keys not yet reserved, first seen when it is told, and
// leaves a key already reserved as it was.
func TestBoltLoad(t *testing.T) {
	ctx := context.Background()
	store, err := keysvc.OpenBolt(filepath.Join(t.TempDir(), "load.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	before, _, err := store.Reserve(ctx, "k-1")
	if err != nil {
		t.Fatal(err)
	}
	old := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	added, err := store.Load([]string{"k-0", "k-1", "k-2"}, old)
	if err != nil || added != 2 {
		t.Fatalf("Load: %d added, %v; want 2", added, err)
	}
	for key, want := range map[string]time.Time{"k-0": old, "k-1": before.FirstSeen, "k-2": old} {
		r, err := store.Lookup(ctx, key)
		if err != nil || !r.FirstSeen.Equal(want) || r.State != keysvc.StateDone {
			t.Errorf("%s: %+v %v, want done and first seen %v", key, r, err, want)
		}
	}
	// Loaded keys are reservations like any other: a retry is a duplicate,
	// and the cleanup deletes them by their age.
	if _, ok, _ := store.Reserve(ctx, "k-2"); ok {
		t.Error("a loaded key was reserved again")
	}
	c, err := store.Cleanup(ctx, old.Add(time.Hour), 10)
	if err != nil || c.Deleted != 2 {
		t.Errorf("cleanup after load: %+v %v, want the 2 loaded keys deleted", c, err)
	}
}
