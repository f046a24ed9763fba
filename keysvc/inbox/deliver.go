package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/idemhook/idemhook/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

const deliveryKind = "idemhook_inbox_delivery"

// deliveryArgs is one queued forwarding. Unique on the inbox row while it is
// queued, running or retrying, so a re-offer never queues it twice.
type deliveryArgs struct {
	InboxID  int64  `json:"inbox_id" river:"unique"`
	Endpoint string `json:"endpoint"`
}

func (deliveryArgs) Kind() string { return deliveryKind }

// uniqueWhileActive leaves out completed jobs, so a replay of a forwarded
// entry can queue it again.
var uniqueWhileActive = river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}}

// deliveryOpts queue a delivery of e: in its own queue, unique while
// active, at most MaxAttempts.
func (e *Endpoint) deliveryOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: e.queue(), MaxAttempts: e.MaxAttempts, UniqueOpts: uniqueWhileActive}
}

// deliveryWorker forwards one entry to its endpoint's target.
type deliveryWorker struct {
	river.WorkerDefaults[deliveryArgs]
	in *Inbox
}

func (w *deliveryWorker) Timeout(*river.Job[deliveryArgs]) time.Duration {
	return w.in.opts.DeliveryTimeout + 10*time.Second
}

// Work POSTs the original body, content type and provider headers with
// Idempotency-Key (the receipt key) and X-Idemhook-Inbox-Id. A 2xx finishes
// the entry as forwarded (unless the target recorded its own outcome, or the
// 2xx is n8n's startup page, see n8nStartingUp); any
// other answer is retried with backoff (a Retry-After is honoured) and, on the
// last attempt, the entry is failed: visible and replayable.
func (w *deliveryWorker) Work(ctx context.Context, job *river.Job[deliveryArgs]) error {
	in := w.in
	e, ok := in.endpoints[job.Args.Endpoint]
	if !ok {
		return river.JobCancel(fmt.Errorf("endpoint %q is no longer configured", job.Args.Endpoint))
	}
	var body []byte
	var headers map[string]string
	var key, account, state string
	err := in.pool.QueryRow(ctx, in.tables.EventForDelivery(), job.Args.InboxID).Scan(&body, &headers, &key, &account, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return river.JobCancel(fmt.Errorf("inbox entry %d is gone", job.Args.InboxID))
	}
	if err != nil {
		return err
	}
	if state != pgsql.StateReceived {
		return nil // the target, or the n8n recoverer, took it further already
	}
	status, callErr, took := w.call(ctx, e, job.Args.InboxID, key, account, headers, body)
	var statusArg *int
	if status != 0 {
		statusArg = &status
	}
	errText := ""
	if callErr != nil {
		errText = callErr.Error()
	}
	if _, err := in.pool.Exec(ctx, in.tables.RecordDelivery(), job.Args.InboxID, job.Attempt, statusArg, errText, took.Milliseconds()); err != nil {
		return err
	}
	if callErr == nil && status >= 200 && status < 300 {
		if err := in.finish(ctx, job, in.tables.MarkForwarded(), job.Args.InboxID); err != nil {
			return err
		}
		in.count("forwarded")
		return nil
	}
	if callErr == nil {
		callErr = fmt.Errorf("the target answered %d", status)
	}
	if job.Attempt >= job.MaxAttempts {
		reason := fmt.Sprintf("gave up after %d deliveries: %v", job.Attempt, callErr)
		if err := in.finish(ctx, job, in.tables.MarkDeliveryFailed(), job.Args.InboxID, reason); err != nil {
			return err
		}
		in.count("failed")
		in.logger.Warn("inbox delivery failed: the entry is failed until replayed",
			"endpoint", e.Name, "inbox_id", job.Args.InboxID, "attempts", job.Attempt, "error", callErr)
		return nil
	}
	in.count("retried")
	return callErr
}

// finish records an entry's last state (stmt with args) and completes its
// job in one transaction. Once the entry reads forwarded or failed, its job
// is no longer running, so a replay at once queues a new delivery instead
// of being skipped as a duplicate of the delivery that just ended.
func (in *Inbox) finish(ctx context.Context, job *river.Job[deliveryArgs], stmt string, args ...any) error {
	tx, err := in.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, stmt, args...); err != nil {
		return err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("complete delivery job %d: %w", job.ID, err)
	}
	return tx.Commit(ctx)
}

// call makes one delivery. status is 0 when no answer came.
func (w *deliveryWorker) call(ctx context.Context, e *Endpoint, id int64, key, account string, headers map[string]string, body []byte) (status int, err error, took time.Duration) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, w.in.opts.DeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Target, bytes.NewReader(body))
	if err != nil {
		return 0, err, time.Since(start)
	}
	for name, v := range headers {
		req.Header.Set(name, v)
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Idemhook-Inbox-Id", strconv.FormatInt(id, 10))
	req.Header.Set("X-Idemhook-Account", account)
	if e.targetToken != "" {
		req.Header.Set("Authorization", "Bearer "+e.targetToken)
	}
	resp, err := w.in.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is in the configuration; the cause is what helps
		}
		return 0, err, time.Since(start)
	}
	defer resp.Body.Close()
	// Only the answer's first bytes matter; the rest is drained so the
	// connection can be reused.
	head := make([]byte, len(n8nStartingUp))
	n, _ := io.ReadFull(resp.Body, head)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 && bytes.Equal(head[:n], n8nStartingUp) {
		return resp.StatusCode, errN8NStartingUp, time.Since(start)
	}
	return resp.StatusCode, nil, time.Since(start)
}

// n8nStartingUp is what n8n answers, with 200, to every request while it
// migrates its database at startup, before it has registered any webhook.
// Taken as an acknowledgement, it would finish an entry that no workflow
// ever saw: the entry would read forwarded and its event be lost.
var n8nStartingUp = []byte("n8n is starting up. Please wait")

var errN8NStartingUp = errors.New("the target answered n8n's \"starting up\" page, not a workflow: retried")

// backoffPolicy retries after base × 2^(attempt-1), at most max, with
// jitter in [0.5, 1].
type backoffPolicy struct{ base, max time.Duration }

func (p backoffPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	d := p.base << min(max(job.Attempt-1, 0), 30)
	if d <= 0 || d > p.max {
		d = p.max
	}
	return time.Now().Add(time.Duration(float64(d) * (0.5 + rand.Float64()/2)))
}
