package keysvc

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
)

// Inbox is keysvc's durable inbox in front of n8n or any HTTP target: a
// delivery is verified, saved in inbox_events and its forwarding enqueued in
// the same transaction, and answered 200 only after the commit. River works
// the queue: retries with backoff, a snooze on Retry-After, rescue of jobs
// whose keysvc died. The receipt lives in the project's own table, which
// outlives River's finished jobs.
type Inbox struct {
	pool      *pgxpool.Pool
	tables    pgsql.Inbox
	endpoints map[string]*Endpoint
	river     *river.Client[pgx.Tx]
	http      *http.Client
	logger    *slog.Logger
	metrics   *metrics
	opts      InboxOptions
}

// InboxOptions configure OpenInbox.
type InboxOptions struct {
	// Schema holds inbox_events, inbox_deliveries and River's tables
	// ("" for the search_path default). Share it with the n8n inbox
	// pattern's --db-schema so both see one inbox.
	Schema string
	// CreateSchema creates the tables and runs River's migrations.
	CreateSchema bool
	// DeliveryTimeout bounds one call to a target. Default 30s.
	DeliveryTimeout time.Duration
	// Backoff is the first retry delay, doubled per attempt with jitter up
	// to MaxBackoff. Defaults 1s and 5m.
	Backoff, MaxBackoff time.Duration
	// RecoverAfter is how long a receipt may stay received before the
	// recoverer enqueues its delivery again. Default 2m.
	RecoverAfter time.Duration
	Logger       *slog.Logger
}

// ErrUnknownEndpoint: no endpoint has that name.
var ErrUnknownEndpoint = errors.New("no such inbox endpoint")

// ErrNotReplayable: the entry is neither failed nor forwarded.
var ErrNotReplayable = errors.New("only failed or forwarded entries can be replayed")

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

