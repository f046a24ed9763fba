package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/generator"
)

func seedOptions(prefix string, hashing generator.Hashing) generator.Options {
	return generator.Options{
		WebhookPath:   prefix + "-hook",
		WorkflowName:  "e2e " + prefix,
		EventsTable:   prefix + "_processed_events",
		BusinessTable: prefix + "_business_log",
		Hashing:       hashing,
	}
}

// The seed's run: A, A again with another signature header, B → 3
// executions, 2 business rows, the replay answered 200 through the duplicate
// branch.
func TestSeedRun(t *testing.T) {
	needStack(t)
	testSeedRun(t, seedOptions("s1", generator.HashingCodeNode))
}

func testSeedRun(t *testing.T, opts generator.Options) {
	d := deploy(t, opts)
	a := []byte(`{"id":"evt_A_1","object":"event","type":"payment_intent.succeeded"}`)
	b := []byte(`{"id":"evt_B_1","object":"event","type":"charge.refunded"}`)

	r1 := post(t, d.url, "application/json", a, map[string]string{"Stripe-Signature": "t=1700000000,v1=aaaa"})
	r2 := post(t, d.url, "application/json", a, map[string]string{"Stripe-Signature": "t=1700000060,v1=bbbb"})
	r3 := post(t, d.url, "application/json", b, map[string]string{"Stripe-Signature": "t=1700000120,v1=cccc"})

	execs, err := st.WaitExecutions(context.Background(), d.workflowID, 3)
	if err != nil {
		t.Fatal(err)
	}
	if r1.status != 200 || !strings.Contains(r1.body, `"processed"`) {
		t.Errorf("first delivery of A: %d %s, want 200 processed", r1.status, r1.body)
	}
	if r2.status != 200 || !strings.Contains(r2.body, `"duplicate"`) {
		t.Errorf("replay of A: %d %s, want 200 duplicate", r2.status, r2.body)
	}
	if r3.status != 200 || !strings.Contains(r3.body, `"processed"`) {
		t.Errorf("delivery of B: %d %s, want 200 processed", r3.status, r3.body)
	}
	if len(execs) != 3 {
		t.Errorf("n8n recorded %d executions (%s), want 3", len(execs), executionIDs(execs))
	}
	for _, e := range execs {
		if e.Status != "success" {
			t.Errorf("execution %s has status %s, want success", e.ID, e.Status)
		}
	}
	if n := countRows(t, opts.BusinessTable); n != 2 {
		t.Errorf("%s has %d rows, want 2 (executions %s)", opts.BusinessTable, n, executionIDs(execs))
	}
	if keys := storedKeys(t, opts.EventsTable); strings.Join(keys, " ") != "evt:evt_A_1 evt:evt_B_1" {
		t.Errorf("stored keys %q", keys)
	}
	var eventType string
	if err := st.Business.QueryRow(context.Background(), "SELECT event_type FROM "+opts.BusinessTable+" WHERE event_key = 'evt:evt_B_1'").Scan(&eventType); err != nil || eventType != "charge.refunded" {
		t.Errorf("event_type of B = %q (%v), want charge.refunded", eventType, err)
	}
}
