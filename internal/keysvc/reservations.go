package keysvc

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"
)

type reservationResponse struct {
	Key        string     `json:"key"`
	Reserved   bool       `json:"reserved"`
	Source     string     `json:"source,omitempty"`
	State      string     `json:"state,omitempty"`
	FirstSeen  *time.Time `json:"first_seen,omitempty"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	Attempt    int        `json:"attempt,omitempty"`
}

// urlVerificationResponse answers Slack's url_verification: Slack accepts a
// JSON body with its challenge.
type urlVerificationResponse struct {
	Status    string `json:"status"`
	Challenge string `json:"challenge"`
}

// reserve is POST /v1/reservations: 201 for a new key, 200 for a
// duplicate; with ?lease=, 409 while another attempt holds the lease. A
// delivery keyed with the slack preset or verified as Slack's that is
// Slack's url_verification is answered 200 with its challenge, and nothing
// is reserved.
func (s *Server) reserve(w http.ResponseWriter, r *http.Request) error {
	lease, hasLease, err := s.leaseParam(r)
	if err != nil {
		return err
	}
	req, err := s.requestKey(r, true)
	if err != nil {
		return err
	}
	if req.challenge != nil {
		// Slack checks the URL: echo its challenge, reserve nothing.
		writeJSON(w, http.StatusOK, urlVerificationResponse{Status: "url_verification", Challenge: *req.challenge})
		return nil
	}
	key, source := req.key, req.source
	if !hasLease {
		res, reserved, err := s.cfg.Store.Reserve(r.Context(), storedKey(r, key))
		if err != nil {
			return err
		}
		if reserved {
			s.metrics.reservation("new")
			writeJSON(w, http.StatusCreated, reservationResponse{Key: key, Reserved: true, Source: source})
			return nil
		}
		s.metrics.reservation("duplicate")
		writeJSON(w, http.StatusOK, reservationResponse{Key: key, Reserved: false, Source: source, State: res.State, FirstSeen: timePtr(res.FirstSeen)})
		return nil
	}

	res, outcome, err := s.cfg.Store.AcquireLease(r.Context(), storedKey(r, key), lease)
	if errors.Is(err, ErrLeaseUnsupported) {
		return httpError(http.StatusNotImplemented, "lease_unsupported", "%v", err)
	}
	if err != nil {
		return err
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
		return &statusError{Status: http.StatusConflict, Code: "in_progress", Msg: "another attempt holds the lease on this key; retry later",
			RetryAfter: strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))}
	}
	return nil
}

// leaseParam parses ?lease=: a Go duration ("90s", "5m") or whole seconds.
func (s *Server) leaseParam(r *http.Request) (d time.Duration, given bool, err error) {
	q := r.URL.Query()
	if !q.Has("lease") {
		return 0, false, nil
	}
	raw := q.Get("lease")
	d, err = time.ParseDuration(raw)
	if err != nil {
		n, nerr := strconv.Atoi(raw)
		d, err = time.Duration(n)*time.Second, nerr
	}
	if err != nil || d < time.Second || d > s.cfg.MaxLease {
		return 0, false, httpError(http.StatusBadRequest, "invalid_lease", "lease must be a duration between 1s and %s, such as 90s or 5m", s.cfg.MaxLease)
	}
	return d.Truncate(time.Second), true, nil
}

// lookup is GET /v1/reservations/{key}.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) error {
	key, err := pathKey(r)
	if err != nil {
		return err
	}
	res, err := s.cfg.Store.Lookup(r.Context(), storedKey(r, key))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, reservationView(key, res))
	return nil
}

// release is DELETE /v1/reservations/{key}.
func (s *Server) release(w http.ResponseWriter, r *http.Request) error {
	key, err := pathKey(r)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.Release(r.Context(), storedKey(r, key)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// markDone is POST /v1/reservations/{key}/done.
func (s *Server) markDone(w http.ResponseWriter, r *http.Request) error {
	key, err := pathKey(r)
	if err != nil {
		return err
	}
	res, err := s.cfg.Store.MarkDone(r.Context(), storedKey(r, key))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, reservationView(key, res))
	return nil
}

// reservationView answers res, the reservation of key (as the caller
// named it: a tenant's token never sees its prefix).
func reservationView(key string, res Reservation) reservationResponse {
	out := reservationResponse{Key: key, Reserved: true, State: res.State, FirstSeen: timePtr(res.FirstSeen)}
	if res.State == StateProcessing {
		out.LeaseUntil, out.Attempt = timePtr(res.LeaseUntil), res.Attempt
	}
	return out
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
