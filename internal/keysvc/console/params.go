package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/idemhook/idemhook/internal/keysvc/inbox"
)

// InputError is a request the console's routes refuse, before anything is
// read or changed: keysvc answers it 400 with Code and the message, which
// names the parameter and what it accepts.
type InputError struct {
	Param string
	Code  string
	Msg   string
}

func (e *InputError) Error() string { return e.Msg }

// Codes of InputError.
const (
	CodeUnknownParameter  = "unknown_parameter"
	CodeInvalidFilter     = "invalid_filter"
	CodeInvalidPageSize   = "invalid_page_size"
	CodeInvalidCursor     = "invalid_cursor"
	CodeInvalidBody       = "invalid_body"
	CodeInvalidID         = "invalid_id"
	CodeSelectionTooLarge = "selection_too_large"
)

func bad(param, code, format string, args ...any) *InputError {
	return &InputError{Param: param, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Filter is a list's or a selection's filter: states, a type (the event
// type, or an outbox task's kind) and a time range, every field optional.
type Filter struct {
	Endpoint     string // keysvc's inbox only
	States       []string
	Type         string
	Since, Until time.Time
}

// Page is a list's filter and page: Before is the id cursor (entries with a
// smaller id, the next page), Limit 1 to inbox.MaxPage.
type Page struct {
	Filter
	Before int64
	Limit  int
}

// What each list or selection filters on.
var (
	// EventStates are the states of an inbox row (keysvc's or the pattern's).
	EventStates = inbox.States
	// TaskStates are the states of an outbox task.
	TaskStates = []string{"pending", "sending", "sent", "ambiguous", "failed"}
)

// The three lists the console shows.
const (
	ListInbox  = "inbox"  // keysvc's entries: ParsePage(v, ListInbox)
	ListEvents = "events" // the pattern's inbox_events
	ListTasks  = "tasks"  // the pattern's outbox_tasks
)

// endpointName is an inbox endpoint's rule (inbox.LoadEndpoints).
var endpointName = regexp.MustCompile(`^[a-z0-9]+(?:[_-][a-z0-9]+)*$`)

// ParsePage reads a list's query string: endpoint (ListInbox only), state
// (comma-separated), type (ListTasks: kind), since and until (RFC 3339),
// before (an id) and limit. Any other parameter, or a value out of its
// range, is an *InputError.
func ParsePage(v url.Values, list string) (Page, error) {
	var p Page
	params := []string{"state", "since", "until", "before", "limit", typeParam(list)}
	if list == ListInbox {
		params = append(params, "endpoint")
	}
	f, err := parseFilter(v, list, params)
	if err != nil {
		return Page{}, err
	}
	p.Filter = f
	if s := v.Get("before"); v.Has("before") {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return Page{}, bad("before", CodeInvalidCursor, "before is the positive id the previous page gave as next_before, not %q", clip(s))
		}
		p.Before = id
	}
	p.Limit = 50
	if s := v.Get("limit"); v.Has("limit") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > inbox.MaxPage {
			return Page{}, bad("limit", CodeInvalidPageSize, "limit is a page size from 1 to %d, not %q", inbox.MaxPage, clip(s))
		}
		p.Limit = n
	}
	return p, nil
}

func typeParam(list string) string {
	if list == ListTasks {
		return "kind"
	}
	return "type"
}

// parseFilter reads the filter parameters of v, refusing any not in
// params, and any given more than once.
func parseFilter(v url.Values, list string, params []string) (Filter, error) {
	var f Filter
	for name, values := range v {
		if !slices.Contains(params, name) {
			return Filter{}, bad(name, CodeUnknownParameter, "unknown parameter %q: use %s", clip(name), strings.Join(params, ", "))
		}
		if len(values) > 1 {
			return Filter{}, bad(name, CodeInvalidFilter, "%s is given %d times: give it once (state takes a comma-separated list)", name, len(values))
		}
	}
	if v.Has("endpoint") {
		f.Endpoint = v.Get("endpoint")
		if len(f.Endpoint) > 58 || !endpointName.MatchString(f.Endpoint) {
			return Filter{}, bad("endpoint", CodeInvalidFilter, "endpoint %q is not an endpoint name (words of a-z and 0-9 joined by '_' or '-')", clip(f.Endpoint))
		}
	}
	if v.Has("state") {
		allowed := EventStates
		if list == ListTasks {
			allowed = TaskStates
		}
		for _, s := range strings.Split(v.Get("state"), ",") {
			if !slices.Contains(allowed, s) {
				return Filter{}, bad("state", CodeInvalidFilter, "state %q: use %s, several separated by commas", clip(s), strings.Join(allowed, ", "))
			}
			if !slices.Contains(f.States, s) {
				f.States = append(f.States, s)
			}
		}
	}
	tp := typeParam(list)
	if v.Has(tp) {
		f.Type = v.Get(tp)
		if f.Type == "" || len(f.Type) > 100 || !utf8.ValidString(f.Type) || strings.IndexFunc(f.Type, unicode.IsControl) >= 0 {
			return Filter{}, bad(tp, CodeInvalidFilter, "%s is 1 to 100 bytes of UTF-8 without control characters", tp)
		}
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if !v.Has(p.name) {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v.Get(p.name))
		if err != nil || t.Year() < 1 || t.Year() > 9999 {
			return Filter{}, bad(p.name, CodeInvalidFilter, "%s is a time in RFC 3339, such as 2026-12-01T10:00:00Z, not %q", p.name, clip(v.Get(p.name)))
		}
		*p.to = t
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return Filter{}, bad("until", CodeInvalidFilter, "until must be later than since")
	}
	return f, nil
}

// Query is p as the inbox lists it.
func (p Page) Query() inbox.Query {
	return inbox.Query{Endpoint: p.Endpoint, States: p.States, EventType: p.Type, Since: p.Since, Until: p.Until, Before: p.Before, Limit: p.Limit}
}

// Selection is what an action's body selects: some ids, or every entry its
// filter matches; Expect and DryRun as in inbox.Action.
type Selection struct {
	IDs    []int64
	Filter Filter
	Expect *int
	DryRun bool
}

// actionBody is the JSON of an action's body.
type actionBody struct {
	IDs    []int64            `json:"ids"`
	Filter *map[string]string `json:"filter"`
	Expect *int               `json:"expect"`
	DryRun bool               `json:"dry_run"`
}

// ParseSelection reads an action's body: {"ids": [...]} or {"filter": {...}}
// (the list's parameters as strings; {} selects everything), with
// "expect" (the count the caller confirmed) and "dry_run". At most
// inbox.MaxSelection ids, each positive. Anything else is an *InputError.
func ParseSelection(body []byte, list string) (Selection, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var b actionBody
	if err := dec.Decode(&b); err != nil {
		return Selection{}, bad("", CodeInvalidBody, "the body is JSON {\"ids\": [...]} or {\"filter\": {...}}, with \"expect\" and \"dry_run\": %v", clip(jsonProblem(err)))
	}
	if dec.More() {
		return Selection{}, bad("", CodeInvalidBody, "the body is one JSON object")
	}
	var err error
	if (b.IDs == nil) == (b.Filter == nil) {
		return Selection{}, bad("", CodeInvalidBody, "give either ids or filter ({} selects everything), not both and not neither")
	}
	if len(b.IDs) > inbox.MaxSelection {
		return Selection{}, bad("ids", CodeSelectionTooLarge, "%d ids: at most %d at a time", len(b.IDs), inbox.MaxSelection)
	}
	for _, id := range b.IDs {
		if id <= 0 {
			return Selection{}, bad("ids", CodeInvalidID, "ids are positive entry ids, not %d", id)
		}
	}
	if b.Expect != nil && (*b.Expect < 0 || *b.Expect > inbox.MaxSelection) {
		return Selection{}, bad("expect", CodeInvalidBody, "expect is the number of entries confirmed, 0 to %d", inbox.MaxSelection)
	}
	s := Selection{IDs: b.IDs, Expect: b.Expect, DryRun: b.DryRun}
	if b.IDs != nil {
		s.IDs = slices.Compact(slices.Sorted(slices.Values(b.IDs)))
	}
	if b.Filter != nil {
		v := url.Values{}
		for k, val := range *b.Filter {
			v.Set(k, val)
		}
		params := []string{"state", "since", "until", typeParam(list)}
		if list == ListInbox {
			params = append(params, "endpoint")
		}
		if s.Filter, err = parseFilter(v, list, params); err != nil {
			return Selection{}, err
		}
	}
	return s, nil
}

// Action is s as the inbox acts on it.
func (s Selection) Action(kind, actor string) inbox.Action {
	f := s.Filter
	return inbox.Action{Kind: kind, IDs: s.IDs, Expect: s.Expect, DryRun: s.DryRun, Actor: actor,
		Query: inbox.Query{Endpoint: f.Endpoint, States: f.States, EventType: f.Type, Since: f.Since, Until: f.Until}}
}

// jsonProblem says what is wrong with a body without echoing it.
func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("not JSON at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("%s must be %s", typ.Field, typ.Type)
	case errors.Is(err, io.EOF):
		return "the body is empty"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// clip bounds a caller's value quoted in a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
