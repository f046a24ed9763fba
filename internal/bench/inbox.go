package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/lab"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/jackc/pgx/v5/pgxpool"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"
)

// InboxOptions configure Inbox.
type InboxOptions struct {
	// Senders lists the numbers of concurrent senders; default 1, 2, 4, 8.
	Senders []int
	// Events per run; default 150.
	Events int
	// Burst is the number of events sent at once (by BurstSenders
	// senders) after the runs; default 1,000, -1 for none.
	Burst int
	// NodeSamples is the number of deliveries, from one sender, whose
	// executions n8n keeps so that their times per node are read (the
	// receiver's and the workflow without inbox's); default 50, -1 for
	// none.
	NodeSamples int
	// Receipts are the n8n receivers measured, by what builds their
	// receipt: generator.HashingCodeNode (the Code node receiver) and
	// generator.HashingNode (the community node's), each in a lab of its
	// own; default both.
	Receipts []generator.Hashing
	Progress io.Writer
}

// BurstSenders send a burst: as many deliveries in flight as a provider
// retrying a backlog after an outage keeps open.
const BurstSenders = 16

// Series of the inbox part.
const (
	inboxBaseline = "no inbox: Webhook → UPDATE orders → Respond"
	inboxN8N      = "inbox pattern, n8n receiver"
	// inboxNode is the n8n receiver whose receipt the community node saves
	// (--hashing node), measured in a lab of its own against a baseline of
	// that lab.
	inboxNode            = "inbox pattern, n8n receiver with the community node"
	inboxNodeBaseline    = "no inbox (the community node's lab)"
	inboxKeysvc          = "inbox pattern, keysvc's inbox in front"
	inboxEffectsDeadline = 10 * time.Minute
	// settle is the pause before a run, so that the workers and
	// dispatchers of the run before (which wait 2 s for more work) have
	// ended and are not counted as this run's, nor saved by it.
	settle = 3 * time.Second
)

// Parts of the report the inbox fills.
const (
	partInbox = "inbox"
	partBurst = "inbox-burst"
)

// Inbox measures the inbox pattern in real n8n on durable PostgreSQL: for
// each number of senders, Events payment_intent.succeeded events (each
// confirming an order of its own) sent to the generated receiver, the time
// each delivery waited for its answer (the provider's wait), the events per
// second from the first send to the last order confirmed by the worker, and
// the executions n8n started meanwhile (from n8n's own execution ids);
// then a burst of Burst events; then the same with the community node
// saving the receipt (--hashing node), and behind keysvc's inbox. The
// baseline is the same business write in a workflow without an inbox, which
// confirms the order before it answers, run in the same lab. Each lab is
// started as `idemhook up` starts it.
func Inbox(ctx context.Context, opts InboxOptions) (*Report, error) {
	m := &inboxRun{opts: opts.withDefaults(), run: time.Now().Unix(),
		rep: &Report{Date: time.Now().UTC(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), PostgreSQL: sandbox.PostgresMajor, N8N: sandbox.N8NVersion}}
	for _, s := range m.opts.Senders {
		m.plans = append(m.plans, inboxPlan{partInbox, s, m.opts.Events})
	}
	if m.opts.Burst > 0 {
		m.plans = append(m.plans, inboxPlan{partBurst, BurstSenders, m.opts.Burst})
	}
	var keysvcBaseline string
	for _, rc := range []inboxReceiver{
		{inboxN8N, inboxBaseline, "idemhook up --pattern inbox", generator.HashingCodeNode},
		{inboxNode, inboxNodeBaseline, "idemhook up --pattern inbox --hashing node", generator.HashingNode},
	} {
		if !slices.Contains(m.opts.Receipts, rc.hashing) {
			continue
		}
		if keysvcBaseline == "" {
			keysvcBaseline = rc.baseline
		}
		if err := m.n8nReceiver(ctx, rc); err != nil {
			return nil, err
		}
	}
	if err := m.keysvcReceiver(ctx, keysvcBaseline); err != nil {
		return nil, err
	}
	setRatios(m.rep.Results)
	return m.rep, nil
}

