package planner

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// Handler serves the page's files under prefix ("/" or "/planner/"): the
// page at the prefix itself, each file by name, gzipped for clients that
// accept it. Every answer forbids the page to connect anywhere. While the
// module is being built (the first request of a process that does not carry
// it), a request waits up to buildWait and then gets a 503 that says so and
// asks the browser to come back; a build that failed gets a 503 with why.
func Handler(prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, prefix)
		if name == "" {
			name = "index.html"
		}
		if !servedName(name) {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", csp)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		a := begin(io.Discard)
		select {
		case <-a.done:
		case <-r.Context().Done():
			return
		case <-time.After(buildWait):
			h.Set("Retry-After", "5")
			h.Set("Refresh", "5")
			http.Error(w, "The planner page's WebAssembly module is being built from idemhook's Go source (the first time this process serves the page: seconds, a minute or two with an empty go build cache). This page reloads itself.", http.StatusServiceUnavailable)
			return
		}
		if a.err != nil {
			http.Error(w, "The planner page cannot be served: "+a.err.Error(), http.StatusServiceUnavailable)
			return
		}
		body := a.files[name]
		h.Set("Content-Type", contentType(name))
		h.Set("Vary", "Accept-Encoding")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			h.Set("Content-Encoding", "gzip")
			body = gzipped(name, body)
		}
		http.ServeContent(w, r, name, startTime, bytes.NewReader(body))
	})
}

// buildWait is how long a request waits for the module: under keysvc's
// default write timeout (10 s), after which the answer would be cut.
var buildWait = 5 * time.Second

// servedName reports whether name is one of the page's files, which is
// known without building the module.
func servedName(name string) bool {
	if name == wasmExec || name == wasmScript {
		return true
	}
	if strings.Contains(name, "/") {
		return false
	}
	_, err := fs.Stat(web, "web/"+name)
	return err == nil
}

// csp matches the page's own meta policy: its own files, WebAssembly, no
// connection of any kind.
const csp = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' blob: data:; connect-src 'none'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

var (
	gzMu    sync.Mutex
	gzCache = map[string][]byte{}
)

// gzipped compresses a file once and keeps the result.
func gzipped(name string, body []byte) []byte {
	gzMu.Lock()
	defer gzMu.Unlock()
	if b, ok := gzCache[name]; ok {
		return b
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(body)
	zw.Close()
	gzCache[name] = buf.Bytes()
	return gzCache[name]
}
