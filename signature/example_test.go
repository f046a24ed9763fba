package signature_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idemhook/idemhook/signature"
)

// A receiver verifies a delivery before it reserves the event's key: a
// forged request must not reserve a real event id. Sign plays the
// provider's sender, as a test does.
func ExampleProvider_Verify() {
	body := []byte(`{"id":"evt_1QyExample","type":"invoice.paid"}`)
	secrets := []string{"whsec_example_endpoint_secret"}

	signed, err := signature.ProviderStripe.Sign(signature.Unsigned{Body: body, Secret: secrets[0]})
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	for name, value := range signed {
		h.Set(name, value)
	}
	fmt.Println("headers read:", signature.ProviderStripe.Headers())
	fmt.Println("genuine:", signature.ProviderStripe.Verify(h, body, secrets, signature.Options{}))

	// The same headers on another body: the HMAC no longer matches.
	err = signature.ProviderStripe.Verify(h, []byte(`{"id":"evt_1QyExample","type":"charge.refunded"}`), secrets, signature.Options{})
	fmt.Println("tampered:", errors.Is(err, signature.ErrNoValidSignature))
	// Output:
	// headers read: [Stripe-Signature]
	// genuine: <nil>
	// tampered: true
}

// Each failure wraps one sentinel error, which callers test with errors.Is,
// and Code names it for a log line or an answer's body.
func ExampleStripe_errors() {
	body := []byte(`{"id":"evt_1QyExample"}`)
	secrets := []string{"whsec_example_endpoint_secret"}
	now := time.Unix(1765000000, 0)
	opts := signature.Options{Now: now}

	for _, header := range []string{
		"",                         // no header at all
		"v1=abc",                   // no timestamp
		"t=1765000000,v1=" + zeros, // well formed, signed with another secret
		"t=1764000000,v1=" + zeros, // signed eleven days before now
	} {
		err := signature.Stripe(body, header, secrets, opts)
		fmt.Printf("%s missing=%t malformed=%t invalid=%t too-old=%t\n", signature.Code(err),
			errors.Is(err, signature.ErrMissingHeader), errors.Is(err, signature.ErrMalformedHeader),
			errors.Is(err, signature.ErrNoValidSignature), errors.Is(err, signature.ErrTooOld))
	}
	// Output:
	// missing_signature missing=true malformed=false invalid=false too-old=false
	// malformed_signature missing=false malformed=true invalid=false too-old=false
	// invalid_signature missing=false malformed=false invalid=true too-old=false
	// signature_too_old missing=false malformed=false invalid=false too-old=true
}

const zeros = "0000000000000000000000000000000000000000000000000000000000000000"
