// Package inboxtest opens keysvc's inbox, and the n8n inbox pattern's
// tables, on a test PostgreSQL, for the tests of the packages that use them
// (inbox, console, keysvc).
package inboxtest

import (
	"context"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/idemhook/idemhook/signature"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Endpoints loads the endpoints file whose text is json, with secrets as
// the providers' signing secrets.
func Endpoints(t testing.TB, json string, secrets map[signature.Provider][]string) []inbox.Endpoint {
	t.Helper()
	file := filepath.Join(t.TempDir(), "endpoints.json")
	if err := os.WriteFile(file, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	eps, err := inbox.LoadEndpoints(file, secrets)
	if err != nil {
		t.Fatal(err)
	}
	return eps
}

// Open opens and starts an inbox on pool in schema (its tables created,
// the schema dropped when the test ends) with the endpoints file json. It
// closes the inbox when the test ends, within 5 s.
func Open(t testing.TB, pool *pgxpool.Pool, schema, json string, secrets map[signature.Provider][]string, opts inbox.Options) *inbox.Inbox {
	t.Helper()
	ctx := context.Background()
	opts.Schema, opts.CreateSchema = schema, true
	in, err := inbox.Open(ctx, pool, Endpoints(t, json, secrets), opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	if err := in.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		stopCtx, stop := context.WithTimeout(ctx, 5*time.Second)
		defer stop()
		in.Close(stopCtx)
		pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	return in
}

// Pattern creates the n8n inbox pattern's tables and functions (the default
// rules preset's) in schema, dropped when the test ends.
func Pattern(t testing.TB, pool *pgxpool.Pool, schema string) pgsql.Inbox {
	t.Helper()
	tables := pgsql.Inbox{Schema: schema}
	rs, err := rules.Preset(rules.DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := tables.DDL(rs.Decision())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	return tables
}

// Recorder is a target that answers 200 and counts the deliveries it gets
// per inbox id.
type Recorder struct {
	mu    sync.Mutex
	calls map[string]int
}

// NewRecorder returns a Recorder that has seen nothing.
func NewRecorder() *Recorder { return &Recorder{calls: map[string]int{}} }

func (rec *Recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.calls[r.Header.Get("X-Idemhook-Inbox-Id")]++
	rec.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// Count is how many deliveries of entry id it got.
func (rec *Recorder) Count(id int64) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.calls[strconv.FormatInt(id, 10)]
}

// Calls returns the count per inbox id.
func (rec *Recorder) Calls() map[string]int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return maps.Clone(rec.calls)
}
