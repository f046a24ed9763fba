package keysvc_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/keysvc/inbox/inboxtest"
	"github.com/idemhook/idemhook/signature"
)

// lockedBuffer is a log both the service's goroutines and the test use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// inOrder fails the test unless each of steps is logged, after the one
// before it.
func inOrder(t *testing.T, log string, steps ...string) {
	t.Helper()
	at := -1
	for _, s := range steps {
		i := strings.Index(log, s)
		if i < 0 || i < at {
			t.Errorf("%q is not logged after the steps before it (%v):\n%s", s, steps, log)
			return
		}
		at = i
	}
}

// trickle starts a POST to url whose body is half sent; the returned
// function sends the rest and waits for the answer.
func trickle(t *testing.T, url string, header map[string]string, body []byte) (finish func() (int, string)) {
	t.Helper()
	pr, pw := io.Pipe()
	type answer struct {
		status int
		body   string
	}
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", url, pr)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		req.ContentLength = int64(len(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{body: err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- answer{resp.StatusCode, string(b)}
	}()
	half := len(body) / 2
	pw.Write(body[:half])
	time.Sleep(300 * time.Millisecond) // the request reaches the server and is in flight
	return func() (int, string) {
		pw.Write(body[half:])
		pw.Close()
		a := <-done
		return a.status, a.body
	}
}

// closing calls Close in the background and checks that it is still
// waiting; wait returns its error.
func closing(t *testing.T, svc *keysvc.Service) (wait func() error) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- svc.Close(context.Background()) }()
	stillWaiting(t, closed, "a request in flight")
	return func() error { return <-closed }
}

func stillWaiting(t *testing.T, closed chan error, what string) {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before %s finished", err, what)
	default:
	}
}

func debugLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Close lets a request in flight finish before it closes the store: a
// reservation whose body is still arriving when Close is called is made and
// answered 201; then the store is closed (its file opens again, holding the
// key) and nothing more is served.
func TestServiceCloseFinishesRequestsBeforeTheStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keysvc.db")
	var log lockedBuffer
	svc, err := keysvc.StartService(context.Background(), keysvc.ServiceConfig{DBFile: file, Addr: "127.0.0.1:0", Logger: debugLogger(&log)})
	if err != nil {
		t.Fatal(err)
	}
	finish := trickle(t, svc.URL+"/v1/reservations", nil, []byte(`{"id":"evt_in_flight"}`))
	wait := closing(t, svc)
	if status, body := finish(); status != http.StatusCreated || !strings.Contains(body, "evt:evt_in_flight") {
		t.Errorf("the reservation in flight: %d %s, want 201 for evt:evt_in_flight", status, body)
	}
	if err := wait(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := http.Post(svc.URL+"/v1/reservations", "application/json", strings.NewReader(`{"id":"evt_late"}`)); err == nil {
		t.Error("the service still answers after Close")
	}
	store, err := keysvc.OpenBolt(file)
	if err != nil {
		t.Fatalf("the store is still open after Close: %v", err)
	}
	defer store.Close()
	if _, reserved, err := store.Reserve(context.Background(), "evt:evt_in_flight"); err != nil || reserved {
		t.Errorf("the key of the request in flight is not in the store (reserved again: %v, %v)", reserved, err)
	}
	inOrder(t, log.String(), "shutting down: finishing in-flight requests", "shutdown: requests finished", "shutdown: store closed")
}

// Close stops keysvc in one order, on PostgreSQL with the inbox: the HTTP
// server (a delivery whose body is still arriving is saved and answered),
// then the inbox (a forward in flight to a slow target finishes and its
// outcome is recorded), last the store, whose pool both used.
func TestServiceClosesInOneOrder(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	release, arrived := make(chan struct{}), make(chan struct{}, 10)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	defer target.Close()
	var once sync.Once
	releaseTarget := func() { once.Do(func() { close(release) }) }
	defer releaseTarget() // before target.Close, which waits for the held forwards
	const schema, table = "ks_service_order", "ks_service_order_events"
	t.Cleanup(func() {
		pg.Business.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		pg.Business.Exec(ctx, "DROP TABLE IF EXISTS "+table)
	})
	secrets := map[signature.Provider][]string{signature.ProviderStripe: {inboxSecret}}
	var log lockedBuffer
	svc, err := keysvc.StartService(ctx, keysvc.ServiceConfig{
		DatabaseURL: pg.BusinessDSN, PG: keysvc.PGOptions{Table: table, CreateSchema: true},
		Endpoints: inboxtest.Endpoints(t, fmt.Sprintf(`{"endpoints":[{"name":"stripe","provider":"stripe","target":%q}]}`, target.URL), secrets),
		Inbox:     inbox.Options{Schema: schema, CreateSchema: true}, Addr: "127.0.0.1:0", Logger: debugLogger(&log),
	})
	if err != nil {
		t.Fatal(err)
	}
	signed := func(id string) (map[string]string, []byte) {
		body := []byte(`{"id":"` + id + `","type":"payment_intent.succeeded"}`)
		h, err := signature.ProviderStripe.Sign(signature.Unsigned{Body: body, Secret: inboxSecret})
		if err != nil {
			t.Fatal(err)
		}
		h["Content-Type"] = "application/json"
		return h, body
	}
	h, body := signed("evt_forwarding")
	if status, answer := trickle(t, svc.URL+"/v1/inbox/stripe", h, body)(); status != http.StatusOK {
		t.Fatalf("the first delivery: %d %s", status, answer)
	}
	<-arrived // its forward is in flight, held by the target
	h, body = signed("evt_arriving")
	finish := trickle(t, svc.URL+"/v1/inbox/stripe", h, body)
	closed := make(chan error, 1)
	go func() { closed <- svc.Close(ctx) }()
	stillWaiting(t, closed, "the delivery in flight")
	if status, answer := finish(); status != http.StatusOK || !strings.Contains(answer, `"received"`) {
		t.Errorf("the delivery in flight when Close was called: %d %s, want 200 received", status, answer)
	}
	stillWaiting(t, closed, "the forward in flight")
	releaseTarget()
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	states := map[string]string{}
	rows, err := pg.Business.Query(ctx, "SELECT event_id, state FROM "+schema+".inbox_events")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, state string
		rows.Scan(&id, &state)
		states[id] = state
	}
	if states["evt:evt_forwarding"] != "forwarded" || states["evt:evt_arriving"] == "" {
		t.Errorf("inbox rows %v: want evt_forwarding forwarded (its outcome recorded before the store closed) and evt_arriving saved", states)
	}
	inOrder(t, log.String(), "shutting down: finishing in-flight requests", "shutdown: requests finished", "shutdown: inbox stopped", "shutdown: store closed")
}
