package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/idemhook/idemhook/signature"
)

// The rules presets beyond Stripe, end to end: each deployed as a user
// would (its own schema, webhook path and outbox API) and taken through the
// design's five tests and the inbox's guarantees with deliveries signed as
// the provider signs them, by signers written here from the providers'
// documentation. One conformance suite, one table of deliveries per preset;
// the presets run side by side, and share the one n8n kill.

// delivery is one HTTP request as the provider sends it.
type delivery struct {
	header map[string]string
	body   []byte
}

// presetCase is a preset's deliveries for each test of the suite. An
// effect or task key names what the test expects to happen once.
type presetCase struct {
	preset   string
	prefix   string // the deployment's schema and webhook path
	receiver generator.Receiver
	table    string // the preset's domain table
	// With keysvc as the receiver: the endpoint's signing secrets (one per
	// line of its secret_file) and its account ("" for the default).
	keysvcSecrets []string
	account       string

	// sign signs a delivery anew (a new timestamp where the scheme has one);
	// forge signs it with another secret; stale, where the scheme signs a
	// timestamp, signs it as of an hour ago.
	sign, forge, stale func(d delivery) map[string]string

	// 1. The same event twice.
	same       delivery
	sameEffect string
	sameTask   string
	// 2. Two events proposing one effect, after setup (processed first).
	setup2    []delivery
	two       [2]delivery
	twoEffect string
	twoTask   string
	// 3. early waits (deferred with earlyWhy) until enabling is processed.
	early    delivery
	earlyWhy string
	enabling []delivery
	// 4. killed is decided while n8n dies, after setup4; the domain row
	// lockID (of account lockAccount) is held so that the decision waits
	// inside its transaction.
	setup4      []delivery
	killed      delivery
	lockID      string
	lockAccount string
	killEffect  string
	killTask    string
	// 5. An external task performed and answered too late.
	uncertain     []delivery // the last one writes uncertainTask
	uncertainTask string
	// An irrelevant type; missing data and the reason it is rejected with.
	irrelevant delivery
	missing    delivery
	missingWhy string
	// 30 concurrent deliveries of one event.
	concurrent       delivery
	concurrentEffect string
	concurrentTask   string
}

// presetRun is a preset deployed.
type presetRun struct {
	presetCase
	d   inboxDeployment
	url string // where the provider posts
	api *opsAPI
}

func (p *presetRun) post(t *testing.T, d delivery, signed map[string]string) response {
	h := map[string]string{}
	for k, v := range d.header {
		h[k] = v
	}
	for k, v := range signed {
		h[k] = v
	}
	r, err := send(p.url, "application/json", d.body, h)
	if err != nil {
		return response{body: err.Error()}
	}
	return r
}

func (p *presetRun) deliver(t *testing.T, d delivery) response { return p.post(t, d, p.sign(d)) }

// key is the receipt key of a delivery, to find its inbox row by.
func (p *presetRun) key(t *testing.T, d delivery) string {
	t.Helper()
	h := http.Header{}
	for k, v := range d.header {
		h.Set(k, v)
	}
	prov, _ := rules.ProviderFor(p.rules().Provider.Name)
	k, err := eventkey.DeriveFor(eventkey.Preset(prov.Verify), h, d.body, "")
	if err != nil {
		t.Fatal(err)
	}
	return k.Value
}

func (p *presetRun) rules() *rules.Rules {
	rs, _ := rules.Preset(p.preset)
	return rs
}

func (p *presetRun) received(t *testing.T, what string, d delivery, status string) {
	t.Helper()
	wantReceipt(t, what, p.deliver(t, d), status)
}

func (p *presetRun) wait(t *testing.T, d delivery, states ...string) inboxRow {
	t.Helper()
	return p.d.waitReceipt(t, p.key(t, d), states...)
}

// process delivers each and waits until it is decided.
func (p *presetRun) process(t *testing.T, ds ...delivery) {
	t.Helper()
	for _, d := range ds {
		p.received(t, "setup", d, "received")
		p.wait(t, d, "processed")
	}
}

