package planner_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/headless"
	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/planner"
	"github.com/idemhook/idemhook/internal/rules"
)

// The module stays under 2 MiB gzipped (the page embeds it), and the page,
// opened afresh, gives its first key soon after: the times from navigation
// to the module started and to the first key shown are printed (for
// docs/speed.md), not asserted.
func TestModuleSizeAndTimeToFirstKey(t *testing.T) {
	ctx := chromium(t)
	gz := moduleGzip(t)
	if len(gz) > 2<<20 {
		t.Errorf("the module is %d bytes gzipped, over 2 MiB", len(gz))
	}
	openPage(t, ctx, serve(t)+"/")
	got := enter(t, ctx, []byte(`{"id":"evt_first_key"}`), nil, "", "")
	if got.Key != "evt:evt_first_key" {
		t.Fatalf("the first key shown is %q", got.Key)
	}
	times, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.body.dataset.readyAt, document.body.dataset.firstKeyAt]`))
	if err != nil || len(times) != 2 || times[0] == "" || times[1] == "" {
		t.Fatalf("the page's times: %v %v", times, err)
	}
	t.Logf("module %d bytes gzipped; from navigation: module started at %s ms, first key shown at %s ms (the key entered right after)", len(gz), times[0], times[1])
}

// moduleGzip is the gzipped module the page loads, read back from its
// script.
func moduleGzip(t *testing.T) []byte {
	t.Helper()
	files, err := planner.Files(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, b64, _ := strings.Cut(string(files["idemhook.wasm.js"]), "= '")
	b64, _, _ = strings.Cut(b64, "'")
	gz, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(gz) < 1000 {
		t.Fatalf("idemhook.wasm.js holds no module in base64 (%d bytes): %v", len(gz), err)
	}
	return gz
}

// chromium starts headless Chromium for a test, which -short skips.
func chromium(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("drives Chromium; not run with -short")
	}
	return headless.Start(t)
}

// openWatched opens the page keysvc serves in a new browser, watching every
// request; noRequestSinceLoad fails the test for any request made after
// the page had loaded.
func openWatched(t *testing.T) (ctx context.Context, noRequestSinceLoad func()) {
	t.Helper()
	ctx = chromium(t)
	log := headless.Watch(ctx)
	openPage(t, ctx, serve(t)+"/")
	loaded := log.Count()
	if loaded == 0 {
		t.Fatal("no request seen while loading the page: the network log is not working")
	}
	return ctx, func() {
		t.Helper()
		if after := log.Since(loaded); len(after) > 0 {
			t.Errorf("the page made %d requests after it loaded: %v", len(after), after)
		}
	}
}

func openPage(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	exceptions := headless.WatchExceptions(ctx)
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
		t.Fatalf("the planner page did not start within a minute; its status: %q; exceptions: %q", status, exceptions.List())
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
	// The module is built before keysvc serves it: a request waits for a
	// build only so long (see planner.Handler).
	if _, err := planner.Files(io.Discard); err != nil {
		t.Fatal(err)
	}
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
	ctx, noRequestSinceLoad := openWatched(t)
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
	noRequestSinceLoad()
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
	ctx := chromium(t)
	downloads := allowDownloads(t, ctx)
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
			got := unzip(t, download(t, ctx, downloads, "#download-zip", "idemhook.zip"))
			for _, d := range differences(want, got) {
				t.Error(d)
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

// allowDownloads lets the page save files into a new folder, which it
// returns.
func allowDownloads(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// unzip returns a zip's files by name.
func unzip(t *testing.T, zipped []byte) map[string][]byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		got[f.Name], _ = io.ReadAll(rc)
		rc.Close()
	}
	return got
}

// differences says how the page's files differ from the CLI's.
func differences(cli, page map[string][]byte) []string {
	var out []string
	if len(page) != len(cli) {
		out = append(out, fmt.Sprintf("the page has %d files (%v), the CLI writes %d (%v)", len(page), slices.Sorted(maps.Keys(page)), len(cli), slices.Sorted(maps.Keys(cli))))
	}
	for _, name := range slices.Sorted(maps.Keys(cli)) {
		if !bytes.Equal(page[name], cli[name]) {
			out = append(out, fmt.Sprintf("%s differs from the CLI's (%d bytes on the page, %d from the CLI)", name, len(page[name]), len(cli[name])))
		}
	}
	return out
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
// no server at all.
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

	ctx := headless.Start(t)
	log := headless.Watch(ctx)
	openPage(t, ctx, "file://"+filepath.Join(dir, "index.html"))
	got := enter(t, ctx, []byte(`{"id":"evt_from_disk","type":"t"}`), nil, "", "")
	if got.Key != "evt:evt_from_disk" {
		t.Errorf("the page opened from disk shows %q (%s)", got.Key, got.Rule)
	}
	for _, u := range log.Since(0) {
		if !strings.HasPrefix(u, "file://") {
			t.Errorf("the page opened from disk requested %s", u)
		}
	}

}

// For every sample event shipped with the rules presets, the page shows
// the effect key (or the decision made without the database) that
// rules.Evaluate gives, beside the receipt key.
func TestPageShowsTheEffectKey(t *testing.T) {
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
		keyPreset := rs.Provider.Verify // the key preset the provider's receiver uses
		for _, s := range all {
			want := rs.Evaluate(rules.Event{Body: s.Body, Headers: s.Headers}, nil)
			got := enter(t, ctx, s.Body, s.Headers, keyPreset, "")
			h := http.Header{}
			for k, v := range s.Headers {
				h.Set(k, v)
			}
			receipt, err := eventkey.DeriveFor(eventkey.Preset(keyPreset), h, s.Body, "")
			if err != nil {
				t.Fatal(err)
			}
			effect, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`({key: document.getElementById('effect-key').textContent,
  rule: document.getElementById('effect-rule').textContent, row: document.getElementById('effect-row').textContent})`))
			if err != nil {
				t.Fatal(err)
			}
			name := preset + "/" + filepath.Base(s.File)
			if got.Key != receipt.Value {
				t.Errorf("%s: the receipt key %q, want %q", name, got.Key, receipt.Value)
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

// ---- the guided page: provider, guarantee, the options that apply, the
// command, the picture, the layout ----

// evaluate runs js in the page (awaiting a promise) and returns its value.
func evaluate[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	return v
}

// choice is what a user picks: a provider in step 1 (a name of
// generator.ProviderChoices), a guarantee in step 2, and options typed in
// the form (by flag name).
type choice struct {
	Provider, Guarantee string
	Options             map[string]string
}

func (c choice) String() string {
	return fmt.Sprintf("provider %q, %s, %v", c.Provider, c.Guarantee, c.Options)
}

// choose resets the options, then picks c as a user would: the provider
// control and the guarantee through their events, then each option.
func choose(t *testing.T, ctx context.Context, c choice) {
	t.Helper()
	setOptions(t, ctx, nil)
	raw, _ := json.Marshal(c)
	evaluate[chromedp.Void](t, ctx, `(() => {
  const c = `+string(raw)+`;
  const provider = document.getElementById('provider');
  provider.value = c.Provider;
  provider.dispatchEvent(new Event('change', { bubbles: true }));
  document.getElementById('guarantee-' + c.Guarantee).click();
  for (const [name, value] of Object.entries(c.Options || {})) document.getElementById('opt-' + name).value = value;
  document.getElementById('options').dispatchEvent(new Event('change', { bubbles: true }));
})()`)
}

// shellWords splits a command line as a POSIX shell does, for what the
// page writes: blanks between words, single quotes, backslash-newline.
func shellWords(line string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated quote in %q", line)
			}
			word.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '\\' && i+1 < len(line) && line[i+1] == '\n':
			i++
		case c == '\\' && i+1 < len(line):
			word.WriteByte(line[i+1])
			i++
			inWord = true
		case c == '"' || c == '$' || c == '`' || c == '\\':
			return nil, fmt.Errorf("%q at %d: the page quotes with single quotes only (%q)", c, i, line)
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

