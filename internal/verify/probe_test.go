package verify

import (
	"strings"
	"testing"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/signature/provider"
)

// The probe's key is built from the probe's id under every preset, with
// and without a scope, so the key the probe reserves first is the one the
// workflow derives from the delivery.
func TestProbeKeyIsTheProbesUnderEveryPreset(t *testing.T) {
	id := ProbePrefix + "0123456789abcdef"
	header, body := probeDelivery(id)
	for _, name := range append([]string{""}, provider.Names...) {
		p := eventkey.Preset(name)
		scopes := []string{""}
		if p.Scoped() {
			scopes = append(scopes, "billing")
		}
		for _, scope := range scopes {
			k, err := eventkey.DeriveFor(p, header, body, scope)
			if err != nil {
				t.Fatalf("preset %q scope %q: %v", name, scope, err)
			}
			if !strings.HasSuffix(k.Value, ":"+id) || (p.Scoped() && k.Source != eventkey.SourceProviderID) {
				t.Errorf("preset %q scope %q: key %q (%s), want one built from the probe's id", name, scope, k.Value, k.Source)
			}
		}
	}
}
