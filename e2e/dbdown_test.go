package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/jackc/pgx/v5"
)

// With the events table's PostgreSQL stopped, a delivery is answered 503
// with Retry-After and a JSON reason, and nothing after the reservation
// runs; once the database is back, the provider's retry is processed.
func TestReservationWithDatabaseDown(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	down, err := sandbox.Start(ctx, sandbox.Options{PostgresOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { down.Close() })
	const cred = "Postgres (e2e stopped)"
	if _, err := api.CreateCredential(ctx, cred, "postgres", down.PostgresCredentialData()); err != nil {
		t.Fatal(err)
	}
	type variant struct {
		hashing generator.Hashing
		guard   generator.Guard
	}
	for _, v := range []variant{
		{generator.HashingCodeNode, generator.GuardAtMostOnce}, {generator.HashingCodeNode, generator.GuardLease},
		{generator.HashingNode, generator.GuardAtMostOnce}, {generator.HashingNode, generator.GuardLease},
	} {
		name := strings.ReplaceAll(string(v.guard), "-", "_") // a table name
		if v.hashing == generator.HashingNode {
			name = "node_" + name // the Idempotency Guard community node
		}
		t.Run(name, func(t *testing.T) {
			opts := seedOptions("dbdown_"+name, v.hashing)
			opts.Guard, opts.CredentialName = v.guard, cred
			d := deployOn(t, opts, down.Business)
			business := generator.BusinessNodeName(opts.BusinessTable)
			deliver := func(id string) (*http.Response, map[string]any) {
				t.Helper()
				resp, err := http.Post(d.url, "application/json", bytes.NewReader([]byte(`{"id":"`+id+`","type":"t"}`)))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				var body map[string]any
				if err := json.Unmarshal(raw, &body); err != nil {
					t.Fatalf("answer %d %q is not JSON", resp.StatusCode, raw)
				}
				return resp, body
			}
			if resp, body := deliver("evt_dbdown_a"); resp.StatusCode != 200 || body["status"] != "processed" {
				t.Fatalf("with the database up: %d %v", resp.StatusCode, body)
			}
			if err := down.StopPostgres(ctx); err != nil {
				t.Fatal(err)
			}
			resp, body := deliver("evt_dbdown_b")
			if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || body["status"] != "unavailable" || body["error"] == "" {
				t.Errorf("with the database stopped: %d Retry-After %q %v; want 503, Retry-After and a reason", resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
			execs, err := st.WaitExecutions(ctx, d.workflowID, 2)
			if err != nil {
				t.Fatal(err)
			}
			run, err := api.ExecutionRun(ctx, n8napi.ID(execs[len(execs)-1].ID))
			if err != nil {
				t.Fatal(err)
			}
			if run.Ran(business) || !run.Ran(generator.NodeRespond503DB) {
				t.Errorf("the delivery during the outage ran %v; want the 503 answer and no business step", run.Outputs)
			}
			if err := down.StartPostgres(ctx); err != nil {
				t.Fatal(err)
			}
			// The provider's retry, once the database is back.
			var again *http.Response
			waitFor(t, 30*time.Second, "the retry to be processed", func() bool {
				again, body = deliver("evt_dbdown_b")
				return again.StatusCode == 200
			})
			if body["status"] != "processed" {
				t.Errorf("the retry after the outage: %v, want processed (nothing was reserved during it)", body)
			}
		})
	}
}

// n8n's own database failing as the business step starts, the window a
// PostgreSQL restart opens when n8n keeps its database on that server (the
// crash test's): the step's Postgres node cannot read its credential and
// throws before its query, and n8n 2.41.1 hands a node with an error output
// its input back on the success output. Taken for the step's success, that
// answered 200 for a step that never ran (the lease's Mark Done, whose
// attempt still held the key, marked it done and the answer was processed;
// the transactional guard, whose step is its reservation, answered
// duplicate), and every retry was a duplicate or, for a provider that
// delivers once, never came: the event was lost. The guard answers 500
// instead (the lease gives its key up); the provider's retry runs the step,
// once. (at-most-once, the seed's template as written, still answers 200
// there: docs/scale-out.md, Crashes mid-load.)
//
// The failure is made exact: the test locks n8n's credentials table and
// cancels the step's credential read once it waits on that lock; the next
// read (Mark Done's, Release Key's) waits for the lock and then succeeds,
// as after a restart. Where the guard reserves in a node of its own, the
// test first holds the key's row, so that the reservation, which reads its
// credential before the lock, waits for the row until the lock is taken.
func TestStepCredentialUnreadable(t *testing.T) {
	needStack(t)
	for _, guard := range []generator.Guard{generator.GuardLease, generator.GuardTransactional} {
		t.Run(string(guard), func(t *testing.T) {
			prefix := "credlost_" + string(guard)
			opts := seedOptions(prefix, generator.HashingCodeNode)
			opts.Guard, opts.Lease = guard, time.Minute
			d := deploy(t, opts)
			ctx := context.Background()
			body := []byte(`{"id":"evt_` + prefix + `","type":"t"}`)
			key := "evt:evt_" + prefix
			step := generator.BusinessNodeName(opts.BusinessTable)
			if guard == generator.GuardTransactional {
				step = generator.NodeReserveAndWrite
			}

			hold, err := st.Business.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer hold.Rollback(ctx)
			if guard != generator.GuardTransactional {
				if _, err := hold.Exec(ctx, "INSERT INTO "+ident(opts.EventsTable)+" (key) VALUES ($1)", key); err != nil {
					t.Fatal(err)
				}
			}
			answer := make(chan response, 1)
			deliver := func() { go func() { answer <- postNoFatal(d.url, "application/json", body) }() }
			var creds *credentialsLock
			if guard == generator.GuardTransactional {
				creds = lockCredentials(t)
				deliver()
			} else {
				deliver()
				// The reservation has read its credential and waits for the
				// key's row: lock, then let it go on to the step.
				waitForLockWait(t, opts.EventsTable)
				creds = lockCredentials(t)
				hold.Rollback(ctx)
			}
			defer creds.release()
			creds.cancelNodeRead()
			creds.release()
			first := <-answer

			execs, err := st.WaitExecutions(ctx, d.workflowID, 1)
			if err != nil || len(execs) != 1 {
				t.Fatalf("executions %s: %v", executionIDs(execs), err)
			}
			run, err := api.ExecutionRun(ctx, n8napi.ID(execs[0].ID))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(run.Errors[step], "canceling statement") {
				t.Fatalf("the fault did not hit %q's credential read: errors %v, outputs %v", step, run.Errors, run.Outputs)
			}
			if first.status != 500 || !strings.Contains(first.body, `"failed"`) {
				t.Errorf("a step that failed before it ran was answered %d %s (n8n passed its input on: outputs %v); want 500 failed", first.status, first.body, run.Outputs)
			}
			if hasKey(t, opts.EventsTable, key) {
				t.Errorf("the key is held after a step that did not run")
			}
			retry := post(t, d.url, "application/json", body, nil)
			replay := post(t, d.url, "application/json", body, nil)
			if retry.status != 200 || !strings.Contains(retry.body, `"processed"`) {
				t.Errorf("the provider's retry: %d %s, want 200 processed", retry.status, retry.body)
			}
			if replay.status != 200 || !strings.Contains(replay.body, `"duplicate"`) {
				t.Errorf("a replay after it: %d %s, want 200 duplicate", replay.status, replay.body)
			}
			var rows int
			if err := st.Business.QueryRow(ctx, "SELECT count(*) FROM "+ident(opts.BusinessTable)+" WHERE event_key = $1", key).Scan(&rows); err != nil || rows != 1 {
				t.Errorf("business rows for the event: %d (%v), want 1", rows, err)
			}
		})
	}
}

// credentialsLock holds n8n's credentials table locked, so that a node's
// read of its credential waits on it.
type credentialsLock struct {
	t  *testing.T
	tx pgx.Tx
}

func lockCredentials(t *testing.T) *credentialsLock {
	t.Helper()
	l := &credentialsLock{t: t}
	l.take()
	return l
}

func (l *credentialsLock) take() {
	l.t.Helper()
	ctx := context.Background()
	tx, err := st.N8NDB.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, "LOCK TABLE credentials_entity IN ACCESS EXCLUSIVE MODE")
	}
	if err != nil {
		l.t.Fatal(err)
	}
	l.tx = tx
}

func (l *credentialsLock) release() { l.tx.Rollback(context.Background()) }

// cancelNodeRead cancels the first read of a node's credential that waits
// on the lock: the whole row, data included, as n8n loads it to run a node.
// n8n's other reads of the table before an execution starts (which
// credentials it may use) are let through by releasing the lock and taking
// it again.
func (l *credentialsLock) cancelNodeRead() {
	l.t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var pid int
		var loadsData bool
		err := st.N8NDB.QueryRow(ctx, `SELECT pid, position('"CredentialsEntity"."data"' in query) > 0 FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND position('credentials_entity' in query) > 0 AND pid <> pg_backend_pid() LIMIT 1`).Scan(&pid, &loadsData)
		switch {
		case err != nil:
		case loadsData:
			if _, err := st.N8NDB.Exec(ctx, "SELECT pg_cancel_backend($1)", pid); err != nil {
				l.t.Fatal(err)
			}
			return
		default:
			l.release()
			l.take()
		}
	}
	l.t.Fatal("no node read its credential within 30 s")
}

// waitForLockWait waits until a session of the business database waits on
// a lock in a statement that names table.
func waitForLockWait(t *testing.T, table string) {
	t.Helper()
	waitFor(t, 30*time.Second, "a statement on "+table+" waiting on a lock", func() bool {
		var n int
		err := st.Business.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND position($1 in query) > 0 AND pid <> pg_backend_pid()`, table).Scan(&n)
		return err == nil && n > 0
	})
}
