package pgsql

import (
	"fmt"
	"time"
)

// The statements of keysvc's inbox (keysvc saves and forwards; the target,
// for example the inbox pattern's n8n worker, decides the effect). keysvc
// runs Receive and AssignEndpoint in the transaction that enqueues the
// delivery, so a receipt is never saved without its delivery queued.
//
// Some statements read or change River's river_job (v0.51's layout: kind,
// state, attempt, attempted_at, attempted_by, errors, scheduled_at, args),
// only for jobs of keysvc's delivery kind; keysvc/inbox's tests pin that
// layout against the River it is built with.

// Jobs is River's job table in the inbox's schema.
func (in Inbox) Jobs() Table { return in.table("river_job") }

// Workers holds one lease per running keysvc, named by its River client id:
// while its lease is alive, that keysvc may have deliveries in flight.
func (in Inbox) Workers() Table { return in.table("inbox_workers") }

// Kinds of a row of inbox_deliveries: what one attempt to forward an entry
// came to, or what an operator asked for.
const (
	// DeliveryAnswered: the target answered, with the status recorded.
	DeliveryAnswered = "answered"
	// DeliveryUnreached: no connection was made; the target cannot have it.
	DeliveryUnreached = "unreached"
	// DeliveryNoAnswer: the request was or may have been sent and no answer
	// came (a timeout, a reset): the target may have it.
	DeliveryNoAnswer = "no_answer"
	// DeliveryRescued: the keysvc that made the attempt stopped during it;
	// another took the delivery over. The target may have it.
	DeliveryRescued = "rescued"
	// DeliveryReplay and DeliveryRetryNow: an operator replayed the entry,
	// or asked for its next attempt now (attempt 0, actor the token's name).
	DeliveryReplay   = "replay"
	DeliveryRetryNow = "retry_now"
)

// MissingTables returns which of the tables named in $1 (text[]) do not
// exist.
func MissingTables() string {
	return `SELECT coalesce(array_agg(t), '{}') FROM unnest($1::text[]) t WHERE to_regclass(t) IS NULL`
}

// QueueDepth counts the jobs of kind $1 waiting or running.
func (in Inbox) QueueDepth() string {
	return fmt.Sprintf(`SELECT count(*) FROM %s WHERE kind = $1 AND state IN ('available', 'running', 'retryable', 'scheduled', 'pending')`, in.Jobs())
}

// KeysvcDDL creates what keysvc's inbox adds to ReceiptsDDL: the workers'
// leases, the kind and actor of each row of inbox_deliveries, and the index
// keysvc lists and counts its entries by (endpoint, state, newest first).
// Running it again changes nothing.
func (in Inbox) KeysvcDDL() string {
	return in.ReceiptsDDL() + fmt.Sprintf(`
CREATE TABLE IF NOT EXISTS %[1]s (
  id text PRIMARY KEY,
  alive_until timestamptz NOT NULL,
  renewed_at timestamptz NOT NULL
);
ALTER TABLE %[2]s ADD COLUMN IF NOT EXISTS kind text, ADD COLUMN IF NOT EXISTS actor text;
CREATE INDEX IF NOT EXISTS %[4]s_endpoint_state_idx ON %[3]s (endpoint, state, id) INCLUDE (received_at)
  WHERE endpoint IS NOT NULL;
`, in.Workers(), in.Deliveries(), in.Inbox(), in.Inbox().Name)
}

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
// account and the current state of row $1, and the kind of its latest
// delivery row (empty when none): after DeliveryNoAnswer or DeliveryRescued
// the next forward is a re-send.
func (in Inbox) EventForDelivery() string {
	return fmt.Sprintf(`SELECT body, headers, event_id, account, state,
  coalesce((SELECT kind FROM %[2]s d WHERE d.inbox_id = e.id ORDER BY d.at DESC LIMIT 1), '')
FROM %[1]s e WHERE id = $1`, in.Inbox(), in.Deliveries())
}

