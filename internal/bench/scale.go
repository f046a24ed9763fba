package bench

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ScaleOptions configure Scale.
type ScaleOptions struct {
	// Sizes are the numbers of keys in the events table (and in keysvc's
	// embedded store) at which reservations are measured, ascending; the
	// first is the baseline. Default 0, 10,000, 1 million, 10 million.
	Sizes []int
	// Clients and Duration of each keysvc run; default 8 and 10s.
	Clients  int
	Duration time.Duration
	// Deliveries to each n8n workflow at each size; default 30.
	Deliveries int
	// Histories are Remove Duplicates' history sizes, measured beside the
	// community node at the size nearest RemoveDuplicatesSize; default
	// 1,000, 10,000 (n8n's default), 100,000 and 1 million.
	Histories []int
	// Expired and Live keys in the retention runs; default 3 million and
	// 1 million. Rate is the reservations per second that run beside the
	// pruning; default 200.
	Expired, Live, Rate int
	// SkipN8N leaves out the n8n part (the node and Remove Duplicates).
	SkipN8N  bool
	Progress io.Writer
}

// RemoveDuplicatesSize is the table size at which Remove Duplicates is
// measured beside the community node: its default history.
const RemoveDuplicatesSize = 10000

// KeysvcScaleMin is the smallest size above the first at which keysvc
// runs: below it, the keys a run adds (thousands) would be most of the
// table.
const KeysvcScaleMin = 100000

// Series of the scale part.
const (
	scaleKeysvcPG   = "keysvc on PostgreSQL"
	scaleKeysvcBolt = "keysvc's embedded store"
	scaleNode       = "community node in n8n (PostgreSQL store)"
	scaleUnguarded  = "your workflow, no guard"
	scaleDedupe     = "Remove Duplicates, history %d"
)

// ScalePoint is one series measured at one size.
type ScalePoint struct {
	Series string
	// Keys in the table when the measurement started (for Remove
	// Duplicates: its history).
	Keys int64
	// Throughput in reservations per second (keysvc runs); n8n's series
	// are sequential deliveries.
	Throughput float64
	P50, P99   time.Duration
	// VsFirst is P50 ÷ the same series' P50 at the first size; VsUnguarded
	// is P50 ÷ the workflow without guard's in the same rounds (n8n).
	VsFirst, VsUnguarded float64
	// BytesPerKey on disk: the table and its indexes (PostgreSQL), the file
	// (embedded store).
	BytesPerKey float64
	// WAL is what PostgreSQL wrote to its write-ahead log per reservation
	// (keysvc on PostgreSQL only): a commit waits for it to reach the disk.
	WAL wal
}

// wal is an amount of write-ahead log: its bytes, and the full-page images
// among them (the first change to a page after a checkpoint logs the whole
// 8 kB page).
type wal struct {
	Bytes, FullPages float64
}

// per is the log written since before, shared among n reservations.
func (w wal) per(before wal, n float64) wal {
	if n <= 0 {
		return wal{}
	}
	return wal{(w.Bytes - before.Bytes) / n, (w.FullPages - before.FullPages) / n}
}

