package bench

import (
	"fmt"
	"strings"
	"time"
)

// The goals of docs/speed.md the scale measurement checks.
const (
	GoalGrowth         = 1.2         // p50 at the largest size ÷ p50 at the first
	GoalLongestTx      = time.Second // longest cleanup transaction
	GoalP99DuringPrune = 1.5         // reservation p99 during the pruning ÷ before it
)

// scaleMarkdown renders the scale points and the retention runs, each goal
// beside its figure.
func scaleMarkdown(points []ScalePoint, runs []RetentionRun) string {
	var b strings.Builder
	var svc, n8n []ScalePoint
	for _, p := range points {
		if p.Series == scaleKeysvcPG || p.Series == scaleKeysvcBolt {
			svc = append(svc, p)
		} else {
			n8n = append(n8n, p)
		}
	}
	if len(svc) > 0 {
		b.WriteString("\n**Reservations as the table grows (keysvc, each run new random keys)**\n\n")
		b.WriteString("| series | keys | reservations/s | p50 | p99 | p50 ÷ p50 at the first size | bytes per key on disk | WAL per reservation | full-page images per reservation |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, p := range svc {
			wal, fpi := "", ""
			if p.Series == scaleKeysvcPG {
				wal, fpi = fmt.Sprintf("%.0f bytes", p.WAL.Bytes), fmt.Sprintf("%.2f", p.WAL.FullPages)
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f /s | %s | %s | %s | %.0f | %s | %s |\n", p.Series, count(p.Keys), p.Throughput, ms(p.P50), ms(p.P99), bold(p.VsFirst), p.BytesPerKey, wal, fpi)
		}
	}
	if len(n8n) > 0 {
		b.WriteString("\n**n8n, sequential deliveries of new events as the table grows; Remove Duplicates with its history**\n\n")
		b.WriteString("| workflow | keys in the table (Remove Duplicates: history) | p50 | p99 | p50 ÷ no guard, same rounds | p50 ÷ p50 at the first size |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
		for _, p := range n8n {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", p.Series, count(p.Keys), ms(p.P50), ms(p.P99), bold(p.VsUnguarded), bold(p.VsFirst))
		}
	}
	if len(runs) > 0 {
		fmt.Fprintf(&b, "\n**Retention: %s expired keys pruned beside %s live ones, while keysvc reserves %d new keys a second**\n\n", count(int64(runs[0].Expired)), count(int64(runs[0].Live)), runs[0].Rate)
		b.WriteString("| cleanup | deleted | transactions | longest transaction | took | reservation p99 before | p99 during | during ÷ before | reserved during it, all kept |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		var file string
		for _, r := range runs {
			tx := "one statement"
			if r.Transactions > 0 {
				tx = count(int64(r.Transactions))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", r.Cleanup, count(r.Deleted), tx, ms(r.Longest), seconds(r.Took),
				ms(r.P99Before), ms(r.P99During), bold(ratioOf(r.P99During, r.P99Before)), r.Reserved)
			if r.FileBefore > 0 {
				file = fmt.Sprintf("\nThe embedded store's file: %s before the pruning, %s after it (bbolt does not give pages back), %s after as many new keys as it deleted (the freed pages took them).\n",
					mib(r.FileBefore), mib(r.FileAfter), mib(r.FileRefilled))
			}
		}
		b.WriteString(file)
	}
	if goals := scaleGoals(points, runs); goals != "" {
		b.WriteString("\n**Goals**\n\n" + goals)
	}
	return b.String()
}

// scaleGoals lists each goal beside its figure: met or missed.
func scaleGoals(points []ScalePoint, runs []RetentionRun) string {
	var b strings.Builder
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	last := map[string]ScalePoint{}
	var order []string
	for _, p := range points {
		// The workflow without a guard is the n8n series' yardstick, not a goal.
		if p.VsFirst > 0 && p.Series != scaleUnguarded {
			if _, seen := last[p.Series]; !seen {
				order = append(order, p.Series)
			}
			last[p.Series] = p
		}
	}
	for _, s := range order {
		p := last[s]
		fmt.Fprintf(&b, "- %s: p50 with %s keys ÷ p50 at the first size = %.2f (goal ≤ %.1f): %s\n", s, count(p.Keys), p.VsFirst, GoalGrowth, met(p.VsFirst <= GoalGrowth))
	}
	for _, r := range runs {
		if r.Cleanup == retentionOneDelete {
			continue // the comparison, not a goal
		}
		ratio := ratioOf(r.P99During, r.P99Before)
		fmt.Fprintf(&b, "- %s: longest transaction %s (goal ≤ %s): %s; reservation p99 during ÷ before = %.2f (goal ≤ %.1f): %s\n",
			r.Cleanup, ms(r.Longest), GoalLongestTx, met(r.Longest <= GoalLongestTx), ratio, GoalP99DuringPrune, met(ratio <= GoalP99DuringPrune))
	}
	return b.String()
}

func ratioOf(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func bold(v float64) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("**%.2f**", v)
}

// count writes n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

// scaleBars are the scale part's charts: p50 of each series at each size,
// and each cleanup's reservation p99 before and during it.
func scaleBars(points []ScalePoint, runs []RetentionRun) []barChart {
	var charts []barChart
	svc := barChart{title: "keysvc: p50 of a reservation as the table grows (ms, lower is better)", unit: "ms"}
	n8n := barChart{title: "n8n: p50 of a delivery (ms, lower is better), the node by keys in its table, Remove Duplicates by history", unit: "ms"}
	for _, p := range points {
		b := bar{label: fmt.Sprintf("%s, %s keys", p.Series, count(p.Keys)), value: float64(p.P50) / float64(time.Millisecond), class: seriesClass(p.Series)}
		if p.Series == scaleKeysvcPG || p.Series == scaleKeysvcBolt {
			svc.bars = append(svc.bars, b)
		} else {
			if strings.HasPrefix(p.Series, "Remove Duplicates") {
				b.label = p.Series
			}
			n8n.bars = append(n8n.bars, b)
		}
	}
	prune := barChart{title: "Retention: reservation p99 before the pruning and during it (ms, lower is better)", unit: "ms"}
	for _, r := range runs {
		prune.bars = append(prune.bars,
			bar{label: r.Cleanup + ", before", value: float64(r.P99Before) / float64(time.Millisecond), class: "baseline"},
			bar{label: r.Cleanup + ", during", value: float64(r.P99During) / float64(time.Millisecond), class: "keysvc"})
	}
	for _, c := range []barChart{svc, n8n, prune} {
		if len(c.bars) > 0 {
			charts = append(charts, c)
		}
	}
	return charts
}
