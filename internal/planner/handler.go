package planner

import (
	"bytes"
	"compress/gzip"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
)

// Handler serves the page's files under prefix ("/" or "/planner/"): the
// page at the prefix itself, each file by name, gzipped for clients that
// accept it. Every answer forbids the page to connect anywhere.
func Handler(prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, prefix)
		if name == "" {
			name = "index.html"
		}
		files, err := Files()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		body, ok := files[name]
		if !ok || strings.Contains(name, "/") {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", contentType(name))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", csp)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		h.Set("Vary", "Accept-Encoding")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			h.Set("Content-Encoding", "gzip")
			body = gzipped(name, body)
		}
		http.ServeContent(w, r, name, startTime, bytes.NewReader(body))
	})
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
