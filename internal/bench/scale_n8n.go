package bench

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/tidwall/gjson"
)

// deploy imports the PostgreSQL credential and deploys the workflow
// without a guard, the community node's on the scale table, and Remove
// Duplicates' with each history, which it fills.
func (s *scaleRun) deploy(ctx context.Context) error {
	if err := importCredentials(ctx, s.st, s.dir); err != nil {
		return err
	}
	business := pgsql.MustParseTable("bench_business")
	if _, err := s.st.Business.Exec(ctx, pgsql.BusinessDDL(business)); err != nil {
		return err
	}
	ws := []workflow{
		{name: scaleUnguarded, file: workflowWithout("idemhookScaleUngd", "scale-unguarded", &business)},
		{name: scaleNode, opts: benchOptions("scale-node", s.table.String(), generator.Options{Hashing: generator.HashingNode})},
	}
	for _, h := range s.opts.Histories {
		ws = append(ws, workflow{name: fmt.Sprintf(scaleDedupe, h),
			file: RemoveDuplicatesWorkflow(fmt.Sprintf("idemhookScaleRd%d", h), fmt.Sprintf("scale-rd-%d", h), business, benchCredential, h)})
	}
	if err := deployWorkflows(ctx, s.st, s.dir, ws, s.step); err != nil {
		return err
	}
	s.unguarded, s.node, s.dedupe = ws[0], ws[1], ws[2:]
	for i, h := range s.opts.Histories {
		s.step("scale: Remove Duplicates' history of %d filled with %d keys", h, s.prefilled(h))
		if err := s.fillHistory(ctx, s.dedupe[i], s.prefilled(h)); err != nil {
			return err
		}
	}
	return nil
}

// prefilled is how many keys Remove Duplicates' history of h starts the
// run with: as many as leave room for the run's deliveries. A full history
// fails every execution in n8n 2.41 ("The number of items to be processed
// exceeds the maximum history size": it checks the room before it drops
// the oldest keys), so a history works only while it is not full.
func (s *scaleRun) prefilled(h int) int {
	return max(0, h-dedupeWarmup-s.opts.Deliveries)
}

// dedupeWarmup is the untimed rounds before the timed ones in n8nPoints.
const dedupeWarmup = 10

// processedDataValue is how n8n 2.41 keeps a Remove Duplicates history:
// one text row of its processed_data table per node (the node's default
// scope; context "n:" and the node's id), holding the MD5 (base64) of each
// key seen, oldest first. Each execution reads the row twice and writes it
// back whole.
type processedDataValue struct {
	Mode string   `json:"mode"`
	Data []string `json:"data"`
}

// fillHistory writes a history of n keys for w's Remove Duplicates into
// n8n's database, as n8n would after n executions.
func (s *scaleRun) fillHistory(ctx context.Context, w workflow, n int) error {
	v := processedDataValue{Mode: "entries", Data: make([]string, n)}
	for i := range v.Data {
		h := md5.Sum([]byte("evt_history_" + strconv.Itoa(i)))
		v.Data[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = s.st.N8NDB.Exec(ctx, `INSERT INTO processed_data ("workflowId", context, value) VALUES ($1, $2, $3)
ON CONFLICT ("workflowId", context) DO UPDATE SET value = EXCLUDED.value`, w.id(), dedupeContext(w), string(b))
	if err != nil {
		return fmt.Errorf("fill Remove Duplicates' history in n8n's processed_data (n8n %s's layout): %w", "2.41", err)
	}
	return nil
}

// dedupeContext is the processed_data context of w's Remove Duplicates
// node: "n:" and its id.
func dedupeContext(w workflow) string {
	return "n:" + gjson.GetBytes(w.file, `nodes.#(type=="n8n-nodes-base.removeDuplicates").id`).String()
}

// history reads the length of w's Remove Duplicates history back.
func (s *scaleRun) history(ctx context.Context, w workflow) (int, error) {
	var raw string
	if err := s.st.N8NDB.QueryRow(ctx, `SELECT value FROM processed_data WHERE "workflowId" = $1 AND context = $2`, w.id(), dedupeContext(w)).Scan(&raw); err != nil {
		return 0, err
	}
	var v processedDataValue
	err := json.Unmarshal([]byte(raw), &v)
	return len(v.Data), err
}

// n8nPoints times rounds of new events to the workflow without a guard and
// the node's (and Remove Duplicates', with dedupe), and checks that each
// Remove Duplicates kept its full history: the time it took is the time
// of that history.
func (s *scaleRun) n8nPoints(ctx context.Context, dedupe bool) ([]ScalePoint, error) {
	ws := []workflow{s.unguarded, s.node}
	if dedupe {
		ws = append(ws, s.dedupe...)
	}
	var keys int64
	if err := s.st.Business.QueryRow(ctx, "SELECT count(*) FROM "+s.table.String()).Scan(&keys); err != nil {
		return nil, err
	}
	s.step("scale: %d rounds of one new event to each of %d n8n workflows, %d keys in the table", s.opts.Deliveries, len(ws), keys)
	lat, err := timeDeliveries(ws, dedupeWarmup, s.opts.Deliveries, func(int, int) []byte { return randomEvent(nil) })
	if err != nil {
		return nil, err
	}
	base, _ := percentiles(lat[0])
	out := make([]ScalePoint, len(ws))
	for i, w := range ws {
		p50, p99 := percentiles(lat[i])
		out[i] = ScalePoint{Series: w.name, Keys: keys, P50: p50, P99: p99, VsUnguarded: float64(p50) / float64(base)}
		if i >= 2 {
			h := s.opts.Histories[i-2]
			want := s.prefilled(h) + dedupeWarmup + s.opts.Deliveries
			if got, err := s.history(ctx, w); err != nil || got != min(want, h) {
				return nil, fmt.Errorf("%s: its history holds %d keys after the rounds (%v), want %d: n8n did not add to the one the bench wrote", w.name, got, err, min(want, h))
			}
			out[i].Keys = int64(h)
		}
	}
	return out, nil
}
