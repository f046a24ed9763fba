package bench

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/sandbox"
)

// RetentionRun is one cleanup of expired keys while reservations go on
// beside it, through keysvc, at a steady rate.
type RetentionRun struct {
	Cleanup string
	// Expired and Live keys before the cleanup; Deleted by it.
	Expired, Live int
	Deleted       int64
	// Transactions that deleted them (0: not counted, the DO block's are
	// inside one statement).
	Transactions int
	// Longest is the longest cleanup transaction: for PostgreSQL the age
	// of the oldest cleanup transaction open, sampled every 10 ms from
	// pg_stat_activity; for the embedded store, its longest write
	// transaction.
	Longest, Took time.Duration
	// Rate of the reservations beside it, per second; their p99 in the
	// 30 s before the cleanup and during it, each measured from when the
	// reservation was due (a stall counts for every reservation it
	// delayed).
	Rate                 int
	P99Before, P99During time.Duration
	// Reserved is how many keys were reserved during the cleanup: every
	// one (and every one before it) was found afterwards, as were the live
	// keys.
	Reserved int
	// The embedded store's file: before the cleanup, after it, and after
	// as many new keys as it deleted were loaded again.
	FileBefore, FileAfter, FileRefilled int64
}

// Cleanups the retention runs compare.
var (
	retentionKeysvcPG   = fmt.Sprintf("keysvc's pruning on PostgreSQL (batches of %s, %s apart)", count(int64(pgsql.CleanupBatchSize)), pgsql.CleanupPause)
	retentionWorkflow   = fmt.Sprintf("the cleanup workflow's statement (DO block: batches of %s, %s apart)", count(int64(pgsql.CleanupBatchSize)), pgsql.CleanupPause)
	retentionOneDelete  = "one DELETE (the cleanup before batching)"
	retentionKeysvcBolt = "keysvc's pruning on its embedded store"
)

// retentionBefore is how long reservations run before the cleanup starts.
const retentionBefore = 30 * time.Second

// retentionAge is the retention the runs prune by; expired keys were first
// seen 40 days ago, live ones a day ago.
const retentionAge = 30 * 24 * time.Hour

// retention prunes opts.Expired keys beside opts.Live live ones, in each
// store and by each cleanup, while keysvc reserves new keys at opts.Rate.
func retention(ctx context.Context, st *sandbox.Stack, opts ScaleOptions, dir string, step func(string, ...any)) ([]RetentionRun, error) {
	t := pgsql.MustParseTable("retention_events")
	if _, err := st.Business.Exec(ctx, "DROP TABLE IF EXISTS "+t.String()+"; "+pgsql.EventsDDL(t, true)); err != nil {
		return nil, err
	}
	step("retention: %d live keys into %s", opts.Live, t)
	if err := fillPG(ctx, st.Business, t, "live", 0, opts.Live, time.Now().Add(-24*time.Hour)); err != nil {
		return nil, err
	}
	cfg := keysvc.ServiceConfig{DatabaseURL: st.BusinessDSN, PG: keysvc.PGOptions{Table: t.String()}}
	var out []RetentionRun
	for _, c := range []struct {
		name  string
		prune func(context.Context, *keysvc.Service) (keysvc.Cleaned, error)
	}{
		{retentionKeysvcPG, func(ctx context.Context, svc *keysvc.Service) (keysvc.Cleaned, error) {
			return svc.Cleanup(ctx, time.Now().Add(-retentionAge))
		}},
		{retentionWorkflow, func(ctx context.Context, _ *keysvc.Service) (keysvc.Cleaned, error) {
			_, err := st.Business.Exec(ctx, pgsql.Cleanup(t, retentionAge, pgsql.CleanupBatchSize))
			return keysvc.Cleaned{}, err
		}},
		{retentionOneDelete, func(ctx context.Context, _ *keysvc.Service) (keysvc.Cleaned, error) {
			tag, err := st.Business.Exec(ctx, "DELETE FROM "+t.String()+" WHERE first_seen < now() - interval '30 days'")
			return keysvc.Cleaned{Deleted: tag.RowsAffected(), Transactions: 1}, err
		}},
	} {
		step("retention: %d expired keys into %s", opts.Expired, t)
		if err := fillPG(ctx, st.Business, t, "expired", 0, opts.Expired, time.Now().Add(-40*24*time.Hour)); err != nil {
			return nil, err
		}
		if err := quiesce(ctx, st, &t); err != nil {
			return nil, err
		}
		step("retention: %s, %d reservations a second beside it", c.name, opts.Rate)
		r, err := pgRetention(ctx, st, t, cfg, opts, c.prune)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		r.Cleanup = c.name
		out = append(out, r)
	}
	r, err := boltRetention(ctx, filepath.Join(dir, "retention.db"), opts, step)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", retentionKeysvcBolt, err)
	}
	return append(out, r), nil
}

