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
// keysvc (keysvc as cmd/keysvc runs it, on loopback) over HTTP and, with
// each kind of certificate (certKinds), over HTTPS.
const (
	CommunityNodeSeries       = "community node"
	CommunityNodeKeysvcSeries = "community node on keysvc over HTTP"
)

// CommunityNodeKeysvcTLSSeries is the series of the node on keysvc over
// HTTPS with a certificate of kind.
func CommunityNodeKeysvcTLSSeries(kind string) string {
	return "community node on keysvc over HTTPS (" + kind + ")"
}

// The credentials of the series that call keysvc.
const (
	benchKeysvcBearer = "keysvc token (idemhook bench)"
	benchKeysvcNode   = "idemhook keysvc (idemhook bench)"
)

// benchKeysvcNodeTLS is the node's credential for keysvc over HTTPS with a
// certificate of kind.
func benchKeysvcNodeTLS(kind string) string {
	return "idemhook keysvc over HTTPS, " + kind + " (idemhook bench)"
}

// pause separates two deliveries to n8n.
const pause = 250 * time.Millisecond

// workflowWithout is the user's own workflow without a guard: the same
// business INSERT as the generated example step, or none at all (bare).
func workflowWithout(id, path string, business *pgsql.Table) []byte {
	return userWorkflow(id, path, business, benchCredential, 0)
}

// RemoveDuplicatesWorkflow is the user's workflow deduplicated the way n8n
// offers: its Remove Duplicates node (v2, "Remove Items Processed in
// Previous Executions", keyed on the body's id, with a history of history
// keys) before the business INSERT into business, through the Postgres
// credential named credential.
func RemoveDuplicatesWorkflow(id, path string, business pgsql.Table, credential string, history int) []byte {
	return userWorkflow(id, path, &business, credential, history)
}

// userWorkflow is Webhook → [Remove Duplicates →] [business INSERT →]
// Respond: Remove Duplicates when history > 0, the INSERT when business is
// set.
func userWorkflow(id, path string, business *pgsql.Table, credential string, history int) []byte {
	node := func(name, typ string, typeVersion float64, parameters map[string]any) map[string]any {
		return map[string]any{"id": uuidOf(path + "/" + name), "name": name, "type": typ, "typeVersion": typeVersion, "parameters": parameters}
	}
	webhook := node("Webhook", "n8n-nodes-base.webhook", generator.TypeVersions["n8n-nodes-base.webhook"],
		map[string]any{"httpMethod": "POST", "path": path, "responseMode": "responseNode", "options": map[string]any{}})
	webhook["webhookId"] = uuidOf(path + "/webhookId")
	nodes := []map[string]any{webhook}
	if history > 0 {
		nodes = append(nodes, node("Remove Duplicates", "n8n-nodes-base.removeDuplicates", 2, map[string]any{
			"operation": "removeItemsSeenInPreviousExecutions", "dedupeValue": "={{ $json.body.id }}",
			"options": map[string]any{"historySize": history}}))
	}
	if business != nil {
		step := node("Business Step", "n8n-nodes-base.postgres", generator.TypeVersions["n8n-nodes-base.postgres"], map[string]any{
			"operation": "executeQuery",
			"query":     pgsql.BusinessInsert(*business),
			"options":   map[string]any{"queryReplacement": "={{ [ 'evt:' + $json.body.id, $json.body.type ] }}"}})
		step["credentials"] = map[string]any{"postgres": map[string]any{"id": nil, "name": credential}}
		nodes = append(nodes, step)
	}
	nodes = append(nodes, node("Respond", "n8n-nodes-base.respondToWebhook", generator.TypeVersions["n8n-nodes-base.respondToWebhook"],
		map[string]any{"respondWith": "json", "responseBody": `{"status":"processed"}`, "options": map[string]any{}}))
	connections := map[string]any{}
	for i, n := range nodes {
		n["position"] = []int{220 * i, 300}
		if i > 0 {
			connections[nodes[i-1]["name"].(string)] = map[string]any{"main": [][]map[string]any{{{"node": n["name"], "type": "main", "index": 0}}}}
		}
	}
	b, _ := json.Marshal(map[string]any{"id": id, "name": "bench " + path, "nodes": nodes, "connections": connections,
		"active": false, "settings": map[string]any{"executionOrder": "v1"}, "pinData": map[string]any{}})
	return b
}

