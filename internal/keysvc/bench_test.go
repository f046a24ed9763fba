package keysvc_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/pgsql"
)

// BenchmarkReservation runs keysvc's reservation path (HTTP, key
// derivation, PostgreSQL) and, in the same run and at the same concurrency,
// a baseline: a pgx loop executing the identical INSERT … ON CONFLICT
// statement. It logs keysvc's cost as a ratio of the baseline's.
//
//	go test -run '^$' -bench Reservation ./keysvc
func BenchmarkReservation(b *testing.B) {
	if pg == nil {
		b.Skip("needs PostgreSQL; not run with -short")
	}
	ctx := context.Background()
	const table = "ks_bench_events"
	if _, err := pg.Business.Exec(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
		b.Fatal(err)
	}
	store, err := keysvc.OpenPG(ctx, pg.BusinessDSN, keysvc.PGOptions{Table: table, CreateSchema: true})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	reserve := pgsql.Reserve(pgsql.MustParseTable(table))
	const parallelism = 4 // goroutines per GOMAXPROCS, the same for both
	var seq atomic.Int64
	var baseline, service time.Duration

	b.Run("pgx-baseline", func(b *testing.B) {
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				key := fmt.Sprintf("evt:bench-%d", seq.Add(1))
				var got string
				if err := store.Pool().QueryRow(ctx, reserve, key).Scan(&got); err != nil {
					b.Error(err)
					return
				}
			}
		})
		baseline = b.Elapsed() / time.Duration(b.N)
	})

	b.Run("keysvc-http", func(b *testing.B) {
		srv := httptest.NewServer(keysvc.New(keysvc.Config{Store: store}))
		defer srv.Close()
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				body := fmt.Appendf(nil, `{"id":"bench-%d","type":"invoice.paid"}`, seq.Add(1))
				resp, err := client.Post(srv.URL+"/v1/reservations", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
		service = b.Elapsed() / time.Duration(b.N)
	})

	if baseline > 0 && service > 0 {
		// Printed rather than logged: benchmark logs show only with -v.
		fmt.Printf("BenchmarkReservation: per reservation keysvc over HTTP %v, pgx loop %v: ratio %.2f (same statement, %d goroutines per CPU)\n",
			service, baseline, float64(service)/float64(baseline), parallelism)
	}
}
