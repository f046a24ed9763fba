package planner_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/keysvc"
	"github.com/idemhook/idemhook/planner"
	"github.com/idemhook/idemhook/planner/internal/wasmbuild"
	"github.com/idemhook/idemhook/rules"
)

// The committed module is what the sources build: after a change to the key
// spec, the generator or cmd/planner-wasm, `go generate ./planner` must run.
func TestCommittedModuleMatchesSources(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the WebAssembly module; not run with -short")
	}
	recorded, err := os.ReadFile(wasmbuild.ToolchainFile)
	if err != nil {
		t.Fatal(err)
	}
	built, err := wasmbuild.Build("..")
	if err != nil {
		t.Fatal(err)
	}
	committed, err := planner.Wasm()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(built, committed) {
		return
	}
	if v := strings.TrimSpace(string(recorded)); v != runtime.Version() {
		t.Skipf("the committed module was built by %s and this is %s: their bytes cannot be compared (the browser tests below use the committed module)", v, runtime.Version())
	}
	t.Errorf("planner/web/%s is stale (%d bytes committed, %d built from the sources): run `go generate ./planner`", planner.WasmFile, len(committed), len(built))
}

// chromium starts headless Chromium (Debian's package) for a test. It fails,
// never skips, when Chromium is missing: the page is only proven in a browser.
func chromium(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: apt-get install chromium (.ci/run installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// requestLog records every request the page makes.
type requestLog struct {
	mu   sync.Mutex
	urls []string
}

func (l *requestLog) watch(ctx context.Context) {
	events := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			l.mu.Lock()
			l.urls = append(l.urls, ev.Request.URL)
			l.mu.Unlock()
		}
	}()
}

func (l *requestLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.urls[n:])
}

func (l *requestLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.urls)
}

func openPage(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	var mu sync.Mutex
	var problems []string
	exceptions := chromedp.Events(ctx, cdpruntime.ExceptionThrown)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			mu.Lock()
			problems = append(problems, ev.ExceptionDetails.Text+" "+fmt.Sprint(ev.ExceptionDetails.Exception.Description))
			mu.Unlock()
		}
	}()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	ready := false
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.ready || document.getElementById('status').textContent`))
		if err == nil && v == "true" {
			ready = true
			break
		}
		if err == nil && strings.HasPrefix(v, "The planner could not start") {
			t.Fatal(v)
		}
	}
	if !ready {
		status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('status').textContent`))
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the planner page did not start within a minute; its status: %q; exceptions: %q", status, problems)
	}
}

// pageResult is what the page shows for one delivery.
type pageResult struct {
	Key  string `json:"key"`
	Rule string `json:"rule"`
}

const awaitKey = `
  for (let i = 0; i < 2000 && document.body.dataset.keyReady === before; i++) await new Promise((r) => setTimeout(r, 5));
  return { key: document.getElementById('key').textContent, rule: document.getElementById('rule').textContent };`

