package keysvc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PGStore keeps reservations in a PostgreSQL table with the layout of
// pgsql.EventsDDL, shared with the n8n workflows.
type PGStore struct {
	pool  *pgxpool.Pool
	table pgsql.Table
	lease bool // the table has the lease columns
	// Concurrent reservations and lease acquisitions are coalesced: each
	// worker sends whatever is queued as one statement and one commit.
	reserves *coalescer[string, reserveResult]
	leases   *coalescer[leaseRequest, leaseResult]
}

// pgWorkers is how many batches may be in flight at once; the pool gets a
// connection for each, and some for everything else.
const pgWorkers = 1

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
	poolConfig, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	// pgxpool's default (4 on a small machine) would leave nothing beside
	// the batch workers; an explicit pool_max_conns in the URL wins.
	if !strings.Contains(databaseURL, "pool_max_conns") {
		poolConfig.MaxConns = max(poolConfig.MaxConns, 2*pgWorkers+4)
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolConfig)
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
	s.reserves = newCoalescer(pgWorkers, maxBatch, s.reserveBatch)
	s.leases = newCoalescer(pgWorkers, maxBatch, s.leaseBatch)
	return s, nil
}

func (s *PGStore) columns(ctx context.Context) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, pgsql.Columns, s.table.Name, s.table.Schema)
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

// Table is the reservations table's name.
func (s *PGStore) Table() string { return s.table.String() }

// Pool exposes the connection pool (benchmarks compare against it).
func (s *PGStore) Pool() *pgxpool.Pool { return s.pool }

func (s *PGStore) Reserve(ctx context.Context, key string) (Reservation, bool, error) {
	r, err := s.reserves.do(ctx, key)
	if err != nil {
		return Reservation{}, false, fmt.Errorf("reserve: %w", err)
	}
	return r.Reservation, r.reserved, nil
}

// firstOf maps each request to the index of the first request of its key:
// a key asked twice in one batch is decided once, for its first asker.
func firstOf(keys []string) (unique []string, first []int) {
	seen := make(map[string]int, len(keys))
	first = make([]int, len(keys))
	for i, k := range keys {
		j, ok := seen[k]
		if !ok {
			j = len(unique)
			seen[k] = j
			unique = append(unique, k)
		}
		first[i] = j
	}
	return unique, first
}

// reserveBatch runs pgsql.ReserveMany for the batch: one statement, one
// commit; the keys it did not insert are read back with LookupMany.
func (s *PGStore) reserveBatch(ctx context.Context, keys []string) ([]reserveResult, error) {
	return s.reserveRound(ctx, keys, redecideRounds)
}

// redecideRounds is how often a batch decides again the keys that were
// released between its statement and its lookup (see reserveRound).
const redecideRounds = 3

// reserveRound is reserveBatch, deciding again, up to rounds more times,
// the keys the statement found taken and the lookup then did not find: a
// key released in between is absent now, and its reservation takes it
// (answering from the lookup's nothing said "done" of a key that may have
// been processing).
func (s *PGStore) reserveRound(ctx context.Context, keys []string, rounds int) ([]reserveResult, error) {
	unique, first := firstOf(keys)
	rows, err := s.pool.Query(ctx, pgsql.ReserveMany(s.table), unique)
	if err != nil {
		return nil, err
	}
	inserted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	existing, err := s.lookupOthers(ctx, unique, inserted)
	if err != nil {
		return nil, err
	}
	isNew := make(map[string]bool, len(inserted))
	for _, k := range inserted {
		isNew[k] = true
	}
	out := make([]reserveResult, len(keys))
	decided := make([]bool, len(unique))
	var again []int
	for i, k := range keys {
		r, found := existing[k]
		switch {
		case isNew[k] && !decided[first[i]]:
			out[i] = reserveResult{Reservation: Reservation{Key: k, State: StateDone}, reserved: true}
		case isNew[k]:
			// Reserved just now by this batch, for an earlier request.
			out[i] = reserveResult{Reservation: Reservation{Key: k, State: StateDone}}
		case found:
			out[i] = reserveResult{Reservation: r}
		case rounds > 0:
			again = append(again, i)
		default:
			// Taken when the statement ran, in a state no read saw.
			out[i] = reserveResult{Reservation: Reservation{Key: k}}
		}
		decided[first[i]] = true
	}
	return out, redecide(again, keys, out, func(keys []string) ([]reserveResult, error) {
		return s.reserveRound(ctx, keys, rounds-1)
	})
}

