// Package inbox is keysvc's durable inbox in front of n8n or any HTTP
// target: a delivery is saved in inbox_events and its forwarding enqueued on
// River in one transaction, answered only after the commit, then forwarded
// to its endpoint's target until the target acknowledges it.
//
// The package owns its tables (inbox_events as keysvc writes it,
// inbox_deliveries) and River's. It knows nothing of HTTP requests or
// tokens: keysvc verifies a delivery's signature and authenticates its
// callers, then calls Receive, Entry or Replay.
package inbox

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// Inbox is the durable inbox in front of n8n or any HTTP target: a
// delivery is verified, saved in inbox_events and its forwarding enqueued in
// the same transaction, and answered 200 only after the commit. River works
// the queue (one per endpoint, with its concurrency), shared by every keysvc
// on the database: its job locking gives each delivery to one of them. The
// receipt lives in the project's own table, which outlives River's finished
// jobs.
//
// Delivery to a target is at least once, never exactly once: every attempt
// carries the same Idempotency-Key and X-Idemhook-Inbox-Id, by which the
// target drops a repeat. A repeat is rare and bounded: a target's 2xx is
// recorded even across a database outage (settle), so only the deliveries
// in flight in a keysvc that died (at most each endpoint's concurrency) and
// calls that got no answer are sent again.
type Inbox struct {
	pool      *pgxpool.Pool
	tables    pgsql.Inbox
	endpoints map[string]*Endpoint
	river     *river.Client[pgx.Tx]
	http      *http.Client
	logger    *slog.Logger
	metrics   *metrics
	opts      Options
	lease     *lease
	// targets is what this keysvc's forwards tell of each endpoint's
	// target, for the log and keysvc_inbox_target_failing.
	targets map[string]*targetHealth
	// life ends the loops (heartbeat, rescuer, recoverer) at Close; hard
	// ends the recording of outcomes when Close runs out of time.
	life, hard        context.Context
	endLife, stopHard context.CancelFunc
}

// Options configure Open.
type Options struct {
	// Schema holds inbox_events, inbox_deliveries and River's tables
	// ("" for the search_path default). Share it with the n8n inbox
	// pattern's --db-schema so both see one inbox.
	Schema string
	// CreateSchema creates the tables and runs River's migrations.
	CreateSchema bool
	// DeliveryTimeout bounds one call to a target. Default 30s.
	DeliveryTimeout time.Duration
	// Backoff is the first retry delay, doubled per attempt with jitter up
	// to MaxBackoff. Defaults 1s and 5m.
	Backoff, MaxBackoff time.Duration
	// RecoverAfter is how long a receipt may stay received before the
	// recoverer enqueues its delivery again. Default 2m.
	RecoverAfter time.Duration
	// RescueAfter is this keysvc's lease: renewed every RescueAfter/5, and
	// when it lapses (keysvc died, or lost the database) another keysvc or
	// this one restarted delivers its deliveries in flight again, after
	// ending its own calls first. Default 15s, at least 5s.
	RescueAfter time.Duration
	// TargetSummaryEvery is how often the log sums up a target whose
	// forwards keep failing (its first failure and its recovery are logged
	// at once). Default DefaultTargetSummaryEvery.
	TargetSummaryEvery time.Duration
	Logger             *slog.Logger
}

// DefaultRescueAfter is Options.RescueAfter's default: a delivery in flight
// in a keysvc that died is delivered again within about 20 s.
const DefaultRescueAfter = 15 * time.Second

// ErrUnknownEndpoint: no endpoint has that name.
var ErrUnknownEndpoint = errors.New("no such inbox endpoint")

// ErrNotReplayable: the entry is neither failed nor forwarded.
var ErrNotReplayable = errors.New("only failed or forwarded entries can be replayed")

// ErrNotFound: the endpoint has no entry of that id.
var ErrNotFound = errors.New("no such inbox entry")

// Endpoint returns the configured endpoint called name.
func (in *Inbox) Endpoint(name string) (*Endpoint, bool) {
	e, ok := in.endpoints[name]
	return e, ok
}

