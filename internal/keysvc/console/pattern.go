package console

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Pattern shows the n8n inbox pattern's tables (inbox_events and
// outbox_tasks in one schema, its --db-schema) and retries what its docs
// retries by hand: failed or rejected events, failed tasks. The pattern's
// workflows make every other change.
type Pattern struct {
	pool   *pgxpool.Pool
	tables pgsql.Inbox
	logger *slog.Logger
}

// ErrPatternMissing: the schema has no inbox pattern tables.
var ErrPatternMissing = fmt.Errorf("the inbox pattern's tables are missing")

// OpenPattern checks that schema ("" for the search_path) holds the
// pattern's inbox_events and outbox_tasks, and fails with ErrPatternMissing
// naming them when it does not.
func OpenPattern(ctx context.Context, pool *pgxpool.Pool, schema string, logger *slog.Logger) (*Pattern, error) {
	if schema != "" {
		if t, err := pgsql.ParseTable(schema); err != nil || t.Schema != "" {
			return nil, fmt.Errorf("pattern schema %q: a lower-case identifier that is not a reserved word", schema)
		}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Pattern{pool: pool, tables: pgsql.Inbox{Schema: schema}, logger: logger}
	names := []string{p.tables.Inbox().String(), p.tables.Outbox().String()}
	var missing []string
	if err := pool.QueryRow(ctx, pgsql.MissingTables(), names).Scan(&missing); err != nil {
		return nil, fmt.Errorf("inspect the pattern's tables: %w", err)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %v (create them with the generated schema.sql, or name the pattern's --db-schema)", ErrPatternMissing, missing)
	}
	return p, nil
}

// Schema is the pattern's schema ("" for the search_path).
func (p *Pattern) Schema() string { return p.tables.Schema }

// PatternSummary counts the pattern's events and tasks by state.
type PatternSummary struct {
	Schema string             `json:"schema"`
	Events []inbox.StateCount `json:"events"`
	Tasks  []inbox.StateCount `json:"tasks"`
}

// Summary counts the pattern's rows by state.
func (p *Pattern) Summary(ctx context.Context) (PatternSummary, error) {
	s := PatternSummary{Schema: p.tables.Schema}
	var err error
	if s.Events, err = p.counts(ctx, p.tables.PatternEventCounts()); err != nil {
		return PatternSummary{}, err
	}
	if s.Tasks, err = p.counts(ctx, p.tables.PatternTaskCounts()); err != nil {
		return PatternSummary{}, err
	}
	return s, nil
}

func (p *Pattern) counts(ctx context.Context, stmt string) ([]inbox.StateCount, error) {
	rows, err := p.pool.Query(ctx, stmt)
	if err != nil {
		return nil, fmt.Errorf("pattern summary: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.StateCount, error) {
		var c inbox.StateCount
		err := r.Scan(&c.State, &c.Count, &c.OldestReceivedAt, &c.OldestAgeSeconds)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("pattern summary: %w", err)
	}
	return out, nil
}

// Event is one of the pattern's inbox rows: what its worker decided, and
// when it runs again.
type Event struct {
	ID        int64  `json:"id"`
	Account   string `json:"account"`
	Key       string `json:"key"`
	EventType string `json:"event_type"`
	State     string `json:"state"`
	Outcome   string `json:"outcome,omitempty"`
	Attempts  int    `json:"attempts"`
	// Reason is last_error: why it was rejected, failed or deferred, or
	// the error its last decision met.
	Reason string `json:"reason,omitempty"`
	// DueAt is when a deferred row is tried again; ClaimedUntil when a
	// processing row's claim expires.
	DueAt        *time.Time `json:"due_at,omitempty"`
	ClaimedUntil *time.Time `json:"claimed_until,omitempty"`
	ReceivedAt   time.Time  `json:"received_at"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
	// Endpoint is the keysvc endpoint that received it ("" for n8n's
	// receiver).
	Endpoint string `json:"endpoint,omitempty"`
}

// Task is one outbox task.
type Task struct {
	ID           int64      `json:"id"`
	OperationKey string     `json:"operation_key"`
	Kind         string     `json:"kind"`
	State        string     `json:"state"`
	Attempts     int        `json:"attempts"`
	LastStatus   *int       `json:"last_status,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	NextAttempt  *time.Time `json:"next_attempt_at,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	SentAt       *time.Time `json:"sent_at,omitempty"`
	InboxID      *int64     `json:"inbox_id,omitempty"`
}

// List is a page of events or tasks, newest first; NextBefore, when not 0,
// is the next page's before.
type List[T any] struct {
	Items      []T   `json:"items"`
	NextBefore int64 `json:"next_before,omitempty"`
}

// filterArgs are f (and ids) as patternFilter's $1 to $5.
func filterArgs(f Filter, states []string, ids []int64) []any {
	args := []any{nil, nil, nil, nil, nil}
	if len(states) > 0 {
		args[0] = states
	}
	if f.Type != "" {
		args[1] = f.Type
	}
	if !f.Since.IsZero() {
		args[2] = f.Since
	}
	if !f.Until.IsZero() {
		args[3] = f.Until
	}
	if ids != nil {
		args[4] = ids
	}
	return args
}

// pageArgs are p's arguments of a list statement: the filter, the cursor
// and one row more than the page, to tell whether another follows.
func pageArgs(p Page) []any {
	var before any
	if p.Before > 0 {
		before = p.Before
	}
	return append(filterArgs(p.Filter, p.States, nil), before, p.Limit+1)
}

// cut trims a list read with pageArgs to its page and sets NextBefore.
func cut[T any](items []T, limit int, id func(T) int64) List[T] {
	l := List[T]{Items: items}
	if l.Items == nil {
		l.Items = []T{}
	}
	if len(l.Items) > limit {
		l.Items = l.Items[:limit]
		l.NextBefore = id(l.Items[limit-1])
	}
	return l
}

// Events lists the pattern's inbox rows p selects.
func (p *Pattern) Events(ctx context.Context, page Page) (List[Event], error) {
	rows, err := p.pool.Query(ctx, p.tables.ListPatternEvents(), pageArgs(page)...)
	if err != nil {
		return List[Event]{}, fmt.Errorf("pattern events: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.ID, &e.Account, &e.Key, &e.EventType, &e.State, &e.Outcome, &e.Attempts, &e.Reason,
			&e.DueAt, &e.ClaimedUntil, &e.ReceivedAt, &e.FinishedAt, &e.Endpoint)
		return e, err
	})
	if err != nil {
		return List[Event]{}, fmt.Errorf("pattern events: %w", err)
	}
	return cut(items, page.Limit, func(e Event) int64 { return e.ID }), nil
}

// Tasks lists the outbox tasks p selects.
func (p *Pattern) Tasks(ctx context.Context, page Page) (List[Task], error) {
	rows, err := p.pool.Query(ctx, p.tables.ListPatternTasks(), pageArgs(page)...)
	if err != nil {
		return List[Task]{}, fmt.Errorf("pattern tasks: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Task, error) {
		var t Task
		err := r.Scan(&t.ID, &t.OperationKey, &t.Kind, &t.State, &t.Attempts, &t.LastStatus, &t.LastError,
			&t.NextAttempt, &t.CreatedAt, &t.UpdatedAt, &t.SentAt, &t.InboxID)
		return t, err
	})
	if err != nil {
		return List[Task]{}, fmt.Errorf("pattern tasks: %w", err)
	}
	return cut(items, page.Limit, func(t Task) int64 { return t.ID }), nil
}

// RetryEvents retries the failed or rejected events s selects
// (pgsql.Inbox.RetryEvents), as one action: see inbox.Action for Expect,
// DryRun and the errors. actor is logged.
func (p *Pattern) RetryEvents(ctx context.Context, s Selection, actor string) (inbox.ActionResult, error) {
	return p.retry(ctx, s, actor, "events", []string{pgsql.StateFailed, pgsql.StateRejected}, p.tables.SelectPatternEvents(),
		func(tx pgx.Tx, sel []picked) (int, error) {
			ids := make([]int64, len(sel))
			for i, r := range sel {
				ids[i] = r.id
			}
			tag, err := tx.Exec(ctx, p.tables.RetryEvents(), ids)
			return int(tag.RowsAffected()), err
		})
}

// RetryTasks retries the failed outbox tasks s selects with docs/inbox.md's
// statement (pgsql.Inbox.RetryTask, one per task, sent as one batch in one
// transaction): the dispatcher sends each again with its same operation key.
func (p *Pattern) RetryTasks(ctx context.Context, s Selection, actor string) (inbox.ActionResult, error) {
	return p.retry(ctx, s, actor, "tasks", []string{"failed"}, p.tables.SelectPatternTasks(),
		func(tx pgx.Tx, sel []picked) (int, error) {
			batch := &pgx.Batch{}
			for _, r := range sel {
				batch.Queue(p.tables.RetryTask(), r.key)
			}
			results := tx.SendBatch(ctx, batch)
			defer results.Close()
			done := 0
			for range sel {
				tag, err := results.Exec()
				if err != nil {
					return done, err
				}
				done += int(tag.RowsAffected())
			}
			return done, nil
		})
}

// picked is a row a retry locked: its id, and a task's operation key.
type picked struct {
	id  int64
	key string
}

// retry locks what s selects among states (stmt), checks the count, and
// applies apply to those rows, in one transaction.
func (p *Pattern) retry(ctx context.Context, s Selection, actor, what string, states []string, stmt string,
	apply func(pgx.Tx, []picked) (int, error)) (inbox.ActionResult, error) {
	res := inbox.ActionResult{Action: "retry", DryRun: s.DryRun, IDs: []int64{}}
	if len(s.Filter.States) > 0 {
		states = intersect(states, s.Filter.States)
		if len(states) == 0 {
			return res, nil
		}
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("retry %s: %w", what, err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, stmt, append(filterArgs(s.Filter, states, s.IDs), inbox.MaxSelection+1)...)
	if err != nil {
		return res, fmt.Errorf("retry %s: %w", what, err)
	}
	sel, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (picked, error) {
		var x picked
		err := r.Scan(&x.id, &x.key)
		return x, err
	})
	if err != nil {
		return res, fmt.Errorf("retry %s: %w", what, err)
	}
	res.Matched = len(sel)
	for _, r := range sel {
		res.IDs = append(res.IDs, r.id)
	}
	if err := (inbox.Action{Expect: s.Expect}).Check(len(sel)); err != nil {
		return res, err
	}
	if s.DryRun || len(sel) == 0 {
		return res, nil
	}
	done, err := apply(tx, sel)
	if err != nil {
		return res, fmt.Errorf("retry %s: %w", what, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("retry %s: commit: %w", what, err)
	}
	res.Done = done
	p.logger.Info("console: pattern "+what+" retried", "schema", p.tables.Schema, "count", done, "by", actor)
	return res, nil
}

func intersect(a, b []string) []string {
	var out []string
	for _, s := range a {
		for _, t := range b {
			if s == t {
				out = append(out, s)
			}
		}
	}
	return out
}

// patternBacklog are the pattern's states that wait for a worker, a
// dispatcher or a human, by table.
var patternBacklog = map[string][]string{
	"inbox_events": {pgsql.StateReceived, pgsql.StateProcessing, pgsql.StateDeferred, pgsql.StateFailed, pgsql.StateRejected},
	"outbox_tasks": {"pending", "sending", "ambiguous", "failed"},
}

var (
	patternBacklogDesc = prometheus.NewDesc("keysvc_pattern_backlog", "The n8n inbox pattern's rows that wait for a worker, a dispatcher or a human, by table and state.",
		[]string{"table", "state"}, nil)
	patternOldestDesc = prometheus.NewDesc("keysvc_pattern_oldest_age_seconds", "Age of the oldest row in each of the pattern's backlog states (0 when there is none).",
		[]string{"table", "state"}, nil)
)

// Collectors returns the pattern's backlog series, read at each scrape
// (none when the database does not answer within 2 s).
func (p *Pattern) Collectors() []prometheus.Collector {
	return []prometheus.Collector{patternCollector{p}}
}

type patternCollector struct{ p *Pattern }

func (c patternCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- patternBacklogDesc
	ch <- patternOldestDesc
}

func (c patternCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := c.p.Summary(ctx)
	if err != nil {
		return
	}
	for table, counts := range map[string][]inbox.StateCount{"inbox_events": s.Events, "outbox_tasks": s.Tasks} {
		for _, state := range patternBacklog[table] {
			var sc inbox.StateCount
			for _, x := range counts {
				if x.State == state {
					sc = x
				}
			}
			ch <- prometheus.MustNewConstMetric(patternBacklogDesc, prometheus.GaugeValue, float64(sc.Count), table, state)
			ch <- prometheus.MustNewConstMetric(patternOldestDesc, prometheus.GaugeValue, sc.OldestAgeSeconds, table, state)
		}
	}
}