// redecide runs the requests at indices again of reqs as a batch of
// their own and puts the answers into out.
func redecide[Req, Res any](again []int, reqs []Req, out []Res, run func([]Req) ([]Res, error)) error {
	if len(again) == 0 {
		return nil
	}
	sub := make([]Req, len(again))
	for j, i := range again {
		sub[j] = reqs[i]
	}
	res, err := run(sub)
	if err != nil {
		return err
	}
	for j, i := range again {
		out[i] = res[j]
	}
	return nil
}

// lookupOthers reads the keys of unique that are not in taken; no query
// when there are none, the common case of new keys.
func (s *PGStore) lookupOthers(ctx context.Context, unique, taken []string) (map[string]Reservation, error) {
	if len(taken) == len(unique) {
		return nil, nil
	}
	in := make(map[string]bool, len(taken))
	for _, k := range taken {
		in[k] = true
	}
	var others []string
	for _, k := range unique {
		if !in[k] {
			others = append(others, k)
		}
	}
	rows, err := s.pool.Query(ctx, pgsql.LookupMany(s.table, s.lease), others)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Reservation{}
	for rows.Next() {
		var r Reservation
		var leaseUntil *time.Time
		if err := rows.Scan(&r.Key, &r.FirstSeen, &r.State, &leaseUntil, &r.Attempt); err != nil {
			return nil, err
		}
		if leaseUntil != nil {
			r.LeaseUntil = *leaseUntil
		}
		out[r.Key] = r
	}
	return out, rows.Err()
}

func (s *PGStore) AcquireLease(ctx context.Context, key string, lease time.Duration) (Reservation, Outcome, error) {
	if !s.lease {
		return Reservation{}, "", ErrLeaseUnsupported
	}
	r, err := s.leases.do(ctx, leaseRequest{key: key, lease: lease})
	if err != nil {
		return Reservation{}, "", fmt.Errorf("acquire lease: %w", err)
	}
	return r.Reservation, r.outcome, nil
}

// leaseBatch runs pgsql.AcquireLeaseMany for the batch; a key it did not
// acquire is done or busy, as LookupMany reads it. A key asked again in the
// same batch is busy: its first request holds (or was refused) the lease.
func (s *PGStore) leaseBatch(ctx context.Context, reqs []leaseRequest) ([]leaseResult, error) {
	return s.leaseRound(ctx, reqs, redecideRounds)
}

