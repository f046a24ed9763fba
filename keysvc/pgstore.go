package keysvc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemhook/idemhook/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PGStore keeps reservations in a PostgreSQL table with the layout of
// pgsql.EventsDDL, shared with the n8n workflows.
type PGStore struct {
	pool  *pgxpool.Pool
	table pgsql.Table
	lease bool // the table has the lease columns
}

// PGOptions configure OpenPG.
type PGOptions struct {
	// Table defaults to processed_events; "schema.table" is accepted.
	Table string
	// CreateSchema creates the table (with the lease columns) when missing
	// and adds the lease columns to a plain table. Without it keysvc never
	// changes the schema.
	CreateSchema bool
}

// OpenPG connects to databaseURL and checks the table. It fails when the
// table is missing, unless opts.CreateSchema.
func OpenPG(ctx context.Context, databaseURL string, opts PGOptions) (*PGStore, error) {
	if opts.Table == "" {
		opts.Table = "processed_events"
	}
	table, err := pgsql.ParseTable(opts.Table)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	s := &PGStore{pool: pool, table: table}
	if opts.CreateSchema {
		if _, err := pool.Exec(ctx, pgsql.EventsDDL(table, true)); err != nil {
			pool.Close()
			return nil, fmt.Errorf("create %s: %w", table, err)
		}
	}
	columns, err := s.columns(ctx)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if !columns["key"] || !columns["first_seen"] {
		pool.Close()
		return nil, fmt.Errorf("table %s not found (or lacks key, first_seen): create it with `idemhook schema | psql` or start keysvc with --create-schema", table)
	}
	s.lease = columns["state"] && columns["lease_until"] && columns["attempts"]
	return s, nil
}

func (s *PGStore) columns(ctx context.Context) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_name = $1 AND table_schema = coalesce(nullif($2, ''), current_schema())`, s.table.Name, s.table.Schema)
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", s.table, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", s.table, err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}

// Pool exposes the connection pool (benchmarks compare against it).
func (s *PGStore) Pool() *pgxpool.Pool { return s.pool }

func (s *PGStore) Reserve(ctx context.Context, key string) (Reservation, bool, error) {
	var got string
	err := s.pool.QueryRow(ctx, pgsql.Reserve(s.table), key).Scan(&got)
	if err == nil {
		return Reservation{Key: key, State: StateDone}, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Reservation{}, false, fmt.Errorf("reserve: %w", err)
	}
	r, err := s.Lookup(ctx, key)
	if errors.Is(err, ErrNotFound) {
		// Released between the two statements: still not ours to process.
		return Reservation{Key: key, State: StateDone}, false, nil
	}
	return r, false, err
}

func (s *PGStore) AcquireLease(ctx context.Context, key string, lease time.Duration) (Reservation, Outcome, error) {
	if !s.lease {
		return Reservation{}, "", ErrLeaseUnsupported
	}
	var got, outcome string
	var attempt *int
	var leaseUntil *time.Time
	if err := s.pool.QueryRow(ctx, pgsql.AcquireLease(s.table, lease), key).Scan(&got, &outcome, &attempt, &leaseUntil); err != nil {
		return Reservation{}, "", fmt.Errorf("acquire lease: %w", err)
	}
	switch Outcome(outcome) {
	case Acquired:
		return Reservation{Key: key, State: StateProcessing, LeaseUntil: *leaseUntil, Attempt: *attempt}, Acquired, nil
	case Done, Busy:
		r, err := s.Lookup(ctx, key)
		if errors.Is(err, ErrNotFound) {
			// Released in between: tell the caller to come back.
			return Reservation{Key: key}, Busy, nil
		}
		return r, Outcome(outcome), err
	default:
		return Reservation{}, "", fmt.Errorf("acquire lease: unexpected outcome %q", outcome)
	}
}

func (s *PGStore) MarkDone(ctx context.Context, key string) (Reservation, error) {
	if !s.lease {
		// A plain reservation is final already.
		return s.Lookup(ctx, key)
	}
	var got string
	err := s.pool.QueryRow(ctx, pgsql.MarkDone(s.table), key).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return Reservation{}, ErrNotFound
	}
	if err != nil {
		return Reservation{}, fmt.Errorf("mark done: %w", err)
	}
	return s.Lookup(ctx, key)
}

func (s *PGStore) Release(ctx context.Context, key string) error {
	tag, err := s.pool.Exec(ctx, pgsql.Release(s.table), key)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

func (s *PGStore) Lookup(ctx context.Context, key string) (Reservation, error) {
	r := Reservation{Key: key, State: StateDone}
	var err error
	if s.lease {
		var leaseUntil *time.Time
		err = s.pool.QueryRow(ctx, pgsql.LookupLease(s.table), key).
			Scan(&r.FirstSeen, &r.State, &leaseUntil, &r.Attempt)
		if leaseUntil != nil {
			r.LeaseUntil = *leaseUntil
		}
	} else {
		err = s.pool.QueryRow(ctx, pgsql.Lookup(s.table), key).Scan(&r.FirstSeen)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Reservation{}, ErrNotFound
	}
	if err != nil {
		return Reservation{}, fmt.Errorf("lookup: %w", err)
	}
	return r, nil
}

func (s *PGStore) Cleanup(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, pgsql.CleanupBefore(s.table), cutoff)
	if err != nil {
		return 0, fmt.Errorf("cleanup: %w", err)
	}
	return tag.RowsAffected(), nil
}

func (s *PGStore) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

func (s *PGStore) Close() error {
	s.pool.Close()
	return nil
}
