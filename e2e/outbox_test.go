package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
)

type taskRow struct {
	State      string
	Attempts   int
	LastStatus *int
	LastError  string
}

func (d inboxDeployment) addTask(t *testing.T, key string) {
	t.Helper()
	execSQL(t, "INSERT INTO "+d.db.Outbox().String()+` (operation_key, kind, payload) VALUES ($1, 'test', jsonb_build_object('operation', $1::text))`, key)
}

func (d inboxDeployment) task(t *testing.T, key string) taskRow {
	t.Helper()
	var r taskRow
	if err := st.Business.QueryRow(context.Background(), "SELECT state, attempts, last_status, coalesce(last_error, '') FROM "+
		d.db.Outbox().String()+" WHERE operation_key = $1", key).Scan(&r.State, &r.Attempts, &r.LastStatus, &r.LastError); err != nil {
		t.Fatalf("task %s: %v", key, err)
	}
	return r
}

// dispatch runs the outbox dispatcher once, now.
func (d inboxDeployment) dispatch(t *testing.T) {
	t.Helper()
	runWorkflow(t, d.ids[generator.FileOutbox])
}

// dispatchUntil runs the dispatcher until the task reaches state, waiting
// for its backoff between runs.
func (d inboxDeployment) dispatchUntil(t *testing.T, key, state string) taskRow {
	t.Helper()
	var r taskRow
	for range 20 {
		d.dispatch(t)
		if r = d.task(t, key); r.State == state {
			return r
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("task %s is %+v after 20 dispatcher runs, want %s", key, r, state)
	return r
}

// The outbox: every outcome of a call, with an API that records each one.
// The tests share one deployment and run one after the other.
func TestOutbox(t *testing.T) {
	needStack(t)
	api := newOpsAPI(t, true)
	opts := inboxOptions("ob", api.url)
	opts.OutboxMaxAttempts = 4
	d := deployInbox(t, opts, api)

	// One dispatcher run: the answerless call is ambiguous, and its retry
	// falls due within the run's wait, so the same run looks it up (a
	// lookup happens only for an ambiguous task) and does not call again.
	t.Run("performed then timed out: ambiguous, looked up, sent", func(t *testing.T) {
		const key = "ob:timeout"
		api.plan(key, opsStep{perform: true, sleep: 4 * time.Second})
		d.addTask(t, key)
		d.dispatch(t)
		if r := d.task(t, key); r.State != "sent" {
			t.Fatalf("after one run: %+v, want sent", r)
		}
		if p, g := api.count("POST", key), api.count("GET", key); p != 1 || g != 1 {
			t.Errorf("%d POSTs and %d lookups, want 1 and 1: the call must not be repeated", p, g)
		}
	})

	t.Run("performed then connection reset: ambiguous, looked up, sent", func(t *testing.T) {
		const key = "ob:reset"
		api.plan(key, opsStep{perform: true, reset: true})
		d.addTask(t, key)
		d.dispatch(t)
		if r := d.task(t, key); r.State != "sent" {
			t.Fatalf("after one run: %+v, want sent", r)
		}
		if p, g := api.count("POST", key), api.count("GET", key); p != 1 || g != 1 {
			t.Errorf("%d POSTs and %d lookups, want 1 and 1", p, g)
		}
	})

	t.Run("timed out without performing: looked up, resent with the same key", func(t *testing.T) {
		const key = "ob:lost"
		api.plan(key, opsStep{sleep: 4 * time.Second})
		d.addTask(t, key)
		d.dispatch(t)
		d.dispatchUntil(t, key, "sent")
		if p, g := api.count("POST", key), api.count("GET", key); p != 2 || g != 1 {
			t.Errorf("%d POSTs and %d lookups, want 2 (same key) and 1", p, g)
		}
	})

	t.Run("500 three times then 200: sent after backoff", func(t *testing.T) {
		const key = "ob:flaky"
		api.plan(key, opsStep{status: 500}, opsStep{status: 500}, opsStep{status: 500})
		d.addTask(t, key)
		r := d.dispatchUntil(t, key, "sent")
		if p := api.count("POST", key); p != 4 || r.Attempts != 4 || api.count("GET", key) != 0 {
			t.Errorf("%d POSTs, %d attempts, %d lookups; want 4, 4, 0", p, r.Attempts, api.count("GET", key))
		}
	})

	t.Run("400: failed with the answer kept, never retried", func(t *testing.T) {
		const key = "ob:bad"
		api.plan(key, opsStep{status: 400, body: `{"error":"amount must be positive"}`})
		d.addTask(t, key)
		d.dispatch(t)
		r := d.task(t, key)
		if r.State != "failed" || r.LastStatus == nil || *r.LastStatus != 400 || !strings.Contains(r.LastError, "amount must be positive") {
			t.Fatalf("after a 400: %+v, want failed with status 400 and the body", r)
		}
		d.dispatch(t)
		if p := api.count("POST", key); p != 1 {
			t.Errorf("%d POSTs, want 1: a 400 is not retried", p)
		}
	})

	t.Run("API down longer than the retries: failed, visible, retried on purpose once", func(t *testing.T) {
		const key = "ob:down"
		api.stop()
		d.addTask(t, key)
		r := d.dispatchUntil(t, key, "failed")
		if !strings.Contains(r.LastError, "ECONNREFUSED") || r.Attempts != opts.OutboxMaxAttempts {
			t.Errorf("down: %+v, want failed after %d attempts with ECONNREFUSED", r, opts.OutboxMaxAttempts)
		}
		// Visible: the recoverer counts it, with the 400 above.
		out := runWorkflow(t, d.ids[generator.FileRecoverer])
		if len(out) != 1 || fmt.Sprint(out[0]["outbox_failed"]) != "2" {
			t.Errorf("the recoverer's count of stuck work: %v, want outbox_failed 2 (this task and the 400)", out)
		}
		if err := api.start(); err != nil {
			t.Fatal(err)
		}
		var retried string
		if err := st.Business.QueryRow(context.Background(), d.db.RetryTask(), key).Scan(new(int64), new(string), &retried); err != nil || retried != "pending" {
			t.Fatalf("the documented retry: %q %v", retried, err)
		}
		d.dispatchUntil(t, key, "sent")
		if p := api.count("POST", key); p != 1 {
			t.Errorf("%d POSTs after the retry, want 1", p)
		}
	})

	t.Run("n8n killed during calls: reconciled by lookup after the restart", func(t *testing.T) {
		ctx := context.Background()
		// a is performed and then held, b is never reached in that run, c is
		// received but not performed, and held.
		api.plan("ob:kill-a", opsStep{perform: true, hold: true})
		api.plan("ob:kill-c", opsStep{hold: true})
		d.addTask(t, "ob:kill-a")
		d.addTask(t, "ob:kill-b")
		go runWorkflowNoFatal(d.ids[generator.FileOutbox])
		waitFor(t, 20*time.Second, "the first call to be in flight", func() bool { return api.count("POST", "ob:kill-a") == 1 })
		d.addTask(t, "ob:kill-c")
		go runWorkflowNoFatal(d.ids[generator.FileOutbox])
		waitFor(t, 20*time.Second, "the second call to be in flight", func() bool { return api.count("POST", "ob:kill-c") == 1 })
		if err := st.KillN8N(ctx); err != nil {
			t.Fatal(err)
		}
		api.release()
		for _, k := range []string{"ob:kill-a", "ob:kill-b", "ob:kill-c"} {
			if r := d.task(t, k); r.State != "sending" {
				t.Fatalf("%s after the kill: %+v, want sending", k, r)
			}
		}
		if err := st.StartN8N(ctx, runnerPath, opts.WebhookPath); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "the dead dispatcher's claims to expire", func() bool {
			var n int
			st.Business.QueryRow(ctx, "SELECT count(*) FROM "+d.db.Outbox().String()+" WHERE operation_key LIKE 'ob:kill-%' AND claimed_until < now()").Scan(&n)
			return n == 3
		})
		for _, k := range []string{"ob:kill-a", "ob:kill-b", "ob:kill-c"} {
			d.dispatchUntil(t, k, "sent")
		}
		want := map[string][2]int{"ob:kill-a": {1, 1}, "ob:kill-b": {1, 1}, "ob:kill-c": {2, 1}}
		for k, w := range want {
			if p, g := api.count("POST", k), api.count("GET", k); p != w[0] || g != w[1] {
				t.Errorf("%s: %d POSTs and %d lookups, want %d and %d", k, p, g, w[0], w[1])
			}
		}
	})

	t.Run("200 tasks, two dispatchers at once: each key called once", func(t *testing.T) {
		ctx := context.Background()
		execSQL(t, "INSERT INTO "+d.db.Outbox().String()+` (operation_key, kind, payload)
			SELECT 'ob:bulk-' || i, 'test', jsonb_build_object('i', i) FROM generate_series(1, 200) i`)
		pending := func() int {
			var n int
			st.Business.QueryRow(ctx, "SELECT count(*) FROM "+d.db.Outbox().String()+" WHERE operation_key LIKE 'ob:bulk-%' AND state <> 'sent'").Scan(&n)
			return n
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for deadline := time.Now().Add(3 * time.Minute); pending() > 0 && time.Now().Before(deadline); {
					if _, err := runWorkflowNoFatal(d.ids[generator.FileOutbox]); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if n := pending(); n != 0 {
			t.Fatalf("%d bulk tasks not sent", n)
		}
		posts := api.postsByKey()
		twice := 0
		for i := 1; i <= 200; i++ {
			if posts[fmt.Sprintf("ob:bulk-%d", i)] != 1 {
				twice++
			}
		}
		if twice != 0 {
			t.Errorf("%d of 200 operation keys were not called exactly once", twice)
		}
	})
}