func TestShellWords(t *testing.T) {
	got, err := shellWords("idemhook generate --out ./x \\\n  --name 'Orders '\\''live'\\''' \\\n  --path a/b")
	want := []string{"idemhook", "generate", "--out", "./x", "--name", "Orders 'live'", "--path", "a/b"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("shellWords: %q %v, want %q", got, err, want)
	}
	if _, err := shellWords(`--name "x"`); err == nil {
		t.Error("a double quote was taken as a word")
	}
}

// pageCommand reads the command the page shows and returns its flags by
// name, checking that it is `idemhook generate --out DIR` followed by
// --flag value pairs of the CLI, each once and none at its default.
func pageCommand(t *testing.T, ctx context.Context) (map[string]string, string) {
	t.Helper()
	line := evaluate[string](t, ctx, `document.getElementById('command').textContent`)
	words, err := shellWords(line)
	if err != nil {
		t.Fatal(err)
	}
	if len(words) < 4 || !slices.Equal(words[:3], []string{"idemhook", "generate", "--out"}) || len(words)%2 != 0 {
		t.Fatalf("the command is not `idemhook generate --out DIR --flag value…`: %q", line)
	}
	values := map[string]string{}
	for i := 4; i+1 < len(words); i += 2 {
		name, ok := strings.CutPrefix(words[i], "--")
		f := generator.FlagFor(name)
		switch {
		case !ok || f == nil:
			t.Fatalf("%q in the command is not a flag of idemhook generate: %q", words[i], line)
		case values[name] != "":
			t.Fatalf("--%s twice in the command: %q", name, line)
		case words[i+1] == f.Default:
			t.Errorf("--%s %s is the default, yet on the command line: %q", name, f.Default, line)
		}
		values[name] = words[i+1]
	}
	return values, line
}

