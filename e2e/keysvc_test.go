package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/sandbox"
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
	return launchKeysvc(t, table, []string{"--table", table, "--create-schema"}, env).url
}

// keysvcProc is keysvc running as its own process, which a test may kill
// and start again on the same address.
type keysvcProc struct {
	t       *testing.T
	url     string
	addr    string
	args    []string
	env     []string
	logFile *os.File
	cmd     *exec.Cmd
	pids    []int // of every process it ran, in order
	// client reaches it: over HTTPS (--tls-cert), one that trusts the
	// tests' CA.
	client *http.Client
}

// launchKeysvc builds cmd/keysvc once and starts it with args (plus --addr
// on a free port) and env, on the stack's PostgreSQL (DATABASE_URL); it
// waits until keysvc is ready and stops it when the test ends.
func launchKeysvc(t *testing.T, name string, args, env []string) *keysvcProc {
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
	// keysvc is killed and started again on this address: see sandbox.FreePort.
	addr, err := sandbox.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(st.LogDir, "keysvc-"+name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	k := &keysvcProc{t: t, url: "http://" + addr, addr: addr, args: args, env: env, logFile: logFile, client: http.DefaultClient}
	if slices.Contains(args, "--tls-cert") {
		k.url, k.client = "https://"+addr, e2eTLS.client
	}
	k.start()
	t.Cleanup(func() {
		if k.cmd != nil {
			_ = k.cmd.Process.Signal(syscall.SIGTERM)
			_ = k.cmd.Wait()
		}
		logFile.Close()
		if t.Failed() {
			t.Logf("keysvc log: %s", logPath)
		}
	})
	return k
}

// start runs keysvc on its address and waits until /readyz answers.
func (k *keysvcProc) start() {
	k.t.Helper()
	cmd := exec.Command(keysvcBin, append([]string{"--addr", k.addr}, k.args...)...)
	cmd.Env = append(append(os.Environ(), "DATABASE_URL="+st.BusinessDSN), k.env...)
	cmd.Stdout, cmd.Stderr = k.logFile, k.logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	k.cmd = cmd
	k.pids = append(k.pids, cmd.Process.Pid)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := k.client.Get(k.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("keysvc did not become ready at %s: see %s", k.url, k.logFile.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill stops keysvc with SIGKILL: no drain, requests in flight cut.
func (k *keysvcProc) kill() {
	_ = k.cmd.Process.Kill()
	_ = k.cmd.Wait()
	k.cmd = nil
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
	addr, err := sandbox.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + addr
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
