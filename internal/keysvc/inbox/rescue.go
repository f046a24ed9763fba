package inbox

import (
	"context"
	"time"
)

// rescueLoop, every RescueAfter/5 from Start on, makes the deliveries of
// keysvcs whose lease lapsed available again (pgsql.RescueDeliveries). Every
// keysvc runs it; the statement gives concurrent runs disjoint jobs.
func (in *Inbox) rescueLoop(ctx context.Context) {
	t := time.NewTicker(in.opts.RescueAfter / 5)
	defer t.Stop()
	for {
		if err := in.rescueOnce(ctx); err != nil && ctx.Err() == nil {
			in.logger.Debug("inbox rescuer", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (in *Inbox) rescueOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, in.opts.RescueAfter/5)
	defer cancel()
	rows, err := in.pool.Query(ctx, in.tables.RescueDeliveries(), deliveryKind)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var endpoint, owner string
		if err := rows.Scan(&id, &endpoint, &owner); err != nil {
			return err
		}
		in.metrics.rescued.WithLabelValues(endpoint).Inc()
		in.logger.Info("inbox: a delivery in flight in a keysvc that stopped is delivered again", "endpoint", endpoint, "inbox_id", id, "stopped", owner)
	}
	return rows.Err()
}
