package inbox

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

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
