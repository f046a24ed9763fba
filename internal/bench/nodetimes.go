package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/lab"
	"github.com/idemhook/idemhook/internal/n8napi"
)

// NodeTime is the time n8n recorded for one node of a series' workflow:
// the median over Runs deliveries. Node "" is the sum of all the nodes of
// one execution (its median, not the sum of the medians).
type NodeTime struct {
	Series, Node string
	P50          time.Duration
	Runs         int
}

// inboxNodeTimes measures where a delivery's time goes inside n8n. It makes the
// workflow keep its successful executions' data (and publishes it again),
// sends one event until n8n keeps one, then n events to url from one
// sender, waits until n8n lists their executions, and reads the time n8n recorded
// for each node of each of those executions, in the workflow's node order.
// Saving the data costs time of its own: the other runs do not save it.
func inboxNodeTimes(ctx context.Context, l *lab.Lab, series, id, url, secret, prefix string, n int) ([]NodeTime, error) {
	w, err := l.API.Workflow(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("node times of %s: %w", series, err)
	}
	settings := maps.Clone(w.Settings)
	if settings == nil {
		settings = map[string]any{}
	}
	settings["saveDataSuccessExecution"] = "all"
	if _, err := l.API.UpdateWorkflow(ctx, id, n8napi.Workflow{Name: w.Name, Nodes: w.Nodes, Connections: w.Connections, Settings: settings}); err != nil {
		return nil, fmt.Errorf("node times of %s: keep its executions' data: %w", series, err)
	}
	if err := l.API.Publish(ctx, id); err != nil {
		return nil, fmt.Errorf("node times of %s: publish: %w", series, err)
	}
	// A delivery may still run on the version published before (which
	// keeps nothing): one is sent first, until n8n keeps one.
	for try := 1; ; try++ {
		since := time.Now()
		if _, err := sendEvents(ctx, l, url, secret, fmt.Sprintf("w%d-%s", try, prefix), 1, 1); err != nil {
			return nil, err
		}
		if err := awaitKept(ctx, l.API, id, since, 1, 10*time.Second); err == nil {
			break
		} else if try == 3 {
			return nil, fmt.Errorf("node times of %s: %w", series, err)
		}
	}
	since := time.Now()
	if _, err := sendEvents(ctx, l, url, secret, prefix, 1, n); err != nil {
		return nil, err
	}
	if err := awaitKept(ctx, l.API, id, since, n, 30*time.Second); err != nil {
		return nil, fmt.Errorf("node times of %s: %w", series, err)
	}
	took, totals, err := recordedTimes(ctx, l.API, id, since)
	if err != nil {
		return nil, fmt.Errorf("node times of %s: %w", series, err)
	}
	var out []NodeTime
	for _, node := range w.Nodes {
		name, _ := node["name"].(string)
		if d := took[name]; len(d) > 0 {
			out = append(out, NodeTime{Series: series, Node: name, P50: percentile(d, 50), Runs: len(d)})
		}
	}
	return append(out, NodeTime{Series: series, P50: percentile(totals, 50), Runs: len(totals)}), nil
}

// awaitKept waits until n8n lists n successful executions of the workflow
// started after since: it saves an execution's data after the answer, so
// the last one may not be listed yet when the sender has its answer.
func awaitKept(ctx context.Context, api *n8napi.Client, id string, since time.Time, n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		execs, err := api.Executions(ctx, id)
		if err != nil {
			return err
		}
		kept := 0
		for _, e := range execs {
			if !e.StartedAt.Before(since) && e.Status == "success" {
				kept++
			}
		}
		if kept >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("n8n kept %d successful executions of %d deliveries within %s", kept, n, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// nodeTimesMarkdown renders the node times, one row per node.
func nodeTimesMarkdown(times []NodeTime) string {
	if len(times) == 0 {
		return ""
	}
	var b strings.Builder
	runs := slices.MaxFunc(times, func(a, b NodeTime) int { return a.Runs - b.Runs }).Runs
	fmt.Fprintf(&b, "\n**Where a delivery's time goes in n8n: the time n8n recorded for each node, p50 of %d deliveries from one sender (these runs keep their execution data, the runs above do not)**\n\n", runs)
	b.WriteString("| series | node | p50 |\n| --- | --- | ---: |\n")
	for _, t := range times {
		node := t.Node
		if node == "" {
			node = "**all its nodes**"
		}
		fmt.Fprintf(&b, "| %s | %s | %.1f ms |\n", t.Series, node, float64(t.P50)/float64(time.Millisecond))
	}
	return b.String()
}
