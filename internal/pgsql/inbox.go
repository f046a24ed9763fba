package pgsql

import (
	"bytes"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
	"time"
)

// Inbox names the tables and functions of the inbox pattern, all in one
// PostgreSQL schema: inbox_events (receipts), effects (effect keys),
// outbox_tasks (external calls), and the decision function compiled from
// the effect rules (see Decision).
//
// Every transition is one statement. Receipts are unique on (account,
// event_id), effects on effect_key, outbox tasks on operation_key: the
// database, not the caller's timing, decides who wins a race. Rows in
// progress carry a claim (state, attempts, claimed_until); attempts is the
// fencing token a late worker presents and fails to match.
type Inbox struct {
	// Schema is "" for the search_path default, else a validated name.
	Schema string
}

func (in Inbox) table(name string) Table { return Table{Schema: in.Schema, Name: name} }

// Inbox, Effects and Outbox are the pattern's tables.
func (in Inbox) Inbox() Table   { return in.table("inbox_events") }
func (in Inbox) Effects() Table { return in.table("effects") }
func (in Inbox) Outbox() Table  { return in.table("outbox_tasks") }

// Orders and Subscriptions are the example domains' tables (of the rules
// presets stripe-orders and stripe-subscriptions), in the inbox's schema.
func (in Inbox) Orders() Table        { return in.table("orders") }
func (in Inbox) Subscriptions() Table { return in.table("subscriptions") }

// Deliveries records keysvc's delivery attempts (keysvc's schema only).
func (in Inbox) Deliveries() Table { return in.table("inbox_deliveries") }

// ApplyEvent, ApplyBatch, OutboxResult, OutboxWait and CleanupProc are the
// pattern's functions and procedures (see inbox.sql for what they decide).
func (in Inbox) ApplyEvent() Table   { return in.table("idemhook_apply_event") }
func (in Inbox) ApplyBatch() Table   { return in.table("idemhook_apply_batch") }
func (in Inbox) OutboxResult() Table { return in.table("idemhook_outbox_result") }
func (in Inbox) OutboxWait() Table   { return in.table("idemhook_outbox_wait") }
func (in Inbox) CleanupProc() Table  { return in.table("idemhook_cleanup") }

// Drainer is the one-row table that says whether a worker drains the
// received rows now, and DrainNext the function that decides whether it
// goes on (see inbox.sql).
func (in Inbox) Drainer() Table   { return in.table("inbox_drainer") }
func (in Inbox) DrainNext() Table { return in.table("idemhook_drain_next") }

//go:embed inbox.sql
var inboxSQL string

//go:embed domains.sql
var domainsSQL string

var (
	inboxTemplate   = template.Must(template.New("inbox.sql").Parse(inboxSQL))
	domainsTemplate = template.Must(template.New("domains.sql").Parse(domainsSQL))
)

// Domains lists the example domains a Decision may ask schema.sql to
// create. Each is its own table, of the domain's name.
func Domains() []string {
	return []string{"orders", "subscriptions", "shop_orders", "deployments", "invoices"}
}

// DDL creates the inbox pattern's tables and the example domain tables d
// asks for, checks that every table and column d names exists, and
// (re)creates the pattern's functions, the decision compiled from d.
// Running it again changes nothing else. It fails when d names an unknown
// domain, an invalid identifier, or a constant Literal refuses.
func (in Inbox) DDL(d Decision) (string, error) {
	declare, body, err := in.applyEventBody(d)
	if err != nil {
		return "", fmt.Errorf("compile the decision: %w", err)
	}
	var domains bytes.Buffer
	for _, name := range d.Domains {
		if !slices.Contains(Domains(), name) {
			return "", fmt.Errorf("no example domain %q (the domains are %s)", name, strings.Join(Domains(), ", "))
		}
		if err := domainsTemplate.ExecuteTemplate(&domains, name, map[string]any{"Table": in.table(name)}); err != nil {
			return "", err
		}
	}
	check, err := in.columnCheck(d)
	if err != nil {
		return "", err
	}
	return in.render("inbox.sql", map[string]any{
		"Domains": domains.String(), "ColumnCheck": check, "ApplyDeclare": declare, "ApplyBody": body,
	}), nil
}

// ReceiptsDDL creates what keysvc's inbox needs: inbox_events, with the same
// layout as the pattern's (so a receipt by keysvc and one by the n8n receiver
// are duplicates of each other), and keysvc's inbox_deliveries.
func (in Inbox) ReceiptsDDL() string {
	return in.render("receipts", nil) + in.render("deliveries", nil)
}

