package keysvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BoltStore keeps reservations in a bbolt file: pure Go, no server, durable
// (every write is fsynced). bbolt runs one write transaction at a time, which
// makes each method atomic across goroutines. One process only: the file is
// locked while open. Move to PostgreSQL to run several keysvc instances or to
// share reservations with n8n workflows.
type BoltStore struct {
	db *bolt.DB
	// bbolt has one writer: one worker batches every reservation and lease
	// that arrives while the previous transaction commits.
	reserves *coalescer[string, reserveResult]
	leases   *coalescer[leaseRequest, leaseResult]
	// sweep lets the cleanup's deletes ride the reservations' commits.
	sweep sweep
}

var boltBucket = []byte("reservations")

type boltRecord struct {
	FirstSeen  time.Time `json:"first_seen"`
	State      string    `json:"state"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	Attempts   int       `json:"attempts"`
}

// ErrStoreLocked is OpenBolt's error when another process holds the file.
var ErrStoreLocked = errors.New("the embedded store is locked by another process")

// OpenBolt opens (or creates) the bbolt file at path. A file another
// process holds (bbolt locks it) fails with ErrStoreLocked after two
// seconds; a path it cannot open, with the *fs.PathError that says why.
func OpenBolt(path string) (*BoltStore, error) {
	// The freelist is kept in memory and rebuilt when the file is opened,
	// not written at every commit: after a cleanup it lists every freed
	// page, and writing it made each reservation's commit pay for them.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%w (another keysvc using %s? one process per file: run several on PostgreSQL)", ErrStoreLocked, path)
	}
	if err != nil {
		return nil, err // a *fs.PathError: it names the path and the reason
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(boltBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &BoltStore{db: db}
	s.reserves = newCoalescer(1, maxBatch, s.reserveBatch)
	s.leases = newCoalescer(1, maxBatch, s.leaseBatch)
	return s, nil
}

func get(b *bolt.Bucket, key string) (boltRecord, bool, error) {
	raw := b.Get([]byte(key))
	if raw == nil {
		return boltRecord{}, false, nil
	}
	var rec boltRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return boltRecord{}, false, fmt.Errorf("decode reservation: %w", err)
	}
	return rec, true, nil
}

func put(b *bolt.Bucket, key string, rec boltRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), raw)
}

func (rec boltRecord) reservation(key string) Reservation {
	return Reservation{Key: key, FirstSeen: rec.FirstSeen, State: rec.State, LeaseUntil: rec.LeaseUntil, Attempt: rec.Attempts}
}

func (s *BoltStore) Reserve(ctx context.Context, key string) (Reservation, bool, error) {
	r, err := s.reserves.do(ctx, key)
	if err != nil {
		return Reservation{}, false, fmt.Errorf("reserve: %w", err)
	}
	return r.Reservation, r.reserved, nil
}

// reserveBatch reserves keys in one write transaction, so one fsync commits
// them all; a key repeated in the batch is reserved by its first request.
// The transaction also deletes the cleanup's chunk on offer, if any (see
// sweep).
func (s *BoltStore) reserveBatch(_ context.Context, keys []string) ([]reserveResult, error) {
	out := make([]reserveResult, len(keys))
	chunk := s.sweep.take()
	var swept int64
	start := time.Now()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		if chunk != nil {
			var err error
			if swept, err = deleteUnchanged(b, chunk.recs); err != nil {
				return err
			}
		}
		for i, key := range keys {
			rec, found, err := get(b, key)
			if err != nil {
				return err
			}
			if found {
				out[i] = reserveResult{Reservation: rec.reservation(key)}
				continue
			}
			rec = boltRecord{FirstSeen: time.Now().UTC(), State: StateDone, Attempts: 1}
			out[i] = reserveResult{Reservation: rec.reservation(key), reserved: true}
			if err := put(b, key, rec); err != nil {
				return err
			}
		}
		return nil
	})
	s.sweep.committed(chunk, swept, time.Since(start), err)
	return out, err
}

// Load adds done reservations first seen at firstSeen for the keys not yet
// reserved, in one write transaction (one fsync for all of them), and says
// how many it added: how a store is filled in bulk, such as the bench's ten
// million keys, without a transaction per key. Keys in sorted order load
// fastest (bbolt then writes each page once).
func (s *BoltStore) Load(keys []string, firstSeen time.Time) (added int, err error) {
	raw, err := json.Marshal(boltRecord{FirstSeen: firstSeen.UTC(), State: StateDone, Attempts: 1})
	if err != nil {
		return 0, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		for _, key := range keys {
			if b.Get([]byte(key)) != nil {
				continue
			}
			if err := b.Put([]byte(key), raw); err != nil {
				return err
			}
			added++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("load: %w", err)
	}
	return added, nil
}

func (s *BoltStore) AcquireLease(ctx context.Context, key string, lease time.Duration) (Reservation, Outcome, error) {
	r, err := s.leases.do(ctx, leaseRequest{key: key, lease: lease})
	if err != nil {
		return Reservation{}, "", fmt.Errorf("acquire lease: %w", err)
	}
	return r.Reservation, r.outcome, nil
}

// leaseBatch is AcquireLease for many requests in one write transaction.
func (s *BoltStore) leaseBatch(_ context.Context, reqs []leaseRequest) ([]leaseResult, error) {
	out := make([]leaseResult, len(reqs))
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		now := time.Now().UTC()
		for i, req := range reqs {
			rec, found, err := get(b, req.key)
			if err != nil {
				return err
			}
			switch {
			case !found:
				rec = boltRecord{FirstSeen: now, State: StateProcessing, LeaseUntil: now.Add(req.lease), Attempts: 1}
			case rec.State == StateProcessing && rec.LeaseUntil.Before(now):
				rec.LeaseUntil, rec.Attempts = now.Add(req.lease), rec.Attempts+1
			case rec.State == StateDone:
				out[i] = leaseResult{Reservation: rec.reservation(req.key), outcome: Done}
				continue
			default:
				out[i] = leaseResult{Reservation: rec.reservation(req.key), outcome: Busy}
				continue
			}
			out[i] = leaseResult{Reservation: rec.reservation(req.key), outcome: Acquired}
			if err := put(b, req.key, rec); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

func (s *BoltStore) MarkDone(_ context.Context, key string) (r Reservation, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		rec, found, err := get(b, key)
		if err != nil {
			return err
		}
		if !found {
			return ErrNotFound
		}
		rec.State, rec.LeaseUntil = StateDone, time.Time{}
		r = rec.reservation(key)
		return put(b, key, rec)
	})
	return r, err
}

func (s *BoltStore) Release(_ context.Context, key string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		if b.Get([]byte(key)) == nil {
			return ErrNotFound
		}
		return b.Delete([]byte(key))
	})
}

func (s *BoltStore) Lookup(_ context.Context, key string) (r Reservation, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		rec, found, err := get(tx.Bucket(boltBucket), key)
		if err != nil {
			return err
		}
		if !found {
			return ErrNotFound
		}
		r = rec.reservation(key)
		return nil
	})
	return r, err
}

// Cleanup walks the keys in order: a read transaction finds the expired
// ones among the next keys (readers never wait for the writer), and their
// deletion rides the next reservations' write transaction, at most
// boltSweepChunk (or batch, when smaller) at a time, or runs in a
// transaction of its own when no reservation is coming (see sweep): a
// reservation never waits for a commit of the cleanup's. The file does not
// shrink: bbolt keeps the freed pages for the keys that come next
// (docs/speed.md measures it).
func (s *BoltStore) Cleanup(ctx context.Context, cutoff time.Time, batch int) (Cleaned, error) {
	chunk := min(batch, boltSweepChunk)
	var c Cleaned
	var after []byte // the last key looked at
	for {
		expired, last, err := s.expiredAfter(after, cutoff, chunk)
		if err != nil {
			return c, err
		}
		if len(expired) > 0 {
			r := s.deleteChunk(ctx, expired)
			if r.err != nil {
				return c, fmt.Errorf("cleanup: %w", r.err)
			}
			c.took(r.took)
			c.Deleted += r.deleted
			c.Transactions++
		}
		if last == nil {
			return c, nil
		}
		after = last
	}
}

// record is a key and its stored value as a read transaction saw it.
type record struct{ key, value []byte }

// expiredAfter reads, in one read transaction, up to batch records first
// seen before cutoff among the keys after after (from the first when nil),
// and the last key it looked at: nil once it reached the end.
func (s *BoltStore) expiredAfter(after []byte, cutoff time.Time, batch int) (expired []record, last []byte, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(boltBucket).Cursor()
		k, v := cur.First()
		if after != nil {
			if k, v = cur.Seek(after); k != nil && string(k) == string(after) {
				k, v = cur.Next()
			}
		}
		// Look at up to ten batches of keys, so that a pass over a store
		// with few expired keys is not one read transaction per key.
		for looked := 0; k != nil && len(expired) < batch && looked < 10*batch; k, v = cur.Next() {
			looked++
			var rec boltRecord
			if json.Unmarshal(v, &rec) == nil && rec.FirstSeen.Before(cutoff) {
				expired = append(expired, record{bytes.Clone(k), bytes.Clone(v)})
			}
			last = append(last[:0], k...)
		}
		if k == nil {
			last = nil
		}
		return nil
	})
	return expired, last, err
}

func (s *BoltStore) Ping(context.Context) error {
	return s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(boltBucket) == nil {
			return fmt.Errorf("bucket %s missing", boltBucket)
		}
		return nil
	})
}

// Backup writes a consistent copy of the store to w, as one read
// transaction sees it: every reservation committed before it began, none
// after (bbolt's Tx.WriteTo). Reservations go on meanwhile; the pages they
// free are reused only once it ends. begin is called with the copy's size
// before its first byte.
func (s *BoltStore) Backup(begin func(size int64), w io.Writer) (written int64, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		begin(tx.Size())
		written, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return written, fmt.Errorf("backup: %w", err)
	}
	return written, nil
}

// Path is the store's file.
func (s *BoltStore) Path() string { return s.db.Path() }

// boltProbeBucket holds ProbeWrite's one key, apart from the reservations
// (the cleanup and the look-ups never see it).
var boltProbeBucket = []byte("readiness")

// ProbeWrite commits a write transaction that puts the probe's key, with
// the time, in a bucket of its own: pages written and fsynced as a
// reservation's are. It may fit in pages the store freed while a
// reservation that needs the file to grow still fails.
func (s *BoltStore) ProbeWrite(context.Context) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(boltProbeBucket)
		if err != nil {
			return err
		}
		return b.Put([]byte(probeKey), []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	})
}

func (s *BoltStore) Close() error {
	s.reserves.close()
	s.leases.close()
	return s.db.Close()
}
