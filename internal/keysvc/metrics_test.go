package keysvc_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
)

// What an operator watches of retention and the embedded store, at a
// running keysvc's /metrics (issue 61: no metric for either): the run at
// start prunes the 300 keys older than --retention and keeps the 20 newer
// ones, and says when it ran, how long it took and how many it pruned; the
// store's file size is the file's.
func TestRetentionAndStoreFileMetrics(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keysvc.db")
	store, err := keysvc.OpenBolt(file)
	if err != nil {
		t.Fatal(err)
	}
	var old, recent []string
	for i := range 300 {
		old = append(old, fmt.Sprintf("evt:old_%03d", i))
	}
	for i := range 20 {
		recent = append(recent, fmt.Sprintf("evt:recent_%02d", i))
	}
	if _, err := store.Load(old, time.Now().Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Load(recent, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	store.Close()
	before := time.Now()
	svc, err := keysvc.StartService(context.Background(), keysvc.ServiceConfig{DBFile: file, Addr: "127.0.0.1:0", Retention: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	waitFor(t, 10*time.Second, "the retention run at start", func() bool {
		return metricOf(t, svc.URL, `keysvc_retention_runs_total{outcome="ok"}`) == "1"
	})
	number := func(series string) float64 {
		t.Helper()
		v, err := strconv.ParseFloat(metricOf(t, svc.URL, series), 64)
		if err != nil {
			t.Fatalf("%s: %v", series, err)
		}
		return v
	}
	if n := number("keysvc_retention_pruned_total"); n != 300 {
		t.Errorf("keysvc_retention_pruned_total %v, want the 300 expired keys", n)
	}
	if n := number(`keysvc_retention_runs_total{outcome="failed"}`); n != 0 {
		t.Errorf("failed runs: %v", n)
	}
	for _, series := range []string{"keysvc_retention_last_run_timestamp_seconds", "keysvc_retention_last_success_timestamp_seconds"} {
		if at := number(series); at < float64(before.Unix()) || at > float64(time.Now().Unix()+1) {
			t.Errorf("%s %v, want a time during the test (from %d)", series, at, before.Unix())
		}
	}
	if d := number("keysvc_retention_last_duration_seconds"); d <= 0 || d > 10 {
		t.Errorf("keysvc_retention_last_duration_seconds %v", d)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if size := number("keysvc_store_file_bytes"); size != float64(fi.Size()) {
		t.Errorf("keysvc_store_file_bytes %v, the file has %d", size, fi.Size())
	}
	c := client{t: t, base: svc.URL}
	c.do("POST", "/v1/reservations", nil, map[string]string{keysvc.KeyHeader: old[0]}).want(t, 201, "")
	c.do("POST", "/v1/reservations", nil, map[string]string{keysvc.KeyHeader: recent[0]}).want(t, 200, "")
}

// waitFor polls done for up to limit, and fails the test naming what did
// not happen.
func waitFor(t *testing.T, limit time.Duration, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !done(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
	}
}

// metricOf is the value of series (name and labels as /metrics writes
// them) at base's /metrics, "" when it has none.
func metricOf(t *testing.T, base, series string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if value, ok := strings.CutPrefix(line, series+" "); ok {
			return value
		}
	}
	return ""
}