func (in Inbox) render(name string, extra map[string]any) string {
	var b bytes.Buffer
	data := map[string]any{
		"Schema": in.Schema, "Inbox": in.Inbox(), "Effects": in.Effects(),
		"Outbox": in.Outbox(), "ApplyEvent": in.ApplyEvent(), "ApplyBatch": in.ApplyBatch(), "OutboxResult": in.OutboxResult(), "OutboxWait": in.OutboxWait(),
		"CleanupProc": in.CleanupProc(), "CleanupPause": pauseSeconds(), "Deliveries": in.Deliveries(), "Drainer": in.Drainer(), "DrainNext": in.DrainNext(),
	}
	maps.Copy(data, extra)
	if err := inboxTemplate.ExecuteTemplate(&b, name, data); err != nil {
		panic(err) // the template is fixed at compile time; a failure is a bug
	}
	return b.String()
}

// Inbox states. A receipt starts StateReceived; StateProcessing is claimed by
// a worker; the others are final except StateDeferred (retried when due).
const (
	StateReceived   = "received"
	StateProcessing = "processing"
	StateProcessed  = "processed"
	StateIgnored    = "ignored"
	StateRejected   = "rejected"
	StateDeferred   = "deferred"
	StateFailed     = "failed"
	// StateForwarded: keysvc delivered the event to its target, which
	// acknowledged it with a 2xx without recording an outcome of its own.
	StateForwarded = "forwarded"
)

// Receive saves one event: $1 account, $2 event_id (the receipt key), $3
// event_type, $4 the raw body in base64, $5 the headers as a JSON object.
// It returns id, state and new (true for the one delivery that inserted the
// row). A duplicate returns the stored row and changes nothing: its state is
// never reset. When the conflicting row was inserted by a transaction that
// committed after this statement's snapshot, no row comes back; the caller
// treats that as a duplicate, which it is.
func (in Inbox) Receive() string {
	return fmt.Sprintf(`WITH new AS (
  INSERT INTO %[1]s (account, event_id, event_type, body, headers)
  VALUES ($1, $2, $3, decode($4, 'base64'), $5::jsonb)
  ON CONFLICT (account, event_id) DO NOTHING
  RETURNING id, state
)
SELECT id, state, true AS new FROM new
UNION ALL
SELECT id, state, false AS new FROM %[1]s
WHERE account = $1 AND event_id = $2 AND NOT EXISTS (SELECT 1 FROM new)`, in.Inbox())
}

// ReceiveAndWake is Receive for the n8n receiver, with a fourth column,
// wake: true when the new row needs a worker started, because no worker
// holds a live drain lease (see Drainer in inbox.sql). The receipt then
// takes the lease for the worker it starts, so that concurrent receipts
// start one worker; every new receipt marks the drainer pending, in its own
// transaction, so a draining worker claims it before it stops. Without the
// drainer row (a schema from before it), every new receipt wakes a worker.
func (in Inbox) ReceiveAndWake(lease time.Duration) string {
	return fmt.Sprintf(`WITH new AS (
  INSERT INTO %[1]s (account, event_id, event_type, body, headers)
  VALUES ($1, $2, $3, decode($4, 'base64'), $5::jsonb)
  ON CONFLICT (account, event_id) DO NOTHING
  RETURNING id, state
), woken AS (
  UPDATE %[2]s d SET pending = true,
    woken_by = CASE WHEN d.draining_until IS NULL OR d.draining_until < now() THEN pg_current_xact_id() ELSE d.woken_by END,
    draining_until = CASE WHEN d.draining_until IS NULL OR d.draining_until < now() THEN now() + interval '%[3]d seconds' ELSE d.draining_until END
  WHERE d.lane = 0 AND EXISTS (SELECT 1 FROM new)
  RETURNING d.woken_by = pg_current_xact_id() AS wake
)
SELECT id, state, true AS new, coalesce((SELECT wake FROM woken), true) AS wake FROM new
UNION ALL
SELECT id, state, false AS new, false AS wake FROM %[1]s
WHERE account = $1 AND event_id = $2 AND NOT EXISTS (SELECT 1 FROM new)`, in.Inbox(), in.Drainer(), int64(lease/time.Second))
}