// effects lists the recorded effect keys that contain token.
func (p *presetRun) effects(t *testing.T, token string) []string {
	t.Helper()
	return p.d.effectsWith(t, token)
}

// once checks that the effect is recorded exactly once and its task was
// called exactly once.
func (p *presetRun) once(t *testing.T, effect, task string) {
	t.Helper()
	if e := p.effects(t, effect); len(e) != 1 || e[0] != effect {
		t.Errorf("effects matching %s: %v, want it once", effect, e)
	}
	if task == "" {
		return
	}
	p.d.waitTask(t, task, "sent")
	if n := p.api.count("POST", task); n != 1 {
		t.Errorf("%s was called %d times, want 1", task, n)
	}
}

func (p *presetRun) domainRows(t *testing.T) int {
	t.Helper()
	var n int
	if err := st.Business.QueryRow(context.Background(), "SELECT count(*) FROM "+p.prefix+"."+p.table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRulesPresets(t *testing.T) {
	needStack(t)
	start := time.Now()
	// Shopify also through keysvc's inbox: the receipt, its account and its
	// type read from headers there too.
	viaKeysvc := shopifyOrdersCase()
	viaKeysvc.prefix, viaKeysvc.receiver, viaKeysvc.keysvcSecrets = "pks", generator.ReceiverKeysvc, []string{presetSecret}
	cases := []presetCase{shopifyOrdersCase(), githubDeploymentsCase(), standardWebhooksCase(), viaKeysvc}
	// Deployed on t itself: what they start (keysvc, the outbox APIs) lives
	// as long as the test.
	runs := make([]*presetRun, len(cases))
	for i, c := range cases {
		runs[i] = deployPreset(t, c)
	}
	// each runs a test for every preset, side by side.
	each := func(name string, test func(t *testing.T, p *presetRun)) {
		t.Run(name, func(t *testing.T) {
			for _, p := range runs {
				t.Run(p.preset+" via "+string(p.receiver), func(t *testing.T) {
					t.Parallel()
					test(t, p)
				})
			}
		})
	}

	each("the same event twice", func(t *testing.T, p *presetRun) {
		p.received(t, "first delivery", p.same, "received")
		p.wait(t, p.same, "processed")
		p.received(t, "second delivery, signed anew", p.same, "duplicate")
		p.once(t, p.sameEffect, p.sameTask)
	})

	each("two events, one effect", func(t *testing.T, p *presetRun) {
		p.process(t, p.setup2...)
		p.received(t, "the first event", p.two[0], "received")
		p.received(t, "the second event", p.two[1], "received")
		a, b := p.wait(t, p.two[0], "processed"), p.wait(t, p.two[1], "processed")
		outcomes := []string{a.Outcome, b.Outcome}
		sort.Strings(outcomes)
		if outcomes[0] != "applied" || outcomes[1] != "effect_exists" {
			t.Errorf("outcomes %v, want one applied and one effect_exists", outcomes)
		}
		p.once(t, p.twoEffect, p.twoTask)
	})

	each("reversed order retained then applied", func(t *testing.T, p *presetRun) {
		p.received(t, "the early event", p.early, "received")
		if r := p.wait(t, p.early, "deferred"); r.Outcome != p.earlyWhy || r.LastError == "" {
			t.Errorf("the early event: %+v, want deferred %s with its reason", r, p.earlyWhy)
		}
		p.process(t, p.enabling...)
		p.d.waitDueKeys(t, []string{p.key(t, p.early)})
		runWorkflow(t, p.d.ids[generator.FileRecoverer])
		if r := p.wait(t, p.early, "processed"); r.Outcome != "applied" || r.Attempts != 2 {
			t.Errorf("the early event after the recoverer: %+v, want applied on attempt 2", r)
		}
	})

	// 4. One kill for every preset: each decision waits inside its effect
	// transaction (its domain row held), then n8n is SIGKILLed, before the
	// external task. Nothing is half done; after the restart each event
	// completes once.
	t.Run("worker killed inside the effect", func(t *testing.T) {
		ctx := context.Background()
		for _, p := range runs {
			p.process(t, p.setup4...)
		}
		tx, err := st.Business.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		for _, p := range runs {
			if _, err := tx.Exec(ctx, "SELECT 1 FROM "+p.prefix+"."+p.table+" WHERE id = $1 AND account = $2 FOR UPDATE", p.lockID, p.lockAccount); err != nil {
				t.Fatal(err)
			}
			p.received(t, p.preset, p.killed, "received")
		}
		waiting := func() int {
			var n int
			st.Business.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%idemhook_apply_batch%'`).Scan(&n)
			return n
		}
		waitFor(t, 30*time.Second, "every preset's worker to wait inside its effect transaction", func() bool { return waiting() == len(runs) })
		if err := st.KillN8N(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the dead workers' transactions to end", func() bool {
			var n int
			st.Business.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%idemhook_apply_batch%' AND pid <> pg_backend_pid()`).Scan(&n)
			return n == 0
		})
		tx.Rollback(ctx)
		for _, p := range runs {
			var tasks int
			st.Business.QueryRow(ctx, "SELECT count(*) FROM "+p.d.db.Outbox().String()+" WHERE operation_key = $1", p.killTask).Scan(&tasks)
			r, _ := p.d.receipt(t, p.key(t, p.killed))
			if r.State != "processing" || len(p.effects(t, p.killEffect)) != 0 || tasks != 0 {
				t.Errorf("%s after the kill: row %+v, effects %v, %d tasks; want processing, no effect, no task", p.preset, r, p.effects(t, p.killEffect), tasks)
			}
		}
		if err := st.StartN8N(ctx, append([]string{runnerPath}, presetWebhookPaths(runs)...)...); err != nil {
			t.Fatal(err)
		}
		time.Sleep(inboxOptions("", "").ClaimLease) // the dead workers' claims expire
		for _, p := range runs {
			runWorkflow(t, p.d.ids[generator.FileRecoverer])
		}
		for _, p := range runs {
			if r := p.wait(t, p.killed, "processed"); r.Outcome != "applied" || r.Attempts < 2 {
				t.Errorf("%s after the recoverer: %+v, want applied on a later attempt", p.preset, r)
			}
			p.once(t, p.killEffect, p.killTask)
		}
	})

	each("uncertain external result reconciled", func(t *testing.T, p *presetRun) {
		p.api.plan(p.uncertainTask, opsStep{perform: true, sleep: 4 * time.Second})
		p.process(t, p.uncertain...)
		p.d.waitTask(t, p.uncertainTask, "sent")
		if posts, gets := p.api.count("POST", p.uncertainTask), p.api.count("GET", p.uncertainTask); posts != 1 || gets != 1 {
			t.Errorf("%s: %d calls and %d lookups, want 1 and 1: the call must not be repeated", p.uncertainTask, posts, gets)
		}
	})

	each("an irrelevant type is ignored, with no write", func(t *testing.T, p *presetRun) {
		before := p.domainRows(t)
		// keysvc applies the endpoint's allowlist itself: it saves the
		// event as ignored and forwards nothing.
		status := "received"
		if p.receiver == generator.ReceiverKeysvc {
			status = "ignored"
		}
		p.received(t, "irrelevant", p.irrelevant, status)
		if r := p.wait(t, p.irrelevant, "ignored"); r.Outcome != "type_not_allowed" {
			t.Errorf("%+v, want ignored type_not_allowed", r)
		}
		if after := p.domainRows(t); after != before {
			t.Errorf("%d domain rows before, %d after", before, after)
		}
	})

	each("missing data is rejected with its reason", func(t *testing.T, p *presetRun) {
		p.received(t, "missing data", p.missing, "received")
		if r := p.wait(t, p.missing, "rejected"); r.Outcome != p.missingWhy || r.LastError == "" {
			t.Errorf("%+v, want rejected %s with its reason", r, p.missingWhy)
		}
	})

	each("forged and stale signatures: 401, nothing stored", func(t *testing.T, p *presetRun) {
		d := p.concurrent // not delivered yet
		bad := map[string]map[string]string{"forged": p.forge(d)}
		if p.stale != nil {
			bad["stale"] = p.stale(d)
		}
		for what, sig := range bad {
			if r := p.post(t, d, sig); r.status != 401 {
				t.Errorf("%s signature: %d %s, want 401", what, r.status, r.body)
			}
		}
		if _, found := p.d.receipt(t, p.key(t, d)); found {
			t.Error("a delivery with a bad signature was stored")
		}
		if p.stale == nil {
			t.Logf("%s signs no timestamp: a replay of a genuine delivery is its receipt's duplicate (the same event twice)", p.preset)
		}
	})

	each("30 concurrent deliveries of one event: one effect", func(t *testing.T, p *presetRun) {
		answers := parallel(30, func(int) response { return p.deliver(t, p.concurrent) })
		received := 0
		for _, a := range answers {
			if a.status != 200 {
				t.Errorf("concurrent delivery: %d %s", a.status, a.body)
			}
			if strings.Contains(a.body, `"status":"received"`) {
				received++
			}
		}
		if received != 1 {
			t.Errorf("%d of 30 deliveries were answered received, want 1", received)
		}
		p.wait(t, p.concurrent, "processed")
		p.once(t, p.concurrentEffect, p.concurrentTask)
	})
	t.Logf("%d presets' end-to-end cases took %s", len(runs), time.Since(start).Round(time.Second))
}

func presetWebhookPaths(runs []*presetRun) []string {
	var out []string
	for _, p := range runs {
		out = append(out, p.d.opts.WebhookPath)
	}
	return out
}

var presetSecrets sync.Map // credential name → imported

// deployPreset deploys a preset: the n8n receiver with the provider's
// secret in a Crypto credential, or keysvc's inbox in front of the target
// workflow.
func deployPreset(t *testing.T, c presetCase) *presetRun {
	t.Helper()
	api := newOpsAPI(t, true)
	opts := inboxOptions(c.prefix, api.url)
	opts.Rules = c.rules()
	opts.Receiver = c.receiver
	opts.VerifyCredential = "Signing secret (e2e " + c.preset + ")"
	if c.receiver == generator.ReceiverN8N {
		if _, done := presetSecrets.LoadOrStore(opts.VerifyCredential, true); !done {
			importSecretCredential(t, opts.VerifyCredential, presetSecret)
		}
	}
	d := deploy(t, opts)
	p := &presetRun{presetCase: c, d: inboxDeployment{deployment: d, db: pgsql.Inbox{Schema: opts.DBSchema}, api: api}, url: d.url, api: api}
	if c.receiver == generator.ReceiverKeysvc {
		p.url = startPresetKeysvc(t, c, opts)
	}
	return p
}

func (c presetCase) rules() *rules.Rules {
	rs, err := rules.Preset(c.preset)
	if err != nil {
		panic(err)
	}
	return rs
}

// presetSecret is the HMAC secret of the Shopify and GitHub cases; it goes
// into n8n only through `n8n import:credentials`.
const presetSecret = "e2e-preset-signing-secret-0123456789abcdef"

// signer signs a delivery as p's sender does, with what u holds
// (signature.Sign): Standard Webhooks signs the delivery's webhook-id.
func signer(p signature.Provider, u signature.Unsigned) func(delivery) map[string]string {
	return func(d delivery) map[string]string {
		u.Body, u.ID = d.body, d.header["webhook-id"]
		h, err := p.Sign(u)
		if err != nil {
			panic(err) // the cases' secrets are the test's own
		}
		return h
	}
}

// Shopify signs the raw body: X-Shopify-Hmac-Sha256 is the base64 of its
// HMAC-SHA256 under the app's client secret. No timestamp is signed.
func shopifySign(secret string) func(delivery) map[string]string {
	return signer(signature.ProviderShopify, signature.Unsigned{Secret: secret})
}

// GitHub signs the raw body: X-Hub-Signature-256 is "sha256=" and the hex
// of its HMAC-SHA256 under the webhook's secret. No timestamp is signed.
func githubSign(secret string) func(delivery) map[string]string {
	return signer(signature.ProviderGitHub, signature.Unsigned{Secret: secret})
}

func shopifyDelivery(topic, webhookID string, body map[string]any) delivery {
	b, _ := json.Marshal(body)
	return delivery{body: b, header: map[string]string{
		"X-Shopify-Topic": topic, "X-Shopify-Shop-Domain": "e2e-north.myshopify.com", "X-Shopify-Webhook-Id": webhookID,
		"X-Shopify-Event-Id": "ev-" + webhookID, "X-Shopify-Api-Version": "2025-10", "X-Shopify-Triggered-At": time.Now().UTC().Format(time.RFC3339Nano),
	}}
}

func shopifyOrder(topic, webhookID string, order int64, financial string, extra map[string]any) delivery {
	body := map[string]any{
		"id": order, "admin_graphql_api_id": fmt.Sprintf("gid://shopify/Order/%d", order), "name": fmt.Sprintf("#%d", order%10000),
		"email": "buyer@example.com", "financial_status": financial, "total_price": "42.50", "currency": "EUR", "cancelled_at": nil,
		"line_items": []map[string]any{{"id": order + 1, "title": "Wool scarf", "quantity": 1, "price": "42.50"}},
	}
	for k, v := range extra {
		body[k] = v
	}
	return shopifyDelivery(topic, webhookID, body)
}

func shopifyRefund(webhookID string, refund, order int64, amount string) delivery {
	return shopifyDelivery("refunds/create", webhookID, map[string]any{
		"id": refund, "order_id": order, "note": "partial refund", "restock": false, "created_at": time.Now().UTC().Format(time.RFC3339),
		"transactions": []map[string]any{{"id": refund + 7, "order_id": order, "kind": "refund", "status": "success", "amount": amount, "currency": "EUR"}},
	})
}

func shopifyOrdersCase() presetCase {
	const shop = "e2e-north.myshopify.com"
	const base = 6200000000000
	paid := func(webhook string, order int64) delivery {
		return shopifyOrder("orders/paid", webhook, order, "paid", nil)
	}
	fulfil := func(order int64) string { return fmt.Sprintf("fulfil_order:%s:%d", shop, order) }
	request := func(order int64) string { return fmt.Sprintf("fulfilment_request:%s:%d", shop, order) }
	return presetCase{
		preset: "shopify-orders", prefix: "psh", receiver: generator.ReceiverN8N, table: "shop_orders",
		sign: shopifySign(presetSecret), forge: shopifySign("attacker"),
		same: paid("wh-1", base+1), sameEffect: fulfil(base + 1), sameTask: request(base + 1),
		// Shopify's duplicate of one event with a new X-Shopify-Webhook-Id
		// (or a second subscription to the topic).
		two: [2]delivery{paid("wh-2a", base+2), paid("wh-2b", base+2)}, twoEffect: fulfil(base + 2), twoTask: request(base + 2),
		early: shopifyRefund("wh-3r", 9300003, base+3, "5.00"), earlyWhy: "order_unknown", enabling: []delivery{paid("wh-3p", base+3)},
		setup4: []delivery{paid("wh-4p", base+4)}, killed: shopifyRefund("wh-4r", 9300004, base+4, "7.25"),
		lockID: strconv.Itoa(base + 4), lockAccount: shop,
		killEffect: fmt.Sprintf("refund:%s:%d:9300004", shop, base+4), killTask: "refund_notice:" + shop + ":9300004",
		uncertain:     []delivery{paid("wh-5p", base+5), shopifyOrder("orders/cancelled", "wh-5c", base+5, "refunded", map[string]any{"cancelled_at": time.Now().UTC().Format(time.RFC3339), "cancel_reason": "customer"})},
		uncertainTask: fmt.Sprintf("fulfilment_cancel:%s:%d", shop, base+5),
		irrelevant:    shopifyDelivery("products/update", "wh-6", map[string]any{"id": 632910392, "title": "Wool scarf"}),
		missing:       shopifyDelivery("refunds/create", "wh-7", map[string]any{"id": 9300007, "transactions": []any{}}),
		missingWhy:    "missing_order_id",
		concurrent:    paid("wh-8", base+8), concurrentEffect: fulfil(base + 8), concurrentTask: request(base + 8),
	}
}

func githubDelivery(event, deliveryID string, body map[string]any) delivery {
	b, _ := json.Marshal(body)
	return delivery{body: b, header: map[string]string{
		"X-GitHub-Event": event, "X-GitHub-Delivery": deliveryID, "X-GitHub-Hook-ID": "520001",
		"X-GitHub-Hook-Installation-Target-Type": "integration", "X-GitHub-Hook-Installation-Target-ID": "88001",
		"User-Agent": "GitHub-Hookshot/e2e",
	}}
}

const githubInstallation = 4470001

func githubDeployment(deliveryID string, id int) delivery {
	return githubDelivery("deployment", deliveryID, map[string]any{
		"action": "created",
		"deployment": map[string]any{"id": id, "sha": "5f1c9a7e3b2d4c6e8a0b1c2d3e4f5a6b7c8d9e0f", "ref": "main", "task": "deploy",
			"environment": "production", "creator": map[string]any{"login": "octo-dev", "id": 583231}},
		"repository": map[string]any{"id": 91001, "full_name": "octo-org/shop-api"}, "installation": map[string]any{"id": githubInstallation},
		"sender": map[string]any{"login": "octo-dev"},
	})
}

func githubStatus(deliveryID string, deployment, status int, state string) delivery {
	return githubDelivery("deployment_status", deliveryID, map[string]any{
		"action":            "created",
		"deployment_status": map[string]any{"id": status, "state": state, "environment": "production", "target_url": fmt.Sprintf("https://ci.example.com/runs/%d", status)},
		"deployment":        map[string]any{"id": deployment, "sha": "5f1c9a7e", "ref": "main", "environment": "production"},
		"repository":        map[string]any{"id": 91001, "full_name": "octo-org/shop-api"}, "installation": map[string]any{"id": githubInstallation},
	})
}

func githubDeploymentsCase() presetCase {
	const base = 2700000
	settle := func(id int) string { return fmt.Sprintf("settle_deployment:%d", id) }
	announce := func(id int) string { return fmt.Sprintf("deploy_announcement:%d", id) }
	uuid := func(n int) string { return fmt.Sprintf("0c1e5a00-cc78-11ee-8a1b-%012d", n) }
	return presetCase{
		preset: "github-deployments", prefix: "pgh", receiver: generator.ReceiverN8N, table: "deployments",
		sign: githubSign(presetSecret), forge: githubSign("attacker"),
		same: githubDeployment(uuid(1), base+1), sameEffect: fmt.Sprintf("start_deployment:%d", base+1), sameTask: fmt.Sprintf("deploy_job:%d", base+1),
		// The deploying service reports success twice (two statuses): one
		// settlement, one announcement.
		setup2:    []delivery{githubDeployment(uuid(20), base+2)},
		two:       [2]delivery{githubStatus(uuid(21), base+2, 8100021, "success"), githubStatus(uuid(22), base+2, 8100022, "success")},
		twoEffect: settle(base + 2), twoTask: announce(base + 2),
		early: githubStatus(uuid(31), base+3, 8100031, "success"), earlyWhy: "deployment_unknown", enabling: []delivery{githubDeployment(uuid(30), base+3)},
		setup4: []delivery{githubDeployment(uuid(40), base+4)}, killed: githubStatus(uuid(41), base+4, 8100041, "failure"),
		lockID: strconv.Itoa(base + 4), lockAccount: strconv.Itoa(githubInstallation), killEffect: settle(base + 4), killTask: announce(base + 4),
		uncertain:     []delivery{githubDeployment(uuid(50), base+5)},
		uncertainTask: fmt.Sprintf("deploy_job:%d", base+5),
		irrelevant:    githubDelivery("push", uuid(60), map[string]any{"ref": "refs/heads/main", "installation": map[string]any{"id": githubInstallation}}),
		missing: githubDelivery("deployment", uuid(70), map[string]any{"action": "created", "deployment": map[string]any{"id": base + 7, "sha": "ab12", "ref": "main"},
			"repository": map[string]any{"full_name": "octo-org/shop-api"}, "installation": map[string]any{"id": githubInstallation}}),
		missingWhy: "missing_environment",
		concurrent: githubDeployment(uuid(80), base+8), concurrentEffect: fmt.Sprintf("start_deployment:%d", base+8), concurrentTask: fmt.Sprintf("deploy_job:%d", base+8),
	}
}

// The Standard Webhooks case's keys: keysvc holds a whsec_ secret (v1,
// HMAC) and a whpk_ public key (v1a, ed25519); the test signs with the
// secret and the private key. Deliveries alternate between the two, and a
// rotated signature (an old key's first) stays valid.
var (
	swhSecret           = "whsec_" + base64.StdEncoding.EncodeToString([]byte("e2e-standard-webhooks-secret-32b"))
	swhPublic, swhPriv  = mustEd25519()
	swhOldPub, swhOldPr = mustEd25519()
)

func mustEd25519() (ed25519.PublicKey, ed25519.PrivateKey) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return pub, priv
}

