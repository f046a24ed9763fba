package eventkey_test

import (
	"strings"
	"testing"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/signature"
	"github.com/idemhook/idemhook/signature/provider"
)

// Every provider idemhook verifies has a key preset of the same name, and
// no preset exists without its provider: the two lists are one fact.
func TestPresetsAreTheProviders(t *testing.T) {
	for _, p := range signature.Providers {
		if _, err := eventkey.ParsePreset(string(p)); err != nil {
			t.Errorf("provider %s has no preset: %v", p, err)
		}
	}
	_, err := eventkey.ParsePreset("paypal")
	if err == nil || !strings.Contains(err.Error(), signature.Names()) {
		t.Errorf("an unknown preset: %v; want the providers' list %q", err, signature.Names())
	}
}

// MaxKeyBytes, a constant the key service's API publishes, holds the key of
// every preset: the longest prefix, a scope and an id.
func TestMaxKeyBytesHoldsEveryPrefix(t *testing.T) {
	for _, p := range provider.All {
		longest := len(p.Key.Prefix) + 1 + eventkey.MaxScopeBytes + 1 + eventkey.MaxIDBytes
		if longest > eventkey.MaxKeyBytes {
			t.Errorf("%s: a key of %d bytes (prefix %q) exceeds MaxKeyBytes %d", p.Name, longest, p.Key.Prefix, eventkey.MaxKeyBytes)
		}
	}
}