// commandArgs are the arguments of `idemhook generate` for values, in the
// CLI's order.
func commandArgs(values map[string]string) []string {
	var args []string
	for _, f := range generator.Flags {
		if v, ok := values[f.Name]; ok {
			args = append(args, "--"+f.Name, v)
		}
	}
	return args
}

// The choices users make (a provider, a guarantee, options typed), each
// paired with what it must set.
var guidedChoices = []choice{
	{Provider: "", Guarantee: "lease"},
	{Provider: "stripe", Guarantee: "lease", Options: map[string]string{"path": "stripe/live", "name": "Orders 'live'"}},
	{Provider: "", Guarantee: "at-most-once"},
	{Provider: "github", Guarantee: "lease", Options: map[string]string{"lease": "90s"}},
	{Provider: "shopify", Guarantee: "transactional", Options: map[string]string{"business-table": "shop.orders"}},
	{Provider: "stripe", Guarantee: "crypto-node"},
	{Provider: "standardwebhooks", Guarantee: "keysvc", Options: map[string]string{"keysvc-url": "http://keysvc:8080", "keysvc-credential": "keysvc prod token"}},
	{Provider: "slack", Guarantee: "keysvc", Options: map[string]string{"lease": "2m"}},
	{Provider: "github", Guarantee: "node"},
	{Provider: "stripe", Guarantee: "node", Options: map[string]string{"guard": "at-most-once", "node-type": "CUSTOM.idempotencyGuardPostgres"}},
	{Provider: "stripe", Guarantee: "inbox", Options: map[string]string{"outbox-url": "https://fulfilment.example/v1/operations", "outbox-batch": "5"}},
	{Provider: "", Guarantee: "inbox", Options: map[string]string{"db-schema": "payments"}},
	{Provider: "standardwebhooks", Guarantee: "inbox"},
	{Provider: "shopify", Guarantee: "inbox-node", Options: map[string]string{"node-type": "CUSTOM.idempotencyGuardPostgres"}},
}

// For each choice, the command the page shows is `idemhook generate` with
// only the flags that change the files (none the generator would do
// anyway), and running it writes the very files the page's zip holds; the picture has a node (at its position, of its type) for
// every node of each generated workflow and an edge, labelled as n8n labels
// it, for every connection.
func TestPageCommandWritesThePagesFiles(t *testing.T) {
	ctx := chromium(t)
	downloads := allowDownloads(t, ctx)
	openPage(t, ctx, serve(t)+"/")
	for i, c := range guidedChoices {
		if i > 0 && i%8 == 0 {
			openPage(t, ctx, serve(t)+"/") // Chrome stops automatic downloads after ten from one page
		}
		t.Run(c.String(), func(t *testing.T) {
			choose(t, ctx, c)
			if msg := evaluate[string](t, ctx, `[...document.querySelectorAll('.error')].map(e => e.textContent).join('')`); msg != "" {
				t.Fatalf("the page refused the choice: %s", msg)
			}
			values, line := pageCommand(t, ctx)
			for name, v := range c.Options {
				if values[name] != v {
					t.Errorf("--%s %q was typed, the command has %q: %s", name, v, values[name], line)
				}
			}
			t.Logf("the command: %s", strings.ReplaceAll(line, "\\\n ", ""))
			dir := t.TempDir()
			idemhook(t, append([]string{"generate", "--out", dir}, commandArgs(values)...)...)
			cli := readDir(t, dir)
			page := unzip(t, download(t, ctx, downloads, "#download-zip", "idemhook.zip"))
			for _, d := range differences(cli, page) {
				t.Errorf("%s\n(the command: %s)", d, line)
			}
			for name := range values {
				without := maps.Clone(values)
				delete(without, name)
				if files, err := generated(without); err == nil && len(differences(cli, files)) == 0 {
					t.Errorf("--%s %s is on the command line, but the files are the same without it: %s", name, values[name], line)
				}
			}
			checkPicture(t, ctx, cli)
		})
	}
}

