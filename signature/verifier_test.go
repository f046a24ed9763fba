package signature_test

import (
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/idemhook/idemhook/signature"
)

// A Verifier given a body in pieces of any size decides as Verify does with
// the body whole: valid for what each sender signed (Standard Webhooks' v1
// and v1a too), ErrNoValidSignature for the body with one byte changed or
// one byte short, and a header's own error before any body.
func TestVerifierInPieces(t *testing.T) {
	at := time.Unix(1_750_000_000, 0)
	opts := signature.Options{Now: at}
	rng := rand.New(rand.NewPCG(59, 1))
	body := make([]byte, 300_000)
	for i := range body {
		body[i] = byte('a' + rng.IntN(26))
	}
	whsec := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a symmetric secret of the endpoint"))
	key := fixedKey(3)
	for _, tc := range []struct {
		p       signature.Provider
		u       signature.Unsigned
		secrets []string
	}{
		{signature.ProviderStripe, signature.Unsigned{Secret: "whsec_stripe"}, []string{"whsec_other", "whsec_stripe"}},
		{signature.ProviderGitHub, signature.Unsigned{Secret: "gh secret"}, []string{"gh secret"}},
		{signature.ProviderShopify, signature.Unsigned{Secret: "shpss_x"}, []string{"shpss_x"}},
		{signature.ProviderSlack, signature.Unsigned{Secret: "slack signing secret"}, []string{"slack signing secret"}},
		{signature.ProviderStandardWebhooks, signature.Unsigned{Secret: whsec, ID: "msg_1"}, []string{whsec}},
		{signature.ProviderStandardWebhooks, signature.Unsigned{PrivateKey: key, ID: "msg_2"}, []string{whsec, whpk(key)}},
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
		tampered := append([]byte{}, body...)
		tampered[rng.IntN(len(tampered))] ^= 1
		for _, c := range []struct {
			what string
			body []byte
			want error
		}{{"as signed", body, nil}, {"one byte changed", tampered, signature.ErrNoValidSignature}, {"one byte short", body[:len(body)-1], signature.ErrNoValidSignature}} {
			v := tc.p.NewVerifier(h, tc.secrets, opts)
			for rest := c.body; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(70_000))
				if k, err := v.Write(rest[:n]); k != n || err != nil {
					t.Fatalf("Write: %d, %v", k, err)
				}
				rest = rest[n:]
			}
			got, whole := v.Verify(), tc.p.Verify(h, c.body, tc.secrets, opts)
			if !errors.Is(got, c.want) || (got == nil) != (whole == nil) {
				t.Errorf("%s %s: in pieces %v, whole %v; want %v", tc.p, c.what, got, whole, c.want)
			}
		}
	}
	// The headers decide before the body: no signature at all.
	v := signature.ProviderGitHub.NewVerifier(http.Header{}, []string{"s"}, opts)
	_, _ = v.Write(body)
	if err := v.Verify(); !errors.Is(err, signature.ErrMissingHeader) {
		t.Errorf("GitHub without its header: %v", err)
	}
	if err := signature.Provider("paypal").NewVerifier(http.Header{}, []string{"s"}, opts).Verify(); err == nil {
		t.Error("a Verifier of an unknown provider verified")
	}
}