// swhSign signs as the Standard Webhooks spec says, v1 with secret and v1a
// with priv (either may be left out), at a time of the caller's (zero:
// now), after the signatures of extra (a retired key's).
func swhSign(secret string, priv ed25519.PrivateKey, at time.Time, extra ...string) func(delivery) map[string]string {
	sign := signer(signature.ProviderStandardWebhooks, signature.Unsigned{Secret: secret, PrivateKey: priv, Timestamp: at})
	return func(d delivery) map[string]string {
		h := sign(d)
		h["Webhook-Signature"] = strings.Join(append(extra, h["Webhook-Signature"]), " ")
		return h
	}
}

func swhDelivery(msg, typ string, data map[string]any) delivery {
	b, _ := json.Marshal(map[string]any{"type": typ, "timestamp": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), "data": data})
	return delivery{body: b, header: map[string]string{"webhook-id": msg}}
}

func swhInvoice(msg, id string, amount int) delivery {
	return swhDelivery(msg, "invoice.created", map[string]any{"id": id, "customer_id": "cus_e2e", "amount_due": amount, "currency": "eur"})
}

func swhPaid(msg, id string, amount int) delivery {
	return swhDelivery(msg, "invoice.paid", map[string]any{"id": id, "payment_id": "pay_" + id, "amount_paid": amount, "currency": "eur"})
}

