package signature

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"hash"
)

// A Verifier checks one delivery's signature over a body handed to Write in
// as many pieces as it arrives in, so that a body need not be held in
// memory to be verified: each scheme's HMAC runs as the bytes come.
// Standard Webhooks' v1a (ed25519 over the whole signed content) is the one
// check that needs every byte at once: a Verifier keeps the signed content
// only when a v1a signature and a whpk_ key are both there to check it.
//
// NewVerifier reads the headers and the secrets at once; what they already
// decide (a missing or malformed header, a timestamp out of tolerance, no
// secret) is what Verify returns, and Write then does nothing.
type Verifier struct {
	err      error       // decided before the body: Verify returns it
	macs     []hash.Hash // one HMAC-SHA256 per secret, over the signed content so far
	sigs     [][]byte    // the header's signatures an HMAC may match
	mismatch string      // ErrNoValidSignature's detail when none verifies
	// Standard Webhooks' v1a: the public keys, the signatures, and the
	// signed content, kept only when both lists are non-empty.
	publicKeys []ed25519.PublicKey
	v1a        [][]byte
	content    []byte
}

// NewVerifier returns a Verifier of a delivery with headers h under p's
// scheme. Provider.Verify is NewVerifier, one Write of the body and Verify.
func (p Provider) NewVerifier(h Header, secrets []string, opts Options) *Verifier {
	s, err := schemeOf(p)
	if err != nil {
		return failed(err)
	}
	return s.verifier(h, secrets, opts)
}

// failed is a Verifier whose headers or secrets already decided: err.
func failed(err error) *Verifier { return &Verifier{err: err} }

// hmacVerifier starts one HMAC-SHA256 per key over the signed content's
// prefix (what the scheme signs before the body); sigs are the header's
// signatures, mismatch what Verify says when none matches.
func hmacVerifier(keys [][]byte, prefix string, sigs [][]byte, mismatch string) *Verifier {
	v := &Verifier{sigs: sigs, mismatch: mismatch}
	for _, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(prefix))
		v.macs = append(v.macs, m)
	}
	return v
}

// secretKeys are the non-empty secrets as HMAC keys, used as given.
func secretKeys(secrets []string) [][]byte {
	var keys [][]byte
	for _, s := range secrets {
		if s != "" {
			keys = append(keys, []byte(s))
		}
	}
	return keys
}

// Write adds p to the body; it never fails.
func (v *Verifier) Write(p []byte) (int, error) {
	if v.err != nil {
		return len(p), nil
	}
	for _, m := range v.macs {
		m.Write(p)
	}
	if v.content != nil {
		v.content = append(v.content, p...)
	}
	return len(p), nil
}

// Verify reports whether the body written so far carries a valid
// signature: nil, or an error wrapping one of the package's sentinels.
// HMACs are compared in constant time.
func (v *Verifier) Verify() error {
	if v.err != nil {
		return v.err
	}
	expected := make([][]byte, len(v.macs))
	for i, m := range v.macs {
		expected[i] = m.Sum(nil)
	}
	if anyMatch(expected, v.sigs) || anyVerifies(v.publicKeys, v.v1a, v.content) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNoValidSignature, v.mismatch)
}

// verifyBody runs v over one body held whole: the functions of each scheme.
func verifyBody(v *Verifier, body []byte) error {
	_, _ = v.Write(body)
	return v.Verify()
}
