package keysvc_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/keysvc/inbox/inboxtest"
	"github.com/idemhook/idemhook/signature"
)

// A target that is down is in keysvc's log (issue 61: 1,017 failed
// forwards, 0 lines): one line at its first failure, a summary every
// TargetSummaryEvery while its forwards keep failing, one line when it
// answers again; keysvc_inbox_target_failing says the same. No line holds
// the target's URL path, its token, the signing secret or a body.
func TestInboxLogsATargetThatIsDown(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	const (
		schema, table = "ks_target_down", "ks_target_down_events"
		secretPath    = "/webhook/secret-path-3f9a71"
		targetToken   = "target-token-5d2be0c4a1"
		bodyMarker    = "body-marker-7c1e"
	)
	t.Setenv("KS_TEST_TARGET_TOKEN", targetToken)
	t.Cleanup(func() {
		pg.Business.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		pg.Business.Exec(ctx, "DROP TABLE IF EXISTS "+table)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // down: nothing listens there until the test starts the target
	secrets := map[signature.Provider][]string{signature.ProviderStripe: {inboxSecret}}
	endpoints := fmt.Sprintf(`{"endpoints":[{"name":"stripe","provider":"stripe","target":"http://%s%s","target_token_env":"KS_TEST_TARGET_TOKEN","max_attempts":100}]}`, addr, secretPath)
	var log lockedBuffer
	svc, err := keysvc.StartService(ctx, keysvc.ServiceConfig{
		DatabaseURL: pg.BusinessDSN, PG: keysvc.PGOptions{Table: table, CreateSchema: true},
		Endpoints: inboxtest.Endpoints(t, endpoints, secrets),
		Inbox: inbox.Options{Schema: schema, CreateSchema: true, Backoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
			TargetSummaryEvery: time.Second},
		Addr: "127.0.0.1:0", Logger: debugLogger(&log),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	for i := range 3 {
		body := []byte(fmt.Sprintf(`{"id":"evt_down_%d","type":"payment_intent.succeeded","note":%q}`, i, bodyMarker))
		h, err := signature.ProviderStripe.Sign(signature.Unsigned{Body: body, Secret: inboxSecret})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", svc.URL+"/v1/inbox/stripe", strings.NewReader(string(body)))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("delivery %d: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	lines := func(msg string) []string {
		var out []string
		for _, line := range strings.Split(log.String(), "\n") {
			if strings.Contains(line, msg) {
				out = append(out, line)
			}
		}
		return out
	}
	waitFor(t, 15*time.Second, "a summary of the failing target", func() bool { return len(lines("the target is still failing")) >= 1 })
	if got := lines("a forward to the target failed"); len(got) != 1 || !strings.Contains(got[0], `"endpoint":"stripe"`) || !strings.Contains(got[0], "connection refused") {
		t.Errorf("the first failure's lines: %q, want one naming the endpoint and the cause", got)
	}
	if v := metricOf(t, svc.URL, `keysvc_inbox_target_failing{endpoint="stripe"}`); v != "1" {
		t.Errorf("keysvc_inbox_target_failing while the target is down: %q, want 1", v)
	}

	target := inboxtest.NewRecorder()
	srv := httptest.NewUnstartedServer(target)
	if srv.Listener, err = net.Listen("tcp", addr); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Close()
	waitFor(t, 15*time.Second, "the three events forwarded", func() bool { return len(target.Calls()) == 3 })
	waitFor(t, 5*time.Second, "the target's recovery in the log", func() bool { return len(lines("the target answers again")) == 1 })
	if got := lines("the target answers again")[0]; !strings.Contains(got, `"failed_forwards"`) || strings.Contains(got, `"failed_forwards":0`) {
		t.Errorf("the recovery line does not count the failed forwards: %s", got)
	}
	if v := metricOf(t, svc.URL, `keysvc_inbox_target_failing{endpoint="stripe"}`); v != "0" {
		t.Errorf("keysvc_inbox_target_failing once the target answers: %q, want 0", v)
	}
	t.Logf("%d summaries while the target was down", len(lines("the target is still failing")))
	for _, secret := range []string{secretPath, targetToken, bodyMarker, inboxSecret} {
		if strings.Contains(log.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}
