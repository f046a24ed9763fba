package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemhook/idemhook/internal/headless"
	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/console"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/keysvc/inbox/inboxtest"
)

const (
	pageRead  = "page-read-token-0123456789"
	pageAdmin = "page-admin-token-0123456789"
)

// consoleServer is a keysvc whose inbox and n8n pattern share a schema:
// two endpoints with entries forwarded and one failed (its target answered
// 500 while down), and the pattern's rejected, deferred and processed
// events and failed and ambiguous tasks. healthy brings the target up.
func consoleServer(t *testing.T, schema string) (srv *httptest.Server, in *inbox.Inbox, failed, waiting int64, healthy *atomic.Bool) {
	t.Helper()
	ctx := context.Background()
	tables := inboxtest.Pattern(t, pg.Business, schema)
	healthy = &atomic.Bool{}
	healthy.Store(true)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/webhook/crm" {
			w.Header().Set("Retry-After", "120")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if !healthy.Load() {
			http.Error(w, "n8n is down", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(target.Close)
	in = inboxtest.Open(t, pg.Business, schema, fmt.Sprintf(`{"endpoints":[{"name":"stripe","target":%q,"max_attempts":1},{"name":"shop","target":%q},{"name":"crm","target":%q}]}`,
		target.URL+"/webhook/stripe", target.URL+"/webhook/shop", target.URL+"/webhook/crm"), nil, inbox.Options{RecoverAfter: time.Hour})
	receive := func(endpoint, body string) int64 {
		e, _ := in.Endpoint(endpoint)
		r, err := in.Receive(ctx, e, http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=1764633600,v1=5257a869e7ec…"}}, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return r.InboxID
	}
	wait := func(id int64, state string) {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if e, _ := in.Entry(ctx, "", id); e.State == state {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("entry %d never became %s", id, state)
			}
		}
	}
	for i, typ := range []string{"payment_intent.succeeded", "checkout.session.completed", "charge.refunded"} {
		wait(receive("stripe", fmt.Sprintf(`{"id":"evt_page_ok_%d","type":%q,"data":{"object":{"metadata":{"order_id":"o-%d"}}}}`, i, typ, i)), "forwarded")
	}
	wait(receive("shop", `{"id":"evt_page_shop","type":"orders/paid"}`), "forwarded")
	// The crm target asks for two minutes: its entry waits, received.
	waiting = receive("crm", `{"id":"evt_page_crm","type":"contact.created"}`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if e, _ := in.Entry(ctx, "", waiting); len(e.Deliveries) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the crm entry was never tried")
		}
	}
	healthy.Store(false)
	failed = receive("stripe", `{"id":"evt_page_failed","type":"payment_intent.succeeded","data":{"object":{"metadata":{"order_id":"o-9","email":"ada@example.com"}}}}`)
	wait(failed, "failed")
	for _, r := range []struct{ id, typ, state, reason, due string }{
		{"evt:n8n_refund", "charge.refunded", "rejected", "a partial refund: the example domain applies full refunds only", "NULL"},
		{"evt:n8n_early_refund", "charge.refunded", "deferred", "order o-4 is not confirmed yet: the refund waits for its payment", "now() + interval '4 minutes'"},
		{"evt:n8n_paid", "payment_intent.succeeded", "processed", "", "NULL"},
	} {
		if _, err := pg.Business.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (account, event_id, event_type, body, state, attempts, last_error, next_attempt_at)
VALUES ('default', $1, $2, '\x7b7d', $3, 2, nullif($4, ''), %s)`, tables.Inbox(), r.due), r.id, r.typ, r.state, r.reason); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct{ key, state, errText string }{
		{"order_confirmation:o-1", "failed", "the API answered 400: {\"error\":\"unknown order\"}"},
		{"order_confirmation:o-2", "ambiguous", "timeout after 10s: the call may have been performed"},
		{"refund_notice:o-3:ch_3", "sent", ""},
	} {
		if _, err := pg.Business.Exec(ctx, "INSERT INTO "+tables.Outbox().String()+` (operation_key, kind, payload, state, attempts, last_error)
VALUES ($1, split_part($1, ':', 1), '{}', $2, 3, nullif($3, ''))`, r.key, r.state, r.errText); err != nil {
			t.Fatal(err)
		}
	}
	p, err := console.OpenPattern(ctx, pg.Business, schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := keysvc.OpenBolt(filepath.Join(t.TempDir(), "keysvc.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	sum := func(tok string) string {
		return fmt.Sprintf("%x", sha256.Sum256([]byte(tok)))
	}
	tokens, err := keysvc.ParseTokens(strings.NewReader("viewer read " + sum(pageRead) + "\nops admin " + sum(pageAdmin) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(keysvc.New(keysvc.Config{Store: store, Tokens: tokens, Inbox: in, Pattern: p}))
	t.Cleanup(srv.Close)
	return srv, in, failed, waiting, healthy
}

// page drives the console in one tab.
type page struct {
	t   *testing.T
	ctx context.Context
}

// eval evaluates js and returns its result.
func eval[T any](p page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// until polls js every 100 ms until it is true, and fails after timeout.
func (p page) until(what, js string, timeout time.Duration) {
	p.t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		if ok, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](js)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			status, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.getElementById('status').textContent`))
			p.t.Fatalf("%s: not within %s (the page says %q)", what, timeout, status)
		}
	}
}

