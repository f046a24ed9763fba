package inbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// maxBatchBytes bounds the bodies of one batch forward: an entry that would
// pass it waits for the next forward (the first entry always goes).
const maxBatchBytes = 4 << 20

// batchEvent is one event of a batch forward.
type batchEvent struct {
	InboxID string            `json:"inbox_id"`
	Key     string            `json:"key"`
	Account string            `json:"account"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"` // base64 of the bytes received
}

// batchAnswer is what a target answers a batch forward: one result per
// event it took. An event missing from it is not acknowledged.
type batchAnswer struct {
	Results []struct {
		InboxID json.Number `json:"inbox_id"`
		Status  int         `json:"status"`
	} `json:"results"`
}

// batchItem is one entry of a batch forward: its job, its event, and what
// the forward came to for it.
type batchItem struct {
	job *river.Job[deliveryArgs]
	ev  event
	res callResult
}

// forwardBatch forwards job's entry with up to Batch-1 other entries of its
// endpoint that are waiting, in one POST of {"events": [...]} with
// X-Idemhook-Batch (the number of events), and records each entry's outcome
// on its own job, as Work does for one: every entry keeps its receipt key
// and its attempts.
//
// The target answers 2xx with {"results": [{"inbox_id", "status"}]}: an
// event whose status is 2xx is acknowledged. An event the target refused,
// or left out, or a whole forward it answered with another status (one
// event may be what it cannot take), is sent again alone, with the same
// key. A forward that got no answer (a timeout, n8n down) fails none of its
// events in particular: they go again in a batch.
func (w *deliveryWorker) forwardBatch(ctx context.Context, e *Endpoint, job *river.Job[deliveryArgs]) error {
	in := w.in
	items := in.batchItems(ctx, e, job)
	if len(items) == 0 {
		return nil
	}
	callCtx, cancel, held := in.lease.callContext(ctx)
	if !held {
		for _, it := range items {
			in.finish(e, it.job, in.settle(ctx, e, it.job, outcome{retryAt: time.Now().Add(in.opts.Backoff), uncounted: true}))
		}
		return nil
	}
	for _, it := range items {
		if it.ev.lastKind == pgsql.DeliveryNoAnswer || it.ev.lastKind == pgsql.DeliveryRescued {
			in.metrics.resends.WithLabelValues(e.Name, it.ev.lastKind).Inc()
		}
	}
	forward := w.callBatch(callCtx, e, items)
	cancel()
	in.targets[e.Name].forwarded(forward.targetFailure())
	in.metrics.batchSize.WithLabelValues(e.Name).Observe(float64(len(items)))
	var first error
	for _, it := range items {
		o := in.decide(e, it.job.Args.InboxID, it.job.Args.Prior+it.job.Attempt, it.res)
		// An event the target answered for and did not take goes alone; one
		// that got no answer at all goes in a batch again.
		o.alone = it.res.status != 0 && !errors.Is(it.res.err, errN8NStartingUp)
		err := in.settle(ctx, e, it.job, o)
		if it.job == job {
			first = err
		} else {
			in.finish(e, it.job, err)
		}
	}
	return first
}

// batchItems is what one batch forward carries: job's entry and the
// waiting ones claimed with it, each loaded, within maxBatchBytes. A job
// whose entry is gone, is no longer received, could not be loaded or does
// not fit is settled here, and left out.
func (in *Inbox) batchItems(ctx context.Context, e *Endpoint, job *river.Job[deliveryArgs]) []*batchItem {
	jobs := []*river.Job[deliveryArgs]{job}
	more, err := in.claimMore(ctx, e, e.Batch-1)
	if err != nil {
		in.logger.Warn("inbox: a batch forward goes with fewer events: the database did not give more", "endpoint", e.Name, "error", err)
	}
	jobs = append(jobs, more...)
	var items []*batchItem
	size := 0
	for _, j := range jobs {
		ev, err := in.loadEvent(ctx, j.Args.InboxID)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			in.finish(e, j, in.settle(ctx, e, j, outcome{})) // the entry is gone: nothing to forward
			continue
		case err != nil:
			in.finish(e, j, in.settle(ctx, e, j, outcome{retryAt: time.Now().Add(in.opts.Backoff), uncounted: true}))
			continue
		case ev.state != pgsql.StateReceived:
			in.finish(e, j, in.settle(ctx, e, j, outcome{}))
			continue
		case len(items) > 0 && size+len(ev.body) > maxBatchBytes:
			// Not sent: the next forward takes it, and the attempt is not spent.
			in.finish(e, j, in.settle(ctx, e, j, outcome{retryAt: time.Now(), uncounted: true}))
			continue
		}
		size += len(ev.body)
		items = append(items, &batchItem{job: j, ev: ev})
	}
	return items
}

