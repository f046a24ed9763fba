package keysvc

import (
	"bytes"
	"context"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// sweep carries the embedded store's cleanup into the reservations' write
// transactions. bbolt has one writer and each commit is an fsync: a cleanup
// committing transactions of its own makes every reservation that arrives
// meanwhile wait for one more fsync (its p99 doubled beside a cleanup in
// batches of 50). Instead the cleanup offers its next chunk of expired
// records, and the next reservations' transaction deletes them before it
// commits: one fsync for both. When the store is idle, or no reservation
// comes within boltSweepWait, the cleanup deletes the chunk itself: then
// no reservation is there to wait.
type sweep struct {
	mu    sync.Mutex
	chunk *sweepChunk // the chunk on offer, nil when none
	// lastWrite is when a reservations' transaction last committed.
	lastWrite time.Time
}

// sweepChunk is a chunk of expired records on offer, and where the
// transaction that deleted them says how many it deleted and how long it
// took.
type sweepChunk struct {
	recs []record
	done chan sweepResult
}

type sweepResult struct {
	deleted int64
	took    time.Duration
	err     error
}

// How the cleanup rides the reservations: the records one chunk holds,
// and how long a chunk waits on offer for a reservations' transaction
// while reservations are coming (one committed in the last second).
const (
	boltSweepChunk = 100
	boltSweepWait  = 10 * time.Millisecond
)

// take removes the chunk on offer, for the transaction about to commit.
func (sw *sweep) take() *sweepChunk {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	c := sw.chunk
	sw.chunk = nil
	return c
}

// committed records a reservations' transaction that ended with err after
// took, and answers the chunk it carried.
func (sw *sweep) committed(c *sweepChunk, deleted int64, took time.Duration, err error) {
	sw.mu.Lock()
	sw.lastWrite = time.Now()
	sw.mu.Unlock()
	if c != nil {
		c.done <- sweepResult{deleted, took, err}
	}
}

// busy says whether reservations are coming: one committed in the last
// second.
func (sw *sweep) busy() bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return time.Since(sw.lastWrite) < time.Second
}

// deleteChunk deletes recs: beside the reservations when they are coming,
// else (or when none came within boltSweepWait) in a transaction of its
// own.
func (s *BoltStore) deleteChunk(ctx context.Context, recs []record) sweepResult {
	if s.sweep.busy() {
		c := &sweepChunk{recs: recs, done: make(chan sweepResult, 1)}
		s.sweep.mu.Lock()
		s.sweep.chunk = c
		s.sweep.mu.Unlock()
		t := time.NewTimer(boltSweepWait)
		defer t.Stop()
		select {
		case r := <-c.done:
			return r
		case <-t.C:
		case <-ctx.Done():
		}
		s.sweep.mu.Lock()
		offered := s.sweep.chunk == c
		if offered {
			s.sweep.chunk = nil
		}
		s.sweep.mu.Unlock()
		if !offered {
			return <-c.done // a transaction took it: its commit is near
		}
		if err := ctx.Err(); err != nil {
			return sweepResult{err: err}
		}
	}
	start := time.Now()
	var deleted int64
	err := s.db.Update(func(tx *bolt.Tx) (err error) {
		deleted, err = deleteUnchanged(tx.Bucket(boltBucket), recs)
		return err
	})
	return sweepResult{deleted, time.Since(start), err}
}

// deleteUnchanged deletes each record whose value is still the one read:
// a key released and reserved again meanwhile is a new reservation, and
// stays.
func deleteUnchanged(b *bolt.Bucket, recs []record) (deleted int64, err error) {
	for _, r := range recs {
		if bytes.Equal(b.Get(r.key), r.value) {
			if err := b.Delete(r.key); err != nil {
				return deleted, err
			}
			deleted++
		}
	}
	return deleted, nil
}
