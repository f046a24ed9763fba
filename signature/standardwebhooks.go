package signature

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// Standard Webhooks key prefixes: the symmetric secret (v1), the ed25519
// public key a receiver configures for v1a, and the private key its sender
// keeps.
const (
	swSecretPrefix     = "whsec_"
	swPublicKeyPrefix  = "whpk_"
	swPrivateKeyPrefix = "whsk_"
)

// maxAsymmetricSignatures bounds the v1a signatures read from one header.
// Each costs an ed25519 verification per public key (about 90 µs on the
// project's 2-core machine, where an HMAC of a small body costs about one):
// a sender signs with one key per active key, and a forger must not buy a
// hundred verifications with one request.
const maxAsymmetricSignatures = 8

// swKeys are the keys of a Standard Webhooks secret list.
type swKeys struct {
	secrets    [][]byte            // whsec_ (or unprefixed) secrets: they check v1
	publicKeys []ed25519.PublicKey // whpk_ keys: they check v1a
}

// standardWebhooksKeys decodes secrets: whpk_<base64 of 32 bytes> is an
// ed25519 public key, whsec_<base64> (the prefix optional) an HMAC secret.
// The first that is neither, or a whsk_ private key, fails with
// ErrInvalidSecret naming its position in the list, never its value.
func standardWebhooksKeys(secrets []string) (swKeys, error) {
	var k swKeys
	for i, s := range secrets {
		if s == "" {
			continue
		}
		switch {
		case strings.HasPrefix(s, swPublicKeyPrefix):
			raw, err := base64.StdEncoding.DecodeString(s[len(swPublicKeyPrefix):])
			if err != nil {
				return swKeys{}, fmt.Errorf("%w: Standard Webhooks key %d (whpk_) is not base64: %w", ErrInvalidSecret, i+1, err)
			}
			if len(raw) != ed25519.PublicKeySize {
				return swKeys{}, fmt.Errorf("%w: Standard Webhooks key %d (whpk_) is %d bytes, not the %d of an ed25519 public key", ErrInvalidSecret, i+1, len(raw), ed25519.PublicKeySize)
			}
			k.publicKeys = append(k.publicKeys, ed25519.PublicKey(raw))
		case strings.HasPrefix(s, swPrivateKeyPrefix):
			return swKeys{}, fmt.Errorf("%w: Standard Webhooks key %d is a whsk_ signing key, which the sender keeps: configure its whpk_ public key", ErrInvalidSecret, i+1)
		default:
			key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, swSecretPrefix))
			if err != nil {
				return swKeys{}, fmt.Errorf("%w: Standard Webhooks secret %d (whsec_) is not base64: %w", ErrInvalidSecret, i+1, err)
			}
			if len(key) == 0 {
				return swKeys{}, fmt.Errorf("%w: Standard Webhooks secret %d (whsec_) is empty", ErrInvalidSecret, i+1)
			}
			k.secrets = append(k.secrets, key)
		}
	}
	return k, nil
}

// swSignatures are the signatures of a webhook-signature header that the
// configured keys can check.
type swSignatures struct {
	v1, v1a [][]byte
	// unusable describes the first v1 or v1a entry that cannot be a
	// signature and that a configured key would have checked.
	unusable error
}

// standardWebhooksSignatures parses webhook-signature: space-separated
// "version,base64" entries. An entry without a comma is ErrMalformedHeader;
// more than maxAsymmetricSignatures v1a entries too. A v1 entry that is not
// base64 of 32 bytes, or a v1a entry that is not base64 of 64 bytes, is
// skipped (another may verify) and remembered; other versions are skipped.
// Entries of a version no configured key checks are not decoded.
func standardWebhooksSignatures(header string, keys swKeys) (swSignatures, error) {
	var sigs swSignatures
	asymmetric := 0
	for i, entry := range strings.Fields(header) {
		version, value, ok := strings.Cut(entry, ",")
		if !ok {
			return swSignatures{}, fmt.Errorf("%w: webhook-signature entry %d is not version,signature", ErrMalformedHeader, i+1)
		}
		var size int
		var what string
		var into *[][]byte
		switch {
		case version == "v1" && len(keys.secrets) > 0:
			size, what, into = sha256.Size, "an HMAC-SHA256", &sigs.v1
		case version == "v1a" && len(keys.publicKeys) > 0:
			if asymmetric++; asymmetric > maxAsymmetricSignatures {
				return swSignatures{}, fmt.Errorf("%w: webhook-signature has more than %d v1a signatures", ErrMalformedHeader, maxAsymmetricSignatures)
			}
			size, what, into = ed25519.SignatureSize, "an ed25519 signature", &sigs.v1a
		default:
			continue // a version no configured key checks
		}
		raw, err := base64.StdEncoding.DecodeString(value)
		switch {
		case err != nil:
			err = fmt.Errorf("webhook-signature entry %d (%s) is not base64: %w", i+1, version, err)
		case len(raw) != size:
			err = fmt.Errorf("webhook-signature entry %d (%s) is %d bytes, not the %d of %s", i+1, version, len(raw), size, what)
		}
		if err != nil {
			if sigs.unusable == nil {
				sigs.unusable = err
			}
			continue
		}
		*into = append(*into, raw)
	}
	return sigs, nil
}

