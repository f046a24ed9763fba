package signature

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"testing"
	"time"
)

// A Verifier keeps none of the body for an HMAC scheme, and the signed
// content only for Standard Webhooks' v1a, whose ed25519 check needs it
// whole.
func TestVerifierKeepsOnlyWhatV1aNeeds(t *testing.T) {
	at := time.Unix(1_750_000_000, 0)
	body := make([]byte, 1<<20)
	whsec := "whsec_" + base64.StdEncoding.EncodeToString([]byte("k"))
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	whpk := "whpk_" + base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
	for _, tc := range []struct {
		p       Provider
		u       Unsigned
		secrets []string
		keeps   bool
	}{
		{ProviderStripe, Unsigned{Secret: "s"}, []string{"s"}, false},
		{ProviderGitHub, Unsigned{Secret: "s"}, []string{"s"}, false},
		{ProviderShopify, Unsigned{Secret: "s"}, []string{"s"}, false},
		{ProviderSlack, Unsigned{Secret: "s"}, []string{"s"}, false},
		{ProviderStandardWebhooks, Unsigned{Secret: whsec, ID: "m"}, []string{whsec, whpk}, false},
		{ProviderStandardWebhooks, Unsigned{PrivateKey: key, ID: "m"}, []string{whsec, whpk}, true},
	} {
		tc.u.Body, tc.u.Timestamp = body, at
		signed, err := tc.p.Sign(tc.u)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		for k, v := range signed {
			h.Set(k, v)
		}
		v := tc.p.NewVerifier(h, tc.secrets, Options{Now: at})
		_, _ = v.Write(body)
		if err := v.Verify(); err != nil {
			t.Fatalf("%s: %v", tc.p, err)
		}
		if kept := len(v.content) >= len(body); kept != tc.keeps {
			t.Errorf("%s (%v): kept the body %v, want %v", tc.p, tc.secrets, kept, tc.keeps)
		}
	}
}
