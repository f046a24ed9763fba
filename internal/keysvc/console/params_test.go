package console_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc/console"
)

// Every filter, cursor and page size out of range is an *InputError with
// its code, naming the parameter; a valid query reads as given.
func TestParsePage(t *testing.T) {
	for _, tc := range []struct {
		list, query string
		code        string // "" when valid
		param       string
	}{
		{console.ListInbox, "", "", ""},
		{console.ListInbox, "endpoint=stripe-live&state=failed,forwarded&type=payment_intent.succeeded&since=2026-12-01T10:00:00Z&until=2026-12-02T10:00:00%2B01:00&before=42&limit=200", "", ""},
		{console.ListInbox, "stat=failed", console.CodeUnknownParameter, "stat"},
		{console.ListInbox, "kind=x", console.CodeUnknownParameter, "kind"},
		{console.ListEvents, "endpoint=a", console.CodeUnknownParameter, "endpoint"},
		{console.ListInbox, "state=failed&state=forwarded", console.CodeInvalidFilter, "state"},
		{console.ListInbox, "state=broken", console.CodeInvalidFilter, "state"},
		{console.ListInbox, "state=", console.CodeInvalidFilter, "state"},
		{console.ListTasks, "state=failed,ambiguous", "", ""},
		{console.ListTasks, "state=forwarded", console.CodeInvalidFilter, "state"},
		{console.ListInbox, "endpoint=Bad/Name", console.CodeInvalidFilter, "endpoint"},
		{console.ListInbox, "endpoint=" + strings.Repeat("a", 59), console.CodeInvalidFilter, "endpoint"},
		{console.ListInbox, "type=", console.CodeInvalidFilter, "type"},
		{console.ListInbox, "type=%00", console.CodeInvalidFilter, "type"},
		{console.ListInbox, "type=%FF", console.CodeInvalidFilter, "type"},
		{console.ListInbox, "type=" + strings.Repeat("t", 101), console.CodeInvalidFilter, "type"},
		{console.ListInbox, "since=yesterday", console.CodeInvalidFilter, "since"},
		{console.ListInbox, "until=2026-13-01T00:00:00Z", console.CodeInvalidFilter, "until"},
		{console.ListInbox, "since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z", console.CodeInvalidFilter, "until"},
		{console.ListInbox, "before=0", console.CodeInvalidCursor, "before"},
		{console.ListInbox, "before=-3", console.CodeInvalidCursor, "before"},
		{console.ListInbox, "before=99999999999999999999", console.CodeInvalidCursor, "before"},
		{console.ListInbox, "before=abc", console.CodeInvalidCursor, "before"},
		{console.ListInbox, "limit=0", console.CodeInvalidPageSize, "limit"},
		{console.ListInbox, "limit=201", console.CodeInvalidPageSize, "limit"},
		{console.ListInbox, "limit=1e3", console.CodeInvalidPageSize, "limit"},
		{console.ListInbox, "limit=", console.CodeInvalidPageSize, "limit"},
	} {
		t.Run(tc.list+" "+tc.query, func(t *testing.T) {
			v, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			_, err = console.ParsePage(v, tc.list)
			checkInputError(t, err, tc.code, tc.param)
		})
	}
	p, err := console.ParsePage(url.Values{"state": {"failed,failed"}, "since": {"2026-12-01T10:00:00Z"}}, console.ListInbox)
	if err != nil || len(p.States) != 1 || p.Limit != 50 || !p.Since.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("a valid page: %+v, %v", p, err)
	}
}

func checkInputError(t *testing.T, err error, code, param string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Errorf("refused: %v", err)
		}
		return
	}
	var in *console.InputError
	if !errors.As(err, &in) || in.Code != code || in.Param != param || in.Msg == "" {
		t.Errorf("err %#v, want code %s for %q", err, code, param)
	}
}

// An action's body selects ids or a filter, never both nor neither, at
// most 1,000 positive ids; anything else is an *InputError.
func TestParseSelection(t *testing.T) {
	many := make([]string, 1001)
	for i := range many {
		many[i] = fmt.Sprint(i + 1)
	}
	for _, tc := range []struct {
		name, body  string
		code, param string
	}{
		{"ids", `{"ids":[3,1,3]}`, "", ""},
		{"everything", `{"filter":{}}`, "", ""},
		{"a filter, counted", `{"filter":{"state":"failed","endpoint":"a","since":"2026-12-01T00:00:00Z"},"expect":3,"dry_run":false}`, "", ""},
		{"neither", `{}`, console.CodeInvalidBody, ""},
		{"both", `{"ids":[1],"filter":{}}`, console.CodeInvalidBody, ""},
		{"empty body", ``, console.CodeInvalidBody, ""},
		{"not JSON", `ids=1`, console.CodeInvalidBody, ""},
		{"two objects", `{"ids":[1]}{"ids":[2]}`, console.CodeInvalidBody, ""},
		{"an unknown field", `{"ids":[1],"force":true}`, console.CodeInvalidBody, ""},
		{"ids not numbers", `{"ids":["1"]}`, console.CodeInvalidBody, ""},
		{"an id too large for int64", `{"ids":[99999999999999999999]}`, console.CodeInvalidBody, ""},
		{"a zero id", `{"ids":[0]}`, console.CodeInvalidID, "ids"},
		{"a negative id", `{"ids":[-5]}`, console.CodeInvalidID, "ids"},
		{"1,001 ids", `{"ids":[` + strings.Join(many, ",") + `]}`, console.CodeSelectionTooLarge, "ids"},
		{"a negative expect", `{"ids":[1],"expect":-1}`, console.CodeInvalidBody, "expect"},
		{"a filter of arrays", `{"filter":{"state":["failed"]}}`, console.CodeInvalidBody, ""},
		{"a filter's unknown parameter", `{"filter":{"limit":"5"}}`, console.CodeUnknownParameter, "limit"},
		{"a filter's bad state", `{"filter":{"state":"nope"}}`, console.CodeInvalidFilter, "state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := console.ParseSelection([]byte(tc.body), console.ListInbox)
			checkInputError(t, err, tc.code, tc.param)
		})
	}
	s, err := console.ParseSelection([]byte(`{"ids":[3,1,3],"expect":2}`), console.ListInbox)
	if err != nil || fmt.Sprint(s.IDs) != "[1 3]" || s.Expect == nil || *s.Expect != 2 {
		t.Errorf("ids: %+v, %v", s, err)
	}
	if _, err := console.ParseSelection([]byte(`{"filter":{"endpoint":"a"}}`), console.ListTasks); err == nil {
		t.Error("a task selection took an endpoint")
	}
}

// The page's files are served by name only, each with its type.
func TestFiles(t *testing.T) {
	for _, tc := range []struct {
		name, ct string
		ok       bool
	}{{"", "text/html; charset=utf-8", true}, {"console.js", "text/javascript; charset=utf-8", true}, {"console.css", "text/css; charset=utf-8", true},
		{"index.html", "text/html; charset=utf-8", true}, {"../console.go", "", false}, {"web/console.js", "", false}, {"nope.js", "", false}, {"console.go", "", false}} {
		b, ct, ok := console.File(tc.name)
		if ok != tc.ok || ct != tc.ct || ok == (len(b) == 0) {
			t.Errorf("File(%q): %d bytes, %q, %v", tc.name, len(b), ct, ok)
		}
	}
}