// OpenInbox prepares the inbox on pool (creating its tables and River's when
// asked) and starts River's workers. Close stops them.
func OpenInbox(ctx context.Context, pool *pgxpool.Pool, endpoints []Endpoint, opts InboxOptions) (*Inbox, error) {
	if opts.DeliveryTimeout == 0 {
		opts.DeliveryTimeout = 30 * time.Second
	}
	if opts.Backoff == 0 {
		opts.Backoff = time.Second
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	if opts.RecoverAfter == 0 {
		opts.RecoverAfter = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Schema != "" {
		if t, err := pgsql.ParseTable(opts.Schema); err != nil || t.Schema != "" {
			return nil, fmt.Errorf("inbox schema %q: a lower-case identifier that is not a reserved word", opts.Schema)
		}
	}
	in := &Inbox{pool: pool, tables: pgsql.Inbox{Schema: opts.Schema}, endpoints: map[string]*Endpoint{},
		http: &http.Client{Timeout: opts.DeliveryTimeout}, logger: opts.Logger, opts: opts}
	queues := map[string]river.QueueConfig{}
	for i := range endpoints {
		e := &endpoints[i]
		in.endpoints[e.Name] = e
		queues[e.queue()] = river.QueueConfig{MaxWorkers: cmp.Or(e.Concurrency, DefaultConcurrency)}
	}
	driver := riverpgxv5.New(pool)
	if opts.CreateSchema {
		if _, err := pool.Exec(ctx, in.tables.ReceiptsDDL()); err != nil {
			return nil, fmt.Errorf("create the inbox tables: %w", err)
		}
		migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: opts.Schema, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
		if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return nil, fmt.Errorf("River migrations: %w", err)
		}
	}
	if err := in.check(ctx); err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &deliveryWorker{in: in})
	client, err := river.NewClient(driver, &river.Config{
		Schema:               opts.Schema,
		Queues:               queues,
		Workers:              workers,
		RetryPolicy:          backoffPolicy{base: opts.Backoff, max: opts.MaxBackoff},
		RescueStuckJobsAfter: opts.DeliveryTimeout + time.Minute,
		Logger:               opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("River client: %w", err)
	}
	in.river = client
	return in, nil
}

// check fails with a message naming --create-schema when a table is missing.
func (in *Inbox) check(ctx context.Context) error {
	var ok bool
	err := in.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AND to_regclass($3) IS NOT NULL`,
		in.tables.Inbox().String(), in.tables.Deliveries().String(), pgsql.Table{Schema: in.opts.Schema, Name: "river_job"}.String()).Scan(&ok)
	if err != nil {
		return fmt.Errorf("inspect the inbox tables: %w", err)
	}
	if !ok {
		return fmt.Errorf("the inbox tables (%s, %s, River's) are missing: start keysvc once with --create-schema", in.tables.Inbox(), in.tables.Deliveries())
	}
	return nil
}

// Start starts delivering and the recoverer; both stop with ctx or Close.
func (in *Inbox) Start(ctx context.Context) error {
	if err := in.river.Start(ctx); err != nil {
		return fmt.Errorf("start River: %w", err)
	}
	go in.recoverLoop(ctx)
	return nil
}

// Close stops the workers, letting deliveries in flight finish.
func (in *Inbox) Close(ctx context.Context) error { return in.river.Stop(ctx) }

// Receipt is what POST /v1/inbox/{endpoint} answers.
type Receipt struct {
	Status  string `json:"status"` // received, ignored or duplicate
	InboxID int64  `json:"inbox_id,omitempty"`
	State   string `json:"state,omitempty"`
	Key     string `json:"key"`
	Account string `json:"account"`
}

// Receive saves a verified delivery and enqueues its forwarding in one
// transaction. A duplicate (same account and receipt key) changes nothing
// and reports the stored state.
func (in *Inbox) Receive(ctx context.Context, e *Endpoint, header http.Header, body []byte) (Receipt, error) {
	k, err := eventkey.DeriveFor(eventkey.Preset(e.Provider), header, body, "")
	if err != nil {
		return Receipt{}, err
	}
	r := Receipt{Key: k.Value, Account: e.Account}
	src := e.sources()
	if account, ok := src.AccountOf(header, body); ok {
		r.Account = account
	}
	eventType := src.TypeOf(header, body)
	// Lower-case names, as the n8n receiver keeps them: the compiled
	// decision reads a header type from them.
	kept := map[string]string{}
	for _, h := range e.receiptHeaders() {
		if v := header.Get(h); v != "" {
			kept[strings.ToLower(h)] = v
		}
	}
	headers, _ := json.Marshal(kept)

	tx, err := in.pool.Begin(ctx)
	if err != nil {
		return Receipt{}, fmt.Errorf("receive: %w", err)
	}
	defer tx.Rollback(ctx)
	var isNew bool
	err = tx.QueryRow(ctx, in.tables.Receive(), r.Account, r.Key, eventType, base64.StdEncoding.EncodeToString(body), string(headers)).
		Scan(&r.InboxID, &r.State, &isNew)
	if errors.Is(err, pgx.ErrNoRows) {
		// Inserted by a concurrent delivery not yet visible: a duplicate.
		return Receipt{Status: "duplicate", Key: r.Key, Account: r.Account}, nil
	}
	if err != nil {
		return Receipt{}, fmt.Errorf("receive: %w", err)
	}
	if !isNew {
		r.Status = "duplicate"
		return r, nil
	}
	if err := tx.QueryRow(ctx, in.tables.AssignEndpoint(), r.InboxID, e.Name, e.allows(eventType)).Scan(&r.State); err != nil {
		return Receipt{}, fmt.Errorf("receive: %w", err)
	}
	r.Status = r.State
	if r.State == pgsql.StateReceived {
		if _, err := in.river.InsertTx(ctx, tx, deliveryArgs{InboxID: r.InboxID, Endpoint: e.Name},
			e.deliveryOpts()); err != nil {
			return Receipt{}, fmt.Errorf("enqueue the delivery: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return Receipt{}, fmt.Errorf("receive: commit: %w", err)
	}
	return r, nil
}

// Entry is GET /v1/inbox/{endpoint}/{id}: the receipt and every delivery
// attempt.
type Entry struct {
	ID         int64      `json:"id"`
	Endpoint   string     `json:"endpoint"`
	Account    string     `json:"account"`
	Key        string     `json:"key"`
	EventType  string     `json:"event_type"`
	State      string     `json:"state"`
	Outcome    string     `json:"outcome,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	ReceivedAt time.Time  `json:"received_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Deliveries []Delivery `json:"deliveries"`
}

// Delivery is one attempt to forward an entry.
type Delivery struct {
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	Status     *int      `json:"status"` // null when no answer came
	Error      string    `json:"error,omitempty"`
	DurationMS int       `json:"duration_ms"`
}

// Entry returns entry id of endpoint, or ErrNotFound.
func (in *Inbox) Entry(ctx context.Context, endpoint string, id int64) (Entry, error) {
	e := Entry{Endpoint: endpoint, Deliveries: []Delivery{}}
	err := in.pool.QueryRow(ctx, in.tables.Entry(), id, endpoint).
		Scan(&e.ID, &e.Account, &e.Key, &e.EventType, &e.State, &e.Outcome, &e.LastError, &e.ReceivedAt, &e.FinishedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Entry{}, ErrNotFound
	}
	if err != nil {
		return Entry{}, fmt.Errorf("inbox entry %d: %w", id, err)
	}
	rows, err := in.pool.Query(ctx, in.tables.DeliveryAttempts(), id)
	if err != nil {
		return Entry{}, fmt.Errorf("inbox entry %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var d Delivery
		if err := rows.Scan(&d.Attempt, &d.At, &d.Status, &d.Error, &d.DurationMS); err != nil {
			return Entry{}, err
		}
		e.Deliveries = append(e.Deliveries, d)
	}
	return e, rows.Err()
}

// Replay sends a failed or forwarded entry again: ErrNotFound, or
// ErrNotReplayable with its state.
func (in *Inbox) Replay(ctx context.Context, e *Endpoint, id int64) error {
	tx, err := in.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("replay %d: %w", id, err)
	}
	defer tx.Rollback(ctx)
	var state string
	err = tx.QueryRow(ctx, in.tables.Replay(), id, e.Name).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := in.Entry(ctx, e.Name, id); err != nil {
			return err
		}
		return ErrNotReplayable
	}
	if err != nil {
		return fmt.Errorf("replay %d: %w", id, err)
	}
	if _, err := in.river.InsertTx(ctx, tx, deliveryArgs{InboxID: id, Endpoint: e.Name},
		e.deliveryOpts()); err != nil {
		return fmt.Errorf("replay %d: enqueue: %w", id, err)
	}
	return tx.Commit(ctx)
}