// pgRetention runs one cleanup of the table beside reservations, samples
// its longest transaction, and checks that it deleted every expired key
// and no other.
func pgRetention(ctx context.Context, st *sandbox.Stack, t pgsql.Table, cfg keysvc.ServiceConfig, opts ScaleOptions,
	prune func(context.Context, *keysvc.Service) (keysvc.Cleaned, error)) (RetentionRun, error) {
	longest := sampleCleanupAge(ctx, st, t)
	r, reserved, err := pruneBeside(ctx, cfg, opts.Rate, prune)
	r.Longest = max(r.Longest, longest())
	if err != nil {
		return r, err
	}
	var expired, live, kept int64
	err = st.Business.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE first_seen < now() - interval '30 days'),
  count(*) FILTER (WHERE first_seen >= now() - interval '30 days' AND first_seen < now() - interval '1 hour'),
  count(*) FILTER (WHERE key = ANY ($1))
FROM %s`, t), reserved).Scan(&expired, &live, &kept)
	if err != nil {
		return r, err
	}
	// The live keys were first seen a day ago; the ones reserved beside
	// this cleanup (and the ones before) now.
	if expired != 0 || live != int64(opts.Live) || kept != int64(len(reserved)) {
		return r, fmt.Errorf("after the cleanup %d expired keys are left (want 0), %d live ones (want %d), %d of the %d reserved beside it", expired, live, opts.Live, kept, len(reserved))
	}
	r.Expired, r.Live, r.Deleted = opts.Expired, opts.Live, int64(opts.Expired)
	return r, nil
}

// quiesce lets what filling the store set off end before the reservations
// are timed, as it has long ended for keys that expire a month after they
// were written: the table vacuumed and analyzed (with st and t), a
// checkpoint, and the kernel's dirty pages written.
func quiesce(ctx context.Context, st *sandbox.Stack, t *pgsql.Table) error {
	if st != nil {
		if _, err := st.Business.Exec(ctx, "VACUUM (ANALYZE) "+t.String()); err != nil {
			return err
		}
		if _, err := st.Business.Exec(ctx, "CHECKPOINT"); err != nil {
			return err
		}
	}
	syscall.Sync()
	return nil
}

// sampleCleanupAge samples, every 10 ms until the returned function is
// called, the age of the oldest open transaction of a statement deleting
// from t, and the function returns the largest seen.
func sampleCleanupAge(ctx context.Context, st *sandbox.Stack, t pgsql.Table) func() time.Duration {
	stop := make(chan struct{})
	done := make(chan time.Duration)
	go func() {
		var largest time.Duration
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var age time.Duration
			if err := st.Business.QueryRow(ctx, `SELECT coalesce(max(clock_timestamp() - xact_start), '0')
FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active' AND query LIKE $1`, "%DELETE FROM "+t.String()+"%").Scan(&age); err == nil {
				largest = max(largest, age)
			}
			select {
			case <-stop:
				done <- largest
				return
			case <-tick.C:
			}
		}
	}()
	return func() time.Duration { close(stop); return <-done }
}

// boltRetention loads live and expired keys into an embedded store, prunes
// it beside reservations, checks what is left, and measures the file.
func boltRetention(ctx context.Context, file string, opts ScaleOptions, step func(string, ...any)) (RetentionRun, error) {
	step("retention: %d live and %d expired keys into the embedded store", opts.Live, opts.Expired)
	if _, err := fillBolt(file, "live", 0, opts.Live, time.Now().Add(-24*time.Hour)); err != nil {
		return RetentionRun{}, err
	}
	if _, err := fillBolt(file, "expired", 0, opts.Expired, time.Now().Add(-40*24*time.Hour)); err != nil {
		return RetentionRun{}, err
	}
	before, err := fileSize(file)
	if err != nil {
		return RetentionRun{}, err
	}
	if err := quiesce(ctx, nil, nil); err != nil {
		return RetentionRun{}, err
	}
	step("retention: %s, %d reservations a second beside it", retentionKeysvcBolt, opts.Rate)
	r, reserved, err := pruneBeside(ctx, keysvc.ServiceConfig{DBFile: file}, opts.Rate, func(ctx context.Context, svc *keysvc.Service) (keysvc.Cleaned, error) {
		return svc.Cleanup(ctx, time.Now().Add(-retentionAge))
	})
	if err != nil {
		return r, err
	}
	r.Cleanup, r.Expired, r.Live, r.FileBefore = retentionKeysvcBolt, opts.Expired, opts.Live, before
	if r.Deleted != int64(opts.Expired) {
		return r, fmt.Errorf("the cleanup deleted %d keys, want the %d expired", r.Deleted, opts.Expired)
	}
	if err := checkBolt(ctx, file, opts.Live, reserved); err != nil {
		return r, err
	}
	if r.FileAfter, err = fileSize(file); err != nil {
		return r, err
	}
	step("retention: %d new keys into the pruned embedded store", opts.Expired)
	if _, err := fillBolt(file, "refill", 0, opts.Expired, time.Now()); err != nil {
		return r, err
	}
	r.FileRefilled, err = fileSize(file)
	return r, err
}

