package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/signature"
)

const slackSecret = "e2e-slack-signing-secret-0123456789"

// keysvcNodeWorkflow is nodeOnKeysvcOptions with the options edit sets and
// keysvc's environment env (providers' secrets, its limit).
func keysvcNodeWorkflow(t *testing.T, prefix string, edit func(*generator.Options), env ...string) generator.Options {
	t.Helper()
	opts := seedOptions(prefix, generator.HashingNode)
	opts.NodeStore = generator.NodeStoreKeysvc
	edit(&opts)
	ks := nodeKeysvc(t, prefix, opts.EventsTable, env...)
	opts.KeysvcCredential = "keysvc (e2e " + prefix + ")"
	if _, err := api.CreateCredential(context.Background(), opts.KeysvcCredential, communitynode.KeysvcCredential, map[string]any{"url": ks.url, "token": nodeGuardToken}); err != nil {
		t.Fatal(err)
	}
	return opts
}

// echoChallenge is the user's edit that answers Slack's url_verification:
// the duplicate answer echoes the guard's idempotency.challenge when it has
// one (issue 61's contract; the generator's own answer is the lead's).
func echoChallenge(t *testing.T) func(files map[string][]byte) {
	return func(files map[string][]byte) {
		var w map[string]any
		if err := json.Unmarshal(files["workflow.json"], &w); err != nil {
			t.Fatal(err)
		}
		for _, n := range w["nodes"].([]any) {
			node := n.(map[string]any)
			if node["name"] == generator.NodeRespondDup {
				node["parameters"].(map[string]any)["responseBody"] = "={{ JSON.stringify($json.idempotency.status === 'url_verification' ? { challenge: $json.idempotency.challenge } : { status: 'duplicate', key: $json.idempotency.key }) }}"
			}
		}
		files["workflow.json"] = mustJSON(t, w)
	}
}

// nodeBody is a delivery of the tests below and the key `idemhook key`
// gives it (eventkey.DeriveFor under the slack preset, which keys a body
// without an event_id by the spec's own clauses).
type nodeBody struct {
	name string
	body []byte
	key  string
}

// largeBodies are JSON events of 1 MiB + 27 bytes (the size the issue saw
// refused), 5 MB and 15 MB, each with an id (its last member: the whole
// body is read to find it) and without one (keyed by its SHA-256).
func largeBodies(t *testing.T) []nodeBody {
	var out []nodeBody
	for _, size := range []int{1<<20 + 27, 5_000_000, 15_000_000} {
		for _, withID := range []bool{true, false} {
			tail := `"}`
			if withID {
				tail = fmt.Sprintf(`","id":"evt_large_%d"}`, size)
			}
			body := append(append([]byte(`{"type":"bulk.export","data":"`), bytes.Repeat([]byte("x"), size-30-len(tail))...), tail...)
			k, err := eventkey.DeriveFor(eventkey.PresetSlack, http.Header{}, body, "")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, nodeBody{fmt.Sprintf("%d bytes, id %v", len(body), withID), body, k.Value})
		}
	}
	return out
}

// businessRows is how many rows the example step wrote for key.
func businessRows(t *testing.T, table, key string) (n int, eventType string) {
	t.Helper()
	err := st.Business.QueryRow(context.Background(), "SELECT count(*), coalesce(max(event_type), '') FROM "+ident(table)+" WHERE event_key = $1", key).Scan(&n, &eventType)
	if err != nil {
		t.Fatal(err)
	}
	return n, eventType
}

// wantStoredOnce checks that r processed key, which the events table holds
// and the example step wrote once.
func wantStoredOnce(t *testing.T, what string, opts generator.Options, r response, key string) {
	t.Helper()
	if r.status != 200 || !strings.Contains(r.body, `"processed"`) || !strings.Contains(r.body, `"key":"`+key+`"`) {
		t.Errorf("%s: %d %.300s, want 200 processed with key %s", what, r.status, r.body, key)
		return
	}
	if !hasKey(t, opts.EventsTable, key) {
		t.Errorf("%s: %s is not in %s", what, key, opts.EventsTable)
	}
	if n, _ := businessRows(t, opts.BusinessTable, key); n != 1 {
		t.Errorf("%s: the step wrote %d rows for %s, want 1", what, n, key)
	}
}