// StandardWebhooks verifies the Standard Webhooks scheme (used by Svix).
// The signed content is "id.timestamp.body"; webhook-signature holds
// space-separated signatures, "v1,<base64 HMAC-SHA256>" keyed by a
// whsec_<base64> secret (the prefix optional) and "v1a,<base64 ed25519
// signature>" checked with a whpk_<base64 of the 32-byte public key>. One
// list may mix both: a v1 signature is checked only against the whsec_
// secrets, a v1a only against the whpk_ keys, and any one valid signature
// under any key passes (rotation). The timestamp must be within the
// tolerance both ways.
//
// It fails with ErrInvalidSecret when a secret or key is malformed (before
// reading the request), ErrMissingHeader or ErrMalformedHeader for the
// headers, ErrTooOld or ErrTooNew for the timestamp, and ErrNoValidSignature
// when no signature verifies: when no signature was even usable, that error
// names the first malformed v1 or v1a entry. HMACs are compared in constant
// time; a v1a check holds the signed content, one copy of the body, in
// memory while it runs.
func StandardWebhooks(body []byte, id, timestamp, signatures string, secrets []string, opts Options) error {
	return verifyBody(standardWebhooksVerifier(id, timestamp, signatures, secrets, opts), body)
}

func standardWebhooksVerifier(id, timestamp, signatures string, secrets []string, opts Options) *Verifier {
	if err := checkSecrets(secrets); err != nil {
		return failed(err)
	}
	keys, err := standardWebhooksKeys(secrets)
	if err != nil {
		return failed(err)
	}
	for _, h := range [][2]string{{"webhook-id", id}, {"webhook-timestamp", timestamp}, {"webhook-signature", signatures}} {
		if h[1] == "" {
			return failed(fmt.Errorf("%w: %s", ErrMissingHeader, h[0]))
		}
		if err := headerTooLong(h[1]); err != nil {
			return failed(err)
		}
	}
	if _, err := checkTimestamp(timestamp, opts); err != nil {
		return failed(err)
	}
	sigs, err := standardWebhooksSignatures(signatures, keys)
	if err != nil {
		return failed(err)
	}
	if len(sigs.v1) == 0 && len(sigs.v1a) == 0 {
		if sigs.unusable != nil {
			return failed(fmt.Errorf("%w: %w", ErrNoValidSignature, sigs.unusable))
		}
		versions, why := checkedVersions(keys)
		return failed(fmt.Errorf("%w: webhook-signature has no %s signature%s", ErrNoValidSignature, versions, why))
	}
	prefix := id + "." + timestamp + "."
	versions, _ := checkedVersions(keys)
	v := hmacVerifier(keys.secrets, prefix, sigs.v1, "no "+versions+" signature matches the body and keys")
	if len(keys.publicKeys) > 0 && len(sigs.v1a) > 0 {
		// ed25519 signs the whole content at once: it is kept.
		v.publicKeys, v.v1a, v.content = keys.publicKeys, sigs.v1a, []byte(prefix)
	}
	return v
}

// checkedVersions names the signature versions the configured keys check,
// and, when only one kind of key is configured, says why the other version
// is not read.
func checkedVersions(keys swKeys) (versions, why string) {
	switch {
	case len(keys.publicKeys) == 0:
		return "v1", " (whsec_ secrets check v1 only)"
	case len(keys.secrets) == 0:
		return "v1a", " (whpk_ keys check v1a only)"
	}
	return "v1 or v1a", ""
}

// anyVerifies reports whether some v1a signature verifies the signed
// content ("id.ts.body") under some public key. Public keys and signatures
// hold no secret, so it stops at the first that verifies.
func anyVerifies(keys []ed25519.PublicKey, sigs [][]byte, content []byte) bool {
	for _, key := range keys {
		for _, sig := range sigs {
			if ed25519.Verify(key, content, sig) {
				return true
			}
		}
	}
	return false
}
