package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	idemdeploy "github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/guard"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/verify"
)

// guardCase is one fixture, as the guard e2e test deploys and checks it.
type guardCase struct {
	file, name string
	export     []byte // with the echo endpoint filled in
	hook       string // the Webhook's name, which the restore node takes
	path       string
	mode       generator.Guard
	opts       generator.Options
	res        *guard.Result
	firstNode  string // the user's first node after the Webhook
	plainText  bool   // deliveries are text/plain
	// deployedIDs are deleted when the case ends.
	deployedIDs []string
}

// Every fixture (exports of the shapes real ones have, written for the
// tests) is guarded and proven in real n8n, side by side: the guarded
// workflow imports and publishes; idemhook verify passes on it; for the same
// delivery, the node after the guard gets exactly the item the original
// workflow's Webhook gave (json, and binary properties), and the answer to a
// new event is the original's; the seed's run (A, A with another signature
// header, B) runs the user's first node twice; 20 simultaneous deliveries of
// one event run it once.
func TestGuardExports(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	defer echo.Close()
	files, err := filepath.Glob("../internal/guard/testdata/exports/*.json")
	if err != nil || len(files) < 15 {
		t.Fatalf("%d fixtures: %v", len(files), err)
	}
	target := verifyTarget(t)
	var cases []*guardCase
	for i, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := &guardCase{file: f, name: strings.TrimSuffix(filepath.Base(f), ".json"), plainText: strings.Contains(f, "text-plain")}
		c.export = bytes.ReplaceAll(raw, []byte("http://IDEMHOOK_E2E_ECHO"), []byte(echo.URL))
		c.mode = generator.GuardAtMostOnce
		if i%3 == 1 { // a third of them with the lease guard
			c.mode = generator.GuardLease
		}
		c.opts = generator.Options{CredentialName: credentialName, ReserveOptions: generator.ReserveOptions{Guard: c.mode, EventsTable: fmt.Sprintf("g%02d_events", i)}}
		if i%3 == 2 { // a third with the community node in place of the Code, Postgres and If nodes
			c.opts.Hashing = generator.HashingNode
		}
		w, err := guard.Parse(c.export)
		if err != nil {
			t.Fatal(err)
		}
		webhook := ""
		if strings.Contains(f, "two-webhooks") {
			webhook = "Stripe Hook"
		}
		if c.res, err = guard.Guard(w, guard.Options{Generate: c.opts, Webhook: webhook}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		guarded := workflowOf(t, c.res.Workflow)
		c.hook = c.res.Restore
		hook := wfNode(t, guarded, c.res.Webhook)
		c.path = hook["parameters"].(map[string]any)["path"].(string)
		first := outputs(guarded, c.res.Restore)[0].([]any)[0].(map[string]any)
		c.firstNode = first["node"].(string)
		execSQL(t, string(c.res.Files[guard.FileSchema]))
		claimName(t, "idemhook verify: "+guarded.Name)
		claimName(t, "idemhook verify: "+generator.ErrorWorkflowName(guarded.Name))
		cases = append(cases, c)
	}

	// Side by side, a few at a time: n8n on two cores.
	sem := make(chan struct{}, 6)
	t.Run("fixtures", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name+"/"+string(c.mode)+"/"+string(c.opts.WithDefaults().Hashing), func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				c.check(t, ctx, target)
			})
		}
	})
}

func workflowOf(t *testing.T, raw []byte) n8napi.Workflow {
	t.Helper()
	var w n8napi.Workflow
	if err := json.Unmarshal(raw, &w); err != nil {
		var list []n8napi.Workflow
		if json.Unmarshal(raw, &list) != nil || len(list) != 1 {
			t.Fatalf("not a workflow: %v", err)
		}
		return list[0]
	}
	return w
}

