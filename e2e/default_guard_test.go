package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
)

// holdStep makes the business table's inserts wait while prefix's hold
// table says so: the business step is then "slow" for as long as the test
// wants, and the test sees it running in pg_stat_activity. It returns the
// function that lets the step go on.
func holdStep(t *testing.T, prefix, businessTable string) (release func()) {
	t.Helper()
	hold := prefix + "_hold"
	execSQL(t, `CREATE TABLE IF NOT EXISTS `+hold+` (held boolean NOT NULL)`)
	execSQL(t, `DELETE FROM `+hold)
	execSQL(t, `INSERT INTO `+hold+` VALUES (true)`)
	// Each statement of a plpgsql function takes a new snapshot: the loop
	// sees the test's update.
	execSQL(t, `CREATE OR REPLACE FUNCTION `+prefix+`_wait() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WHILE (SELECT held FROM `+hold+`) LOOP
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN NEW;
END $$`)
	execSQL(t, `CREATE OR REPLACE TRIGGER `+prefix+`_wait BEFORE INSERT ON `+businessTable+` FOR EACH ROW EXECUTE FUNCTION `+prefix+`_wait()`)
	return func() { execSQL(t, `UPDATE `+hold+` SET held = false`) }
}

// stepsRunning counts the statements inserting into businessTable that
// PostgreSQL is running.
func stepsRunning(t *testing.T, businessTable string) int {
	t.Helper()
	var n int
	if err := st.Business.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE '%INSERT INTO '||$1||' %'`, businessTable).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// finisherCredential is an n8n Postgres credential whose role has no
// client_connection_check_interval (the stack's PostgreSQL checks every
// second): a statement of it whose client died runs on and commits, as on a
// PostgreSQL with the default settings.
var finisherCredential = sync.OnceValues(func() (string, error) {
	const role, name = "e2e_finisher", "Postgres (e2e finisher)"
	ctx := context.Background()
	for _, sql := range []string{
		`DO $$ BEGIN CREATE ROLE ` + role + ` LOGIN SUPERUSER PASSWORD 'e2e-finisher'; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
		`ALTER ROLE ` + role + ` SET client_connection_check_interval = 0`,
	} {
		if _, err := st.Business.Exec(ctx, sql); err != nil {
			return "", err
		}
	}
	data := st.PostgresCredentialData()
	data["user"], data["password"] = role, "e2e-finisher"
	_, err := api.CreateCredential(ctx, name, "postgres", data)
	return name, err
})

// The default guard with its slow example step, n8n killed with SIGKILL
// while the step runs, n8n restarted, and the provider retrying until it is
// answered 2xx: one effect, whether PostgreSQL aborts the dead client's
// statement (client_connection_check_interval: nothing committed, the retry
// takes the lease over once it expires and runs the step) or finishes it
// (the row and the key's done committed together: the retry is a
// duplicate). The at-most-once guard (the default before) loses the event
// in the first case: its key stays reserved and every retry is answered
// duplicate.
func TestDefaultGuardStepKilled(t *testing.T) {
	needStack(t)
	for _, c := range []struct {
		name     string
		finishes bool
	}{{"statement aborted", false}, {"statement finished", true}} {
		t.Run(c.name, func(t *testing.T) {
			prefix := "killstep_" + map[bool]string{false: "abort", true: "finish"}[c.finishes]
			testDefaultGuardStepKilled(t, prefix, c.finishes)
		})
	}
}

func testDefaultGuardStepKilled(t *testing.T, prefix string, finishes bool) {
	ctx := context.Background()
	opts := seedOptions(prefix, generator.HashingCodeNode)
	opts.Lease = 5 * time.Second // n8n's restart outlasts it: the retry after it takes the lease over
	var d deployment
	if finishes {
		cred, err := finisherCredential()
		if err != nil {
			t.Fatal(err)
		}
		opts.CredentialName = cred
		d = deployOn(t, opts, st.Business)
	} else {
		d = deploy(t, opts)
	}
	release := holdStep(t, prefix, opts.BusinessTable)
	defer release()

	key := "evt:evt_" + prefix
	body := []byte(`{"id":"evt_` + prefix + `","type":"payment_intent.succeeded"}`)
	type outcome struct {
		last  response
		acked bool
	}
	delivered := make(chan outcome, 1)
	go func() {
		r, ok := deliverLikeProvider(func() response { return postNoFatal(d.url, "application/json", body) })
		delivered <- outcome{r, ok}
	}()
	waitFor(t, 30*time.Second, "the first attempt's step to run", func() bool { return stepsRunning(t, opts.BusinessTable) == 1 })
	if err := st.KillN8N(ctx); err != nil {
		t.Fatal(err)
	}
	if finishes {
		time.Sleep(2 * time.Second) // longer than the server's check interval: this role has none
		if n := stepsRunning(t, opts.BusinessTable); n != 1 {
			t.Fatalf("the dead client's step is not running on (%d running): the finisher role checks its client", n)
		}
		release()
		waitFor(t, 20*time.Second, "the dead client's step to commit", func() bool { return stepsRunning(t, opts.BusinessTable) == 0 })
		if n, _, s := rowsAndState(t, opts, key); n != 1 || s != "done" {
			t.Fatalf("after the step finished without its client: %d business rows, key %q; want 1 and done together", n, s)
		}
	} else {
		waitFor(t, 20*time.Second, "PostgreSQL to abort the dead client's step", func() bool { return stepsRunning(t, opts.BusinessTable) == 0 })
		if n, _, s := rowsAndState(t, opts, key); n != 0 || s != "processing" {
			t.Fatalf("after the step was aborted: %d business rows, key %q; want 0 and processing", n, s)
		}
		release()
	}
	if err := st.StartN8N(ctx, runnerPath, opts.WebhookPath); err != nil {
		t.Fatal(err)
	}
	got := <-delivered
	if !got.acked || !answeredByWorkflow(got.last) {
		t.Errorf("the provider's retries ended with %d %s, want the workflow's 2xx", got.last.status, got.last.body)
	}
	want := `"processed"`
	if finishes {
		want = `"duplicate"`
	}
	if !strings.Contains(got.last.body, want) {
		t.Errorf("the acknowledged retry answered %s, want %s", got.last.body, want)
	}
	if n, _ := businessRows(t, opts.BusinessTable, key); n != 1 {
		execs, _ := st.Executions(ctx, d.workflowID)
		t.Errorf("%s has %d business rows after the retries, want 1 (executions %s)", key, n, executionIDs(execs))
	}
	if again := post(t, d.url, "application/json", body, nil); again.status != 200 || !strings.Contains(again.body, `"duplicate"`) {
		t.Errorf("a replay after the retries: %d %s, want 200 duplicate", again.status, again.body)
	}
}

// rowsAndState is key's business rows (and the last one's event type) in
// opts' business table, and its state in the events table.
func rowsAndState(t *testing.T, opts generator.Options, key string) (int, string, string) {
	t.Helper()
	n, eventType := businessRows(t, opts.BusinessTable, key)
	return n, eventType, keyState(t, opts.EventsTable, key)
}

// keyState is key's state in events, "" when it is not there.
func keyState(t *testing.T, events, key string) string {
	t.Helper()
	var s string
	st.Business.QueryRow(context.Background(), "SELECT state FROM "+events+" WHERE key = $1", key).Scan(&s)
	return s
}
