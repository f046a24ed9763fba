package bench

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"time"
)

// Markdown renders the report as docs/speed.md shows it: a table per part, the
// ratios in bold.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %d CPUs (%s), PostgreSQL %s with fsync and synchronous_commit on",
		r.Date.Format("2006-01-02"), r.CPUs, r.GoVersion, r.PostgreSQL)
	if r.N8N != "" {
		fmt.Fprintf(&b, ", n8n %s", r.N8N)
	}
	b.WriteString(". Ratios are stable across machines; absolute numbers are not.\n")
	parts := []struct{ part, title, ratio, clients, notes string }{
		{"reservations", "Reservations (one new key each)", "× baseline throughput", "clients", ""},
		{"derivation", "Key derivation (one client)", "× SHA-256 throughput", "clients", ""},
		{"n8n", "n8n, sequential deliveries of new events", "p50 ÷ p50 without guard", "clients",
			"Median time per node, from n8n's execution data (the rest of a delivery is n8n's webhook handling and the saving of the execution):"},
	}
	for _, p := range parts {
		rows := r.part(p.part)
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n**%s**\n\n| series | %s | throughput | p50 | p99 | ratio (%s) | peak RSS |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n", p.title, p.clients, p.ratio)
		for _, x := range rows {
			ratio := ""
			if x.Baseline != "" && x.Ratio > 0 {
				ratio = fmt.Sprintf("**%.2f**", x.Ratio)
			}
			rss := ""
			if x.MaxRSS > 0 {
				rss = fmt.Sprintf("%.0f MiB", float64(x.MaxRSS)/(1<<20))
			}
			fmt.Fprintf(&b, "| %s | %d | %.0f %s | %s | %s | %s | %s |\n", x.Name, x.Concurrency, x.Throughput, x.Unit, ms(x.P50), ms(x.P99), ratio, rss)
		}
		var notes []string
		for _, x := range rows {
			if x.Note != "" {
				notes = append(notes, fmt.Sprintf("- %s: %s\n", x.Name, x.Note))
			}
		}
		if len(notes) > 0 {
			b.WriteString("\n" + p.notes + "\n\n")
			b.WriteString(strings.Join(notes, ""))
		}
	}
	b.WriteString(inboxMarkdown(r.Results))
	b.WriteString(scaleMarkdown(r.Scale, r.Retention))
	b.WriteString(nodeTimesMarkdown(r.NodeTimes))
	return b.String()
}

func (r *Report) part(name string) []Result {
	var out []Result
	for _, x := range r.Results {
		if x.Part == name {
			out = append(out, x)
		}
	}
	return out
}

