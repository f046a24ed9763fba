package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The embedded store on a full disk: keysvc answers 503 with Retry-After,
// reserves nothing it did not store, and recovers once there is room. The
// disk fills through RLIMIT_FSIZE set on the running process at its file's
// size, so the store's next growth fails with EFBIG, as on a full disk.
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

	room := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_FSIZE, &room, nil); err != nil {
		t.Fatal(err)
	}
	if status, _ := reserve(refused); status != http.StatusCreated {
		t.Errorf("the refused key once there is room: %d, want 201 (nothing was reserved for it)", status)
	}
	for _, k := range created {
		if status, _ := reserve(k); status != http.StatusOK {
			t.Fatalf("a key answered 201 before the disk filled: %d, want 200 duplicate", status)
		}
	}
	if !strings.Contains(logs.String(), "file too large") {
		t.Errorf("the store's error is not in the log:\n%s", logs.String())
	}
}