// ClaimDeliveries takes, for one batch forward, up to $3 more delivery jobs
// of kind $1 in queue $2 that are available and due, as River's own fetch
// takes jobs (running, attempt + 1, attempted_at, keysvc $4 appended to
// attempted_by), except those whose args say alone (an entry sent alone
// after its batch failed it). FOR UPDATE SKIP LOCKED leaves jobs River or
// another keysvc is fetching to them. It returns each job's id, args and
// attempt. A job so taken is this keysvc's exactly as one River gave it: it
// completes it, and RescueDeliveries makes it available again if this
// keysvc's lease lapses.
func (in Inbox) ClaimDeliveries() string {
	return fmt.Sprintf(`WITH picked AS (
  SELECT id FROM %[1]s
  WHERE kind = $1 AND queue = $2 AND state = 'available' AND scheduled_at <= now()
    AND NOT coalesce((args->>'alone')::boolean, false)
  ORDER BY priority, scheduled_at, id
  LIMIT $3
  FOR UPDATE SKIP LOCKED
)
UPDATE %[1]s j SET state = 'running', attempt = j.attempt + 1, attempted_at = now(),
  attempted_by = array_append(j.attempted_by, $4::text)
FROM picked WHERE j.id = picked.id
RETURNING j.id, j.args, j.attempt`, in.Jobs())
}

// RecordDelivery appends attempt $2 of row $1: status $3 (NULL: no answer),
// error $4, duration $5 in milliseconds, kind $6 (a Delivery* constant).
func (in Inbox) RecordDelivery() string {
	return fmt.Sprintf(`INSERT INTO %s (inbox_id, attempt, status, error, duration_ms, kind) VALUES ($1, $2, $3, left($4, 2000), $5, $6)`, in.Deliveries())
}

// RenewWorker renews the lease of keysvc $1 for $2 milliseconds from the
// database's now, and forgets leases that expired over an hour ago (a
// missing lease reads as expired, so forgetting one changes nothing). Only
// the keysvc named $1 writes its row; it counts its lease from before it
// sent this statement, so its own reckoning always ends before the
// database's.
func (in Inbox) RenewWorker() string {
	return fmt.Sprintf(`WITH forgotten AS (
  DELETE FROM %[1]s WHERE alive_until < now() - interval '1 hour' AND id <> $1
)
INSERT INTO %[1]s (id, alive_until, renewed_at) VALUES ($1, now() + $2 * interval '1 millisecond', now())
ON CONFLICT (id) DO UPDATE SET alive_until = EXCLUDED.alive_until, renewed_at = EXCLUDED.renewed_at`, in.Workers())
}

// ResignWorker deletes keysvc $1's lease once it has stopped cleanly, so
// that nobody waits for it.
func (in Inbox) ResignWorker() string {
	return fmt.Sprintf(`DELETE FROM %s WHERE id = $1`, in.Workers())
}

