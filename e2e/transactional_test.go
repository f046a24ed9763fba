package e2e

import (
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
)

// The transactional guard (reservation and business write in one
// statement) passes the seed's scenarios, in both key modes; a failing
// business write rolls the reservation back with it, so the retry is
// processed; an empty body is a 400 that reserves nothing.
func TestTransactionalGuard(t *testing.T) {
	needStack(t)
	opts := func(prefix string, hashing generator.Hashing) generator.Options {
		o := seedOptions(prefix, hashing)
		o.Guard = generator.GuardTransactional
		return o
	}
	t.Run("seed run", func(t *testing.T) { testSeedRun(t, opts("t1", generator.HashingCodeNode)) })
	t.Run("body without id", func(t *testing.T) { testBodyWithoutID(t, opts("t2", generator.HashingCodeNode)) })
	t.Run("concurrent deliveries", func(t *testing.T) { testConcurrentDeliveries(t, opts("t3", generator.HashingCodeNode)) })
	t.Run("business failure", func(t *testing.T) { testBusinessFailure(t, opts("t5", generator.HashingCodeNode)) })
	t.Run("crypto-node seed run", func(t *testing.T) { testSeedRun(t, opts("t6", generator.HashingCryptoNode)) })
	t.Run("empty body", func(t *testing.T) {
		o := opts("t7", generator.HashingCodeNode)
		d := deploy(t, o)
		r := post(t, d.url, "application/octet-stream", nil, nil)
		if r.status != 400 || !strings.Contains(r.body, "empty body") {
			t.Errorf("empty body: %d %s, want 400", r.status, r.body)
		}
		if keys := storedKeys(t, o.EventsTable); len(keys) != 0 {
			t.Errorf("an empty body reserved %q", keys)
		}
	})
}