func (o InboxOptions) withDefaults() InboxOptions {
	if len(o.Senders) == 0 {
		o.Senders = []int{1, 2, 4, 8}
	}
	if o.Events == 0 {
		o.Events = 150
	}
	if o.Burst == 0 {
		o.Burst = 1000
	}
	if o.NodeSamples == 0 {
		o.NodeSamples = 50
	}
	if len(o.Receipts) == 0 {
		o.Receipts = []generator.Hashing{generator.HashingCodeNode, generator.HashingNode}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// inboxRun is one Inbox measurement: its plans (a run per number of
// senders, then the burst), and the report it fills.
type inboxRun struct {
	opts  InboxOptions
	run   int64 // names this run's events and orders
	plans []inboxPlan
	rep   *Report
}

type inboxPlan struct {
	part    string
	senders int
	events  int
}

// inboxReceiver is an n8n receiver measured in a lab of its own: the series,
// its baseline, the command that starts its lab, and what builds its
// receipt.
type inboxReceiver struct {
	series, baseline, command string
	hashing                   generator.Hashing
}

func (m *inboxRun) step(format string, args ...any) {
	fmt.Fprintf(m.opts.Progress, "bench: "+format+"\n", args...)
}

// n8nReceiver measures, in a lab started for rc, each plan against the
// workflow without an inbox, then n8n's time per node of both.
func (m *inboxRun) n8nReceiver(ctx context.Context, rc inboxReceiver) error {
	m.step("inbox: the lab with n8n receiving (%s)", rc.command)
	return inLab(ctx, generator.Options{Pattern: generator.PatternInbox, Hashing: rc.hashing}, m.opts.Progress, func(l *lab.Lab) error {
		baseline, err := deployInboxBaseline(ctx, l)
		if err != nil {
			return err
		}
		var receiver deploy.Deployed
		for _, d := range l.Deployed {
			if d.URL != "" {
				receiver = d
			}
		}
		for _, p := range m.plans {
			m.step("inbox: %d events from %d senders, without inbox", p.events, p.senders)
			base, err := sendEvents(ctx, l, baseline.URL, "", fmt.Sprintf("b%d-%s-%s-%d", m.run, rc.hashing, p.part, p.senders), p.senders, p.events)
			if err != nil {
				return err
			}
			m.step("inbox: %d events from %d senders, to the inbox pattern's receiver (%s)", p.events, p.senders, rc.series)
			in, err := sendEvents(ctx, l, receiver.URL, l.SigningSecret, fmt.Sprintf("i%d-%s-%s-%d", m.run, rc.hashing, p.part, p.senders), p.senders, p.events)
			if err != nil {
				return err
			}
			base.Part, base.Name = p.part, rc.baseline
			in.Part, in.Name, in.Baseline = p.part, rc.series, rc.baseline
			m.rep.Results = append(m.rep.Results, base, in)
		}
		if m.opts.NodeSamples < 0 {
			return nil
		}
		return m.nodeTimes(ctx, l, rc, baseline, receiver)
	})
}

// nodeTimes reads n8n's time per node of the workflow without inbox and of
// the receiver, last: a workflow that keeps its executions' data is slower.
func (m *inboxRun) nodeTimes(ctx context.Context, l *lab.Lab, rc inboxReceiver, baseline, receiver deploy.Deployed) error {
	for _, w := range []struct {
		series string
		d      deploy.Deployed
		secret string
	}{{rc.baseline, baseline, ""}, {rc.series, receiver, l.SigningSecret}} {
		m.step("inbox: %d events from 1 sender, %s, n8n's time per node", m.opts.NodeSamples, w.series)
		times, err := inboxNodeTimes(ctx, l, w.series, w.d.ID, w.d.URL, w.secret, fmt.Sprintf("n%d-%s", m.run, w.d.ID), m.opts.NodeSamples)
		if err != nil {
			return err
		}
		m.rep.NodeTimes = append(m.rep.NodeTimes, times...)
	}
	return nil
}

// keysvcReceiver measures each plan in the lab with keysvc's inbox in
// front, against the workflow without inbox of the first lab measured.
func (m *inboxRun) keysvcReceiver(ctx context.Context, baseline string) error {
	m.step("inbox: the lab with keysvc's inbox in front (idemhook up --pattern inbox --receiver keysvc)")
	return inLab(ctx, generator.Options{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{Receiver: generator.ReceiverKeysvc}}, m.opts.Progress, func(k *lab.Lab) error {
		for _, p := range m.plans {
			m.step("inbox: %d events from %d senders, to keysvc's inbox", p.events, p.senders)
			r, err := sendEvents(ctx, k, k.InboxURL, k.SigningSecret, fmt.Sprintf("k%d-%s-%d", m.run, p.part, p.senders), p.senders, p.events)
			if err != nil {
				return err
			}
			r.Part, r.Name, r.Baseline = p.part, inboxKeysvc, baseline
			m.rep.Results = append(m.rep.Results, r)
		}
		return nil
	})
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

// deployInboxBaseline deploys the user's workflow without an inbox: the
// business write of the pattern's effect (the order confirmed) before the
// answer, on the lab's credential.
func deployInboxBaseline(ctx context.Context, l *lab.Lab) (deploy.Deployed, error) {
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
		// Like the inbox's receiver, it keeps no data of a successful
		// execution: with n8n's default, which keeps it, the baseline paid
		// for a write the receiver does not make (until 2026-12-05).
		"settings": map[string]any{"executionOrder": "v1", "saveDataSuccessExecution": generator.SaveNone}})
	ws, err := deploy.Load(map[string][]byte{"no-inbox.json": doc})
	if err != nil {
		return deploy.Deployed{}, err
	}
	done, err := deploy.Deploy(ctx, l.API, ws, deploy.Options{})
	if err != nil {
		return deploy.Deployed{}, fmt.Errorf("deploy the workflow without inbox: %w", err)
	}
	return done[0], nil
}

// sendEvents creates n orders named prefix-i, sends one signed (when
// secret is set) payment_intent.succeeded for each from senders
// goroutines, and waits until every order is confirmed. Its result has the
// events per second from the first send to the last order confirmed, each
// delivery's wait (p50, p95 and p99), and the n8n executions started per
// event meanwhile.
func sendEvents(ctx context.Context, l *lab.Lab, url, secret, prefix string, senders, n int) (Result, error) {
	r := Result{Concurrency: senders, Events: n, Unit: "/s"}
	db, err := pgxpool.New(ctx, l.DatabaseURL)
	if err != nil {
		return r, err
	}
	defer db.Close()
	if _, err := db.Exec(ctx, "INSERT INTO orders (id, amount, currency) SELECT $1 || '-' || g, 100, 'eur' FROM generate_series(1, $2::int) g", prefix, n); err != nil {
		return r, fmt.Errorf("orders: %w", err)
	}
	time.Sleep(settle)
	before, err := l.ExecutionsStarted(ctx)
	if err != nil {
		return r, err
	}
	start := time.Now()
	lat, err := deliverPayments(ctx, url, secret, prefix, senders, n)
	if err != nil {
		return r, err
	}
	if err := awaitConfirmed(ctx, db, prefix, n); err != nil {
		return r, err
	}
	applied := time.Since(start)
	after, err := l.ExecutionsStarted(ctx)
	if err != nil {
		return r, err
	}
	r.Throughput = float64(n) / applied.Seconds()
	r.LastEffect = applied
	r.P50, r.P99 = percentiles(lat)
	r.P95 = percentile(lat, 95)
	r.Latencies = lat
	r.Executions = float64(after-before) / float64(n)
	return r, nil
}

// deliverPayments sends n payment_intent.succeeded events, the i-th
// confirming order prefix-i, from senders concurrent senders (signed with
// secret when set), and returns the time each waited for its answer. The
// first answer other than 200 stops its sender and is the error.
func deliverPayments(ctx context.Context, url, secret, prefix string, senders, n int) ([]time.Duration, error) {
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i + 1
	}
	close(jobs)
	var mu sync.Mutex
	var lat []time.Duration
	var failure error
	var wg sync.WaitGroup
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				d, err := deliverPayment(ctx, client, url, secret, prefix, i)
				mu.Lock()
				failure = cmp.Or(failure, err)
				lat = append(lat, d)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return lat, failure
}

