package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Two provisioners of one cache exclude each other: the second waits (and
// says so) until the first releases the lock.
func TestProvisionLockExcludes(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDir(context.Background(), dir, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if _, err := lockDir(ctx, dir, &progress); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while the first is held: %v, want it to wait until the deadline", err)
	}
	if !strings.Contains(progress.String(), "waiting for another process") {
		t.Errorf("the waiting provisioner said %q", progress.String())
	}
	unlock()
	again, err := lockDir(context.Background(), dir, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
}

// fakeRegistry is an npm registry on a local port that answers every
// request with answer; it counts the requests, and reports on gone each
// one whose client went away before it was answered.
func fakeRegistry(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (url string, requests *atomic.Int64, gone <-chan string) {
	t.Helper()
	requests = &atomic.Int64{}
	left := make(chan string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		answer(w, r)
		if r.Context().Err() != nil {
			select {
			case left <- r.URL.Path:
			default:
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, requests, left
}

// provisionFrom runs Provision for n8n into a new cache folder with npm's
// registry at registry and a new npm cache (nothing of it cached).
func provisionFrom(t *testing.T, registry string, env ...string) (progress string, err error) {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatal("npm is not on PATH: this test runs npm against a registry of its own")
	}
	t.Setenv("IDEMHOOK_CACHE_DIR", t.TempDir())
	t.Setenv("npm_config_registry", registry+"/")
	t.Setenv("npm_config_cache", t.TempDir())
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	var out bytes.Buffer
	_, err = Provision(context.Background(), Needs{N8N: true, Why: "a test"}, &out)
	return out.String(), err
}

// A registry that takes npm's requests and never answers: the install is
// given up once nothing moved for IDEMHOOK_INSTALL_STALL (here 5 s), with
// the address npm waited on, and npm is stopped; while it waited, the
// progress said where it was.
func TestInstallGivesUpOnAStalledRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("runs npm; not run with -short")
	}
	release := make(chan struct{})
	registry, requests, gone := fakeRegistry(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	progress, err := provisionFrom(t, registry, StallEnv+"=5s")
	var stall *StallError
	if !errors.As(err, &stall) {
		t.Fatalf("a registry that never answers: %v, want a StallError\nprogress:\n%s", err, progress)
	}
	if !strings.HasPrefix(stall.URL, registry+"/") || !strings.Contains(err.Error(), "waiting on "+stall.URL) || !strings.Contains(err.Error(), StallEnv+"=") {
		t.Errorf("the message does not name the registry address waited on (%s) and how to wait longer: %v", registry, err)
	}
	if !strings.Contains(progress, "installing") || !strings.Contains(progress, "still installing "+stall.Spec) {
		t.Errorf("while it waited, the progress said nothing of where it was:\n%s", progress)
	}
	if requests.Load() == 0 {
		t.Fatal("npm asked the fake registry nothing: it was not the registry it used")
	}
	select {
	case path := <-gone:
		t.Logf("given up: %v\nnpm went away from %s; progress:\n%s", err, path, progress)
	case <-time.After(30 * time.Second):
		t.Error("npm still holds its request to the registry after the install was given up")
	}
}

// A registry that refuses (503): npm's own error, with the address, is the
// cause given, not a stall.
func TestInstallNamesTheRegistrysRefusal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs npm; not run with -short")
	}
	registry, requests, _ := fakeRegistry(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	})
	// npm's own retries (twice, after 10 s and more) only slow the test.
	progress, err := provisionFrom(t, registry, "npm_config_fetch_retries=0")
	var stall *StallError
	if err == nil || errors.As(err, &stall) || requests.Load() == 0 {
		t.Fatalf("a registry answering 503 (%d requests): %v, want npm's error\nprogress:\n%s", requests.Load(), err, progress)
	}
	if !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), registry+"/") {
		t.Errorf("the error does not name the registry's answer and address: %v", err)
	}
	t.Logf("%v", err)
}

// A registry that answers slowly, a few bytes at a time for longer than
// IDEMHOOK_INSTALL_STALL, is not given up: the bytes npm receives are
// progress. The manifest it trickles names a tarball the registry does
// not have, so the install then ends with npm's 404.
func TestInstallWaitsOnASlowDownload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs npm; not run with -short")
	}
	var base string
	registry, _, _ := fakeRegistry(t, func(w http.ResponseWriter, r *http.Request) {
		name, err := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/"))
		if err != nil || strings.Contains(name, "/-/") {
			http.NotFound(w, r)
			return
		}
		manifest := func(v string) string {
			return `"` + v + `":{"name":"` + name + `","version":"` + v + `","dist":{"tarball":"` + base + `/` + name + `/-/x-` + v + `.tgz"}}`
		}
		body := `{"name":"` + name + `","dist-tags":{"latest":"24.0.0"},"versions":{` + manifest("24.0.0") + `,` + manifest("2.41.1") + `},"padding":"` + strings.Repeat(" ", 400) + `"}`
		w.Header().Set("Content-Type", "application/json")
		for len(body) > 0 { // about 10 s: 40 bytes every 400 ms
			n := min(40, len(body))
			if _, err := io.WriteString(w, body[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			body = body[n:]
			time.Sleep(400 * time.Millisecond)
		}
	})
	base = registry
	progress, err := provisionFrom(t, registry, StallEnv+"=4s", "npm_config_fetch_retries=0")
	var stall *StallError
	if errors.As(err, &stall) {
		t.Fatalf("a download that kept coming was given up: %v\nprogress:\n%s", err, progress)
	}
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("after the slow manifest: %v, want npm's 404 for the tarball\nprogress:\n%s", err, progress)
	}
	t.Logf("%v\nprogress:\n%s", err, progress)
}
