package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The embedded store on a full disk: keysvc answers 503 with Retry-After,
// reserves nothing it did not store, and recovers once there is room. The
// disk fills through RLIMIT_FSIZE set on the running process at its file's
// size, so the store's next growth fails with EFBIG, as on a full disk.
// /readyz says so: 503 store_unwritable while reservations fail (issue 61:
// it answered 200 "ready"), 200 again once the store takes a write, which
// it tries itself when none came for 5 s.
func TestEmbeddedStoreOnAFullDisk(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keysvc.db")
	cmd, addr, logs := startKeysvcBinary(t, "--db-file", file)
	reserve := func(key string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/reservations", strings.NewReader("x"))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("reserve %s: %v (keysvc must answer, not die)\n%s", key, err, logs.String())
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	full := unix.Rlimit{Cur: uint64(fi.Size()), Max: unix.RLIM_INFINITY}
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_FSIZE, &full, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}

	var created []string
	refused := ""
	key := strings.Repeat("k", 200) // fills pages fast
	for i := 0; i < 5000 && refused == ""; i++ {
		k := fmt.Sprintf("%s-%d", key, i)
		switch status, retryAfter := reserve(k); status {
		case http.StatusCreated:
			created = append(created, k)
		case http.StatusServiceUnavailable:
			if retryAfter == "" {
				t.Errorf("503 without Retry-After")
			}
			refused = k
		default:
			t.Fatalf("reserve on a full disk: %d, want 201 or 503", status)
		}
	}
	if refused == "" {
		t.Fatalf("5,000 reservations fitted in a %d-byte file: the disk never filled", fi.Size())
	}
	t.Logf("disk full after %d reservations in a %d-byte file", len(created), fi.Size())
	if status, _ := reserve(refused); status != http.StatusServiceUnavailable {
		t.Errorf("retry while the disk is still full: %d, want 503", status)
	}
	if status, body := get(t, addr, "/readyz"); status != http.StatusServiceUnavailable || !strings.Contains(body, "store_unwritable") {
		t.Errorf("/readyz while every new reservation fails: %d %s, want 503 store_unwritable", status, body)
	}
	if value := metric(t, addr, "keysvc_store_writable"); value != "0" {
		t.Errorf("keysvc_store_writable while reservations fail: %s, want 0", value)
	}

	room := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_FSIZE, &room, nil); err != nil {
		t.Fatal(err)
	}
	// No reservation comes (a load balancer would send none to a keysvc
	// not ready): /readyz tries a write of its own, and says ready.
	deadline := time.Now().Add(20 * time.Second)
	for status, _ := get(t, addr, "/readyz"); status != http.StatusOK; status, _ = get(t, addr, "/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz once there is room: %d for 20 s, want 200\n%s", status, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if value := metric(t, addr, "keysvc_store_writable"); value != "1" {
		t.Errorf("keysvc_store_writable once there is room: %s, want 1", value)
	}
	if status, _ := reserve(refused); status != http.StatusCreated {
		t.Errorf("the refused key once there is room: %d, want 201 (nothing was reserved for it)", status)
	}
	for _, k := range created {
		if status, _ := reserve(k); status != http.StatusOK {
			t.Fatalf("a key answered 201 before the disk filled: %d, want 200 duplicate", status)
		}
	}
	for _, want := range []string{"file too large", "store: a write failed; /readyz answers 503", "store: writes take again"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("%q is not in the log:\n%s", want, logs.String())
		}
	}
}

// get answers GET path of the keysvc at addr: the status and the body.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric is the value of the series name, without labels, in the /metrics
// of the keysvc at addr ("" when it has none).
func metric(t *testing.T, addr, name string) string {
	t.Helper()
	_, body := get(t, addr, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if value, ok := strings.CutPrefix(line, name+" "); ok {
			return value
		}
	}
	return ""
}
