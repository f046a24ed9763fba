package pgsql

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Outcome is a lease acquisition's result, the "outcome" column of
// AcquireLease: the same words in the workflows, keysvc and its stores.
type Outcome string

const (
	OutcomeAcquired Outcome = "acquired" // this attempt holds the lease: run the business step
	OutcomeDone     Outcome = "done"     // the event was processed: answer 200 duplicate
	OutcomeBusy     Outcome = "busy"     // another attempt holds an unexpired lease: answer 409
)

// EventsDDL creates the processed-events table. The lease columns are added
// to the plain table, so the lease schema is a superset of the plain one and
// running it on an existing plain table migrates it in place. Rows written
// by a plain reservation default to state 'done'.
func EventsDDL(events Table, lease bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `CREATE TABLE IF NOT EXISTS %s (
  key text PRIMARY KEY,
  first_seen timestamptz NOT NULL DEFAULT now()
);
-- Cleanup deletes by age.
CREATE INDEX IF NOT EXISTS %s_first_seen_idx ON %s (first_seen);
`, events, events.Name, events)
	if lease {
		fmt.Fprintf(&b, `-- Lease guard: an attempt holds the key while it runs; 'done' is final.
ALTER TABLE %s
  ADD COLUMN IF NOT EXISTS state text NOT NULL DEFAULT 'done' CHECK (state IN ('processing', 'done')),
  ADD COLUMN IF NOT EXISTS lease_until timestamptz,
  ADD COLUMN IF NOT EXISTS attempts integer NOT NULL DEFAULT 1;
`, events)
	}
	return b.String()
}

// SchemaDDL creates the schema t is in, for a database where nothing of
// the user's exists yet (verify's scratch database); "" for a table of the
// search_path.
func SchemaDDL(t Table) string {
	if t.Schema == "" {
		return ""
	}
	return fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %s;\n", t.Schema)
}

// ExecutionDDL adds the column in which `idemhook guard`'s workflows keep
// the n8n execution that holds each key, so that their error workflow can
// give the key up when that execution fails (ReleaseExecution). Running it
// again changes nothing.
func ExecutionDDL(events Table) string {
	return fmt.Sprintf(`-- The n8n execution that holds the key; its error workflow releases it.
ALTER TABLE %s ADD COLUMN IF NOT EXISTS execution_id text;
CREATE INDEX IF NOT EXISTS %s_execution_idx ON %s (execution_id) WHERE execution_id IS NOT NULL;
`, events, events.Name, events)
}

// BusinessDDL creates the example business table of the template.
func BusinessDDL(business Table) string {
	return fmt.Sprintf(`-- Example business table used by the template. Replace it with your own step.
CREATE TABLE IF NOT EXISTS %s (
  id bigserial PRIMARY KEY,
  event_key text NOT NULL,
  event_type text,
  created_at timestamptz NOT NULL DEFAULT now()
);
`, business)
}

// BusinessInsert is the template's example business step: one row of
// business for key $1 and event type $2 (NULL when empty).
func BusinessInsert(business Table) string {
	return fmt.Sprintf("INSERT INTO %s (event_key, event_type) VALUES ($1, NULLIF($2, ''))", business)
}

// BusinessInsertReturning is BusinessInsert that returns the row's
// StepOutputColumn, for a lease held where the step's statement cannot mark
// it done (keysvc): the workflow's check after the step looks for it.
func BusinessInsertReturning(business Table) string {
	return BusinessInsert(business) + " RETURNING " + StepOutputColumn
}

// StepOutputColumn is the column the lease guard's example business steps
// return (BusinessInsertDone, BusinessInsertReturning) and the workflow's
// check after them looks for. n8n 2.41.1 hands a node that has an error
// output its input items back on its success output when the node throws
// instead of returning an error item: the Postgres node throws when it
// cannot read its credential from n8n's own database (that database
// restarting or out of reach), before its query runs. The step's input (the
// reservation's row, the key's item) never has this column, so an item
// without it is a step that did not run, and must not be answered 200 or
// marked done.
const StepOutputColumn = "event_key"

