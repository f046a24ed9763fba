package console_test

import (
	"testing"

	"github.com/idemhook/idemhook/internal/stack"
)

// pg is a real PostgreSQL 16 for the package (nil with -short).
var pg *stack.Stack

func TestMain(m *testing.M) { stack.RunWithPostgres(m, "keysvc/console", &pg) }
