package keysvc_test

import (
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
)

// /readyz follows the store's writes on PostgreSQL: a table that refuses
// new rows with PostgreSQL's disk_full error (53100, what a full disk
// raises; a trigger raises it here) fails every new reservation with 503
// while the store still answers reads, and /readyz answers 503
// store_unwritable; its own probe write fails the same way, and once the
// table takes rows again the probe makes it ready without a reservation.
// (The embedded store's full disk: cmd/keysvc's TestEmbeddedStoreOnAFullDisk.)
func TestReadinessFollowsTheStoresWrites(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	store := newPGStore(t)
	c := start(t, keysvc.Config{Store: store, ReadyRecheck: 300 * time.Millisecond})
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
	time.Sleep(400 * time.Millisecond) // past ReadyRecheck: the probe writes, and fails
	c.do("GET", "/readyz", nil, nil).want(t, 503, "store_unwritable")

	if _, err := pg.Business.Exec(ctx, "DROP TRIGGER ks_disk_full ON "+table); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	c.do("GET", "/readyz", nil, nil).want(t, 200, "")
	c.do("POST", "/v1/reservations", nil, named("ready-2")).want(t, 201, "")
	if _, err := store.Lookup(ctx, "\x01keysvc readiness probe"); err == nil {
		t.Error("the probe left its row in the table")
	}
}