// drawn is what the picture shows of one workflow.
type drawn struct {
	Nodes []string `json:"nodes"` // name|type|x|y
	Edges []string `json:"edges"` // from|output|to|input|label
}

// checkPicture compares, for each workflow file, the picture under its tab
// with the file itself.
func checkPicture(t *testing.T, ctx context.Context, files map[string][]byte) {
	t.Helper()
	tabs := evaluate[[]string](t, ctx, `[...document.querySelectorAll('#workflow-tabs [data-file]')].map(b => b.dataset.file)`)
	var workflows []string
	for name := range files {
		if strings.HasSuffix(name, "workflow.json") {
			workflows = append(workflows, name)
		}
	}
	if slices.Sort(workflows); !slices.Equal(slices.Sorted(slices.Values(tabs)), workflows) {
		t.Errorf("the picture's tabs are %v, the workflows %v", tabs, workflows)
	}
	for _, file := range workflows {
		q, _ := json.Marshal(file)
		got := evaluate[drawn](t, ctx, `(() => {
  document.querySelector('#workflow-tabs [data-file=' + JSON.stringify(`+string(q)+`) + ']').click();
  const svg = document.querySelector('#workflow-picture svg');
  if (svg.dataset.file !== `+string(q)+`) return { nodes: ['wrong file: ' + svg.dataset.file], edges: [] };
  const at = (g) => g.getAttribute('transform').match(/-?\d+/g).join('|');
  return {
    nodes: [...svg.querySelectorAll('g.node, g.sticky')].map(g => [g.dataset.node, g.dataset.type, at(g)].join('|')),
    edges: [...svg.querySelectorAll('g.edge')].map(g => [g.dataset.from, g.dataset.output, g.dataset.to, g.dataset.input,
      (g.querySelector('.edge-label') || { textContent: '' }).textContent].join('|')),
  };
})()`)
		want := workflowDrawing(t, files[file])
		slices.Sort(got.Nodes)
		slices.Sort(got.Edges)
		if !slices.Equal(got.Nodes, want.Nodes) {
			t.Errorf("%s: the picture's nodes\n%q\nthe file's\n%q", file, got.Nodes, want.Nodes)
		}
		if !slices.Equal(got.Edges, want.Edges) {
			t.Errorf("%s: the picture's edges\n%q\nthe file's connections\n%q", file, got.Edges, want.Edges)
		}
	}
}

