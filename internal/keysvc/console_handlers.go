package keysvc

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/idemhook/idemhook/internal/keysvc/console"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
)

// The console's routes: the page (open: it holds no data) and /v1/console,
// which reads with the read scope and acts with admin. Each handler parses
// its input first (console.ParsePage, ParseSelection), so that bad input is
// a 400 whatever keysvc serves, then asks the inbox or the pattern; consoleAnswer
// turns what they fail with into the answer.

// consolePage is GET /console/: the page, under a policy that lets it load
// its own files and call this origin, nothing else.
func (s *Server) consolePage(w http.ResponseWriter, r *http.Request) error {
	return serveConsoleFile(w, "")
}

// consoleFile is GET /console/{file}: the page's script and style.
func (s *Server) consoleFile(w http.ResponseWriter, r *http.Request) error {
	return serveConsoleFile(w, r.PathValue("file"))
}

func serveConsoleFile(w http.ResponseWriter, name string) error {
	b, ct, ok := console.File(name)
	if !ok {
		return httpError(http.StatusNotFound, "not_found", "the console has no file %q", clipValue(name))
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Security-Policy", console.ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
	return nil
}

// consoleToken refuses a tenant's token: the console shows every endpoint.
func consoleToken(r *http.Request) error {
	if tok := tokenOf(r); tok != nil && tok.Prefix != "" {
		return httpError(http.StatusForbidden, "forbidden", "a tenant's token (bound to a key prefix) cannot use the console")
	}
	return nil
}

// consoleInbox returns the inbox, or a 501 saying how to have one.
func (s *Server) consoleInbox(r *http.Request) (*inbox.Inbox, error) {
	if err := consoleToken(r); err != nil {
		return nil, err
	}
	if s.cfg.Inbox == nil {
		return nil, httpError(http.StatusNotImplemented, "inbox_unavailable",
			"this keysvc has no inbox: start it with DATABASE_URL and --endpoints FILE")
	}
	return s.cfg.Inbox, nil
}

// consolePattern returns the pattern's views, or a 501 saying how to have
// them.
func (s *Server) consolePattern(r *http.Request) (*console.Pattern, error) {
	if err := consoleToken(r); err != nil {
		return nil, err
	}
	if s.cfg.Pattern == nil {
		return nil, httpError(http.StatusNotImplemented, "pattern_unavailable",
			"this keysvc shows no inbox pattern: start it with DATABASE_URL and --pattern-schema SCHEMA (the pattern's --db-schema)")
	}
	return s.cfg.Pattern, nil
}

// consoleAnswer is what the console's routes fail with, as an answer.
func consoleAnswer(err error) error {
	var in *console.InputError
	switch {
	case errors.As(err, &in):
		return httpError(http.StatusBadRequest, in.Code, "%s", in.Msg)
	case errors.Is(err, inbox.ErrSelectionTooLarge):
		return httpError(http.StatusBadRequest, console.CodeSelectionTooLarge, "%v", err)
	case errors.Is(err, inbox.ErrSelectionChanged):
		return httpError(http.StatusConflict, "selection_changed", "%v", err)
	case errors.Is(err, inbox.ErrNotFound):
		return httpError(http.StatusNotFound, "not_found", "no inbox entry of this id")
	}
	return err
}

// consoleSession is GET /v1/console: who the token is, and what this
// keysvc shows. Without tokens (loopback only) every caller is admin.
func (s *Server) consoleSession(w http.ResponseWriter, r *http.Request) error {
	if err := consoleToken(r); err != nil {
		return err
	}
	who := struct {
		Name  string `json:"name"`
		Scope Scope  `json:"scope"`
	}{Scope: ScopeAdmin}
	if tok := tokenOf(r); tok != nil {
		who.Name, who.Scope = tok.Name, tok.Scope
	}
	type pattern struct {
		Schema string `json:"schema"`
	}
	var p *pattern
	if s.cfg.Pattern != nil {
		p = &pattern{Schema: s.cfg.Pattern.Schema()}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"token":   who,
		"bodies":  who.Scope == ScopeAdmin && !s.cfg.HideBodies,
		"inbox":   s.cfg.Inbox != nil,
		"pattern": p,
	})
	return nil
}

// consoleRead serves a console route that reads: parse reads the request's
// input first (bad input is a 400 whatever keysvc serves), source returns
// the inbox or the pattern (or the 501 saying how to have it), read the
// answer.
func consoleRead[In, S, T any](parse func(*http.Request) (In, error), source func(*Server, *http.Request) (S, error),
	read func(S, context.Context, In) (T, error)) handler {
	return func(s *Server, w http.ResponseWriter, r *http.Request) error {
		in, err := parse(r)
		if err != nil {
			return consoleAnswer(err)
		}
		src, err := source(s, r)
		if err != nil {
			return err
		}
		v, err := read(src, r.Context(), in)
		if err != nil {
			return consoleAnswer(err)
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	}
}

func noInput(*http.Request) (struct{}, error) { return struct{}{}, nil }

// pageOf parses a list's query string.
func pageOf(list string) func(*http.Request) (console.Page, error) {
	return func(r *http.Request) (console.Page, error) { return console.ParsePage(r.URL.Query(), list) }
}

// consoleEntryID returns the {id} of the path.
func consoleEntryID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, httpError(http.StatusBadRequest, "invalid_id", "the entry id is a positive integer (an inbox_id)")
	}
	return id, nil
}