func standardWebhooksCase() presetCase {
	const account = "billing-e2e"
	var n int
	var mu sync.Mutex
	// Alternate the schemes: v1 (HMAC), v1a (ed25519), and a rotated
	// header with a signature by a retired key first.
	sign := func(d delivery) map[string]string {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		switch i % 3 {
		case 0:
			return swhSign(swhSecret, nil, time.Time{})(d)
		case 1:
			return swhSign("", swhPriv, time.Time{})(d)
		default:
			old := swhSign("", swhOldPr, time.Time{})(d)["Webhook-Signature"]
			return swhSign("", swhPriv, time.Time{}, old)(d)
		}
	}
	pay := func(id string) string { return "pay_invoice:" + account + ":" + id }
	receipt := func(id string) string { return "invoice_receipt:" + account + ":" + id }
	return presetCase{
		preset: "standardwebhooks-generic", prefix: "psw", receiver: generator.ReceiverKeysvc, table: "invoices",
		keysvcSecrets: []string{swhSecret, "whpk_" + base64.StdEncoding.EncodeToString(swhPublic)}, account: account,
		sign:  sign,
		forge: swhSign("whsec_"+base64.StdEncoding.EncodeToString([]byte("an-attacker-secret-of-32-bytes!!")), swhOldPr, time.Time{}),
		stale: swhSign(swhSecret, swhPriv, time.Now().Add(-time.Hour)),
		same:  swhInvoice("msg_e2e_1", "inv_e2e_1", 900), sameEffect: "open_invoice:" + account + ":inv_e2e_1",
		// The invoice's event and the payment's propose one payment.
		setup2: []delivery{swhInvoice("msg_e2e_20", "inv_e2e_2", 1500)},
		two: [2]delivery{swhPaid("msg_e2e_21", "inv_e2e_2", 1500),
			swhDelivery("msg_e2e_22", "payment.succeeded", map[string]any{"id": "pay_inv_e2e_2", "invoice_id": "inv_e2e_2", "amount": 1500, "currency": "eur"})},
		twoEffect: pay("inv_e2e_2"), twoTask: receipt("inv_e2e_2"),
		early: swhPaid("msg_e2e_31", "inv_e2e_3", 700), earlyWhy: "invoice_unknown", enabling: []delivery{swhInvoice("msg_e2e_30", "inv_e2e_3", 700)},
		setup4: []delivery{swhInvoice("msg_e2e_40", "inv_e2e_4", 2500)}, killed: swhPaid("msg_e2e_41", "inv_e2e_4", 2500),
		lockID: "inv_e2e_4", lockAccount: account, killEffect: pay("inv_e2e_4"), killTask: receipt("inv_e2e_4"),
		uncertain:     []delivery{swhInvoice("msg_e2e_50", "inv_e2e_5", 300), swhPaid("msg_e2e_51", "inv_e2e_5", 300)},
		uncertainTask: receipt("inv_e2e_5"),
		irrelevant:    swhDelivery("msg_e2e_60", "customer.updated", map[string]any{"id": "cus_e2e"}),
		missing:       swhDelivery("msg_e2e_70", "invoice.created", map[string]any{"id": "inv_e2e_7", "amount_due": 100, "currency": "eur"}),
		missingWhy:    "missing_customer",
		concurrent:    swhInvoice("msg_e2e_80", "inv_e2e_8", 4200), concurrentEffect: "open_invoice:" + account + ":inv_e2e_8",
	}
}

