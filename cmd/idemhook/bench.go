package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/duration"

	"github.com/idemhook/idemhook/internal/bench"
)

func runBench(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("bench", "idemhook bench [options]\n\nStarts PostgreSQL 16 (durable: fsync and synchronous_commit on) and n8n from the e2e stack's\ncache, and measures side by side: pgbench and a pgx loop against keysvc (PostgreSQL and embedded\nstore) at each concurrency, key derivation against SHA-256, and every guard in n8n against the same\nworkflow without one. Prints a table and writes bench.md and bench.svg. With --scale: the same\nstores as the table grows, Remove Duplicates beside the node, and retention under load.")
	out := fs.String("out", ".", "`DIR` for bench.md and bench.svg")
	concurrency := fs.String("concurrency", "8,32", "`LIST` of concurrent clients for the throughput runs")
	var runFor time.Duration
	duration.Var(fs, &runFor, "duration", 10*time.Second, "`DURATION` of each throughput run")
	deliveries := fs.Int("deliveries", 50, "`N` sequential deliveries per n8n workflow")
	skipN8N := fs.Bool("skip-n8n", false, "leave out the n8n part")
	pattern := fs.String("pattern", "", "`PATTERN` to measure instead: inbox (the inbox pattern in real n8n, and keysvc's inbox in front of it, against the same business write without an inbox, then n8n's own time per node over 50 deliveries of each; writes bench-inbox.md and bench-inbox.svg)")
	senders := fs.String("senders", "1,2,4,8", "`LIST` of concurrent senders for --pattern inbox")
	events := fs.Int("events", 150, "`N` events per run for --pattern inbox")
	burst := fs.Int("burst", 1000, "`N` events sent at once for --pattern inbox, after the runs (0: none)")
	scale := fs.Bool("scale", false, "measure what grows with the work instead: reservations (keysvc on PostgreSQL and on its embedded store, the community node in n8n) with --sizes keys in the table, Remove Duplicates with --histories beside the node, and --expired keys pruned beside --live ones while keysvc reserves --rate keys a second (writes bench-scale.md and bench-scale.svg; the first number of --concurrency is the keysvc runs' clients)")
	sizes := fs.String("sizes", "0,10000,1000000,10000000", "`LIST` of keys in the table for --scale, ascending; the first is the baseline")
	histories := fs.String("histories", "1000,10000,100000,1000000", "`LIST` of Remove Duplicates' history sizes for --scale")
	expired := fs.Int("expired", 3000000, "`N` expired keys pruned in --scale's retention runs")
	live := fs.Int("live", 1000000, "`N` live keys kept in --scale's retention runs")
	rate := fs.Int("rate", 200, "`N` reservations a second beside --scale's pruning")
	keysvcBin := fs.String("keysvc", "", "keysvc `binary` to measure as its own process (default: built from this module when it can be, else run in process)")
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch *pattern {
	case "":
	case "inbox":
		return benchInbox(ctx, *senders, *events, *burst, *out, std)
	default:
		return usagef("--pattern %q: the pattern measured on its own is inbox", *pattern)
	}
	opts := bench.Options{Duration: runFor, Deliveries: *deliveries, SkipN8N: *skipN8N, KeysvcBinary: *keysvcBin, Progress: std.err}
	var err error
	if opts.Concurrency, err = counts(*concurrency, 1000); err != nil {
		return usagef("--concurrency %q: give numbers of clients such as 8,32", *concurrency)
	}
	if runFor < time.Second || *deliveries < 1 {
		return usagef("--duration must be at least 1s and --deliveries at least 1")
	}
	if *scale {
		so := bench.ScaleOptions{Clients: opts.Concurrency[0], Duration: runFor, SkipN8N: *skipN8N, Expired: *expired, Live: *live, Rate: *rate, Progress: std.err}
		if given["deliveries"] {
			so.Deliveries = *deliveries
		}
		return benchScale(ctx, so, *sizes, *histories, *out, std)
	}
	if opts.KeysvcBinary == "" {
		opts.KeysvcBinary = buildKeysvc(std.err)
	}
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		return sandboxError(err)
	}
	return printReport(rep, *out, "bench", std.out)
}

// counts reads a comma-separated list of numbers from 1 to max.
func counts(list string, max int) ([]int, error) {
	var out []int
	for _, c := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 || n > max {
			return nil, fmt.Errorf("%q is not a number from 1 to %d", c, max)
		}
		out = append(out, n)
	}
	return out, nil
}

// buildKeysvc builds cmd/keysvc so that it runs as its own process and its
// memory can be read; "" (keysvc in process) when no Go toolchain or source
// is at hand.
func buildKeysvc(stderr io.Writer) string {
	dir, err := os.MkdirTemp("", "idemhook-bench-keysvc-")
	if err != nil {
		return ""
	}
	bin := filepath.Join(dir, "keysvc")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/idemhook/idemhook/cmd/keysvc").CombinedOutput(); err != nil {
		fmt.Fprintf(stderr, "bench: keysvc runs in this process (building it failed: %v %s); its memory is not measured\n", err, strings.TrimSpace(string(out)))
		return ""
	}
	return bin
}

// benchScale is bench --scale.
func benchScale(ctx context.Context, opts bench.ScaleOptions, sizes, histories, out string, std stdio) error {
	var err error
	if opts.Sizes, err = sizeList(sizes); err != nil {
		return usagef("--sizes %q: give ascending numbers of keys from 0 to 100000000, such as 0,1000000", sizes)
	}
	if opts.Histories, err = counts(histories, 10000000); err != nil {
		return usagef("--histories %q: give history sizes from 1 to 10000000, such as 1000,10000", histories)
	}
	if opts.Expired < 1 || opts.Live < 1 || opts.Rate < 1 || opts.Rate > 10000 {
		return usagef("--expired and --live must be at least 1, --rate between 1 and 10000")
	}
	rep, err := bench.Scale(ctx, opts)
	if err != nil {
		return sandboxError(err)
	}
	return printReport(rep, out, "bench-scale", std.out)
}

// sizeList reads an ascending comma-separated list of sizes from 0.
func sizeList(list string) ([]int, error) {
	var out []int
	for _, c := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 0 || n > 100000000 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("%q is not a size above the one before", c)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchInbox is bench --pattern inbox.
func benchInbox(ctx context.Context, senders string, events, burst int, out string, std stdio) error {
	opts := bench.InboxOptions{Events: events, Burst: burst, Progress: std.err}
	var err error
	if opts.Senders, err = counts(senders, 64); err != nil {
		return usagef("--senders %q: give numbers of senders from 1 to 64, such as 1,2,4", senders)
	}
	if events < 1 || events > 100000 || burst < 0 || burst > 100000 {
		return usagef("--events must be between 1 and 100000, --burst between 0 and 100000")
	}
	if burst == 0 {
		opts.Burst = -1
	}
	rep, err := bench.Inbox(ctx, opts)
	if err != nil {
		return sandboxError(err)
	}
	return printReport(rep, out, "bench-inbox", std.out)
}

// printReport prints rep's tables and writes them and its charts into out
// as name.md and name.svg.
func printReport(rep *bench.Report, out, name string, stdout io.Writer) error {
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	return writeFiles(out, map[string][]byte{name + ".md": []byte(md), name + ".svg": rep.SVG()}, stdout)
}