// enter types a delivery into the page (a file for bytes a text area cannot
// hold) and returns the key and rule it shows.
func enter(t *testing.T, ctx context.Context, body []byte, headers map[string]string, preset, scope string) pageResult {
	t.Helper()
	var lines []string
	for k, v := range headers {
		lines = append(lines, k+": "+v)
	}
	slices.Sort(lines)
	fields, _ := json.Marshal(map[string]string{"headers": strings.Join(lines, "\n"), "preset": preset, "scope": scope})
	setFields := `const f = ` + string(fields) + `; const before = document.body.dataset.keyReady;
  document.getElementById('headers').value = f.headers; document.getElementById('preset').value = f.preset;
  document.getElementById('scope').value = f.scope;`
	if utf8.Valid(body) && !bytes.ContainsRune(body, '\r') {
		text, _ := json.Marshal(string(body))
		r, err := chromedp.Run(ctx, chromedp.Evaluate[pageResult](`(async () => {`+setFields+`
  const b = document.getElementById('body'); b.value = `+string(text)+`; b.dispatchEvent(new Event('input', { bubbles: true }));`+awaitKey+`})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	file := filepath.Join(t.TempDir(), "body.bin")
	if err := os.WriteFile(file, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.__before = (() => {`+setFields+` return before; })()`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS("#body-file"), []string{file})); err != nil {
		t.Fatal(err)
	}
	r, err := chromedp.Run(ctx, chromedp.Evaluate[pageResult](`(async () => { const before = window.__before;`+awaitKey+`})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// serve runs keysvc (which serves the page at / and /planner/) over real
// HTTP.
func serve(t *testing.T) string {
	t.Helper()
	store, err := keysvc.OpenBolt(filepath.Join(t.TempDir(), "keysvc.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(keysvc.New(keysvc.Config{Store: store}))
	t.Cleanup(func() { srv.Close(); store.Close() })
	return srv.URL
}

// Every vector entered through the page gives the vector's key, computed in
// the page; once the page and its files are loaded, the page makes no
// request at all.
func TestPageDerivesEveryVector(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium; not run with -short")
	}
	ctx := chromium(t)
	var log requestLog
	log.watch(ctx)
	openPage(t, ctx, serve(t)+"/")
	loaded := log.count()
	if loaded == 0 {
		t.Fatal("no request seen while loading the page: the network log is not working")
	}
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	agree, skipped := 0, 0
	for _, v := range vectors {
		body, err := v.Body()
		if err != nil {
			t.Fatal(err)
		}
		if headerLines(v.Headers) {
			skipped++ // a header value with a line break: "Name: value" lines cannot hold it
			t.Logf("not enterable as header lines: %s", v.Name)
			continue
		}
		got := enter(t, ctx, body, v.Headers, v.Preset, v.Scope)
		rule, _, _ := strings.Cut(got.Rule, " ")
		switch v.Error {
		case "empty_body":
			if got.Key != "" || rule != "empty_body" {
				t.Errorf("%s: page shows %q (%s), want no key and empty_body", v.Name, got.Key, got.Rule)
				continue
			}
		case "invalid_scope":
			if got.Key != "" || rule != "invalid_preset_or_scope" {
				t.Errorf("%s: page shows %q (%s), want no key and the scope refused", v.Name, got.Key, got.Rule)
				continue
			}
		default:
			if got.Key != v.Key {
				t.Errorf("%s: page shows %q (%s), want %q", v.Name, got.Key, got.Rule, v.Key)
				continue
			}
		}
		agree++
	}
	t.Logf("the page agrees with %d of %d vectors (%d have header values no header line can hold)", agree, len(vectors), skipped)
	if after := log.since(loaded); len(after) > 0 {
		t.Errorf("the page made %d requests after it loaded, with pasted content at hand: %v", len(after), after)
	}
	if skipped > 2 {
		t.Errorf("%d vectors could not be entered", skipped)
	}
}

func headerLines(h map[string]string) bool {
	for _, v := range h {
		if strings.ContainsAny(v, "\r\n") {
			return true
		}
	}
	return false
}

// cli builds cmd/idemhook once: the page's files must equal what users get
// from the command line.
var (
	cliOnce sync.Once
	cliBin  string
	cliErr  error
)

func idemhook(t *testing.T, args ...string) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idemhook-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliBin = filepath.Join(dir, "idemhook")
		if out, err := exec.Command("go", "build", "-o", cliBin, "github.com/idemhook/idemhook/cmd/idemhook").CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build ./cmd/idemhook: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	out, err := exec.Command(cliBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("idemhook %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// For several option sets, the files downloaded from the page (the zip, and
// a file on its own) equal what `idemhook generate` writes, byte for byte;
// an invalid option is shown next to its field.
func TestPageDownloadsTheCLIsFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium; not run with -short")
	}
	ctx := chromium(t)
	downloads := t.TempDir()
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatal(err)
	}
	openPage(t, ctx, serve(t)+"/planner/")
	for _, flags := range [][]string{
		{},
		{"--hashing", "crypto-node"},
		{"--guard", "lease", "--lease", "90s"},
		{"--hashing", "keysvc", "--keysvc-url", "http://keysvc:8080"},
		{"--verify", "stripe", "--path", "stripe/live", "--retention", "45d"},
		{"--pattern", "inbox", "--events", "payment_intent.succeeded,charge.refunded", "--db-schema", "payments"},
		{"--pattern", "inbox", "--receiver", "keysvc"},
	} {
		t.Run(strings.Join(append([]string{"generate"}, flags...), " "), func(t *testing.T) {
			cliDir := t.TempDir()
			idemhook(t, append([]string{"generate", "--out", cliDir}, flags...)...)
			want := readDir(t, cliDir)
			setOptions(t, ctx, flags)
			if msg, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#options .error, #generate-error')].map(e => e.textContent).join('')`)); msg != "" {
				t.Fatalf("the page refused the options: %s", msg)
			}
			zipped := download(t, ctx, downloads, "#download-zip", "idemhook.zip")
			zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]byte{}
			for _, f := range zr.File {
				rc, _ := f.Open()
				got[f.Name], _ = io.ReadAll(rc)
				rc.Close()
			}
			if len(got) != len(want) {
				t.Errorf("the page's zip has %d files, the CLI writes %d", len(got), len(want))
			}
			for name, b := range want {
				if !bytes.Equal(got[name], b) {
					t.Errorf("%s differs from the CLI's (%d bytes on the page, %d from the CLI)", name, len(got[name]), len(b))
				}
			}
			// One file on its own too (once: Chrome stops automatic downloads
			// after ten from one page).
			if len(flags) == 0 {
				one := download(t, ctx, downloads, `#files a[data-file="schema.sql"]`, "schema.sql")
				if !bytes.Equal(one, want["schema.sql"]) {
					t.Error("schema.sql downloaded on its own differs from the CLI's")
				}
			}
		})
	}
	t.Run("an invalid option is shown next to its field", func(t *testing.T) {
		setOptions(t, ctx, []string{"--events-table", "events; DROP TABLE x"})
		msg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('opt-events-table-error').textContent`))
		if err != nil || !strings.Contains(msg, "invalid events table") {
			t.Errorf("error next to --events-table: %q %v", msg, err)
		}
	})
}

// setOptions resets the form to its defaults, applies flags and waits for
// the files to be generated again.
func setOptions(t *testing.T, ctx context.Context, flags []string) {
	t.Helper()
	values := map[string]string{}
	for i := 0; i+1 < len(flags); i += 2 {
		values[strings.TrimPrefix(flags[i], "--")] = flags[i+1]
	}
	raw, _ := json.Marshal(values)
	_, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`(() => {
  const values = `+string(raw)+`;
  for (const el of document.querySelectorAll('#options [name]')) el.value = el.name in values ? values[el.name] : el.dataset.default;
  document.getElementById('options').dispatchEvent(new Event('change', { bubbles: true }));
})()`))
	if err != nil {
		t.Fatal(err)
	}
}

// download clicks the link sel and returns the file it saved as name.
func download(t *testing.T, ctx context.Context, dir, sel, name string) []byte {
	t.Helper()
	path := filepath.Join(dir, name)
	os.Remove(path)
	q, _ := json.Marshal(sel)
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector(`+string(q)+`).click()`)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(path + ".crdownload"); err == nil {
			continue
		}
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b
		}
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	t.Fatalf("%s was not downloaded into %s (it holds %v)", name, dir, names)
	return nil
}

