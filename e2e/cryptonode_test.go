package e2e

import (
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/internal/generator"
)

// The crypto-node variant (no Code node, no NODE_FUNCTION_ALLOW_BUILTIN)
// passes scenarios 1-4.
func TestCryptoNodeVariant(t *testing.T) {
	needStack(t)
	t.Run("seed run", func(t *testing.T) { testSeedRun(t, seedOptions("c1", generator.HashingCryptoNode)) })
	t.Run("body without id", func(t *testing.T) { testBodyWithoutID(t, seedOptions("c2", generator.HashingCryptoNode)) })
	t.Run("concurrent deliveries", func(t *testing.T) { testConcurrentDeliveries(t, seedOptions("c3", generator.HashingCryptoNode)) })
	t.Run("conformance vectors", func(t *testing.T) {
		testVectors(t, seedOptions("c4", generator.HashingCryptoNode), conformance.Vector.ParsedIDAgrees)
	})
	// docs/key-spec.md: this mode builds no form key, so a form fails in the
	// Crypto node and reserves nothing.
	t.Run("a multipart form", func(t *testing.T) {
		opts := seedOptions("c5", generator.HashingCryptoNode)
		d := deploy(t, opts)
		body := "--b\r\nContent-Disposition: form-data; name=\"order\"\r\n\r\no_1\r\n--b--\r\n"
		r := post(t, d.url, "multipart/form-data; boundary=b", []byte(body), nil)
		if r.status != 500 || countRows(t, opts.EventsTable) != 0 {
			t.Errorf("a form: %d %s and %d keys reserved, want 500 and none", r.status, r.body, countRows(t, opts.EventsTable))
		}
	})
}
