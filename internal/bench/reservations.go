package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// reservations measures, at concurrency c: pgbench (when installed) and a
// pgx loop running the reservation statement with one new key per
// transaction, and keysvc's POST /v1/reservations on PostgreSQL and on the
// embedded store.
func reservations(ctx context.Context, st *sandbox.Stack, opts Options, c int, step func(string, ...any)) ([]Result, error) {
	var out []Result
	table := func(name string) (pgsql.Table, error) {
		t := pgsql.MustParseTable(fmt.Sprintf("bench_%s_%d", name, c))
		_, err := st.Business.Exec(ctx, "DROP TABLE IF EXISTS "+t.String()+"; "+pgsql.EventsDDL(t, true))
		return t, err
	}

	if pgbench, err := exec.LookPath("pgbench"); err == nil {
		t, err := table("pgbench")
		if err != nil {
			return nil, err
		}
		step("pgbench, %d clients, %s", c, opts.Duration)
		r, err := runPgbench(ctx, pgbench, st.BusinessDSN, t, c, opts.Duration)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}

	t, err := table("pgx")
	if err != nil {
		return nil, err
	}
	step("pgx loop, %d goroutines, %s", c, opts.Duration)
	pool, err := pgxpool.New(ctx, st.BusinessDSN+fmt.Sprintf("&pool_max_conns=%d", c))
	if err != nil {
		return nil, err
	}
	var seq atomic.Int64
	reserve := pgsql.Reserve(t)
	lat, n := load(c, opts.Duration, func(int) error {
		var k string
		return pool.QueryRow(ctx, reserve, fmt.Sprintf("evt:pgx-%d", seq.Add(1))).Scan(&k)
	})
	pool.Close()
	out = append(out, throughputResult("reservations", "pgx loop (same statement)", c, n, opts.Duration, lat))

	for _, store := range []string{"postgres", "embedded"} {
		t, err := table("keysvc")
		if err != nil {
			return nil, err
		}
		step("keysvc on %s, %d clients, %s", store, c, opts.Duration)
		r, err := keysvcSeries(ctx, st, opts, t, store, c, &seq)
		if err != nil {
			return nil, err
		}
		r.Baseline = out[0].Name
		out = append(out, r)
	}
	setRatios(out)
	return out, nil
}

// keysvcSeries measures keysvc's POST /v1/reservations on store, one new
// key per call from c clients for opts.Duration, and its peak memory when
// it runs as its own process.
func keysvcSeries(ctx context.Context, st *sandbox.Stack, opts Options, t pgsql.Table, store string, c int, seq *atomic.Int64) (Result, error) {
	url, rss, stop, err := startKeysvc(ctx, opts, st.BusinessDSN, t, store)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	lat, n, err := loadHTTP(url, c, opts.Duration, func(buf []byte) []byte {
		return fmt.Appendf(buf, `{"id":"bench-%d","type":"invoice.paid"}`, seq.Add(1))
	}, http.StatusCreated)
	if err != nil {
		return Result{}, err
	}
	r := throughputResult("reservations", "keysvc on "+store, c, n, opts.Duration, lat)
	r.MaxRSS = rss()
	return r, nil
}

// loadHTTP posts bodies to url/v1/reservations from c lean clients for d and
// returns the latency of every answer with status want.
func loadHTTP(url string, c int, d time.Duration, body func([]byte) []byte, want int) ([]time.Duration, int, error) {
	clients := make([]*leanClient, c)
	for i := range clients {
		lc, err := dialLean(url)
		if err != nil {
			return nil, 0, err
		}
		defer lc.Close()
		clients[i] = lc
	}
	var failure atomic.Value
	lat, n := load(c, d, func(worker int) error {
		var buf [128]byte
		status, err := clients[worker].post("/v1/reservations", "application/json", body(buf[:0]))
		if err == nil && status != want {
			err = fmt.Errorf("keysvc answered %d", status)
		}
		if err != nil {
			failure.CompareAndSwap(nil, err)
		}
		return err
	})
	if err, _ := failure.Load().(error); err != nil {
		return nil, 0, err
	}
	return lat, n, nil
}

