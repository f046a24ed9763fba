package keysvc_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/generator"
	"github.com/idemhook/idemhook/keysvc"
	"github.com/idemhook/idemhook/pgsql"
	"github.com/jackc/pgx/v5"
)

// keysvc and an n8n workflow share one processed_events table: a key either
// reserves is a duplicate for the other.
func TestSharesTheWorkflowTable(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	opts := generator.Options{EventsTable: "ks_shared_events", BusinessTable: "ks_shared_business"}
	schema, err := generator.Schema(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Business.Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Business.Exec(ctx, "DROP TABLE ks_shared_events, ks_shared_business") })

	store, err := keysvc.OpenPG(ctx, pg.BusinessDSN, keysvc.PGOptions{Table: opts.EventsTable})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := start(t, keysvc.Config{Store: store})

	c.do("POST", "/v1/reservations", []byte(`{"id":"evt_shared_1"}`), nil).want(t, 201, "")
	// The workflow's own statement now finds the key taken.
	var got string
	err = pg.Business.QueryRow(ctx, pgsql.Reserve(pgsql.MustParseTable(opts.EventsTable)), "evt:evt_shared_1").Scan(&got)
	if !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("the workflow's reservation after keysvc's: %q, %v; want no row", got, err)
	}
	// And the other way round.
	if err := pg.Business.QueryRow(ctx, pgsql.Reserve(pgsql.MustParseTable(opts.EventsTable)), "evt:evt_shared_2").Scan(&got); err != nil {
		t.Fatal(err)
	}
	c.do("POST", "/v1/reservations", []byte(`{"id":"evt_shared_2"}`), nil).want(t, 200, "")

	// The plain schema has no lease columns: keysvc says so instead of failing.
	c.do("POST", "/v1/reservations?lease=30s", []byte(`{"id":"evt_shared_3"}`), nil).want(t, 501, "lease_unsupported")
}

func TestOpenPGRefusesAMissingTable(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	_, err := keysvc.OpenPG(context.Background(), pg.BusinessDSN, keysvc.PGOptions{Table: "ks_never_created"})
	if err == nil || !strings.Contains(err.Error(), "--create-schema") {
		t.Fatalf("OpenPG on a missing table: %v", err)
	}
	_, err = keysvc.OpenPG(context.Background(), pg.BusinessDSN, keysvc.PGOptions{Table: "drop table x"})
	var ie *pgsql.IdentifierError
	if !errors.As(err, &ie) {
		t.Fatalf("OpenPG with an invalid table name: %v", err)
	}
}