// confirm waits for the page's confirmation, checks that it says want, and
// confirms.
func (p page) confirm(want string) {
	p.t.Helper()
	p.until("the confirmation asks", `document.getElementById('confirm').open`, 10*time.Second)
	if text := eval[string](p, `document.getElementById('confirm-text').textContent`); text != want {
		p.t.Errorf("the confirmation says %q, want %q", text, want)
	}
	p.click("#confirm-ok")
}

func (p page) click(selector string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(selector))); err != nil {
		p.t.Fatalf("click %s: %v", selector, err)
	}
}

// login opens the page and enters token.
func (p page) login(url, token string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Navigate(url)); err != nil {
		p.t.Fatal(err)
	}
	p.enter(token)
}

// enter gives the page token and waits until it has shown its first data.
func (p page) enter(token string) {
	p.t.Helper()
	p.until("the page's script runs", `document.body.dataset.wired === 'true'`, 10*time.Second)
	q, _ := json.Marshal(token)
	eval[chromedp.Void](p, `document.getElementById('token').value = `+string(q)+`; document.getElementById('token-form').requestSubmit()`)
	p.until("the console opens", `document.body.dataset.ready === 'true' && Number(document.body.dataset.renders || 0) > 0`, 20*time.Second)
}

// shot saves a screenshot of the page at width × height as name.
func (p page) shot(name string, width, height int64) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.EmulateViewport(width, height)); err != nil {
		p.t.Fatal(err)
	}
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(headless.Artifacts(p.t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	if wide := eval[bool](p, `document.documentElement.scrollWidth > window.innerWidth + 1`); wide {
		p.t.Errorf("%s: the page scrolls sideways at %d px", name, width)
	}
	p.t.Logf("screenshot: %s", path)
}

// The console in headless Chromium: a failed entry shows with its reason,
// its body on demand, a replay from the page (confirmed with its count)
// makes it forwarded; the pattern's views show their reasons and retry a
// failed task; a read token gets no button to act or to read a body, and
// the routes refuse it; no request leaves for another origin, and the page
// throws nothing.
func TestConsoleInChromium(t *testing.T) {
	if testing.Short() || pg == nil {
		t.Skip("drives Chromium against PostgreSQL; not run with -short")
	}
	srv, in, failed, waiting, healthy := consoleServer(t, "cs_page")
	ctx := headless.Start(t)
	requests := headless.Watch(ctx)
	exceptions := headless.WatchExceptions(ctx)
	p := page{t: t, ctx: ctx}
	p.login(srv.URL+"/console/", pageAdmin)
	row := fmt.Sprintf(`document.querySelector('#inbox-entries tr[data-id="%d"]')`, failed)
	p.until("the failed entry is listed", row+` !== null`, 10*time.Second)
	if reason := eval[string](p, row+`.querySelector('.reason').textContent`); !strings.Contains(reason, "the target answered 500") || eval[string](p, row+`.dataset.state`) != "failed" {
		t.Errorf("the failed entry lists as %q", reason)
	}
	p.shot("console-inbox.png", 1280, 900)

	// Retry now the entry that waits two minutes for its next attempt.
	p.click(fmt.Sprintf(`#inbox-entries tr[data-id="%d"] input[type="checkbox"]`, waiting))
	p.click("#inbox-retry-selected")
	p.confirm("Retry now 1 entry?")
	p.until("the retry is done", `document.getElementById('status').textContent.startsWith('Retry now: 1 entry done')`, 10*time.Second)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		e, _ := in.Entry(context.Background(), "", waiting)
		if len(e.Deliveries) == 3 && e.Deliveries[1].Kind == "retry_now" {
			break // tried again at once, not in two minutes
		}
		if time.Now().After(deadline) {
			t.Fatalf("after retry now from the page: %+v", e.Deliveries)
		}
	}

	p.click(fmt.Sprintf(`button[data-open="%d"]`, failed))
	p.until("the entry opens", `!document.getElementById('entry').hidden && document.querySelector('#entry-history tbody tr') !== null`, 10*time.Second)
	p.click("#entry-show-body")
	p.until("its body shows", `!document.getElementById('entry-body').hidden`, 10*time.Second)
	if body := eval[string](p, `document.getElementById('entry-body').textContent`); !strings.Contains(body, "evt_page_failed") {
		t.Errorf("the body shown: %q", body)
	}
	eval[chromedp.Void](p, `document.getElementById('entry').scrollIntoView()`)
	p.shot("console-entry.png", 1280, 900)

	healthy.Store(true)
	p.click("#entry-replay")
	p.confirm("Replay 1 entry?")
	p.until("the replayed entry reads forwarded", row+`.dataset.state === 'forwarded'`, 30*time.Second)
	e, err := in.Entry(context.Background(), "", failed)
	if err != nil || e.State != "forwarded" || e.Deliveries[len(e.Deliveries)-2].Kind != "replay" || e.Deliveries[len(e.Deliveries)-2].Actor != "ops" {
		t.Errorf("after the replay from the page: %+v %v", e, err)
	}

	p.click("#tab-pattern")
	p.until("the pattern's events show", `document.querySelector('#pattern-events tr[data-state="rejected"]') !== null`, 10*time.Second)
	if reason := eval[string](p, `document.querySelector('#pattern-events tr[data-state="rejected"] .reason').textContent`); !strings.Contains(reason, "partial refund") {
		t.Errorf("the rejected event's reason: %q", reason)
	}
	p.until("the failed task shows", `document.querySelector('#pattern-tasks tr[data-state="failed"]') !== null`, 10*time.Second)
	p.shot("console-pattern.png", 1280, 1000)
	p.click(`#pattern-tasks tr[data-state="failed"] input[type="checkbox"]`)
	p.click("#tasks-retry-selected")
	p.confirm("Retry 1 task?")
	p.until("the task leaves the failed view", `document.getElementById('status').textContent.startsWith('Retry: 1 task done')`, 10*time.Second)
	var state string
	pg.Business.QueryRow(context.Background(), "SELECT state FROM cs_page.outbox_tasks WHERE operation_key = 'order_confirmation:o-1'").Scan(&state)
	if state != "pending" {
		t.Errorf("the task retried from the page is %s, want pending", state)
	}

	// A read token: it views, and has nothing to act with or to read a body.
	p.click("#forget")
	p.until("the page forgets the token", `document.body.dataset.ready === undefined && !document.getElementById('token-form').hidden`, 10*time.Second)
	p.enter(pageRead)
	p.until("the entries show", row+` !== null`, 10*time.Second)
	for _, sel := range []string{".admin-only", "#entry-replay", "#entry-show-body", "#inbox-replay-filter", "input[type=checkbox]"} {
		if n := eval[int](p, `document.querySelectorAll('`+sel+`').length`); n != 0 {
			t.Errorf("a read token's page has %d of %s", n, sel)
		}
	}
	p.click(fmt.Sprintf(`button[data-open="%d"]`, failed))
	p.until("the entry opens for read", `!document.getElementById('entry').hidden`, 10*time.Second)
	p.shot("console-read.png", 1280, 900)
	status := eval[string](p, fmt.Sprintf(`(async () => {
  const h = { Authorization: 'Bearer %s', 'Content-Type': 'application/json' };
  const replay = await fetch('/v1/console/inbox/replay', { method: 'POST', headers: h, body: JSON.stringify({ ids: [%d] }) });
  const body = await fetch('/v1/console/inbox/entries/%d/body', { headers: h });
  return replay.status + ' ' + (await replay.json()).code + ', ' + body.status;
})()`, pageRead, failed, failed))
	if status != "403 forbidden, 403" {
		t.Errorf("a read token replaying and reading a body from the page: %s, want 403 forbidden, 403", status)
	}
	p.shot("console-phone.png", 390, 844)

	// Chromium draws the date inputs' calendar icon from a data: URL of its
	// own, which leaves the page for nowhere.
	sent := 0
	for _, u := range requests.Since(0) {
		switch {
		case strings.HasPrefix(u, "data:"):
		case strings.HasPrefix(u, srv.URL+"/"):
			sent++
		default:
			t.Errorf("the page requested %s, outside %s", u, srv.URL)
		}
	}
	t.Logf("%d requests to %s, none elsewhere", sent, srv.URL)
	if x := exceptions.List(); len(x) > 0 {
		t.Errorf("the page threw %q", x)
	}
}
