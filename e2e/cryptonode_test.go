package e2e

import (
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/generator"
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
}
