// Package headless drives headless Chromium for the tests that prove a page
// in a browser (the planner, keysvc's console): Debian's chromium package,
// run as root without its sandbox, through chromedp.
package headless

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Start starts headless Chromium for a test, for at most five minutes, and
// stops it when the test ends. It fails, never skips, when Chromium is
// missing: a page is only proven in a browser.
func Start(t testing.TB) context.Context {
	t.Helper()
	return StartWindow(t, 1280, 900)
}

// StartWindow is Start with a window of width × height pixels, for pages
// that need more room than a laptop's (n8n's editor, for its screenshots).
func StartWindow(t testing.TB, width, height int) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: apt-get install chromium (.ci/run installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true), chromedp.WindowSize(width, height))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// Requests records every request the page makes, from Watch on.
type Requests struct {
	mu   sync.Mutex
	urls []string
}

// Watch starts recording ctx's requests.
func Watch(ctx context.Context) *Requests {
	r := &Requests{}
	events := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			r.mu.Lock()
			r.urls = append(r.urls, ev.Request.URL)
			r.mu.Unlock()
		}
	}()
	return r
}

// Since returns the URLs requested after the first n.
func (r *Requests) Since(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.urls[n:])
}

// Count is how many requests were made.
func (r *Requests) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.urls)
}

// Exceptions records the page's uncaught exceptions, from WatchExceptions on.
type Exceptions struct {
	mu   sync.Mutex
	list []string
}

// WatchExceptions starts recording ctx's uncaught exceptions.
func WatchExceptions(ctx context.Context) *Exceptions {
	x := &Exceptions{}
	events := chromedp.Events(ctx, cdpruntime.ExceptionThrown)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			x.mu.Lock()
			x.list = append(x.list, ev.ExceptionDetails.Text+" "+fmt.Sprint(ev.ExceptionDetails.Exception.Description))
			x.mu.Unlock()
		}
	}()
	return x
}

// List returns the exceptions recorded.
func (x *Exceptions) List() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.list)
}

// Artifacts is the folder screenshots go to: $IDEMHOOK_ARTIFACTS_DIR, by
// default /tmp/idemhook-artifacts (created).
func Artifacts(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("IDEMHOOK_ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "idemhook-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
