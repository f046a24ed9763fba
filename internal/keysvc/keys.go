package keysvc

import (
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
	key, source, err := s.requestKey(r, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, keyResponse{Key: key, Source: source})
	return nil
}

// requestKey returns the key of a request. With ?provider= it first
// verifies the provider's signature over the raw body (401 and nothing more
// when it fails). Then it takes the caller's own key (header or query, by
// the key rule) when allowed and given, else derives one from
// the body with ?preset= and ?scope= (the provider's preset by default).
func (s *Server) requestKey(r *http.Request, allowExplicit bool) (key, source string, err error) {
	q := r.URL.Query()
	provider, err := providerParam(r)
	if err != nil {
		return "", "", err
	}
	preset := eventkey.Preset(provider)
	if q.Has("preset") {
		if preset, err = eventkey.ParsePreset(q.Get("preset")); err != nil {
			return "", "", httpError(http.StatusBadRequest, "invalid_preset", "%v", err)
		}
	}
	scope := q.Get("scope")
	if err := preset.CheckScope(scope); err != nil {
		return "", "", httpError(http.StatusBadRequest, "invalid_scope", "%v", err)
	}
	// The bytes are needed to verify a signature, and a form's key needs
	// the whole form; a body that is only hashed is otherwise not kept.
	body, sum, err := s.readBodySummed(r, provider != "" || eventkey.IsMultipart(r.Header.Get("Content-Type")))
	if err != nil {
		return "", "", err
	}
	defer recycleBody(body) // the key returned is a decoded copy
	if err := providerBound(r, provider); err != nil {
		return "", "", err
	}
	if provider != "" {
		if err := s.verify(r, provider, body); err != nil {
			return "", "", err
		}
	}
	if allowExplicit {
		explicit, given, err := explicitKey(r, q)
		if err != nil {
			return "", "", err
		}
		if given {
			if tok := tokenOf(r); tok != nil && tok.Provider != "" {
				return "", "", httpError(http.StatusForbidden, "provider_bound", "this token reserves only the keys keysvc derives from deliveries it verified, never a key of its own")
			}
			return explicit, SourceExplicit, nil
		}
	}
	// The preset and scope passed CheckScope: an empty body is the only
	// error left.
	k, err := eventkey.DeriveForSummed(preset, r.Header, body, sum, scope)
	if err != nil {
		msg := err.Error()
		if allowExplicit {
			msg += " (or pass your own key in the " + KeyHeader + " header)"
		}
		return "", "", &statusError{Status: http.StatusBadRequest, Code: "empty_body", Msg: msg}
	}
	return k.Value, string(k.Source), nil
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
