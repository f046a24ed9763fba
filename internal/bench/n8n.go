package bench

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/tidwall/gjson"
)

const benchCredential = "Postgres (idemhook bench)"

// The community node's series: the Idempotency Guard of
// n8n-nodes-idemhook-postgres on PostgreSQL, and of n8n-nodes-idemhook on
// keysvc (keysvc as cmd/keysvc runs it, on loopback).
const (
	CommunityNodeSeries       = "community node"
	CommunityNodeKeysvcSeries = "community node on keysvc"
)

// The credentials of the series that call keysvc.
const (
	benchKeysvcBearer = "keysvc token (idemhook bench)"
	benchKeysvcNode   = "idemhook keysvc (idemhook bench)"
)

// pause separates two deliveries to n8n.
const pause = 250 * time.Millisecond

// workflowWithout is the user's own workflow without a guard: the same
// business INSERT as the generated example step, or none at all (bare).
func workflowWithout(id, path string, business *pgsql.Table) []byte {
	nodes := []map[string]any{{
		"parameters": map[string]any{"httpMethod": "POST", "path": path, "responseMode": "responseNode", "options": map[string]any{}},
		"id":         uuidOf(path + "/webhook"), "name": "Webhook",
		"type": "n8n-nodes-base.webhook", "typeVersion": generator.TypeVersions["n8n-nodes-base.webhook"], "position": []int{0, 300},
		"webhookId": uuidOf(path + "/webhookId"),
	}}
	connections := map[string]any{}
	last := "Webhook"
	if business != nil {
		nodes = append(nodes, map[string]any{
			"parameters": map[string]any{"operation": "executeQuery",
				"query":   fmt.Sprintf("INSERT INTO %s (event_key, event_type) VALUES ($1, NULLIF($2, ''))", business),
				"options": map[string]any{"queryReplacement": "={{ [ 'evt:' + $json.body.id, $json.body.type ] }}"}},
			"id": uuidOf(path + "/business"), "name": "Business Step", "type": "n8n-nodes-base.postgres",
			"typeVersion": generator.TypeVersions["n8n-nodes-base.postgres"], "position": []int{220, 300},
			"credentials": map[string]any{"postgres": map[string]any{"id": nil, "name": benchCredential}},
		})
		connections["Webhook"] = map[string]any{"main": [][]map[string]any{{{"node": "Business Step", "type": "main", "index": 0}}}}
		last = "Business Step"
	}
	nodes = append(nodes, map[string]any{
		"parameters": map[string]any{"respondWith": "json", "responseBody": `{"status":"processed"}`, "options": map[string]any{}},
		"id":         uuidOf(path + "/respond"), "name": "Respond", "type": "n8n-nodes-base.respondToWebhook",
		"typeVersion": generator.TypeVersions["n8n-nodes-base.respondToWebhook"], "position": []int{440, 300},
	})
	connections[last] = map[string]any{"main": [][]map[string]any{{{"node": "Respond", "type": "main", "index": 0}}}}
	b, _ := json.Marshal(map[string]any{"id": id, "name": "bench " + path, "nodes": nodes, "connections": connections,
		"active": false, "settings": map[string]any{"executionOrder": "v1"}, "pinData": map[string]any{}})
	return b
}

