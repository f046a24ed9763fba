package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/sandbox"
)

var workerStarted = regexp.MustCompile(`Worker started execution (\d+)`)

// executionsByWorker counts, from each worker's log (n8n logs "Worker
// started execution N (job N)"), the executions it ran.
func executionsByWorker(t *testing.T, q *sandbox.Stack) []int {
	out := make([]int, sandbox.QueueWorkers)
	for i := range out {
		b, err := os.ReadFile(filepath.Join(q.LogDir, fmt.Sprintf("n8n-worker-%d.log", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = len(workerStarted.FindAll(b, -1))
	}
	return out
}

// The guarantee holds on n8n's queue mode with two workers, for the
// default guard, the lease guard and the inbox pattern: the seed's run, 100
// concurrent deliveries of one event (one business row, one effect), 1,000
// distinct events (1,000 rows), and the executions ran on both workers.
func TestQueueMode(t *testing.T) {
	needStack(t)
	q := useStack(t, sandbox.Options{Queue: true})
	ctx := context.Background()

	type variant struct {
		name, prefix string
		hashing      generator.Hashing
		guard        generator.Guard
	}
	for _, v := range []variant{
		{"default (lease)", "ql", generator.HashingCodeNode, ""},
		{"at-most-once", "qr", generator.HashingCodeNode, generator.GuardAtMostOnce},
		// The community node, run by the workers (they load the package
		// from the user folder they share with the main process).
		{"node", "qn", generator.HashingNode, ""},
	} {
		t.Run(v.name, func(t *testing.T) {
			prefix, guard := v.prefix, v.guard
			opts := seedOptions(prefix+"1", v.hashing)
			opts.Guard = guard
			testSeedRun(t, opts)
			opts = seedOptions(prefix+"2", v.hashing)
			opts.Guard = guard
			d := deploy(t, opts)
			body := []byte(`{"id":"evt_q_one","type":"t"}`)
			answers := parallel(100, func(int) response { return postNoFatal(d.url, "application/json", body) })
			for _, a := range answers {
				if a.status != 200 && a.status != 409 {
					t.Errorf("concurrent delivery: %d %s", a.status, a.body)
				}
			}
			if n := countRows(t, opts.BusinessTable); n != 1 {
				t.Errorf("100 concurrent deliveries of one event: %d business rows, want 1", n)
			}
			sent := sendDistinct(t, d.url, 1000, 16)
			var rows int
			st.Business.QueryRow(ctx, "SELECT count(DISTINCT event_key) FROM "+opts.BusinessTable+" WHERE event_key LIKE 'evt:evt_q_many_%'").Scan(&rows)
			total := countRows(t, opts.BusinessTable)
			if rows != 1000 || total != 1001 || sent != 1000 {
				t.Errorf("1,000 distinct events (%d answered 200): %d distinct business rows, %d in all; want 1,000 and 1,001", sent, rows, total)
			}
		})
	}

	t.Run("inbox", func(t *testing.T) {
		api := newOpsAPI(t, true)
		d := deployInbox(t, inboxOptions("qi", api.url), api)
		execSQL(t, "INSERT INTO "+d.db.Orders().String()+" (id, amount, currency) SELECT 'qo-' || i, 100, 'eur' FROM generate_series(0, 1000) i")
		ev := paymentSucceeded("evt_qi_one", "pi_qi_one", "qo-1000", 100)
		wantReceipt(t, "first delivery", d.deliver(t, ev), "received")
		d.waitRow(t, "evt_qi_one", "processed")
		wantReceipt(t, "replay", d.deliver(t, ev), "duplicate")
		answers := parallel(100, func(int) response { return d.deliver(t, ev) })
		for _, a := range answers {
			if a.status != 200 {
				t.Errorf("concurrent delivery: %d %s", a.status, a.body)
			}
		}
		var wg sync.WaitGroup
		jobs := make(chan int, 1000)
		for i := range 1000 {
			jobs <- i
		}
		close(jobs)
		var ok atomic.Int64
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					if r := d.deliver(t, paymentSucceeded(fmt.Sprintf("evt_qi_%d", i), fmt.Sprintf("pi_qi_%d", i), fmt.Sprintf("qo-%d", i), 100)); r.status == 200 {
						ok.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		processed := func() int {
			var n int
			st.Business.QueryRow(ctx, "SELECT count(*) FROM "+d.db.Inbox().String()+" WHERE event_id LIKE 'evt:evt_qi_%' AND state = 'processed'").Scan(&n)
			return n
		}
		waitFor(t, 3*time.Minute, "1,001 events to be processed", func() bool { return processed() == 1001 })
		var effects int
		st.Business.QueryRow(ctx, "SELECT count(*) FROM "+d.db.Effects().String()).Scan(&effects)
		if effects != 1001 || ok.Load() != 1000 {
			t.Errorf("%d effects for 1,001 events (%d of 1,000 answered 200), want 1,001", effects, ok.Load())
		}
	})

	t.Run("default, workers killed holding keys", func(t *testing.T) { testQueueDefaultWorkersKilled(t, q) })
	t.Run("node, workers killed holding keys", func(t *testing.T) { testQueueNodeWorkersKilled(t, q) })

	t.Run("worker killed mid-load", func(t *testing.T) {
		// The community node's guards too: the workers run them.
		targets := append(crashTargets(t, "xw"),
			guardCrashTarget(t, "xwmr", generator.HashingNode, generator.GuardAtMostOnce),
			guardCrashTarget(t, "xwml", generator.HashingNode, generator.GuardLease))
		loadWithFault(t, targets, "queue worker 1 killed (SIGKILL) and restarted", func() error {
			if err := q.KillWorker(ctx, 1); err != nil {
				return err
			}
			time.Sleep(time.Second)
			return q.StartWorker(ctx, 1)
		})
	})

	byWorker := executionsByWorker(t, q)
	t.Logf("executions by worker (from each worker's log, \"Worker started execution N\"): %v", byWorker)
	for i, n := range byWorker {
		if n == 0 {
			t.Errorf("worker %d ran no execution", i+1)
		}
	}
}

// sendDistinct sends n new events, c at a time, and returns how many were
// answered 200.
func sendDistinct(t *testing.T, url string, n, c int) int {
	var ok atomic.Int64
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i
	}
	close(jobs)
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r := postNoFatal(url, "application/json", fmt.Appendf(nil, `{"id":"evt_q_many_%d","type":"t"}`, i))
				if r.status == 200 && strings.Contains(r.body, "processed") {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(ok.Load())
}