// deliverPayment sends the i-th event of deliverPayments and returns how
// long its answer took.
func deliverPayment(ctx context.Context, client *http.Client, url, secret, prefix string, i int) (time.Duration, error) {
	body := fmt.Appendf(nil, `{"id":"evt_%s_%d","object":"event","type":"payment_intent.succeeded","created":%d,"data":{"object":{"id":"pi_%s_%d","object":"payment_intent","amount":100,"amount_received":100,"currency":"eur","status":"succeeded","metadata":{"order_id":"%s-%d"}}}}`,
		prefix, i, time.Now().Unix(), prefix, i, prefix, i)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("Stripe-Signature", stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()}).Header)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s answered %d", url, resp.StatusCode)
		}
	}
	return time.Since(start), err
}

// awaitConfirmed waits until the n orders of prefix are confirmed, for at
// most inboxEffectsDeadline.
func awaitConfirmed(ctx context.Context, db *pgxpool.Pool, prefix string, n int) error {
	for deadline := time.Now().Add(inboxEffectsDeadline); ; time.Sleep(20 * time.Millisecond) {
		var confirmed int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM orders WHERE id LIKE $1 || '-%' AND state = 'confirmed'", prefix).Scan(&confirmed); err != nil {
			return err
		}
		if confirmed == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d orders confirmed %s after the last delivery", confirmed, n, inboxEffectsDeadline)
		}
	}
}

