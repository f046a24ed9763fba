package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Close stops what Start started and removes its data, keeping the logs.
func TestCloseStopsEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL; skipped with -short")
	}
	ctx := context.Background()
	s, err := Start(ctx, Options{PostgresOnly: true, Progress: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Business.Ping(ctx); err != nil {
		t.Fatalf("PostgreSQL is not up: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(cctx, s.BusinessDSN); err == nil {
		conn.Close(ctx)
		t.Fatal("PostgreSQL still accepts connections after Close")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.LogDir), "pgdata")); !os.IsNotExist(err) {
		t.Errorf("the data folder is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.LogDir, "postgres.log")); err != nil && s.Runtime == "local" {
		t.Errorf("the PostgreSQL log was not kept: %v", err)
	}
}
