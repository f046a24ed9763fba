package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/sandbox"
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
		name := string(v.guard)
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
