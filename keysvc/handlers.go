package keysvc

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// maxKeyBytes bounds keys in paths: "evt:" and a 255-byte id.
const maxKeyBytes = len(eventkey.EventIDPrefix) + eventkey.MaxIDBytes

// readBody reads the request body, answering 413 when it is over the limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body is larger than %d bytes", s.cfg.MaxBodyBytes))
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "bad_body", "could not read the body: "+err.Error())
		return nil, false
	}
	return body, true
}

type keyResponse struct {
	Key    string `json:"key"`
	Source string `json:"source"`
}

func (s *Server) deriveKey(w http.ResponseWriter, r *http.Request) {
	key, source, ok := s.requestKey(w, r, false)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, keyResponse{Key: key, Source: source})
}

type reservationResponse struct {
	Key        string     `json:"key"`
	Reserved   bool       `json:"reserved"`
	Source     string     `json:"source,omitempty"`
	State      string     `json:"state,omitempty"`
	FirstSeen  *time.Time `json:"first_seen,omitempty"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	Attempt    int        `json:"attempt,omitempty"`
}

// SourceExplicit marks a key the caller supplied instead of a body.
const SourceExplicit = "explicit"

func (s *Server) reserve(w http.ResponseWriter, r *http.Request) {
	lease, hasLease, ok := s.leaseParam(w, r)
	if !ok {
		return
	}
	key, source, ok := s.requestKey(w, r, true)
	if !ok {
		return
	}
	if !hasLease {
		res, reserved, err := s.cfg.Store.Reserve(r.Context(), key)
		if err != nil {
			s.storeFailed(w, r, err)
			return
		}
		if reserved {
			s.metrics.reservation("new")
			writeJSON(w, http.StatusCreated, reservationResponse{Key: key, Reserved: true, Source: source})
			return
		}
		s.metrics.reservation("duplicate")
		writeJSON(w, http.StatusOK, reservationResponse{Key: key, Reserved: false, Source: source, State: res.State, FirstSeen: timePtr(res.FirstSeen)})
		return
	}

	res, outcome, err := s.cfg.Store.AcquireLease(r.Context(), key, lease)
	if errors.Is(err, ErrLeaseUnsupported) {
		writeError(w, http.StatusNotImplemented, "lease_unsupported", err.Error())
		return
	}
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	switch outcome {
	case Acquired:
		s.metrics.reservation("new")
		writeJSON(w, http.StatusCreated, reservationResponse{Key: key, Reserved: true, Source: source, State: StateProcessing,
			LeaseUntil: timePtr(res.LeaseUntil), Attempt: res.Attempt})
	case Done:
		s.metrics.reservation("duplicate")
		writeJSON(w, http.StatusOK, reservationResponse{Key: key, Reserved: false, Source: source, State: StateDone, FirstSeen: timePtr(res.FirstSeen)})
	default:
		s.metrics.reservation("in_progress")
		wait := time.Until(res.LeaseUntil)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		writeError(w, http.StatusConflict, "in_progress", "another attempt holds the lease on this key; retry later")
	}
}

// requestKey returns the key of a request. With ?provider= it first
// verifies the provider's signature over the raw body (401 and nothing more
// when it fails). Then it takes the caller's own key (header or query,
// validated like an event id) when allowed and given, else derives one from
// the body with ?preset= and ?scope= (the provider's preset by default).
func (s *Server) requestKey(w http.ResponseWriter, r *http.Request, allowExplicit bool) (key, source string, ok bool) {
	q := r.URL.Query()
	provider, ok := s.providerParam(w, r)
	if !ok {
		return "", "", false
	}
	preset := eventkey.Preset(provider)
	if q.Has("preset") {
		p, err := eventkey.ParsePreset(q.Get("preset"))
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_preset", err.Error())
			return "", "", false
		}
		preset = p
	}
	scope := q.Get("scope")
	if err := preset.CheckScope(scope); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_scope", err.Error())
		return "", "", false
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return "", "", false
	}
	if provider != "" && !s.verify(w, r, provider, body) {
		return "", "", false
	}
	if allowExplicit {
		fromHeader, fromQuery := r.Header.Get(KeyHeader), q.Get("key")
		explicit := fromHeader
		switch {
		case fromHeader != "" && fromQuery != "" && fromHeader != fromQuery:
			writeError(w, http.StatusBadRequest, "conflicting_key", "the "+KeyHeader+" header and the key parameter differ")
			return "", "", false
		case fromHeader == "":
			explicit = fromQuery
		}
		if explicit != "" || q.Has("key") {
			if !eventkey.ValidID(explicit) {
				writeError(w, http.StatusBadRequest, "invalid_key", fmt.Sprintf("a caller's key must be 1-%d bytes of UTF-8 with no control character", eventkey.MaxIDBytes))
				return "", "", false
			}
			return explicit, SourceExplicit, true
		}
	}
	// The preset and scope passed CheckScope: an empty body is the only
	// error left.
	k, err := eventkey.DeriveFor(preset, r.Header, body, scope)
	if err != nil {
		msg := err.Error()
		if allowExplicit {
			msg += " (or pass your own key in the " + KeyHeader + " header)"
		}
		writeError(w, http.StatusBadRequest, "empty_body", msg)
		return "", "", false
	}
	return k.Value, string(k.Source), true
}

// providerParam parses ?provider=; "" when absent.
func (s *Server) providerParam(w http.ResponseWriter, r *http.Request) (signature.Provider, bool) {
	q := r.URL.Query()
	if !q.Has("provider") {
		return "", true
	}
	p, err := signature.ParseProvider(q.Get("provider"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "unknown_provider", err.Error())
		return "", false
	}
	return p, true
}

// verify checks the provider's signature on the raw body, answering 401
// with the reason (or 501 when no secret is configured) when it fails.
func (s *Server) verify(w http.ResponseWriter, r *http.Request, p signature.Provider, body []byte) bool {
	secrets := s.cfg.Secrets[p]
	if len(secrets) == 0 {
		writeError(w, http.StatusNotImplemented, "provider_not_configured",
			fmt.Sprintf("no secret is configured for %s: set KEYSVC_SECRET_%s or KEYSVC_SECRET_%s_FILE", p, strings.ToUpper(string(p)), strings.ToUpper(string(p))))
		return false
	}
	err := p.Verify(r.Header, body, secrets, signature.Options{Tolerance: s.cfg.SignatureTolerance, Now: s.now()})
	if err == nil {
		s.metrics.verification("valid")
		return true
	}
	code := signature.Code(err)
	s.metrics.verification(code)
	writeError(w, http.StatusUnauthorized, code, err.Error())
	return false
}

func (s *Server) verifyOnly(w http.ResponseWriter, r *http.Request) {
	if !r.URL.Query().Has("provider") {
		writeError(w, http.StatusBadRequest, "unknown_provider", "give ?provider=stripe|standardwebhooks|github|shopify|slack")
		return
	}
	provider, ok := s.providerParam(w, r)
	if !ok {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	if s.verify(w, r, provider, body) {
		writeJSON(w, http.StatusOK, map[string]bool{"valid": true})
	}
}

// leaseParam parses ?lease=: a Go duration ("90s", "5m") or whole seconds.
func (s *Server) leaseParam(w http.ResponseWriter, r *http.Request) (time.Duration, bool, bool) {
	q := r.URL.Query()
	if !q.Has("lease") {
		return 0, false, true
	}
	raw := q.Get("lease")
	d, err := time.ParseDuration(raw)
	if err != nil {
		n, nerr := strconv.Atoi(raw)
		d, err = time.Duration(n)*time.Second, nerr
	}
	if err != nil || d < time.Second || d > s.cfg.MaxLease {
		writeError(w, http.StatusBadRequest, "invalid_lease", fmt.Sprintf("lease must be a duration between 1s and %s, such as 90s or 5m", s.cfg.MaxLease))
		return 0, false, false
	}
	return d.Truncate(time.Second), true, true
}

// pathKey returns the {key} path segment, percent-decoded and validated.
func pathKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	key := r.PathValue("key")
	valid := key != "" && len(key) <= maxKeyBytes && utf8.ValidString(key) &&
		!strings.ContainsFunc(key, func(c rune) bool { return c < 0x20 || c == 0x7f })
	if !valid {
		writeError(w, http.StatusBadRequest, "invalid_key", fmt.Sprintf("the key must be 1-%d bytes of UTF-8 with no control character, percent-encoded in the path", maxKeyBytes))
		return "", false
	}
	return key, true
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	s.onKey(w, r, func(key string) error {
		res, err := s.cfg.Store.Lookup(r.Context(), key)
		if err == nil {
			writeJSON(w, http.StatusOK, reservationView(res))
		}
		return err
	})
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	s.onKey(w, r, func(key string) error {
		err := s.cfg.Store.Release(r.Context(), key)
		if err == nil {
			w.WriteHeader(http.StatusNoContent)
		}
		return err
	})
}

func (s *Server) markDone(w http.ResponseWriter, r *http.Request) {
	s.onKey(w, r, func(key string) error {
		res, err := s.cfg.Store.MarkDone(r.Context(), key)
		if err == nil {
			writeJSON(w, http.StatusOK, reservationView(res))
		}
		return err
	})
}

// onKey runs a store operation on the {key} of the path; op answers on
// success, onKey answers 400, 404 or 503 otherwise.
func (s *Server) onKey(w http.ResponseWriter, r *http.Request, op func(key string) error) {
	key, ok := pathKey(w, r)
	if !ok {
		return
	}
	switch err := op(key); {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", ErrNotFound.Error())
	case err != nil:
		s.storeFailed(w, r, err)
	}
}

func reservationView(res Reservation) reservationResponse {
	out := reservationResponse{Key: res.Key, Reserved: true, State: res.State, FirstSeen: timePtr(res.FirstSeen)}
	if res.State == StateProcessing {
		out.LeaseUntil, out.Attempt = timePtr(res.LeaseUntil), res.Attempt
	}
	return out
}

// storeFailed answers 503 with Retry-After: never a 2xx that reserved
// nothing. The error is logged without the key.
func (s *Server) storeFailed(w http.ResponseWriter, r *http.Request, err error) {
	s.metrics.storeError()
	s.cfg.Logger.Error("store unavailable", "request_id", w.Header().Get("X-Request-Id"), "route", r.URL.Path, "error", err)
	w.Header().Set("Retry-After", storeRetryAfter)
	writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the reservation store is unavailable; retry later")
}

//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the committed OpenAPI 3 document served at /openapi.json.
func OpenAPI() []byte { return openAPIDocument }

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDocument)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Store.Ping(r.Context()); err != nil {
		s.storeFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
