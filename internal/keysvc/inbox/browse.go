package inbox

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
)

// Query selects keysvc's entries; a zero field selects any.
type Query struct {
	Endpoint  string
	States    []string
	EventType string
	// Since and Until bound received_at: at or after Since, before Until.
	Since, Until time.Time
	// Before lists entries with a smaller id (the next page of a list,
	// newest first); Limit bounds the page, 1 to MaxPage (default 50).
	Before int64
	Limit  int
}

// MaxPage is the largest page List returns.
const MaxPage = 200

// filterArgs are Query's values as entryFilter's $1 to $5 (nil for any).
func (q Query) filterArgs(endpoints []string, states []string) []any {
	args := []any{nilIfEmpty(endpoints), nilIfEmpty(states), nil, nil, nil}
	if q.EventType != "" {
		args[2] = q.EventType
	}
	if !q.Since.IsZero() {
		args[3] = q.Since
	}
	if !q.Until.IsZero() {
		args[4] = q.Until
	}
	return args
}

func nilIfEmpty(s []string) any {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Listed is one entry of a list: its receipt, its latest attempt and its
// next one.
type Listed struct {
	Head
	// Attempts counts the attempts to forward it (operators' actions
	// aside); Last is the latest of them, nil before the first.
	Attempts int       `json:"attempts"`
	Last     *Delivery `json:"last_attempt,omitempty"`
	// NextAttemptAt is when its queued delivery is due (nil when none is
	// queued); InFlight says a delivery is running now.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	InFlight      bool       `json:"in_flight"`
}

// Page is a list of entries, newest first; NextBefore, when not 0, is the
// Query.Before of the next page.
type Page struct {
	Entries    []Listed `json:"entries"`
	NextBefore int64    `json:"next_before,omitempty"`
}

// List returns the entries q selects.
func (in *Inbox) List(ctx context.Context, q Query) (Page, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, MaxPage)
	var endpoints []string
	if q.Endpoint != "" {
		endpoints = []string{q.Endpoint}
	}
	args := q.filterArgs(endpoints, q.States)
	var before any
	if q.Before > 0 {
		before = q.Before
	}
	args = append(args, before, limit+1, deliveryKind)
	rows, err := in.pool.Query(ctx, in.tables.ListEntries(), args...)
	if err != nil {
		return Page{}, fmt.Errorf("list inbox entries: %w", err)
	}
	defer rows.Close()
	p := Page{Entries: []Listed{}}
	for rows.Next() {
		var l Listed
		var d Delivery
		var at *time.Time
		if err := rows.Scan(&l.ID, &l.Endpoint, &l.Account, &l.Key, &l.EventType, &l.State, &l.Outcome, &l.LastError,
			&l.ReceivedAt, &l.FinishedAt, &l.Attempts, &d.Status, &d.Error, &d.Kind, &at, &l.NextAttemptAt, &l.InFlight); err != nil {
			return Page{}, err
		}
		if at != nil {
			d.At, d.Attempt = *at, l.Attempts
			l.Last = &d
		}
		p.Entries = append(p.Entries, l)
	}
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("list inbox entries: %w", err)
	}
	if len(p.Entries) > limit {
		p.Entries = p.Entries[:limit]
		p.NextBefore = p.Entries[limit-1].ID
	}
	return p, nil
}

// StateCount is how many entries are in one state, and since when the
// oldest of them was received.
type StateCount struct {
	State            string    `json:"state"`
	Count            int64     `json:"count"`
	OldestReceivedAt time.Time `json:"oldest_received_at"`
	OldestAgeSeconds float64   `json:"oldest_age_seconds"`
}

