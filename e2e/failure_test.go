package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
)

// The business step fails after the reservation: the caller gets 5xx and the
// key is released; once the fault is repaired the provider's retry is
// processed, once.
func TestBusinessFailureReleasesKey(t *testing.T) {
	needStack(t)
	testBusinessFailure(t, seedOptions("s5", generator.HashingCodeNode))
}

func testBusinessFailure(t *testing.T, opts generator.Options) {
	d := deploy(t, opts)
	ctx := context.Background()
	body := []byte(`{"id":"evt_fails_once","type":"checkout.session.completed"}`)

	// The fault: the business table is renamed away.
	execSQL(t, "ALTER TABLE "+opts.BusinessTable+" RENAME TO "+opts.BusinessTable+"_away")
	r1 := post(t, d.url, "application/json", body, nil)
	if r1.status < 500 || r1.status > 599 {
		t.Errorf("delivery while the business step fails: %d %s, want 5xx", r1.status, r1.body)
	}
	if hasKey(t, opts.EventsTable, "evt:evt_fails_once") {
		t.Errorf("the key is still reserved after the business step failed")
	}

	// The repair, then the provider's retry.
	execSQL(t, "ALTER TABLE "+opts.BusinessTable+"_away RENAME TO "+opts.BusinessTable)
	r2 := post(t, d.url, "application/json", body, nil)
	r3 := post(t, d.url, "application/json", body, nil)
	execs, _ := st.WaitExecutions(ctx, d.workflowID, 3)
	if r2.status != 200 || !strings.Contains(r2.body, `"processed"`) {
		t.Errorf("retry after the repair: %d %s, want 200 processed", r2.status, r2.body)
	}
	if r3.status != 200 || !strings.Contains(r3.body, `"duplicate"`) {
		t.Errorf("second retry: %d %s, want 200 duplicate", r3.status, r3.body)
	}
	if n := countRows(t, opts.BusinessTable); n != 1 {
		t.Errorf("%s has %d rows, want 1 (executions %s)", opts.BusinessTable, n, executionIDs(execs))
	}
}

func execSQL(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := st.Business.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
