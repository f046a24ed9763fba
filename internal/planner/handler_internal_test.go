package planner

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// While the module is being built, a request for the page waits buildWait
// and then gets a 503 that says so and asks the browser to come back; a
// name that is not the page's is a 404 at once, without a build.
func TestHandlerWhileTheModuleIsBuilt(t *testing.T) {
	attemptMu.Lock()
	saved, savedWait := last, buildWait
	building := &attempt{done: make(chan struct{})} // a build that does not end
	last, buildWait = building, 50*time.Millisecond
	attemptMu.Unlock()
	t.Cleanup(func() {
		attemptMu.Lock()
		last, buildWait = saved, savedWait
		attemptMu.Unlock()
	})
	h := Handler("/planner/")
	for _, path := range []string{"/planner/", "/planner/idemhook.wasm.js"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Refresh") == "" || !strings.Contains(w.Body.String(), "is being built") {
			t.Errorf("GET %s while the module is built: %d, Refresh %q, %q", path, w.Code, w.Header().Get("Refresh"), w.Body.String())
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'none'") {
			t.Errorf("GET %s while the module is built: policy %q", path, csp)
		}
	}
	for _, path := range []string{"/planner/other.js", "/planner/web/index.html"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, w.Code)
		}
	}
	attemptMu.Lock()
	defer attemptMu.Unlock()
	if last != building {
		t.Error("a request started another build while one was under way")
	}
}