// The page keysvc serves and the files `idemhook planner` writes are the
// same bytes (gzipped or not); the written page works opened from disk, with
// no server at all; and screenshots at desktop and phone width are kept.
func TestPageFromKeysvcAndFromDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium; not run with -short")
	}
	dir := t.TempDir()
	idemhook(t, "planner", "--out", dir)
	written := readDir(t, dir)
	base := serve(t)
	for name, want := range written {
		for _, gz := range []bool{false, true} {
			req, _ := http.NewRequest(http.MethodGet, base+"/planner/"+name, nil)
			if gz {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			var r io.Reader = resp.Body
			if resp.Header.Get("Content-Encoding") == "gzip" {
				r, _ = gzip.NewReader(resp.Body)
			}
			got, _ := io.ReadAll(r)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Equal(got, want) {
				t.Errorf("GET /planner/%s (gzip %v): %d, %d bytes; `idemhook planner` wrote %d", name, gz, resp.StatusCode, len(got), len(want))
			}
			if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src 'none'") {
				t.Errorf("GET /planner/%s: no connect-src 'none' in the policy", name)
			}
		}
	}

	ctx := chromium(t)
	var log requestLog
	log.watch(ctx)
	openPage(t, ctx, "file://"+filepath.Join(dir, "index.html"))
	got := enter(t, ctx, []byte(`{"id":"evt_from_disk","type":"t"}`), nil, "", "")
	if got.Key != "evt:evt_from_disk" {
		t.Errorf("the page opened from disk shows %q (%s)", got.Key, got.Rule)
	}
	for _, u := range log.since(0) {
		if !strings.HasPrefix(u, "file://") {
			t.Errorf("the page opened from disk requested %s", u)
		}
	}

	artifacts := os.Getenv("IDEMHOOK_ARTIFACTS_DIR")
	if artifacts == "" {
		artifacts = filepath.Join(os.TempDir(), "idemhook-artifacts")
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	enter(t, ctx, []byte(`{"id":"evt_1NqXYZ2eZvKYlo2C","object":"event","type":"payment_intent.succeeded"}`), nil, "stripe", "")
	for _, size := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"desktop", 1280, 900, false}, {"phone", 390, 844, true}} {
		opts := []chromedp.EmulateViewportOption{}
		if size.mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(size.width, size.height, opts...)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(artifacts, "planner-"+size.name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		wide, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
		if wide {
			t.Errorf("at %s width the page scrolls sideways", size.name)
		}
		t.Logf("screenshot: %s", path)
	}
}

