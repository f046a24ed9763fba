package signature_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/signature"
)

// A Standard Webhooks sender written from the specification, independent of
// package signature: the signed content is "id.timestamp.body", a v1a
// signature is "v1a," and the base64 ed25519 signature of it, a public key
// is configured as "whpk_" and the base64 of its 32 bytes, a v1 signature
// is "v1," and the base64 HMAC-SHA256 keyed by the bytes of the whsec_.
func swContent(id, ts string, body []byte) []byte {
	return append([]byte(id+"."+ts+"."), body...)
}

func signV1a(key ed25519.PrivateKey, id, ts string, body []byte) string {
	return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(key, swContent(id, ts, body)))
}

func signV1(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(swContent(id, ts, body))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func whpk(key ed25519.PrivateKey) string {
	return "whpk_" + base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
}

// fixedKey is the ed25519 key of a seed of 32 bytes b, so that the vectors
// are the same on every run.
func fixedKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func TestStandardWebhooksV1a(t *testing.T) {
	const id, ts = "msg_2xJ1pLq9ZtB7", "1750000000"
	now := signature.Options{Now: time.Unix(1_750_000_000, 0)}
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_1"}}`)
	current, previous, attacker := fixedKey(1), fixedKey(2), fixedKey(3)
	hmacKey := []byte("a symmetric secret of the same endpoint")
	whsec := "whsec_" + base64.StdEncoding.EncodeToString(hmacKey)
	pub := current.Public().(ed25519.PublicKey)
	valid := signV1a(current, id, ts, body)
	validV1 := signV1(hmacKey, id, ts, body)
	b64 := base64.StdEncoding.EncodeToString

	for _, tc := range []struct {
		name     string
		body     []byte
		id, sigs string
		secrets  []string
		opts     signature.Options
		want     error
		mentions []string // what the message must say, when it fails
	}{
		{"valid", body, id, valid, []string{whpk(current)}, now, nil, nil},
		{"tampered body", append([]byte(" "), body...), id, valid, []string{whpk(current)}, now, signature.ErrNoValidSignature, nil},
		{"other id", body, "msg_other", valid, []string{whpk(current)}, now, signature.ErrNoValidSignature, nil},
		{"wrong key", body, id, valid, []string{whpk(attacker)}, now, signature.ErrNoValidSignature, []string{"v1a"}},
		{"a signature by another key", body, id, signV1a(attacker, id, ts, body), []string{whpk(current)}, now, signature.ErrNoValidSignature, nil},
		{"rotation: two v1a, the second valid", body, id, signV1a(attacker, id, ts, body) + " " + valid, []string{whpk(current)}, now, nil, nil},
		{"rotation: two keys, signed with the second", body, id, signV1a(previous, id, ts, body), []string{whpk(current), whpk(previous)}, now, nil, nil},
		{"mixed header, mixed list", body, id, validV1 + " " + valid, []string{whsec, whpk(current)}, now, nil, nil},
		{"mixed header, only the v1 valid", body, id, validV1 + " " + signV1a(attacker, id, ts, body), []string{whpk(current), whsec}, now, nil, nil},
		{"mixed header, only the v1a valid", body, id, signV1([]byte("other"), id, ts, body) + " " + valid, []string{whsec, whpk(current)}, now, nil, nil},
		{"mixed header, whsec_ only: the v1 verifies", body, id, valid + " " + validV1, []string{whsec}, now, nil, nil},
		{"mixed header, whpk_ only: the v1a verifies", body, id, validV1 + " " + valid, []string{whpk(current)}, now, nil, nil},
		// The public key is public: a v1 HMAC keyed by its bytes is a forgery
		// anyone can make, and must not verify.
		{"v1 keyed by the public key", body, id, signV1(pub, id, ts, body), []string{whpk(current)}, now, signature.ErrNoValidSignature, []string{"no v1a"}},
		{"v1 keyed by the public key, mixed list", body, id, signV1(pub, id, ts, body), []string{whsec, whpk(current)}, now, signature.ErrNoValidSignature, nil},
		{"v1a with whsec_ secrets only", body, id, valid, []string{whsec}, now, signature.ErrNoValidSignature, []string{"no v1 "}},
		{"stale", body, id, valid, []string{whpk(current)}, signature.Options{Now: time.Unix(1_750_000_000+301, 0)}, signature.ErrTooOld, nil},
		{"future", body, id, valid, []string{whpk(current)}, signature.Options{Now: time.Unix(1_750_000_000-301, 0)}, signature.ErrTooNew, nil},
		{"key not base64", body, id, valid, []string{"whpk_not*base64"}, now, signature.ErrInvalidSecret, []string{"key 1", "not base64"}},
		{"key of 31 bytes", body, id, valid, []string{whpk(current), "whpk_" + b64(pub[:31])}, now, signature.ErrInvalidSecret, []string{"key 2", "31 bytes"}},
		{"key of 33 bytes", body, id, valid, []string{"whpk_" + b64(append(pub, 0))}, now, signature.ErrInvalidSecret, []string{"33 bytes"}},
		{"empty key", body, id, valid, []string{"whpk_"}, now, signature.ErrInvalidSecret, []string{"0 bytes"}},
		{"private key configured", body, id, valid, []string{"whsk_" + b64(current.Seed())}, now, signature.ErrInvalidSecret, []string{"whsk_", "whpk_"}},
		{"signature not base64", body, id, "v1a,!!!", []string{whpk(current)}, now, signature.ErrNoValidSignature, []string{"entry 1 (v1a)", "not base64"}},
		{"signature of 63 bytes", body, id, "v1a," + b64(make([]byte, 63)), []string{whpk(current)}, now, signature.ErrNoValidSignature, []string{"entry 1 (v1a)", "63 bytes"}},
		{"malformed, then a wrong one", body, id, "v1a,AAAA " + signV1a(attacker, id, ts, body), []string{whpk(current)}, now, signature.ErrNoValidSignature, []string{"no v1a"}},
		{"malformed v1 with whsec_", body, id, "v1,AAAA v1a,AAAA", []string{whsec}, now, signature.ErrNoValidSignature, []string{"entry 1 (v1)", "3 bytes"}},
		{"malformed before the valid one", body, id, "v1a,%%% " + valid, []string{whpk(current)}, now, nil, nil},
		{"too many v1a", body, id, strings.Repeat(signV1a(attacker, id, ts, body)+" ", 8) + valid, []string{whpk(current)}, now, signature.ErrMalformedHeader, []string{"more than 8"}},
		{"eight v1a", body, id, strings.Repeat(signV1a(attacker, id, ts, body)+" ", 7) + valid, []string{whpk(current)}, now, nil, nil},
	} {
		err := signature.StandardWebhooks(tc.body, tc.id, ts, tc.sigs, tc.secrets, tc.opts)
		wantErr(t, tc.name, err, tc.want)
		wantSays(t, tc.name, err, tc.mentions)
		for _, s := range tc.secrets {
			if _, material, _ := strings.Cut(s, "_"); err != nil && len(material) >= 8 && strings.Contains(err.Error(), material) {
				t.Errorf("%s: the message %q repeats a key", tc.name, err)
			}
		}
	}

	h := http.Header{}
	h.Set("svix-id", id)
	h.Set("svix-timestamp", ts)
	h.Set("svix-signature", valid)
	wantErr(t, "svix header names", signature.ProviderStandardWebhooks.Verify(h, body, []string{whpk(current)}, now), nil)
}

// A v1a vector from an independent ed25519 implementation: Node's crypto
// signs with a key it builds from a fixed PKCS#8 DER seed and reports the
// public key itself. Only when node is on PATH: the Go-side signer above
// is the proof, this one checks the wire format against another library.
func TestStandardWebhooksV1aFromNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: the Node-signed v1a vector is skipped")
	}
	const id, ts = "msg_node_1", "1750000000"
	body := []byte("{\"binary\":\"\xff\xfe\"}")
	out, err := exec.Command(node, "-e", `
const c = require('crypto');
const [seedHex, id, ts, bodyB64] = process.argv.slice(1);
const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), Buffer.from(seedHex, 'hex')]);
const key = c.createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
const pub = Buffer.from(c.createPublicKey(key).export({ format: 'jwk' }).x, 'base64url');
const sig = c.sign(null, Buffer.concat([Buffer.from(id + '.' + ts + '.'), Buffer.from(bodyB64, 'base64')]), key);
process.stdout.write(JSON.stringify({ pub: pub.toString('base64'), sig: sig.toString('base64') }));
`, hex.EncodeToString(bytes.Repeat([]byte{7}, 32)), id, ts, base64.StdEncoding.EncodeToString(body)).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var v struct{ Pub, Sig string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("node said %q: %v", out, err)
	}
	opts := signature.Options{Now: time.Unix(1_750_000_000, 0)}
	key := []string{"whpk_" + v.Pub}
	wantErr(t, "node-signed", signature.StandardWebhooks(body, id, ts, "v1a,"+v.Sig, key, opts), nil)
	wantErr(t, "node-signed, tampered body", signature.StandardWebhooks(append(body, ' '), id, ts, "v1a,"+v.Sig, key, opts), signature.ErrNoValidSignature)
	wantErr(t, "node-signed, another key", signature.StandardWebhooks(body, id, ts, "v1a,"+v.Sig, []string{whpk(fixedKey(8))}, opts), signature.ErrNoValidSignature)
}

