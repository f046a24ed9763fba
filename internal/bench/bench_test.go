package bench

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/pgsql"
)

func TestPercentilesAndRatios(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	p50, p99 := percentiles(d)
	if p50 != 51*time.Millisecond || p99 != 100*time.Millisecond {
		t.Errorf("p50 %s p99 %s", p50, p99)
	}
	rs := []Result{
		{Part: "reservations", Name: "base", Concurrency: 8, Throughput: 1000},
		{Part: "reservations", Name: "svc", Concurrency: 8, Throughput: 1500, Baseline: "base"},
		{Part: "n8n", Name: "plain", Concurrency: 1, P50: 40 * time.Millisecond},
		{Part: "n8n", Name: "guarded", Concurrency: 1, P50: 50 * time.Millisecond, Baseline: "plain"},
	}
	setRatios(rs)
	if rs[1].Ratio != 1.5 || rs[3].Ratio != 1.25 {
		t.Errorf("ratios %v %v, want 1.5 (throughput) and 1.25 (p50)", rs[1].Ratio, rs[3].Ratio)
	}
}

// The report renders as a table with the ratios and as an SVG that parses.
func TestReportRenders(t *testing.T) {
	lat := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}
	r := &Report{Date: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), CPUs: 2, GoVersion: "go1.26", PostgreSQL: "16", N8N: "2.41.1", Results: []Result{
		{Part: "reservations", Name: "pgbench (same statement)", Concurrency: 8, Throughput: 10000, Unit: "/s", Latencies: lat},
		{Part: "reservations", Name: "keysvc on postgres", Concurrency: 8, Throughput: 12000, Unit: "/s", Baseline: "pgbench (same statement)", Ratio: 1.2, MaxRSS: 24 << 20, Latencies: lat},
		{Part: "n8n", Name: "default <code-node>", Concurrency: 1, P50: 50 * time.Millisecond, P99: 90 * time.Millisecond, Baseline: "x", Ratio: 1.1, Latencies: lat,
			Note: "Build Idempotency Key 9 ms, Reserve Key 3 ms"},
	}}
	md := r.Markdown()
	for _, want := range []string{"2026-11-30", "2 CPUs", "fsync and synchronous_commit on", "| keysvc on postgres | 8 | 12000 /s |", "**1.20**", "24 MiB", "- default <code-node>: Build Idempotency Key 9 ms, Reserve Key 3 ms"} {
		if !strings.Contains(md, want) {
			t.Errorf("the table lacks %q:\n%s", want, md)
		}
	}
	var doc struct{ XMLName xml.Name }
	if err := xml.Unmarshal(r.SVG(), &doc); err != nil || doc.XMLName.Local != "svg" {
		t.Errorf("the SVG does not parse: %v", err)
	}
}

// The inbox part renders by senders, its ratios against the workflow
// without inbox (events per second to the effect, and the receipt's p50),
// the n8n executions per event, the burst in a table of its own, and a
// chart of its own.
func TestInboxReportRenders(t *testing.T) {
	lat := []time.Duration{40 * time.Millisecond, 50 * time.Millisecond, 90 * time.Millisecond}
	rs := []Result{
		{Part: partInbox, Name: inboxBaseline, Concurrency: 2, Events: 150, Throughput: 40, Unit: "/s", P50: 50 * time.Millisecond, Latencies: lat, Executions: 1},
		{Part: partInbox, Name: inboxN8N, Concurrency: 2, Events: 150, Throughput: 30, Unit: "/s", Baseline: inboxBaseline, P50: 60 * time.Millisecond,
			P95: 88 * time.Millisecond, Latencies: lat, Executions: 1.1},
		{Part: partBurst, Name: inboxBaseline, Concurrency: 16, Events: 1000, Throughput: 25, LastEffect: 40 * time.Second, Executions: 1},
		{Part: partBurst, Name: inboxKeysvc, Concurrency: 16, Events: 1000, Throughput: 50, LastEffect: 20 * time.Second, Baseline: inboxBaseline, Executions: 0.12},
	}
	setRatios(rs)
	if rs[1].Ratio != 0.75 || rs[3].Ratio != 2 {
		t.Fatalf("ratios %v %v, want 0.75 and 2", rs[1].Ratio, rs[3].Ratio)
	}
	r := &Report{Date: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), CPUs: 2, GoVersion: "go1.26", PostgreSQL: "16", N8N: "2.41.1", Results: rs,
		NodeTimes: []NodeTime{{Series: inboxN8N, Node: "Save Receipt", P50: 8500 * time.Microsecond, Runs: 50}, {Series: inboxN8N, P50: 40 * time.Millisecond, Runs: 50}}}
	md := r.Markdown()
	for _, want := range []string{"150 new events per run", "p50 of 50 deliveries from one sender",
		"| " + inboxN8N + " | Save Receipt | 8.5 ms |", "| " + inboxN8N + " | **all its nodes** | 40.0 ms |", "| series | senders | events/s to the effect | × without inbox | receipt p50 | receipt p95 | p50 × without inbox | n8n executions per event |",
		"| " + inboxN8N + " | 2 | 30.0 /s | **0.75** | 60.00 ms | 88.00 ms | **1.20** | 1.10 |",
		"A burst: 1000 events sent at once (16 senders)", "| " + inboxKeysvc + " | 20.0 s | 50.0 /s | **2.00** |  |  | 0.12 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the tables lack %q:\n%s", want, md)
		}
	}
	svg := string(r.SVG())
	if !strings.Contains(svg, "events per second to the effect") || !strings.Contains(svg, inboxN8N+", 2 senders") || !strings.Contains(svg, "A burst") {
		t.Errorf("the SVG has no inbox charts:\n%s", svg)
	}
}