// n8nModes deploys the user's workflow without a guard and with each guard,
// and times sequential deliveries of new events to each.
func n8nModes(ctx context.Context, st *sandbox.Stack, opts Options, withNode bool, step func(string, ...any)) ([]Result, error) {
	dir, err := os.MkdirTemp("", "idemhook-bench-n8n-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// keysvc for the keysvc mode and the node on keysvc, on the same
	// database, in this process: the service cmd/keysvc runs, with a token.
	token := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	ks, err := keysvc.StartService(ctx, keysvc.ServiceConfig{
		DatabaseURL: st.BusinessDSN, PG: keysvc.PGOptions{Table: "bench_keysvc_events", CreateSchema: true},
		Handler: keysvc.Config{Token: token}, Addr: "127.0.0.1:0", ReadHeaderTimeout: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	defer ks.Close(context.WithoutCancel(ctx))

	cred := filepath.Join(dir, "credential.json")
	creds, err := json.Marshal([]map[string]any{
		{"id": "idemhookBenchCred", "name": benchCredential, "type": "postgres", "data": st.PostgresCredentialData()},
		{"id": "idemhookBenchKsvc", "name": benchKeysvcBearer, "type": "httpBearerAuth", "data": map[string]any{"token": token}},
		{"id": "idemhookBenchNode", "name": benchKeysvcNode, "type": communitynode.KeysvcCredential, "data": map[string]any{"url": ks.URL, "token": token}},
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cred, creds, 0o600); err != nil {
		return nil, err
	}
	if err := st.ImportCredentials(ctx, cred); err != nil {
		return nil, err
	}

	type mode struct {
		name     string
		file     []byte // a hand-made workflow, or
		opts     *generator.Options
		baseline string
	}
	business := pgsql.MustParseTable("bench_business")
	if _, err := st.Business.Exec(ctx, pgsql.BusinessDDL(business)); err != nil {
		return nil, err
	}
	const unguarded = "your workflow, no guard (Webhook → business INSERT → Respond)"
	gen := func(path string, o generator.Options) *generator.Options {
		o.WebhookPath, o.WorkflowName, o.CredentialName = path, "bench "+path, benchCredential
		o.EventsTable, o.BusinessTable = "bench_events_"+strings.TrimPrefix(path, "bench-"), "bench_business"
		return &o
	}
	modes := []mode{
		{name: "bare Webhook → Respond", file: workflowWithout("idemhookBenchBare", "bench-bare", nil), baseline: unguarded},
		{name: unguarded, file: workflowWithout("idemhookBenchUngd", "bench-unguarded", &business)},
		{name: "default (code-node, reserve)", opts: gen("bench-default", generator.Options{}), baseline: unguarded},
		{name: "transactional (code-node)", opts: gen("bench-transactional", generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardTransactional}}), baseline: unguarded},
		{name: "crypto-node", opts: gen("bench-cryptonode", generator.Options{Hashing: generator.HashingCryptoNode}), baseline: unguarded},
		{name: "transactional (crypto-node)", opts: gen("bench-txcrypto", generator.Options{Hashing: generator.HashingCryptoNode, ReserveOptions: generator.ReserveOptions{Guard: generator.GuardTransactional}}), baseline: unguarded},
		{name: "lease", opts: gen("bench-lease", generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease}}), baseline: unguarded},
		{name: "keysvc", opts: gen("bench-keysvc", generator.Options{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{KeysvcURL: ks.URL, KeysvcCredential: benchKeysvcBearer}}), baseline: unguarded},
	}
	if withNode {
		// Both packages, installed from their packed tarballs.
		modes = append(modes,
			mode{name: CommunityNodeSeries, opts: gen("bench-node", generator.Options{Hashing: generator.HashingNode}), baseline: unguarded},
			mode{name: CommunityNodeKeysvcSeries, opts: gen("bench-node-keysvc", generator.Options{Hashing: generator.HashingNode, NodeStore: generator.NodeStoreKeysvc,
				ReserveOptions: generator.ReserveOptions{KeysvcCredential: benchKeysvcNode}}), baseline: unguarded})
	}
	urls := make([]string, len(modes))
	files := make([][]byte, len(modes))
	for i, m := range modes {
		step("n8n: deploying %s", m.name)
		path, file := "", filepath.Join(dir, fmt.Sprintf("workflow-%d.json", i))
		if m.opts != nil {
			files, err := generator.Files(*m.opts)
			if err != nil {
				return nil, err
			}
			if _, err := st.Business.Exec(ctx, string(files["schema.sql"])); err != nil {
				return nil, err
			}
			m.file, path = files[generator.FileWorkflow], m.opts.WebhookPath
		} else {
			var w struct {
				Nodes []struct{ Parameters struct{ Path string } }
			}
			json.Unmarshal(m.file, &w)
			path = w.Nodes[0].Parameters.Path
		}
		files[i] = m.file
		if err := os.WriteFile(file, m.file, 0o644); err != nil {
			return nil, err
		}
		if err := st.Deploy(ctx, file); err != nil {
			return nil, fmt.Errorf("deploy %s: %w", m.name, err)
		}
		urls[i] = st.WebhookURL + "/webhook/" + path
	}
	deliver := func(i, n int) (time.Duration, error) {
		body := fmt.Appendf(nil, `{"id":"evt_bench_%d_%d","type":"invoice.paid"}`, i, n)
		start := time.Now()
		resp, err := http.Post(urls[i], "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("%s answered %d", modes[i].name, resp.StatusCode)
		}
		return time.Since(start), nil
	}
	// The modes take turns, delivery by delivery, so that whatever else the
	// machine does affects them alike; the first rounds warm n8n up. n8n
	// saves an execution after it answered: the pause lets it finish, so
	// that no delivery pays for the one before (without it the bare
	// workflow, measured after the heaviest one, came out slowest).
	step("n8n: %d rounds of one delivery to each of the %d workflows", opts.Deliveries, len(modes))
	lat := make([][]time.Duration, len(modes))
	for n := -3; n < opts.Deliveries; n++ {
		for i := range modes {
			d, err := deliver(i, n)
			if err != nil {
				return nil, err
			}
			if n >= 0 {
				lat[i] = append(lat[i], d)
			}
			time.Sleep(pause)
		}
	}
	step("n8n: reading the time of each node from n8n's execution data")
	key, err := n8napi.SetupOwner(ctx, st.N8NURL, "bench@idemhook.local", "Bench-password-1")
	if err != nil {
		return nil, err
	}
	n8n, err := n8napi.New(st.N8NURL, key)
	if err != nil {
		return nil, err
	}
	var out []Result
	for i, m := range modes {
		r := throughputResult("n8n", m.name, 1, len(lat[i]), sum(lat[i]), lat[i])
		r.Baseline = m.baseline
		if r.Note, err = nodeTimes(ctx, n8n, gjson.GetBytes(files[i], "id").String()); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	setRatios(out)
	return out, nil
}

// nodeTimes is the median time n8n recorded for each node of the workflow's
// executions, slowest first: where a guard's cost goes.
func nodeTimes(ctx context.Context, n8n *n8napi.Client, workflowID string) (string, error) {
	took, _, err := recordedTimes(ctx, n8n, workflowID, time.Time{})
	if err != nil {
		return "", err
	}
	type nodeTime struct {
		node string
		p50  time.Duration
	}
	var nodes []nodeTime
	for node, d := range took {
		p50, _ := percentiles(d)
		nodes = append(nodes, nodeTime{node, p50})
	}
	slices.SortFunc(nodes, func(a, b nodeTime) int { return cmp.Or(cmp.Compare(b.p50, a.p50), strings.Compare(a.node, b.node)) })
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%s %d ms", n.node, n.p50.Milliseconds())
	}
	return strings.Join(parts, ", "), nil
}