// Columns lists the columns of table $1 in schema $2 (the search path's
// first when empty): keysvc reads from them whether the table exists and
// has the lease columns.
const Columns = `SELECT column_name FROM information_schema.columns
WHERE table_name = $1 AND table_schema = coalesce(nullif($2, ''), current_schema())`

// Reserve inserts key $1 and returns it only to the one caller that inserted
// it: concurrent callers conflict on the primary key and get no row.
func Reserve(events Table) string {
	return fmt.Sprintf("INSERT INTO %s (key) VALUES ($1) ON CONFLICT (key) DO NOTHING RETURNING key", events)
}

// ReserveAndWrite is the transactional guard: it reserves key $1 and runs
// the business write in the same statement, so in one transaction: both
// happen or neither does, with no release step and nothing half done when the
// caller dies. The business CTE is the example step (event type $2 into the
// business table); users put their own write there. An empty key reserves
// nothing. It always returns one row: key, and new (true for the one
// delivery that reserved it). Concurrent deliveries of one key wait on the
// primary key: if the first one's transaction fails, the next one reserves.
func ReserveAndWrite(events, business Table) string {
	return fmt.Sprintf(`WITH reserved AS (
  INSERT INTO %s (key) SELECT $1 WHERE $1 <> '' ON CONFLICT (key) DO NOTHING RETURNING key
), business AS (
  -- The business step: replace this insert with your own write, reading the key from reserved.
  INSERT INTO %s (event_key, event_type) SELECT key, NULLIF($2, '') FROM reserved RETURNING event_key
)
SELECT $1::text AS key, EXISTS (SELECT 1 FROM reserved) AS new`, events, business)
}

// ReserveForExecution is Reserve that also records the n8n execution $2
// that holds key $1 (ExecutionDDL's column).
func ReserveForExecution(events Table) string {
	return fmt.Sprintf("INSERT INTO %s (key, execution_id) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING RETURNING key", events)
}

// ReleaseExecution gives up every key that execution $1 holds: its
// workflow failed, and the provider's retry must be processed. A key taken
// over by a later execution (a lease that expired) records that one, so it
// is not the failed one's to give up. A key one branch of the failed
// execution marked done is given up too: a retry then runs that branch
// again rather than losing the one that failed (at least once, not at most
// once).
func ReleaseExecution(events Table) string {
	return fmt.Sprintf("DELETE FROM %s WHERE execution_id = $1 RETURNING key", events)
}

// Release deletes key $1 so that the provider's next retry is processed.
func Release(events Table) string {
	return fmt.Sprintf("DELETE FROM %s WHERE key = $1", events)
}

// Lookup returns when key $1 was first seen.
func Lookup(events Table) string {
	return fmt.Sprintf("SELECT first_seen FROM %s WHERE key = $1", events)
}

// AcquireLease is the lease guard's one-statement entry transition for key
// $1. A new key is inserted as 'processing'; a 'processing' key whose lease
// expired is taken over (attempts + 1); anything else is left alone. It
// always returns one row: key, outcome (OutcomeAcquired, OutcomeDone or
// OutcomeBusy), attempt, the fencing token of the holder, and lease_until
// (both NULL unless acquired).
//
// Concurrency: a key held under an unexpired lease is answered busy from the
// statement's snapshot, before the insert, so a retry never waits on the
// holder's row lock: the holder's step (BusinessInsertDone) locks the row
// for as long as its statement runs, and a retry answered only after it
// would be a retry that hangs. Otherwise the insert's ON CONFLICT takes the
// row lock, and re-checks the row it waited for: two concurrent takeovers
// of one expired lease cannot both win, and a takeover that waited for a
// holder's done sees it done. A key inserted concurrently by another
// statement after this one's snapshot reads as busy, which is safe: the
// caller answers 409 and the provider retries.
func AcquireLease(events Table, lease time.Duration) string {
	return acquireLease(events, lease, false)
}

// AcquireLeaseForExecution is AcquireLease that also records the n8n
// execution $2 that holds the lease (ExecutionDDL's column); a takeover
// records the new holder.
func AcquireLeaseForExecution(events Table, lease time.Duration) string {
	return acquireLease(events, lease, true)
}

