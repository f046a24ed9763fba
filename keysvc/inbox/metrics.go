package inbox

import (
	"context"
	"time"

	"github.com/idemhook/idemhook/pgsql"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the inbox's Prometheus series; keysvc registers them on its
// registry (Collectors).
type metrics struct {
	deliveries *prometheus.CounterVec // forwarded, retried, failed
}

func newMetrics() *metrics {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_inbox_deliveries_total",
			Help: "Inbox delivery attempts to targets by outcome: forwarded, retried, failed."}, []string{"outcome"}),
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
	return []prometheus.Collector{in.metrics.deliveries, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keysvc_inbox_queue_depth",
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
	err := in.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgsql.Table{Schema: in.opts.Schema, Name: "river_job"}.String()+
		` WHERE kind = $1 AND state IN ('available', 'running', 'retryable', 'scheduled', 'pending')`, deliveryKind).Scan(&n)
	return n, err
}
