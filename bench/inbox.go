package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/idemhook/idemhook/deploy"
	"github.com/idemhook/idemhook/generator"
	"github.com/idemhook/idemhook/internal/stack"
	"github.com/idemhook/idemhook/lab"
	"github.com/jackc/pgx/v5/pgxpool"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"
)

// InboxOptions configure Inbox.
type InboxOptions struct {
	// Senders lists the numbers of concurrent senders; default 1, 2, 4.
	Senders []int
	// Events per run; default 200.
	Events   int
	Progress io.Writer
}

// Series of the inbox part.
const (
	inboxBaseline        = "no inbox: Webhook → UPDATE orders → Respond"
	inboxReceipt         = "inbox pattern: receipt (answered 200)"
	inboxEffect          = "inbox pattern: receipt → effect applied"
	inboxKeysvcReceipt   = "keysvc's inbox in front: receipt (answered 200)"
	inboxKeysvcEffect    = "keysvc's inbox in front: receipt → forward → effect applied"
	inboxEffectsDeadline = 10 * time.Minute
)

// Inbox measures the inbox pattern in real n8n on durable PostgreSQL: for
// each number of senders, Events payment_intent.succeeded events (each
// confirming an order of its own) sent to the generated receiver, the time
// each delivery waited for its answer (the provider's wait), and the events
// per second from the first send to the last order confirmed by the
// worker; then the same behind keysvc's inbox. The baseline is the same
// business write in a workflow without an inbox, which confirms the order
// before it answers. Each lab is started as `idemhook up` starts it.
func Inbox(ctx context.Context, opts InboxOptions) (*Report, error) {
	if len(opts.Senders) == 0 {
		opts.Senders = []int{1, 2, 4}
	}
	if opts.Events == 0 {
		opts.Events = 200
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	step := func(format string, args ...any) { fmt.Fprintf(opts.Progress, "bench: "+format+"\n", args...) }
	rep := &Report{Date: time.Now().UTC(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), PostgreSQL: stack.PostgresMajor, N8N: stack.N8NVersion}
	run := time.Now().Unix()

	step("inbox: the lab with n8n receiving (idemhook up --pattern inbox)")
	err := inLab(ctx, generator.Options{Pattern: generator.PatternInbox}, opts.Progress, func(l *lab.Lab) error {
		baselineURL, err := deployInboxBaseline(ctx, l)
		if err != nil {
			return err
		}
		receiver := ""
		for _, d := range l.Deployed {
			if d.URL != "" {
				receiver = d.URL
			}
		}
		for _, s := range opts.Senders {
			step("inbox: %d events from %d senders, without inbox", opts.Events, s)
			base, _, err := sendEvents(ctx, l, baselineURL, "", fmt.Sprintf("b%d-%d", run, s), s, opts.Events)
			if err != nil {
				return err
			}
			step("inbox: %d events from %d senders, to the inbox pattern's receiver", opts.Events, s)
			receipt, effect, err := sendEvents(ctx, l, receiver, l.SigningSecret, fmt.Sprintf("i%d-%d", run, s), s, opts.Events)
			if err != nil {
				return err
			}
			base.Name = inboxBaseline
			rep.Results = append(rep.Results, base, against(receipt, inboxReceipt), against(effect, inboxEffect))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	step("inbox: the lab with keysvc's inbox in front (idemhook up --pattern inbox --receiver keysvc)")
	err = inLab(ctx, generator.Options{Pattern: generator.PatternInbox, Receiver: generator.ReceiverKeysvc}, opts.Progress, func(k *lab.Lab) error {
		for _, s := range opts.Senders {
			step("inbox: %d events from %d senders, to keysvc's inbox", opts.Events, s)
			receipt, effect, err := sendEvents(ctx, k, k.InboxURL, k.SigningSecret, fmt.Sprintf("k%d-%d", run, s), s, opts.Events)
			if err != nil {
				return err
			}
			rep.Results = append(rep.Results, against(receipt, inboxKeysvcReceipt), against(effect, inboxKeysvcEffect))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	setRatios(rep.Results)
	return rep, nil
}

// inLab runs measure in a lab started for o, and stops the lab after.
func inLab(ctx context.Context, o generator.Options, progress io.Writer, measure func(*lab.Lab) error) error {
	l, err := lab.Start(ctx, o, "", progress)
	if err != nil {
		return err
	}
	defer l.Close()
	return measure(l)
}

// against names r and compares it with the workflow without inbox.
func against(r Result, name string) Result {
	r.Name, r.Baseline = name, inboxBaseline
	return r
}

// deployInboxBaseline deploys the user's workflow without an inbox: the
// business write of the pattern's effect (the order confirmed) before the
// answer, on the lab's credential.
func deployInboxBaseline(ctx context.Context, l *lab.Lab) (string, error) {
	const path = "bench-no-inbox"
	nodes := []map[string]any{
		{"parameters": map[string]any{"httpMethod": "POST", "path": path, "responseMode": "responseNode", "options": map[string]any{}},
			"id": uuidOf(path + "/webhook"), "name": "Webhook", "type": "n8n-nodes-base.webhook",
			"typeVersion": generator.TypeVersions["n8n-nodes-base.webhook"], "position": []int{0, 300}, "webhookId": uuidOf(path + "/webhookId")},
		{"parameters": map[string]any{"operation": "executeQuery",
			"query":   "UPDATE orders SET state = 'confirmed' WHERE id = $1",
			"options": map[string]any{"queryReplacement": "={{ [ $json.body.data.object.metadata.order_id ] }}"}},
			"id": uuidOf(path + "/business"), "name": "Confirm the order", "type": "n8n-nodes-base.postgres",
			"typeVersion": generator.TypeVersions["n8n-nodes-base.postgres"], "position": []int{220, 300},
			"credentials": map[string]any{"postgres": map[string]any{"id": nil, "name": generator.DefaultCredentialName}}},
		{"parameters": map[string]any{"respondWith": "json", "responseBody": `{"status":"processed"}`, "options": map[string]any{}},
			"id": uuidOf(path + "/respond"), "name": "Respond", "type": "n8n-nodes-base.respondToWebhook",
			"typeVersion": generator.TypeVersions["n8n-nodes-base.respondToWebhook"], "position": []int{440, 300}},
	}
	link := func(to string) map[string]any {
		return map[string]any{"main": [][]map[string]any{{{"node": to, "type": "main", "index": 0}}}}
	}
	doc, _ := json.Marshal(map[string]any{"id": "idemhookBenchNoInbox", "name": "bench " + path, "nodes": nodes,
		"connections": map[string]any{"Webhook": link("Confirm the order"), "Confirm the order": link("Respond")},
		"settings":    map[string]any{"executionOrder": "v1"}})
	ws, err := deploy.Load(map[string][]byte{"no-inbox.json": doc})
	if err != nil {
		return "", err
	}
	done, err := deploy.Deploy(ctx, l.API, ws, deploy.Options{})
	if err != nil {
		return "", fmt.Errorf("deploy the workflow without inbox: %w", err)
	}
	return done[0].URL, nil
}

// sendEvents creates n orders named prefix-i, sends one signed (when
// secret is set) payment_intent.succeeded for each from senders
// goroutines, and waits until every order is confirmed. It returns the
// receipts (events per second answered, each delivery's wait) and the
// effects (events per second from the first send to the last order
// confirmed).
func sendEvents(ctx context.Context, l *lab.Lab, url, secret, prefix string, senders, n int) (receipt, effect Result, err error) {
	db, err := pgxpool.New(ctx, l.DatabaseURL)
	if err != nil {
		return receipt, effect, err
	}
	defer db.Close()
	if _, err := db.Exec(ctx, "INSERT INTO orders (id, amount, currency) SELECT $1 || '-' || g, 100, 'eur' FROM generate_series(1, $2::int) g", prefix, n); err != nil {
		return receipt, effect, fmt.Errorf("orders: %w", err)
	}
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i + 1
	}
	close(jobs)
	var mu sync.Mutex
	var lat []time.Duration
	var failure error
	var wg sync.WaitGroup
	client := &http.Client{Timeout: time.Minute}
	start := time.Now()
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				body := fmt.Appendf(nil, `{"id":"evt_%s_%d","object":"event","type":"payment_intent.succeeded","created":%d,"data":{"object":{"id":"pi_%s_%d","object":"payment_intent","amount":100,"amount_received":100,"currency":"eur","status":"succeeded","metadata":{"order_id":"%s-%d"}}}}`,
					prefix, i, time.Now().Unix(), prefix, i, prefix, i)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if secret != "" {
					req.Header.Set("Stripe-Signature", stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()}).Header)
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("%s answered %d", url, resp.StatusCode)
					}
				}
				d := time.Since(t0)
				mu.Lock()
				if err != nil && failure == nil {
					failure = err
				}
				lat = append(lat, d)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	received := time.Since(start)
	if failure != nil {
		return receipt, effect, failure
	}
	for deadline := time.Now().Add(inboxEffectsDeadline); ; time.Sleep(20 * time.Millisecond) {
		var confirmed int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM orders WHERE id LIKE $1 || '-%' AND state = 'confirmed'", prefix).Scan(&confirmed); err != nil {
			return receipt, effect, err
		}
		if confirmed == n {
			break
		}
		if time.Now().After(deadline) {
			return receipt, effect, fmt.Errorf("%d of %d orders confirmed %s after the last delivery", confirmed, n, inboxEffectsDeadline)
		}
	}
	applied := time.Since(start)
	receipt = throughputResult("inbox", "", senders, n, received, lat)
	receipt.Note = "p95 of the wait " + ms(percentile(lat, 95))
	effect = Result{Part: "inbox", Concurrency: senders, Throughput: float64(n) / applied.Seconds(), Unit: "/s"}
	return receipt, effect, nil
}
