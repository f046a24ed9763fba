package keysvc

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are keysvc's Prometheus series, on a registry of the Server's own
// (with the process and Go runtime collectors), so that several servers in
// one process do not collide.
type metrics struct {
	registry      *prometheus.Registry
	requests      *prometheus.CounterVec // route, status
	duration      prometheus.Histogram
	reservations  *prometheus.CounterVec // new, duplicate, in_progress
	verifications *prometheus.CounterVec // valid, or the failure code
	storeErrors   prometheus.Counter
	inboxAck      prometheus.Histogram
	authFailures  *prometheus.CounterVec // unauthenticated, forbidden
	limited       *prometheus.CounterVec // rate, connections
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_requests_total",
			Help: "HTTP requests by route and status."}, []string{"route", "status"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "keysvc_request_duration_seconds",
			Help: "Request latency.", Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}}),
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_reservations_total",
			Help: "Reservation outcomes: new, duplicate, in_progress."}, []string{"outcome"}),
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_signature_verifications_total",
			Help: "Signature checks by outcome."}, []string{"outcome"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "keysvc_store_errors_total",
			Help: "Store calls that failed (answered 503)."}),
		inboxAck: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "keysvc_inbox_ack_seconds",
			Help: "Time from an inbox delivery's arrival to its acknowledgement (after the commit).", Buckets: prometheus.DefBuckets}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_auth_failures_total",
			Help: "Requests refused for their token: unauthenticated (401) or forbidden (403)."}, []string{"reason"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_limited_total",
			Help: "Requests refused by the per-client rate limit (rate) and connections refused by the per-client limit (connections)."}, []string{"limit"}),
	}
	for _, o := range []string{"new", "duplicate", "in_progress"} {
		m.reservations.WithLabelValues(o)
	}
	for _, r := range []string{"unauthenticated", "forbidden"} {
		m.authFailures.WithLabelValues(r)
	}
	for _, l := range []string{"rate", "connections"} {
		m.limited.WithLabelValues(l)
	}
	m.registry.MustRegister(m.requests, m.duration, m.reservations, m.verifications, m.storeErrors, m.inboxAck,
		m.authFailures, m.limited,
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return m
}

func (m *metrics) observe(route string, status int, d time.Duration) {
	if route == "" || route == "/" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.Observe(d.Seconds())
}

func (m *metrics) reservation(outcome string)  { m.reservations.WithLabelValues(outcome).Inc() }
func (m *metrics) verification(outcome string) { m.verifications.WithLabelValues(outcome).Inc() }
func (m *metrics) storeError()                 { m.storeErrors.Inc() }
func (m *metrics) authFailure(reason string)   { m.authFailures.WithLabelValues(reason).Inc() }

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}
