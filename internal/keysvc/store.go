// Package keysvc is the companion HTTP key service: it derives idempotency
// keys by the key spec (docs/key-spec.md) and reserves them atomically, for
// low-code tools that can call HTTP but cannot run the n8n Code node.
//
// Reservations live in PostgreSQL (the processed_events table the n8n
// workflows use, so both can share it) or, when no database is configured,
// in an embedded bbolt file with the same semantics.
package keysvc

import (
	"context"
	"errors"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
)

// Errors a Store returns. Any other error means the store could not answer;
// the service maps it to 503 so that the provider retries.
var (
	// ErrNotFound: no reservation holds the key.
	ErrNotFound = errors.New("no reservation for this key")
	// ErrLeaseUnsupported: the PostgreSQL table lacks the lease columns.
	ErrLeaseUnsupported = errors.New("the reservations table has no lease columns: create it with `idemhook schema --guard lease` or start keysvc with --create-schema")
)

// States of a reservation.
const (
	StateProcessing = "processing"
	StateDone       = "done"
)

// Reservation is what a store knows of a key.
type Reservation struct {
	Key       string
	FirstSeen time.Time
	// State is StateDone for plain reservations; lease reservations start
	// StateProcessing.
	State string
	// LeaseUntil and Attempt are set while a lease is held.
	LeaseUntil time.Time
	Attempt    int
}

// Outcome of AcquireLease: pgsql's, which the workflows test too.
type Outcome = pgsql.Outcome

const (
	Acquired = pgsql.OutcomeAcquired // the caller holds the lease: run the business step
	Done     = pgsql.OutcomeDone     // already processed: a duplicate
	Busy     = pgsql.OutcomeBusy     // another attempt holds an unexpired lease
)

// Store reserves keys. Every method is atomic: of any number of concurrent
// Reserve calls for one key, exactly one reports reserved.
type Store interface {
	// Reserve inserts key; reserved is false when it already existed, and
	// only then does r describe the reservation (first seen, state).
	Reserve(ctx context.Context, key string) (r Reservation, reserved bool, err error)
	// AcquireLease is the lease guard's entry transition (see
	// pgsql.AcquireLease): a new key, or one whose lease expired, is
	// acquired for lease; a done key is Done; a held lease is Busy.
	AcquireLease(ctx context.Context, key string, lease time.Duration) (Reservation, Outcome, error)
	// MarkDone makes key final. ErrNotFound when absent.
	MarkDone(ctx context.Context, key string) (Reservation, error)
	// Release deletes key so the next delivery is processed. ErrNotFound
	// when absent.
	Release(ctx context.Context, key string) error
	// Lookup returns key's reservation, or ErrNotFound.
	Lookup(ctx context.Context, key string) (Reservation, error)
	// Cleanup deletes reservations first seen before cutoff, at most batch
	// in each transaction, so that reservations go on between them; it
	// says how many it deleted, and in how many transactions.
	Cleanup(ctx context.Context, cutoff time.Time, batch int) (Cleaned, error)
	// Ping reports whether the store can answer.
	Ping(ctx context.Context) error
	// ProbeWrite makes a write that leaves no reservation behind, and
	// reports whether the store took it (/readyz, once reservations
	// failed: see writeHealth).
	ProbeWrite(ctx context.Context) error
	Close() error
}

// Cleaned is what a Cleanup did: the reservations it deleted, the
// transactions that deleted them, and the longest of those transactions
// (what a reservation waiting behind one could wait).
type Cleaned struct {
	Deleted      int64
	Transactions int
	Longest      time.Duration
}

// rest waits d, or until ctx ends.
func rest(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// took records one cleanup transaction that lasted d.
func (c *Cleaned) took(d time.Duration) { c.Longest = max(c.Longest, d) }

// Stores coalesce concurrent reservations and lease acquisitions into one
// statement (or write transaction) and one commit per batch of at most
// maxBatch; each caller is answered after the commit that holds its key.
const maxBatch = 512

type reserveResult struct {
	Reservation
	reserved bool
}

type leaseRequest struct {
	key   string
	lease time.Duration
}

type leaseResult struct {
	Reservation
	outcome Outcome
}
