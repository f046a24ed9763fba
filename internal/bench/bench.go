// Package bench measures idemhook against the baselines an engineer would
// compare it with, side by side in one run, on a durable PostgreSQL (fsync
// and synchronous_commit on, as users run it): the reservation statement
// through pgbench (or a pgx loop) against keysvc on PostgreSQL and on its
// embedded store, key derivation against in-process SHA-256, and, in real
// n8n, each guard against the same workflow without one. `idemhook bench`
// runs it and prints Report.Markdown and writes Report.SVG.
//
// Ratios are the stable result: both sides run on the same machine in the
// same minute. Absolute numbers are not comparable across machines.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/sandbox"
)

// Options configure Run.
type Options struct {
	// Concurrency lists the numbers of concurrent clients of the throughput
	// runs. Default 8 and 32.
	Concurrency []int
	// Duration of each throughput run. Default 10s.
	Duration time.Duration
	// Deliveries is the number of sequential deliveries per n8n workflow.
	// Default 50; 0 with SkipN8N.
	Deliveries int
	// SkipN8N leaves out the n8n part (no n8n is started).
	SkipN8N bool
	// KeysvcBinary runs keysvc as its own process (so its resident memory
	// can be read); empty runs it in this process.
	KeysvcBinary string
	Progress     io.Writer
}

// Result is one measured series.
type Result struct {
	Part        string // "reservations", "derivation" or "n8n"
	Name        string
	Concurrency int
	// Throughput is operations (or, for derivation, MiB) per second.
	Throughput float64
	Unit       string
	P50, P99   time.Duration
	// Latencies are kept for the plot.
	Latencies []time.Duration
	// Baseline names the series this one is divided by, and Ratio the
	// quotient: throughput ratio for reservations and derivation, p50 ratio
	// for n8n.
	Baseline string
	Ratio    float64
	// MaxRSS is the peak resident memory of keysvc, when it ran as its own
	// process.
	MaxRSS int64
	// Note is what the series adds to its row: for n8n, the median time of
	// each node from n8n's execution data.
	Note string
	// For the inbox pattern: the events sent, the p95 of their wait, when
	// the last effect was applied (from the first send), and the n8n
	// executions started per event, counted from n8n's execution ids.
	Events     int
	P95        time.Duration
	LastEffect time.Duration
	Executions float64
}

// Report is the outcome of Run.
type Report struct {
	Date       time.Time
	CPUs       int
	GoVersion  string
	PostgreSQL string
	N8N        string
	Results    []Result
	// NodeTimes are the inbox part's times per node, as n8n recorded them.
	NodeTimes []NodeTime
	// Scale and Retention are Scale's: reservations as the table grows,
	// and the pruning of expired keys beside reservations.
	Scale     []ScalePoint
	Retention []RetentionRun
}

func (o Options) withDefaults() Options {
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{8, 32}
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Deliveries == 0 {
		o.Deliveries = 50
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// Run starts the stack (durable PostgreSQL; n8n unless SkipN8N) and measures.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts = opts.withDefaults()
	// The community node is built from this clone's source; from an
	// installed binary its series is left out.
	wd, _ := os.Getwd()
	_, noSource := communitynode.SourceRoot(wd)
	withNode := !opts.SkipN8N && noSource == nil
	// keysvc serves the node over HTTPS too, with certificates of the
	// bench's own authorities, which n8n trusts as an operator's.
	certDir, err := os.MkdirTemp("", "idemhook-bench-tls-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(certDir)
	certs, err := makeBenchCerts(certDir)
	if err != nil {
		return nil, err
	}
	st, err := sandbox.Start(ctx, sandbox.Options{Durable: true, PostgresOnly: opts.SkipN8N, Progress: opts.Progress, CommunityNode: withNode,
		N8NEnv: map[string]string{"NODE_EXTRA_CA_CERTS": certs.authorities}})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rep, err := newReport(ctx, st, !opts.SkipN8N)
	if err != nil {
		return nil, err
	}
	step := func(format string, args ...any) { fmt.Fprintf(opts.Progress, "bench: "+format+"\n", args...) }

	for _, c := range opts.Concurrency {
		res, err := reservations(ctx, st, opts, c, step)
		if err != nil {
			return nil, err
		}
		rep.Results = append(rep.Results, res...)
	}
	res, err := derivation(ctx, opts, step)
	if err != nil {
		return nil, err
	}
	rep.Results = append(rep.Results, res...)
	if !opts.SkipN8N {
		if !withNode {
			step("n8n: no community node series (%v)", noSource)
		}
		res, err := n8nModes(ctx, st, opts, withNode, certs, step)
		if err != nil {
			return nil, err
		}
		rep.Results = append(rep.Results, res...)
	}
	return rep, nil
}

// percentiles sorts d and returns its p50 and p99.
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	return percentile(d, 50), percentile(d, 99)
}

// percentile sorts d and returns its p-th percentile (0 for none).
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, len(d)*p/100)]
}

// setRatios divides each result by its baseline: throughput for the parts
// measured in operations, p50 latency for n8n (lower is better there).
func setRatios(results []Result) {
	find := func(part, name string, c int) *Result {
		for i := range results {
			if results[i].Part == part && results[i].Name == name && results[i].Concurrency == c {
				return &results[i]
			}
		}
		return nil
	}
	for i := range results {
		r := &results[i]
		if r.Baseline == "" {
			continue
		}
		b := find(r.Part, r.Baseline, r.Concurrency)
		if b == nil {
			continue
		}
		if r.Part == "n8n" {
			if b.P50 > 0 {
				r.Ratio = float64(r.P50) / float64(b.P50)
			}
		} else if b.Throughput > 0 {
			r.Ratio = r.Throughput / b.Throughput
		}
	}
}
