package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemhook/idemhook/generator"
)

var (
	buildKeysvc sync.Once
	keysvcBin   string
	keysvcErr   error
)

// startKeysvc builds cmd/keysvc and runs it as its own process on the
// stack's PostgreSQL, reserving into table. Its log is kept beside n8n's.
func startKeysvc(t *testing.T, table string, env ...string) string {
	t.Helper()
	buildKeysvc.Do(func() {
		dir, err := os.MkdirTemp("", "idemhook-keysvc-bin-")
		if err != nil {
			keysvcErr = err
			return
		}
		keysvcBin = filepath.Join(dir, "keysvc")
		out, err := exec.Command("go", "build", "-o", keysvcBin, "github.com/idemhook/idemhook/cmd/keysvc").CombinedOutput()
		if err != nil {
			keysvcErr = fmt.Errorf("go build ./cmd/keysvc: %v\n%s", err, out)
		}
	})
	if keysvcErr != nil {
		t.Fatal(keysvcErr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	logPath := filepath.Join(st.LogDir, "keysvc-"+table+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(keysvcBin, "--addr", addr, "--table", table, "--create-schema")
	cmd.Env = append(append(os.Environ(), "DATABASE_URL="+st.BusinessDSN), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			t.Logf("keysvc log: %s", logPath)
		}
	})
	url := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("keysvc did not become ready at %s: see %s", url, logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func keysvcOptions(t *testing.T, prefix string) generator.Options {
	opts := seedOptions(prefix, generator.HashingKeysvc)
	opts.KeysvcURL = startKeysvc(t, opts.EventsTable)
	return opts
}

// The keysvc mode (n8n + keysvc + PostgreSQL 16) passes scenarios 1-3 and 5.
func TestKeysvcMode(t *testing.T) {
	needStack(t)
	t.Run("seed run", func(t *testing.T) { testSeedRun(t, keysvcOptions(t, "k1")) })
	t.Run("body without id", func(t *testing.T) { testBodyWithoutID(t, keysvcOptions(t, "k2")) })
	t.Run("concurrent deliveries", func(t *testing.T) { testConcurrentDeliveries(t, keysvcOptions(t, "k3")) })
	t.Run("business failure", func(t *testing.T) { testBusinessFailure(t, keysvcOptions(t, "k5")) })
	t.Run("empty body", func(t *testing.T) {
		d := deploy(t, keysvcOptions(t, "k6"))
		r := post(t, d.url, "application/octet-stream", nil, nil)
		if r.status != 400 || !strings.Contains(r.body, "empty_body") {
			t.Errorf("empty body through keysvc: %d %s, want 400 empty_body", r.status, r.body)
		}
	})
}

// keysvc unreachable: the caller gets 5xx (the provider retries), never a
// silent 200.
func TestKeysvcUnreachable(t *testing.T) {
	needStack(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + l.Addr().String()
	l.Close()
	opts := seedOptions("k7", generator.HashingKeysvc)
	opts.KeysvcURL = deadURL
	d := deploy(t, opts)
	r := post(t, d.url, "application/json", []byte(`{"id":"evt_nobody_home"}`), nil)
	if r.status < 500 || r.status > 599 {
		t.Errorf("keysvc down: %d %s, want 5xx", r.status, r.body)
	}
	if n := countRows(t, opts.BusinessTable); n != 0 {
		t.Errorf("the business step ran %d times with keysvc down", n)
	}
	execs, _ := st.WaitExecutions(context.Background(), d.workflowID, 1)
	t.Logf("answered %d %s (executions %s)", r.status, r.body, executionIDs(execs))
}
