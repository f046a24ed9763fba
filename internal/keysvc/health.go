package keysvc

import (
	_ "embed"
	"net/http"
)

//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the committed OpenAPI 3 document served at /openapi.json.
func OpenAPI() []byte { return openAPIDocument }

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDocument)
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz answers 503 while the store does not answer (through answer), and
// while it does not take writes (store_unwritable, see writeHealth).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	if err := s.cfg.Store.Ping(r.Context()); err != nil {
		return err
	}
	if err := s.writes.ready(r.Context(), s.cfg.Store); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}
