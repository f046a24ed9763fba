package verify

import (
	"testing"

	"github.com/idemhook/idemhook/internal/stack"
)

// pg is a real PostgreSQL 16 for the package's tests that apply SQL (nil
// with -short).
var pg *stack.Stack

func TestMain(m *testing.M) { stack.RunWithPostgres(m, "verify", &pg) }