// ClaimEvent claims inbox row $1 for one worker: a received row, a deferred
// row that is due, or a processing row whose claim expired (its worker died).
// The claim sets processing, attempts + 1 and claimed_until = now + lease, and
// returns id, state, attempts. Concurrent claimers serialise on the row lock;
// the later one re-reads the claimed row, no longer matches, and gets no row.
// A row whose claims expired maxAttempts times (a poison event that kills its
// worker) becomes failed instead.
func (in Inbox) ClaimEvent(lease time.Duration, maxAttempts int) string {
	return fmt.Sprintf(`UPDATE %s SET
%s
WHERE id = $1::bigint AND %s
RETURNING id, state, attempts`, in.Inbox(), claimSet(lease, maxAttempts), claimable)
}

// claimSet is the SET list of a claim: processing, attempts + 1, claimed for
// lease; or failed, for a row whose claims expired maxAttempts times.
func claimSet(lease time.Duration, maxAttempts int) string {
	return fmt.Sprintf(`  state = CASE WHEN state = 'processing' AND attempts >= %[2]d THEN 'failed' ELSE 'processing' END,
  outcome = CASE WHEN state = 'processing' AND attempts >= %[2]d THEN 'too_many_attempts' ELSE outcome END,
  last_error = CASE WHEN state = 'processing' AND attempts >= %[2]d
    THEN 'gave up after ' || attempts || ' attempts that did not finish; last error: ' || coalesce(last_error, 'none')
    ELSE last_error END,
  finished_at = CASE WHEN state = 'processing' AND attempts >= %[2]d THEN now() END,
  attempts = CASE WHEN state = 'processing' AND attempts >= %[2]d THEN attempts ELSE attempts + 1 END,
  claimed_until = now() + interval '%[1]d seconds',
  updated_at = now()`, int64(lease/time.Second), maxAttempts)
}

// claimable is the condition on an inbox row that ClaimEvent and
// ClaimBatch claim.
const claimable = `(state = 'received'
  OR (state = 'deferred' AND next_attempt_at <= now())
  OR (state = 'processing' AND claimed_until < now()))`

// ClaimBatch claims rows for one worker's batch, as ClaimEvent claims one:
// the claimable rows among the offered ids $1 (comma-separated; anything
// else in the list is ignored) and, when $2 (drain) is true, up to limit
// received rows, oldest first, renewing the drain lease. FOR UPDATE SKIP
// LOCKED gives concurrent workers disjoint batches. It returns id, state
// and attempts of the rows it moved to processing, by id: the worker
// decides each in a transaction of its own, so one row's failure changes
// none of the others. A row whose claims expired maxAttempts times fails
// here and is not returned.
//
// Every row of the batch is claimed at once, for lease: the lease must
// outlast the whole batch (limit times the slowest decision), or the
// recoverer re-offers the rows not decided yet; a row so taken over is
// decided once all the same (ApplyEvent fences by attempt).
func (in Inbox) ClaimBatch(lease, drainLease time.Duration, maxAttempts, limit int) string {
	return fmt.Sprintf(`WITH offered AS (
  SELECT DISTINCT x::bigint AS id FROM unnest(string_to_array($1::text, ',')) x WHERE x ~ '^[0-9]{1,18}$'
), renewed AS (
  UPDATE %[2]s SET draining_until = now() + interval '%[3]d seconds', drained_at = now() WHERE $2::boolean AND lane = 0
), named AS (
  SELECT id FROM %[1]s WHERE id IN (SELECT id FROM offered) AND `+claimable+`
  FOR UPDATE SKIP LOCKED
), drained AS (
  SELECT id FROM %[1]s WHERE $2::boolean AND state = 'received' AND id NOT IN (SELECT id FROM offered)
  ORDER BY id LIMIT %[4]d
  FOR UPDATE SKIP LOCKED
), claimed AS (
  UPDATE %[1]s SET
%[5]s
  WHERE id IN (SELECT id FROM named UNION SELECT id FROM drained)
  RETURNING id, state, attempts
)
SELECT id, state, attempts FROM claimed WHERE state = 'processing' ORDER BY id`,
		in.Inbox(), in.Drainer(), int64(drainLease/time.Second), limit, claimSet(lease, maxAttempts))
}

