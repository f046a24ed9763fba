// Package samples runs the sample events of `idemhook rules test`
// through the decision function compiled from the rules, in a PostgreSQL
// where the schema was created: each sample in a transaction of its own,
// rolled back, so that samples never see each other's rows.
package samples

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options of Run.
type Options struct {
	// Inbox names the schema's tables and function.
	Inbox pgsql.Inbox
	// Allowed is the worker's allowlist; nil: every type the rules handle.
	Allowed []string
	// DeferLimit and Backoff are the worker's --defer-limit and
	// --retry-backoff.
	DeferLimit, Backoff time.Duration
}

// Result is what one sample's event led to, and how that differs from
// what the sample expects. Err is set when the sample could not run (a row
// it names does not fit its table): that is a failure too.
type Result struct {
	Sample                         *rules.Sample
	State, Outcome, Detail, Effect string
	Tasks                          []string
	Differences                    []string
	Err                            error
	Duration                       time.Duration
}

// Failed reports whether the sample did not run or did not decide as
// expected.
func (r Result) Failed() bool { return r.Err != nil || len(r.Differences) > 0 }

// Name is the sample's file name.
func (r Result) Name() string { return filepath.Base(r.Sample.File) }

// Run runs every sample; it fails only when it cannot reach the database.
func Run(ctx context.Context, db *pgxpool.Pool, rs *rules.Rules, all []*rules.Sample, o Options) ([]Result, error) {
	allowed := o.Allowed
	if allowed == nil {
		allowed = rs.Types()
	}
	if o.DeferLimit == 0 {
		o.DeferLimit = 24 * time.Hour
	}
	if o.Backoff == 0 {
		o.Backoff = 30 * time.Second
	}
	var out []Result
	for _, s := range all {
		start := time.Now()
		r := Result{Sample: s}
		tx, err := db.Begin(ctx)
		if err != nil {
			return out, err
		}
		r.Err = runOne(ctx, tx, rs, s, o, allowed, &r)
		tx.Rollback(ctx)
		if r.Err == nil {
			r.Differences = differences(s.Expect, r)
		}
		r.Duration = time.Since(start)
		out = append(out, r)
	}
	return out, nil
}

func runOne(ctx context.Context, tx pgx.Tx, rs *rules.Rules, s *rules.Sample, o Options, allowed []string, r *Result) error {
	in := o.Inbox
	if err := eachRow(in, s.Rows, pgsql.InsertRow, func(where, sql, row string) error {
		if _, err := tx.Exec(ctx, sql, row); err != nil {
			return fmt.Errorf("rows.%s: %w", where, err)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, k := range s.Effects {
		if _, err := tx.Exec(ctx, in.SampleEffect(), k); err != nil {
			return fmt.Errorf("effects: %w", err)
		}
	}
	ev := rs.Evaluate(rules.Event{Body: s.Body, Headers: s.Headers, Type: s.Type, Account: s.Account}, allowed)
	headers, _ := json.Marshal(s.Headers)
	if s.Headers == nil {
		headers = []byte("{}")
	}
	var id int64
	if err := tx.QueryRow(ctx, in.SampleReceipt(), ev.Account, "sample:"+filepath.Base(s.File), ev.Type, s.Body, string(headers),
		fmt.Sprintf("%d seconds", int64(s.ReceivedAgo/time.Second))).Scan(&id); err != nil {
		return fmt.Errorf("the receipt: %w", err)
	}
	var attempts int
	if err := tx.QueryRow(ctx, in.ClaimEvent(time.Minute, 5), id).Scan(new(int64), new(string), &attempts); err != nil {
		return fmt.Errorf("the claim: %w", err)
	}
	if _, err := tx.Exec(ctx, in.ApplyEventCall(o.DeferLimit, o.Backoff), id, attempts, strings.Join(allowed, ",")); err != nil {
		return fmt.Errorf("the decision: %w", err)
	}
	if err := tx.QueryRow(ctx, in.SampleOutcome(), id).Scan(&r.State, &r.Outcome, &r.Detail, &r.Effect, &r.Tasks); err != nil {
		return fmt.Errorf("the outcome: %w", err)
	}
	return eachRow(in, s.Expect.Rows, pgsql.CountRows, func(where, sql, row string) error {
		var n int
		if err := tx.QueryRow(ctx, sql, row).Scan(&n); err != nil {
			return fmt.Errorf("expect.rows.%s: %w", where, err)
		}
		if n == 0 {
			r.Differences = append(r.Differences, fmt.Sprintf("no row of %s after the event", where))
		}
		return nil
	})
}

// eachRow builds statement's SQL for each row of tables (its columns, in
// name order) and hands it to do with the row as JSON and where it is
// ("orders[0] {…}").
func eachRow(in pgsql.Inbox, tables []rules.TableRows, statement func(pgsql.Table, []string) (string, error), do func(where, sql, row string) error) error {
	for _, tr := range tables {
		for i, row := range tr.Rows {
			sql, err := statement(in.Qualify(tr.Table), slices.Sorted(maps.Keys(row)))
			if err != nil {
				return err
			}
			b, _ := json.Marshal(row)
			if err := do(fmt.Sprintf("%s[%d] %s", tr.Table, i, b), sql, string(b)); err != nil {
				return err
			}
		}
	}
	return nil
}

func differences(want rules.Expectation, r Result) []string {
	diffs := r.Differences
	if want.State != r.State || want.Outcome != r.Outcome {
		diffs = append(diffs, fmt.Sprintf("decision %s/%s, want %s/%s", r.State, r.Outcome, want.State, want.Outcome))
	}
	if want.Effect != nil && *want.Effect != r.Effect {
		diffs = append(diffs, fmt.Sprintf("effect %s, want %s", orNone(r.Effect), orNone(*want.Effect)))
	}
	if want.Tasks != nil && !slices.Equal(want.Tasks, r.Tasks) {
		diffs = append(diffs, fmt.Sprintf("tasks [%s], want [%s]", strings.Join(r.Tasks, " "), strings.Join(want.Tasks, " ")))
	}
	return diffs
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Summary is one line per sample: what it led to, and its differences.
func (r Result) Summary() string {
	got := fmt.Sprintf("%s/%s effect %s", r.State, r.Outcome, orNone(r.Effect))
	if len(r.Tasks) > 0 {
		got += " tasks " + strings.Join(r.Tasks, " ")
	}
	switch {
	case r.Err != nil:
		return "could not run: " + r.Err.Error()
	case len(r.Differences) > 0:
		return got + "\n" + strings.Join(r.Differences, "\n") + "\n(" + r.Detail + ")"
	}
	return got
}

// WriteTable writes one line per sample, and the differences of those
// that failed under them.
func WriteTable(w io.Writer, results []Result) error {
	var b strings.Builder
	width := 6
	for _, r := range results {
		width = max(width, len(r.Name()))
	}
	fmt.Fprintf(&b, "%-4s  %-*s  %s\n", "", width, "SAMPLE", "DECISION")
	failed := 0
	for _, r := range results {
		status := "ok"
		if r.Failed() {
			status, failed = "FAIL", failed+1
		}
		lines := strings.Split(r.Summary(), "\n")
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", status, width, r.Name(), lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "%-4s  %-*s    %s\n", "", width, "", l)
		}
	}
	fmt.Fprintf(&b, "\n%d samples: %d passed, %d failed\n", len(results), len(results)-failed, failed)
	_, err := io.WriteString(w, b.String())
	return err
}
