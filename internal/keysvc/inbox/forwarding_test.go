package inbox_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/keysvc/inbox/inboxtest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// metricValue reads one series of the inbox's metrics (0 when absent).
func metricValue(t *testing.T, in *inbox.Inbox, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(in.Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// deliveryKinds lists the kinds of entry id's delivery rows, oldest first.
func deliveryKinds(t *testing.T, in *inbox.Inbox, endpoint string, id int64) []string {
	t.Helper()
	e, err := in.Entry(context.Background(), endpoint, id)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range e.Deliveries {
		kinds = append(kinds, d.Kind)
	}
	return kinds
}

// A target's 2xx that keysvc cannot record, because PostgreSQL stopped
// between the target's answer and the bookkeeping, is recorded once
// PostgreSQL is back, and the event is not forwarded again. The restart is
// real (SIGQUIT, as `pg_ctl stop -m immediate`); the target times it.
func TestInboxRecordsAnAcknowledgementAcrossARestart(t *testing.T) {
	var calls atomic.Int64
	restarted := make(chan error, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			if err := pg.StopPostgres(context.Background()); err != nil {
				t.Error(err)
			}
			go func() {
				time.Sleep(3 * time.Second)
				restarted <- pg.StartPostgres(context.Background())
			}()
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer target.Close()
	in := openInbox(t, "ks_inbox_restart", fmt.Sprintf(`{"endpoints":[{"name":"stripe","target":%q}]}`, target.URL),
		inbox.Options{Backoff: 50 * time.Millisecond, RecoverAfter: time.Hour})
	id := receive(t, in, "stripe", `{"id":"evt_restart","type":"t"}`)
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	waitEntry(t, in, "stripe", id, "forwarded", 30*time.Second)
	time.Sleep(2 * time.Second) // room for a second forward, were there one
	e, _ := in.Entry(context.Background(), "stripe", id)
	late := metricValue(t, in, "keysvc_inbox_late_acks_total", map[string]string{"endpoint": "stripe"})
	t.Logf("target calls %d, deliveries recorded %d, acknowledgements recorded late %v", calls.Load(), len(e.Deliveries), late)
	if calls.Load() != 1 || len(e.Deliveries) != 1 || e.Deliveries[0].Status == nil || *e.Deliveries[0].Status != 200 || late != 1 {
		t.Errorf("want one call, its 200 recorded late once PostgreSQL was back; entry %+v", e)
	}
}

// jobRow puts entry id's one job in a state as a keysvc called owner
// left it: running, attempted at now.
func ownJob(t *testing.T, schema string, id int64, owner string) {
	t.Helper()
	tag, err := pg.Business.Exec(context.Background(), fmt.Sprintf(`UPDATE %s.river_job SET state = 'running', attempt = 1,
  attempted_at = now(), attempted_by = ARRAY[$2] WHERE (args->>'inbox_id')::bigint = $1`, schema), id, owner)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("own the job of entry %d: %v (%d rows)", id, err, tag.RowsAffected())
	}
}

// openStopped opens an inbox without starting it: what it receives stays
// queued, for a test to arrange.
func openStopped(t *testing.T, schema, endpoints string) *inbox.Inbox {
	t.Helper()
	in, err := inbox.Open(context.Background(), pg.Business, inboxtest.Endpoints(t, endpoints, nil), inbox.Options{Schema: schema, CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// A delivery left running by a keysvc whose lease lapsed, or that has none,
// is delivered again by a live keysvc, with the rescue on the entry's
// history and counted as a re-send; one whose keysvc's lease is alive is
// left alone, until that lease lapses.
func TestInboxRescuesOnlyWhenTheLeaseLapsed(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	target := inboxtest.NewRecorder()
	srv := httptest.NewServer(target)
	defer srv.Close()
	const schema = "ks_inbox_rescue"
	endpoints := fmt.Sprintf(`{"endpoints":[{"name":"stripe","target":%q}]}`, srv.URL)
	ctx := context.Background()
	cases := []struct {
		name        string
		aliveFor    string // the ghost's lease, from now; "" for none
		wantRescued bool
	}{
		{"lease alive", "1 hour", false},
		{"lease lapsed", "-1 second", true},
		{"no lease", "", true},
	}
	queued := openStopped(t, schema, endpoints)
	ids := make([]int64, len(cases))
	for i, c := range cases {
		ids[i] = receive(t, queued, "stripe", fmt.Sprintf(`{"id":"evt_rescue_%d","type":"t"}`, i))
		ghost := fmt.Sprintf("keysvc_ghost_%d", i)
		ownJob(t, schema, ids[i], ghost)
		if c.aliveFor != "" {
			if _, err := pg.Business.Exec(ctx, "INSERT INTO "+schema+".inbox_workers (id, alive_until, renewed_at) VALUES ($1, now() + $2::interval, now())", ghost, c.aliveFor); err != nil {
				t.Fatal(err)
			}
		}
	}
	in := openInbox(t, schema, endpoints, inbox.Options{RescueAfter: 5 * time.Second, RecoverAfter: time.Hour})
	for i, c := range cases {
		if c.wantRescued {
			waitEntry(t, in, "stripe", ids[i], "forwarded", 10*time.Second)
		}
	}
	time.Sleep(2 * time.Second) // two rescue ticks
	for i, c := range cases {
		kinds := deliveryKinds(t, in, "stripe", ids[i])
		calls := target.Count(ids[i])
		t.Logf("%s: target calls %d, history %v", c.name, calls, kinds)
		if c.wantRescued && (calls != 1 || fmt.Sprint(kinds) != "[rescued answered]") {
			t.Errorf("%s: want rescued and forwarded once", c.name)
		}
		if !c.wantRescued && (calls != 0 || len(kinds) != 0) {
			t.Errorf("%s: a delivery whose keysvc is alive was taken over", c.name)
		}
	}
	if n := metricValue(t, in, "keysvc_inbox_resends_total", map[string]string{"endpoint": "stripe", "cause": "rescued"}); n != 2 {
		t.Errorf("re-sends after a rescue: %v, want 2", n)
	}
	// Once the live lease lapses, its delivery is taken over too.
	if _, err := pg.Business.Exec(ctx, "UPDATE "+schema+".inbox_workers SET alive_until = now() WHERE id = 'keysvc_ghost_0'"); err != nil {
		t.Fatal(err)
	}
	waitEntry(t, in, "stripe", ids[0], "forwarded", 10*time.Second)
}

// cuttableProxy forwards TCP to a PostgreSQL until cut: then it closes every
// connection and refuses new ones, as a network partition between one
// keysvc and its database would.
type cuttableProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

func newCuttableProxy(t *testing.T, target string) *cuttableProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttableProxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.sever() })
	return p
}

func (p *cuttableProxy) sever() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A keysvc that cannot reach its database ends its call to a slow target
// before its lease lapses, so the keysvc that rescues the delivery never
// sends it while the first call is still running; and a keysvc that can
// reach it keeps its delivery however long the call takes. Two keysvcs on
// one schema, the first reaching PostgreSQL through a proxy the test cuts.
func TestInboxNeverRescuesACallStillRunning(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	type call struct{ start, end time.Time }
	var mu sync.Mutex
	var calls []call
	started := 0
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := call{start: time.Now()}
		mu.Lock()
		started++
		mu.Unlock()
		io.Copy(io.Discard, r.Body) // then net/http notices the caller hanging up
		select {
		case <-r.Context().Done(): // the caller gave up
		case <-time.After(8 * time.Second):
		}
		c.end = time.Now()
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	}))
	defer target.Close()
	const schema = "ks_inbox_fence"
	endpoints := fmt.Sprintf(`{"endpoints":[{"name":"slow","target":%q,"concurrency":1}]}`, target.URL)
	opts := inbox.Options{RescueAfter: 5 * time.Second, DeliveryTimeout: 20 * time.Second, RecoverAfter: time.Hour}

	// The first keysvc delivers through the proxy; its lease outlives the
	// 8 s call because its heartbeat still reaches the database.
	u, _ := url.Parse(pg.BusinessDSN)
	proxy := newCuttableProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	first := openInboxOn(t, pool, schema, endpoints, opts)
	// waitCalls returns once n calls are done and the next one has reached
	// the target: a job marked running may not have called yet.
	waitCalls := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var running int
			pg.Business.QueryRow(context.Background(), "SELECT count(*) FROM "+schema+".river_job WHERE state = 'running'").Scan(&running)
			mu.Lock()
			done, calling := len(calls), started
			mu.Unlock()
			if done == n && calling == n+1 && running == 1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the first keysvc is not calling (calls done %d, started %d, running %d)", done, calling, running)
			}
		}
	}
	id := receive(t, first, "slow", `{"id":"evt_fence_alive","type":"t"}`)
	waitCalls(0)
	// A second keysvc rescues all along: it leaves the call alone.
	second := openInbox(t, schema, endpoints, opts)
	waitEntry(t, first, "slow", id, "forwarded", 20*time.Second)
	if err := second.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Now the first keysvc loses its database mid-call; a third rescues.
	id = receive(t, first, "slow", `{"id":"evt_fence_cut","type":"t"}`)
	waitCalls(1)
	proxy.sever()
	third := openInbox(t, schema, endpoints, opts)
	waitEntry(t, third, "slow", id, "forwarded", 40*time.Second)
	mu.Lock()
	defer mu.Unlock()
	for i, c := range calls {
		t.Logf("call %d: %s to %s", i+1, c.start.Format("15:04:05.000"), c.end.Format("15:04:05.000"))
	}
	if len(calls) != 3 {
		t.Fatalf("%d calls, want 3: the first delivery once, the second cut and rescued", len(calls))
	}
	if d := calls[0].end.Sub(calls[0].start); d < 7*time.Second {
		t.Errorf("the first call, whose keysvc reached its database, ended after %s: its delivery was not left to it", d)
	}
	if !calls[1].end.Before(calls[2].start) {
		t.Errorf("the rescue started at %s while the first call ran until %s", calls[2].start.Format("15:04:05.000"), calls[1].end.Format("15:04:05.000"))
	}
}