// A short real run on a durable PostgreSQL: every series is measured and
// compared with its baseline.
func TestRunWithoutN8N(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL; not run with -short")
	}
	rep, err := Run(context.Background(), Options{Concurrency: []int{4}, Duration: time.Second, SkipN8N: true, Progress: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	var keysvc, derivation int
	for _, r := range rep.Results {
		if strings.HasPrefix(r.Name, "keysvc on") && r.Ratio > 0 && r.Throughput > 0 {
			keysvc++
		}
		if r.Part == "derivation" && r.Ratio > 0 {
			derivation++
		}
	}
	if keysvc != 2 || derivation != 3 {
		t.Errorf("measured %d keysvc series and %d derivation series with ratios, want 2 and 3 (the HTTP floor and two bodies):\n%s", keysvc, derivation, rep.Markdown())
	}
}

// A short real run of the inbox part: both labs, one sender, a small
// burst, every series measured, the ratios taken against the workflow
// without inbox, and n8n's executions counted: the workflow without inbox
// runs one per event.
func TestInboxRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, n8n and keysvc twice; not run with -short")
	}
	// One n8n receiver: both run the same measuring code, and a lab costs
	// .ci/run a minute and a half. The community node's is the one without
	// a Code node, whose node times must show it.
	rep, err := Inbox(context.Background(), InboxOptions{Senders: []int{1}, Events: 5, Burst: 20, NodeSamples: 3,
		Receipts: []generator.Hashing{generator.HashingNode}, Progress: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Markdown())
	got := map[string]Result{}
	for _, r := range rep.Results {
		got[r.Part+"/"+r.Name] = r
	}
	for _, part := range []string{partInbox, partBurst} {
		if r, ok := got[part+"/"+inboxN8N]; ok {
			t.Errorf("%s: the Code node receiver was measured, though not asked for: %+v", part, r)
		}
		for _, name := range []string{inboxNode, inboxKeysvc} {
			if r := got[part+"/"+name]; r.Throughput <= 0 || r.Ratio <= 0 || r.Executions <= 0 {
				t.Errorf("%s %s: %+v, want a throughput, a ratio against its lab's baseline and executions counted", part, name, r)
			}
		}
		// Its own execution per event, and at most the scheduled sweeps beside.
		if r := got[part+"/"+inboxNodeBaseline]; r.Executions < 1 || r.Executions > 2 {
			t.Errorf("%s without inbox: %.2f n8n executions per event, want 1 (and a sweep or two)", part, r.Executions)
		}
	}
	if r := got[partInbox+"/"+inboxNode]; r.P50 <= 0 || r.P95 <= 0 || len(r.Latencies) != 5 {
		t.Errorf("the receipt's wait was not measured for each of 5 deliveries: %+v", r)
	}
	// n8n's own time per node, read from the executions of the 3
	// deliveries the workflows kept: the business write of each, the
	// receipt's node, and each execution's total.
	nodes := map[string]NodeTime{}
	for _, n := range rep.NodeTimes {
		nodes[n.Series+"/"+n.Node] = n
	}
	for _, want := range []string{inboxNodeBaseline + "/Confirm the order", inboxNodeBaseline + "/", inboxNode + "/" + generator.NodeSaveReceipt, inboxNode + "/"} {
		if n, ok := nodes[want]; !ok || n.Runs != 3 {
			t.Errorf("no time of %q over 3 executions: %+v (all: %+v)", want, n, rep.NodeTimes)
		}
	}
	if total, save := nodes[inboxNode+"/"], nodes[inboxNode+"/"+generator.NodeSaveReceipt]; total.P50 < save.P50 {
		t.Errorf("the receiver's total %s is less than its Save Receipt's %s", total.P50, save.P50)
	}
	if _, ok := nodes[inboxNode+"/"+generator.NodeBuildReceipt]; ok {
		t.Errorf("the community node's receiver ran a Code node: %+v", rep.NodeTimes)
	}
}

