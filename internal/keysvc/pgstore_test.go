package keysvc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/jackc/pgx/v5"
)

// keysvc and an n8n workflow share one processed_events table: a key either
// reserves is a duplicate for the other.
func TestSharesTheWorkflowTable(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	// at-most-once's schema: the default's (the lease's) has the lease columns.
	opts := generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce, EventsTable: "ks_shared_events", BusinessTable: "ks_shared_business"}}
	schema, err := generator.Schema(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Business.Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Business.Exec(ctx, "DROP TABLE ks_shared_events, ks_shared_business") })

	store, err := keysvc.OpenPG(ctx, pg.BusinessDSN, keysvc.PGOptions{Table: opts.EventsTable})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := start(t, keysvc.Config{Store: store})

	c.do("POST", "/v1/reservations", []byte(`{"id":"evt_shared_1"}`), nil).want(t, 201, "")
	// The workflow's own statement now finds the key taken.
	var got string
	err = pg.Business.QueryRow(ctx, pgsql.Reserve(pgsql.MustParseTable(opts.EventsTable)), "evt:evt_shared_1").Scan(&got)
	if !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("the workflow's reservation after keysvc's: %q, %v; want no row", got, err)
	}
	// And the other way round.
	if err := pg.Business.QueryRow(ctx, pgsql.Reserve(pgsql.MustParseTable(opts.EventsTable)), "evt:evt_shared_2").Scan(&got); err != nil {
		t.Fatal(err)
	}
	c.do("POST", "/v1/reservations", []byte(`{"id":"evt_shared_2"}`), nil).want(t, 200, "")

	// at-most-once's schema has no lease columns: keysvc says so instead of failing.
	c.do("POST", "/v1/reservations?lease=30s", []byte(`{"id":"evt_shared_3"}`), nil).want(t, 501, "lease_unsupported")
}

func TestOpenPGRefusesAMissingTable(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	_, err := keysvc.OpenPG(context.Background(), pg.BusinessDSN, keysvc.PGOptions{Table: "ks_never_created"})
	if err == nil || !strings.Contains(err.Error(), "--create-schema") {
		t.Fatalf("OpenPG on a missing table: %v", err)
	}
	_, err = keysvc.OpenPG(context.Background(), pg.BusinessDSN, keysvc.PGOptions{Table: "drop table x"})
	var ie *pgsql.IdentifierError
	if !errors.As(err, &ie) {
		t.Fatalf("OpenPG with an invalid table name: %v", err)
	}
}

// Coalesced reservations on both stores: keys repeated across concurrent
// callers (so within batches) are reserved once each; lease acquisitions
// likewise; a batch that fails answers 503 to every caller in it, and the
// next succeeds.
func TestCoalescedReservations(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		ctx := context.Background()
		const keys, each = 20, 10
		var mu sync.Mutex
		reserved := map[string]int{}
		var wg sync.WaitGroup
		for i := range keys * each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("evt:co-%d", i%keys)
				_, ok, err := store.Reserve(ctx, key)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					reserved[key]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(reserved) != keys {
			t.Errorf("%d of %d keys reserved", len(reserved), keys)
		}
		for k, n := range reserved {
			if n != 1 {
				t.Errorf("%s reserved %d times", k, n)
			}
		}
		var acquired sync.Map
		for i := range keys * each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("evt:lease-%d", i%keys)
				_, outcome, err := store.AcquireLease(ctx, key, time.Minute)
				if errors.Is(err, keysvc.ErrLeaseUnsupported) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if outcome == keysvc.Acquired {
					if _, dup := acquired.LoadOrStore(key, true); dup {
						t.Errorf("%s acquired twice", key)
					}
				}
			}()
		}
		wg.Wait()
	})
}

func TestCoalescedBatchFailure(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	store := newPGStore(t)
	c := start(t, keysvc.Config{Store: store})
	ctx := context.Background()
	table := store.Table()
	if _, err := pg.Business.Exec(ctx, "ALTER TABLE "+table+" RENAME TO "+table+"_away"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = c.do("POST", "/v1/reservations", fmt.Appendf(nil, `{"id":"evt_fail_%d"}`, i), nil).status
		}()
	}
	wg.Wait()
	for i, s := range statuses {
		if s != 503 {
			t.Errorf("caller %d: %d during the failure, want 503", i, s)
		}
	}
	if _, err := pg.Business.Exec(ctx, "ALTER TABLE "+table+"_away RENAME TO "+table); err != nil {
		t.Fatal(err)
	}
	c.do("POST", "/v1/reservations", []byte(`{"id":"evt_fail_0"}`), nil).want(t, 201, "")
}
