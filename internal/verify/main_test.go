package verify

import (
	"testing"

	"github.com/idemhook/idemhook/internal/sandbox"
)

// pg is a real PostgreSQL 16 for the package's tests that apply SQL (nil
// with -short).
var pg *sandbox.Stack

func TestMain(m *testing.M) { sandbox.RunWithPostgres(m, "verify", &pg) }
