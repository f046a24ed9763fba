package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Head is what an entry's receipt says, in an Entry and in a list.
type Head struct {
	ID         int64      `json:"id"`
	Endpoint   string     `json:"endpoint"`
	Account    string     `json:"account"`
	Key        string     `json:"key"`
	EventType  string     `json:"event_type"`
	State      string     `json:"state"`
	Outcome    string     `json:"outcome,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	ReceivedAt time.Time  `json:"received_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// Entry is GET /v1/inbox/{endpoint}/{id}: the receipt, its kept headers and
// its history.
type Entry struct {
	Head
	// Headers are the request headers kept with the receipt (the content
	// type, the provider's signature and id headers), sent on with it.
	Headers    map[string]string `json:"headers"`
	Deliveries []Delivery        `json:"deliveries"`
}

// Delivery is one attempt to forward an entry.
type Delivery struct {
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	Status     *int      `json:"status"` // null when no answer came
	Error      string    `json:"error,omitempty"`
	DurationMS int       `json:"duration_ms"`
	// Kind is what came of it (pgsql.Delivery*: answered, unreached,
	// no_answer, rescued) or what an operator asked (replay, retry_now,
	// with the token's name in Actor); empty for rows older than kinds.
	Kind  string `json:"kind,omitempty"`
	Actor string `json:"actor,omitempty"`
}

// Entry returns entry id of endpoint ("" for any endpoint), or ErrNotFound.
func (in *Inbox) Entry(ctx context.Context, endpoint string, id int64) (Entry, error) {
	e := Entry{Deliveries: []Delivery{}}
	err := in.pool.QueryRow(ctx, in.tables.Entry(), id, endpoint).
		Scan(&e.ID, &e.Endpoint, &e.Account, &e.Key, &e.EventType, &e.State, &e.Outcome, &e.LastError, &e.ReceivedAt, &e.FinishedAt, &e.Headers)
	if errors.Is(err, pgx.ErrNoRows) {
		return Entry{}, ErrNotFound
	}
	if err != nil {
		return Entry{}, fmt.Errorf("inbox entry %d: %w", id, err)
	}
	rows, err := in.pool.Query(ctx, in.tables.DeliveryAttempts(), id)
	if err != nil {
		return Entry{}, fmt.Errorf("inbox entry %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var d Delivery
		if err := rows.Scan(&d.Attempt, &d.At, &d.Status, &d.Error, &d.DurationMS, &d.Kind, &d.Actor); err != nil {
			return Entry{}, err
		}
		e.Deliveries = append(e.Deliveries, d)
	}
	return e, rows.Err()
}

// Body returns entry id's body as received, and its Content-Type (empty
// when none was kept), or ErrNotFound.
func (in *Inbox) Body(ctx context.Context, id int64) (body []byte, contentType string, err error) {
	err = in.pool.QueryRow(ctx, in.tables.EntryBody(), id).Scan(&body, &contentType)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", ErrNotFound
	}
	if err != nil {
		return nil, "", fmt.Errorf("inbox entry %d: %w", id, err)
	}
	return body, contentType, nil
}