func acquireLease(events Table, lease time.Duration, execution bool) string {
	cols, vals, set := "key, state, lease_until", "$1, 'processing', now() + interval '%[2]d seconds'", ""
	if execution {
		cols, vals, set = cols+", execution_id", vals+", $2", ", execution_id = EXCLUDED.execution_id"
	}
	return fmt.Sprintf(`WITH held AS (
  SELECT 1 FROM %[1]s WHERE key = $1 AND state = 'processing' AND lease_until >= now()
), acquired AS (
  INSERT INTO %[1]s AS e (`+cols+`)
  SELECT `+vals+` WHERE NOT EXISTS (SELECT 1 FROM held)
  ON CONFLICT (key) DO UPDATE
    SET state = 'processing', lease_until = EXCLUDED.lease_until, attempts = e.attempts + 1`+set+`
    WHERE e.state = 'processing' AND e.lease_until < now()
  RETURNING e.attempts, e.lease_until
)
SELECT $1::text AS key,
  CASE
    WHEN EXISTS (SELECT 1 FROM acquired) THEN '%[3]s'
    WHEN (SELECT state FROM %[1]s WHERE key = $1) = 'done' THEN '%[4]s'
    ELSE '%[5]s'
  END AS outcome,
  (SELECT attempts FROM acquired) AS attempt,
  (SELECT lease_until FROM acquired) AS lease_until`, events, int64(lease/time.Second), OutcomeAcquired, OutcomeDone, OutcomeBusy)
}

// MarkDone records that the business step of key $1 succeeded. 'done' is
// final: later deliveries are duplicates.
func MarkDone(events Table) string {
	return fmt.Sprintf("UPDATE %s SET state = 'done', lease_until = NULL WHERE key = $1 RETURNING key", events)
}

// LeaseLostPrefix begins the error of a statement fenced by a lease
// (BusinessInsertDone, MarkAttemptDone) when the attempt no longer holds
// the key: another attempt took the lease over after it expired, or the key
// was released. The workflow's node fails, its execution answers 5xx, and
// the provider retries: a retry then finds the key done (a duplicate), held
// (409) or free (it runs), never a 200 for a step that did not commit.
const LeaseLostPrefix = "idemhook: this attempt no longer holds the lease on key "

// failUnlessDone completes a statement whose CTE done holds the fenced
// update's row: it returns that row's key, or fails with LeaseLostPrefix
// when there is none. Plain SQL has no RAISE, so the failure is a cast of
// the message to integer, which PostgreSQL reports with the message in its
// text ('invalid input syntax for type integer: "idemhook: …"'). The
// message is a column of a subquery that OFFSET 0 keeps from being pulled
// up, so the planner cannot fold the cast into a constant and fail at plan
// time; the cast runs only for the row the WHERE lets through, when done is
// empty. The key ($1) reaches the message as a bound value, never as SQL
// text. column is what the first SELECT returns: key, or key under the name
// StepOutputColumn.
func failUnlessDone(column string) string {
	return `SELECT ` + column + ` FROM done
UNION ALL
SELECT CAST(m.message AS integer)::text
FROM (SELECT '` + LeaseLostPrefix + `' || $1::text || ': it was taken over after the lease expired, or released; nothing was marked done. Answer 5xx: the provider''s retry finds it done, in progress or free.' AS message OFFSET 0) m
WHERE NOT EXISTS (SELECT 1 FROM done)`
}

// BusinessInsertDone is the lease guard's example business step: the
// business row for key $1 (event type $2) and the key's 'done' in one
// statement, so in one transaction, fenced by attempt $3 (AcquireLease's
// attempt). Both commit or neither: an attempt that dies after its commit
// leaves the key done, and the retry is a duplicate, not a second row; one
// that dies before leaves the key processing, and the retry takes the lease
// over once it expires and writes the row once. Only the attempt that holds
// the lease writes: the update requires state 'processing' and attempts =
// $3, so an attempt whose lease expired and was taken over (attempts went
// up), or whose key is already done, writes nothing and fails
// (LeaseLostPrefix). The update's row lock orders it against a concurrent
// takeover (AcquireLease's ON CONFLICT DO UPDATE re-checks the row it
// waited for), so one of the two wins and the other sees its result.
// Users whose step is SQL on the same database put their own write in the
// business CTE, reading the key from done. The key comes back as
// StepOutputColumn, which the workflow's check after the step looks for.
func BusinessInsertDone(events, business Table) string {
	return fmt.Sprintf(`WITH done AS (
  UPDATE %s SET state = 'done', lease_until = NULL
  WHERE key = $1 AND attempts = $3 AND state = 'processing'
  RETURNING key
), business AS (
  -- The business step: replace this insert with your own write, reading the key from done.
  INSERT INTO %s (event_key, event_type) SELECT key, NULLIF($2, '') FROM done
)
`, events, business) + failUnlessDone("key AS "+StepOutputColumn)
}