// Open prepares the inbox on pool (creating its tables and River's when
// asked) and starts River's workers. Close stops them.
func Open(ctx context.Context, pool *pgxpool.Pool, endpoints []Endpoint, opts Options) (*Inbox, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	in := &Inbox{pool: pool, tables: pgsql.Inbox{Schema: opts.Schema}, endpoints: map[string]*Endpoint{},
		http: &http.Client{Timeout: opts.DeliveryTimeout}, logger: opts.Logger, metrics: newMetrics(), opts: opts,
		targets: map[string]*targetHealth{}}
	in.lease = newLease(in, opts.RescueAfter)
	in.life, in.endLife = context.WithCancel(context.Background())
	in.hard, in.stopHard = context.WithCancel(context.Background())
	queues := map[string]river.QueueConfig{}
	for i := range endpoints {
		e := &endpoints[i]
		in.endpoints[e.Name] = e
		queues[e.queue()] = river.QueueConfig{MaxWorkers: cmp.Or(e.Concurrency, DefaultConcurrency)}
		in.targets[e.Name] = newTargetHealth(e.Name, opts.Logger, opts.TargetSummaryEvery, in.metrics.targetFailing)
	}
	driver := riverpgxv5.New(pool)
	if opts.CreateSchema {
		if err := in.createSchema(ctx, driver); err != nil {
			return nil, err
		}
	}
	if err := in.check(ctx); err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &deliveryWorker{in: in})
	// River's own rescuer keeps its default (an hour): the lease rescues a
	// dead keysvc's deliveries much sooner, and never a live one's.
	client, err := river.NewClient(driver, &river.Config{
		ID:          in.lease.id,
		Schema:      opts.Schema,
		Queues:      queues,
		Workers:     workers,
		RetryPolicy: backoffPolicy{in: in},
		Logger:      opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("River client: %w", err)
	}
	in.river = client
	return in, nil
}

// withDefaults fills in o's zero fields, and checks the rescue-after
// and the schema.
func (o Options) withDefaults() (Options, error) {
	if o.DeliveryTimeout == 0 {
		o.DeliveryTimeout = 30 * time.Second
	}
	if o.Backoff == 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.RecoverAfter == 0 {
		o.RecoverAfter = 2 * time.Minute
	}
	if o.RescueAfter == 0 {
		o.RescueAfter = DefaultRescueAfter
	}
	if o.TargetSummaryEvery <= 0 {
		o.TargetSummaryEvery = DefaultTargetSummaryEvery
	}
	if o.RescueAfter < 5*time.Second {
		return o, fmt.Errorf("inbox rescue-after %s: at least 5s, so that a lease outlives a few missed renewals", o.RescueAfter)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Schema != "" {
		if t, err := pgsql.ParseTable(o.Schema); err != nil || t.Schema != "" {
			return o, fmt.Errorf("inbox schema %q: a lower-case identifier that is not a reserved word", o.Schema)
		}
	}
	return o, nil
}

// createSchema creates the inbox's tables and runs River's migrations
// (Options.CreateSchema).
func (in *Inbox) createSchema(ctx context.Context, driver *riverpgxv5.Driver) error {
	if err := execDDL(ctx, in.pool, in.tables.KeysvcDDL()); err != nil {
		return fmt.Errorf("create the inbox tables: %w", err)
	}
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: in.opts.Schema, Logger: in.opts.Logger})
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("River migrations: %w", err)
	}
	return nil
}

// check fails with a message naming --create-schema when a table is missing.
func (in *Inbox) check(ctx context.Context) error {
	var missing []string
	tables := []pgsql.Table{in.tables.Inbox(), in.tables.Deliveries(), in.tables.Workers(), in.tables.Jobs()}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.String()
	}
	if err := in.pool.QueryRow(ctx, pgsql.MissingTables(), names).Scan(&missing); err != nil {
		return fmt.Errorf("inspect the inbox tables: %w", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the inbox tables %v are missing: start keysvc once with --create-schema", missing)
	}
	return nil
}

// WorkerID is this keysvc's name in River's attempted_by and in its lease.
func (in *Inbox) WorkerID() string { return in.lease.id }

