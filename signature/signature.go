// Package signature verifies webhook signatures before a key is reserved, so
// that a forged request cannot reserve a real event id and turn the genuine
// delivery away as a duplicate.
//
// One function per scheme, each over the raw body exactly as received:
// Stripe, StandardWebhooks (also Svix), GitHub, Shopify and Slack. Every
// function accepts several secrets (during a rotation, any may match),
// compares HMACs in constant time, and fails with an error wrapping one of
// the sentinel errors below, which callers test with errors.Is. Standard
// Webhooks' asymmetric v1a signatures are checked with ed25519.Verify
// against whpk_ public keys given in the same list.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Sentinel errors. Every verification error wraps exactly one of them.
var (
	// ErrMissingHeader: a signature or timestamp header is absent or empty.
	ErrMissingHeader = errors.New("missing signature header")
	// ErrMalformedHeader: a header is present but cannot be parsed.
	ErrMalformedHeader = errors.New("malformed signature header")
	// ErrNoValidSignature: no signature matches any secret.
	ErrNoValidSignature = errors.New("no valid signature")
	// ErrTooOld: the signed timestamp is older than the tolerance.
	ErrTooOld = errors.New("timestamp too old")
	// ErrTooNew: the signed timestamp is further in the future than the
	// tolerance (stripe-go accepts those; a clock this far ahead is suspect).
	ErrTooNew = errors.New("timestamp too far in the future")
	// ErrNoSecret: no secret was configured; nothing can be verified.
	ErrNoSecret = errors.New("no secret configured")
	// ErrInvalidSecret: a secret has the wrong form: a Standard Webhooks
	// whsec_ secret that is not base64, a whpk_ public key that is not the
	// base64 of 32 bytes, or a whsk_ private key (the sender's).
	ErrInvalidSecret = errors.New("invalid secret")
)

// DefaultTolerance is how far a signed timestamp may be from now, in both
// directions, unless Options.Tolerance says otherwise.
const DefaultTolerance = 5 * time.Minute

// Options tune the schemes that sign a timestamp (Stripe, Standard
// Webhooks, Slack).
type Options struct {
	// Tolerance defaults to DefaultTolerance. It is applied to the past and
	// to the future.
	Tolerance time.Duration
	// Now is the reference time; zero means time.Now().
	Now time.Time
}

func (o Options) now() time.Time {
	if o.Now.IsZero() {
		return time.Now()
	}
	return o.Now
}

func (o Options) tolerance() time.Duration {
	if o.Tolerance <= 0 {
		return DefaultTolerance
	}
	return o.Tolerance
}

// checkTimestamp parses unix seconds and applies the tolerance both ways.
func checkTimestamp(raw string, opts Options) (int64, error) {
	ts, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || ts <= 0 {
		return 0, fmt.Errorf("%w: timestamp %.32q is not unix seconds", ErrMalformedHeader, raw)
	}
	age := opts.now().Sub(time.Unix(ts, 0))
	switch tol := opts.tolerance(); {
	case age > tol:
		return 0, fmt.Errorf("%w: signed %s ago, tolerance %s", ErrTooOld, age.Round(time.Second), tol)
	case -age > tol:
		return 0, fmt.Errorf("%w: signed %s ahead, tolerance %s", ErrTooNew, (-age).Round(time.Second), tol)
	}
	return ts, nil
}

func mac(secret []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// anyMatch reports whether some candidate equals some expected MAC. Every
// pair is compared, each in constant time, so the time taken does not tell
// which one matched.
func anyMatch(expected, candidates [][]byte) bool {
	found := 0
	for _, e := range expected {
		for _, c := range candidates {
			if hmac.Equal(e, c) {
				found = 1
			}
		}
	}
	return found == 1
}

// Code names the sentinel err wraps, as keysvc and the generated workflows
// report it: missing_signature, malformed_signature, invalid_signature,
// signature_too_old, signature_too_new, invalid_secret,
// provider_not_configured; "" for nil.
func Code(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrMissingHeader):
		return "missing_signature"
	case errors.Is(err, ErrMalformedHeader):
		return "malformed_signature"
	case errors.Is(err, ErrTooOld):
		return "signature_too_old"
	case errors.Is(err, ErrTooNew):
		return "signature_too_new"
	case errors.Is(err, ErrInvalidSecret):
		return "invalid_secret"
	case errors.Is(err, ErrNoSecret):
		return "provider_not_configured"
	}
	return "invalid_signature"
}
