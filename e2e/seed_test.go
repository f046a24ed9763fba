package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/generator"
)

func seedOptions(prefix string, hashing generator.Hashing) generator.Options {
	return generator.Options{
		WebhookPath:  prefix + "-hook",
		WorkflowName: "e2e " + prefix,
		ReserveOptions: generator.ReserveOptions{
			EventsTable:   prefix + "_processed_events",
			BusinessTable: prefix + "_business_log",
		},
		Hashing: hashing,
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

// A body without id, with odd whitespace and key order, sent twice: the key
// is the SHA-256 of the exact bytes and the second call is a duplicate.
func TestBodyWithoutID(t *testing.T) {
	needStack(t)
	testBodyWithoutID(t, seedOptions("s2", generator.HashingCodeNode))
}

func testBodyWithoutID(t *testing.T, opts generator.Options) {
	d := deploy(t, opts)
	body := []byte("{ \"type\" :\"ping\",\n\t\"zeta\": [1, 2 ,3],   \"alpha\":{\"b\":1, \"a\":2}\r\n }  ")
	want, err := eventkey.Derive(body)
	if err != nil || want.Source != eventkey.SourceBodySHA256 {
		t.Fatalf("Derive = %v, %v", want, err)
	}
	r1 := post(t, d.url, "application/json", body, nil)
	r2 := post(t, d.url, "application/json", body, nil)
	if r1.status != 200 || !strings.Contains(r1.body, `"processed"`) {
		t.Errorf("first: %d %s, want 200 processed", r1.status, r1.body)
	}
	if r2.status != 200 || !strings.Contains(r2.body, `"duplicate"`) {
		t.Errorf("second: %d %s, want 200 duplicate", r2.status, r2.body)
	}
	if keys := storedKeys(t, opts.EventsTable); len(keys) != 1 || keys[0] != want.Value {
		t.Errorf("stored keys %q, want [%q]", keys, want.Value)
	}
	// The same members reordered are other bytes, so another key: the
	// documented limit of hashing.
	reordered := []byte(`{"alpha":{"a":2,"b":1},"type":"ping","zeta":[1,2,3]}`)
	r3 := post(t, d.url, "application/json", reordered, nil)
	if r3.status != 200 || !strings.Contains(r3.body, `"processed"`) {
		t.Errorf("reordered body: %d %s, want 200 processed", r3.status, r3.body)
	}
	// The key is built from the bytes after transport decoding: a gzip
	// delivery of the same body is a duplicate.
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(body)
	zw.Close()
	r4 := post(t, d.url, "application/json", zipped.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	if r4.status != 200 || !strings.Contains(r4.body, `"duplicate"`) || !strings.Contains(r4.body, want.Value) {
		t.Errorf("gzip delivery of the same body: %d %s, want 200 duplicate of %s", r4.status, r4.body, want.Value)
	}
	execs, _ := st.WaitExecutions(context.Background(), d.workflowID, 4)
	if n := countRows(t, opts.BusinessTable); n != 2 {
		t.Errorf("%s has %d rows, want 2 (executions %s)", opts.BusinessTable, n, executionIDs(execs))
	}
}

// 8 concurrent deliveries of one event, then 50: exactly one business row
// each time, every response 2xx.
func TestConcurrentDeliveries(t *testing.T) {
	needStack(t)
	testConcurrentDeliveries(t, seedOptions("s3", generator.HashingCodeNode))
}

func testConcurrentDeliveries(t *testing.T, opts generator.Options) {
	d := deploy(t, opts)
	for _, n := range []int{8, 50} {
		testConcurrentOnce(t, d, opts.BusinessTable, fmt.Sprintf("evt_concurrent_%d", n), n)
	}
}

// testConcurrentOnce sends n concurrent deliveries of one new event and
// wants one business row and one processed answer; every other answer is a
// 2xx duplicate or, from a lease guard while the first attempt runs, 409
// with Retry-After (the provider retries it later).
func testConcurrentOnce(t *testing.T, d deployment, businessTable, id string, n int) {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"type":"invoice.paid"}`, id))
	results := parallel(n, func(int) response { return postNoFatal(d.url, "application/json", body) })
	processed, inProgress := 0, 0
	for i, r := range results {
		switch {
		case r.status == 409 && r.retryAfter != "" && d.opts.Guard != generator.GuardAtMostOnce:
			inProgress++
		case r.status < 200 || r.status > 299:
			t.Errorf("%d concurrent: delivery %d got %d %s (Retry-After %q)", n, i, r.status, r.body, r.retryAfter)
		}
		if strings.Contains(r.body, `"processed"`) {
			processed++
		}
	}
	t.Logf("%d concurrent deliveries of one event: %d answered 409 while the first ran", n, inProgress)
	var rows int
	if err := st.Business.QueryRow(context.Background(), "SELECT count(*) FROM "+ident(businessTable)+" WHERE event_key = $1", "evt:"+id).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || processed != 1 {
		execs, _ := st.Executions(context.Background(), d.workflowID)
		t.Errorf("%d concurrent deliveries: %d business rows and %d processed answers, want 1 and 1 (executions %s)", n, rows, processed, executionIDs(execs))
	}
	t.Logf("%d concurrent deliveries of one event: %d business row, %d processed answer", n, rows, processed)
}
