package sandbox

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
)

// RunWithPostgres is the TestMain of a package whose tests need a real
// PostgreSQL 16: it starts one (none with -short: *pg stays nil), runs the
// tests, stops it, also on SIGINT or SIGTERM, and exits with the tests'
// code. pkg names the package in the error when PostgreSQL cannot start.
func RunWithPostgres(m *testing.M, pkg string, pg **Stack) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	s, err := Start(context.Background(), Options{PostgresOnly: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s tests: cannot start PostgreSQL: %v\n", pkg, err)
		os.Exit(1)
	}
	*pg = s
	stop := s.CloseOnSignal()
	code := m.Run()
	stop()
	s.Close()
	os.Exit(code)
}
