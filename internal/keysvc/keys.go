package keysvc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/signature"
)

// Headers and query parameters of POST /v1/reservations.
const (
	// KeyHeader carries a key the caller already has (for example a
	// provider's delivery id); the query parameter "key" does the same.
	KeyHeader = "Idempotency-Key"
	// storeRetryAfter is the Retry-After of a 503: the provider retries.
	storeRetryAfter = "5"
)

// SourceExplicit marks a key the caller supplied instead of a body.
const SourceExplicit = "explicit"

type keyResponse struct {
	Key    string `json:"key"`
	Source string `json:"source"`
}

// deriveKey is POST /v1/keys: the key of a body, reserving nothing.
func (s *Server) deriveKey(w http.ResponseWriter, r *http.Request) error {
	req, err := s.requestKey(r, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, keyResponse{Key: req.key, Source: req.source})
	return nil
}

// requested is what a key or reservation request asks for: a key and its
// source, or, for Slack's url_verification, the challenge to answer.
type requested struct {
	key, source string
	// challenge is set for a delivery that is Slack's url_verification
	// (urlVerification): it is answered, and nothing is reserved.
	challenge *string
}

// requestKey returns the key of a request. With ?provider= it first
// verifies the provider's signature over the raw body (401 and nothing more
// when it fails). Then it takes the caller's own key (header or query, by
// the key rule) when allowed and given, else derives one from the body with
// ?preset= and ?scope= (the provider's preset by default). A reservation
// (allowExplicit) keyed by the slack preset or verified as Slack's that is
// Slack's url_verification asks for its challenge instead. It keeps no more
// of the body than that needs (bodyPlan): the signature is checked as the
// body arrives.
func (s *Server) requestKey(r *http.Request, allowExplicit bool) (requested, error) {
	q := r.URL.Query()
	provider, err := providerParam(r)
	if err != nil {
		return requested{}, err
	}
	preset := eventkey.Preset(provider)
	if q.Has("preset") {
		if preset, err = eventkey.ParsePreset(q.Get("preset")); err != nil {
			return requested{}, httpError(http.StatusBadRequest, "invalid_preset", "%v", err)
		}
	}
	scope := q.Get("scope")
	if err := preset.CheckScope(scope); err != nil {
		return requested{}, httpError(http.StatusBadRequest, "invalid_scope", "%v", err)
	}
	var explicit string
	var given bool
	var explicitErr error
	if allowExplicit {
		explicit, given, explicitErr = explicitKey(r, q)
	}
	slack := allowExplicit && (provider == signature.ProviderSlack || preset == eventkey.PresetSlack)
	verifier, notConfigured := s.verifierOf(r, provider)
	read, err := s.readBodyPlanned(r, planOf(r, given && explicitErr == nil, slack), writerOf(verifier))
	if err != nil {
		return requested{}, err
	}
	defer recycleBody(read.kept) // the key returned is a decoded copy
	if err := providerBound(r, provider); err != nil {
		return requested{}, err
	}
	if provider != "" {
		if notConfigured != nil {
			return requested{}, notConfigured
		}
		if err := s.checkVerifier(provider, verifier); err != nil {
			return requested{}, err
		}
	}
	if slack {
		if challenge, ok := urlVerification(read.kept); ok {
			return requested{challenge: &challenge}, nil
		}
	}
	if explicitErr != nil {
		return requested{}, explicitErr
	}
	if given {
		if tok := tokenOf(r); tok != nil && tok.Provider != "" {
			return requested{}, httpError(http.StatusForbidden, "provider_bound", "this token reserves only the keys keysvc derives from deliveries it verified, never a key of its own")
		}
		return requested{key: explicit, source: SourceExplicit}, nil
	}
	// The preset and scope passed CheckScope: an empty body is the only
	// error left.
	var k eventkey.Key
	if read.streamed != nil {
		k, err = eventkey.DeriveForStreamed(preset, r.Header, read.streamed, scope)
	} else {
		k, err = eventkey.DeriveForSummed(preset, r.Header, read.kept, read.sum, scope)
	}
	if err != nil {
		msg := err.Error()
		if allowExplicit {
			msg += " (or pass your own key in the " + KeyHeader + " header)"
		}
		return requested{}, &statusError{Status: http.StatusBadRequest, Code: "empty_body", Msg: msg}
	}
	return requested{key: k.Value, source: string(k.Source)}, nil
}

