package keysvc

import (
	"errors"
	"fmt"
	"net/http"
)

// handler serves one route: it writes a 2xx answer itself, or returns an
// error that Server.answer turns into the JSON error answer.
type handler func(s *Server, w http.ResponseWriter, r *http.Request) error

// statusError is an answer outside 2xx that the caller can act on: a status,
// a stable machine-readable code and a message that says what to change.
type statusError struct {
	Status     int
	Code       string
	Msg        string
	RetryAfter string // seconds, when set
}

func (e *statusError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Msg) }

func httpError(status int, code, format string, args ...any) *statusError {
	return &statusError{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// errNotFoundAnswer is ErrNotFound as an answer: the same words for a key
// that does not exist and for another tenant's, so neither is told apart.
var errNotFoundAnswer = &statusError{Status: http.StatusNotFound, Code: "not_found", Msg: ErrNotFound.Error()}

// answer writes err: a *statusError as it says, ErrNotFound as 404, and any
// other error as a store failure: 503 with Retry-After, never a 2xx that
// reserved nothing; the store's error is logged with the request id, never
// told to the caller.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, err error) {
	var he *statusError
	switch {
	case errors.As(err, &he):
	case errors.Is(err, ErrNotFound):
		he = errNotFoundAnswer
	default:
		s.metrics.storeError()
		s.cfg.Logger.Error("store unavailable", "request_id", w.Header().Get("X-Request-Id"), "route", r.URL.Path, "error", err)
		he = &statusError{Status: http.StatusServiceUnavailable, Code: "store_unavailable", Msg: "the reservation store is unavailable; retry later", RetryAfter: storeRetryAfter}
	}
	if he.RetryAfter != "" {
		w.Header().Set("Retry-After", he.RetryAfter)
	}
	writeError(w, he.Status, he.Code, he.Msg)
}
