package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
)

// The outbox on its own schedule, as users run it (a sweep every minute,
// the default call timeout and claim): a retry happens at its backoff, not
// at the next sweep, and the tasks a killed n8n left in flight are
// reconciled by the schedule alone within two minutes and a half of n8n
// running again.
func TestOutboxOnSchedule(t *testing.T) {
	needStack(t)
	ops := newOpsAPI(t, true)
	opts := inboxOptions("os", ops.url)
	opts.SweepEvery = time.Minute
	opts.OutboxBackoff = 10 * time.Second
	opts.OutboxTimeout, opts.OutboxBatch = 0, 0 // the defaults: 10 s, 20 tasks
	d := deployInbox(t, opts, ops)
	t.Cleanup(func() {
		// Its schedules would go on firing for the rest of the run.
		for _, id := range d.ids {
			unpublish(t, id)
		}
	})

	t.Run("retried at its backoff, not at the sweep", func(t *testing.T) {
		const key = "os:flaky"
		ops.plan(key, opsStep{status: 500}, opsStep{status: 500}, opsStep{status: 500})
		d.addTask(t, key)
		go runWorkflowNoFatal(d.ids[generator.FileOutbox])
		waitFor(t, 2*time.Minute, key+" to be sent", func() bool { return d.task(t, key).State == "sent" })
		calls := ops.times("POST", key)
		if len(calls) != 4 {
			t.Fatalf("%d POSTs, want 4 (three 500s, then the 200)", len(calls))
		}
		// Backoff 10 s doubled per attempt, times a jitter in [0.5, 1]; the
		// waiter looks every second, and n8n takes a moment to call.
		for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
			gap := calls[i+1].Sub(calls[i])
			t.Logf("retry %d after %s (backoff %s with jitter: %s to %s)", i+1, gap.Round(100*time.Millisecond), want, want/2, want)
			if gap < want/2-time.Second || gap > want+3*time.Second {
				t.Errorf("retry %d came %s after the call before, want between %s and %s", i+1, gap.Round(100*time.Millisecond), want/2, want)
			}
		}
	})

	t.Run("n8n killed with calls in flight: reconciled by the schedule", func(t *testing.T) {
		ctx := context.Background()
		// a is performed and then held; b is received but not performed,
		// and held. Both calls are in flight when n8n dies.
		ops.plan("os:kill-a", opsStep{perform: true, hold: true})
		ops.plan("os:kill-b", opsStep{hold: true})
		d.addTask(t, "os:kill-a")
		d.addTask(t, "os:kill-b")
		go runWorkflowNoFatal(d.ids[generator.FileOutbox])
		waitFor(t, 20*time.Second, "both calls to be in flight", func() bool {
			return ops.count("POST", "os:kill-a") == 1 && ops.count("POST", "os:kill-b") == 1
		})
		if err := st.KillN8N(ctx); err != nil {
			t.Fatal(err)
		}
		ops.release()
		for _, k := range []string{"os:kill-a", "os:kill-b"} {
			if r := d.task(t, k); r.State != "sending" {
				t.Fatalf("%s after the kill: %+v, want sending", k, r)
			}
		}
		if err := st.StartN8N(ctx, runnerPath, opts.WebhookPath); err != nil {
			t.Fatal(err)
		}
		running := time.Now()
		waitFor(t, 150*time.Second, "every task to be reconciled by the schedule", func() bool {
			return d.task(t, "os:kill-a").State == "sent" && d.task(t, "os:kill-b").State == "sent"
		})
		t.Logf("reconciled %s after n8n ran again", time.Since(running).Round(time.Second))
		ops.mu.Lock()
		defer ops.mu.Unlock()
		for _, k := range []string{"os:kill-a", "os:kill-b"} {
			if n := ops.performed[k]; n != 1 {
				t.Errorf("%s was performed %d times, want once", k, n)
			}
		}
	})
}

// unpublish takes a deployed workflow off n8n's schedule and webhooks.
func unpublish(t *testing.T, id string) {
	t.Helper()
	if err := api.Unpublish(context.Background(), id); err != nil {
		t.Logf("unpublish %s: %v", id, err)
	}
}
