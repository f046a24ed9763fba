package keysvc

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// boltRecheck is how long after a failed write /readyz answers 503 on the
// embedded store before it tries a write of its own. Its probe can fit in
// pages the store freed where a batch of reservations that needs the file
// to grow cannot: while reservations keep failing, /readyz says so from
// their failures, and only once none failed for this long does it probe,
// so that a keysvc its load balancer took out of rotation (and which
// therefore gets no reservation) comes back once the disk has room. On
// PostgreSQL the probe is the reservation's own INSERT and fails as it
// does: /readyz probes at once, and is ready as soon as PostgreSQL takes
// rows again.
const boltRecheck = 5 * time.Second

// probeKey is the key ProbeWrite writes: the key rule refuses control
// characters, so no caller can name it, and a reservation never collides
// with it.
const probeKey = "\x01keysvc readiness probe"

// errUnwritable is /readyz's answer while the store does not take writes.
var errUnwritable = &statusError{Status: http.StatusServiceUnavailable, Code: "store_unwritable",
	Msg: "the store did not take its last write (a full disk?): reservations are answered 503 until one takes", RetryAfter: storeRetryAfter}

// writeHealth remembers whether the store took its last write: a
// reservation's, a lease's, a completion's, a release's, or /readyz's own
// probe. A full disk fails every new reservation while the store still
// answers reads, so reading alone (Ping) says ready.
type writeHealth struct {
	logger  *slog.Logger
	recheck time.Duration // 0, or boltRecheck
	mu      sync.Mutex
	// failingSince is the first failure of the current run of failures
	// (zero while the last write took); lastFailure the latest.
	failingSince, lastFailure time.Time
}

// note records a write's outcome and logs when the store starts and stops
// failing writes. Answers about a key (ErrNotFound, ErrLeaseUnsupported)
// and failures of a caller who left (ctx done) say nothing of the store.
func (h *writeHealth) note(ctx context.Context, err error) {
	if err != nil && (errors.Is(err, ErrNotFound) || errors.Is(err, ErrLeaseUnsupported) || ctx.Err() != nil) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	switch {
	case err != nil && h.failingSince.IsZero():
		h.failingSince, h.lastFailure = now, now
		h.logger.Error("store: a write failed; /readyz answers 503 until a write takes", "error", err)
	case err != nil:
		h.lastFailure = now
	case !h.failingSince.IsZero():
		h.logger.Info("store: writes take again; /readyz answers 200", "failing_seconds", now.Sub(h.failingSince).Seconds())
		h.failingSince, h.lastFailure = time.Time{}, time.Time{}
	}
}

// writable reports whether the last write took (the keysvc_store_writable
// gauge).
func (h *writeHealth) writable() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failingSince.IsZero()
}

// ready is nil when the store's last write took; errUnwritable while writes
// fail, trying store.ProbeWrite once no write failed for h.recheck.
func (h *writeHealth) ready(ctx context.Context, store Store) error {
	h.mu.Lock()
	last := h.lastFailure
	h.mu.Unlock()
	if last.IsZero() {
		return nil
	}
	if time.Since(last) < h.recheck {
		return errUnwritable
	}
	err := store.ProbeWrite(ctx)
	h.note(ctx, err)
	if err != nil {
		return errUnwritable
	}
	return nil
}

// watchedStore is the store as the handlers use it: each write's outcome
// goes to health.
type watchedStore struct {
	Store
	health *writeHealth
}

func (w watchedStore) Reserve(ctx context.Context, key string) (Reservation, bool, error) {
	r, reserved, err := w.Store.Reserve(ctx, key)
	w.health.note(ctx, err)
	return r, reserved, err
}

func (w watchedStore) AcquireLease(ctx context.Context, key string, lease time.Duration) (Reservation, Outcome, error) {
	r, outcome, err := w.Store.AcquireLease(ctx, key, lease)
	w.health.note(ctx, err)
	return r, outcome, err
}

func (w watchedStore) MarkDone(ctx context.Context, key string) (Reservation, error) {
	r, err := w.Store.MarkDone(ctx, key)
	w.health.note(ctx, err)
	return r, err
}

func (w watchedStore) Release(ctx context.Context, key string) error {
	err := w.Store.Release(ctx, key)
	w.health.note(ctx, err)
	return err
}