// n8nModes deploys the user's workflow without a guard and with each guard,
// and times sequential deliveries of new events to each.
func n8nModes(ctx context.Context, st *sandbox.Stack, opts Options, withNode bool, certs benchCerts, step func(string, ...any)) ([]Result, error) {
	dir, err := os.MkdirTemp("", "idemhook-bench-n8n-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// keysvc for the keysvc mode and the node on keysvc, on the same
	// database, in this process: the service cmd/keysvc runs, with a token.
	token := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	ks, err := startService(ctx, keysvc.ServiceConfig{
		DatabaseURL: st.BusinessDSN, PG: keysvc.PGOptions{Table: "bench_keysvc_events", CreateSchema: true},
		Handler: keysvc.Config{Token: token}, Logger: requestLogger(),
	})
	if err != nil {
		return nil, err
	}
	defer ks.Close(context.WithoutCancel(ctx))
	creds := []map[string]any{
		{"id": "idemhookBenchKsvc", "name": benchKeysvcBearer, "type": "httpBearerAuth", "data": map[string]any{"token": token}},
		{"id": "idemhookBenchNode", "name": benchKeysvcNode, "type": communitynode.KeysvcCredential, "data": map[string]any{"url": ks.URL, "token": token}},
	}
	// The same keysvc over HTTPS, one per kind of certificate, on the same
	// table (each series' keys are its own).
	for i, kind := range certKinds {
		if !withNode {
			break
		}
		pair := certs.leaves[kind]
		tls, err := startService(ctx, keysvc.ServiceConfig{
			DatabaseURL: st.BusinessDSN, PG: keysvc.PGOptions{Table: "bench_keysvc_events", CreateSchema: true},
			TLSCert: pair[0], TLSKey: pair[1], Handler: keysvc.Config{Token: token}, Logger: requestLogger(),
		})
		if err != nil {
			return nil, err
		}
		defer tls.Close(context.WithoutCancel(ctx))
		creds = append(creds, map[string]any{"id": fmt.Sprintf("idemhookBenchTLS%d", i), "name": benchKeysvcNodeTLS(kind), "type": communitynode.KeysvcCredential,
			"data": map[string]any{"url": tls.URL, "token": token}})
	}
	if err := importCredentials(ctx, st, dir, creds...); err != nil {
		return nil, err
	}
	business := pgsql.MustParseTable("bench_business")
	if _, err := st.Business.Exec(ctx, pgsql.BusinessDDL(business)); err != nil {
		return nil, err
	}
	modes := guardModes(ks.URL, business, withNode)
	if err := deployWorkflows(ctx, st, dir, modes, step); err != nil {
		return nil, err
	}
	step("n8n: %d rounds of one delivery to each of the %d workflows", opts.Deliveries, len(modes))
	lat, err := timeDeliveries(modes, 3, opts.Deliveries, func(i, n int) []byte {
		return fmt.Appendf(nil, `{"id":"evt_bench_%d_%d","type":"invoice.paid"}`, i, n)
	})
	if err != nil {
		return nil, err
	}
	step("n8n: reading the time of each node from n8n's execution data")
	out, err := withNodeTimes(ctx, st, modes, lat)
	if err != nil {
		return nil, err
	}
	setRatios(out)
	return out, nil
}

// guardModes are the workflows n8nModes compares: the bare one, the user's
// workflow without a guard (the baseline), and the same workflow with each
// guard (with the community node's two, withNode), their keysvc at
// keysvcURL.
func guardModes(keysvcURL string, business pgsql.Table, withNode bool) []workflow {
	gen := func(path string, o generator.Options) *generator.Options {
		// Each workflow reserves in a table of its own, named after its path
		// (a table name takes '_' where the path has '-').
		return benchOptions(path, "bench_events_"+strings.ReplaceAll(strings.TrimPrefix(path, "bench-"), "-", "_"), o)
	}
	atMostOnce, tx := generator.ReserveOptions{Guard: generator.GuardAtMostOnce}, generator.ReserveOptions{Guard: generator.GuardTransactional}
	modes := []workflow{
		{name: "bare Webhook → Respond", file: workflowWithout("idemhookBenchBare", "bench-bare", nil), baseline: unguarded},
		{name: unguarded, file: workflowWithout("idemhookBenchUngd", "bench-unguarded", &business)},
		{name: "default (code-node, lease)", opts: gen("bench-default", generator.Options{}), baseline: unguarded},
		{name: "at-most-once (the default before lease)", opts: gen("bench-at-most-once", generator.Options{ReserveOptions: atMostOnce}), baseline: unguarded},
		{name: "transactional (code-node)", opts: gen("bench-transactional", generator.Options{ReserveOptions: tx}), baseline: unguarded},
		{name: "crypto-node", opts: gen("bench-cryptonode", generator.Options{Hashing: generator.HashingCryptoNode}), baseline: unguarded},
		{name: "transactional (crypto-node)", opts: gen("bench-txcrypto", generator.Options{Hashing: generator.HashingCryptoNode, ReserveOptions: tx}), baseline: unguarded},
		{name: "keysvc", opts: gen("bench-keysvc", generator.Options{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{KeysvcURL: keysvcURL, KeysvcCredential: benchKeysvcBearer}}), baseline: unguarded},
	}
	if withNode {
		// Both packages, installed from their packed tarballs; keysvc over
		// HTTP and over HTTPS with each kind of certificate.
		onKeysvc := func(credential string) generator.Options {
			return generator.Options{Hashing: generator.HashingNode, NodeStore: generator.NodeStoreKeysvc, ReserveOptions: generator.ReserveOptions{KeysvcCredential: credential}}
		}
		modes = append(modes,
			workflow{name: CommunityNodeSeries, opts: gen("bench-node", generator.Options{Hashing: generator.HashingNode}), baseline: unguarded},
			workflow{name: CommunityNodeKeysvcSeries, opts: gen("bench-node-keysvc", onKeysvc(benchKeysvcNode)), baseline: unguarded})
		for i, kind := range certKinds {
			modes = append(modes, workflow{name: CommunityNodeKeysvcTLSSeries(kind), opts: gen(fmt.Sprintf("bench-node-keysvc-tls%d", i), onKeysvc(benchKeysvcNodeTLS(kind))), baseline: unguarded})
		}
	}
	return modes
}

// withNodeTimes makes each workflow's result from its latencies, with the
// median time of each of its nodes that n8n recorded.
func withNodeTimes(ctx context.Context, st *sandbox.Stack, modes []workflow, lat [][]time.Duration) ([]Result, error) {
	key, err := n8napi.SetupOwner(ctx, st.N8NURL, "bench@idemhook.local", "Bench-password-1")
	if err != nil {
		return nil, err
	}
	n8n, err := n8napi.New(st.N8NURL, key)
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(modes))
	for i, m := range modes {
		out[i] = throughputResult("n8n", m.name, 1, len(lat[i]), sum(lat[i]), lat[i])
		out[i].Baseline = m.baseline
		if out[i].Note, err = nodeTimes(ctx, n8n, m.id()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// unguarded is the series every guard in n8n is divided by.
const unguarded = "your workflow, no guard (Webhook → business INSERT → Respond)"

// benchOptions are the generator's options of a bench workflow at path,
// its keys in events, its business rows in bench_business.
func benchOptions(path, events string, o generator.Options) *generator.Options {
	o.WebhookPath, o.WorkflowName, o.CredentialName = path, "bench "+path, benchCredential
	o.EventsTable, o.BusinessTable = events, "bench_business"
	return &o
}

// workflow is an n8n workflow the bench deploys and delivers to: a
// hand-made one (file), or one the generator makes (opts).
type workflow struct {
	name     string
	file     []byte
	opts     *generator.Options
	baseline string
	// url is where deliveries go, once deployed.
	url string
}

// id is the workflow's id in n8n.
func (w workflow) id() string { return gjson.GetBytes(w.file, "id").String() }

// importCredentials imports the bench's PostgreSQL credential and creds
// into n8n, through a file in dir.
func importCredentials(ctx context.Context, st *sandbox.Stack, dir string, creds ...map[string]any) error {
	all := append([]map[string]any{{"id": "idemhookBenchCred", "name": benchCredential, "type": "postgres", "data": st.PostgresCredentialData()}}, creds...)
	b, err := json.Marshal(all)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "credentials.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return err
	}
	defer os.Remove(file)
	return st.ImportCredentials(ctx, file)
}

// deployWorkflows generates (creating their tables) and deploys each
// workflow, and sets its file and url.
func deployWorkflows(ctx context.Context, st *sandbox.Stack, dir string, ws []workflow, step func(string, ...any)) error {
	for i := range ws {
		w := &ws[i]
		step("n8n: deploying %s", w.name)
		if w.opts != nil {
			files, err := generator.Files(*w.opts)
			if err != nil {
				return err
			}
			if _, err := st.Business.Exec(ctx, string(files["schema.sql"])); err != nil {
				return err
			}
			w.file = files[generator.FileWorkflow]
		}
		var parsed struct {
			ID    string
			Nodes []struct{ Parameters struct{ Path string } }
		}
		if err := json.Unmarshal(w.file, &parsed); err != nil || len(parsed.Nodes) == 0 {
			return fmt.Errorf("deploy %s: not a workflow (%v)", w.name, err)
		}
		file := filepath.Join(dir, parsed.ID+".json")
		if err := os.WriteFile(file, w.file, 0o644); err != nil {
			return err
		}
		if err := st.Deploy(ctx, file); err != nil {
			return fmt.Errorf("deploy %s: %w", w.name, err)
		}
		// The Webhook is the first node of every bench workflow.
		w.url = st.WebhookURL + "/webhook/" + parsed.Nodes[0].Parameters.Path
	}
	return nil
}

// timeDeliveries times rounds of one delivery (body(i, n): the n-th to
// workflow i) to each workflow in turn, and returns each workflow's
// latencies. The workflows take turns, delivery by delivery, so that
// whatever else the machine does affects them alike; warmup rounds first
// warm n8n up, untimed. n8n saves an execution after it answered: the pause lets it
// finish, so that no delivery pays for the one before (without it the bare
// workflow, measured after the heaviest one, came out slowest).
func timeDeliveries(ws []workflow, warmup, rounds int, body func(i, n int) []byte) ([][]time.Duration, error) {
	deliver := func(i, n int) (time.Duration, error) {
		start := time.Now()
		resp, err := http.Post(ws[i].url, "application/json", bytes.NewReader(body(i, n)))
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("%s answered %d", ws[i].name, resp.StatusCode)
		}
		return time.Since(start), nil
	}
	lat := make([][]time.Duration, len(ws))
	for n := -warmup; n < rounds; n++ {
		for i := range ws {
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
	return lat, nil
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
