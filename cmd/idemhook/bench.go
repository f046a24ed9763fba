package main

import (
	"context"
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
	fs := newFlagSet("bench", "idemhook bench [options]\n\nStarts PostgreSQL 16 (durable: fsync and synchronous_commit on) and n8n from the e2e stack's\ncache, and measures side by side: pgbench and a pgx loop against keysvc (PostgreSQL and embedded\nstore) at each concurrency, key derivation against SHA-256, and every guard in n8n against the same\nworkflow without one. Prints a table and writes bench.md and bench.svg.")
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
	keysvcBin := fs.String("keysvc", "", "keysvc `binary` to measure as its own process (default: built from this module when it can be, else run in process)")
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
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
