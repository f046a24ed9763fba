package keysvc

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/signature"
)

// inboxEndpoint returns the {endpoint} of the path: a 501 when keysvc has
// no inbox, a 404 when the endpoint is unknown.
func (s *Server) inboxEndpoint(r *http.Request) (*inbox.Endpoint, error) {
	if s.cfg.Inbox == nil {
		return nil, httpError(http.StatusNotImplemented, "inbox_unavailable",
			"the inbox needs PostgreSQL and endpoints: start keysvc with DATABASE_URL and --endpoints FILE")
	}
	e, ok := s.cfg.Inbox.Endpoint(r.PathValue("endpoint"))
	// A tenant's token sees no inbox: the inbox is the operator's.
	if tok := tokenOf(r); !ok || (tok != nil && tok.Prefix != "") {
		return nil, httpError(http.StatusNotFound, "unknown_endpoint", "%v", inbox.ErrUnknownEndpoint)
	}
	return e, nil
}

// inboxReceive is POST /v1/inbox/{endpoint}: verify, save and enqueue in one
// transaction, answer 200 after the commit. An endpoint with a provider is
// authenticated by its signature; one without needs the bearer token. On a
// slack endpoint, Slack's url_verification is answered 200 with its
// challenge, and nothing is saved.
func (s *Server) inboxReceive(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	e, err := s.inboxEndpoint(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(r)
	if err != nil {
		return err
	}
	defer recycleBody(body) // Receive copies it into its statement
	if len(body) == 0 {
		return httpError(http.StatusBadRequest, "empty_body", "empty body: there is nothing to save")
	}
	if e.Provider != "" {
		if err := s.checkSignature(r, e.Provider, e.Secrets(), body); err != nil {
			return err
		}
	}
	// Slack checks an Events API URL before it sends events there: the
	// check is answered its challenge and saved nowhere.
	if e.Provider == signature.ProviderSlack {
		if challenge, ok := urlVerification(body); ok {
			writeJSON(w, http.StatusOK, urlVerificationResponse{Status: "url_verification", Challenge: challenge})
			return nil
		}
	}
	receipt, err := s.cfg.Inbox.Receive(r.Context(), e, r.Header, body)
	if err != nil {
		return err
	}
	s.metrics.inboxAck.Observe(time.Since(start).Seconds())
	writeJSON(w, http.StatusOK, receipt)
	return nil
}

// inboxEntryParams returns the endpoint and the {id} of the path.
func (s *Server) inboxEntryParams(r *http.Request) (*inbox.Endpoint, int64, error) {
	e, err := s.inboxEndpoint(r)
	if err != nil {
		return nil, 0, err
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return nil, 0, httpError(http.StatusBadRequest, "invalid_id", "the entry id is the positive integer inbox_id of the receipt")
	}
	return e, id, nil
}

func noEntry(id int64) error {
	return httpError(http.StatusNotFound, "not_found", "no entry %d on this endpoint", id)
}

// inboxEntry is GET /v1/inbox/{endpoint}/{id}.
func (s *Server) inboxEntry(w http.ResponseWriter, r *http.Request) error {
	e, id, err := s.inboxEntryParams(r)
	if err != nil {
		return err
	}
	entry, err := s.cfg.Inbox.Entry(r.Context(), e.Name, id)
	if errors.Is(err, inbox.ErrNotFound) {
		return noEntry(id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, entry)
	return nil
}

// inboxReplay is POST /v1/inbox/{endpoint}/{id}/replay.
func (s *Server) inboxReplay(w http.ResponseWriter, r *http.Request) error {
	e, id, err := s.inboxEntryParams(r)
	if err != nil {
		return err
	}
	switch err := s.cfg.Inbox.Replay(r.Context(), e, id, actorOf(r)); {
	case errors.Is(err, inbox.ErrNotFound):
		return noEntry(id)
	case errors.Is(err, inbox.ErrNotReplayable):
		entry, _ := s.cfg.Inbox.Entry(r.Context(), e.Name, id)
		return httpError(http.StatusConflict, "not_replayable", "%v; entry %d is %s", err, id, entry.State)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"status": "queued", "inbox_id": id})
	return nil
}