// planOf is what a key request keeps of its body: a request that names its
// key keeps nothing (a small object when it may be Slack's
// url_verification); else a multipart form keeps all of it (its key needs
// the whole form) and any other body what its key needs (keepObject).
func planOf(r *http.Request, named, slack bool) bodyPlan {
	switch {
	case named && slack:
		return keepSmallObject
	case named:
		return keepNothing
	case eventkey.IsMultipart(r.Header.Get("Content-Type")):
		return keepWhole
	}
	return keepObject
}

// urlVerification reports whether body is Slack's url_verification: a JSON
// object whose "type" is "url_verification" and whose "challenge" is a
// string, which Slack expects echoed when an Events API URL is saved. The
// members are read as JSON.parse reads them (the last of a name wins), the
// way the Idempotency Guard node reads them.
func urlVerification(body []byte) (string, bool) {
	if len(body) == 0 || len(body) > smallObjectBytes || !eventkey.IsObject(body) {
		return "", false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil || string(members["type"]) != `"url_verification"` {
		return "", false
	}
	var challenge string
	if json.Unmarshal(members["challenge"], &challenge) != nil || members["challenge"][0] != '"' {
		return "", false
	}
	return challenge, true
}

// providerBound is a 403 when the request's token is bound to a provider
// and the request does not ask keysvc to verify that provider's signature.
func providerBound(r *http.Request, provider signature.Provider) error {
	tok := tokenOf(r)
	if tok == nil || tok.Provider == "" || tok.Provider == provider {
		return nil
	}
	return httpError(http.StatusForbidden, "provider_bound", "this token reserves only deliveries whose %s signature keysvc verified: add ?provider=%s", tok.Provider, tok.Provider)
}

// providerParam parses ?provider=; "" when absent.
func providerParam(r *http.Request) (signature.Provider, error) {
	q := r.URL.Query()
	if !q.Has("provider") {
		return "", nil
	}
	p, err := signature.ParseProvider(q.Get("provider"))
	if err != nil {
		return "", httpError(http.StatusBadRequest, "unknown_provider", "%v", err)
	}
	return p, nil
}

// Answers about the keys a caller names.
var (
	// errInvalidKey is every route's answer to a key that breaks the key
	// rule (checkKey).
	errInvalidKey = &statusError{Status: http.StatusBadRequest, Code: "invalid_key",
		Msg: fmt.Sprintf("a key must be 1-%d bytes of UTF-8 with no control character, percent-encoded in a path or query", eventkey.MaxKeyBytes)}
	errConflictingKey = &statusError{Status: http.StatusBadRequest, Code: "conflicting_key",
		Msg: "the " + KeyHeader + " headers and key parameters name different keys"}
)

// checkKey is the key rule, the one check of every key a caller names (in
// the Idempotency-Key header, the key parameter or a path): 1 to
// eventkey.MaxKeyBytes bytes of valid UTF-8 with no control character. The
// limit is the longest key keysvc derives, so any key it answers can be
// passed back, and one key gets one answer on every route.
func checkKey(key string) error {
	if !eventkey.ValidKey(key) {
		return errInvalidKey
	}
	return nil
}

// explicitKey returns the caller's own key: every Idempotency-Key header and
// key parameter present, even empty, is a key the rule judges (an empty one
// is an error, never a reason to derive the body's key), and all must name
// the same key. given is false when there is none.
func explicitKey(r *http.Request, q url.Values) (key string, given bool, err error) {
	keys := slices.Concat(r.Header.Values(KeyHeader), q["key"])
	if len(keys) == 0 {
		return "", false, nil
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return "", true, err
		}
	}
	for _, k := range keys[1:] {
		if k != keys[0] {
			return "", true, errConflictingKey
		}
	}
	return keys[0], true, nil
}

// pathKey returns the {key} path segment, percent-decoded and validated.
func pathKey(r *http.Request) (string, error) {
	key := r.PathValue("key")
	if err := checkKey(key); err != nil {
		return "", err
	}
	return key, nil
}