func (c *guardCase) check(t *testing.T, ctx context.Context, target verify.Target) {
	guarded := workflowOf(t, c.res.Workflow)
	errWF := workflowOf(t, c.res.Files[guard.FileErrorWorkflow])

	// idemhook verify on the guarded file, with its error workflow.
	report, err := verify.Run(ctx, target, guarded, verify.Options{Concurrency: 10, Deliveries: 5, Companions: []n8napi.Workflow{errWF}})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	var table strings.Builder
	report.WriteTable(&table)
	if !report.OK() {
		t.Errorf("idemhook verify fails on the guarded workflow:\n%s", table.String())
	}
	for _, ch := range report.Checks {
		if ch.Status == verify.Skip && strings.HasPrefix(ch.Name, "business step fails") {
			t.Errorf("verify's failure check was skipped: %s", ch.Seen)
		}
	}

	// The original beside it on a path of its own, and the guarded one.
	original := workflowOf(t, c.export)
	original.Name = "e2e guard original: " + c.name
	for _, n := range original.Nodes {
		if n["type"] == "n8n-nodes-base.webhook" {
			p := n["parameters"].(map[string]any)
			p["path"] = p["path"].(string) + "-original"
			n["webhookId"] = idemdeploy.NewUUID()
		}
	}
	guarded.Name = "e2e guard: " + c.name
	errWF.Name = "e2e guard: " + errWF.Name
	origID := c.deploy(t, ctx, []idemdeploy.Workflow{{File: "original.json", Doc: original, WebhookPath: c.path + "-original"}})
	guardedWS, err := idemdeploy.Load(map[string][]byte{"guarded.json": mustJSON(t, guarded), guard.FileErrorWorkflow: mustJSON(t, errWF)})
	if err != nil {
		t.Fatal(err)
	}
	guardedID := c.deploy(t, ctx, guardedWS)

	// A new event: the same item reaches the first node, and the same
	// answer comes back.
	a := c.event("A")
	origAnswer, origRun := c.deliverAndRead(t, ctx, origID, c.path+"-original", a, "1")
	newAnswer, newRun := c.deliverAndRead(t, ctx, guardedID, c.path, a, "1")
	wantItem := normaliseItem(origRun.First[c.hook], c.path+"-original", c.path)
	gotItem := normaliseItem(newRun.First[c.hook], c.path, c.path)
	if !reflect.DeepEqual(wantItem, gotItem) {
		t.Errorf("the item the first node gets differs:\noriginal %v\nguarded  %v", wantItem, gotItem)
	}
	for _, d := range binaryDiff(origRun.FirstBinary[c.hook], newRun.FirstBinary[c.hook]) {
		t.Errorf("the first node's input: %s", d)
	}
	if origAnswer.status != newAnswer.status || normaliseAnswer(origAnswer.body, c.path+"-original", c.path) != normaliseAnswer(newAnswer.body, c.path, c.path) {
		t.Errorf("the answer to a new event differs: original %d %s, guarded %d %s", origAnswer.status, origAnswer.body, newAnswer.status, newAnswer.body)
	}
	if !newRun.Ran(c.firstNode) {
		t.Errorf("the new event did not reach %q (ran %v)", c.firstNode, newRun.Outputs)
	}

	// The seed's run: A again with another signature header, then B.
	_, replay := c.deliverAndRead(t, ctx, guardedID, c.path, a, "2")
	_, b := c.deliverAndRead(t, ctx, guardedID, c.path, c.event("B"), "3")
	if replay.Ran(c.firstNode) || !b.Ran(c.firstNode) {
		t.Errorf("seed run: the replay of A ran %q: %v, B ran it: %v; want false, true", c.firstNode, replay.Ran(c.firstNode), b.Ran(c.firstNode))
	}

	// 20 simultaneous deliveries of one event: the first node runs once.
	before, err := api.Executions(ctx, guardedID)
	if err != nil {
		t.Fatal(err)
	}
	ev := c.event("C")
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); c.deliver(t, c.path, ev, fmt.Sprint(10+i)) }()
	}
	wg.Wait()
	runs := c.runsSince(t, ctx, guardedID, before, 20)
	ran := 0
	for _, r := range runs {
		if r.Ran(c.firstNode) {
			ran++
		}
	}
	if ran != 1 {
		var seen []string
		for _, r := range runs {
			seen = append(seen, fmt.Sprintf("%s %s ran %v errors %v", r.ID, r.Status, r.Ran(c.firstNode), r.Errors))
		}
		t.Errorf("20 simultaneous deliveries of one event ran %q %d times, want once:\n%s", c.firstNode, ran, strings.Join(seen, "\n"))
	}
	for _, id := range c.deployedIDs {
		api.DeleteWorkflow(context.WithoutCancel(ctx), id)
	}
}

