package pgsql

import (
	"fmt"
	"strings"
)

// The statements of `idemhook rules test` (package rules/samples), which
// runs each sample event through the compiled function inside a
// transaction it rolls back.

// Qualify places a table that names no schema in the inbox's schema, as
// the compiled function does with the rules' tables.
func (in Inbox) Qualify(t Table) Table {
	if t.Schema == "" {
		return in.table(t.Name)
	}
	return t
}

// SampleReceipt saves a sample's receipt: $1 account, $2 event_id, $3
// event_type, $4 the body (bytea), $5 the headers (JSON object), $6 how
// long ago it was received (an interval); it returns the row's id.
func (in Inbox) SampleReceipt() string {
	return fmt.Sprintf(`INSERT INTO %s (account, event_id, event_type, body, headers, received_at)
VALUES ($1, $2, $3, $4, $5::jsonb, now() - $6::interval) RETURNING id`, in.Inbox())
}

// SampleEffect records effect $1 as made before the sample.
func (in Inbox) SampleEffect() string {
	return fmt.Sprintf(`INSERT INTO %s (effect_key) VALUES ($1) ON CONFLICT DO NOTHING`, in.Effects())
}

// SampleOutcome reads what the decision left on inbox row $1: state,
// outcome, last_error, the effect keys it recorded (space-separated) and
// the operation keys of its outbox tasks, in order.
func (in Inbox) SampleOutcome() string {
	return fmt.Sprintf(`SELECT state, coalesce(outcome, ''), coalesce(last_error, ''),
  coalesce((SELECT string_agg(effect_key, ' ' ORDER BY effect_key) FROM %[2]s WHERE inbox_id = $1), ''),
  coalesce((SELECT array_agg(operation_key ORDER BY id) FROM %[3]s WHERE inbox_id = $1), '{}')
FROM %[1]s WHERE id = $1`, in.Inbox(), in.Effects(), in.Outbox())
}

// InsertRow inserts one row of t given as a JSON object $1 of cols, each
// converted by the column's own type (jsonb_populate_record); the other
// columns take their defaults.
func InsertRow(t Table, cols []string) (string, error) {
	if err := checkColumns(cols); err != nil {
		return "", err
	}
	list := strings.Join(cols, ", ")
	return fmt.Sprintf(`INSERT INTO %s (%s) SELECT %s FROM jsonb_populate_record(NULL::%s, $1::jsonb)`, t, list, list, t), nil
}

// CountRows counts the rows of t whose cols equal those of the JSON
// object $1, each compared in the column's own type.
func CountRows(t Table, cols []string) (string, error) {
	if err := checkColumns(cols); err != nil {
		return "", err
	}
	list := strings.Join(cols, ", ")
	return fmt.Sprintf(`SELECT count(*) FROM %s WHERE ROW(%s) IS NOT DISTINCT FROM (SELECT ROW(%s) FROM jsonb_populate_record(NULL::%s, $1::jsonb))`, t, list, list, t), nil
}

func checkColumns(cols []string) error {
	if len(cols) == 0 {
		return fmt.Errorf("no column")
	}
	for _, c := range cols {
		if err := ParseColumn(c); err != nil {
			return err
		}
	}
	return nil
}
