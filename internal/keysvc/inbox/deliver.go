package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

const deliveryKind = "idemhook_inbox_delivery"

// deliveryArgs is one queued forwarding of an entry. A job runs one attempt,
// or more when a rescue runs it again; a retry is a new job, queued in the
// transaction that records the attempt before it. Unique on the inbox row
// while queued, running or waiting, so a re-offer never queues it twice.
type deliveryArgs struct {
	InboxID  int64  `json:"inbox_id" river:"unique"`
	Endpoint string `json:"endpoint"`
	// Prior counts the attempts of the jobs before this one, so that an
	// attempt's number is Prior + the job's own attempt.
	Prior int `json:"prior,omitempty"`
	// Alone: the entry's batch forward failed it (the target refused it,
	// or the whole forward), so it is sent on its own, never in a batch
	// again: one event cannot hold others back.
	Alone bool `json:"alone,omitempty"`
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

// Timeout is none: a call is bounded by DeliveryTimeout and the lease, and
// the recording of its outcome must not be cut short (see settle).
func (w *deliveryWorker) Timeout(*river.Job[deliveryArgs]) time.Duration { return -1 }

// event is what a delivery reads of its entry.
type event struct {
	body         []byte
	headers      map[string]string
	key, account string
	state        string
	lastKind     string // of the entry's latest delivery row
}

// Work POSTs the original body, content type and provider headers with
// Idempotency-Key (the receipt key), X-Idemhook-Inbox-Id and
// X-Idemhook-Account, the same on every attempt. A 2xx finishes the entry
// as forwarded (unless the target recorded its own outcome, or the 2xx is
// n8n's startup page, see n8nStartingUp); any other answer is retried with
// backoff (a Retry-After is honoured, up to MaxBackoff) and, on the last
// attempt, the entry is failed: visible and replayable.
//
// Work writes the outcome itself, with the attempt and the entry's state,
// in one transaction that it retries until the database answers (settle):
// a 2xx that arrives while the database is down is recorded when it is
// back, and never forwarded again. A job left running is therefore always
// either in progress in a live keysvc or rescued once that keysvc's lease
// lapsed (RescueDeliveries).
func (w *deliveryWorker) Work(ctx context.Context, job *river.Job[deliveryArgs]) error {
	in := w.in
	e, ok := in.endpoints[job.Args.Endpoint]
	if !ok {
		return river.JobCancel(fmt.Errorf("endpoint %q is no longer configured", job.Args.Endpoint))
	}
	if e.Batch > 1 && !job.Args.Alone {
		return w.forwardBatch(ctx, e, job)
	}
	attempt := job.Args.Prior + job.Attempt
	ev, err := in.loadEvent(ctx, job.Args.InboxID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return river.JobCancel(fmt.Errorf("inbox entry %d is gone", job.Args.InboxID))
	case err != nil:
		// The database did not answer: nothing was sent, try again soon.
		return in.settle(ctx, e, job, outcome{retryAt: time.Now().Add(in.opts.Backoff), uncounted: true})
	case ev.state != pgsql.StateReceived:
		return in.settle(ctx, e, job, outcome{}) // the target, or the n8n recoverer, took it further already
	}
	callCtx, cancel, held := in.lease.callContext(ctx)
	if !held {
		// This keysvc cannot tell the database it is alive: a call now
		// could outlive its lease and run beside a rescue.
		return in.settle(ctx, e, job, outcome{retryAt: time.Now().Add(in.opts.Backoff), uncounted: true})
	}
	if ev.lastKind == pgsql.DeliveryNoAnswer || ev.lastKind == pgsql.DeliveryRescued {
		in.metrics.resends.WithLabelValues(e.Name, ev.lastKind).Inc()
	}
	res := w.call(callCtx, e, job.Args.InboxID, ev)
	cancel()
	in.targets[e.Name].forwarded(res.targetFailure())
	return in.settle(ctx, e, job, in.decide(e, job.Args.InboxID, attempt, res))
}

// decide is what one attempt's result res makes of entry id: forwarded
// when acknowledged, failed after the endpoint's last attempt, else retried
// after backoff (a Retry-After honoured, up to MaxBackoff).
func (in *Inbox) decide(e *Endpoint, id int64, attempt int, res callResult) outcome {
	o := outcome{delivery: &res, attempt: attempt}
	switch {
	case res.acknowledged():
		o.final = []any{in.tables.MarkForwarded(), id}
	case attempt >= e.MaxAttempts:
		deliveries := "deliveries"
		if attempt == 1 {
			deliveries = "delivery"
		}
		reason := fmt.Sprintf("gave up after %d %s: %v", attempt, deliveries, res.failure())
		o.final = []any{in.tables.MarkDeliveryFailed(), id, reason}
		o.failed = true
	default:
		d := in.backoff(attempt)
		if res.retryAfter > d {
			d = min(res.retryAfter, in.opts.MaxBackoff)
		}
		o.retryAt = time.Now().Add(d)
	}
	return o
}

// loadEvent reads entry id for a delivery, within 10 s.
func (in *Inbox) loadEvent(ctx context.Context, id int64) (event, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var ev event
	err := in.pool.QueryRow(ctx, in.tables.EventForDelivery(), id).Scan(&ev.body, &ev.headers, &ev.key, &ev.account, &ev.state, &ev.lastKind)
	return ev, err
}

// outcome is what settle writes for one run of a delivery job.
type outcome struct {
	delivery *callResult // the attempt made, if any
	attempt  int
	// final, when set, is the statement and arguments that finish the
	// entry (forwarded or failed); failed says which.
	final  []any
	failed bool
	// retryAt, when set, queues the next attempt; uncounted when no call
	// was made, so the attempt is not spent.
	retryAt   time.Time
	uncounted bool
	// alone sends the retry on its own (deliveryArgs.Alone).
	alone bool
}

// settle records o in one transaction: the attempt, the entry's new state,
// the job completed and, for a retry, the next job queued. It retries the
// transaction while the database is unreachable (every 100 ms doubling to
// 2 s), for as long as keysvc runs: a target's answer is never lost to an
// outage, and its job never left running behind a live lease. It gives up
// on an error the database answered (a bug, not an outage) and when the
// inbox is closed hard; River then retries the job, forwarding again.
func (in *Inbox) settle(ctx context.Context, e *Endpoint, job *river.Job[deliveryArgs], o outcome) error {
	ctx = context.WithoutCancel(ctx) // River's client stays in the values
	wait := 100 * time.Millisecond
	for try := 1; ; try++ {
		err := in.settleOnce(ctx, e, job, o)
		if err == nil {
			in.counted(e, job.Args.InboxID, o, try)
			return nil
		}
		if !transient(err) {
			return fmt.Errorf("record delivery job %d of entry %d: %w", job.ID, job.Args.InboxID, err)
		}
		if try == 1 {
			in.logger.Warn("inbox: the database did not take a delivery's outcome; retrying until it does",
				"endpoint", e.Name, "inbox_id", job.Args.InboxID, "attempt", o.attempt, "status", o.delivery.statusValue(), "error", err)
		}
		select {
		case <-in.hard.Done():
			return fmt.Errorf("record delivery job %d of entry %d: keysvc stopped: %w", job.ID, job.Args.InboxID, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func (in *Inbox) settleOnce(ctx context.Context, e *Endpoint, job *river.Job[deliveryArgs], o outcome) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err := in.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if d := o.delivery; d != nil {
		errText := "" // an answer's status speaks for itself
		if d.err != nil {
			errText = d.err.Error()
		}
		if _, err := tx.Exec(ctx, in.tables.RecordDelivery(), job.Args.InboxID, o.attempt, d.statusValue(), errText, d.took.Milliseconds(), d.kind()); err != nil {
			return err
		}
	}
	if o.final != nil {
		if _, err := tx.Exec(ctx, o.final[0].(string), o.final[1:]...); err != nil {
			return err
		}
	}
	// Completed together with the entry's last state: a replay sent the
	// moment the entry reads failed is not taken for this job.
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("complete delivery job %d: %w", job.ID, err)
	}
	if !o.retryAt.IsZero() {
		prior := job.Args.Prior + job.Attempt
		if o.uncounted {
			prior--
		}
		opts := e.deliveryOpts()
		opts.ScheduledAt = o.retryAt
		if _, err := in.river.InsertTx(ctx, tx, deliveryArgs{InboxID: job.Args.InboxID, Endpoint: e.Name, Prior: prior, Alone: job.Args.Alone || o.alone}, opts); err != nil {
			return fmt.Errorf("queue the next delivery: %w", err)
		}
	}
	return tx.Commit(ctx)
}

// counted updates the metrics once o is recorded (after tries attempts).
func (in *Inbox) counted(e *Endpoint, id int64, o outcome, tries int) {
	d := o.delivery
	switch {
	case d == nil:
	case d.acknowledged():
		in.count("forwarded")
		if tries > 1 {
			in.metrics.lateAcks.WithLabelValues(e.Name).Inc()
			in.logger.Info("inbox: an acknowledgement was recorded once the database answered again, without forwarding again",
				"endpoint", e.Name, "inbox_id", id, "attempt", o.attempt, "tries", tries)
		}
	case o.failed:
		in.count("failed")
		in.logger.Warn("inbox delivery failed: the entry is failed until replayed",
			"endpoint", e.Name, "inbox_id", id, "attempts", o.attempt, "error", d.failure())
	default:
		in.count("retried")
	}
}

// transient reports whether err may pass once the database is reachable:
// anything but an error PostgreSQL answered, except the ones that say the
// server or connection is going away, or a conflict that a retry resolves.
func transient(err error) bool {
	var pgErr interface{ SQLState() string }
	if !errors.As(err, &pgErr) {
		return true
	}
	code := pgErr.SQLState()
	switch code[:2] {
	case "08", "57", "53": // connection exception, operator intervention, insufficient resources
		return true
	}
	return code == "40001" || code == "40P01"
}

// callResult is one call to a target.
type callResult struct {
	status     int // 0 when no answer came
	err        error
	took       time.Duration
	retryAfter time.Duration // from the answer's Retry-After, in seconds
}

func (r *callResult) acknowledged() bool { return r.err == nil && r.status/100 == 2 }

// failure is why the call did not acknowledge the entry (nil when it did).
func (r *callResult) failure() error {
	if r.err != nil {
		return r.err
	}
	if r.status/100 != 2 {
		return fmt.Errorf("the target answered %d", r.status)
	}
	return nil
}

// targetFailure is why the result says the target itself is failing: no
// answer, n8n's "starting up" page, or a status that speaks of the target
// rather than of the event (5xx, 401, 403, 404, 408, 429). It is nil when
// the target answered, even to refuse this event (another 4xx, or a 2xx
// that is no batch answer): that event's own history says so.
func (r *callResult) targetFailure() error {
	switch {
	case r.status == 0 || errors.Is(r.err, errN8NStartingUp):
		return r.failure()
	case r.status >= 500, r.status == http.StatusUnauthorized, r.status == http.StatusForbidden, r.status == http.StatusNotFound,
		r.status == http.StatusRequestTimeout, r.status == http.StatusTooManyRequests:
		return fmt.Errorf("the target answered %d", r.status)
	}
	return nil
}

// statusValue is the status for the database: nil when no answer came.
func (r *callResult) statusValue() *int {
	if r == nil || r.status == 0 {
		return nil
	}
	return &r.status
}

// kind says whether the target can have the event (pgsql.Delivery*): a
// call refused before a connection was made cannot have reached it.
func (r *callResult) kind() string {
	if r.status != 0 {
		return pgsql.DeliveryAnswered
	}
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(r.err, &dns) || (errors.As(r.err, &op) && op.Op == "dial") {
		return pgsql.DeliveryUnreached
	}
	return pgsql.DeliveryNoAnswer
}

// call makes one delivery.
func (w *deliveryWorker) call(ctx context.Context, e *Endpoint, id int64, ev event) callResult {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, w.in.opts.DeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Target, bytes.NewReader(ev.body))
	if err != nil {
		return callResult{err: err, took: time.Since(start)}
	}
	for name, v := range ev.headers {
		req.Header.Set(name, v)
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", ev.key)
	req.Header.Set("X-Idemhook-Inbox-Id", strconv.FormatInt(id, 10))
	req.Header.Set("X-Idemhook-Account", ev.account)
	if e.targetToken != "" {
		req.Header.Set("Authorization", "Bearer "+e.targetToken)
	}
	resp, err := w.in.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is in the configuration; the cause is what helps
		}
		return callResult{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	res := callResult{status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		res.retryAfter = time.Duration(s) * time.Second
	}
	// Only the answer's first bytes matter; the rest is drained so the
	// connection can be reused.
	head := make([]byte, len(n8nStartingUp))
	n, _ := io.ReadFull(resp.Body, head)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 && bytes.Equal(head[:n], n8nStartingUp) {
		res.err = errN8NStartingUp
	}
	res.took = time.Since(start)
	return res
}

// n8nStartingUp is what n8n answers, with 200, to every request while it
// migrates its database at startup, before it has registered any webhook.
// Taken as an acknowledgement, it would finish an entry that no workflow
// ever saw: the entry would read forwarded and its event be lost.
var n8nStartingUp = []byte("n8n is starting up. Please wait")

var errN8NStartingUp = errors.New("the target answered n8n's \"starting up\" page, not a workflow: retried")

// backoff is the delay after attempt: Backoff × 2^(attempt-1), at most
// MaxBackoff, with jitter in [0.5, 1].
func (in *Inbox) backoff(attempt int) time.Duration {
	d := in.opts.Backoff << min(max(attempt-1, 0), 30)
	if d <= 0 || d > in.opts.MaxBackoff {
		d = in.opts.MaxBackoff
	}
	return time.Duration(float64(d) * (0.5 + rand.Float64()/2))
}

// backoffPolicy is River's retry policy, used only when settle gave up (a
// job River retries itself): the same delays as backoff.
type backoffPolicy struct{ in *Inbox }

func (p backoffPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().Add(p.in.backoff(job.Attempt))
}