func (o ScaleOptions) withDefaults() ScaleOptions {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{0, 10000, 1000000, 10000000}
	}
	if o.Clients == 0 {
		o.Clients = 8
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Deliveries == 0 {
		o.Deliveries = 30
	}
	if len(o.Histories) == 0 {
		o.Histories = []int{1000, 10000, 100000, 1000000}
	}
	if o.Expired == 0 {
		o.Expired = 3000000
	}
	if o.Live == 0 {
		o.Live = 1000000
	}
	if o.Rate == 0 {
		o.Rate = 200
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// Scale measures what grows with the work, on a durable PostgreSQL: at each
// size of the events table, reservations through keysvc on PostgreSQL and on
// its embedded store (throughput, p50, p99, bytes per key), and sequential
// deliveries to the community node in n8n beside the same workflow without
// a guard; Remove Duplicates beside them; then the retention runs
// (retention.go).
func Scale(ctx context.Context, opts ScaleOptions) (*Report, error) {
	opts = opts.withDefaults()
	wd, _ := os.Getwd()
	_, noSource := communitynode.SourceRoot(wd)
	if !opts.SkipN8N && noSource != nil {
		return nil, fmt.Errorf("the scale measurement builds the community node from this clone's source (or run it with --skip-n8n): %w", noSource)
	}
	st, err := sandbox.Start(ctx, sandbox.Options{Durable: true, PostgresOnly: opts.SkipN8N, Progress: opts.Progress, CommunityNode: !opts.SkipN8N})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rep, err := newReport(ctx, st, !opts.SkipN8N)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "idemhook-bench-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	step := func(format string, args ...any) { fmt.Fprintf(opts.Progress, "bench: "+format+"\n", args...) }
	s := &scaleRun{opts: opts, st: st, dir: dir, step: step, table: pgsql.MustParseTable("scale_events"), bolt: filepath.Join(dir, "scale.db")}
	if rep.Scale, err = s.run(ctx); err != nil {
		return nil, err
	}
	if rep.Retention, err = retention(ctx, st, opts, dir, step); err != nil {
		return nil, err
	}
	return rep, nil
}

// newReport starts a report on st, after checking that its PostgreSQL is
// durable.
func newReport(ctx context.Context, st *sandbox.Stack, withN8N bool) (*Report, error) {
	var verified string
	if err := st.Business.QueryRow(ctx, "SELECT current_setting('fsync') || '/' || current_setting('synchronous_commit')").Scan(&verified); err != nil {
		return nil, err
	}
	if verified != "on/on" {
		return nil, fmt.Errorf("the benchmark needs a durable PostgreSQL, this one runs fsync/synchronous_commit = %s", verified)
	}
	rep := &Report{Date: time.Now().UTC(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), PostgreSQL: sandbox.PostgresMajor}
	if withN8N {
		rep.N8N = sandbox.N8NVersion
	}
	return rep, nil
}

// scaleRun grows one events table, which keysvc on PostgreSQL and the
// community node share (as keysvc and the workflows share
// processed_events), and one embedded store, size by size.
type scaleRun struct {
	opts  ScaleOptions
	st    *sandbox.Stack
	dir   string
	step  func(string, ...any)
	table pgsql.Table
	bolt  string
	// boltKeys is how many keys the embedded store holds.
	boltKeys int64
	// n8n's workflows: the one without a guard, the node's, and Remove
	// Duplicates' (one per history).
	unguarded, node workflow
	dedupe          []workflow
}

func (s *scaleRun) run(ctx context.Context) ([]ScalePoint, error) {
	if _, err := s.st.Business.Exec(ctx, "DROP TABLE IF EXISTS "+s.table.String()+"; "+pgsql.EventsDDL(s.table, true)); err != nil {
		return nil, err
	}
	if !s.opts.SkipN8N {
		if err := s.deploy(ctx); err != nil {
			return nil, err
		}
	}
	dedupeAt := nearest(s.opts.Sizes, RemoveDuplicatesSize)
	var points []ScalePoint
	for i, size := range s.opts.Sizes {
		if err := s.grow(ctx, size); err != nil {
			return nil, err
		}
		// A table filled a moment ago is still being checkpointed and
		// vacuumed (PostgreSQL vacuums after many inserts); a user's table
		// of that size grew over days: measure the size, not the fill.
		if err := quiesce(ctx, s.st, &s.table); err != nil {
			return nil, err
		}
		if i == 0 || size >= KeysvcScaleMin {
			p, err := s.keysvcPoints(ctx)
			if err != nil {
				return nil, err
			}
			points = append(points, p...)
		}
		if !s.opts.SkipN8N {
			p, err := s.n8nPoints(ctx, size == dedupeAt)
			if err != nil {
				return nil, err
			}
			points = append(points, p...)
		}
	}
	setScaleRatios(points)
	return points, nil
}

// nearest is the size closest to want.
func nearest(sizes []int, want int) int {
	best := sizes[0]
	for _, s := range sizes {
		if abs(s-want) < abs(best-want) {
			best = s
		}
	}
	return best
}

func abs(n int) int { return max(n, -n) }

// grow adds prefilled keys to the table and to the embedded store until
// each holds size: live keys (first seen a day ago), in key order, so that
// the load writes each page once.
func (s *scaleRun) grow(ctx context.Context, size int) error {
	var have int64
	if err := s.st.Business.QueryRow(ctx, "SELECT count(*) FROM "+s.table.String()).Scan(&have); err != nil {
		return err
	}
	firstSeen := time.Now().Add(-24 * time.Hour)
	if int64(size) > have {
		s.step("scale: %d keys into %s", int64(size)-have, s.table)
		if err := fillPG(ctx, s.st.Business, s.table, "scale", int(have), size, firstSeen); err != nil {
			return err
		}
	}
	if int64(size) > s.boltKeys {
		s.step("scale: %d keys into the embedded store", int64(size)-s.boltKeys)
		added, err := fillBolt(s.bolt, "scale", int(s.boltKeys), size, firstSeen)
		s.boltKeys += int64(added)
		if err != nil {
			return err
		}
	}
	return nil
}

// prefilledKey is the i-th prefilled key of a run named name: shaped like a
// Stripe event's key (docs/key-spec.md: evt: and the id), spread over the
// key space like real ids.
func prefilledKey(name string, i int) string {
	h := md5.Sum([]byte(name + "-" + strconv.Itoa(i)))
	return "evt:evt_" + hex.EncodeToString(h[:])
}

// fillPG inserts the prefilled keys from to to-1 (prefilledKey in SQL),
// first seen at firstSeen, a million per statement, each in key order.
func fillPG(ctx context.Context, db *pgxpool.Pool, t pgsql.Table, name string, from, to int, firstSeen time.Time) error {
	stmt := fmt.Sprintf(`INSERT INTO %s (key, first_seen)
SELECT 'evt:evt_' || md5($1 || '-' || i), $2 FROM generate_series($3::bigint, $4::bigint - 1) i ORDER BY 1
ON CONFLICT (key) DO NOTHING`, t)
	for at := from; at < to; at += 1000000 {
		if _, err := db.Exec(ctx, stmt, name, firstSeen, at, min(to, at+1000000)); err != nil {
			return fmt.Errorf("prefill %s: %w", t, err)
		}
	}
	return nil
}

// fillBolt loads the prefilled keys from to to-1 into the embedded store
// in file, sorted, 250,000 per transaction.
func fillBolt(file, name string, from, to int, firstSeen time.Time) (int, error) {
	keys := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		keys = append(keys, prefilledKey(name, i))
	}
	slices.Sort(keys)
	store, err := keysvc.OpenBolt(file)
	if err != nil {
		return 0, err
	}
	defer store.Close()
	added := 0
	for chunk := range slices.Chunk(keys, 250000) {
		n, err := store.Load(chunk, firstSeen)
		added += n
		if err != nil {
			return added, err
		}
	}
	return added, nil
}

// randomID is a new event's id, shaped as the prefilled keys' are.
func randomID() string { return fmt.Sprintf("evt_%016x%016x", rand.Uint64(), rand.Uint64()) }

// randomEvent appends a new event's body with a random id.
func randomEvent(buf []byte) []byte {
	return fmt.Appendf(buf, `{"id":%q,"type":"invoice.paid"}`, randomID())
}

// keysvcPoints measures keysvc on the table and on the embedded store,
// each as cmd/keysvc runs it, for Duration from Clients clients; the keys
// the PostgreSQL run added are deleted after it, so that the table holds
// the next size exactly.
func (s *scaleRun) keysvcPoints(ctx context.Context) ([]ScalePoint, error) {
	var out []ScalePoint
	for _, store := range []struct {
		series string
		cfg    keysvc.ServiceConfig
	}{
		{scaleKeysvcPG, keysvc.ServiceConfig{DatabaseURL: s.st.BusinessDSN, PG: keysvc.PGOptions{Table: s.table.String()}}},
		{scaleKeysvcBolt, keysvc.ServiceConfig{DBFile: s.bolt}},
	} {
		keys := s.boltKeys
		if store.cfg.DatabaseURL != "" {
			if err := s.st.Business.QueryRow(ctx, "SELECT count(*) FROM "+s.table.String()).Scan(&keys); err != nil {
				return nil, err
			}
		}
		s.step("scale: %s with %d keys, %d clients, %s", store.series, keys, s.opts.Clients, s.opts.Duration)
		started := time.Now()
		walBefore, err := s.walWritten(ctx)
		if err != nil {
			return nil, err
		}
		p, err := keysvcRun(ctx, store.cfg, s.opts.Clients, s.opts.Duration)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", store.series, err)
		}
		p.Series, p.Keys = store.series, keys
		reserved := p.Throughput * s.opts.Duration.Seconds()
		if store.cfg.DatabaseURL != "" {
			var walAfter wal
			if walAfter, err = s.walWritten(ctx); err != nil {
				return nil, err
			}
			p.WAL = walAfter.per(walBefore, reserved)
			p.BytesPerKey, err = s.pgBytesPerKey(ctx, keys)
			if err == nil {
				_, err = s.st.Business.Exec(ctx, "DELETE FROM "+s.table.String()+" WHERE first_seen >= $1", started)
			}
		} else {
			s.boltKeys += int64(reserved)
			p.BytesPerKey, err = fileBytesPerKey(s.bolt, s.boltKeys)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// keysvcRun starts keysvc with cfg, reserves new keys from c clients for d,
// and stops it.
func keysvcRun(ctx context.Context, cfg keysvc.ServiceConfig, c int, d time.Duration) (ScalePoint, error) {
	cfg.Logger = requestLogger()
	svc, err := startService(ctx, cfg)
	if err != nil {
		return ScalePoint{}, err
	}
	defer svc.Close(context.WithoutCancel(ctx))
	lat, n, err := loadHTTP(svc.URL, c, d, randomEvent, http.StatusCreated)
	if err != nil {
		return ScalePoint{}, err
	}
	p50, p99 := percentiles(lat)
	return ScalePoint{Throughput: float64(n) / d.Seconds(), P50: p50, P99: p99}, nil
}

// walWritten is what PostgreSQL has written to its write-ahead log since
// its statistics were reset: bytes and full-page images.
func (s *scaleRun) walWritten(ctx context.Context) (wal, error) {
	var w wal
	err := s.st.Business.QueryRow(ctx, "SELECT wal_bytes::float8, wal_fpi::float8 FROM pg_stat_wal").Scan(&w.Bytes, &w.FullPages)
	return w, err
}

// pgBytesPerKey is the table's size on disk with its indexes, per key.
func (s *scaleRun) pgBytesPerKey(ctx context.Context, keys int64) (float64, error) {
	if keys == 0 {
		return 0, nil
	}
	var bytes int64
	err := s.st.Business.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", s.table.String()).Scan(&bytes)
	return float64(bytes) / float64(keys), err
}

func fileBytesPerKey(file string, keys int64) (float64, error) {
	fi, err := os.Stat(file)
	if err != nil || keys == 0 {
		return 0, err
	}
	return float64(fi.Size()) / float64(keys), nil
}

// setScaleRatios divides each point's p50 by its series' p50 at the first
// size it was measured at, and each n8n point's by the workflow without a
// guard's of the same size.
func setScaleRatios(points []ScalePoint) {
	first := map[string]time.Duration{}
	for i := range points {
		p := &points[i]
		if f, ok := first[p.Series]; ok && f > 0 {
			p.VsFirst = float64(p.P50) / float64(f)
		} else if !ok {
			first[p.Series] = p.P50
		}
	}
}
