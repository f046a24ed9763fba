package e2e

import (
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/sandbox"
)

// n8n 2.41.1 asks for PostgreSQL 17 or newer, and new installs run it: the
// seed run and the concurrency scenario hold on 17 as on 16.
func TestPostgres17(t *testing.T) {
	needStack(t)
	useStack(t, sandbox.Options{PostgresMajor: "17"})
	var version string
	if err := st.Business.QueryRow(t.Context(), "SHOW server_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version[:3] != "17." {
		t.Fatalf("server_version %s, want 17.x", version)
	}
	t.Logf("PostgreSQL %s", version)
	testSeedRun(t, seedOptions("p17", generator.HashingCodeNode))
	testConcurrentDeliveries(t, seedOptions("p17c", generator.HashingCodeNode))
}