// RescueDeliveries makes running jobs of kind $1 whose keysvc (the last
// client in attempted_by) holds no live lease available again at once, up
// to 500 per call, ahead of their queue's waiting jobs (they keep the
// scheduled time they were fetched at, which is before any job queued
// while they ran), and records each as a DeliveryRescued row of its entry
// (attempt: the job's attempt plus its args' prior). It returns each
// rescued entry's id, endpoint and the keysvc that stopped.
//
// A keysvc stops every call to a target before its lease ends by its own
// reckoning, which is before the database's (RenewWorker), so a job is
// never rescued while its first attempt can still be running. FOR UPDATE
// SKIP LOCKED leaves rows River is fetching or completing to a later call,
// and gives two keysvcs rescuing at once disjoint sets; a row completed
// meanwhile is re-read and no longer matches.
func (in Inbox) RescueDeliveries() string {
	return fmt.Sprintf(`WITH stuck AS (
  SELECT j.id FROM %[1]s j
  WHERE j.kind = $1 AND j.state = 'running'
    AND NOT EXISTS (SELECT 1 FROM %[2]s w
      WHERE w.id = j.attempted_by[array_upper(j.attempted_by, 1)] AND w.alive_until > now())
  ORDER BY j.id
  LIMIT 500
  FOR UPDATE OF j SKIP LOCKED
), rescued AS (
  UPDATE %[1]s j SET state = 'available',
    errors = array_append(j.errors, jsonb_build_object('at', now(), 'attempt', j.attempt, 'trace', '',
      'error', 'rescued: keysvc ' || coalesce(j.attempted_by[array_upper(j.attempted_by, 1)], '?') || ' stopped during this delivery'))
  FROM stuck WHERE j.id = stuck.id
  RETURNING j.args, j.attempt, j.attempted_at, coalesce(j.attempted_by[array_upper(j.attempted_by, 1)], '') AS owner
), recorded AS (
  INSERT INTO %[3]s (inbox_id, attempt, status, error, duration_ms, kind)
  SELECT (r.args->>'inbox_id')::bigint, r.attempt + coalesce((r.args->>'prior')::int, 0), NULL,
    'keysvc ' || r.owner || ' stopped during this delivery: the target may have it',
    greatest(0, extract(epoch FROM now() - coalesce(r.attempted_at, now())) * 1000)::int, '%[5]s'
  FROM rescued r WHERE EXISTS (SELECT 1 FROM %[4]s e WHERE e.id = (r.args->>'inbox_id')::bigint)
)
SELECT (args->>'inbox_id')::bigint, args->>'endpoint', owner FROM rescued`, in.Jobs(), in.Workers(), in.Deliveries(), in.Inbox(), DeliveryRescued)
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

// Entry returns row $1, received by keysvc endpoint $2 (empty for any
// endpoint), as keysvc shows it, with its kept headers.
func (in Inbox) Entry() string {
	return fmt.Sprintf(`SELECT id, endpoint, account, event_id, event_type, state, coalesce(outcome, ''), coalesce(last_error, ''),
  received_at, finished_at, headers
FROM %s WHERE id = $1 AND endpoint IS NOT NULL AND ($2 = '' OR endpoint = $2)`, in.Inbox())
}

// EntryBody returns the body and kept Content-Type of row $1, received by a
// keysvc endpoint. Headers are kept under lower-case names; rows saved by a
// keysvc before that keep the canonical one.
func (in Inbox) EntryBody() string {
	return fmt.Sprintf(`SELECT body, coalesce(headers->>'content-type', headers->>'Content-Type', '') FROM %s WHERE id = $1 AND endpoint IS NOT NULL`, in.Inbox())
}

// entryFilter is the WHERE clause shared by ListEntries and SelectEntries
// (e is the inbox table): $1 endpoints (text[], NULL for any), $2 states
// (text[], NULL for any), $3 event type, $4 received at or after, $5
// received before (each NULL for any).
const entryFilter = `e.endpoint IS NOT NULL
  AND ($1::text[] IS NULL OR e.endpoint = ANY($1::text[]))
  AND ($2::text[] IS NULL OR e.state = ANY($2::text[]))
  AND ($3::text IS NULL OR e.event_type = $3::text)
  AND ($4::timestamptz IS NULL OR e.received_at >= $4::timestamptz)
  AND ($5::timestamptz IS NULL OR e.received_at < $5::timestamptz)`

// activeJob is the LATERAL subquery of an entry's delivery job that is
// queued, waiting or running (kind $8), if any.
const activeJob = `SELECT id, state::text AS state, scheduled_at FROM %s
  WHERE kind = $8 AND args @> jsonb_build_object('inbox_id', e.id)
    AND state IN ('available', 'pending', 'scheduled', 'retryable', 'running')
  ORDER BY id DESC LIMIT 1`

// ListEntries lists keysvc's entries that match entryFilter, with id below
// $6 (NULL for any), newest first, at most $7: each with its count of
// attempts, its latest attempt (status, error, kind, time) and its active
// job (when the next attempt is due, whether it runs now; kind $8). Reads
// only: a page is a snapshot, and the id cursor keeps pages from
// overlapping while new entries arrive.
func (in Inbox) ListEntries() string {
	return fmt.Sprintf(`SELECT e.id, e.endpoint, e.account, e.event_id, e.event_type, e.state, coalesce(e.outcome, ''), coalesce(e.last_error, ''),
  e.received_at, e.finished_at, coalesce(c.n, 0), d.status, coalesce(d.error, ''), coalesce(d.kind, ''), d.at,
  j.scheduled_at, coalesce(j.state = 'running', false)
FROM %[1]s e
LEFT JOIN LATERAL (SELECT count(*) AS n FROM %[2]s WHERE inbox_id = e.id AND coalesce(kind, '') NOT IN ('%[3]s', '%[4]s')) c ON true
LEFT JOIN LATERAL (SELECT status, error, kind, at FROM %[2]s
  WHERE inbox_id = e.id AND coalesce(kind, '') NOT IN ('%[3]s', '%[4]s') ORDER BY at DESC LIMIT 1) d ON true
LEFT JOIN LATERAL (`+fmt.Sprintf(activeJob, in.Jobs())+`) j ON true
WHERE `+entryFilter+`
  AND ($6::bigint IS NULL OR e.id < $6::bigint)
ORDER BY e.id DESC
LIMIT $7`, in.Inbox(), in.Deliveries(), DeliveryReplay, DeliveryRetryNow)
}

// SummarizeEntries counts keysvc's entries by endpoint and state, with the
// oldest received_at of each and its age in seconds by the database's clock
// (read from the endpoint-state index).
func (in Inbox) SummarizeEntries() string {
	return fmt.Sprintf(`SELECT endpoint, state, count(*), min(received_at), extract(epoch FROM now() - min(received_at))::float8 FROM %s
WHERE endpoint IS NOT NULL GROUP BY endpoint, state ORDER BY endpoint, state`, in.Inbox())
}

// SummarizeJobs counts the delivery jobs (kind $1) of each queue that are
// queued, waiting or running, by state.
func (in Inbox) SummarizeJobs() string {
	return fmt.Sprintf(`SELECT queue, state::text, count(*) FROM %s
WHERE kind = $1 AND state IN ('available', 'pending', 'scheduled', 'retryable', 'running') GROUP BY queue, state`, in.Jobs())
}

// SelectEntries locks, for an operator's action, the entries that match
// entryFilter (its $1 the configured endpoints to act on, its $2 the
// states the action applies to) and are among ids $6 (bigint[], NULL for
// any), lowest id first, at most $7; each with its active job (kind $8) id
// and state, NULL when it has none. The row locks (FOR UPDATE OF e) hold
// until the action commits, so the entries it counted are the ones it
// changes; a delivery finishing meanwhile waits for them.
func (in Inbox) SelectEntries() string {
	return fmt.Sprintf(`SELECT e.id, e.endpoint, j.id, coalesce(j.state, '')
FROM %[1]s e
LEFT JOIN LATERAL (`+fmt.Sprintf(activeJob, in.Jobs())+`) j ON true
WHERE `+entryFilter+`
  AND ($6::bigint[] IS NULL OR e.id = ANY($6::bigint[]))
ORDER BY e.id
LIMIT $7
FOR UPDATE OF e`, in.Inbox())
}

// ReplayEntries puts the rows among ids $1 that are failed or forwarded
// back to received, and returns each one's id and endpoint; the caller
// queues their deliveries in the same transaction.
func (in Inbox) ReplayEntries() string {
	return fmt.Sprintf(`UPDATE %s SET state = 'received', outcome = NULL, last_error = NULL, finished_at = NULL, updated_at = now()
WHERE id = ANY($1::bigint[]) AND state IN ('failed', 'forwarded')
RETURNING id, endpoint`, in.Inbox())
}

// RecordAction appends to the history of each row among ids $1 that an
// operator (token name $3) asked for $2 (DeliveryReplay or
// DeliveryRetryNow): attempt 0, no status.
func (in Inbox) RecordAction() string {
	return fmt.Sprintf(`INSERT INTO %s (inbox_id, attempt, status, error, duration_ms, kind, actor)
SELECT id, 0, NULL, NULL, 0, $2, $3 FROM unnest($1::bigint[]) id`, in.Deliveries())
}

// DeliveryAttempts lists row $1's delivery attempts and the operators'
// actions on it, oldest first.
func (in Inbox) DeliveryAttempts() string {
	return fmt.Sprintf(`SELECT attempt, at, status, coalesce(error, ''), duration_ms, coalesce(kind, ''), coalesce(actor, '')
FROM %s WHERE inbox_id = $1 ORDER BY at, attempt`, in.Deliveries())
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
