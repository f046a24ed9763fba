package keysvc

import (
	"io"
	"net/http"
	"strings"

	"github.com/idemhook/idemhook/signature"
)

// verifyOnly is POST /v1/verify?provider=: checks a delivery's signature
// as its body arrives, keeps none of it, and reserves nothing.
func (s *Server) verifyOnly(w http.ResponseWriter, r *http.Request) error {
	if !r.URL.Query().Has("provider") {
		return httpError(http.StatusBadRequest, "unknown_provider", "give ?provider= with %s", signature.Names())
	}
	provider, err := providerParam(r)
	if err != nil {
		return err
	}
	verifier, notConfigured := s.verifierOf(r, provider)
	if _, err := s.readBodyPlanned(r, keepNothing, writerOf(verifier)); err != nil {
		return err
	}
	if notConfigured != nil {
		return notConfigured
	}
	if err := s.checkVerifier(provider, verifier); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"valid": true})
	return nil
}

// verifierOf returns the Verifier of the request's signature under p, to
// hand the body to as it is read: nil without a provider, and nil with a
// 501 when no secret is configured for p.
func (s *Server) verifierOf(r *http.Request, p signature.Provider) (*signature.Verifier, error) {
	if p == "" {
		return nil, nil
	}
	secrets := s.cfg.Secrets[p]
	if len(secrets) == 0 {
		env := strings.ToUpper(string(p))
		return nil, httpError(http.StatusNotImplemented, "provider_not_configured", "no secret is configured for %s: set KEYSVC_SECRET_%s or KEYSVC_SECRET_%s_FILE", p, env, env)
	}
	return p.NewVerifier(r.Header, secrets, signature.Options{Tolerance: s.cfg.SignatureTolerance, Now: s.now()}), nil
}

// writerOf is v as readBodyPlanned's writer: nil for none.
func writerOf(v *signature.Verifier) io.Writer {
	if v == nil {
		return nil
	}
	return v
}

// checkVerifier decides v, given the whole body, and counts the outcome; a
// failure is a 401 whose code says why (signature.Code).
func (s *Server) checkVerifier(p signature.Provider, v *signature.Verifier) error {
	if err := v.Verify(); err != nil {
		code := signature.Code(err)
		s.metrics.verification(code)
		return &statusError{Status: http.StatusUnauthorized, Code: code, Msg: err.Error()}
	}
	s.metrics.verification("valid")
	return nil
}

// checkSignature verifies a body held whole (the inbox stores it) against
// secrets, as checkVerifier does.
func (s *Server) checkSignature(r *http.Request, p signature.Provider, secrets []string, body []byte) error {
	v := p.NewVerifier(r.Header, secrets, signature.Options{Tolerance: s.cfg.SignatureTolerance, Now: s.now()})
	_, _ = v.Write(body)
	return s.checkVerifier(p, v)
}
