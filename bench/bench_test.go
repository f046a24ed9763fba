package bench

import (
	"context"
	"encoding/xml"
	"os"
	"strings"
	"testing"
	"time"
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
// without inbox, the p95 of the wait as a note, and a chart of its own.
func TestInboxReportRenders(t *testing.T) {
	lat := []time.Duration{40 * time.Millisecond, 50 * time.Millisecond, 90 * time.Millisecond}
	rs := []Result{
		{Part: "inbox", Name: inboxBaseline, Concurrency: 2, Throughput: 40, Unit: "/s", P50: 50 * time.Millisecond, Latencies: lat},
		{Part: "inbox", Name: inboxReceipt, Concurrency: 2, Throughput: 30, Unit: "/s", Baseline: inboxBaseline, Note: "p95 of the wait 88.00 ms", Latencies: lat},
		{Part: "inbox", Name: inboxEffect, Concurrency: 2, Throughput: 20, Unit: "/s", Baseline: inboxBaseline},
	}
	setRatios(rs)
	if rs[1].Ratio != 0.75 || rs[2].Ratio != 0.5 {
		t.Fatalf("ratios %v %v, want 0.75 and 0.5", rs[1].Ratio, rs[2].Ratio)
	}
	r := &Report{Date: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), CPUs: 2, GoVersion: "go1.26", PostgreSQL: "16", N8N: "2.41.1", Results: rs}
	md := r.Markdown()
	for _, want := range []string{"| series | senders |", "× events/s without inbox", "| " + inboxEffect + " | 2 | 20 /s |", "**0.50**",
		"- " + inboxReceipt + ", 2 senders: p95 of the wait 88.00 ms"} {
		if !strings.Contains(md, want) {
			t.Errorf("the table lacks %q:\n%s", want, md)
		}
	}
	svg := string(r.SVG())
	if !strings.Contains(svg, "events per second") || !strings.Contains(svg, inboxEffect+", 2 senders") {
		t.Errorf("the SVG has no inbox chart:\n%s", svg)
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

// A short real run of the inbox part: both labs, one sender, every series
// measured, and the ratios taken against the workflow without inbox.
func TestInboxRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, n8n and keysvc twice; not run with -short")
	}
	rep, err := Inbox(context.Background(), InboxOptions{Senders: []int{1}, Events: 5, Progress: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, r := range rep.Results {
		got[r.Name] = r
	}
	for _, name := range []string{inboxReceipt, inboxEffect, inboxKeysvcReceipt, inboxKeysvcEffect} {
		if r := got[name]; r.Throughput <= 0 || r.Ratio <= 0 {
			t.Errorf("%s: %+v, want a throughput and a ratio against %q", name, r, inboxBaseline)
		}
	}
	if r := got[inboxReceipt]; r.P50 <= 0 || len(r.Latencies) != 5 {
		t.Errorf("the receipt's wait was not measured for each of 5 deliveries: %+v", r)
	}
}
