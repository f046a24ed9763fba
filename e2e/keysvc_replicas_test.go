package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/sandbox"
)

// keysvcReplicas are two keysvc on one PostgreSQL table behind HAProxy,
// round robin, with docs/scale-out/keysvc-haproxy.cfg.
type keysvcReplicas struct {
	a, b *keysvcProc
	url  string // HAProxy's
}

// startKeysvcReplicas starts the two replicas (the verifiable node's
// tokens) and HAProxy in front of them.
func startKeysvcReplicas(t *testing.T, name, table string) keysvcReplicas {
	t.Helper()
	args := []string{"--table", table, "--create-schema", "--tokens-file", nodeTokensFile(t)}
	r := keysvcReplicas{a: launchKeysvc(t, name+"-a", args, nil), b: launchKeysvc(t, name+"-b", args, nil)}
	cfg, err := filepath.Abs(filepath.Join("..", "docs", "scale-out", "keysvc-haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(st.LogDir, "haproxy-"+name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := sandbox.StartBalancer(cfg, r.a.addr, r.b.addr, logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lb.Close()
		logFile.Close()
	})
	r.url = lb.URL
	return r
}

// The verifiable node on two keysvc behind HAProxy (round robin) on one
// PostgreSQL: 32 concurrent deliveries of one event run the step once; a
// lease taken through one replica holds on the other; one replica
// SIGKILLed and restarted under load: the calls it failed are answered 503
// with Retry-After, and every event is processed once the provider
// retries, each once (lease) or at most once (reserve, which loses what a
// dead replica reserved without answering).
func TestNodeOnKeysvcReplicas(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	const table = "kr_processed_events"
	r := startKeysvcReplicas(t, "kr", table)
	nodeOn := func(prefix string, guard generator.Guard) (generator.Options, deployment) {
		opts := seedOptions(prefix, generator.HashingNode)
		opts.NodeStore, opts.Guard, opts.EventsTable = generator.NodeStoreKeysvc, guard, table
		opts.Lease = 15 * time.Second
		opts.KeysvcCredential = "keysvc replicas (e2e " + prefix + ")"
		if _, err := api.CreateCredential(ctx, opts.KeysvcCredential, communitynode.KeysvcCredential, map[string]any{"url": r.url, "token": nodeGuardToken}); err != nil {
			t.Fatal(err)
		}
		return opts, deploy(t, opts)
	}

	t.Run("32 concurrent deliveries of one event", func(t *testing.T) {
		opts, d := nodeOn("kr1", generator.GuardAtMostOnce)
		testConcurrentOnce(t, d, opts.BusinessTable, "evt_kr_concurrent", 32)
	})

	t.Run("a lease taken through one replica holds on the other", func(t *testing.T) {
		body := []byte(`{"id":"evt_kr_lease","type":"t"}`)
		call := func(k *keysvcProc, method, path string, body []byte) (int, string) {
			req, _ := http.NewRequest(method, k.url+path, strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+nodeGuardToken)
			resp, err := k.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode, resp.Header.Get("Retry-After")
		}
		if s, _ := call(r.a, "POST", "/v1/reservations?lease=60s", body); s != 201 {
			t.Fatalf("the lease through replica A: %d, want 201", s)
		}
		if s, retry := call(r.b, "POST", "/v1/reservations?lease=60s", body); s != 409 || retry == "" {
			t.Errorf("the same key through replica B: %d (Retry-After %q), want 409 with Retry-After", s, retry)
		}
		if s, _ := call(r.b, "POST", "/v1/reservations/evt:evt_kr_lease/done", nil); s != 200 {
			t.Errorf("marking it done through replica B: %d, want 200", s)
		}
		if s, _ := call(r.a, "POST", "/v1/reservations?lease=60s", body); s != 200 {
			t.Errorf("the key again through replica A: %d, want 200 (done)", s)
		}
	})

	t.Run("one replica killed and restarted under load", func(t *testing.T) {
		var targets []*crashTarget
		var refused, withoutRetryAfter atomic.Int64
		for _, guard := range []generator.Guard{generator.GuardAtMostOnce, generator.GuardLease} {
			prefix := "kr" + string(guard[0])
			opts, d := nodeOn(prefix, guard)
			evt := "evt_" + prefix + "_"
			targets = append(targets, &crashTarget{
				name:      string(guard) + " (node, keysvc)",
				mayLose:   guard == generator.GuardAtMostOnce,
				mayRepeat: guard == generator.GuardLease,
				paths:     []string{opts.WebhookPath},
				attempt: func(i int) response {
					resp, err := sendWithTimeout(d.url, "application/json", fmt.Appendf(nil, `{"id":"%s%d","type":"t"}`, evt, i), nil, 30*time.Second)
					if err != nil {
						return response{body: err.Error()}
					}
					if resp.status >= 500 && resp.status != 409 {
						refused.Add(1)
						if resp.status != 503 || resp.retryAfter == "" {
							withoutRetryAfter.Add(1)
							t.Logf("%s: a failed call answered %d (Retry-After %q): %.120s", opts.WebhookPath, resp.status, resp.retryAfter, resp.body)
						}
					}
					return resp
				},
				settle: func(*testing.T) {},
				effects: func(t *testing.T) map[int]int {
					return countPerEvent(t, "SELECT substr(event_key, $2) FROM "+opts.BusinessTable+" WHERE event_key LIKE $1", "evt:"+evt+"%", len("evt:"+evt)+1)
				},
			})
		}
		loadWithFault(t, targets, "keysvc replica A killed (SIGKILL) and restarted", func() error {
			r.a.kill()
			time.Sleep(time.Second)
			r.a.start()
			return nil
		})
		t.Logf("deliveries answered 5xx while a replica was down: %d, of which %d without 503 and Retry-After", refused.Load(), withoutRetryAfter.Load())
		if withoutRetryAfter.Load() != 0 {
			t.Errorf("%d failed calls were not answered 503 with Retry-After", withoutRetryAfter.Load())
		}
	})
}