// checkBolt checks that the embedded store in file holds every live key and
// every key reserved during the cleanup, and that a second cleanup finds
// nothing expired.
func checkBolt(ctx context.Context, file string, live int, reserved []string) error {
	store, err := keysvc.OpenBolt(file)
	if err != nil {
		return err
	}
	defer store.Close()
	if c, err := store.Cleanup(ctx, time.Now().Add(-retentionAge), pgsql.CleanupBatchSize); err != nil || c.Deleted != 0 {
		return fmt.Errorf("a second cleanup deleted %d keys (%v): the first left expired ones", c.Deleted, err)
	}
	for i := range live {
		if _, err := store.Lookup(ctx, prefilledKey("live", i)); err != nil {
			return fmt.Errorf("live key %d after the cleanup: %w", i, err)
		}
	}
	for _, k := range reserved {
		if _, err := store.Lookup(ctx, k); err != nil {
			return fmt.Errorf("%s, reserved during the cleanup: %w", k, err)
		}
	}
	return nil
}

func fileSize(file string) (int64, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// pruneBeside starts keysvc with cfg, reserves new keys at rate for
// retentionBefore, then runs prune beside them, and stops when it is done:
// the cleanup's figures, the reservations' p99 before and during it, and
// the keys reserved.
func pruneBeside(ctx context.Context, cfg keysvc.ServiceConfig, rate int, prune func(context.Context, *keysvc.Service) (keysvc.Cleaned, error)) (RetentionRun, []string, error) {
	cfg.Logger = requestLogger()
	svc, err := startService(ctx, cfg)
	if err != nil {
		return RetentionRun{}, nil, err
	}
	defer svc.Close(context.WithoutCancel(ctx))
	load, err := startSteady(svc.URL, rate)
	if err != nil {
		return RetentionRun{}, nil, err
	}
	// The first second warms keysvc's connections up; the next
	// retentionBefore are the reservations without a cleanup.
	warm := time.Now().Add(time.Second)
	time.Sleep(time.Second + retentionBefore)
	start := time.Now()
	c, err := prune(ctx, svc)
	end := time.Now()
	samples, reserved, loadErr := load.stop()
	r := RetentionRun{Deleted: c.Deleted, Transactions: c.Transactions, Longest: c.Longest, Took: end.Sub(start), Rate: rate}
	if err = cmp.Or(err, loadErr); err != nil {
		return r, reserved, err
	}
	var before, during []time.Duration
	for _, s := range samples {
		switch {
		case s.due.Before(warm):
		case s.due.Before(start):
			before = append(before, s.latency)
		case s.due.Before(end):
			during = append(during, s.latency)
		}
	}
	r.P99Before, r.P99During, r.Reserved = percentile(before, 99), percentile(during, 99), len(during)
	return r, reserved, nil
}

// steadyLoad reserves new keys at a fixed rate from four clients, each
// request due at its own time whether or not the one before has answered
// (an open loop: a stall shows in the latency of every request it delays).
type steadyLoad struct {
	halt chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	got  []sample
	keys []string
	err  error
}

type sample struct {
	due     time.Time
	latency time.Duration
}

func startSteady(url string, rate int) (*steadyLoad, error) {
	const clients = 4
	l := &steadyLoad{halt: make(chan struct{})}
	interval := time.Duration(float64(time.Second) * clients / float64(rate))
	start := time.Now()
	for c := range clients {
		lc, err := dialLean(url)
		if err != nil {
			close(l.halt)
			l.wg.Wait()
			return nil, err
		}
		l.wg.Add(1)
		go l.client(lc, start.Add(interval*time.Duration(c)/clients), interval)
	}
	return l, nil
}

func (l *steadyLoad) client(lc *leanClient, due time.Time, interval time.Duration) {
	defer l.wg.Done()
	defer lc.Close()
	for ; ; due = due.Add(interval) {
		select {
		case <-l.halt:
			return
		case <-time.After(time.Until(due)):
		}
		id := randomID()
		body := fmt.Appendf(nil, `{"id":%q,"type":"invoice.paid"}`, id)
		status, err := lc.post("/v1/reservations", "application/json", body)
		took := time.Since(due)
		if err == nil && status != http.StatusCreated {
			err = fmt.Errorf("a reservation beside the cleanup answered %d", status)
		}
		l.mu.Lock()
		if err != nil {
			l.err = cmp.Or(l.err, err)
			l.mu.Unlock()
			return
		}
		l.got = append(l.got, sample{due, took})
		// The key keysvc reserved: evt: and the id (docs/key-spec.md).
		l.keys = append(l.keys, "evt:"+id)
		l.mu.Unlock()
	}
}

// stop ends the load and returns its samples, in the order they were due,
// and the keys reserved.
func (l *steadyLoad) stop() ([]sample, []string, error) {
	close(l.halt)
	l.wg.Wait()
	slices.SortFunc(l.got, func(a, b sample) int { return a.due.Compare(b.due) })
	return l.got, l.keys, l.err
}
