package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// What an operator may ask of entries.
const (
	// ActionReplay sends failed or forwarded entries again.
	ActionReplay = "replay"
	// ActionRetryNow makes the next attempt of received entries that wait
	// for their backoff (or have no queued delivery) due now; an entry
	// whose delivery is running is left alone.
	ActionRetryNow = "retry_now"
)

// actionStates are the states each action applies to.
var actionStates = map[string][]string{
	ActionReplay:   {pgsql.StateFailed, pgsql.StateForwarded},
	ActionRetryNow: {pgsql.StateReceived},
}

// MaxSelection bounds the entries one action changes.
const MaxSelection = 1000

// Errors of Act.
var (
	// ErrSelectionTooLarge: more than MaxSelection entries match; narrow
	// the filter, or act in turns (the entries acted on leave the state).
	ErrSelectionTooLarge = fmt.Errorf("more than %d entries match: narrow the selection, or act on %d at a time", MaxSelection, MaxSelection)
	// ErrSelectionChanged: the number of entries that match is not the
	// one the caller confirmed (they changed meanwhile); nothing was done.
	ErrSelectionChanged = errors.New("the selection changed since it was counted: nothing was done; count it again")
	// ErrUnknownAction: Action.Kind is neither ActionReplay nor
	// ActionRetryNow.
	ErrUnknownAction = errors.New("unknown action: use replay or retry_now")
)

// Action is an operator's request to replay or retry entries: those among
// IDs, or, when IDs is nil, every entry Query matches (its Before and Limit
// aside), that are in a state the action applies to and belong to a
// configured endpoint.
type Action struct {
	Kind  string
	IDs   []int64
	Query Query
	// Expect, when set, is the number of entries the caller confirmed
	// (from a DryRun): if another number matches, nothing is done and Act
	// fails with ErrSelectionChanged.
	Expect *int
	// DryRun counts the entries and changes nothing.
	DryRun bool
	// Actor names who asked (the token's name), kept in each entry's
	// history.
	Actor string
}

// ActionResult is what Act did: Matched entries selected, Done changed
// (with DryRun, none), IDs the entries matched, lowest first.
type ActionResult struct {
	Action  string  `json:"action"`
	DryRun  bool    `json:"dry_run"`
	Matched int     `json:"matched"`
	Done    int     `json:"done"`
	IDs     []int64 `json:"ids"`
}

// Check says whether an action may go on with matched entries: not more
// than MaxSelection (ErrSelectionTooLarge), and the number the caller
// confirmed, if any (ErrSelectionChanged).
func (a Action) Check(matched int) error {
	if matched > MaxSelection {
		return ErrSelectionTooLarge
	}
	if a.Expect != nil && *a.Expect != matched {
		return ErrSelectionChanged
	}
	return nil
}

// selected is an entry an action locked, with its active job (0 if none).
type selected struct {
	id       int64
	endpoint string
	job      int64
	jobState string
}

// Act performs a: in one transaction that locks the entries it counts, so
// that what is confirmed is what changes. Replayed entries are received
// again with a new delivery queued, retried ones have their waiting job
// made available (or one queued), and each gets a history row naming the
// actor. It fails with ErrSelectionTooLarge, ErrSelectionChanged or
// ErrUnknownAction, or with the database's error.
func (in *Inbox) Act(ctx context.Context, a Action) (ActionResult, error) {
	states, ok := actionStates[a.Kind]
	if !ok {
		return ActionResult{}, ErrUnknownAction
	}
	if len(a.IDs) > MaxSelection {
		return ActionResult{}, ErrSelectionTooLarge
	}
	if len(a.Query.States) > 0 {
		states = slices.DeleteFunc(slices.Clone(states), func(s string) bool { return !slices.Contains(a.Query.States, s) })
		if len(states) == 0 {
			return ActionResult{Action: a.Kind, DryRun: a.DryRun, IDs: []int64{}}, nil
		}
	}
	res := ActionResult{Action: a.Kind, DryRun: a.DryRun, IDs: []int64{}}
	tx, err := in.pool.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("%s: %w", a.Kind, err)
	}
	defer tx.Rollback(ctx)
	sel, err := in.selectForAction(ctx, tx, a, states)
	if err != nil {
		return res, err
	}
	if a.Kind == ActionRetryNow {
		sel = slices.DeleteFunc(sel, func(s selected) bool { return s.jobState == "running" })
	}
	res.Matched = len(sel)
	for _, s := range sel {
		res.IDs = append(res.IDs, s.id)
	}
	if err := a.Check(res.Matched); err != nil {
		return res, err
	}
	if a.DryRun || len(sel) == 0 {
		return res, nil
	}
	if err := in.commitAction(ctx, tx, a, res.IDs, sel); err != nil {
		return res, err
	}
	res.Done = res.Matched
	for _, s := range sel {
		in.metrics.actions.WithLabelValues(s.endpoint, a.Kind).Inc()
	}
	return res, nil
}