// Two keysvcs on one database share the work: every event is forwarded
// once, and each keysvc forwarded some.
func TestInboxReplicasShareTheWork(t *testing.T) {
	target := inboxtest.NewRecorder()
	srv := httptest.NewServer(target)
	defer srv.Close()
	const schema = "ks_inbox_replicas"
	endpoints := fmt.Sprintf(`{"endpoints":[{"name":"stripe","target":%q}]}`, srv.URL)
	a := openInbox(t, schema, endpoints, inbox.Options{RecoverAfter: time.Hour})
	b := openInbox(t, schema, endpoints, inbox.Options{RecoverAfter: time.Hour})
	const events = 200
	ids := make([]int64, events)
	for i := range events {
		ids[i] = receive(t, []*inbox.Inbox{a, b}[i%2], "stripe", fmt.Sprintf(`{"id":"evt_replica_%d","type":"t"}`, i))
	}
	for _, id := range ids {
		waitEntry(t, a, "stripe", id, "forwarded", 30*time.Second)
	}
	byWorker := map[string]int{}
	rows, err := pg.Business.Query(context.Background(), "SELECT attempted_by[1], count(*) FROM "+schema+".river_job GROUP BY 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var w string
		var n int
		rows.Scan(&w, &n)
		byWorker[w] = n
	}
	rows.Close()
	twice := 0
	for _, id := range ids {
		if target.Count(id) != 1 {
			twice++
		}
	}
	t.Logf("%d events: forwarded by %s %d, by %s %d; not exactly once: %d", events, a.WorkerID(), byWorker[a.WorkerID()], b.WorkerID(), byWorker[b.WorkerID()], twice)
	if twice != 0 || byWorker[a.WorkerID()] == 0 || byWorker[b.WorkerID()] == 0 || byWorker[a.WorkerID()]+byWorker[b.WorkerID()] != events {
		t.Errorf("want every event forwarded once, by both keysvcs")
	}
}