// For every sample event shipped with the rules presets, the page shows
// the effect key (or the decision made without the database) that
// rules.Evaluate gives, beside the receipt key.
func TestPageShowsTheEffectKey(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium; not run with -short")
	}
	ctx := chromium(t)
	openPage(t, ctx, serve(t)+"/")
	shown := 0
	for _, preset := range rules.PresetNames() {
		rs, err := rules.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		all, err := rules.LoadSamples(filepath.Join("..", "rules", "testdata", "examples", preset))
		if err != nil {
			t.Fatal(err)
		}
		q, _ := json.Marshal(preset)
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('rules-preset').value = `+string(q))); err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			want := rs.Evaluate(rules.Event{Body: s.Body, Headers: s.Headers}, nil)
			got := enter(t, ctx, s.Body, s.Headers, "stripe", "")
			effect, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`({key: document.getElementById('effect-key').textContent,
  rule: document.getElementById('effect-rule').textContent, row: document.getElementById('effect-row').textContent})`))
			if err != nil {
				t.Fatal(err)
			}
			name := preset + "/" + filepath.Base(s.File)
			if !strings.HasPrefix(got.Key, "evt:evt_") {
				t.Errorf("%s: the receipt key %q", name, got.Key)
			}
			switch {
			case want.State != "":
				if effect["key"] != "" || !strings.HasPrefix(effect["rule"], want.State+" "+want.Outcome) {
					t.Errorf("%s: the page shows %q / %q, want no key and %s %s", name, effect["key"], effect["rule"], want.State, want.Outcome)
				}
			case effect["key"] != want.EffectKey || !strings.Contains(effect["rule"], want.Rule) || effect["row"] == "":
				t.Errorf("%s: the page shows %q / %q / %q, want %s by rule %s", name, effect["key"], effect["rule"], effect["row"], want.EffectKey, want.Rule)
			}
			shown++
		}
	}
	t.Logf("the page agrees with rules.Evaluate on %d sample events", shown)
}
