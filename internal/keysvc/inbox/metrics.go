package inbox

import (
	"context"
	"slices"
	"time"

	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the inbox's Prometheus series; keysvc registers them on its
// registry (Collectors).
type metrics struct {
	deliveries *prometheus.CounterVec   // forwarded, retried, failed
	resends    *prometheus.CounterVec   // endpoint, cause: no_answer, rescued
	rescued    *prometheus.CounterVec   // endpoint
	lateAcks   *prometheus.CounterVec   // endpoint
	actions    *prometheus.CounterVec   // endpoint, action: replay, retry_now
	batchSize  *prometheus.HistogramVec // endpoint: events per batch forward
	// targetFailing is 1 while an endpoint's forwards fail (targetHealth).
	targetFailing *prometheus.GaugeVec
}

func newMetrics() *metrics {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_inbox_deliveries_total",
			Help: "Inbox delivery attempts to targets by outcome: forwarded, retried, failed."}, []string{"outcome"}),
		resends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_inbox_resends_total",
			Help: "Forwards of an entry that its target may have already: after an attempt without an answer (no_answer) or one whose keysvc stopped (rescued)."},
			[]string{"endpoint", "cause"}),
		rescued: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_inbox_rescued_total",
			Help: "Deliveries in flight in a keysvc whose lease lapsed, made available again by this keysvc."}, []string{"endpoint"}),
		lateAcks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_inbox_late_acks_total",
			Help: "Target acknowledgements recorded only once the database answered again, without forwarding again."}, []string{"endpoint"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_inbox_actions_total",
			Help: "Entries an operator replayed (replay) or made due now (retry_now)."}, []string{"endpoint", "action"}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "keysvc_inbox_batch_events",
			Help: "Events per batch forward, on endpoints with a batch above 1.", Buckets: []float64{1, 2, 5, 10, 20, 50, 100}}, []string{"endpoint"}),
		targetFailing: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "keysvc_inbox_target_failing",
			Help: "1 while this keysvc's forwards to the endpoint's target fail (no answer, 5xx, 401, 403, 404, 408, 429 or n8n starting up), 0 once it answers."},
			[]string{"endpoint"}),
	}
	for _, o := range []string{"forwarded", "retried", "failed"} {
		m.deliveries.WithLabelValues(o)
	}
	return m
}

// Collectors returns the inbox's series: its counts of deliveries,
// re-sends, rescues, late acknowledgements and operators' actions, the
// sizes of batch forwards; and, read
// from the database at each scrape, the backlog and the queue depth (-1, or
// no backlog series, when the database does not answer within 2 s).
func (in *Inbox) Collectors() []prometheus.Collector {
	return []prometheus.Collector{in.metrics.deliveries, in.metrics.resends, in.metrics.rescued, in.metrics.lateAcks, in.metrics.actions, in.metrics.batchSize,
		in.metrics.targetFailing,
		backlog{in: in}, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keysvc_inbox_queue_depth",
			Help: "Inbox deliveries waiting or running."}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := in.QueueDepth(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		})}
}

func (in *Inbox) count(outcome string) { in.metrics.deliveries.WithLabelValues(outcome).Inc() }

// QueueDepth counts deliveries waiting or running.
func (in *Inbox) QueueDepth(ctx context.Context) (int64, error) {
	var n int64
	err := in.pool.QueryRow(ctx, in.tables.QueueDepth(), deliveryKind).Scan(&n)
	return n, err
}

// backlogStates are the states whose entries wait for keysvc, the target or
// a human: the backlog series report them for every configured endpoint.
var backlogStates = []string{pgsql.StateReceived, pgsql.StateProcessing, pgsql.StateDeferred, pgsql.StateFailed}

var (
	backlogDesc = prometheus.NewDesc("keysvc_inbox_backlog", "Inbox entries waiting for a delivery (received), the target (processing, deferred) or a human (failed), by endpoint and state.",
		[]string{"endpoint", "state"}, nil)
	oldestDesc = prometheus.NewDesc("keysvc_inbox_oldest_age_seconds", "Age of the oldest inbox entry in each backlog state, by endpoint (0 when there is none).",
		[]string{"endpoint", "state"}, nil)
)

// backlog reads the inbox's entries by endpoint and state at each scrape.
type backlog struct{ in *Inbox }

func (b backlog) Describe(ch chan<- *prometheus.Desc) { ch <- backlogDesc; ch <- oldestDesc }

func (b backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	type key struct{ endpoint, state string }
	seen := map[key]StateCount{}
	rows, err := b.in.pool.Query(ctx, b.in.tables.SummarizeEntries())
	if err != nil {
		return
	}
	for rows.Next() {
		var k key
		var c StateCount
		if err := rows.Scan(&k.endpoint, &k.state, &c.Count, &c.OldestReceivedAt, &c.OldestAgeSeconds); err != nil {
			rows.Close()
			return
		}
		seen[k] = c
	}
	rows.Close()
	if rows.Err() != nil {
		return
	}
	for name := range b.in.endpoints {
		for _, s := range backlogStates {
			if _, ok := seen[key{name, s}]; !ok {
				seen[key{name, s}] = StateCount{}
			}
		}
	}
	for k, c := range seen {
		if !slices.Contains(backlogStates, k.state) {
			continue
		}
		ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(c.Count), k.endpoint, k.state)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, c.OldestAgeSeconds, k.endpoint, k.state)
	}
}