// EndpointSummary is one endpoint's entries by state and its delivery
// queue. TargetHost is the target's host only: a target URL's path can be
// a credential (a Make or Zapier hook).
type EndpointSummary struct {
	Name        string         `json:"name"`
	Configured  bool           `json:"configured"`
	TargetHost  string         `json:"target_host,omitempty"`
	Concurrency int            `json:"concurrency,omitempty"`
	MaxAttempts int            `json:"max_attempts,omitempty"`
	States      []StateCount   `json:"states"`
	Queue       map[string]int `json:"queue"` // delivery jobs by River state
}

// Summary is the inbox by endpoint and state: every configured endpoint,
// and any other that entries name.
type Summary struct {
	GeneratedAt time.Time         `json:"generated_at"`
	Endpoints   []EndpointSummary `json:"endpoints"`
}

// Summary counts the entries of every endpoint by state.
func (in *Inbox) Summary(ctx context.Context) (Summary, error) {
	byName := map[string]*EndpointSummary{}
	get := func(name string) *EndpointSummary {
		s, ok := byName[name]
		if !ok {
			s = in.newEndpointSummary(name)
			byName[name] = s
		}
		return s
	}
	for name := range in.endpoints {
		get(name)
	}
	if err := in.summarizeEntries(ctx, get); err != nil {
		return Summary{}, err
	}
	if err := in.summarizeJobs(ctx, get); err != nil {
		return Summary{}, err
	}
	sum := Summary{GeneratedAt: time.Now().UTC(), Endpoints: []EndpointSummary{}}
	for _, s := range byName {
		sum.Endpoints = append(sum.Endpoints, *s)
	}
	sort.Slice(sum.Endpoints, func(i, j int) bool { return sum.Endpoints[i].Name < sum.Endpoints[j].Name })
	return sum, nil
}

// newEndpointSummary is name's summary before anything is counted: with
// its configuration when name is a configured endpoint.
func (in *Inbox) newEndpointSummary(name string) *EndpointSummary {
	s := &EndpointSummary{Name: name, States: []StateCount{}, Queue: map[string]int{}}
	if e, ok := in.endpoints[name]; ok {
		s.Configured, s.Concurrency, s.MaxAttempts = true, e.Concurrency, e.MaxAttempts
		if u, err := url.Parse(e.Target); err == nil {
			s.TargetHost = u.Host
		}
	}
	return s
}

// summarizeEntries adds the entries' counts by state to the summary get
// returns for their endpoint.
func (in *Inbox) summarizeEntries(ctx context.Context, get func(name string) *EndpointSummary) error {
	rows, err := in.pool.Query(ctx, in.tables.SummarizeEntries())
	if err != nil {
		return fmt.Errorf("inbox summary: %w", err)
	}
	for rows.Next() {
		var name string
		var c StateCount
		if err := rows.Scan(&name, &c.State, &c.Count, &c.OldestReceivedAt, &c.OldestAgeSeconds); err != nil {
			rows.Close()
			return err
		}
		s := get(name)
		s.States = append(s.States, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("inbox summary: %w", err)
	}
	return nil
}

// summarizeJobs adds the configured endpoints' delivery jobs by River
// state to the summary get returns for each.
func (in *Inbox) summarizeJobs(ctx context.Context, get func(name string) *EndpointSummary) error {
	queues := map[string]string{}
	for name, e := range in.endpoints {
		queues[e.queue()] = name
	}
	rows, err := in.pool.Query(ctx, in.tables.SummarizeJobs(), deliveryKind)
	if err != nil {
		return fmt.Errorf("inbox summary: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var queue, state string
		var n int
		if err := rows.Scan(&queue, &state, &n); err != nil {
			return err
		}
		if name, ok := queues[queue]; ok {
			get(name).Queue[state] = n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("inbox summary: %w", err)
	}
	return nil
}

// States are the states of an inbox entry, as a filter accepts them.
var States = []string{pgsql.StateReceived, pgsql.StateProcessing, pgsql.StateProcessed, pgsql.StateIgnored,
	pgsql.StateRejected, pgsql.StateDeferred, pgsql.StateFailed, pgsql.StateForwarded}
