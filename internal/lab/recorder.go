package lab

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Recorder is the lab's stand-in for the API the inbox pattern's outbox
// calls: it keeps the outbox contract (POST {url} with an Idempotency-Key
// performs the operation once per key, and a repeat answers with the first
// result; GET {url}/{key} says whether it happened) and shows what it
// received, at / (a page) and /v1/operations (JSON), and on Log.
type Recorder struct {
	// URL is the outbox URL to generate with: http://127.0.0.1:P/v1/operations.
	URL string
	// Page shows what it received.
	Page string

	srv *http.Server
	log io.Writer

	mu  sync.Mutex
	ops []*Operation
}

// Operation is one operation key as the recorder saw it.
type Operation struct {
	Key   string          `json:"operation_key"`
	Calls int             `json:"calls"`
	First time.Time       `json:"first_received"`
	Body  json.RawMessage `json:"payload"`
}

const maxOperationBody = 1 << 20

// StartRecorder serves a Recorder on a free loopback port; each call is
// logged as a line on log.
func StartRecorder(log io.Writer) (*Recorder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	r := &Recorder{URL: base + "/v1/operations", Page: base + "/", log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/operations", r.perform)
	mux.HandleFunc("GET /v1/operations/{key}", r.lookup)
	mux.HandleFunc("GET /v1/operations", r.list)
	mux.HandleFunc("GET /{$}", r.page)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go r.srv.Serve(ln)
	return r, nil
}

// Operations returns what the recorder received, oldest first.
func (r *Recorder) Operations() []Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Operation, len(r.ops))
	for i, op := range r.ops {
		out[i] = *op
	}
	return out
}

// Close stops serving.
func (r *Recorder) Close() error { return r.srv.Close() }

func (r *Recorder) find(key string) *Operation {
	for _, op := range r.ops {
		if op.Key == key {
			return op
		}
	}
	return nil
}

func (r *Recorder) perform(w http.ResponseWriter, req *http.Request) {
	key := req.Header.Get("Idempotency-Key")
	if key == "" {
		answer(w, http.StatusBadRequest, map[string]any{"error": "an Idempotency-Key header is required"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxOperationBody))
	if err != nil || !json.Valid(body) {
		answer(w, http.StatusBadRequest, map[string]any{"error": "the body must be JSON of at most 1 MiB"})
		return
	}
	r.mu.Lock()
	op := r.find(key)
	first := op == nil
	if first {
		op = &Operation{Key: key, First: time.Now(), Body: body}
		r.ops = append(r.ops, op)
	}
	op.Calls++
	calls := op.Calls
	r.mu.Unlock()
	what := "performed"
	if !first {
		what = fmt.Sprintf("repeated (call %d): answered with the first result, performed nothing", calls)
	}
	fmt.Fprintf(r.log, "lab outbox API: POST %s %s\n", strings.ToValidUTF8(key, "?"), what)
	answer(w, http.StatusOK, map[string]any{"operation_key": key, "status": "performed", "calls": calls})
}

func (r *Recorder) lookup(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	op := r.find(req.PathValue("key"))
	var found Operation
	if op != nil {
		found = *op
	}
	r.mu.Unlock()
	if op == nil {
		answer(w, http.StatusNotFound, map[string]any{"error": "no such operation"})
		return
	}
	answer(w, http.StatusOK, map[string]any{"operation_key": found.Key, "status": "performed", "calls": found.Calls})
}

func (r *Recorder) list(w http.ResponseWriter, _ *http.Request) {
	answer(w, http.StatusOK, map[string]any{"operations": r.Operations()})
}

var recorderPage = template.Must(template.New("page").Parse(`<!doctype html>
<meta charset="utf-8"><title>idemhook lab: outbox API</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}td,th{padding:.3em .8em;text-align:left;vertical-align:top}pre{margin:0}</style>
<h1>What the outbox sent</h1>
<p>The lab's stand-in for your API: each operation key is performed once; a repeat is answered with the first result.</p>
<table><tr><th>operation key</th><th>calls</th><th>first received</th><th>payload</th></tr>
{{range .}}<tr><td>{{.Key}}</td><td>{{.Calls}}</td><td>{{.First.Format "15:04:05"}}</td><td><pre>{{printf "%s" .Body}}</pre></td></tr>
{{else}}<tr><td colspan="4">nothing yet</td></tr>{{end}}</table>`))

func (r *Recorder) page(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_ = recorderPage.Execute(w, r.Operations())
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
