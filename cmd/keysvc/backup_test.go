package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	bolt "go.etcd.io/bbolt"
)

// reserved is one key the load reserved: when its request was sent and when
// its 201 came.
type reserved struct {
	key       string
	sent, got time.Time
}

// The embedded store's backup, as docs/keysvc-operate.md says to take it
// (its commands run as written: curl on GET /v1/backup, then bbolt's own
// check), three times while four clients reserve new keys: each copy passes
// bbolt's check (the CLI's and Tx.Check), holds every key answered 201
// before its request and none sent after it ended. Restored as the page
// says (keysvc stopped, the copy put in place), the copy answers the keys
// before it as duplicates, and the keys reserved after it are new again.
func TestEmbeddedStoreBackupUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs keysvc and bbolt's CLI (go run); not run with -short")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed (.ci/run installs it)")
	}
	block := docBlock(t, "keysvc-operate.md", "Take a copy")
	if v := moduleVersion(t, "go.etcd.io/bbolt"); !strings.Contains(block, "go.etcd.io/bbolt/cmd/bbolt@"+v+" check") {
		t.Errorf("the documented check does not run bbolt %s, keysvc's:\n%s", v, block)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "keysvc.db")
	preload(t, file, 50_000)
	const token = "backup-admin-token"
	env := []string{"DATABASE_URL=", "KEYSVC_TOKEN=" + token}
	cmd, addr, logs := startKeysvcBinaryEnv(t, env, "--db-file", file, "--log-level", "warn")

	ctx, stopLoad := context.WithCancel(context.Background())
	var mu sync.Mutex
	var load []reserved
	var wg sync.WaitGroup
	defer func() { stopLoad(); wg.Wait() }() // before the cleanup stops keysvc
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("evt:load_%d_%06d", c, i)
				sent := time.Now()
				if status := reserveKey(t, addr, token, key); status != http.StatusCreated {
					t.Errorf("reserve %s under load: %d", key, status)
					return
				}
				mu.Lock()
				load = append(load, reserved{key, sent, time.Now()})
				mu.Unlock()
			}
		}()
	}
	type backup struct {
		copy       string
		begun, end time.Time
	}
	var backups []backup
	for i := range 3 {
		time.Sleep(300 * time.Millisecond)
		work := filepath.Join(dir, fmt.Sprintf("backup-%d", i))
		os.Mkdir(work, 0o700)
		run := exec.Command("bash", "-euo", "pipefail", "-c", block)
		run.Dir, run.Env = work, append(os.Environ(), "KEYSVC_URL=http://"+addr, "ADMIN_TOKEN="+token)
		b := backup{copy: filepath.Join(work, "keysvc-backup.db"), begun: time.Now()}
		out, err := run.CombinedOutput()
		b.end = time.Now()
		if err != nil || !strings.Contains(string(out), "OK") {
			t.Fatalf("the documented backup under load: %v\n%s\n%s", err, out, logs.String())
		}
		backups = append(backups, b)
	}
	time.Sleep(300 * time.Millisecond) // keys reserved after the last copy
	stopLoad()
	wg.Wait()
	t.Logf("%d keys reserved by the load during 3 backups", len(load))

	for i, b := range backups {
		keys := readCopy(t, b.copy)
		var before, after, missing, extra int
		for _, r := range load {
			switch {
			case r.got.Before(b.begun):
				before++
				if !keys[r.key] {
					missing++
				}
			case r.sent.After(b.end):
				after++
				if keys[r.key] {
					extra++
				}
			}
		}
		t.Logf("copy %d: %d keys; %d reserved before it, %d after", i, len(keys), before, after)
		if missing > 0 || extra > 0 || before == 0 || after == 0 {
			t.Errorf("copy %d: %d of %d keys answered before it are missing, %d of %d sent after it are in it", i, missing, before, extra, after)
		}
	}

	// Restore the last copy as the page says: stop keysvc, put the copy in
	// its file's place, start it.
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	last := backups[len(backups)-1]
	if out, err := exec.Command("cp", last.copy, file).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	_, addr, _ = startKeysvcBinaryEnv(t, env, "--db-file", file)
	var dup, fresh int
	for _, r := range load {
		switch {
		case r.got.Before(last.begun) && dup < 50:
			dup++
			if s := reserveKey(t, addr, token, r.key); s != http.StatusOK {
				t.Errorf("%s, answered before the restored copy was taken: %d, want 200 duplicate", r.key, s)
			}
		case r.sent.After(last.end) && fresh < 50:
			fresh++
			if s := reserveKey(t, addr, token, r.key); s != http.StatusCreated {
				t.Errorf("%s, reserved after the restored copy was taken: %d, want 201 (new again)", r.key, s)
			}
		}
	}
	if s := reserveKey(t, addr, token, "evt:preload_0000000"); s != http.StatusOK {
		t.Errorf("a key of the store before the load: %d, want 200", s)
	}
	t.Logf("restored: %d keys from before the copy answered 200, %d from after it 201", dup, fresh)
}

// docBlock is the first ```sh block after marker in docs/page.
func docBlock(t *testing.T, page, marker string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), marker)
	_, rest, ok2 := strings.Cut(rest, "```sh\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatalf("docs/%s has no sh block after %q", page, marker)
	}
	return block
}

// moduleVersion is the version of module path keysvc is built with.
func moduleVersion(t *testing.T, path string) string {
	t.Helper()
	info, ok := debug.ReadBuildInfo()
	if ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	t.Fatalf("%s is not in the build", path)
	return ""
}

// preload fills the embedded store at file with n keys first seen now.
func preload(t *testing.T, file string, n int) {
	t.Helper()
	store, err := keysvc.OpenBolt(file)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("evt:preload_%07d", i)
	}
	if _, err := store.Load(keys, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// reserveKey reserves key at the keysvc at addr and returns the status.
func reserveKey(t *testing.T, addr, token, key string) int {
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/reservations", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("reserve %s: %v", key, err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// readCopy opens a backup read-only, runs bbolt's check on it (every error
// fails the test) and returns its reservations' keys.
func readCopy(t *testing.T, path string) map[string]bool {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("open the copy: %v", err)
	}
	defer db.Close()
	keys := map[string]bool{}
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt's check of %s: %v", path, err)
		}
		b := tx.Bucket([]byte("reservations"))
		if b == nil {
			return fmt.Errorf("no reservations bucket")
		}
		return b.ForEach(func(k, _ []byte) error {
			keys[string(k)] = true
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
