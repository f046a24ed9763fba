package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// A process that dies on its own is reported, with its log, and Revive
// starts it again; a fault the test asked for (StopPostgres) is not
// reported.
func TestUnexpectedExitIsReportedAndRevived(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL; skipped with -short")
	}
	ctx := context.Background()
	s, err := Start(ctx, Options{PostgresOnly: true, Progress: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rt, ok := s.rt.(*localRuntime)
	if !ok {
		t.Skip("the exits of the local runtime's processes are watched; this stack runs", s.Runtime)
	}

	if err := s.StopPostgres(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StartPostgres(ctx); err != nil {
		t.Fatal(err)
	}
	if exits := s.UnexpectedExits(); len(exits) != 0 {
		t.Fatalf("a stop the test asked for was reported: %q", exits)
	}

	rt.mu.Lock()
	var pid int
	for _, p := range rt.procs {
		if p.name == "postgres" {
			pid = p.cmd.Process.Pid
		}
	}
	rt.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil { // as an OOM kill or a crash would
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !rt.exited("postgres"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("PostgreSQL did not exit")
		}
	}
	exits := s.UnexpectedExits()
	if len(exits) != 1 || !strings.HasPrefix(exits[0], "postgres exited unexpectedly") || !strings.Contains(exits[0], "postgres.log") {
		t.Fatalf("UnexpectedExits() = %q, want one entry for postgres with its log", exits)
	}
	if err := s.Revive(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, s.BusinessDSN)
	if err != nil {
		t.Fatalf("PostgreSQL does not accept connections after Revive: %v", err)
	}
	conn.Close(ctx)
}