// QueueDepth counts deliveries waiting or running.
func (in *Inbox) QueueDepth(ctx context.Context) (int64, error) {
	var n int64
	err := in.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgsql.Table{Schema: in.opts.Schema, Name: "river_job"}.String()+
		` WHERE kind = $1 AND state IN ('available', 'running', 'retryable', 'scheduled', 'pending')`, deliveryKind).Scan(&n)
	return n, err
}

// recoverLoop re-enqueues receipts left received longer than RecoverAfter:
// their queue entry was lost or their delivery never finished. River's
// unique insert skips those whose delivery is still queued.
func (in *Inbox) recoverLoop(ctx context.Context) {
	t := time.NewTicker(in.opts.RecoverAfter / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := in.recoverOnce(ctx)
		if err != nil && ctx.Err() == nil {
			in.logger.Warn("inbox recoverer", "error", err)
		} else if n > 0 {
			in.logger.Info("inbox recoverer re-enqueued deliveries", "count", n)
		}
	}
}

func (in *Inbox) recoverOnce(ctx context.Context) (int, error) {
	rows, err := in.pool.Query(ctx, in.tables.StrandedReceipts(in.opts.RecoverAfter))
	if err != nil {
		return 0, err
	}
	var params []river.InsertManyParams
	for rows.Next() {
		var a deliveryArgs
		if err := rows.Scan(&a.InboxID, &a.Endpoint); err != nil {
			rows.Close()
			return 0, err
		}
		e, ok := in.endpoints[a.Endpoint]
		if !ok {
			continue // an endpoint removed from the configuration: replay it by hand
		}
		params = append(params, river.InsertManyParams{Args: a, InsertOpts: e.deliveryOpts()})
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(params) == 0 {
		return 0, err
	}
	res, err := in.river.InsertMany(ctx, params)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range res {
		if !r.UniqueSkippedAsDuplicate {
			n++
		}
	}
	return n, nil
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

func (in *Inbox) count(outcome string) {
	if in.metrics != nil {
		in.metrics.deliveries.WithLabelValues(outcome).Inc()
	}
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