// RecordBatch ends a worker's batch in one statement: it keeps, on each
// row, the error of a decision that did not run to its end in n8n ($1, a
// JSON array of {id, attempts, message}: ApplyEvent records its own errors,
// so these are what it cannot catch, such as the connection lost, which
// ends ApplyBatch's call and reaches every row of the batch; a row decided
// before it is no longer processing and is left be, while one whose own
// error was recorded gets this message in place of its own). The row is
// retried after the backoff doubled per attempt (at most
// 15 minutes), as ApplyEvent retries it; only the attempt that holds the
// claim may write. And, when the batch wrote tasks ($2 above 0), it
// decides whether to wake the outbox: only when no dispatcher holds the
// dispatch lease, which it then takes for the dispatcher it wakes; else it
// marks the tasks pending for the dispatcher that holds it (see OutboxWait
// in inbox.sql). Without the drainer row, every batch with tasks wakes the
// outbox. It returns one row (wake_outbox, true) when the outbox is to be
// woken and none otherwise, so that the node after it, the wake, runs only
// then: an If node between them cost n8n a node execution per batch.
func (in Inbox) RecordBatch(backoff, dispatchLease time.Duration) string {
	return fmt.Sprintf(`WITH failed AS (
  UPDATE %[1]s e SET last_error = left(x.message, 2000), outcome = 'error',
    claimed_until = now() + least(interval '%[3]d milliseconds' * power(2, least(e.attempts - 1, 20)), interval '15 minutes'),
    updated_at = now()
  FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, attempts integer, message text)
  WHERE e.id = x.id AND e.attempts = x.attempts AND e.state = 'processing'
), woken AS (
  UPDATE %[2]s d SET outbox_pending = true,
    outbox_woken_by = CASE WHEN d.dispatching_until IS NULL OR d.dispatching_until < now() THEN pg_current_xact_id() ELSE d.outbox_woken_by END,
    dispatching_until = CASE WHEN d.dispatching_until IS NULL OR d.dispatching_until < now() THEN now() + interval '%[4]d seconds' ELSE d.dispatching_until END
  WHERE d.lane = 0 AND $2::integer > 0
  RETURNING d.outbox_woken_by = pg_current_xact_id() AS wake
)
SELECT true AS wake_outbox WHERE coalesce((SELECT wake FROM woken), $2::integer > 0)`,
		in.Inbox(), in.Drainer(), backoff.Milliseconds(), int64(dispatchLease/time.Second))
}

// DrainNextCall runs DrainNext after a batch: $1 the batch was full, $2 the
// run's index in its execution (from 0), $3 drain (a worker offered rows by
// the recoverer or keysvc only decides those: it stops, and holds no lease).
// A worker that goes on claims no sooner than pace after its last claim,
// unless its batch was full (see inbox.sql). It returns one row (again,
// true) when the worker is to claim again and none when it stops, so that
// the claim after it runs only then, with no If node between them.
func (in Inbox) DrainNextCall(maxRuns int, linger, lease, pace time.Duration) string {
	return fmt.Sprintf(`SELECT again FROM %s($1::boolean, $2::integer, %d, interval '%d milliseconds', interval '%d seconds', interval '%d milliseconds') WHERE $3::boolean AND again`,
		in.DrainNext(), maxRuns, linger.Milliseconds(), int64(lease/time.Second), pace.Milliseconds())
}

// Offered lists, for the worker's item, the inbox rows $1 (comma-separated
// ids) with their state after a batch: what keysvc's batch forward is
// answered, one row per id that exists (inbox_id, state).
func (in Inbox) Offered() string {
	return fmt.Sprintf(`SELECT e.id AS inbox_id, e.state FROM %s e
WHERE e.id IN (SELECT x::bigint FROM unnest(string_to_array($1::text, ',')) x WHERE x ~ '^[0-9]{1,18}$')
ORDER BY e.id`, in.Inbox())
}

// ApplyEventCall runs the decision for claimed row $1 at attempt $2 with the
// allowlist $3 (comma-separated event types), the defer limit and the first
// retry delay of a deferred or failed decision.
func (in Inbox) ApplyEventCall(deferLimit, backoff time.Duration) string {
	return fmt.Sprintf(`SELECT * FROM %s($1::bigint, $2::integer, string_to_array($3, ','), interval '%d seconds', interval '%d milliseconds')`,
		in.ApplyEvent(), int64(deferLimit/time.Second), backoff.Milliseconds())
}