// A rescued delivery goes ahead of its queue's backlog: it keeps the time
// it was due, earlier than any job queued while it ran, instead of waiting
// behind them all (behind 2 minutes of a slow target's backlog, in an e2e
// run before this).
func TestInboxRescuedDeliveryGoesFirst(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	var mu sync.Mutex
	var order []string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		order = append(order, r.Header.Get("X-Idemhook-Inbox-Id"))
		mu.Unlock()
		time.Sleep(300 * time.Millisecond)
	}))
	defer target.Close()
	const schema = "ks_inbox_rescue_first"
	endpoints := fmt.Sprintf(`{"endpoints":[{"name":"slow","target":%q,"concurrency":1}]}`, target.URL)
	queued := openStopped(t, schema, endpoints)
	var ids []int64
	for i := range 6 {
		ids = append(ids, receive(t, queued, "slow", fmt.Sprintf(`{"id":"evt_first_%d","type":"t"}`, i)))
	}
	ownJob(t, schema, ids[0], "keysvc_dead_for_good")
	in := openInbox(t, schema, endpoints, inbox.Options{RescueAfter: 5 * time.Second, RecoverAfter: time.Hour})
	for _, id := range ids {
		waitEntry(t, in, "slow", id, "forwarded", 20*time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("delivered in the order %v; rescued: %d", order, ids[0])
	if pos := slices.Index(order, fmt.Sprint(ids[0])); pos < 0 || pos > 1 {
		t.Errorf("the rescued delivery went %d of %d, want first (or second, after the one fetched before the first rescue)", pos+1, len(order))
	}
}
