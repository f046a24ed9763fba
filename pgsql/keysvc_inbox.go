package pgsql

import (
	"fmt"
	"time"
)

// The statements of keysvc's inbox (keysvc saves and forwards; the target,
// for example the inbox pattern's n8n worker, decides the effect). keysvc
// runs Receive and AssignEndpoint in the transaction that enqueues the
// delivery, so a receipt is never saved without its delivery queued.

// AssignEndpoint records the keysvc endpoint $2 of the new receipt $1 and,
// when $3 (allowed) is false, finishes it as ignored: its type is outside the
// endpoint's allowlist, so it is kept but never forwarded.
func (in Inbox) AssignEndpoint() string {
	return fmt.Sprintf(`UPDATE %s SET endpoint = $2,
  state = CASE WHEN $3 THEN state ELSE 'ignored' END,
  outcome = CASE WHEN $3 THEN outcome ELSE 'type_not_allowed' END,
  last_error = CASE WHEN $3 THEN last_error ELSE 'event type ' || quote_literal(event_type) || ' is not in the endpoint''s allowlist' END,
  finished_at = CASE WHEN $3 THEN finished_at ELSE now() END,
  updated_at = now()
WHERE id = $1
RETURNING state`, in.Inbox())
}

// EventForDelivery loads what a delivery sends: body, headers, event_id,
// account and the current state of row $1.
func (in Inbox) EventForDelivery() string {
	return fmt.Sprintf(`SELECT body, headers, event_id, account, state FROM %s WHERE id = $1`, in.Inbox())
}

// RecordDelivery appends attempt $2 of row $1: status $3 (NULL: no answer),
// error $4, duration $5 in milliseconds.
func (in Inbox) RecordDelivery() string {
	return fmt.Sprintf(`INSERT INTO %s (inbox_id, attempt, status, error, duration_ms) VALUES ($1, $2, $3, left($4, 2000), $5)`, in.Deliveries())
}

// MarkForwarded finishes row $1 as forwarded after a 2xx, unless the target
// has already recorded an outcome of its own (the inbox worker moves it to
// processing and beyond): only a row still received changes.
func (in Inbox) MarkForwarded() string {
	return fmt.Sprintf(`UPDATE %s SET state = 'forwarded', outcome = 'forwarded', finished_at = now(), updated_at = now()
WHERE id = $1 AND state = 'received'`, in.Inbox())
}

// MarkDeliveryFailed finishes row $1 as failed with error $2 after the last
// delivery attempt, unless the target recorded an outcome meanwhile.
func (in Inbox) MarkDeliveryFailed() string {
	return fmt.Sprintf(`UPDATE %s SET state = 'failed', outcome = 'delivery_failed', last_error = left($2, 2000),
  finished_at = now(), updated_at = now()
WHERE id = $1 AND state = 'received'`, in.Inbox())
}

// Replay puts row $1 of endpoint $2 back to received when it was failed or
// forwarded, and returns its state; no row when it is not replayable.
func (in Inbox) Replay() string {
	return fmt.Sprintf(`UPDATE %s SET state = 'received', outcome = NULL, last_error = NULL, finished_at = NULL, updated_at = now()
WHERE id = $1 AND endpoint = $2 AND state IN ('failed', 'forwarded')
RETURNING state`, in.Inbox())
}

// Entry returns row $1 of endpoint $2 as keysvc shows it.
func (in Inbox) Entry() string {
	return fmt.Sprintf(`SELECT id, account, event_id, event_type, state, coalesce(outcome, ''), coalesce(last_error, ''),
  received_at, finished_at
FROM %s WHERE id = $1 AND endpoint = $2`, in.Inbox())
}

// DeliveryAttempts lists row $1's delivery attempts, oldest first.
func (in Inbox) DeliveryAttempts() string {
	return fmt.Sprintf(`SELECT attempt, at, status, coalesce(error, ''), duration_ms FROM %s WHERE inbox_id = $1 ORDER BY at, attempt`, in.Deliveries())
}

// StrandedReceipts lists up to 500 rows keysvc received longer ago than
// grace that are still received: their delivery was lost (its queue entry
// deleted) or never finished. Re-enqueueing them is safe: deliveries are
// unique per row while one is queued.
func (in Inbox) StrandedReceipts(grace time.Duration) string {
	return fmt.Sprintf(`SELECT id, endpoint FROM %s
WHERE state = 'received' AND endpoint IS NOT NULL AND received_at < now() - interval '%d seconds'
ORDER BY id LIMIT 500`, in.Inbox(), int64(grace/time.Second))
}
