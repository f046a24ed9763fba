package signature

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// maxHeaderBytes bounds what the parsers read; real headers are far smaller.
const maxHeaderBytes = 8 << 10

func checkSecrets(secrets []string) error {
	for _, s := range secrets {
		if s != "" {
			return nil
		}
	}
	return ErrNoSecret
}

func headerTooLong(h string) error {
	if len(h) > maxHeaderBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrMalformedHeader, len(h), maxHeaderBytes)
	}
	return nil
}

// Stripe verifies a Stripe-Signature header ("t=…,v1=…[,v1=…]"): an
// HMAC-SHA256, keyed by the endpoint secret (whsec_…, used as is), of
// "t.body". Any v1 value may match any secret: Stripe sends one v1 per
// active secret while a secret is rolled. The timestamp must be within the
// tolerance in both directions. A v1 value that is not 64 hex digits is
// skipped; when no v1 value is left, the error (ErrNoValidSignature) names
// the first malformed one.
func Stripe(body []byte, header string, secrets []string, opts Options) error {
	return verifyBody(stripeVerifier(header, secrets, opts), body)
}

// stripeVerifier is Stripe's Verifier: the header checked now, the HMAC of
// "t.body" as the body comes.
func stripeVerifier(header string, secrets []string, opts Options) *Verifier {
	if err := checkSecrets(secrets); err != nil {
		return failed(err)
	}
	if header == "" {
		return failed(fmt.Errorf("%w: Stripe-Signature", ErrMissingHeader))
	}
	if err := headerTooLong(header); err != nil {
		return failed(err)
	}
	var timestamp string
	var candidates [][]byte
	v1s, malformed := 0, 0 // malformed: position among the v1 values of the first unusable one
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return failed(fmt.Errorf("%w: Stripe-Signature element %.32q is not key=value", ErrMalformedHeader, part))
		}
		switch k {
		case "t":
			if timestamp != "" {
				return failed(fmt.Errorf("%w: Stripe-Signature has two timestamps", ErrMalformedHeader))
			}
			timestamp = v
		case "v1":
			// Like stripe-go, a v1 value that cannot be an HMAC-SHA256 is
			// skipped: another v1 may still match.
			v1s++
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				if malformed == 0 {
					malformed = v1s
				}
				continue
			}
			candidates = append(candidates, sig)
		}
	}
	if timestamp == "" {
		return failed(fmt.Errorf("%w: Stripe-Signature has no timestamp", ErrMalformedHeader))
	}
	if _, err := checkTimestamp(timestamp, opts); err != nil {
		return failed(err)
	}
	if len(candidates) == 0 {
		if malformed > 0 {
			return failed(fmt.Errorf("%w: Stripe-Signature v1 value %d is not a 64-hex-digit HMAC-SHA256", ErrNoValidSignature, malformed))
		}
		return failed(fmt.Errorf("%w: Stripe-Signature has no v1 signature", ErrNoValidSignature))
	}
	return hmacVerifier(secretKeys(secrets), timestamp+".", candidates, "no v1 signature matches the body and secret")
}

// GitHub verifies X-Hub-Signature-256 ("sha256=<hex>"), an HMAC-SHA256 of
// the body. GitHub signs no timestamp: a captured delivery can be replayed
// as long as the secret lives, and only the idempotency key stops it.
func GitHub(body []byte, header string, secrets []string) error {
	return verifyBody(githubVerifier(header, secrets), body)
}

func githubVerifier(header string, secrets []string) *Verifier {
	if err := checkSecrets(secrets); err != nil {
		return failed(err)
	}
	if header == "" {
		return failed(fmt.Errorf("%w: X-Hub-Signature-256", ErrMissingHeader))
	}
	if err := headerTooLong(header); err != nil {
		return failed(err)
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	sig, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(sig) != 32 {
		return failed(fmt.Errorf("%w: X-Hub-Signature-256 is not sha256=<64 hex digits>", ErrMalformedHeader))
	}
	return bodyVerifier([][]byte{sig}, secrets)
}

// Shopify verifies X-Shopify-Hmac-Sha256, the base64 HMAC-SHA256 of the
// body keyed by the app's client secret. Shopify signs no timestamp either.
func Shopify(body []byte, header string, secrets []string) error {
	return verifyBody(shopifyVerifier(header, secrets), body)
}

func shopifyVerifier(header string, secrets []string) *Verifier {
	if err := checkSecrets(secrets); err != nil {
		return failed(err)
	}
	if header == "" {
		return failed(fmt.Errorf("%w: X-Shopify-Hmac-Sha256", ErrMissingHeader))
	}
	if err := headerTooLong(header); err != nil {
		return failed(err)
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(header))
	if err != nil || len(sig) != 32 {
		return failed(fmt.Errorf("%w: X-Shopify-Hmac-Sha256 is not a base64 SHA-256 HMAC", ErrMalformedHeader))
	}
	return bodyVerifier([][]byte{sig}, secrets)
}

// Slack verifies X-Slack-Signature ("v0=<hex>"), an HMAC-SHA256 of
// "v0:timestamp:body" keyed by the signing secret, with the timestamp of
// X-Slack-Request-Timestamp within the tolerance both ways.
func Slack(body []byte, timestamp, signature string, secrets []string, opts Options) error {
	return verifyBody(slackVerifier(timestamp, signature, secrets, opts), body)
}

func slackVerifier(timestamp, signature string, secrets []string, opts Options) *Verifier {
	if err := checkSecrets(secrets); err != nil {
		return failed(err)
	}
	if timestamp == "" {
		return failed(fmt.Errorf("%w: X-Slack-Request-Timestamp", ErrMissingHeader))
	}
	if signature == "" {
		return failed(fmt.Errorf("%w: X-Slack-Signature", ErrMissingHeader))
	}
	if err := headerTooLong(timestamp + signature); err != nil {
		return failed(err)
	}
	if _, err := checkTimestamp(timestamp, opts); err != nil {
		return failed(err)
	}
	hexSig, ok := strings.CutPrefix(signature, "v0=")
	sig, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(sig) != 32 {
		return failed(fmt.Errorf("%w: X-Slack-Signature is not v0=<64 hex digits>", ErrMalformedHeader))
	}
	return hmacVerifier(secretKeys(secrets), "v0:"+timestamp+":", [][]byte{sig}, "X-Slack-Signature does not match the body and secret")
}

// bodyVerifier checks candidates against the HMAC of the body alone under
// each secret (GitHub, Shopify).
func bodyVerifier(candidates [][]byte, secrets []string) *Verifier {
	return hmacVerifier(secretKeys(secrets), "", candidates, "the signature does not match the body and secret")
}
