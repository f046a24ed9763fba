package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/sandbox"
	"go.yaml.in/yaml/v4"
)

// The alerts docs/keysvc-operate.md gives read only metrics keysvc exports:
// every metric name in each rule's expr is in the /metrics of a running
// keysvc, the keysvc group's in both a keysvc on the embedded store (with
// its default --retention) and one on PostgreSQL 16 with an inbox endpoint,
// the keysvc-embedded group's in the first, the keysvc-inbox group's in the
// second. A metric renamed or dropped fails it.
func TestDocumentedAlertsReadExportedMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and two keysvc; not run with -short")
	}
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For string
				Annotations      map[string]string
			}
		}
	}
	if err := yaml.Unmarshal([]byte(docFence(t, "keysvc-operate.md", "## Alerts", "```yaml\n")), &rules); err != nil {
		t.Fatalf("the alerts block is not YAML: %v", err)
	}
	pg, err := sandbox.Start(context.Background(), sandbox.Options{PostgresOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	endpoints := filepath.Join(t.TempDir(), "endpoints.json")
	os.WriteFile(endpoints, []byte(`{"endpoints":[{"name":"stripe","provider":"stripe","target":"http://127.0.0.1:1/webhook/x"}]}`), 0o600)
	_, embeddedAddr, _ := startKeysvcBinary(t, "--db-file", filepath.Join(t.TempDir(), "keysvc.db"))
	_, inboxAddr, _ := startKeysvcBinaryEnv(t, []string{"DATABASE_URL=" + pg.BusinessDSN, "KEYSVC_SECRET_STRIPE=whsec_alerts"},
		"--create-schema", "--endpoints", endpoints)
	embedded, inbox := exported(t, embeddedAddr), exported(t, inboxAddr)
	scrapes := map[string][]map[string]bool{"keysvc": {embedded, inbox}, "keysvc-embedded": {embedded}, "keysvc-inbox": {inbox}}

	alerts := 0
	for _, g := range rules.Groups {
		where, ok := scrapes[g.Name]
		if !ok {
			t.Errorf("group %q: name it keysvc, keysvc-embedded or keysvc-inbox, where its metrics are checked", g.Name)
			continue
		}
		for _, r := range g.Rules {
			alerts++
			names := metricNames(r.Expr)
			if r.Alert == "" || r.Annotations["summary"] == "" || len(names) == 0 {
				t.Errorf("%s: an alert needs a name, a summary and an expr reading a metric: %+v", g.Name, r)
			}
			for _, name := range names {
				for _, families := range where {
					if !families[name] {
						t.Errorf("alert %s reads %s, which keysvc does not export", r.Alert, name)
					}
				}
			}
			t.Logf("%s reads %v", r.Alert, names)
		}
	}
	if alerts < 5 {
		t.Errorf("%d alerts in the page's block, want the list", alerts)
	}
}

// docFence is the first block fenced by fence (```yaml\n) after marker in
// docs/page.
func docFence(t *testing.T, page, marker, fence string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), marker)
	_, rest, ok2 := strings.Cut(rest, fence)
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatalf("docs/%s has no %q block after %q", page, fence, marker)
	}
	return block
}

// exported is the set of metric family names in the /metrics of the
// keysvc at addr (a histogram's _bucket, _sum and _count included).
func exported(t *testing.T, addr string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	names := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		names[name] = true
	}
	return names
}

// promQLWord is what may be a metric name, a function, a keyword or a
// label name; quoted strings, {label matchers} and [ranges] are skipped
// before words are read.
var (
	promQLSkipped = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\{[^}]*\}|\[[^\]]*\]`)
	promQLWord    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*|[0-9][0-9A-Za-z.]*|\(|\)`)
	// promQLGrouping keywords take a (label list) that names no metric.
	promQLGrouping = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	promQLKeywords = []string{"and", "or", "unless", "bool", "offset", "atan2",
		"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
)

// metricNames returns the metric names a PromQL expression reads: its words
// that are not functions (a word before "("), keywords, numbers or
// durations, or label names (in {…} or the list after by, on, …).
func metricNames(expr string) []string {
	words := promQLWord.FindAllString(promQLSkipped.ReplaceAllString(expr, " "), -1)
	var names []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case slices.Contains(promQLGrouping, w):
			if i+1 < len(words) && words[i+1] == "(" { // skip "(" labels ")"
				for i++; i < len(words) && words[i] != ")"; i++ {
				}
			}
		case w == "(" || w == ")" || w[0] >= '0' && w[0] <= '9' || slices.Contains(promQLKeywords, w):
		case i+1 < len(words) && words[i+1] == "(":
			// a function
		default:
			if !slices.Contains(names, w) {
				names = append(names, w)
			}
		}
	}
	return names
}

// The name reader on what the page's rules use and what PromQL allows
// around them.
func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`keysvc_store_writable == 0`:                                                     {"keysvc_store_writable"},
		`sum by (instance) (rate(keysvc_store_errors_total[5m])) > 0`:                    {"keysvc_store_errors_total"},
		`time() - keysvc_retention_last_success_timestamp_seconds > 3 * 3600`:            {"keysvc_retention_last_success_timestamp_seconds"},
		`keysvc_store_file_bytes > 1.5 * (keysvc_store_file_bytes offset 1d)`:            {"keysvc_store_file_bytes"},
		`keysvc_inbox_backlog{state="failed", endpoint=~"a|b"} > 0`:                      {"keysvc_inbox_backlog"},
		`histogram_quantile(0.99, sum without (route) (rate(x_bucket[5m]))) > on(job) y`: {"x_bucket", "y"},
		`a / ignoring(code) group_left b`:                                                {"a", "b"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", expr, got, want)
		}
	}
}
