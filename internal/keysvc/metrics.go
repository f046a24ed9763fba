package keysvc

import (
	"net/http"
	"os"
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

// watchFile exports the size of the embedded store's file, read at each
// scrape (-1 when it cannot be read). The file never shrinks: bbolt keeps
// the pages retention freed for the keys that come next.
func (m *metrics) watchFile(path string) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keysvc_store_file_bytes",
		Help: "Size of the embedded store's file, in bytes (it never shrinks; retention's freed pages are reused)."},
		func() float64 {
			fi, err := os.Stat(path)
			if err != nil {
				return -1
			}
			return float64(fi.Size())
		}))
}

// retentionMetrics are the series of the hourly cleanup (--retention),
// registered only when it runs.
type retentionMetrics struct {
	pruned      prometheus.Counter
	runs        *prometheus.CounterVec // ok, failed
	lastRun     prometheus.Gauge
	lastSuccess prometheus.Gauge
	duration    prometheus.Gauge
}

func (m *metrics) watchRetention() *retentionMetrics {
	r := &retentionMetrics{
		pruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "keysvc_retention_pruned_total",
			Help: "Reservations deleted by retention (older than --retention)."}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keysvc_retention_runs_total",
			Help: "Retention runs by outcome: ok, failed (the next is an hour later)."}, []string{"outcome"}),
		lastRun: prometheus.NewGauge(prometheus.GaugeOpts{Name: "keysvc_retention_last_run_timestamp_seconds",
			Help: "When the last retention run ended (Unix time), whatever its outcome."}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "keysvc_retention_last_success_timestamp_seconds",
			Help: "When the last retention run that deleted everything it should ended (Unix time)."}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{Name: "keysvc_retention_last_duration_seconds",
			Help: "How long the last retention run took."}),
	}
	for _, o := range []string{"ok", "failed"} {
		r.runs.WithLabelValues(o)
	}
	m.registry.MustRegister(r.pruned, r.runs, r.lastRun, r.lastSuccess, r.duration)
	return r
}

// ran records a retention run that started at start, deleted c and ended
// with err.
func (r *retentionMetrics) ran(start time.Time, c Cleaned, err error) {
	end := time.Now()
	r.pruned.Add(float64(c.Deleted))
	r.lastRun.Set(float64(end.UnixMilli()) / 1000)
	r.duration.Set(end.Sub(start).Seconds())
	if err != nil {
		r.runs.WithLabelValues("failed").Inc()
		return
	}
	r.runs.WithLabelValues("ok").Inc()
	r.lastSuccess.Set(float64(end.UnixMilli()) / 1000)
}

// watchWrites exports whether the store took its last write.
func (m *metrics) watchWrites(h *writeHealth) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keysvc_store_writable",
		Help: "1 while the store took its last write (a reservation's, or /readyz's probe), 0 while writes fail (a full disk): /readyz answers 503 then."},
		func() float64 {
			if h.writable() {
				return 1
			}
			return 0
		}))
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
