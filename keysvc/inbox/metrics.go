package inbox

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the inbox's Prometheus series; keysvc registers them on its
// registry (Collectors).
type metrics struct {
	deliveries *prometheus.CounterVec // forwarded, retried, failed
	resends    *prometheus.CounterVec // endpoint, cause: no_answer, rescued
	rescued    *prometheus.CounterVec // endpoint
	lateAcks   *prometheus.CounterVec // endpoint
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
	}
	for _, o := range []string{"forwarded", "retried", "failed"} {
		m.deliveries.WithLabelValues(o)
	}
	return m
}

// Collectors returns the inbox's series: its delivery counts, and the queue
// depth read from River's table at each scrape (-1 when the database does
// not answer within 2 s).
func (in *Inbox) Collectors() []prometheus.Collector {
	return []prometheus.Collector{in.metrics.deliveries, in.metrics.resends, in.metrics.rescued, in.metrics.lateAcks, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keysvc_inbox_queue_depth",
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
