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
	if err := checkSecrets(secrets); err != nil {
		return err
	}
	if header == "" {
		return fmt.Errorf("%w: Stripe-Signature", ErrMissingHeader)
	}
	if err := headerTooLong(header); err != nil {
		return err
	}
	var timestamp string
	var candidates [][]byte
	v1s, malformed := 0, 0 // malformed: position among the v1 values of the first unusable one
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%w: Stripe-Signature element %.32q is not key=value", ErrMalformedHeader, part)
		}
		switch k {
		case "t":
			if timestamp != "" {
				return fmt.Errorf("%w: Stripe-Signature has two timestamps", ErrMalformedHeader)
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
		return fmt.Errorf("%w: Stripe-Signature has no timestamp", ErrMalformedHeader)
	}
	if _, err := checkTimestamp(timestamp, opts); err != nil {
		return err
	}
	if len(candidates) == 0 {
		if malformed > 0 {
			return fmt.Errorf("%w: Stripe-Signature v1 value %d is not a 64-hex-digit HMAC-SHA256", ErrNoValidSignature, malformed)
		}
		return fmt.Errorf("%w: Stripe-Signature has no v1 signature", ErrNoValidSignature)
	}
	var expected [][]byte
	for _, s := range secrets {
		if s != "" {
			expected = append(expected, mac([]byte(s), []byte(timestamp), []byte("."), body))
		}
	}
	if !anyMatch(expected, candidates) {
		return fmt.Errorf("%w: no v1 signature matches the body and secret", ErrNoValidSignature)
	}
	return nil
}

// GitHub verifies X-Hub-Signature-256 ("sha256=<hex>"), an HMAC-SHA256 of
// the body. GitHub signs no timestamp: a captured delivery can be replayed
// as long as the secret lives, and only the idempotency key stops it.
func GitHub(body []byte, header string, secrets []string) error {
	if err := checkSecrets(secrets); err != nil {
		return err
	}
	if header == "" {
		return fmt.Errorf("%w: X-Hub-Signature-256", ErrMissingHeader)
	}
	if err := headerTooLong(header); err != nil {
		return err
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	sig, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(sig) != 32 {
		return fmt.Errorf("%w: X-Hub-Signature-256 is not sha256=<64 hex digits>", ErrMalformedHeader)
	}
	return matchBody(body, [][]byte{sig}, secrets)
}

// Shopify verifies X-Shopify-Hmac-Sha256, the base64 HMAC-SHA256 of the
// body keyed by the app's client secret. Shopify signs no timestamp either.
func Shopify(body []byte, header string, secrets []string) error {
	if err := checkSecrets(secrets); err != nil {
		return err
	}
	if header == "" {
		return fmt.Errorf("%w: X-Shopify-Hmac-Sha256", ErrMissingHeader)
	}
	if err := headerTooLong(header); err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(header))
	if err != nil || len(sig) != 32 {
		return fmt.Errorf("%w: X-Shopify-Hmac-Sha256 is not a base64 SHA-256 HMAC", ErrMalformedHeader)
	}
	return matchBody(body, [][]byte{sig}, secrets)
}

// Slack verifies X-Slack-Signature ("v0=<hex>"), an HMAC-SHA256 of
// "v0:timestamp:body" keyed by the signing secret, with the timestamp of
// X-Slack-Request-Timestamp within the tolerance both ways.
func Slack(body []byte, timestamp, signature string, secrets []string, opts Options) error {
	if err := checkSecrets(secrets); err != nil {
		return err
	}
	if timestamp == "" {
		return fmt.Errorf("%w: X-Slack-Request-Timestamp", ErrMissingHeader)
	}
	if signature == "" {
		return fmt.Errorf("%w: X-Slack-Signature", ErrMissingHeader)
	}
	if err := headerTooLong(timestamp + signature); err != nil {
		return err
	}
	if _, err := checkTimestamp(timestamp, opts); err != nil {
		return err
	}
	hexSig, ok := strings.CutPrefix(signature, "v0=")
	sig, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(sig) != 32 {
		return fmt.Errorf("%w: X-Slack-Signature is not v0=<64 hex digits>", ErrMalformedHeader)
	}
	var expected [][]byte
	for _, s := range secrets {
		if s != "" {
			expected = append(expected, mac([]byte(s), []byte("v0:"), []byte(timestamp), []byte(":"), body))
		}
	}
	if !anyMatch(expected, [][]byte{sig}) {
		return fmt.Errorf("%w: X-Slack-Signature does not match the body and secret", ErrNoValidSignature)
	}
	return nil
}

// matchBody checks candidates against the HMAC of the body under each secret.
func matchBody(body []byte, candidates [][]byte, secrets []string) error {
	var expected [][]byte
	for _, s := range secrets {
		if s != "" {
			expected = append(expected, mac([]byte(s), body))
		}
	}
	if !anyMatch(expected, candidates) {
		return fmt.Errorf("%w: the signature does not match the body and secret", ErrNoValidSignature)
	}
	return nil
}