// startPresetKeysvc starts keysvc's inbox in front of the preset's target
// workflow, holding the case's signing secrets, and returns where the
// provider posts.
func startPresetKeysvc(t *testing.T, c presetCase, opts generator.Options) string {
	t.Helper()
	dir := t.TempDir()
	keys := filepath.Join(dir, "signing-secrets")
	if err := os.WriteFile(keys, []byte(strings.Join(c.keysvcSecrets, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	endpoint := map[string]any{
		"name": c.prefix, "provider": c.rules().Provider.Verify, "secret_file": keys,
		"target": st.WebhookURL + "/webhook/" + opts.WebhookPath, "events": c.rules().Types(), "max_attempts": 200,
	}
	if c.account != "" {
		endpoint["account"] = c.account
	}
	raw, _ := json.Marshal(map[string]any{"endpoints": []map[string]any{endpoint}})
	file := filepath.Join(dir, "endpoints.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	k := launchKeysvc(t, c.prefix, []string{"--table", c.prefix + "_processed_events", "--create-schema", "--endpoints", file, "--inbox-schema", c.prefix,
		"--inbox-backoff", "200ms", "--inbox-max-backoff", "2s", "--inbox-recover-after", "20s", "--inbox-delivery-timeout", "10s"}, nil)
	return k.url + "/v1/inbox/" + c.prefix
}