// selectForAction locks, in tx, the entries a applies to that are in one
// of states and belong to a configured endpoint the query selects: at
// most MaxSelection, else ErrSelectionTooLarge (there may be more than
// were read).
func (in *Inbox) selectForAction(ctx context.Context, tx pgx.Tx, a Action, states []string) ([]selected, error) {
	endpoints := []string{}
	for name := range in.endpoints {
		if a.Query.Endpoint == "" || a.Query.Endpoint == name {
			endpoints = append(endpoints, name)
		}
	}
	sort.Strings(endpoints)
	args := a.Query.filterArgs(endpoints, states)
	var ids any
	if a.IDs != nil {
		ids = a.IDs
	}
	args = append(args, ids, MaxSelection+1, deliveryKind)
	rows, err := tx.Query(ctx, in.tables.SelectEntries(), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Kind, err)
	}
	var sel []selected
	for rows.Next() {
		var s selected
		var job *int64
		if err := rows.Scan(&s.id, &s.endpoint, &job, &s.jobState); err != nil {
			rows.Close()
			return nil, err
		}
		if job != nil {
			s.job = *job
		}
		sel = append(sel, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", a.Kind, err)
	}
	if len(sel) > MaxSelection {
		return nil, ErrSelectionTooLarge // before any is left out: there may be more
	}
	return sel, nil
}

// commitAction replays or retries the selected entries, records a in
// each one's history, and commits tx.
func (in *Inbox) commitAction(ctx context.Context, tx pgx.Tx, a Action, ids []int64, sel []selected) error {
	var err error
	switch a.Kind {
	case ActionReplay:
		err = in.replay(ctx, tx, ids)
	case ActionRetryNow:
		err = in.retryNow(ctx, tx, sel)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", a.Kind, err)
	}
	if _, err := tx.Exec(ctx, in.tables.RecordAction(), ids, a.Kind, a.Actor); err != nil {
		return fmt.Errorf("%s: %w", a.Kind, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%s: commit: %w", a.Kind, err)
	}
	return nil
}

// replay puts ids back to received and queues a delivery of each.
func (in *Inbox) replay(ctx context.Context, tx pgx.Tx, ids []int64) error {
	rows, err := tx.Query(ctx, in.tables.ReplayEntries(), ids)
	if err != nil {
		return err
	}
	var params []river.InsertManyParams
	for rows.Next() {
		var a deliveryArgs
		if err := rows.Scan(&a.InboxID, &a.Endpoint); err != nil {
			rows.Close()
			return err
		}
		params = append(params, river.InsertManyParams{Args: a, InsertOpts: in.endpoints[a.Endpoint].deliveryOpts()})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	_, err = in.river.InsertManyTx(ctx, tx, params)
	return err
}

// retryNow makes each selected entry's waiting job available now, or
// queues one for an entry that has none (its delivery was lost).
func (in *Inbox) retryNow(ctx context.Context, tx pgx.Tx, sel []selected) error {
	var params []river.InsertManyParams
	for _, s := range sel {
		if s.job != 0 {
			if _, err := in.river.JobRetryTx(ctx, tx, s.job); err != nil {
				return fmt.Errorf("retry job %d: %w", s.job, err)
			}
			continue
		}
		params = append(params, river.InsertManyParams{Args: deliveryArgs{InboxID: s.id, Endpoint: s.endpoint},
			InsertOpts: in.endpoints[s.endpoint].deliveryOpts()})
	}
	if len(params) == 0 {
		return nil
	}
	_, err := in.river.InsertManyTx(ctx, tx, params)
	return err
}

// Replay sends entry id of e again when it is failed or forwarded:
// ErrNotFound, or ErrNotReplayable with its state.
func (in *Inbox) Replay(ctx context.Context, e *Endpoint, id int64, actor string) error {
	res, err := in.Act(ctx, Action{Kind: ActionReplay, IDs: []int64{id}, Query: Query{Endpoint: e.Name}, Actor: actor})
	if err != nil {
		return err
	}
	if res.Done == 1 {
		return nil
	}
	if _, err := in.Entry(ctx, e.Name, id); err != nil {
		return err
	}
	return ErrNotReplayable
}