// CheckSecrets refuses at start what StandardWebhooks would refuse on every
// delivery, and takes what every scheme takes.
func TestCheckSecrets(t *testing.T) {
	pub := whpk(fixedKey(1))
	b64 := base64.StdEncoding.EncodeToString
	for _, tc := range []struct {
		name     string
		provider signature.Provider
		secrets  []string
		want     error
	}{
		{"whsec_ and whpk_", signature.ProviderStandardWebhooks, []string{"whsec_" + b64([]byte("s")), pub}, nil},
		{"whpk_ only", signature.ProviderStandardWebhooks, []string{pub}, nil},
		{"whpk_ of 31 bytes", signature.ProviderStandardWebhooks, []string{pub, "whpk_" + b64(make([]byte, 31))}, signature.ErrInvalidSecret},
		{"whsec_ not base64", signature.ProviderStandardWebhooks, []string{"whsec_***"}, signature.ErrInvalidSecret},
		{"whsk_", signature.ProviderStandardWebhooks, []string{"whsk_" + b64(make([]byte, 32))}, signature.ErrInvalidSecret},
		{"none", signature.ProviderStandardWebhooks, nil, signature.ErrNoSecret},
		{"stripe takes any string", signature.ProviderStripe, []string{"whsec_***"}, nil},
		{"github, none", signature.ProviderGitHub, []string{""}, signature.ErrNoSecret},
	} {
		wantErr(t, tc.name, tc.provider.CheckSecrets(tc.secrets), tc.want)
	}
	if signature.Provider("paypal").CheckSecrets([]string{"x"}) == nil {
		t.Error("CheckSecrets took an unknown provider")
	}
}