// MarkAttemptDone is MarkDone fenced by attempt $2, for the lease guard's
// Mark Done after the user's own steps: it marks key $1 done only while
// attempt $2 holds it (a key this attempt already marked done, as
// BusinessInsertDone does, is left done), and fails with LeaseLostPrefix
// otherwise, so an execution whose lease was taken over answers 5xx, not
// 200: the attempt that took it over decides, and if it fails the
// provider's retry runs the step again (at least once for steps outside
// the database).
func MarkAttemptDone(events Table) string {
	return fmt.Sprintf(`WITH done AS (
  UPDATE %s SET state = 'done', lease_until = NULL
  WHERE key = $1 AND attempts = $2
  RETURNING key
)
`, events) + failUnlessDone("key")
}

// MarkDoneRow is MarkDone answering the row it made done: first_seen,
// state, lease_until, attempts (no row: key $1 is absent). keysvc answers
// a completion from it. The row is the one this statement changed, under
// its row lock: read by a second statement, it could be another one, put
// there by a release and a new lease in between (keysvc then answered a
// completed key "processing", found by its history test under faults).
func MarkDoneRow(events Table) string {
	return fmt.Sprintf("UPDATE %s SET state = 'done', lease_until = NULL WHERE key = $1 RETURNING first_seen, state, lease_until, attempts", events)
}

// MarkExecutionDone is MarkDone for the keys n8n execution $1 holds, for
// a workflow whose last nodes cannot name the key (a node of the user's
// between them and the guard may not keep n8n's paired items).
func MarkExecutionDone(events Table) string {
	return fmt.Sprintf("UPDATE %s SET state = 'done', lease_until = NULL WHERE execution_id = $1 AND state = 'processing' RETURNING key", events)
}

// ReleaseLease gives key $1 up after a failed attempt $2, so the next retry
// is processed at once. Only the current holder (attempt $2) may release,
// and never once the key is done.
func ReleaseLease(events Table) string {
	return fmt.Sprintf("DELETE FROM %s WHERE key = $1 AND state = 'processing' AND attempts = $2", events)
}

// CleanupBatchSize is how many expired keys one cleanup statement deletes,
// and CleanupPause the rest between two of them. Each batch is one short
// transaction: a day's expired keys of an account taking 100 events a
// second (8.6 million) in one DELETE held its transaction for seconds, with
// its locks, its WAL burst and its vacuum debt (3 million took 2.5 s here).
// Small batches and the pause spread the cleanup's WAL out: a reservation
// committing beside it flushes the WAL written before its own commit, so
// at full speed, or in batches of 5,000, every reservation waited behind
// it (p99 twice to eighty times its p99 without a cleanup). Batches of 250
// 10 ms apart still delete 20,000 keys a second (idemhook bench --scale
// measures both, docs/speed.md).
const (
	CleanupBatchSize = 250
	CleanupPause     = 10 * time.Millisecond
)

// CleanupBatch deletes at most batch keys first seen before $1, the oldest
// first, in one statement: a caller runs it, in a transaction of its own
// each time, until it deletes fewer than batch. The index on first_seen
// (EventsDDL) finds them without reading the rest of the table, and the
// delete goes by primary key.
//
// Concurrency: the keys are chosen without locks and deleted by key. A key
// released meanwhile is simply not there; a reservation of an expired key
// (a retry older than the retention) waits for the delete and then inserts
// the key anew, or is answered a duplicate before it: what a single DELETE
// did too. Keys first seen after $1 are never touched, whatever runs beside.
func CleanupBatch(events Table, batch int) string {
	return fmt.Sprintf("DELETE FROM %[1]s WHERE key = ANY (ARRAY(SELECT key FROM %[1]s WHERE first_seen < $1 ORDER BY first_seen LIMIT %[2]d))", events, batch)
}

