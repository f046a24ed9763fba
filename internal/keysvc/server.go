package keysvc

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc/console"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/planner"
	"github.com/idemhook/idemhook/signature"
)

// Config configures a Server.
type Config struct {
	Store Store
	// MaxBodyBytes bounds every request body; larger bodies get 413.
	// Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Token, when set, is one admin token (KEYSVC_TOKEN) for every /v1
	// route; Tokens adds scoped and tenant tokens (--tokens-file). With
	// neither, nothing is authenticated (keysvc refuses that on a public
	// address unless told --insecure-no-auth).
	Token  string
	Tokens *Tokens
	// SignatureAuth accepts POST /v1/keys and /v1/reservations without a
	// token when they name ?provider= and its signature verifies.
	SignatureAuth bool
	// ProtectMetrics puts /metrics behind the admin scope.
	ProtectMetrics bool
	// RateLimit bounds each client's requests (zero: none); over it, 429
	// with Retry-After.
	RateLimit RateLimit
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
	// Inbox serves /v1/inbox and the console's inbox views (nil: those
	// routes answer 501).
	Inbox *inbox.Inbox
	// Pattern serves the console's views of the n8n inbox pattern's
	// tables (nil: those routes answer 501).
	Pattern *console.Pattern
	// HideBodies hides the inbox's bodies from every token, admin too
	// (--console-bodies=false); otherwise admin tokens may read them.
	HideBodies bool
	// LogSample logs one request line in LogSample (default 1: every
	// request); a request answered 5xx is always logged, and so is every
	// error keysvc meets.
	LogSample int
}

// DefaultMaxBodyBytes is the default body limit: 16 MiB, n8n's own limit
// (N8N_PAYLOAD_SIZE_MAX), so that every delivery n8n accepts can be
// verified and keyed. A signature is checked, and a key derived, as the
// body arrives: only a multipart form (keyed by its whole form) and a body
// the inbox stores are held whole, and a JSON object up to 1 MiB (bodyPlan).
const DefaultMaxBodyBytes = 16 << 20

// Server is keysvc's HTTP handler.
type Server struct {
	cfg     Config
	paths   []apiPath      // the routes' paths, matched as sent
	mux     *http.ServeMux // the planner page only
	metrics *metrics
	logged  atomic.Uint64 // requests seen, for LogSample
	tokens  atomic.Pointer[Tokens]
	limiter *clientLimiter // nil without a rate limit
	// writes is whether the store took its last write (/readyz); the
	// handlers' store (cfg.Store) reports to it.
	writes *writeHealth
	// embedded is the store when it is the embedded one (its backup and
	// file size), else nil.
	embedded *BoltStore
}

// route is one documented endpoint; openapi.json must list exactly these.
type route struct {
	Method string
	Path   string // OpenAPI form: /v1/reservations/{key}
	// scopes are what the bearer token must allow, any of them (admin
	// allows every route; none: an open route); bySignature routes also
	// let a valid provider signature in instead.
	scopes      []Scope
	bySignature bool
	handle      handler
}

// Who may use a route.
var (
	openRoute = []Scope(nil)
	anyToken  = []Scope{ScopeReserve, ScopeGuard, ScopeRead}
	reserving = []Scope{ScopeReserve, ScopeGuard}
	reserver  = []Scope{ScopeReserve}
	guard     = []Scope{ScopeGuard}
	reader    = []Scope{ScopeRead}
	admin     = []Scope{ScopeAdmin}
)

