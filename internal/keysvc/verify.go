package keysvc

import (
	"net/http"
	"strings"

	"github.com/idemhook/idemhook/signature"
)

// verifyOnly is POST /v1/verify?provider=: checks a delivery's signature
// and reserves nothing.
func (s *Server) verifyOnly(w http.ResponseWriter, r *http.Request) error {
	if !r.URL.Query().Has("provider") {
		return httpError(http.StatusBadRequest, "unknown_provider", "give ?provider= with %s", signature.Names())
	}
	provider, err := providerParam(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(r)
	if err != nil {
		return err
	}
	defer recycleBody(body) // the check only reads it
	if err := s.verify(r, provider, body); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"valid": true})
	return nil
}

// verify checks the provider's signature on the raw body: a 401 with the
// reason when it fails, a 501 when no secret is configured.
func (s *Server) verify(r *http.Request, p signature.Provider, body []byte) error {
	secrets := s.cfg.Secrets[p]
	if len(secrets) == 0 {
		env := strings.ToUpper(string(p))
		return httpError(http.StatusNotImplemented, "provider_not_configured", "no secret is configured for %s: set KEYSVC_SECRET_%s or KEYSVC_SECRET_%s_FILE", p, env, env)
	}
	return s.checkSignature(r, p, secrets, body)
}

// checkSignature verifies body against secrets and counts the outcome; a
// failure is a 401 whose code says why (signature.Code).
func (s *Server) checkSignature(r *http.Request, p signature.Provider, secrets []string, body []byte) error {
	err := p.Verify(r.Header, body, secrets, signature.Options{Tolerance: s.cfg.SignatureTolerance, Now: s.now()})
	if err != nil {
		code := signature.Code(err)
		s.metrics.verification(code)
		return &statusError{Status: http.StatusUnauthorized, Code: code, Msg: err.Error()}
	}
	s.metrics.verification("valid")
	return nil
}