// The Idempotency Guard on keysvc (HTTPS, trusted through
// NODE_EXTRA_CA_CERTS) takes every delivery the PostgreSQL package takes,
// each stored once under `idemhook key`'s key (issue 59): JSON events of
// 1 MiB + 27 bytes, 5 MB and 15 MB, with and without an id, without a
// signature check (the node sends keysvc its key only) and with one (keysvc
// verifies the exact bytes), beside the PostgreSQL package; a signed Slack
// slash command (form-encoded), checked by keysvc, and forged; a body over
// keysvc's --max-body, whose error in the execution names the flag. Slack's
// url_verification gets its challenge back and reserves nothing, on both
// packages; GitHub's and Shopify's event types reach the step (issue 61).
// Each 15 MB body is sent once to each workflow.
func TestNodeTakesEveryDelivery(t *testing.T) {
	needStack(t)
	plain := keysvcNodeWorkflow(t, "vb1", func(o *generator.Options) { o.Preset = "slack" })
	stripe := keysvcNodeWorkflow(t, "vb2", func(o *generator.Options) { o.Verify = "stripe" }, "KEYSVC_SECRET_STRIPE="+stripeSecret)
	slack := keysvcNodeWorkflow(t, "vb3", func(o *generator.Options) { o.Preset, o.Verify = "slack", "slack" },
		"KEYSVC_SECRET_SLACK="+slackSecret, "KEYSVC_MAX_BODY=1048576")
	pg := seedOptions("vb4", generator.HashingNode)
	pg.Preset = "slack"
	dPlain, dStripe := deployEdited(t, plain, echoChallenge(t)), deploy(t, stripe)
	dSlack, dPG := deployEdited(t, slack, echoChallenge(t)), deployEdited(t, pg, echoChallenge(t))

	t.Run("JSON of 1, 5 and 15 MB", func(t *testing.T) {
		for _, b := range largeBodies(t) {
			wantStoredOnce(t, "keysvc, no signature check, "+b.name, plain, post(t, dPlain.url, "application/json", b.body, nil), b.key)
			wantStoredOnce(t, "keysvc, Stripe's signature checked, "+b.name, stripe, post(t, dStripe.url, "application/json", b.body, stripeSigned(stripeSecret, b.body)), b.key)
			wantStoredOnce(t, "PostgreSQL package, "+b.name, pg, post(t, dPG.url, "application/json", b.body, nil), b.key)
			if len(b.body) < 2_000_000 { // the replays of the smallest
				if r := post(t, dPlain.url, "application/json", b.body, nil); !strings.Contains(r.body, `"duplicate"`) {
					t.Errorf("the replay of %s: %d %.200s, want duplicate", b.name, r.status, r.body)
				}
				if r := post(t, dStripe.url, "application/json", b.body, stripeSigned(stripeSecret, b.body)); !strings.Contains(r.body, `"duplicate"`) {
					t.Errorf("the signed replay of %s: %d %.200s, want duplicate", b.name, r.status, r.body)
				}
			}
		}
	})

	t.Run("a signed Slack slash command", func(t *testing.T) {
		form := []byte("token=gIkuvaNzQIHg97ATvDxqgjtO&team_id=T0001&team_domain=example&channel_id=C2147483705&user_id=U2147483697&command=%2Fdeploy&text=api+v2.3.1&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2F1234%2F5678&trigger_id=13345224609.738474920.8088930838d88f008e0")
		key, _ := eventkey.DeriveFor(eventkey.PresetSlack, http.Header{}, form, "")
		const formType = "application/x-www-form-urlencoded"
		wantStoredOnce(t, "signed, to keysvc", slack, post(t, dSlack.url, formType, form, slackSigned(t, form, time.Now())), key.Value)
		wantStoredOnce(t, "not checked", plain, post(t, dPlain.url, formType, form, nil), key.Value)
		forged := []byte(strings.Replace(string(form), "api+v2.3.1", "api+v9", 1))
		if r := post(t, dSlack.url, formType, forged, slackSigned(t, form, time.Now())); r.status != 401 || !strings.Contains(r.body, "invalid_signature") {
			t.Errorf("a forged slash command: %d %.300s, want 401 invalid_signature", r.status, r.body)
		}
		forgedKey, _ := eventkey.DeriveFor(eventkey.PresetSlack, http.Header{}, forged, "")
		if hasKey(t, slack.EventsTable, forgedKey.Value) {
			t.Error("the forged slash command was reserved")
		}
	})

	t.Run("over keysvc's --max-body", func(t *testing.T) {
		big := []byte("token=t&team_id=T0001&command=%2Fimport&text=" + strings.Repeat("y", 1_200_000))
		r := post(t, dSlack.url, "application/x-www-form-urlencoded", big, slackSigned(t, big, time.Now()))
		if r.status != 500 {
			t.Errorf("a slash command over keysvc's limit: %d %.300s, want 500 (the guard's setup)", r.status, r.body)
		}
		said := guardErrorSaying(t, dSlack.workflowID, "--max-body")
		if !strings.Contains(said, "--max-body") {
			t.Errorf("the guard's error output says %q, want it to name --max-body", said)
		}
	})

	t.Run("Slack's url_verification", func(t *testing.T) {
		const challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
		body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"` + challenge + `","type":"url_verification"}`)
		key, _ := eventkey.DeriveFor(eventkey.PresetSlack, http.Header{}, body, "")
		for _, c := range []struct {
			what string
			d    deployment
			opts generator.Options
		}{{"signed, checked by keysvc", dSlack, slack}, {"keysvc, not checked", dPlain, plain}, {"PostgreSQL package", dPG, pg}} {
			r := post(t, c.d.url, "application/json", body, slackSigned(t, body, time.Now()))
			var answer map[string]string
			if r.status != 200 || json.Unmarshal([]byte(r.body), &answer) != nil || answer["challenge"] != challenge || len(answer) != 1 {
				t.Errorf("%s: %d %.300s, want 200 with the challenge", c.what, r.status, r.body)
			}
			if hasKey(t, c.opts.EventsTable, key.Value) || countRowsWhere(t, c.opts.BusinessTable, key.Value) != 0 {
				t.Errorf("%s: the url_verification was reserved or ran the step", c.what)
			}
		}
		if r := post(t, dSlack.url, "application/json", body, slackSigned(t, []byte(`{}`), time.Now())); r.status != 401 || strings.Contains(r.body, challenge) {
			t.Errorf("a forged url_verification: %d %.300s, want 401 without the challenge", r.status, r.body)
		}
	})

	t.Run("GitHub's and Shopify's event types", func(t *testing.T) {
		for _, c := range []struct {
			body      string
			header    map[string]string
			eventType string
		}{
			{`{"ref":"refs/heads/main","after":"6113728f27ae82c7b1a177c8d03f9e96e0adf246"}`, map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "push"},
			{`{"id":820982911946154508,"email":"jon@example.com"}`, map[string]string{"X-Shopify-Topic": "orders/create", "X-Shopify-Webhook-Id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"}, "orders/create"},
		} {
			key, _ := eventkey.DeriveFor(eventkey.PresetSlack, http.Header{}, []byte(c.body), "")
			for _, w := range []struct {
				d    deployment
				opts generator.Options
			}{{dPlain, plain}, {dPG, pg}} {
				wantStoredOnce(t, c.eventType+" to "+w.opts.WebhookPath, w.opts, post(t, w.d.url, "application/json", []byte(c.body), c.header), key.Value)
				if _, got := businessRows(t, w.opts.BusinessTable, key.Value); got != c.eventType {
					t.Errorf("%s: the step got event type %q, want %q", w.opts.WebhookPath, got, c.eventType)
				}
			}
		}
	})
}

// slackSigned signs body as Slack does, at at.
func slackSigned(t *testing.T, body []byte, at time.Time) map[string]string {
	t.Helper()
	h, err := signature.ProviderSlack.Sign(signature.Unsigned{Body: body, Secret: slackSecret, Timestamp: at})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// countRowsWhere counts the example step's rows for key.
func countRowsWhere(t *testing.T, table, key string) int {
	n, _ := businessRows(t, table, key)
	return n
}

// guardErrorSaying is the message on the Idempotency Guard's error output
// in one of the workflow's latest executions that says want, waiting for it
// (an execution is listed once it is saved); else the last such message
// read, or "".
func guardErrorSaying(t *testing.T, workflowID, want string) string {
	t.Helper()
	ctx := context.Background()
	said := ""
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		execs, err := api.Executions(ctx, workflowID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range execs[:min(len(execs), 3)] { // newest first
			run, err := api.ExecutionRun(ctx, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if m := guardError(run); m != "" {
				said = m
				if strings.Contains(m, want) {
					return m
				}
			}
		}
	}
	return said
}
