package keysvc_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/jackc/pgx/v5"
)

// pg is a real PostgreSQL 16 for the whole package (nil with -short, when
// only the embedded store is tested).
var pg *sandbox.Stack

func TestMain(m *testing.M) { sandbox.RunWithPostgres(m, "keysvc", &pg) }

var tableSeq atomic.Int64

// newPGStore opens a PGStore on a fresh table created with --create-schema.
func newPGStore(t testing.TB) *keysvc.PGStore {
	t.Helper()
	table := fmt.Sprintf("ks_%d_%s", tableSeq.Add(1), strings.ToLower(strings.NewReplacer("/", "_", " ", "_", "-", "_").Replace(t.Name())))
	if len(table) > 60 {
		table = table[:60]
	}
	s, err := keysvc.OpenPG(context.Background(), pg.BusinessDSN, keysvc.PGOptions{Table: table, CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		_, _ = pg.Business.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize())
	})
	return s
}

func newBoltStore(t testing.TB) *keysvc.BoltStore {
	t.Helper()
	s, err := keysvc.OpenBolt(filepath.Join(t.TempDir(), "keysvc.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// forEachStore runs f against the embedded store and, unless -short, real
// PostgreSQL 16.
func forEachStore(t *testing.T, f func(t *testing.T, store keysvc.Store)) {
	t.Run("embedded", func(t *testing.T) { f(t, newBoltStore(t)) })
	t.Run("postgres", func(t *testing.T) {
		if pg == nil {
			t.Skip("PostgreSQL tests skipped with -short")
		}
		f(t, newPGStore(t))
	})
}
