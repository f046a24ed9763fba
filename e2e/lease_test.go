package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
)

// The default guard (the lease): a retry during a slow attempt gets 409, not
// 200 duplicate; the slow attempt fails and releases; the next retry is
// processed; one business row in the end. An expired lease is taken over;
// an unexpired one is not. The at-most-once guard (the default before)
// answers that retry 200 duplicate and loses the event.
func TestLeaseGuard(t *testing.T) {
	needStack(t)
	testLeaseGuard(t, "s6", seedOptions("s6", generator.HashingCodeNode))
}

// testLeaseGuard runs TestLeaseGuard on opts with the default guard.
func testLeaseGuard(t *testing.T, prefix string, opts generator.Options) {
	opts.Lease = 60 * time.Second
	d := deploy(t, opts)
	ctx := context.Background()

	// The business table misbehaves on demand: a trigger sleeps and then
	// fails while the fault table says so.
	fault := prefix + "_fault"
	execSQL(t, `CREATE TABLE IF NOT EXISTS `+fault+` (mode text NOT NULL)`)
	execSQL(t, `DELETE FROM `+fault)
	execSQL(t, `INSERT INTO `+fault+` VALUES ('slow-fail')`)
	execSQL(t, `CREATE OR REPLACE FUNCTION `+prefix+`_misbehave() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT mode FROM `+fault+`) = 'slow-fail' THEN
    PERFORM pg_sleep(4);
    RAISE EXCEPTION 'business step failed on purpose';
  END IF;
  RETURN NEW;
END $$`)
	execSQL(t, `CREATE OR REPLACE TRIGGER `+prefix+`_misbehave BEFORE INSERT ON `+opts.BusinessTable+` FOR EACH ROW EXECUTE FUNCTION `+prefix+`_misbehave()`)

	body := []byte(`{"id":"evt_lease_1","type":"order.created"}`)
	first := make(chan response, 1)
	go func() { first <- postNoFatal(d.url, "application/json", body) }()
	time.Sleep(1500 * time.Millisecond) // the first attempt holds the lease and sleeps
	during := post(t, d.url, "application/json", body, nil)
	if during.status != 409 || !strings.Contains(during.body, `"in_progress"`) || during.retryAfter != "60" {
		t.Errorf("retry during the first attempt: %d %s (Retry-After %q), want 409 in_progress, Retry-After 60", during.status, during.body, during.retryAfter)
	}
	r1 := <-first
	if r1.status != 500 {
		t.Errorf("failing first attempt: %d %s, want 500", r1.status, r1.body)
	}
	if hasKey(t, opts.EventsTable, "evt:evt_lease_1") {
		t.Errorf("the failed attempt did not release its lease")
	}

	execSQL(t, `UPDATE `+fault+` SET mode = 'ok'`)
	retry := post(t, d.url, "application/json", body, nil)
	again := post(t, d.url, "application/json", body, nil)
	if retry.status != 200 || !strings.Contains(retry.body, `"processed"`) {
		t.Errorf("retry after the failure: %d %s, want 200 processed", retry.status, retry.body)
	}
	if again.status != 200 || !strings.Contains(again.body, `"duplicate"`) {
		t.Errorf("replay of a done event: %d %s, want 200 duplicate", again.status, again.body)
	}
	var state string
	if err := st.Business.QueryRow(ctx, "SELECT state FROM "+opts.EventsTable+" WHERE key = 'evt:evt_lease_1'").Scan(&state); err != nil || state != "done" {
		t.Errorf("state = %q (%v), want done", state, err)
	}

	// A crash left a lease behind: expired, it is taken over; unexpired, 409.
	execSQL(t, "INSERT INTO "+opts.EventsTable+" (key, state, lease_until) VALUES ('evt:evt_crashed', 'processing', now() - interval '1 second')")
	execSQL(t, "INSERT INTO "+opts.EventsTable+" (key, state, lease_until) VALUES ('evt:evt_running', 'processing', now() + interval '10 minutes')")
	takeover := post(t, d.url, "application/json", []byte(`{"id":"evt_crashed"}`), nil)
	if takeover.status != 200 || !strings.Contains(takeover.body, `"processed"`) {
		t.Errorf("delivery after an expired lease: %d %s, want 200 processed", takeover.status, takeover.body)
	}
	var attempts int
	if err := st.Business.QueryRow(ctx, "SELECT attempts FROM "+opts.EventsTable+" WHERE key = 'evt:evt_crashed'").Scan(&attempts); err != nil || attempts != 2 {
		t.Errorf("attempts after takeover = %d (%v), want 2", attempts, err)
	}
	busy := post(t, d.url, "application/json", []byte(`{"id":"evt_running"}`), nil)
	if busy.status != 409 {
		t.Errorf("delivery during an unexpired lease: %d %s, want 409", busy.status, busy.body)
	}

	execs, _ := st.WaitExecutions(ctx, d.workflowID, 6)
	var rows int
	if err := st.Business.QueryRow(ctx, "SELECT count(*) FROM "+opts.BusinessTable+" WHERE event_key = 'evt:evt_lease_1'").Scan(&rows); err != nil || rows != 1 {
		t.Errorf("business rows for evt_lease_1 = %d (%v), want 1 (executions %s)", rows, err, executionIDs(execs))
	}
}
