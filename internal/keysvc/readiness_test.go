package keysvc_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/keysvc"
)

// /readyz follows the store's writes on PostgreSQL: a table that refuses
// new rows with PostgreSQL's disk_full error (53100, what a full disk
// raises; a trigger raises it here) fails every new reservation with 503
// while the store still answers reads, and /readyz answers 503
// store_unwritable: its probe, the reservation's INSERT rolled back, fails
// the same way. Once the table takes rows again the probe makes it ready at
// once, without a reservation. (The embedded store's full disk, where
// /readyz waits 5 s before it probes: cmd/keysvc's
// TestEmbeddedStoreOnAFullDisk.)
func TestReadinessFollowsTheStoresWrites(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	store := newPGStore(t)
	c := start(t, keysvc.Config{Store: store})
	named := func(key string) map[string]string { return map[string]string{keysvc.KeyHeader: key} }
	c.do("POST", "/v1/reservations", nil, named("ready-1")).want(t, 201, "")
	c.do("GET", "/readyz", nil, nil).want(t, 200, "")

	ctx := t.Context()
	table := store.Table()
	if _, err := pg.Business.Exec(ctx, `CREATE FUNCTION ks_disk_full() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END$$;
		CREATE TRIGGER ks_disk_full BEFORE INSERT ON `+table+` FOR EACH ROW EXECUTE FUNCTION ks_disk_full()`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Business.Exec(ctx, "DROP FUNCTION IF EXISTS ks_disk_full() CASCADE") })
	c.do("POST", "/v1/reservations", nil, named("ready-2")).want(t, 503, "store_unavailable")
	c.do("GET", "/v1/reservations/ready-1", nil, nil).want(t, 200, "") // reads still answer
	c.do("GET", "/readyz", nil, nil).want(t, 503, "store_unwritable")
	c.do("GET", "/readyz", nil, nil).want(t, 503, "store_unwritable")

	if _, err := pg.Business.Exec(ctx, "DROP TRIGGER ks_disk_full ON "+table); err != nil {
		t.Fatal(err)
	}
	c.do("GET", "/readyz", nil, nil).want(t, 200, "")
	c.do("POST", "/v1/reservations", nil, named("ready-2")).want(t, 201, "")
	if _, err := store.Lookup(ctx, "\x01keysvc readiness probe"); err == nil {
		t.Error("the probe left its row in the table")
	}
}

// GET /v1/backup is an admin's: a reserve token is refused, an admin token
// gets the embedded store's file, whole (its Content-Length) and holding
// the keys reserved before it; on PostgreSQL it answers 501 and says what
// to back up instead. (Under load, and restored: cmd/keysvc's
// TestEmbeddedStoreBackupUnderLoad.)
func TestBackupRoute(t *testing.T) {
	tokens, err := keysvc.ParseTokens(strings.NewReader(tokenLine("ops", "admin", "backup-admin-0123", "") + tokenLine("app", "reserve", "backup-reserve-0123", "")))
	if err != nil {
		t.Fatal(err)
	}
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		c := start(t, keysvc.Config{Store: store, Tokens: tokens})
		c.as("backup-admin-0123").do("POST", "/v1/reservations", nil, map[string]string{keysvc.KeyHeader: "before-the-copy"}).want(t, 201, "")
		c.as("backup-reserve-0123").do("GET", "/v1/backup", nil, nil).want(t, 403, "forbidden")
		r := c.as("backup-admin-0123").do("GET", "/v1/backup", nil, nil)
		if _, embedded := store.(*keysvc.BoltStore); !embedded {
			r.want(t, 501, "backup_unavailable")
			if !strings.Contains(r.str("error"), "PostgreSQL") {
				t.Errorf("the 501 does not say what to back up: %s", r.body)
			}
			return
		}
		r.want(t, 200, "")
		if n, _ := strconv.Atoi(r.header.Get("Content-Length")); n != len(r.body) || n == 0 {
			t.Errorf("Content-Length %s, body %d bytes", r.header.Get("Content-Length"), len(r.body))
		}
		copyFile := filepath.Join(t.TempDir(), "copy.db")
		if err := os.WriteFile(copyFile, r.body, 0o600); err != nil {
			t.Fatal(err)
		}
		restored, err := keysvc.OpenBolt(copyFile)
		if err != nil {
			t.Fatalf("the copy does not open: %v", err)
		}
		defer restored.Close()
		if _, err := restored.Lookup(t.Context(), "before-the-copy"); err != nil {
			t.Errorf("the copy lacks the key reserved before it: %v", err)
		}
	})
}