// ApplyBatchCall runs ApplyBatch for the claimed rows $1 (ids,
// comma-separated) at their attempts $2 (comma-separated, in the same
// order) with the allowlist $3 (comma-separated event types), the defer
// limit and the first retry delay: each row is decided and committed on its
// own, in one statement. It answers one row, tasks (the outbox tasks
// written). It commits, so it cannot run inside a transaction block.
func (in Inbox) ApplyBatchCall(deferLimit, backoff time.Duration) string {
	return fmt.Sprintf(`CALL %s($1::text, $2::text, string_to_array($3, ','), interval '%d seconds', interval '%d milliseconds')`,
		in.ApplyBatch(), int64(deferLimit/time.Second), backoff.Milliseconds())
}

// DueEvents lists up to limit rows that need a worker: received longer ago
// than grace (the hand-off was lost), processing past their claim (the worker
// died, or its decision failed and its retry is due) and deferred rows that
// are due. Offering a row twice is harmless: ClaimEvent lets one worker in.
//
// The batch is fair: accounts take turns (every account's oldest due row,
// then every account's second, …), and within a turn the row due longest
// goes first. So a flood of due rows in one account (a confirmation that
// woke many, a backlog after an outage) fills at most its share of each
// batch, and an older stuck row is never passed over by newer ones of its
// account. The ranking reads every due row, which the unfinished index keeps
// to the rows that are waiting.
func (in Inbox) DueEvents(grace time.Duration, limit int) string {
	return fmt.Sprintf(`SELECT id FROM (
  SELECT id, due, row_number() OVER (PARTITION BY account ORDER BY due, id) AS turn
  FROM (
    SELECT id, account, CASE state WHEN 'received' THEN received_at WHEN 'processing' THEN claimed_until ELSE next_attempt_at END AS due
    FROM %s
    WHERE (state = 'received' AND received_at < now() - interval '%d seconds')
       OR (state = 'processing' AND claimed_until < now())
       OR (state = 'deferred' AND next_attempt_at <= now())
  ) waiting
) ranked
ORDER BY turn, due, id
LIMIT %d`, in.Inbox(), int64(grace/time.Second), limit)
}

// DueEventIDs is DueEvents as one row: ids, the due rows' ids joined by
// commas in DueEvents' order, NULL when none is due (the worker's offer).
func (in Inbox) DueEventIDs(grace time.Duration, limit int) string {
	return fmt.Sprintf("SELECT string_agg(id::text, ',') AS ids FROM (\n%s\n) due", in.DueEvents(grace, limit))
}

// StuckWork counts what needs a human or is still in flight: inbox rows by
// state (retrying: processing rows whose last decision failed), outbox tasks
// failed or ambiguous for longer than an hour, and the last errors of the
// rows that are retrying or failed, newest first, each with its event.
func (in Inbox) StuckWork() string {
	return fmt.Sprintf(`SELECT
  (SELECT count(*) FROM %[1]s WHERE state IN ('received', 'processing', 'deferred')) AS inbox_unfinished,
  (SELECT count(*) FROM %[1]s WHERE state = 'processing' AND last_error IS NOT NULL) AS inbox_retrying,
  (SELECT count(*) FROM %[1]s WHERE state = 'failed') AS inbox_failed,
  (SELECT count(*) FROM %[1]s WHERE state = 'rejected') AS inbox_rejected,
  (SELECT count(*) FROM %[2]s WHERE state = 'failed') AS outbox_failed,
  (SELECT count(*) FROM %[2]s WHERE state = 'ambiguous' AND updated_at < now() - interval '1 hour') AS outbox_long_ambiguous,
  (SELECT coalesce(jsonb_agg(e), '[]') FROM (
     SELECT event_id, state, attempts, last_error FROM %[1]s
     WHERE last_error IS NOT NULL AND (state = 'failed' OR (state = 'processing' AND outcome = 'error'))
     ORDER BY updated_at DESC LIMIT 5) e) AS last_errors`,
		in.Inbox(), in.Outbox())
}

// Phases of an outbox dispatcher run: the tasks whose last call may have
// been performed are looked up first, then the pending ones are sent.
const (
	PhaseLookup = "lookup"
	PhaseSend   = "send"
)