// The console's views, by route (GET):
var (
	// /v1/console/inbox: by endpoint and state.
	consoleInboxSummary = consoleRead(noInput, (*Server).consoleInbox, func(in *inbox.Inbox, ctx context.Context, _ struct{}) (inbox.Summary, error) {
		return in.Summary(ctx)
	})
	// /v1/console/inbox/entries: a page of entries.
	consoleInboxEntries = consoleRead(pageOf(console.ListInbox), (*Server).consoleInbox, func(in *inbox.Inbox, ctx context.Context, p console.Page) (inbox.Page, error) {
		return in.List(ctx, p.Query())
	})
	// /v1/console/inbox/entries/{id}: the entry, its headers and its
	// history, never its body.
	consoleInboxEntry = consoleRead(consoleEntryID, (*Server).consoleInbox, func(in *inbox.Inbox, ctx context.Context, id int64) (inbox.Entry, error) {
		return in.Entry(ctx, "", id)
	})
	// /v1/console/pattern: the pattern's tables by state.
	consolePatternSummary = consoleRead(noInput, (*Server).consolePattern, func(p *console.Pattern, ctx context.Context, _ struct{}) (console.PatternSummary, error) {
		return p.Summary(ctx)
	})
	// /v1/console/pattern/events and /tasks: a page of each.
	consolePatternEvents = consoleRead(pageOf(console.ListEvents), (*Server).consolePattern, (*console.Pattern).Events)
	consolePatternTasks  = consoleRead(pageOf(console.ListTasks), (*Server).consolePattern, (*console.Pattern).Tasks)
)

// consoleInboxBody is GET /v1/console/inbox/entries/{id}/body (admin): the
// body as received, in JSON (a string when it is UTF-8, else base64), never
// as a document of its own type that a browser could render.
func (s *Server) consoleInboxBody(w http.ResponseWriter, r *http.Request) error {
	id, err := consoleEntryID(r)
	if err != nil {
		return err
	}
	in, err := s.consoleInbox(r)
	if err != nil {
		return err
	}
	if s.cfg.HideBodies {
		return httpError(http.StatusForbidden, "bodies_hidden", "this keysvc hides bodies from everyone (--console-bodies=false)")
	}
	body, ct, err := in.Body(r.Context(), id)
	if err != nil {
		return consoleAnswer(err)
	}
	out := map[string]any{"content_type": ct, "size": len(body), "encoding": "utf-8", "body": string(body)}
	if !utf8.Valid(body) || bytes.IndexByte(body, 0) >= 0 {
		out["encoding"], out["body"] = "base64", base64.StdEncoding.EncodeToString(body)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// consoleAct runs an action's body through parse, then act.
func (s *Server) consoleAct(w http.ResponseWriter, r *http.Request, list string, act func(console.Selection) (inbox.ActionResult, error)) error {
	body, err := s.readBody(r)
	if err != nil {
		return err
	}
	defer recycleBody(body)
	sel, err := console.ParseSelection(body, list)
	if err != nil {
		return consoleAnswer(err)
	}
	res, err := act(sel)
	if err != nil {
		return consoleAnswer(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// consoleInboxAction serves POST /v1/console/inbox/replay and /retry.
func consoleInboxAction(kind string) handler {
	return func(s *Server, w http.ResponseWriter, r *http.Request) error {
		return s.consoleAct(w, r, console.ListInbox, func(sel console.Selection) (inbox.ActionResult, error) {
			in, err := s.consoleInbox(r)
			if err != nil {
				return inbox.ActionResult{}, err
			}
			return in.Act(r.Context(), sel.Action(kind, actorOf(r)))
		})
	}
}

// consolePatternRetry serves POST /v1/console/pattern/events/retry and
// /tasks/retry.
func consolePatternRetry(list string) handler {
	return func(s *Server, w http.ResponseWriter, r *http.Request) error {
		return s.consoleAct(w, r, list, func(sel console.Selection) (inbox.ActionResult, error) {
			p, err := s.consolePattern(r)
			if err != nil {
				return inbox.ActionResult{}, err
			}
			if list == console.ListTasks {
				return p.RetryTasks(r.Context(), sel, actorOf(r))
			}
			return p.RetryEvents(r.Context(), sel, actorOf(r))
		})
	}
}

// clipValue bounds a caller's value quoted in an answer.
func clipValue(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