// workflowDrawing is what the picture must show of a workflow file: every
// node at its position, every connection with n8n's label for its output
// (an If node's true and false, an error output's error).
func workflowDrawing(t *testing.T, raw []byte) drawn {
	t.Helper()
	var doc struct {
		Nodes []struct {
			Name, Type, OnError string
			Position            [2]int
			Parameters          struct {
				Operation string
				Options   struct {
					ErrorOutput bool `json:"errorOutput"`
				}
			}
		}
		Connections map[string]map[string][][]struct {
			Node  string
			Index int
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var d drawn
	labels := map[string][]string{}
	for _, n := range doc.Nodes {
		d.Nodes = append(d.Nodes, fmt.Sprintf("%s|%s|%d|%d", n.Name, n.Type, n.Position[0], n.Position[1]))
		labels[n.Name] = []string{""}
		if n.Type == "n8n-nodes-base.if" {
			labels[n.Name] = []string{"true", "false"}
		}
		// The Idempotency Guard names its outputs (n8n-nodes-idemhook's
		// outputsOf; e2e's editor screenshot shows them).
		if slices.Contains(communitynode.Types(), n.Type) {
			switch n.Parameters.Operation {
			case "reserve":
				labels[n.Name] = []string{"New", "Duplicate"}
			case "acquireLease":
				labels[n.Name] = []string{"New", "Duplicate", "In Progress"}
			default:
				labels[n.Name] = []string{"Done"}
			}
			if n.Parameters.Options.ErrorOutput {
				labels[n.Name] = append(labels[n.Name], "Error")
			}
		}
		if n.OnError == "continueErrorOutput" {
			labels[n.Name] = append(labels[n.Name], "error")
		}
	}
	for from, byType := range doc.Connections {
		for _, outputs := range byType {
			for output, targets := range outputs {
				label := ""
				if output < len(labels[from]) {
					label = labels[from][output]
				}
				for _, to := range targets {
					d.Edges = append(d.Edges, fmt.Sprintf("%s|%d|%s|%d|%s", from, output, to.Node, to.Index, label))
				}
			}
		}
	}
	slices.Sort(d.Nodes)
	slices.Sort(d.Edges)
	if len(d.Nodes) == 0 || len(d.Edges) == 0 {
		t.Fatalf("a workflow with %d nodes and %d connections: nothing to compare", len(d.Nodes), len(d.Edges))
	}
	return d
}

// pageState is what the guided tests read back from the page.
type pageState struct {
	Shown   map[string]bool   `json:"shown"`   // each option field: shown (it applies) or hidden
	Fields  map[string]string `json:"fields"`  // each #opt-<flag>'s value
	Preset  string            `json:"preset"`  // #preset
	Errors  string            `json:"errors"`  // every error text
	Missing []string          `json:"missing"` // stable ids not in the page
}

func readState(t *testing.T, ctx context.Context) pageState {
	t.Helper()
	ids := []string{"body", "body-file", "headers", "preset", "scope", "key", "copy-key", "rule", "options", "files", "download-zip",
		"rules-preset", "effect-key", "effect-rule", "effect-row", "provider", "command", "workflow-picture"}
	for _, f := range generator.Flags {
		ids = append(ids, "opt-"+f.Name, "opt-"+f.Name+"-error")
	}
	raw, _ := json.Marshal(ids)
	return evaluate[pageState](t, ctx, `(() => {
  const shown = {}, fields = {};
  for (const el of document.querySelectorAll('#options .option')) shown[el.id.replace(/^opt-|-field$/g, '')] = !el.hidden && !el.closest('[hidden]');
  for (const el of document.querySelectorAll('#options [name]')) fields[el.name] = el.value;
  return { shown, fields, preset: document.getElementById('preset').value,
    errors: [...document.querySelectorAll('.error, [role=alert]')].map(e => e.textContent).join(''),
    missing: `+string(raw)+`.filter(id => !document.getElementById(id)) };
})()`)
}

// effective is what the generator does with the page's command.
func effective(t *testing.T, values map[string]string) generator.Options {
	t.Helper()
	o, err := generator.OptionsFromFlags(values)
	if err != nil {
		t.Fatalf("the page's command: %v", err)
	}
	return o.WithDefaults()
}

// The page guides: nothing is judged before input; the old ids are all
// there; the provider control sets the key preset and --verify (and, for the
// inbox pattern, the rules and the receiver) and #preset still overrides the
// key preset; an option the chosen mode does not read is hidden and not
// sent; and nothing of this makes a request.
func TestPageGuidesTheChoices(t *testing.T) {
	ctx, noRequestSinceLoad := openWatched(t)

	t.Run("nothing is judged before input", func(t *testing.T) {
		s := readState(t, ctx)
		if s.Errors != "" {
			t.Errorf("errors shown before anything was entered: %q", s.Errors)
		}
		if len(s.Missing) > 0 {
			t.Errorf("ids automation relies on are missing: %v", s.Missing)
		}
		for _, when := range []string{"at load", "after a provider and a guarantee were chosen"} {
			if when != "at load" {
				choose(t, ctx, choice{Provider: "stripe", Guarantee: "inbox"})
			}
			if r := evaluate[string](t, ctx, `['key', 'rule', 'effect-key', 'effect-rule'].map(id => document.getElementById(id).textContent).join('')`); r != "" {
				t.Errorf("%s, with no delivery entered, the page judges it: %q", when, r)
			}
		}
	})

	t.Run("the provider sets the key preset and the signature check", func(t *testing.T) {
		for _, p := range generator.ProviderChoices() {
			for _, guarantee := range []string{"lease", "inbox"} {
				if p.Name == "standardwebhooks" && guarantee == "lease" {
					guarantee = "keysvc" // n8n cannot check its signature itself
				}
				choose(t, ctx, choice{Provider: p.Name, Guarantee: guarantee})
				s := readState(t, ctx)
				values, line := pageCommand(t, ctx)
				o := effective(t, values)
				if s.Preset != p.Preset || o.Verify != p.Verify || o.Preset != p.Preset {
					t.Errorf("%s, %s: #preset %q, --verify %q, --preset %q; want %q, %q, %q (%s)", p.Label, guarantee, s.Preset, o.Verify, o.Preset, p.Preset, p.Verify, p.Preset, line)
				}
				if guarantee == "inbox" && (o.Receiver != p.Receiver && p.Receiver != "" || p.Rules != "" && s.Fields["rules"] != p.Rules) {
					t.Errorf("%s, inbox: --receiver %q, --rules %q; want %q, %q (%s)", p.Label, o.Receiver, s.Fields["rules"], p.Receiver, p.Rules, line)
				}
				if s.Errors != "" {
					t.Errorf("%s, %s: %s", p.Label, guarantee, s.Errors)
				}
			}
		}
		choose(t, ctx, choice{Provider: "github", Guarantee: "lease"})
		got := enter(t, ctx, []byte(`{"action":"opened"}`), map[string]string{"X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "", "")
		if got.Key != "gh::72d3162e-cc78-11e3-81ab-4c9367dc0958" {
			t.Errorf("with GitHub chosen and #preset left to follow it, the key is %q (%s)", got.Key, got.Rule)
		}
		got = enter(t, ctx, []byte(`{"event_id":"Ev08MFMKH6"}`), nil, "slack", "")
		values, line := pageCommand(t, ctx)
		if got.Key != "slack::Ev08MFMKH6" || values["preset"] != "slack" || values["verify"] != "github" {
			t.Errorf("#preset slack over GitHub: key %q, command %s", got.Key, line)
		}
	})

	t.Run("an option the mode does not read is hidden and not sent", func(t *testing.T) {
		typed := map[string]string{"lease": "90s", "keysvc-url": "http://keysvc:9", "outbox-batch": "7", "account": "acct_9", "events-table": "ev9"}
		cases := []struct {
			guarantee, outbox string
			hidden, sent      []string
		}{
			{"at-most-once", "", []string{"lease", "keysvc-url", "outbox-batch", "account"}, []string{"events-table"}},
			{"lease", "", []string{"keysvc-url", "outbox-batch", "account"}, []string{"lease", "events-table"}},
			{"keysvc", "", []string{"outbox-batch", "account", "events-table"}, []string{"lease", "keysvc-url"}},
			{"inbox", "", []string{"lease", "keysvc-url", "outbox-batch", "events-table"}, []string{"account"}},
			{"inbox", "https://api.example/ops", []string{"lease", "keysvc-url", "events-table"}, []string{"account", "outbox-batch"}},
		}
		for _, c := range cases {
			options := maps.Clone(typed)
			if c.outbox != "" {
				options["outbox-url"] = c.outbox
			}
			choose(t, ctx, choice{Provider: "stripe", Guarantee: c.guarantee, Options: options})
			s := readState(t, ctx)
			values, line := pageCommand(t, ctx)
			for _, name := range c.hidden {
				if s.Shown[name] {
					t.Errorf("%s: --%s is shown", c.guarantee, name)
				}
				if _, ok := values[name]; ok {
					t.Errorf("%s: --%s is sent: %s", c.guarantee, name, line)
				}
			}
			for _, name := range c.sent {
				if !s.Shown[name] || values[name] != options[name] {
					t.Errorf("%s: --%s shown %v, sent %q: %s", c.guarantee, name, s.Shown[name], values[name], line)
				}
			}
			for _, f := range generator.Flags {
				if s.Shown[f.Name] && f.Pattern != "" && f.Pattern != effective(t, values).Pattern {
					t.Errorf("%s: --%s of the %s pattern is shown", c.guarantee, f.Name, f.Pattern)
				}
			}
			if s.Errors != "" {
				t.Errorf("%s: %s", c.guarantee, s.Errors)
			}
		}
	})

	noRequestSinceLoad()
}

// optionSamples are values other than the default for every option (some
// options several, since one value can be what a mode does anyway).
var optionSamples = map[string][]string{
	"pattern": {"inbox", "reserve"}, "path": {"other/path"}, "name": {"Other name"}, "credential": {"Other Postgres"},
	"retention": {"45d"}, "verify": {"stripe", "shopify", "none"}, "verify-credential": {"Other secret"}, "tolerance": {"2m"},
	"hashing": {"crypto-node", "keysvc", "node", "code-node"}, "node-store": {"keysvc", "postgres"}, "node-type": {"CUSTOM.idempotencyGuardPostgres", "n8n-nodes-idemhook-postgres.idempotencyGuardPostgres"}, "guard": {"lease", "transactional", "at-most-once"}, "lease": {"90s", "3m"},
	"events-table": {"other_events"}, "business-table": {"other_business"}, "save-success": {"all", "none"},
	"save-errors": {"all", "none"}, "save-manual": {"true", "false"}, "execution-timeout": {"7m"},
	"keysvc-url": {"http://keysvc.other:1"}, "keysvc-credential": {"keysvc token", "other token"}, "receiver": {"keysvc", "n8n"},
	"account": {"acct_other"}, "events": {"payment_intent.succeeded", "invoice.paid", "orders/paid", "deployment"}, "defer-limit": {"2h"}, "claim-lease": {"3m"},
	"max-attempts": {"7"}, "retry-backoff": {"40s"}, "db-schema": {"other"}, "sweep-every": {"2m"},
	"outbox-url": {"http://api.other/ops"}, "outbox-credential": {"outbox token"}, "outbox-max-attempts": {"3"},
	"outbox-backoff": {"20s"}, "outbox-timeout": {"20s"}, "outbox-batch": {"5", "9"},
}

// modeOptions are the choices of steps 1 and 2: another value of one of
// them can be refused with the options of the choice made (--pattern inbox
// with --lease, --receiver n8n with Standard Webhooks), so each need only
// change the files for some choice.
var modeOptions = []string{"pattern", "hashing", "guard", "receiver"}

// mirrored options have their control in the steps (#preset, #scope,
// #rules-preset) and a hidden field in the form.
var mirrored = []string{"preset", "scope", "rules"}

// changesFiles reports whether setting flag to one of its samples, on top
// of the page's command, gives other files than the command itself: an
// option the generator refuses or ignores there does not apply.
func changesFiles(t *testing.T, command map[string]string, flag string) bool {
	t.Helper()
	base, err := generated(command)
	if err != nil {
		t.Fatalf("the page's command: %v", err)
	}
	for _, v := range optionSamples[flag] {
		with := maps.Clone(command)
		with[flag] = v
		if files, err := generated(with); err == nil && len(differences(base, files)) > 0 {
			return true
		}
	}
	return false
}

// generated is what `idemhook generate` writes for flag values, or why it
// refuses them.
func generated(values map[string]string) (map[string][]byte, error) {
	o, err := generator.OptionsFromFlags(values)
	if err != nil {
		return nil, err
	}
	return generator.Files(o)
}

// The options the page shows for a choice are the ones the generator
// reads: for each choice, an option hidden changes no file when set (the
// generator ignores or refuses it there), and an option shown changes them
// (a mode option: for some choice it is shown for). Every option is shown
// for some choice: none is out of reach.
func TestOptionsShownAreTheOnesThatChangeTheFiles(t *testing.T) {
	for _, f := range generator.Flags {
		if optionSamples[f.Name] == nil && !slices.Contains(mirrored, f.Name) {
			t.Fatalf("--%s has no sample value here: add one to optionSamples", f.Name)
		}
	}
	ctx := chromium(t)
	openPage(t, ctx, serve(t)+"/")
	shownSomewhere := map[string]bool{}
	changesSomewhere := map[string]bool{}
	for _, c := range guidedChoices {
		choose(t, ctx, c)
		s := readState(t, ctx)
		command, line := pageCommand(t, ctx)
		for _, f := range generator.Flags {
			if slices.Contains(mirrored, f.Name) {
				continue
			}
			shown, ok := s.Shown[f.Name]
			if !ok {
				t.Fatalf("--%s has no field", f.Name)
			}
			changes := changesFiles(t, command, f.Name)
			if !shown && changes {
				t.Errorf("%v: --%s is hidden, but it changes the files of `%s`", c, f.Name, line)
			}
			if shown && !changes && !slices.Contains(modeOptions, f.Name) {
				t.Errorf("%v: --%s is shown, but changes nothing in the files of `%s`", c, f.Name, line)
			}
			shownSomewhere[f.Name] = shownSomewhere[f.Name] || shown
			changesSomewhere[f.Name] = changesSomewhere[f.Name] || shown && changes
		}
	}
	for _, f := range generator.Flags {
		switch {
		case slices.Contains(mirrored, f.Name):
		case !shownSomewhere[f.Name]:
			t.Errorf("--%s is shown for none of the choices", f.Name)
		case !changesSomewhere[f.Name]:
			t.Errorf("--%s is shown, but changes the files for none of the choices it is shown for", f.Name)
		}
	}
}

// screen is a window size the page must work at.
type screen struct {
	name          string
	width, height int64
	mobile        bool
}

var (
	desktop = screen{"desktop", 1280, 800, false}
	phone   = screen{"phone", 390, 844, true}
)

func emulate(t *testing.T, ctx context.Context, s screen) {
	t.Helper()
	var opts []chromedp.EmulateViewportOption
	if s.mobile {
		opts = append(opts, chromedp.EmulateMobile)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(s.width, s.height, opts...)); err != nil {
		t.Fatal(err)
	}
}

// layout is where things are on the page, in CSS pixels from its top.
type layout struct {
	Key, Zip    float64 // the bottom of #key and of #download-zip
	Height      float64 // the page's
	Wide        bool    // it scrolls sideways
	ScrollWidth float64
	WindowWidth float64
	Inner       []string // the elements, but the picture, that scroll sideways inside
}

func measure(t *testing.T, ctx context.Context) layout {
	t.Helper()
	return evaluate[layout](t, ctx, `(() => {
  const bottom = (id) => document.getElementById(id).getBoundingClientRect().bottom + scrollY;
  const d = document.documentElement;
  const inner = [...document.body.querySelectorAll('*')].filter(el => el.id !== 'workflow-picture' && !el.closest('svg')
    && /auto|scroll/.test(getComputedStyle(el).overflowX) && el.scrollWidth > el.clientWidth + 1).map(el => el.id || el.tagName);
  return { Key: bottom('key'), Zip: bottom('download-zip'), Height: d.scrollHeight, Wide: d.scrollWidth > innerWidth,
    ScrollWidth: d.scrollWidth, WindowWidth: innerWidth, Inner: inner };
})()`)
}

const stripeEvent = `{"id":"evt_1NqXYZ2eZvKYlo2C","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3MtwBwLkdIwHu7ix28a3tqPa","object":"payment_intent","amount":2000,"currency":"usd","metadata":{"order_id":"6735"}}}}`

// At 1280×800 the key and the download are on the first two screens, for
// each pattern; at 390 px (a phone) the page never scrolls sideways, nor
// anything in it but the picture: with each pattern, a long unbroken body
// and key, and a long error. Screenshots
// at both widths go to $IDEMHOOK_ARTIFACTS_DIR (docs/planner.png and
// docs/planner-phone.png are copies).
func TestPageLayout(t *testing.T) {
	ctx := chromium(t)
	url := serve(t) + "/"
	long := `{"id":"` + strings.Repeat("x", 300) + `","type":"` + strings.Repeat("y", 500) + `"}`
	for _, s := range []screen{desktop, phone} {
		openPage(t, ctx, url) // as a visitor finds it: nothing unfolded by the error below
		emulate(t, ctx, s)
		for _, c := range []choice{
			{Provider: "stripe", Guarantee: "lease"},
			{Provider: "stripe", Guarantee: "inbox", Options: map[string]string{"outbox-url": "https://fulfilment.example/v1/operations"}},
			{Provider: "standardwebhooks", Guarantee: "keysvc"},
			{Provider: "github", Guarantee: "crypto-node", Options: map[string]string{"events-table": "events; DROP TABLE x"}},
		} {
			choose(t, ctx, c)
			for _, body := range []string{stripeEvent, long} {
				enter(t, ctx, []byte(body), nil, "", "")
				m := measure(t, ctx)
				if body == stripeEvent {
					t.Logf("%s (%d×%d), %s: the key ends at %.0f px, the download at %.0f px; the page is %.0f px tall", s.name, s.width, s.height, c.Guarantee, m.Key, m.Zip, m.Height)
				}
				if m.Wide {
					t.Errorf("%s, %v: the page scrolls sideways (%.0f px wide in a %.0f px window)", s.name, c, m.ScrollWidth, m.WindowWidth)
				}
				if len(m.Inner) > 0 {
					t.Errorf("%s, %v: %v scroll sideways (only the picture may)", s.name, c, m.Inner)
				}
				if s == desktop && (m.Key > 2*float64(s.height) || m.Zip > 2*float64(s.height)) {
					t.Errorf("%s, %v: the key ends at %.0f px and the download at %.0f px, not on the first two screens (%d px)", s.name, c, m.Key, m.Zip, 2*s.height)
				}
			}
		}
	}
	artifacts := os.Getenv("IDEMHOOK_ARTIFACTS_DIR")
	if artifacts == "" {
		artifacts = filepath.Join(os.TempDir(), "idemhook-artifacts")
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	openPage(t, ctx, url)
	for _, s := range []screen{desktop, phone} {
		emulate(t, ctx, s)
		choose(t, ctx, choice{Provider: "stripe", Guarantee: "transactional"})
		enter(t, ctx, []byte(stripeEvent), nil, "", "")
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(artifacts, "planner-"+s.name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
}
