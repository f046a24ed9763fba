package verify

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/pgsql"
)

// verify creates the events table a workflow reserves in, in its scratch
// database, as `idemhook schema` would: for a workflow generated with
// --events-table shop.processed_events, that is shop.processed_events, with
// the execution column guard's release reads. Without a schema's name
// the table is the search_path's.
func TestEventsSchemaCreatesTheGuardsTable(t *testing.T) {
	for _, tc := range []struct {
		table, want string
		lease       bool
	}{
		{"processed_events", "processed_events", false},
		{"shop.processed_events", "shop.processed_events", false},
		{`"shop"."processed_events"`, "shop.processed_events", false},
		{"shop.keys", "shop.keys", true},
	} {
		t.Run(tc.table, func(t *testing.T) {
			sql, err := EventsSchema(Guard{EventsTable: tc.table, PlainEvents: true, Lease: tc.lease})
			if err != nil {
				t.Fatal(err)
			}
			// Every statement on an events table names the guard's.
			named := regexp.MustCompile(`(?:TABLE IF NOT EXISTS|ALTER TABLE|ON) ([a-z_."]+)`)
			for _, m := range named.FindAllStringSubmatch(sql, -1) {
				if m[1] != tc.want && m[1] != "business_log" {
					t.Errorf("the schema names %s, not the guard's %s:\n%s", m[1], tc.want, sql)
				}
			}
			if pg == nil {
				return // -short: no PostgreSQL
			}
			applyAndReserve(t, sql, tc.want)
		})
	}
}

// applyAndReserve applies sql in a transaction it rolls back, and
// reserves a key in table there for an execution, as guard's workflows do.
func applyAndReserve(t *testing.T, sql, table string) {
	t.Helper()
	ctx := context.Background()
	tx, err := pg.Business.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, sql); err != nil {
		t.Fatalf("the schema does not apply on an empty database: %v\n%s", err, sql)
	}
	var key string
	err = tx.QueryRow(ctx, pgsql.ReserveForExecution(pgsql.MustParseTable(table)), "evt_schema_test", "1").Scan(&key)
	if err != nil || key != "evt_schema_test" {
		t.Fatalf("reserve in %s: %q, %v", table, key, err)
	}
	var schema string
	if s, _, ok := strings.Cut(table, "."); ok {
		schema = s
	}
	var n int
	err = tx.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM information_schema.columns
		WHERE table_schema = coalesce(nullif('%s', ''), current_schema()) AND column_name = 'execution_id'`, schema)).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("%s has %d execution_id columns (%v)", table, n, err)
	}
}
