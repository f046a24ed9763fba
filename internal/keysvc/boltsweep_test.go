package keysvc

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// While reservations are coming, the cleanup's deletes ride their write
// transactions: the chunk on offer is deleted by the reservations'
// transaction, which answers it; a key changed since it was read stays.
func TestSweepRidesTheReservations(t *testing.T) {
	ctx := context.Background()
	s, err := OpenBolt(filepath.Join(t.TempDir(), "sweep.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := time.Now().Add(-48 * time.Hour)
	keys := []string{"old-0", "old-1", "old-2"}
	if _, err := s.Load(keys, old); err != nil {
		t.Fatal(err)
	}
	recs, _, err := s.expiredAfter(nil, time.Now().Add(-time.Hour), 10)
	if err != nil || len(recs) != 3 {
		t.Fatalf("expired: %d, %v", len(recs), err)
	}
	// old-2 is released and reserved again after it was read.
	if err := s.Release(ctx, "old-2"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Reserve(ctx, "old-2"); err != nil || !ok {
		t.Fatalf("reserve old-2 again: %v %v", ok, err)
	}
	c := &sweepChunk{recs: recs, done: make(chan sweepResult, 1)}
	s.sweep.mu.Lock()
	s.sweep.chunk = c
	s.sweep.mu.Unlock()
	if _, ok, err := s.Reserve(ctx, "new-0"); err != nil || !ok {
		t.Fatalf("reserve: %v %v", ok, err)
	}
	select {
	case r := <-c.done:
		if r.err != nil || r.deleted != 2 {
			t.Errorf("the reservations' transaction deleted %d (%v), want 2", r.deleted, r.err)
		}
	default:
		t.Fatal("the reservations' transaction did not take the chunk on offer")
	}
	for key, want := range map[string]error{"old-0": ErrNotFound, "old-1": ErrNotFound, "old-2": nil, "new-0": nil} {
		if _, err := s.Lookup(ctx, key); err != want {
			t.Errorf("%s: %v, want %v", key, err, want)
		}
	}
}

// With reservations coming all along, every chunk of a cleanup is deleted,
// whether a reservation carried it or it waited too long and went alone;
// with none coming (none in the last second), it deletes on its own.
func TestSweepBesideAndAlone(t *testing.T) {
	ctx := context.Background()
	s, err := OpenBolt(filepath.Join(t.TempDir(), "sweep.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var keys []string
	for i := range 1000 {
		keys = append(keys, fmt.Sprintf("old-%04d", i))
	}
	if _, err := s.Load(keys, time.Now().Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			s.Reserve(ctx, fmt.Sprintf("new-%d", i))
		}
	}()
	time.Sleep(20 * time.Millisecond)
	c, err := s.Cleanup(ctx, time.Now().Add(-time.Hour), 1000)
	close(stop)
	wg.Wait()
	if err != nil || c.Deleted != 1000 || c.Transactions != 1000/boltSweepChunk {
		t.Errorf("beside reservations: %+v %v, want 1000 deleted in %d chunks", c, err, 1000/boltSweepChunk)
	}
	if _, err := s.Load(keys, time.Now().Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if s.sweep.busy() {
		t.Fatal("a reservation in the last second, with none sent")
	}
	c, err = s.Cleanup(ctx, time.Now().Add(-time.Hour), 1000)
	if err != nil || c.Deleted != 1000 {
		t.Errorf("alone: %+v %v", c, err)
	}
}