// claimMore takes up to n more waiting delivery jobs of e's queue for a
// batch (pgsql.Inbox.ClaimDeliveries), within 10 s.
func (in *Inbox) claimMore(ctx context.Context, e *Endpoint, n int) ([]*river.Job[deliveryArgs], error) {
	if n <= 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := in.pool.Query(ctx, in.tables.ClaimDeliveries(), deliveryKind, e.queue(), n, in.lease.id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []*river.Job[deliveryArgs]
	for rows.Next() {
		var id int64
		var args []byte
		var attempt int
		if err := rows.Scan(&id, &args, &attempt); err != nil {
			return jobs, err
		}
		j := &river.Job[deliveryArgs]{JobRow: &rivertype.JobRow{ID: id, Attempt: attempt, State: rivertype.JobStateRunning, Kind: deliveryKind, Queue: e.queue()}}
		if err := json.Unmarshal(args, &j.Args); err != nil {
			return jobs, fmt.Errorf("delivery job %d: %w", id, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// finish reports what became of a job this keysvc took for a batch (River
// did not give it, so it hears of it only here): settle records every
// outcome itself, and an error is what it could not record, after which
// the job stays running until this keysvc's lease lapses and it is
// rescued.
func (in *Inbox) finish(e *Endpoint, j *river.Job[deliveryArgs], err error) {
	if err != nil {
		in.logger.Warn("inbox: a batch's delivery was not recorded; it is delivered again once this keysvc's lease lapses",
			"endpoint", e.Name, "inbox_id", j.Args.InboxID, "error", err)
	}
}

// callBatch makes one batch forward, sets each item's result and returns
// the forward's as a whole: its answer's status, or why none came.
func (w *deliveryWorker) callBatch(ctx context.Context, e *Endpoint, items []*batchItem) callResult {
	start := time.Now()
	body, err := batchBody(items)
	if err != nil {
		return setBatchResult(items, start, callResult{err: err})
	}
	ctx, cancel := context.WithTimeout(ctx, w.in.opts.DeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Target, bytes.NewReader(body))
	if err != nil {
		return setBatchResult(items, start, callResult{err: err})
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Idemhook-Batch", strconv.Itoa(len(items)))
	if e.targetToken != "" {
		req.Header.Set("Authorization", "Bearer "+e.targetToken)
	}
	resp, err := w.in.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return setBatchResult(items, start, callResult{err: err})
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return readBatchAnswer(items, start, resp, answer)
}

// batchBody is the body of a batch forward: {"events": [...]}, each item's
// event with its body in base64.
func batchBody(items []*batchItem) ([]byte, error) {
	events := make([]batchEvent, len(items))
	for i, it := range items {
		events[i] = batchEvent{InboxID: strconv.FormatInt(it.job.Args.InboxID, 10), Key: it.ev.key, Account: it.ev.account,
			Headers: it.ev.headers, Body: base64.StdEncoding.EncodeToString(it.ev.body)}
	}
	return json.Marshal(map[string]any{"events": events})
}

// setBatchResult gives every item of a batch forward made at start the
// result r, and returns it.
func setBatchResult(items []*batchItem, start time.Time, r callResult) callResult {
	r.took = time.Since(start)
	for _, it := range items {
		it.res = r
	}
	return r
}

// readBatchAnswer sets each item's result from the target's answer to a
// batch forward made at start: the answer's status for all of them, and
// over it, when the target answered 2xx with a result per event, each
// event's own (a refused event its status, a missing one an error). It
// returns the forward's result as a whole: a 2xx with results is an answer,
// whatever it says of each event.
func readBatchAnswer(items []*batchItem, start time.Time, resp *http.Response, answer []byte) callResult {
	base := callResult{status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		base.retryAfter = time.Duration(s) * time.Second
	}
	if resp.StatusCode/100 != 2 {
		return setBatchResult(items, start, base)
	}
	if bytes.HasPrefix(answer, n8nStartingUp) {
		// n8n is not serving workflows yet: no event was refused.
		return setBatchResult(items, start, callResult{status: resp.StatusCode, err: errN8NStartingUp})
	}
	var a batchAnswer
	if err := json.Unmarshal(answer, &a); err != nil {
		base.err = fmt.Errorf("the target answered %d without a result per event (%v): sent again alone", resp.StatusCode, err)
		return setBatchResult(items, start, base)
	}
	byID := map[string]int{}
	for _, r := range a.Results {
		byID[r.InboxID.String()] = r.Status
	}
	setBatchResult(items, start, base)
	for _, it := range items {
		status, ok := byID[strconv.FormatInt(it.job.Args.InboxID, 10)]
		switch {
		case !ok:
			it.res.err = fmt.Errorf("the target answered %d without a result for this event: sent again alone", resp.StatusCode)
		case status/100 != 2:
			it.res.status = status
		}
	}
	return base
}
