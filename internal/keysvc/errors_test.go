package keysvc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAnswerMapsErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter string
		logged     bool
	}{
		{"caller's mistake", httpError(http.StatusBadRequest, "invalid_key", "the key must be %d bytes", 3), 400, "invalid_key", "", false},
		{"lease held", &statusError{Status: http.StatusConflict, Code: "in_progress", Msg: "retry later", RetryAfter: "7"}, 409, "in_progress", "7", false},
		{"not found, wrapped", fmt.Errorf("lookup %q: %w", "evt:secret-key", ErrNotFound), 404, "not_found", "", false},
		{"store down", fmt.Errorf("reserve %q: %w", "evt:secret-key", errors.New("connection refused")), 503, "store_unavailable", storeRetryAfter, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := New(Config{Store: nil, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			w := httptest.NewRecorder()
			s.answer(w, httptest.NewRequest(http.MethodGet, "/v1/reservations/x", nil), tc.err)
			var body apiError
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("answer is not JSON: %q", w.Body)
			}
			if w.Code != tc.status || body.Code != tc.code || body.Error == "" || w.Header().Get("Retry-After") != tc.retryAfter {
				t.Errorf("got %d %+v Retry-After %q; want %d %s %q", w.Code, body, w.Header().Get("Retry-After"), tc.status, tc.code, tc.retryAfter)
			}
			if got := logs.Len() > 0; got != tc.logged {
				t.Errorf("logged %v, want %v: %s", got, tc.logged, logs.String())
			}
			if strings.Contains(body.Error, "secret-key") {
				t.Errorf("the answer tells the store's error: %s", body.Error)
			}
		})
	}
}