// inboxMarkdown renders the inbox's parts: the runs by senders, and the
// burst.
func inboxMarkdown(results []Result) string {
	var b strings.Builder
	find := func(part, name string, senders int) *Result {
		for i := range results {
			if x := &results[i]; x.Part == part && x.Name == name && x.Concurrency == senders {
				return x
			}
		}
		return nil
	}
	ratio := func(v float64) string {
		if v <= 0 {
			return ""
		}
		return fmt.Sprintf("**%.2f**", v)
	}
	p50Ratio := func(x Result) string {
		if base := find(x.Part, x.Baseline, x.Concurrency); base != nil && base.P50 > 0 && x.Baseline != "" {
			return ratio(float64(x.P50) / float64(base.P50))
		}
		return ""
	}
	var runs, bursts []Result
	for _, x := range results {
		switch x.Part {
		case partInbox:
			runs = append(runs, x)
		case partBurst:
			bursts = append(bursts, x)
		}
	}
	if len(runs) > 0 {
		fmt.Fprintf(&b, "\n**The inbox pattern in n8n: %d new events per run, each confirming an order of its own (receipt: the provider's wait for its answer)**\n\n", runs[0].Events)
		b.WriteString("| series | senders | events/s to the effect | × without inbox | receipt p50 | receipt p95 | p50 × without inbox | n8n executions per event |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, x := range runs {
			fmt.Fprintf(&b, "| %s | %d | %.1f /s | %s | %s | %s | %s | %.2f |\n", x.Name, x.Concurrency, x.Throughput, ratio(x.Ratio), ms(x.P50), ms(x.P95), p50Ratio(x), x.Executions)
		}
	}
	if len(bursts) > 0 {
		fmt.Fprintf(&b, "\n**A burst: %d events sent at once (%d senders), until the last effect is applied**\n\n", bursts[0].Events, bursts[0].Concurrency)
		b.WriteString("| series | last effect after | events/s to the effect | × without inbox | receipt p50 | receipt p95 | n8n executions per event |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, x := range bursts {
			fmt.Fprintf(&b, "| %s | %.1f s | %.1f /s | %s | %s | %s | %.2f |\n", x.Name, x.LastEffect.Seconds(), x.Throughput, ratio(x.Ratio), ms(x.P50), ms(x.P95), x.Executions)
		}
	}
	return b.String()
}