// recordedTimes reads the time n8n recorded for each node of each of the
// workflow's successful executions that started after since, and the sum
// over the nodes of each execution.
func recordedTimes(ctx context.Context, n8n *n8napi.Client, workflowID string, since time.Time) (took map[string][]time.Duration, totals []time.Duration, err error) {
	execs, err := n8n.Executions(ctx, workflowID)
	if err != nil {
		return nil, nil, err
	}
	took = map[string][]time.Duration{}
	for _, e := range execs {
		if e.StartedAt.Before(since) || e.Status != "success" {
			continue
		}
		run, err := n8n.ExecutionRun(ctx, e.ID)
		if err != nil {
			return nil, nil, err
		}
		var total time.Duration
		for node, d := range run.Took {
			took[node] = append(took[node], d)
			total += d
		}
		totals = append(totals, total)
	}
	return took, totals, nil
}

// uuidOf is a fixed UUID for a name, so re-running updates the workflows.
func uuidOf(name string) string {
	h := sha256.Sum256([]byte("idemhook/bench/" + name))
	return fmt.Sprintf("%x-%x-4%x-8%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])[:36]
}

func sum(d []time.Duration) time.Duration {
	var t time.Duration
	for _, x := range d {
		t += x
	}
	return max(t, time.Millisecond)
}