var routes = []route{
	{http.MethodPost, "/v1/keys", reserver, true, (*Server).deriveKey},
	{http.MethodPost, "/v1/reservations", reserving, true, (*Server).reserve},
	{http.MethodGet, "/v1/reservations/{key}", reserver, false, (*Server).lookup},
	{http.MethodDelete, "/v1/reservations/{key}", guard, false, (*Server).release},
	{http.MethodPost, "/v1/reservations/{key}/done", guard, false, (*Server).markDone},
	{http.MethodPost, "/v1/verify", reserver, false, (*Server).verifyOnly},
	{http.MethodGet, "/v1/token", anyToken, false, (*Server).whoAmI},
	{http.MethodGet, "/v1/backup", admin, false, (*Server).backup},
	{http.MethodPost, "/v1/inbox/{endpoint}", reserver, true, (*Server).inboxReceive},
	{http.MethodGet, "/v1/inbox/{endpoint}/{id}", admin, false, (*Server).inboxEntry},
	{http.MethodPost, "/v1/inbox/{endpoint}/{id}/replay", admin, false, (*Server).inboxReplay},
	{http.MethodGet, "/v1/console", reader, false, (*Server).consoleSession},
	{http.MethodGet, "/v1/console/inbox", reader, false, consoleInboxSummary},
	{http.MethodGet, "/v1/console/inbox/entries", reader, false, consoleInboxEntries},
	{http.MethodGet, "/v1/console/inbox/entries/{id}", reader, false, consoleInboxEntry},
	{http.MethodGet, "/v1/console/inbox/entries/{id}/body", admin, false, (*Server).consoleInboxBody},
	{http.MethodPost, "/v1/console/inbox/replay", admin, false, consoleInboxAction(inbox.ActionReplay)},
	{http.MethodPost, "/v1/console/inbox/retry", admin, false, consoleInboxAction(inbox.ActionRetryNow)},
	{http.MethodGet, "/v1/console/pattern", reader, false, consolePatternSummary},
	{http.MethodGet, "/v1/console/pattern/events", reader, false, consolePatternEvents},
	{http.MethodGet, "/v1/console/pattern/tasks", reader, false, consolePatternTasks},
	{http.MethodPost, "/v1/console/pattern/events/retry", admin, false, consolePatternRetry(console.ListEvents)},
	{http.MethodPost, "/v1/console/pattern/tasks/retry", admin, false, consolePatternRetry(console.ListTasks)},
	{http.MethodGet, "/console/", openRoute, false, (*Server).consolePage},
	{http.MethodGet, "/console/{file}", openRoute, false, (*Server).consoleFile},
	{http.MethodGet, "/openapi.json", openRoute, false, (*Server).openAPI},
	{http.MethodGet, "/healthz", openRoute, false, (*Server).healthz},
	{http.MethodGet, "/readyz", openRoute, false, (*Server).readyz},
	{http.MethodGet, "/metrics", openRoute, false, (*Server).serveMetrics},
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
	s := &Server{cfg: cfg, mux: http.NewServeMux(), metrics: newMetrics(), writes: &writeHealth{logger: cfg.Logger}}
	if bolt, ok := cfg.Store.(*BoltStore); ok {
		s.embedded = bolt
		s.metrics.watchFile(bolt.Path())
		s.writes.recheck = boltRecheck
	}
	s.cfg.Store = watchedStore{Store: cfg.Store, health: s.writes}
	s.metrics.watchWrites(s.writes)
	tokens := cfg.Tokens
	if cfg.Token != "" {
		tokens = FullToken(cfg.Token).Merge(tokens)
	}
	s.tokens.Store(tokens)
	if cfg.RateLimit.Rate > 0 {
		s.limiter = newClientLimiter(cfg.RateLimit)
	}
	if cfg.Inbox != nil {
		s.metrics.registry.MustRegister(cfg.Inbox.Collectors()...)
	}
	if cfg.Pattern != nil {
		s.metrics.registry.MustRegister(cfg.Pattern.Collectors()...)
	}
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
		s.paths = append(s.paths, apiPath{pattern: path, segments: strings.Split(path, "/"), handler: s.dispatch(path, byPath[path])})
	}
	// The planner page (static, no data, no token) lives under /planner/,
	// where its relative file names resolve; / sends browsers there.
	s.mux.Handle("GET /{$}", http.RedirectHandler("/planner/", http.StatusFound))
	s.mux.Handle("GET /planner/", planner.Handler("/planner/"))
	s.mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusFound))
	s.mux.HandleFunc("/", noRoute)
	return s
}

func noRoute(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotFound, "not_found", "no such route; see /openapi.json")
}

// apiPath is the path of one or more routes, split at its slashes: each
// segment a literal or a {name} that takes one segment of the request's.
type apiPath struct {
	pattern  string
	segments []string
	handler  http.Handler
}

// route serves r by the route its path names, as sent: split at the
// slashes of the escaped path, each segment percent-decoded (so a %2F stays
// in its segment, and a key "." or ".." or "" is a key). ServeMux would
// clean the path first, into a redirect (HTML) to another route; here an
// unclean path is no route, a JSON 404. Only /, /console (a redirect to
// the console's page) and the planner page go to the mux.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if p, values, ok := s.match(r.URL.EscapedPath()); ok {
		r.Pattern = p.pattern
		for name, v := range values {
			r.SetPathValue(name, v)
		}
		p.handler.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/" || r.URL.Path == "/console" || strings.HasPrefix(r.URL.Path, "/planner") {
		s.mux.ServeHTTP(w, r)
		return
	}
	noRoute(w, r)
}