func (c *guardCase) deploy(t *testing.T, ctx context.Context, ws []idemdeploy.Workflow) string {
	t.Helper()
	deployed, err := idemdeploy.Deploy(ctx, api, ws, idemdeploy.Options{WebhookURL: st.WebhookURL})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	id := ""
	for _, d := range deployed {
		c.deployedIDs = append(c.deployedIDs, d.ID)
		if d.URL != "" {
			id = d.ID
		}
	}
	return id
}

// event is a Stripe-shaped event, or for the plain-text fixture a line of
// text; n makes it distinct.
func (c *guardCase) event(n string) []byte {
	if c.plainText {
		return []byte("delivery " + n + " of " + c.name + "\n")
	}
	return fmt.Appendf(nil, `{"id":"evt_guard_%s_%s","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_%s","metadata":{"order_id":"o_%s"}}}}`, c.name, n, n, n)
}

// deliver posts body to path, with a signature header that differs per
// attempt (as a provider's retry's does), a query and a request id.
func (c *guardCase) deliver(t *testing.T, path string, body []byte, attempt string) response {
	contentType := "application/json"
	if c.plainText {
		contentType = "text/plain"
	}
	r, err := send(st.WebhookURL+"/webhook/"+path+"?source=e2e", contentType, body, map[string]string{
		"Stripe-Signature": "t=1,v1=attempt" + attempt, "X-Request-Id": "req-" + c.name,
	})
	if err != nil {
		t.Errorf("deliver to %s: %v", path, err)
	}
	return r
}

// deliverAndRead delivers body to path, served by workflow id, and reads
// the execution it started.
func (c *guardCase) deliverAndRead(t *testing.T, ctx context.Context, id, path string, body []byte, attempt string) (response, n8napi.Run) {
	t.Helper()
	before, err := api.Executions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r := c.deliver(t, path, body, attempt)
	return r, c.runsSince(t, ctx, id, before, 1)[0]
}

// runsSince waits until workflow id has n finished executions more than
// before and reads them, oldest first.
func (c *guardCase) runsSince(t *testing.T, ctx context.Context, id string, before []n8napi.Execution, n int) []n8napi.Run {
	t.Helper()
	known := map[n8napi.ID]bool{}
	for _, e := range before {
		known[e.ID] = true
	}
	var fresh []n8napi.Execution
	waitFor(t, time.Minute, fmt.Sprintf("%d executions of %s", n, id), func() bool {
		execs, err := api.Executions(ctx, id)
		if err != nil {
			return false
		}
		fresh = fresh[:0]
		for _, e := range execs {
			if !known[e.ID] && e.Status != "new" && e.Status != "running" && e.Status != "waiting" {
				fresh = append(fresh, e)
			}
		}
		return len(fresh) >= n
	})
	var out []n8napi.Run
	for i := len(fresh) - 1; i >= 0; i-- { // oldest first
		r, err := api.ExecutionRun(ctx, fresh[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// normaliseItem is a Webhook item with its path read as want's: the
// original runs on a path of its own, so its webhookUrl names that one.
func normaliseItem(item map[string]any, path, as string) map[string]any {
	b, _ := json.Marshal(item)
	var out map[string]any
	json.Unmarshal(bytes.ReplaceAll(b, []byte("/"+path), []byte("/"+as)), &out)
	return out
}

func normaliseAnswer(body, path, as string) string {
	return strings.ReplaceAll(body, "/"+path, "/"+as)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