// Cleanup is the cleanup workflow's statement: CleanupBatch with the cutoff
// now() - retention, repeated in a DO block that commits after each batch
// and rests CleanupPause until one deletes fewer than batch, so that no
// transaction of it holds more than batch keys. It must run outside a
// transaction block (n8n's Postgres node runs one statement so).
func Cleanup(events Table, retention time.Duration, batch int) string {
	del := strings.Replace(CleanupBatch(events, batch), "$1", "now() - interval '"+intervalText(retention)+"'", 1)
	return fmt.Sprintf(`DO $cleanup$
DECLARE
  deleted bigint;
BEGIN
  LOOP
    %s;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    COMMIT;
    EXIT WHEN deleted < %d;
    PERFORM pg_sleep(%s);
  END LOOP;
END
$cleanup$`, del, batch, pauseSeconds())
}

// pauseSeconds is CleanupPause as pg_sleep's argument.
func pauseSeconds() string { return strconv.FormatFloat(CleanupPause.Seconds(), 'f', -1, 64) }

// intervalText renders a duration as PostgreSQL interval text, in days when
// it is a whole number of days.
func intervalText(d time.Duration) string {
	const day = 24 * time.Hour
	if d%day == 0 {
		n := int64(d / day)
		if n == 1 {
			return "1 day"
		}
		return fmt.Sprintf("%d days", n)
	}
	return fmt.Sprintf("%d seconds", int64(d/time.Second))
}

// LookupLease returns first_seen, state, lease_until and attempts of key $1
// from a table with the lease columns.
func LookupLease(events Table) string {
	return fmt.Sprintf("SELECT first_seen, state, lease_until, attempts FROM %s WHERE key = $1", events)
}

// ReserveMany is Reserve for many keys in one statement and one commit, for
// callers that coalesce concurrent reservations: $1 is a text[] without
// duplicates, and the keys this statement inserted come back. Each key is
// decided by the primary key exactly as Reserve decides it. Keys are inserted
// in sorted order, so concurrent batches with keys in common wait for each
// other in one order and cannot deadlock. The statement reads nothing else:
// joining the table here was planned, while the table was new and small, as a
// scan of the whole table, and slowed down as it grew; LookupMany reads the
// keys that were not inserted, and only when there are some.
func ReserveMany(events Table) string {
	return fmt.Sprintf("INSERT INTO %s (key) SELECT k FROM unnest($1::text[]) AS k ORDER BY k ON CONFLICT (key) DO NOTHING RETURNING key", events)
}

// LookupMany returns key, first_seen and the lease columns (state,
// lease_until, attempts; 'done', NULL, 1 on a table without them) of the keys
// $1 (text[]) that exist.
func LookupMany(events Table, lease bool) string {
	cols := "'done', NULL::timestamptz, 1"
	if lease {
		cols = "state, lease_until, attempts"
	}
	return fmt.Sprintf("SELECT key, first_seen, %s FROM %s WHERE key = ANY($1::text[])", cols, events)
}

// AcquireLeaseMany is AcquireLease's entry transition for many keys in one
// statement and one commit: $1 the keys (text[], no duplicates), $2 each
// key's lease in seconds (int[]). It returns key, attempt and lease_until of
// the keys it acquired; the others are done or busy (LookupMany tells which).
// The row locks of ON CONFLICT make the same guarantee as AcquireLease, key by
// key; keys are taken in sorted order, so concurrent batches cannot deadlock.
func AcquireLeaseMany(events Table) string {
	return fmt.Sprintf(`INSERT INTO %s AS e (key, state, lease_until)
SELECT key, 'processing', now() + make_interval(secs => lease_seconds)
FROM unnest($1::text[], $2::int[]) AS i(key, lease_seconds) ORDER BY key
ON CONFLICT (key) DO UPDATE
  SET state = 'processing', lease_until = EXCLUDED.lease_until, attempts = e.attempts + 1
  WHERE e.state = 'processing' AND e.lease_until < now()
RETURNING e.key, e.attempts, e.lease_until`, events)
}