func ms(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// SVG draws two charts: reservations per second by concurrency for each
// series, and the latency distribution of each n8n workflow (p10 to p90 as a
// box, the median as a line, p99 as a whisker).
func (r *Report) SVG() []byte {
	const width, left = 900, 330
	var b strings.Builder
	y := 40
	var body strings.Builder

	// Throughput bars: reservations by clients, the inbox pattern by senders.
	throughput := func(part, title, who string) barChart {
		c := barChart{title: title, unit: "/s"}
		for _, x := range r.part(part) {
			c.bars = append(c.bars, bar{label: fmt.Sprintf("%s, %d %s", x.Name, x.Concurrency, who), value: x.Throughput, class: seriesClass(x.Name)})
		}
		return c
	}
	charts := []barChart{
		throughput("reservations", "Reservations per second (higher is better), durable PostgreSQL", "clients"),
		throughput(partInbox, "The inbox pattern in n8n: events per second to the effect (higher is better), durable PostgreSQL", "senders"),
		throughput(partBurst, "A burst of events sent at once: events per second to the last effect (higher is better)", "senders"),
	}
	for _, c := range append(charts, scaleBars(r.Scale, r.Retention)...) {
		y = c.draw(&body, y, left, width)
	}

	// Chart 2: n8n latency distributions.
	n := r.part("n8n")
	if len(n) > 0 {
		fmt.Fprintf(&body, `<text x="10" y="%d" class="title">n8n: latency of a delivery (ms, lower is better): box p10-p90, line p50, whisker p99</text>`+"\n", y)
		y += 16
		hi := 0.0
		for _, x := range n {
			hi = math.Max(hi, float64(x.P99)/float64(time.Millisecond))
		}
		scale := func(v time.Duration) int {
			return left + int(float64(width-left-80)*float64(v)/float64(time.Millisecond)/hi)
		}
		for _, x := range n {
			lat := slices.Clone(x.Latencies)
			at := func(p int) time.Duration { return percentile(lat, p) }
			fmt.Fprintf(&body, `<text x="%d" y="%d" class="label" text-anchor="end">%s</text>`, left-8, y+12, html.EscapeString(x.Name))
			fmt.Fprintf(&body, `<line x1="%d" y1="%d" x2="%d" y2="%d" class="whisker"/>`, scale(at(10)), y+8, scale(x.P99), y+8)
			fmt.Fprintf(&body, `<rect x="%d" y="%d" width="%d" height="14" class="box"/>`, scale(at(10)), y+1, max(scale(at(90))-scale(at(10)), 1))
			fmt.Fprintf(&body, `<line x1="%d" y1="%d" x2="%d" y2="%d" class="median"/>`, scale(x.P50), y, scale(x.P50), y+16)
			fmt.Fprintf(&body, `<text x="%d" y="%d" class="value">%s</text>`+"\n", scale(x.P99)+6, y+12, ms(x.P50))
			y += 20
		}
		y += 10
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, y+20, width, y+20)
	b.WriteString(`<style>.title{font-weight:bold;font-size:13px}.label{fill:#333}.value{fill:#555}.baseline{fill:#9aa5b1}.keysvc{fill:#0b5cad}` +
		`.box{fill:#cfe0f5;stroke:#0b5cad}.median{stroke:#0b5cad;stroke-width:2}.whisker{stroke:#888}</style>` + "\n")
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="20" class="label">%s</text>`+"\n",
		html.EscapeString(fmt.Sprintf("idemhook bench, %s, %d CPUs", r.Date.Format("2006-01-02"), r.CPUs)))
	b.WriteString(body.String())
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// bar is one bar of a chart, of class "keysvc" (ours) or "baseline".
type bar struct {
	label string
	value float64
	class string
}

// barChart is a chart of horizontal bars, each value written beside its
// bar in unit ("/s" or "ms").
type barChart struct {
	title, unit string
	bars        []bar
}

// draw writes the chart into body from y, its labels right-aligned at left
// (or further right, to fit the longest), and returns the y below it.
func (c barChart) draw(body *strings.Builder, y, left, width int) int {
	if len(c.bars) == 0 {
		return y
	}
	fmt.Fprintf(body, `<text x="10" y="%d" class="title">%s</text>`+"\n", y, html.EscapeString(c.title))
	y += 16
	// The label column fits the longest label (about 6.5 px a character at 12 px).
	peak := 0.0
	for _, b := range c.bars {
		peak = math.Max(peak, b.value)
		left = max(left, 16+len([]rune(b.label))*13/2)
	}
	for _, b := range c.bars {
		w := 0
		if peak > 0 {
			w = int(float64(width-left-80) * b.value / peak)
		}
		value := fmt.Sprintf("%.0f/s", b.value)
		if c.unit == "ms" {
			value = fmt.Sprintf("%.2f ms", b.value)
		}
		fmt.Fprintf(body, `<text x="%d" y="%d" class="label" text-anchor="end">%s</text>`, left-8, y+12, html.EscapeString(b.label))
		fmt.Fprintf(body, `<rect x="%d" y="%d" width="%d" height="14" class="%s"/>`, left, y+1, max(w, 1), b.class)
		fmt.Fprintf(body, `<text x="%d" y="%d" class="value">%s</text>`+"\n", left+w+6, y+12, value)
		y += 20
	}
	return y + 24
}

func seriesClass(name string) string {
	if strings.HasPrefix(name, "keysvc") || strings.HasPrefix(name, "inbox") || strings.HasPrefix(name, "community node") {
		return "keysvc"
	}
	return "baseline"
}
