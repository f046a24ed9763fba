package keysvc_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/signature"
)

// signedHeaders are the headers p's sender puts on body, signed with secret
// at at.
func signedHeaders(t *testing.T, p signature.Provider, secret string, at time.Time, body []byte) map[string]string {
	t.Helper()
	h, err := p.Sign(signature.Unsigned{Body: body, Secret: secret, Timestamp: at})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// allocatedBy is what f allocated, in bytes, in the whole process (the
// server's side of a request included).
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// keysvc's default --max-body takes what n8n takes (16 MiB), a body over it
// gets a 413 that names the flag, and a body keysvc verifies is verified,
// and keyed, as it arrives: a signed 15 MB form (keyed by its hash), a
// signed 15 MB JSON object whose key the caller names, and the same object
// whose key keysvc derives from its last member each cost the whole process
// less than a quarter of their size in allocations.
func TestLargeBodiesAreVerifiedAsTheyArrive(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	store := newBoltStore(t)
	c := start(t, keysvc.Config{Store: store, Now: func() time.Time { return now },
		Secrets: map[signature.Provider][]string{signature.ProviderSlack: {"slack secret"}, signature.ProviderGitHub: {"gh secret"}}})
	const size = 15_000_000
	form := []byte("token=x&team_id=T1&command=%2Fdeploy&text=" + strings.Repeat("a", size-42))
	formSum := sha256.Sum256(form)
	formHeaders := signedHeaders(t, signature.ProviderSlack, "slack secret", now, form)
	formHeaders["Content-Type"] = "application/x-www-form-urlencoded"
	var r reply
	if n := allocatedBy(func() { r = c.do("POST", "/v1/reservations?provider=slack", form, formHeaders) }); n > size/4 {
		t.Errorf("a signed %d-byte form allocated %d bytes: it was held, not verified as it arrived", size, n)
	}
	r.want(t, 201, "")
	if want := "sha256:" + hex.EncodeToString(formSum[:]); r.str("key") != want {
		t.Errorf("the form's key %q, want %q", r.str("key"), want)
	}

	object := []byte(`{"data":"` + strings.Repeat("b", size-38) + `","id":"evt_large_1"}`)
	objectHeaders := signedHeaders(t, signature.ProviderGitHub, "gh secret", now, object)
	objectHeaders["Idempotency-Key"] = "evt:evt_large_1"
	if n := allocatedBy(func() { r = c.do("POST", "/v1/reservations?provider=github&preset=", object, objectHeaders) }); n > size/4 {
		t.Errorf("a signed %d-byte object with its key named allocated %d bytes", size, n)
	}
	r.want(t, 201, "")
	delete(objectHeaders, "Idempotency-Key")
	if n := allocatedBy(func() { r = c.do("POST", "/v1/reservations?provider=github&preset=", object, objectHeaders) }); n > size/4 {
		t.Errorf("a signed %d-byte object keyed by its last member allocated %d bytes: it was held", size, n)
	}
	r.want(t, 200, "")
	if r.str("key") != "evt:evt_large_1" || r.str("source") != "event_id" {
		t.Errorf("the object's derived key: %s", r.body)
	}
	objectHeaders["X-Hub-Signature-256"] = "sha256=" + strings.Repeat("0", 64)
	c.do("POST", "/v1/reservations?provider=github&preset=", object, objectHeaders).want(t, 401, "invalid_signature")

	// The default limit, exactly, and one byte over it.
	atLimit := bytes.Repeat([]byte("c"), keysvc.DefaultMaxBodyBytes)
	if keysvc.DefaultMaxBodyBytes < 16_000_000 {
		t.Fatalf("DefaultMaxBodyBytes is %d, under n8n's 16 MB", keysvc.DefaultMaxBodyBytes)
	}
	c.do("POST", "/v1/reservations", atLimit, nil).want(t, 201, "")
	over := c.do("POST", "/v1/reservations", append(atLimit, 'c'), nil)
	over.want(t, 413, "body_too_large")
	if msg := over.str("error"); !strings.Contains(msg, "--max-body") || !strings.Contains(msg, fmt.Sprint(keysvc.DefaultMaxBodyBytes)) {
		t.Errorf("the 413 does not name the flag and the limit: %q", msg)
	}
}

// Slack's url_verification, keyed by the slack preset or verified as
// Slack's, is answered with its challenge after the signature check, and
// reserves nothing; any other delivery of the same body is an event.
func TestSlackURLVerification(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	store := newBoltStore(t)
	c := start(t, keysvc.Config{Store: store, Now: func() time.Time { return now },
		Secrets: map[signature.Provider][]string{signature.ProviderSlack: {"slack secret"}}})
	body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	sum := sha256.Sum256(body)
	hashKey := "sha256:" + hex.EncodeToString(sum[:])
	signed := signedHeaders(t, signature.ProviderSlack, "slack secret", now, body)
	named := map[string]string{"Idempotency-Key": "slack:named"}
	for k, v := range signed {
		named[k] = v
	}
	for _, path := range []string{"/v1/reservations?provider=slack", "/v1/reservations?provider=slack&lease=30s", "/v1/reservations?preset=slack"} {
		r := c.do("POST", path, body, signed)
		r.want(t, 200, "")
		if r.str("status") != "url_verification" || r.str("challenge") != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" || len(r.json) != 2 {
			t.Errorf("POST %s: %s, want the challenge echoed", path, r.body)
		}
	}
	if r := c.do("POST", "/v1/reservations?provider=slack", body, named); r.str("challenge") == "" {
		t.Errorf("with its key named: %d %s, want the challenge", r.status, r.body)
	}
	for _, key := range []string{hashKey, "slack:named"} {
		if _, err := store.Lookup(t.Context(), key); !errors.Is(err, keysvc.ErrNotFound) {
			t.Errorf("%s was reserved by a url_verification (%v)", key, err)
		}
	}
	// Forged: the check comes first.
	forged := signedHeaders(t, signature.ProviderSlack, "not the secret", now, body)
	c.do("POST", "/v1/reservations?provider=slack", body, forged).want(t, 401, "invalid_signature")
	// Not Slack's: an event like any other; a challenge that is not a string is no url_verification.
	if r := c.do("POST", "/v1/reservations", body, nil); r.status != 201 || r.str("key") != hashKey {
		t.Errorf("without the slack preset: %d %s, want 201 %s", r.status, r.body, hashKey)
	}
	numeric := []byte(`{"challenge":7,"type":"url_verification"}`)
	if r := c.do("POST", "/v1/reservations?preset=slack", numeric, nil); r.status != 201 {
		t.Errorf("a numeric challenge: %d %s, want 201", r.status, r.body)
	}
	// /v1/keys derives the key: it reserves nothing either way.
	if r := c.do("POST", "/v1/keys?preset=slack", body, nil); r.str("key") != hashKey {
		t.Errorf("POST /v1/keys: %s", r.body)
	}
}
