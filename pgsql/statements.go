package pgsql

import (
	"fmt"
	"strings"
	"time"
)

// Lease outcomes, the "outcome" column of AcquireLease.
const (
	OutcomeAcquired = "acquired" // this attempt holds the lease: run the business step
	OutcomeDone     = "done"     // the event was processed: answer 200 duplicate
	OutcomeBusy     = "busy"     // another attempt holds an unexpired lease: answer 409
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

// Reserve inserts key $1 and returns it only to the one caller that inserted
// it: concurrent callers conflict on the primary key and get no row.
func Reserve(events Table) string {
	return fmt.Sprintf("INSERT INTO %s (key) VALUES ($1) ON CONFLICT (key) DO NOTHING RETURNING key", events)
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
// (both NULL unless acquired). The row lock taken by ON CONFLICT makes two concurrent takeovers
// of one expired lease impossible. A key inserted concurrently by another
// statement after this one's snapshot reads as busy, which is safe: the
// caller answers 409 and the provider retries.
func AcquireLease(events Table, lease time.Duration) string {
	return fmt.Sprintf(`WITH acquired AS (
  INSERT INTO %[1]s AS e (key, state, lease_until)
  VALUES ($1, 'processing', now() + interval '%[2]d seconds')
  ON CONFLICT (key) DO UPDATE
    SET state = 'processing', lease_until = EXCLUDED.lease_until, attempts = e.attempts + 1
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

// ReleaseLease gives key $1 up after a failed attempt $2, so the next retry
// is processed at once. Only the current holder (attempt $2) may release,
// and never once the key is done.
func ReleaseLease(events Table) string {
	return fmt.Sprintf("DELETE FROM %s WHERE key = $1 AND state = 'processing' AND attempts = $2", events)
}

// Cleanup deletes keys first seen longer ago than retention.
func Cleanup(events Table, retention time.Duration) string {
	return fmt.Sprintf("DELETE FROM %s WHERE first_seen < now() - interval '%s'", events, intervalText(retention))
}

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

// CleanupBefore deletes keys first seen before $1 (a timestamptz).
func CleanupBefore(events Table) string {
	return fmt.Sprintf("DELETE FROM %s WHERE first_seen < $1", events)
}
