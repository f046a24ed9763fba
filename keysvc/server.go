package keysvc

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/idemhook/idemhook/signature"
)

// Config configures a Server.
type Config struct {
	Store Store
	// MaxBodyBytes bounds every request body; larger bodies get 413.
	// Default 1 MiB.
	MaxBodyBytes int64
	// Token, when set, is required as "Authorization: Bearer <Token>" on
	// every /v1 route (compared in constant time).
	Token string
	// MaxLease bounds ?lease=. Default 24h.
	MaxLease time.Duration
	// Secrets holds each provider's signing secrets for ?provider= (several
	// during a rotation). Never logged.
	Secrets map[signature.Provider][]string
	// SignatureTolerance bounds signed timestamps both ways; default 5m.
	SignatureTolerance time.Duration
	// Now is the clock for signature timestamps; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultMaxBodyBytes is the default body limit.
const DefaultMaxBodyBytes = 1 << 20

// Server is keysvc's HTTP handler.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	metrics *metrics
}

// route is one documented endpoint; openapi.json must list exactly these.
type route struct {
	Method string
	Path   string // OpenAPI form: /v1/reservations/{key}
	auth   bool
	handle func(s *Server, w http.ResponseWriter, r *http.Request)
}

var routes = []route{
	{http.MethodPost, "/v1/keys", true, (*Server).deriveKey},
	{http.MethodPost, "/v1/reservations", true, (*Server).reserve},
	{http.MethodGet, "/v1/reservations/{key}", true, (*Server).lookup},
	{http.MethodDelete, "/v1/reservations/{key}", true, (*Server).release},
	{http.MethodPost, "/v1/reservations/{key}/done", true, (*Server).markDone},
	{http.MethodPost, "/v1/verify", true, (*Server).verifyOnly},
	{http.MethodGet, "/openapi.json", false, (*Server).openAPI},
	{http.MethodGet, "/healthz", false, (*Server).healthz},
	{http.MethodGet, "/readyz", false, (*Server).readyz},
	{http.MethodGet, "/metrics", false, (*Server).serveMetrics},
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxLease <= 0 {
		cfg.MaxLease = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), metrics: newMetrics()}
	// Methods are dispatched here rather than in mux patterns so that a
	// wrong method gets a JSON 405 like every other error.
	byPath := map[string][]route{}
	var order []string
	for _, rt := range routes {
		if _, seen := byPath[rt.Path]; !seen {
			order = append(order, rt.Path)
		}
		byPath[rt.Path] = append(byPath[rt.Path], rt)
	}
	for _, path := range order {
		s.mux.Handle(path, s.dispatch(path, byPath[path]))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route; see /openapi.json")
	})
	return s
}

func (s *Server) dispatch(path string, rts []route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, rt := range rts {
			if rt.Method != r.Method {
				continue
			}
			if rt.auth && !s.authorized(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="keysvc"`)
				writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
			rt.handle(s, w, r)
			return
		}
		methods := make([]string, len(rts))
		for i, rt := range rts {
			methods[i] = rt.Method
		}
		w.Header().Set("Allow", strings.Join(methods, ", "))
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+path)
	})
}

func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// authorized compares the bearer token in constant time. Both sides are
// hashed first so that the comparison time does not reveal the length.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(prefix) || h[:len(prefix)] != prefix {
		return false
	}
	got := sha256.Sum256([]byte(h[len(prefix):]))
	want := sha256.Sum256([]byte(s.cfg.Token))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// ServeHTTP adds a request id, recovers from panics, records metrics and
// logs one line per request (never the body, the key or the token).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.Header.Get("X-Request-Id")
	if !requestIDPattern.MatchString(id) {
		id = newRequestID()
	}
	w.Header().Set("X-Request-Id", id)
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		pattern := r.Pattern // set by the mux when it routed the request
		if p := recover(); p != nil {
			s.cfg.Logger.Error("panic in handler", "request_id", id, "route", pattern, "panic", p)
			if !rec.wrote {
				writeError(rec, http.StatusInternalServerError, "internal", "internal error")
			}
		}
		elapsed := time.Since(start)
		s.metrics.observe(pattern, rec.status, elapsed)
		level := slog.LevelInfo
		if rec.status >= 500 {
			level = slog.LevelWarn
		}
		s.cfg.Logger.Log(r.Context(), level, "request", "request_id", id, "method", r.Method, "route", pattern,
			"status", rec.status, "duration_ms", float64(elapsed.Microseconds())/1000)
	}()
	s.mux.ServeHTTP(rec, r)
}

func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// apiError is the body of every error response.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Error: msg, Code: code})
}
