package verify

import (
	"fmt"
	"strings"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/pgsql"
)

// EventsSchema is `idemhook schema` for the events table g reserves in
// (table or schema.table, as the workflow names it), for the scratch
// database verify runs the workflow on: the table's schema is created
// first, and the column in which a workflow idemhook guard edited records
// the execution holding a key is added.
func EventsSchema(g Guard) (string, error) {
	name := strings.ReplaceAll(g.EventsTable, `"`, "")
	table, err := pgsql.ParseTable(name)
	if err != nil {
		return "", fmt.Errorf("the events table %s: %v; create it with --schema FILE", g.EventsTable, err)
	}
	o := generator.Options{ReserveOptions: generator.ReserveOptions{EventsTable: name}}
	if g.Lease {
		o.Guard = generator.GuardLease
	}
	sql, err := generator.Schema(o)
	if err != nil {
		return "", fmt.Errorf("the events table %s: %v; create it with --schema FILE", g.EventsTable, err)
	}
	return pgsql.SchemaDDL(table) + sql + pgsql.ExecutionDDL(table), nil
}
