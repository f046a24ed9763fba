package inbox

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultTargetSummaryEvery is Options.TargetSummaryEvery's default.
const DefaultTargetSummaryEvery = 5 * time.Minute

// targetHealth is what this keysvc knows of one endpoint's target from its
// own forwards, for the operator: a forward that got no answer, or an
// answer other than 2xx (n8n's "starting up" page included), is a failure;
// a 2xx (to a batch, whatever it says of each event) is an answer. The log
// gets the first failure after an answer, a summary every summaryEvery
// while forwards keep failing, and the first answer after failures; each
// line names the endpoint and the cause (an error or a status), never the
// target's URL, its token or a body.
type targetHealth struct {
	endpoint     string
	logger       *slog.Logger
	summaryEvery time.Duration
	failingGauge prometheus.Gauge

	mu sync.Mutex
	// failingSince is the first failure since the last answer (zero while
	// the target answers); failures counts them, lastLine is when the
	// last line about them was logged.
	failingSince, lastLine time.Time
	failures, sinceLine    int
}

func newTargetHealth(endpoint string, logger *slog.Logger, summaryEvery time.Duration, failing *prometheus.GaugeVec) *targetHealth {
	g := failing.WithLabelValues(endpoint)
	g.Set(0)
	return &targetHealth{endpoint: endpoint, logger: logger, summaryEvery: summaryEvery, failingGauge: g}
}

// forwarded records one forward's result: failure is nil when the target
// answered 2xx.
func (h *targetHealth) forwarded(failure error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	switch {
	case failure == nil && h.failingSince.IsZero():
	case failure == nil:
		h.logger.Info("inbox: the target answers again", "endpoint", h.endpoint,
			"failing_seconds", seconds(now.Sub(h.failingSince)), "failed_forwards", h.failures)
		h.failingSince, h.failures = time.Time{}, 0
		h.failingGauge.Set(0)
	case h.failingSince.IsZero():
		h.failingSince, h.lastLine, h.failures, h.sinceLine = now, now, 1, 0
		h.failingGauge.Set(1)
		h.logger.Warn("inbox: a forward to the target failed; its entries wait and are retried", "endpoint", h.endpoint, "cause", failure.Error())
	default:
		h.failures++
		h.sinceLine++
		if now.Sub(h.lastLine) >= h.summaryEvery {
			h.logger.Warn("inbox: the target is still failing", "endpoint", h.endpoint, "failing_seconds", seconds(now.Sub(h.failingSince)),
				"failed_forwards", h.failures, "failed_since_last_line", h.sinceLine, "cause", failure.Error())
			h.lastLine, h.sinceLine = now, 0
		}
	}
}

// seconds is d in whole seconds, for a log line.
func seconds(d time.Duration) int64 { return int64(d / time.Second) }
