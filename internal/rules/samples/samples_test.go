package samples_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/idemhook/idemhook/internal/rules/samples"
	"github.com/idemhook/idemhook/internal/sandbox"
)

var pg *sandbox.Stack

func TestMain(m *testing.M) { sandbox.RunWithPostgres(m, "rules/samples", &pg) }

// Each preset's samples decide as they expect in a schema of their own;
// a sample whose rows do not fit its table, or whose expectation differs,
// fails with the reason; the samples never see each other's rows.
func TestRun(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	for i, preset := range rules.PresetNames() {
		rs, err := rules.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		in := pgsql.Inbox{Schema: "samples" + string(rune('a'+i))}
		schema, err := generator.Schema(generator.Options{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{Rules: rs, DBSchema: in.Schema}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pg.Business.Exec(ctx, schema); err != nil {
			t.Fatal(err)
		}
		all, err := rules.LoadSamples(filepath.Join("..", "testdata", "examples", preset))
		if err != nil {
			t.Fatal(err)
		}
		bad, err := rules.ParseSample("bad-row.yaml", []byte(`event: {id: e, type: invoice.paid, data: {object: {}}}
rows: {`+rs.Entities[0].Table.Name+`: [{no_such_column: 1}]}
expect: {state: processed, outcome: applied}`))
		if err != nil {
			t.Fatal(err)
		}
		wrong, err := rules.ParseSample("wrong.yaml", []byte(`event: {id: e, type: customer.created, data: {object: {}}}
expect: {state: processed, outcome: applied, effect: none, tasks: [x]}`))
		if err != nil {
			t.Fatal(err)
		}
		results, err := samples.Run(ctx, pg.Business, rs, append(all, bad, wrong), samples.Options{Inbox: in})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results[:len(all)] {
			if r.Failed() {
				t.Errorf("%s/%s: %s", preset, r.Name(), r.Summary())
			}
		}
		if r := results[len(all)]; r.Err == nil || !strings.Contains(r.Summary(), "no_such_column") {
			t.Errorf("a row that does not fit its table: %s", r.Summary())
		}
		if r := results[len(all)+1]; len(r.Differences) != 2 || !strings.Contains(r.Summary(), "decision ignored/type_not_allowed, want processed/applied") {
			t.Errorf("a wrong expectation: %q", r.Differences)
		}
		var left int
		pg.Business.QueryRow(ctx, "SELECT count(*) FROM "+in.Inbox().String()).Scan(&left)
		if left != 0 {
			t.Errorf("%d inbox rows left after the samples: each must be rolled back", left)
		}
	}
}