// match returns the apiPath of escaped and the decoded value of each of its
// {name} segments.
func (s *Server) match(escaped string) (*apiPath, map[string]string, bool) {
	segments := strings.Split(escaped, "/")
	for i, seg := range segments {
		// EscapedPath is always valid: this fails only for a Request
		// built by hand, whose path is then no route.
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return nil, nil, false
		}
		segments[i] = dec
	}
next:
	for i := range s.paths {
		p := &s.paths[i]
		if len(p.segments) != len(segments) {
			continue
		}
		var values map[string]string
		for j, want := range p.segments {
			name, wild := strings.CutPrefix(want, "{")
			if !wild {
				if segments[j] != want {
					continue next
				}
				continue
			}
			if values == nil {
				values = map[string]string{}
			}
			values[strings.TrimSuffix(name, "}")] = segments[j]
		}
		return p, values, true
	}
	return nil, nil, false
}

func (s *Server) dispatch(path string, rts []route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, rt := range rts {
			if rt.Method != r.Method {
				continue
			}
			// url.Values drops a pair it cannot decode: "?key=%ZZ" would
			// reserve the body's key instead of the caller's.
			if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
				writeError(w, http.StatusBadRequest, "invalid_query", "the query string does not decode: "+err.Error()+"; percent-encode it")
				return
			}
			need := rt.scopes
			if rt.Path == "/metrics" && s.cfg.ProtectMetrics {
				need = admin
			}
			authed, err := s.authenticate(r, need)
			var lacking *scopeError
			switch {
			case err == nil:
				r = authed
			case errors.Is(err, errNoToken) && rt.bySignature && s.signatureMayAuthenticate(r):
				// The handler verifies the provider's signature before
				// anything else, and answers 401 when it fails.
			case errors.Is(err, errNoToken):
				s.metrics.authFailure("unauthenticated")
				w.Header().Set("WWW-Authenticate", `Bearer realm="keysvc", scope="`+scopeList(need)+`"`)
				writeError(w, http.StatusUnauthorized, "unauthorized", "this route needs a bearer token with "+describeScopes(need))
				return
			case errors.As(err, &lacking):
				s.metrics.authFailure("forbidden")
				writeError(w, http.StatusForbidden, "forbidden", lacking.Error())
				return
			}
			if r.ContentLength > s.cfg.MaxBodyBytes {
				// Said before it is sent: answered before it is read (a
				// client that asked for 100-continue sends none of it).
				s.answer(w, r, s.tooLarge())
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
			if err := rt.handle(s, w, r); err != nil {
				s.answer(w, r, err)
			}
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

// signatureMayAuthenticate reports whether a request without a token may
// go on to its handler, which will verify a provider's signature first: an
// inbox endpoint that has a provider, or (with SignatureAuth) a key or
// reservation request that names one.
func (s *Server) signatureMayAuthenticate(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, "/v1/inbox/") {
		if s.cfg.Inbox == nil {
			return true // answered 501
		}
		e, ok := s.cfg.Inbox.Endpoint(r.PathValue("endpoint"))
		return !ok || e.Provider != "" // unknown: 404, not 401
	}
	return s.cfg.SignatureAuth && r.URL.Query().Get("provider") != ""
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
	// The handlers see a copy whose Body counts what they read: net/http
	// keeps judging the connection by the body it gave (a body left
	// unread closes it), and finishBody reads what they left.
	body := &countedBody{ReadCloser: r.Body}
	r = r.WithContext(r.Context())
	r.Body = body
	// HTTP/1: let finishBody read the body after the answer is sent
	// (net/http otherwise gives up on a body over 256 KiB when the answer
	// starts). HTTP/2 always can, and says so with an error.
	_ = http.NewResponseController(w).EnableFullDuplex()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	defer s.finishBody(w, r, body)
	if !s.limit(rec, r) {
		s.metrics.observe("rate_limited", rec.status, time.Since(start))
		return
	}
	defer func() {
		pattern := r.Pattern // set by route, or the mux, when it routed the request
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
		} else if s.cfg.LogSample > 1 && s.logged.Add(1)%uint64(s.cfg.LogSample) != 0 {
			return
		}
		s.cfg.Logger.Log(r.Context(), level, "request", "request_id", id, "method", r.Method, "route", pattern,
			"status", rec.status, "duration_ms", float64(elapsed.Microseconds())/1000)
	}()
	s.route(rec, r)
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
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Error: msg, Code: code})
}
