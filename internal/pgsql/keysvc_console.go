package pgsql

import "fmt"

// The statements keysvc's console runs on the n8n inbox pattern's tables
// (--pattern-schema): it reads inbox_events and outbox_tasks, and retries
// failed and rejected events and failed tasks as docs/inbox.md's "Stuck work"
// does by hand. The pattern's workflows own every other transition.

// PatternEventCounts counts the pattern's inbox rows by state, with the
// oldest received_at of each and its age in seconds.
func (in Inbox) PatternEventCounts() string {
	return fmt.Sprintf(`SELECT state, count(*), min(received_at), extract(epoch FROM now() - min(received_at))::float8
FROM %s GROUP BY state ORDER BY state`, in.Inbox())
}

// PatternTaskCounts counts the outbox tasks by state, with the oldest
// created_at of each and its age in seconds.
func (in Inbox) PatternTaskCounts() string {
	return fmt.Sprintf(`SELECT state, count(*), min(created_at), extract(epoch FROM now() - min(created_at))::float8
FROM %s GROUP BY state ORDER BY state`, in.Outbox())
}

// patternFilter is the WHERE clause of the pattern's lists and selections
// (t is the table, at its time column): $1 states (text[], NULL for any),
// $2 event type or task kind, $3 at or after, $4 before (each NULL for
// any), $5 ids (bigint[], NULL for any).
const patternFilter = `($1::text[] IS NULL OR t.state = ANY($1::text[]))
  AND ($2::text IS NULL OR t.%[1]s = $2::text)
  AND ($3::timestamptz IS NULL OR t.%[2]s >= $3::timestamptz)
  AND ($4::timestamptz IS NULL OR t.%[2]s < $4::timestamptz)
  AND ($5::bigint[] IS NULL OR t.id = ANY($5::bigint[]))`

// ListPatternEvents lists the pattern's inbox rows matching patternFilter
// (by event_type and received_at) with id below $6 (NULL for any), newest
// first, at most $7: what each decided (state, outcome, last_error), its
// attempts, when it is due again (deferred) and until when it is claimed
// (processing). Reads only.
func (in Inbox) ListPatternEvents() string {
	return fmt.Sprintf(`SELECT t.id, t.account, t.event_id, t.event_type, t.state, coalesce(t.outcome, ''), t.attempts, coalesce(t.last_error, ''),
  t.next_attempt_at, t.claimed_until, t.received_at, t.finished_at, coalesce(t.endpoint, '')
FROM %s t
WHERE `+fmt.Sprintf(patternFilter, "event_type", "received_at")+`
  AND ($6::bigint IS NULL OR t.id < $6::bigint)
ORDER BY t.id DESC
LIMIT $7`, in.Inbox())
}

// ListPatternTasks lists the outbox tasks matching patternFilter (by kind
// and created_at) with id below $6 (NULL for any), newest first, at most
// $7. Reads only.
func (in Inbox) ListPatternTasks() string {
	return fmt.Sprintf(`SELECT t.id, t.operation_key, t.kind, t.state, t.attempts, t.last_status, coalesce(t.last_error, ''),
  t.next_attempt_at, t.created_at, t.updated_at, t.sent_at, t.inbox_id
FROM %s t
WHERE `+fmt.Sprintf(patternFilter, "kind", "created_at")+`
  AND ($6::bigint IS NULL OR t.id < $6::bigint)
ORDER BY t.id DESC
LIMIT $7`, in.Outbox())
}

// SelectPatternEvents locks, for a retry, the inbox rows matching
// patternFilter (its $1 the states a retry applies to), lowest id first, at
// most $6, and returns each id (and an empty key, to read as
// SelectPatternTasks). The locks hold until the retry commits, so the rows
// counted are the rows retried; a worker claiming one meanwhile waits.
func (in Inbox) SelectPatternEvents() string {
	return fmt.Sprintf(`SELECT t.id, '' FROM %s t
WHERE `+fmt.Sprintf(patternFilter, "event_type", "received_at")+`
ORDER BY t.id LIMIT $6
FOR UPDATE`, in.Inbox())
}

// SelectPatternTasks locks, for a retry, the outbox tasks matching
// patternFilter, lowest id first, at most $6, and returns each id and
// operation key (RetryTask's argument); a dispatcher claiming one meanwhile
// waits.
func (in Inbox) SelectPatternTasks() string {
	return fmt.Sprintf(`SELECT t.id, t.operation_key FROM %s t
WHERE `+fmt.Sprintf(patternFilter, "kind", "created_at")+`
ORDER BY t.id LIMIT $6
FOR UPDATE`, in.Outbox())
}

// RetryEvents puts the failed or rejected rows among ids $1 back to
// received on purpose, with a fresh attempt budget, once their cause is
// fixed; it returns their ids. The recoverer offers them to the worker at
// its next run (and keysvc's recoverer forwards one keysvc received): the
// worker's claim lets one decision in.
func (in Inbox) RetryEvents() string {
	return fmt.Sprintf(`UPDATE %s SET state = 'received', outcome = NULL, last_error = NULL, attempts = 0,
  claimed_until = NULL, next_attempt_at = NULL, waiting_for = NULL, finished_at = NULL, updated_at = now()
WHERE id = ANY($1::bigint[]) AND state IN ('failed', 'rejected')
RETURNING id`, in.Inbox())
}