// load runs op from c goroutines (numbered 0 to c-1) for d and returns the
// latency of every successful call and their count. A failing op stops its
// goroutine.
func load(c int, d time.Duration, op func(worker int) error) ([]time.Duration, int) {
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for worker := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) {
				start := time.Now()
				if err := op(worker); err != nil {
					break
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, len(all)
}

func throughputResult(part, name string, c, n int, d time.Duration, lat []time.Duration) Result {
	p50, p99 := percentiles(lat)
	return Result{Part: part, Name: name, Concurrency: c, Throughput: float64(n) / d.Seconds(), Unit: "/s", P50: p50, P99: p99, Latencies: lat}
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+)`)

// runPgbench runs pgbench with the reservation statement, one new key per
// transaction, and reads every transaction's latency from its log.
func runPgbench(ctx context.Context, pgbench, dsn string, t pgsql.Table, c int, d time.Duration) (Result, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return Result{}, err
	}
	dir, err := os.MkdirTemp("", "idemhook-pgbench-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "reserve.sql")
	stmt := strings.Replace(pgsql.Reserve(t), "$1", "gen_random_uuid()::text", 1) + ";\n"
	if err := os.WriteFile(script, []byte(stmt), 0o644); err != nil {
		return Result{}, err
	}
	cmd := exec.CommandContext(ctx, pgbench, "-n", "-c", strconv.Itoa(c), "-j", strconv.Itoa(min(c, 4)), "-T", strconv.Itoa(int(d.Seconds())),
		"-M", "prepared", "-f", script, "-l", "--log-prefix="+filepath.Join(dir, "tx"),
		"-h", cfg.Host, "-p", strconv.Itoa(int(cfg.Port)), "-U", cfg.User, cfg.Database)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+cfg.Password)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Result{}, fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	m := tpsLine.FindSubmatch(out)
	if m == nil {
		return Result{}, fmt.Errorf("pgbench printed no tps:\n%s", out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	var lat []time.Duration
	logs, _ := filepath.Glob(filepath.Join(dir, "tx*"))
	for _, l := range logs {
		f, err := os.Open(l)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// client_id transaction_no time_us script_no time_epoch time_us
			if fields := strings.Fields(sc.Text()); len(fields) >= 3 {
				if us, err := strconv.ParseInt(fields[2], 10, 64); err == nil {
					lat = append(lat, time.Duration(us)*time.Microsecond)
				}
			}
		}
		f.Close()
	}
	p50, p99 := percentiles(lat)
	return Result{Part: "reservations", Name: "pgbench (same statement)", Concurrency: c, Throughput: tps, Unit: "/s", P50: p50, P99: p99, Latencies: lat}, nil
}

// startKeysvc runs keysvc on store ("postgres" or "embedded") as its own
// process when opts.KeysvcBinary is set (rss then reads its peak resident
// memory), in this process otherwise. It logs every request at info, as it
// does by default.
func startKeysvc(ctx context.Context, opts Options, dsn string, t pgsql.Table, store string) (url string, rss func() int64, stop func(), err error) {
	dbFile := filepath.Join(os.TempDir(), fmt.Sprintf("idemhook-bench-%d.db", time.Now().UnixNano()))
	if opts.KeysvcBinary == "" {
		cfg := keysvc.ServiceConfig{DBFile: dbFile, Logger: requestLogger()}
		if store == "postgres" {
			cfg = keysvc.ServiceConfig{DatabaseURL: dsn, PG: keysvc.PGOptions{Table: t.String(), CreateSchema: true}, Logger: requestLogger()}
		}
		svc, err := startService(ctx, cfg)
		if err != nil {
			return "", nil, nil, err
		}
		return svc.URL, func() int64 { return 0 }, func() { svc.Close(context.WithoutCancel(ctx)); os.Remove(dbFile) }, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	addr := l.Addr().String()
	l.Close()
	args := []string{"--addr", addr, "--db-file", dbFile, "--table", t.String(), "--create-schema", "--retention", "0"}
	cmd := exec.CommandContext(ctx, opts.KeysvcBinary, args...)
	cmd.Env = os.Environ()
	if store == "postgres" {
		cmd.Env = append(cmd.Env, "DATABASE_URL="+dsn)
	} else {
		cmd.Env = append(cmd.Env, "DATABASE_URL=")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", nil, nil, err
	}
	url = "http://" + addr
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			return "", nil, nil, fmt.Errorf("keysvc did not start on %s", store)
		}
	}
	rss = func() int64 { return peakRSS(cmd.Process.Pid) }
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		os.Remove(dbFile)
	}
	return url, rss, stop, nil
}

// startService starts keysvc in this process as cmd/keysvc starts it
// (keysvc.StartService), on a free loopback port.
func startService(ctx context.Context, cfg keysvc.ServiceConfig) (*keysvc.Service, error) {
	cfg.Addr, cfg.ReadHeaderTimeout = "127.0.0.1:0", 10*time.Second
	return keysvc.StartService(ctx, cfg)
}

// requestLogger formats every request's log line, as cmd/keysvc does at
// its default level, and drops it: the figures include the logging.
func requestLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// peakRSS reads a process's peak resident memory (VmHWM) in bytes.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// derivation measures POST /v1/keys on 1 MiB bodies against SHA-256 of the
// same bytes in this process: a body without id (hashed), and a JSON body
// with an id (scanned, not hashed).
func derivation(ctx context.Context, opts Options, step func(string, ...any)) ([]Result, error) {
	const size = 1 << 20
	random := make([]byte, size)
	rand.Read(random)
	withID := append([]byte(`{"id":"evt_big","data":"`), bytes.Repeat([]byte("x"), size-30)...)
	withID = append(withID, `"}`...)
	dbFile := filepath.Join(os.TempDir(), fmt.Sprintf("idemhook-bench-keys-%d.db", time.Now().UnixNano()))
	defer os.Remove(dbFile)
	srv, err := startService(ctx, keysvc.ServiceConfig{DBFile: dbFile, Handler: keysvc.Config{MaxBodyBytes: 2 * size}, Logger: requestLogger()})
	if err != nil {
		return nil, err
	}
	defer srv.Close(context.WithoutCancel(ctx))
	mib := func(n int) float64 { return float64(n) * size / (1 << 20) / opts.Duration.Seconds() }

	step("SHA-256 in process on 1 MiB, %s", opts.Duration)
	lat, n := load(1, opts.Duration, func(int) error { sha256.Sum256(random); return nil })
	base := throughputResult("derivation", "sha256 in process, 1 MiB", 1, n, opts.Duration, lat)
	base.Throughput, base.Unit = mib(n), "MiB/s"
	out := []Result{base}
	// The floor: the same POST to a handler that only reads the body. On
	// loopback the sender's and the receiver's copies take the same cores
	// as the hash.
	floor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer floor.Close()
	for _, b := range []struct {
		name, url string
		body      []byte
	}{
		{"POST of 1 MiB to a handler that only reads it", floor.URL, random},
		{"POST /v1/keys, 1 MiB without id", srv.URL, random},
		{"POST /v1/keys, 1 MiB JSON with id", srv.URL, withID},
	} {
		step("%s, %s", b.name, opts.Duration)
		lc, err := dialLean(b.url)
		if err != nil {
			return nil, err
		}
		lat, n := load(1, opts.Duration, func(int) error {
			status, err := lc.post("/v1/keys", "application/octet-stream", b.body)
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("keysvc answered %d", status)
			}
			return err
		})
		lc.Close()
		r := throughputResult("derivation", b.name, 1, n, opts.Duration, lat)
		r.Throughput, r.Unit, r.Baseline = mib(n), "MiB/s", base.Name
		out = append(out, r)
	}
	setRatios(out)
	return out, nil
}
