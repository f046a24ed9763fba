package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// StallEnv names the environment variable that sets how long an install
// may make no progress before it is given up (a Go duration: "10m").
const StallEnv = "IDEMHOOK_INSTALL_STALL"

// defaultStall is how long an install may make no progress: npm at
// --loglevel=silly writes a line for every manifest, request and tarball,
// so minutes without a line and without a byte downloaded mean a registry
// that does not answer. A whole install of n8n here (2026-12-07: 276 s,
// 16,755 lines, tarballs from the registry with connections reset and
// retried) was silent 75 s at the longest; three minutes also covers the
// largest tarball of n8n's tree (53 MB) alone on a link of 300 kB/s.
const defaultStall = 3 * time.Minute

// installStall is $IDEMHOOK_INSTALL_STALL, else defaultStall.
func installStall() (time.Duration, error) {
	v := os.Getenv(StallEnv)
	if v == "" {
		return defaultStall, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: give how long an install may make no progress, such as 10m", StallEnv, v)
	}
	return d, nil
}

// StallError is an install given up because npm made no progress: no
// line from npm and no byte downloaded for After.
type StallError struct {
	Spec     string        // what was being installed: "n8n@2.41.1"
	After    time.Duration // how long nothing moved
	LastLine string        // npm's last line, without its "npm silly" prefix
	URL      string        // the last address npm named: what it was waiting on
	Answers  int           // registry requests answered before it stalled
}

func (e *StallError) Error() string {
	waiting := "the npm registry"
	if e.URL != "" {
		waiting = e.URL
	}
	return fmt.Sprintf("npm install %s made no progress for %s and was given up: it was waiting on %s (%d registry requests had been answered; npm's last line: %q). "+
		"Check the network and npm's registry (npm config get registry); on a slow network allow longer with %s=10m",
		e.Spec, e.After, waiting, e.Answers, e.LastLine, StallEnv)
}

// npmWatch follows an npm install: its output (at --loglevel=silly), to say
// what it is doing and collect its errors, and the downloads it has in
// flight (the npm cache's tmp folder, where a response is written as it
// arrives), so that a slow download counts as progress.
type npmWatch struct {
	mu       sync.Mutex
	partial  []byte    // an unfinished line
	lastLine string    // npm's last line, without its prefix
	lastURL  string    // the last address a line named
	lineAt   time.Time // when npm wrote its last line
	moved    time.Time // the last line, or the last change in the bytes in flight
	answers  int       // "npm http fetch" lines: requests answered
	errors   []string  // "npm error" (npm 7 to 8: "npm ERR!") lines
	tail     []string  // the last lines that are not silly or verbose, for a failure
	cacheTmp string    // the npm cache's tmp folder, once npm named its log file
	inFlight int64     // bytes in cacheTmp at the last look
}

var (
	urlInLine = regexp.MustCompile(`https?://[^\s'"]+`)
	// userinfo is a user and password in an address (a registry's), which
	// no line of ours repeats.
	userinfo = regexp.MustCompile(`(https?://)[^/\s@]+@`)
)

func newNPMWatch(start time.Time) *npmWatch { return &npmWatch{moved: start} }

// Write takes npm's output (stdout and stderr both), line by line.
func (w *npmWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(strings.TrimRight(string(w.partial[:i]), "\r"))
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

func (w *npmWatch) line(l string) {
	if strings.TrimSpace(l) == "" {
		return
	}
	l = userinfo.ReplaceAllString(l, "${1}***@")
	w.lineAt = time.Now()
	w.moved = w.lineAt
	level, text, _ := strings.Cut(strings.TrimPrefix(l, "npm "), " ")
	switch level {
	case "error", "ERR!":
		w.errors = append(w.errors, strings.TrimSpace(text))
	case "http":
		if strings.HasPrefix(text, "fetch ") {
			w.answers++
		}
	case "verbose", "verb":
		// npm names its log file early; the cache it logs into holds tmp/.
		if f, ok := strings.CutPrefix(text, "logfile "); ok && filepath.IsAbs(f) && strings.HasSuffix(f, ".log") {
			w.cacheTmp = filepath.Join(filepath.Dir(filepath.Dir(f)), "_cacache", "tmp")
		}
	}
	if level != "silly" && level != "sill" && level != "verbose" && level != "verb" {
		w.tail = append(w.tail, l)
		if len(w.tail) > 40 {
			w.tail = w.tail[1:]
		}
	}
	if u := urlInLine.FindString(text); u != "" {
		w.lastURL = u
	}
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	w.lastLine = text
}

// look counts the bytes npm has in flight; a change is progress.
func (w *npmWatch) look() {
	w.mu.Lock()
	dir := w.cacheTmp
	w.mu.Unlock()
	if dir == "" {
		return
	}
	entries, _ := os.ReadDir(dir)
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n != w.inFlight {
		w.inFlight = n
		w.moved = time.Now()
	}
}

// status is one line on where the install is.
func (w *npmWatch) status(now time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := fmt.Sprintf("%d registry requests answered", w.answers)
	if w.inFlight > 0 {
		s += ", " + size(w.inFlight) + " downloading"
	}
	if w.lastLine == "" {
		return s + "; nothing from npm yet"
	}
	return s + fmt.Sprintf("; npm's last line, %s ago: %s", now.Sub(w.lineAt).Round(time.Second), w.lastLine)
}

// size says a number of bytes the way people read it.
func size(n int64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d bytes", n)
}

// stalled returns the StallError for spec when nothing moved for stall.
func (w *npmWatch) stalled(spec string, stall time.Duration, now time.Time) *StallError {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.moved) < stall {
		return nil
	}
	return &StallError{Spec: spec, After: stall, LastLine: w.lastLine, URL: w.lastURL, Answers: w.answers}
}

// failure is what npm said when it failed: its error lines, else the tail
// of what it wrote above silly and verbose.
func (w *npmWatch) failure() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errors) > 0 {
		return strings.Join(w.errors, "\n")
	}
	return strings.Join(w.tail, "\n")
}