// leaseRound is leaseBatch, deciding again, up to rounds more times, the
// keys the statement did not acquire and the lookup then did not find:
// released in between, such a key is absent now and its lease is taken
// (answering busy said a lease was held on a key that was done, then
// absent).
func (s *PGStore) leaseRound(ctx context.Context, reqs []leaseRequest, rounds int) ([]leaseResult, error) {
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.key
	}
	unique, first := firstOf(keys)
	seconds := make([]int32, len(unique))
	for i := len(reqs) - 1; i >= 0; i-- {
		seconds[first[i]] = int32(reqs[i].lease / time.Second)
	}
	acquired, taken, err := s.acquireMany(ctx, unique, seconds)
	if err != nil {
		return nil, err
	}
	existing, err := s.lookupOthers(ctx, unique, taken)
	if err != nil {
		return nil, err
	}
	out := make([]leaseResult, len(reqs))
	decided := make([]bool, len(unique))
	var again []int
	for i, k := range keys {
		r, ok := acquired[k]
		e, found := existing[k]
		switch {
		case ok && !decided[first[i]]:
			out[i] = leaseResult{Reservation: r, outcome: Acquired}
		case ok:
			out[i] = leaseResult{Reservation: r, outcome: Busy}
		case found && e.State == StateDone:
			out[i] = leaseResult{Reservation: e, outcome: Done}
		case found:
			out[i] = leaseResult{Reservation: e, outcome: Busy}
		case rounds > 0 && !decided[first[i]]:
			again = append(again, i)
		case rounds > 0:
			// Decided again with its first request, which takes the
			// lease if anyone does.
			out[i] = leaseResult{Reservation: Reservation{Key: k}, outcome: Busy}
		default:
			// Released three times over while it was decided: the caller
			// comes back.
			out[i] = leaseResult{Reservation: Reservation{Key: k}, outcome: Busy}
		}
		decided[first[i]] = true
	}
	return out, redecide(again, reqs, out, func(reqs []leaseRequest) ([]leaseResult, error) {
		return s.leaseRound(ctx, reqs, rounds-1)
	})
}

// acquireMany runs pgsql.AcquireLeaseMany: the keys it acquired, by key and
// in order.
func (s *PGStore) acquireMany(ctx context.Context, unique []string, seconds []int32) (map[string]Reservation, []string, error) {
	rows, err := s.pool.Query(ctx, pgsql.AcquireLeaseMany(s.table), unique, seconds)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	acquired := map[string]Reservation{}
	var taken []string
	for rows.Next() {
		r := Reservation{State: StateProcessing}
		if err := rows.Scan(&r.Key, &r.Attempt, &r.LeaseUntil); err != nil {
			return nil, nil, err
		}
		acquired[r.Key] = r
		taken = append(taken, r.Key)
	}
	return acquired, taken, rows.Err()
}

func (s *PGStore) MarkDone(ctx context.Context, key string) (Reservation, error) {
	if !s.lease {
		// A plain reservation is final already.
		return s.Lookup(ctx, key)
	}
	r := Reservation{Key: key}
	var leaseUntil *time.Time
	err := s.pool.QueryRow(ctx, pgsql.MarkDoneRow(s.table), key).Scan(&r.FirstSeen, &r.State, &leaseUntil, &r.Attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Reservation{}, ErrNotFound
	}
	if err != nil {
		return Reservation{}, fmt.Errorf("mark done: %w", err)
	}
	return r, nil
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

// Cleanup runs pgsql.CleanupBatch, each in a transaction of its own and
// pgsql.CleanupPause after the one before, until one deletes fewer than
// batch.
func (s *PGStore) Cleanup(ctx context.Context, cutoff time.Time, batch int) (Cleaned, error) {
	var c Cleaned
	stmt := pgsql.CleanupBatch(s.table, batch)
	for {
		start := time.Now()
		tag, err := s.pool.Exec(ctx, stmt, cutoff)
		if err != nil {
			return c, fmt.Errorf("cleanup: %w", err)
		}
		c.took(time.Since(start))
		if n := tag.RowsAffected(); n > 0 {
			c.Deleted += n
			c.Transactions++
		}
		if tag.RowsAffected() < int64(batch) {
			return c, nil
		}
		if err := rest(ctx, pgsql.CleanupPause); err != nil {
			return c, err
		}
	}
}

func (s *PGStore) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// ProbeWrite runs pgsql.ReserveMany for the probe's key in a transaction it
// rolls back: PostgreSQL must find room for the row (extend the table when
// it has no free space) as for a reservation, and nothing becomes visible.
// No caller can name the key (the key rule refuses control characters), so
// the insert waits for no reservation's lock and holds none that one needs.
func (s *PGStore) ProbeWrite(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, pgsql.ReserveMany(s.table), []string{probeKey})
	if err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	return nil
}

func (s *PGStore) Close() error {
	s.reserves.close()
	s.leases.close()
	s.pool.Close()
	return nil
}
