// Package eventkey derives the idempotency key of a webhook delivery, as
// written in docs/key-spec.md (key spec v1).
//
// The key is "evt:" followed by the event id found in the body, or
// "sha256:" followed by the lowercase hex SHA-256 of every body byte when the
// body carries no usable id. The same bytes always give the same key, in Go,
// in the n8n Code node script (templates/code-node/idempotency-key.js) and in
// every other implementation tested against conformance/key-vectors.json.
package eventkey

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
)

// Source says which clause of the spec produced a key.
type Source string

const (
	// SourceEventID marks a key built from the body's top-level "id" string.
	SourceEventID Source = "event_id"
	// SourceBodySHA256 marks a key built from the SHA-256 of the raw body.
	SourceBodySHA256 Source = "body_sha256"
)

// Key prefixes, part of the stored key; changing them changes every key.
const (
	EventIDPrefix = "evt:"
	SHA256Prefix  = "sha256:"
)

// Limits of the id clause. A body nested deeper than MaxDepth, or an id
// longer than MaxIDBytes, is hashed instead.
const (
	MaxDepth   = 1000
	MaxIDBytes = 255
)

// ErrEmptyBody is returned by Derive for a body of zero bytes: there is
// nothing that identifies the event, and hashing nothing would make every
// empty delivery a duplicate of the first one.
var ErrEmptyBody = errors.New("empty body: there is nothing to derive an idempotency key from")

// Key is a derived idempotency key.
type Key struct {
	Value  string
	Source Source
}

func (k Key) String() string { return k.Value }

// Derive returns the key of a webhook body, given exactly as received (after
// transport decoding such as gzip), by the spec's id and hash clauses: it
// knows no Content-Type, so a multipart form is hashed like any other body
// (DeriveFor keys it by its form). It fails only with ErrEmptyBody.
func Derive(body []byte) (Key, error) { return derive(body, Summed{}) }

func derive(body []byte, sum Summed) (Key, error) {
	if len(body) == 0 {
		return Key{}, ErrEmptyBody
	}
	if sum.OK && CannotBeObject(body) {
		return Key{Value: sum.hashKey(body), Source: SourceBodySHA256}, nil
	}
	if id, ok := EventID(body); ok {
		return Key{Value: EventIDPrefix + id, Source: SourceEventID}, nil
	}
	return Key{Value: sum.hashKey(body), Source: SourceBodySHA256}, nil
}

// Summed is a body's SHA-256 computed by the caller while it read the body
// (keysvc hashes as it reads a body that cannot have an id), so that
// deriving its key costs no second pass. The zero value means "not computed".
//
// With a Summed, DeriveForSummed needs no more of the body than its first
// bytes when CannotBeObject holds for them and the delivery is not a
// multipart form (IsMultipart of its Content-Type, whose key needs the whole
// form): such a body has no id, so its key is the hash (or a preset's header
// id), and the caller need not keep a body it only hashed.
type Summed struct {
	Sum [sha256.Size]byte
	OK  bool
}

// hashKey returns the "sha256:" key of body, from sum when it was computed.
func (s Summed) hashKey(body []byte) string {
	if s.OK {
		return SHA256Prefix + hex.EncodeToString(s.Sum[:])
	}
	return HashKey(body)
}

// CannotBeObject reports whether a body that begins with prefix cannot be a
// JSON object, whatever follows: its first byte after one optional BOM and
// JSON whitespace is not '{'. It is false while prefix cannot tell (empty,
// whitespace only, part of a BOM). Such a body carries no id: its key is its
// hash.
func CannotBeObject(prefix []byte) bool {
	rest, hadBOM := bytes.CutPrefix(prefix, utf8BOM)
	if !hadBOM && len(prefix) < len(utf8BOM) && bytes.HasPrefix(utf8BOM, prefix) {
		return false // a BOM may still be arriving
	}
	rest = bytes.TrimLeft(rest, " \t\r\n")
	return len(rest) > 0 && rest[0] != '{'
}

// HashKey returns the "sha256:" key of body, whatever it contains.
func HashKey(body []byte) string {
	sum := sha256.Sum256(body)
	return SHA256Prefix + hex.EncodeToString(sum[:])
}

// EventID reports the event id of body under the id clause of the spec: the
// body is valid UTF-8 and, after one optional leading BOM, exactly one JSON
// object nested at most MaxDepth levels; its last top-level "id" member is a
// string of 1 to MaxIDBytes bytes with no control character and no unpaired
// surrogate. The id is returned exactly as decoded.
func EventID(body []byte) (string, bool) {
	return scanMember(body, "id")
}

// Member is EventID for another top-level member: the inbox pattern reads
// the event's "account" (Stripe Connect) with it, under the same rules as the
// id, so that Go and the Code node script agree on every body.
func Member(body []byte, name string) (string, bool) {
	return scanMember(body, name)
}

// IsObject reports whether body is what the id clause of the spec reads:
// valid UTF-8 and, after one optional BOM, exactly one JSON object nested at
// most MaxDepth levels (with an id or not).
func IsObject(body []byte) bool {
	_, rule := scan(body, "")
	return rule == "" || rule == RuleNoID
}

// ValidID reports whether id could be an event id under the spec: 1 to
// MaxIDBytes bytes of valid UTF-8 with no control character. Callers that
// take a key from elsewhere (a provider header) validate it with this.
func ValidID(id string) bool {
	return validID(id)
}