// The scale part renders each size, each goal beside its figure (met or
// missed, from the figures), the embedded store's file, and its charts.
func TestScaleReportRenders(t *testing.T) {
	points := []ScalePoint{
		{Series: scaleKeysvcPG, Keys: 0, Throughput: 7000, P50: time.Millisecond},
		{Series: scaleKeysvcPG, Keys: 10000000, Throughput: 6000, P50: 1300 * time.Microsecond, BytesPerKey: 250, WAL: wal{Bytes: 4100, FullPages: 0.5}},
		{Series: scaleUnguarded, Keys: 0, P50: 49 * time.Millisecond, VsUnguarded: 1},
		{Series: scaleNode, Keys: 0, P50: 50 * time.Millisecond, VsUnguarded: 1.02},
		{Series: scaleUnguarded, Keys: 10000000, P50: 60 * time.Millisecond, VsUnguarded: 1},
		{Series: scaleNode, Keys: 10000000, P50: 55 * time.Millisecond, VsUnguarded: 1.05},
		{Series: fmt.Sprintf(scaleDedupe, 100000), Keys: 100000, P50: 200 * time.Millisecond, VsUnguarded: 4},
	}
	setScaleRatios(points)
	if points[1].VsFirst != 1.3 || points[5].VsFirst != 1.1 {
		t.Fatalf("ratios to the first size: %v %v, want 1.3 and 1.1", points[1].VsFirst, points[5].VsFirst)
	}
	runs := []RetentionRun{
		{Cleanup: retentionKeysvcPG, Expired: 3000000, Live: 1000000, Deleted: 3000000, Transactions: 12000, Longest: 20 * time.Millisecond,
			Rate: 200, P99Before: 2 * time.Millisecond, P99During: 2500 * time.Microsecond},
		{Cleanup: retentionOneDelete, Expired: 3000000, Deleted: 3000000, Transactions: 1, Longest: 2500 * time.Millisecond, P99Before: 2 * time.Millisecond, P99During: 10 * time.Millisecond},
		{Cleanup: retentionKeysvcBolt, Expired: 3000000, Deleted: 3000000, Longest: 2 * time.Second, P99Before: 2 * time.Millisecond, P99During: 4 * time.Millisecond,
			FileBefore: 900 << 20, FileAfter: 900 << 20, FileRefilled: 920 << 20},
	}
	r := &Report{Date: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), CPUs: 2, PostgreSQL: "16", Scale: points, Retention: runs}
	md := r.Markdown()
	for _, want := range []string{
		"| keysvc on PostgreSQL | 10,000,000 | 6000 /s | 1.30 ms |", "**1.30** | 250 | 4100 bytes | 0.50 |",
		"keysvc on PostgreSQL: p50 with 10,000,000 keys ÷ p50 at the first size = 1.30 (goal ≤ 1.2): **missed**",
		"community node in n8n (PostgreSQL store): p50 with 10,000,000 keys ÷ p50 at the first size = 1.10 (goal ≤ 1.2): met",
		"| Remove Duplicates, history 100000 | 100,000 |", "**4.00**",
		"3,000,000 expired keys pruned beside 1,000,000 live ones",
		retentionKeysvcPG + ": longest transaction 20.00 ms (goal ≤ 1s): met; reservation p99 during ÷ before = 1.25 (goal ≤ 1.5): met",
		retentionKeysvcBolt + ": longest transaction 2000.00 ms (goal ≤ 1s): **missed**; reservation p99 during ÷ before = 2.00 (goal ≤ 1.5): **missed**",
		"900 MiB before the pruning, 900 MiB after it", "920 MiB after as many new keys",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the scale tables lack %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, retentionOneDelete+": longest") || strings.Contains(md, scaleUnguarded+": p50") {
		t.Errorf("the one DELETE is the comparison, not a goal:\n%s", md)
	}
	svg := string(r.SVG())
	var doc struct{ XMLName xml.Name }
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
		t.Fatalf("the SVG does not parse: %v", err)
	}
	for _, want := range []string{"as the table grows", "Remove Duplicates by history", "before the pruning and during it", "10,000,000 keys"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the charts lack %q", want)
		}
	}
}

// Every workflow the n8n part deploys is one the generator accepts, each
// reserving in a table of its own: the bench only meets a refused option
// minutes into a run, after the stack and the throughput runs (the node on
// keysvc's table once had a '-' in its name).
func TestGuardModesGenerate(t *testing.T) {
	tables := map[string]string{}
	for _, m := range guardModes("http://127.0.0.1:1", pgsql.MustParseTable("bench_business"), true) {
		if m.opts == nil {
			continue
		}
		if _, err := generator.Files(*m.opts); err != nil {
			t.Errorf("%s: %v", m.name, err)
		}
		if other, ok := tables[m.opts.EventsTable]; ok {
			t.Errorf("%s and %s reserve in the same table %s", m.name, other, m.opts.EventsTable)
		}
		tables[m.opts.EventsTable] = m.name
	}
	if len(tables) < 10 {
		t.Errorf("%d generated workflows, want the 6 guards and the node's 4 (PostgreSQL; keysvc over HTTP and HTTPS with two kinds of certificate)", len(tables))
	}
}