// ClaimTasks claims up to limit due outbox tasks of one phase for one
// dispatcher run: PhaseLookup takes ambiguous tasks and sending tasks whose
// claim expired (their dispatcher died mid-call), PhaseSend pending ones.
// FOR UPDATE SKIP LOCKED gives concurrent dispatchers disjoint sets; the
// claim (sending, attempts + 1, claimed_until) keeps the rows from the next
// run until it expires.
//
// lease bounds one call, not the batch: n8n's HTTP Request node makes the
// calls of all its items at once, so a run's calls end within one timeout
// of each other. It must outlast the call and its recording, or a second
// dispatcher would look a task up while its first call can still land.
func (in Inbox) ClaimTasks(lease time.Duration, limit int, phase string) string {
	due := `state = 'pending' AND next_attempt_at <= now()`
	if phase == PhaseLookup {
		due = `(state = 'ambiguous' AND next_attempt_at <= now()) OR (state = 'sending' AND claimed_until < now())`
	}
	return fmt.Sprintf(`UPDATE %[1]s t SET state = 'sending', attempts = t.attempts + 1,
  claimed_until = now() + interval '%[2]d seconds', updated_at = now()
FROM (
  SELECT id FROM %[1]s
  WHERE %[4]s
  ORDER BY next_attempt_at, id
  LIMIT %[3]d
  FOR UPDATE SKIP LOCKED
) due
WHERE t.id = due.id
RETURNING t.id, t.operation_key, t.kind, t.payload, t.attempts`, in.Outbox(), int64(lease/time.Second), limit, due)
}

// WaitForDueTask runs OutboxWait for window: one row, due, true when a task
// fell due (run the dispatcher's phases again).
func (in Inbox) WaitForDueTask(window time.Duration) string {
	return fmt.Sprintf(`SELECT * FROM %s(interval '%d seconds')`, in.OutboxWait(), int64(window/time.Second))
}

// LingerForTask is WaitForDueTask for a dispatcher a worker woke: with $1
// above 0, it also waits $1 milliseconds for tasks not written yet and holds
// the dispatch lease for lease; and it answers no sooner than $2
// milliseconds after it started (OutboxWait's p_linger, p_lease and
// p_pace). It returns its row only when a task fell due, so that the
// dispatcher's next pass runs only then, with no If node between them.
func (in Inbox) LingerForTask(window, lease time.Duration) string {
	return fmt.Sprintf(`SELECT due FROM %s(interval '%d seconds', $1::integer * interval '1 millisecond', interval '%d seconds', $2::integer * interval '1 millisecond') WHERE due`,
		in.OutboxWait(), int64(window/time.Second), int64(lease/time.Second))
}

// OutboxResults records the answers of one dispatcher pass's calls in one
// statement: $1 is a JSON array of {id, attempts, phase ('send' or
// 'lookup'), status (the HTTP status, "" when no answer came), error (the
// transport error code), body (the answer's body)}, one per task, each
// recorded by OutboxResult. It returns OutboxResult's row for each. One
// statement, so one transaction: if it fails, no answer of the pass is
// recorded, every task stays sending, and once its claim expires it is
// looked up before anything is resent (the call may have been performed),
// as when a dispatcher dies. A pass records its calls together because each
// statement n8n runs for an item costs it an expression and a round trip.
func (in Inbox) OutboxResults(maxAttempts int, backoff time.Duration) string {
	return fmt.Sprintf(`SELECT r.* FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, attempts integer, phase text, status text, error text, body text)
CROSS JOIN LATERAL %s(x.id, x.attempts, x.phase, nullif(x.status, '')::integer, x.error, x.body, %d, interval '%d milliseconds') r`,
		in.OutboxResult(), maxAttempts, backoff.Milliseconds())
}

// RetryTask puts failed outbox task $1 (an operation_key) back to pending on
// purpose, with a fresh attempt budget; it returns the task, or no row when
// the task is not failed. The key stays the same, so an API that performed
// the call already answers with the first result.
func (in Inbox) RetryTask() string {
	return fmt.Sprintf(`UPDATE %s SET state = 'pending', attempts = 0, next_attempt_at = now(), updated_at = now()
WHERE operation_key = $1 AND state = 'failed'
RETURNING id, operation_key, state`, in.Outbox())
}

// Cleanup deletes finished inbox rows and sent tasks older than retention,
// with the procedure CleanupProc: batch at a time, each batch committed
// before the next, so that no transaction of it holds more than batch rows
// (the receivers and workers go on between them). Failed, deferred,
// ambiguous and unfinished work is never deleted: it waits for a human. The
// call answers how many tasks and events it deleted. It must run outside a
// transaction block (n8n's Postgres node runs one statement so).
func (in Inbox) Cleanup(retention time.Duration, batch int) string {
	return fmt.Sprintf(`CALL %s(interval '%s', %d)`, in.CleanupProc(), intervalText(retention), batch)
}
