package keysvc_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/signature"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"
)

// BenchmarkInboxAck measures the inbox's acknowledgement (verify the Stripe
// signature, save the event and enqueue its delivery in one transaction,
// answer after the commit) under 32 concurrent senders, and in the same run
// and at the same concurrency a baseline: one INSERT round trip on the same
// database. It prints p50 and p99 of each and the ratio of the p99s.
//
//	go test -run '^$' -bench InboxAck ./keysvc
func BenchmarkInboxAck(b *testing.B) {
	if pg == nil {
		b.Skip("needs PostgreSQL; not run with -short")
	}
	ctx := context.Background()
	const senders = 32
	file := writeEndpoints(b, `{"endpoints":[{"name":"stripe","provider":"stripe","target":"http://127.0.0.1:9/"}]}`)
	eps, err := inbox.LoadEndpoints(file, map[signature.Provider][]string{signature.ProviderStripe: {inboxSecret}})
	if err != nil {
		b.Fatal(err)
	}
	// Not started: deliveries stay queued, only the acknowledgement is measured.
	in, err := inbox.Open(ctx, pg.Business, eps, inbox.Options{Schema: "ks_inbox_bench", CreateSchema: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pg.Business.Exec(context.Background(), "DROP SCHEMA ks_inbox_bench CASCADE") })
	if _, err := pg.Business.Exec(ctx, "CREATE TABLE IF NOT EXISTS ks_inbox_bench.baseline (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body bytea)"); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	var baseline, ack []time.Duration

	b.Run("insert-baseline", func(b *testing.B) {
		baseline = runConcurrently(b, senders, func() error {
			_, err := pg.Business.Exec(ctx, "INSERT INTO ks_inbox_bench.baseline (body) VALUES ($1)", []byte(`{"id":"x"}`))
			return err
		})
	})
	b.Run("keysvc-inbox", func(b *testing.B) {
		srv := httptest.NewServer(keysvc.New(keysvc.Config{Store: newBoltStore(b), Inbox: in}))
		defer srv.Close()
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		ack = runConcurrently(b, senders, func() error {
			body := fmt.Appendf(nil, `{"id":"evt_bench_%d","type":"payment_intent.succeeded"}`, seq.Add(1))
			sig := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: inboxSecret, Timestamp: time.Now()}).Header
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/inbox/stripe", bytes.NewReader(body))
			req.Header.Set("Stripe-Signature", sig)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
	})
	if len(baseline) > 0 && len(ack) > 0 {
		bp50, bp99 := percentile(baseline, 50), percentile(baseline, 99)
		ap50, ap99 := percentile(ack, 50), percentile(ack, 99)
		fmt.Printf("BenchmarkInboxAck: %d concurrent senders: inbox acknowledgement p50 %v p99 %v; one INSERT round trip p50 %v p99 %v; p99 ratio %.2f\n",
			senders, ap50, ap99, bp50, bp99, float64(ap99)/float64(bp99))
	}
}

// runConcurrently runs op b.N times from n goroutines and returns each
// call's latency.
func runConcurrently(b *testing.B, n int, op func() error) []time.Duration {
	var next atomic.Int64
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for next.Add(1) <= int64(b.N) {
				start := time.Now()
				if err := op(); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(time.Microsecond)
}
