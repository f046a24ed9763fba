package keysvc

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// metrics is a small Prometheus text exposition; the service needs four
// series and no client library.
type metrics struct {
	mu            sync.Mutex
	requests      map[[2]string]uint64 // route, status
	reservations  map[string]uint64    // new, duplicate, in_progress
	storeErrors   uint64
	verifications map[string]uint64 // valid, or the failure code
	buckets       []float64         // upper bounds, seconds
	counts        []uint64          // per bucket, cumulative at exposition
	sum           float64
	total         uint64
}

func newMetrics() *metrics {
	b := []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
	return &metrics{requests: map[[2]string]uint64{}, reservations: map[string]uint64{}, verifications: map[string]uint64{},
		buckets: b, counts: make([]uint64, len(b))}
}

func (m *metrics) observe(route string, status int, d time.Duration) {
	if route == "" || route == "/" {
		route = "unmatched"
	}
	sec := d.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[[2]string{route, fmt.Sprint(status)}]++
	for i, ub := range m.buckets {
		if sec <= ub {
			m.counts[i]++
			break
		}
	}
	m.sum += sec
	m.total++
}

func (m *metrics) reservation(outcome string) {
	m.mu.Lock()
	m.reservations[outcome]++
	m.mu.Unlock()
}

func (m *metrics) verification(outcome string) {
	m.mu.Lock()
	m.verifications[outcome]++
	m.mu.Unlock()
}

func (m *metrics) storeError() {
	m.mu.Lock()
	m.storeErrors++
	m.mu.Unlock()
}

func (s *Server) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(s.metrics.text()))
}

func (m *metrics) text() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	b.WriteString("# HELP keysvc_requests_total HTTP requests by route and status.\n# TYPE keysvc_requests_total counter\n")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(&b, "keysvc_requests_total{route=%q,status=%q} %d\n", k[0], k[1], m.requests[k])
	}
	b.WriteString("# HELP keysvc_reservations_total Reservation outcomes: new, duplicate, in_progress.\n# TYPE keysvc_reservations_total counter\n")
	for _, o := range []string{"new", "duplicate", "in_progress"} {
		fmt.Fprintf(&b, "keysvc_reservations_total{outcome=%q} %d\n", o, m.reservations[o])
	}
	b.WriteString("# HELP keysvc_signature_verifications_total Signature checks by outcome.\n# TYPE keysvc_signature_verifications_total counter\n")
	outcomes := make([]string, 0, len(m.verifications))
	for o := range m.verifications {
		outcomes = append(outcomes, o)
	}
	sort.Strings(outcomes)
	for _, o := range outcomes {
		fmt.Fprintf(&b, "keysvc_signature_verifications_total{outcome=%q} %d\n", o, m.verifications[o])
	}
	b.WriteString("# HELP keysvc_store_errors_total Store calls that failed (answered 503).\n# TYPE keysvc_store_errors_total counter\n")
	fmt.Fprintf(&b, "keysvc_store_errors_total %d\n", m.storeErrors)
	b.WriteString("# HELP keysvc_request_duration_seconds Request latency.\n# TYPE keysvc_request_duration_seconds histogram\n")
	var cum uint64
	for i, ub := range m.buckets {
		cum += m.counts[i]
		fmt.Fprintf(&b, "keysvc_request_duration_seconds_bucket{le=\"%g\"} %d\n", ub, cum)
	}
	fmt.Fprintf(&b, "keysvc_request_duration_seconds_bucket{le=\"+Inf\"} %d\n", m.total)
	fmt.Fprintf(&b, "keysvc_request_duration_seconds_sum %g\n", m.sum)
	fmt.Fprintf(&b, "keysvc_request_duration_seconds_count %d\n", m.total)
	return b.String()
}