// Start takes the lease and starts delivering, the rescuer and the
// recoverer. River stops when ctx ends; Close stops everything.
func (in *Inbox) Start(ctx context.Context) error {
	if err := in.lease.renew(ctx); err != nil {
		return fmt.Errorf("take the inbox lease: %w", err)
	}
	go in.lease.heartbeat(in.life)
	if err := in.river.Start(ctx); err != nil {
		return fmt.Errorf("start River: %w", err)
	}
	go in.rescueLoop(in.life)
	go in.recoverLoop(in.life)
	return nil
}

// Close stops the workers, letting deliveries in flight finish and record
// their outcome until ctx ends; then it cancels them. After a clean stop it
// gives up the lease, so that nobody waits for it to lapse.
func (in *Inbox) Close(ctx context.Context) error {
	err := in.river.Stop(ctx)
	if err != nil {
		in.stopHard()
		hardCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = in.river.StopAndCancel(hardCtx)
	}
	in.endLife()
	if err == nil {
		resignCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		in.lease.resign(resignCtx)
	}
	return err
}

// Receipt is what POST /v1/inbox/{endpoint} answers.
type Receipt struct {
	Status  string `json:"status"` // received, ignored or duplicate
	InboxID int64  `json:"inbox_id,omitempty"`
	State   string `json:"state,omitempty"`
	Key     string `json:"key"`
	Account string `json:"account"`
}

// Receive saves a verified delivery and enqueues its forwarding in one
// transaction. A duplicate (same account and receipt key) changes nothing
// and reports the stored state.
func (in *Inbox) Receive(ctx context.Context, e *Endpoint, header http.Header, body []byte) (Receipt, error) {
	k, err := eventkey.DeriveFor(eventkey.Preset(e.Provider), header, body, "")
	if err != nil {
		return Receipt{}, err
	}
	r := Receipt{Key: k.Value, Account: e.Account}
	src := e.sources()
	if account, ok := src.AccountOf(header, body); ok {
		r.Account = account
	}
	eventType := src.TypeOf(header, body)
	// Lower-case names, as the n8n receiver keeps them: the compiled
	// decision reads a header type from them.
	kept := map[string]string{}
	for _, h := range e.receiptHeaders() {
		if v := header.Get(h); v != "" {
			kept[strings.ToLower(h)] = v
		}
	}
	headers, _ := json.Marshal(kept)

	tx, err := in.pool.Begin(ctx)
	if err != nil {
		return Receipt{}, fmt.Errorf("receive: %w", err)
	}
	defer tx.Rollback(ctx)
	var isNew bool
	err = tx.QueryRow(ctx, in.tables.Receive(), r.Account, r.Key, eventType, base64.StdEncoding.EncodeToString(body), string(headers)).
		Scan(&r.InboxID, &r.State, &isNew)
	if errors.Is(err, pgx.ErrNoRows) {
		// Inserted by a concurrent delivery not yet visible: a duplicate.
		return Receipt{Status: "duplicate", Key: r.Key, Account: r.Account}, nil
	}
	if err != nil {
		return Receipt{}, fmt.Errorf("receive: %w", err)
	}
	if !isNew {
		r.Status = "duplicate"
		return r, nil
	}
	if err := tx.QueryRow(ctx, in.tables.AssignEndpoint(), r.InboxID, e.Name, e.allows(eventType)).Scan(&r.State); err != nil {
		return Receipt{}, fmt.Errorf("receive: %w", err)
	}
	r.Status = r.State
	if r.State == pgsql.StateReceived {
		if _, err := in.river.InsertTx(ctx, tx, deliveryArgs{InboxID: r.InboxID, Endpoint: e.Name},
			e.deliveryOpts()); err != nil {
			return Receipt{}, fmt.Errorf("enqueue the delivery: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return Receipt{}, fmt.Errorf("receive: commit: %w", err)
	}
	return r, nil
}

// execDDL runs the schema's statements, again when PostgreSQL broke a
// deadlock by cancelling them: a replica that starts while another one
// works takes the tables' locks in another order than that one's queries
// (seen with two keysvcs on one database, under load).
func execDDL(ctx context.Context, pool *pgxpool.Pool, ddl string) error {
	var err error
	for range 5 {
		var pgErr *pgconn.PgError
		if _, err = pool.Exec(ctx, ddl); !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
			return err
		}
	}
	return err
}
