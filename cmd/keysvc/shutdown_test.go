package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startKeysvcBinary runs the keysvc binary on a free local address until
// the test ends (DATABASE_URL unset), and returns the process, its address
// and its log.
func startKeysvcBinary(t *testing.T, args ...string) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	return startKeysvcBinaryEnv(t, []string{"DATABASE_URL="}, args...)
}

// startKeysvcBinaryEnv is startKeysvcBinary with env added to the
// environment.
func startKeysvcBinaryEnv(t *testing.T, env []string, args ...string) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	return startKeysvcBuild(t, keysvcBinary(t), env, args...)
}

// startKeysvcBuild is startKeysvcBinaryEnv for the keysvc binary bin.
func startKeysvcBuild(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	addr := freeAddr(t, "127.0.0.1")
	logs := &syncBuffer{}
	cmd := exec.Command(bin, append([]string{"--addr", addr}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return cmd, addr, logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("keysvc did not start:\n%s", logs.String())
		}
	}
}

var (
	buildKeysvc    sync.Once
	keysvcBin      string
	keysvcBuildErr error
)

// TestMain removes the binary keysvcBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if keysvcBin != "" {
		os.RemoveAll(filepath.Dir(keysvcBin))
	}
	os.Exit(code)
}

// keysvcBinary builds keysvc once for the package's tests.
func keysvcBinary(t *testing.T) string {
	t.Helper()
	buildKeysvc.Do(func() {
		dir, err := os.MkdirTemp("", "keysvc-test-bin-")
		if err != nil {
			keysvcBuildErr = err
			return
		}
		keysvcBin = filepath.Join(dir, "keysvc")
		if out, err := exec.Command("go", "build", "-o", keysvcBin, ".").CombinedOutput(); err != nil {
			keysvcBuildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if keysvcBuildErr != nil {
		t.Fatal(keysvcBuildErr)
	}
	return keysvcBin
}

// SIGTERM lets a request already in flight finish, then keysvc exits 0.
// The request's body is still arriving when the signal lands.
func TestSIGTERMFinishesInFlightRequests(t *testing.T) {
	cmd, addr, logs := startKeysvcBinary(t, "--db-file", filepath.Join(t.TempDir(), "keysvc.db"))

	pr, pw := io.Pipe()
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/reservations", pr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{status: resp.StatusCode, body: string(b)}
	}()
	pw.Write([]byte(`{"id":"evt_in_`))
	time.Sleep(300 * time.Millisecond) // the request is in flight
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	pw.Write([]byte(`flight"}`))
	pw.Close()

	r := <-done
	if r.err != nil || r.status != http.StatusCreated || !strings.Contains(r.body, "evt:evt_in_flight") {
		t.Errorf("in-flight request: %d %q %v, want 201 for evt:evt_in_flight", r.status, r.body, r.err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("keysvc exited with %v:\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "finishing in-flight requests") || !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("shutdown not logged:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "evt_in_flight") {
		t.Error("the log holds the body's id")
	}
}
