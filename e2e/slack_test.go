package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
)

// Slack checks an Events API Request URL with a signed
// {"type":"url_verification","challenge":…} and accepts the URL only when
// the answer echoes the challenge. The guard answers it after the signature
// check, reserving nothing and running nothing, in the Code node's workflow
// and through keysvc; a forged check gets 401; an event after it is
// processed as any.
func TestSlackURLVerification(t *testing.T) {
	needStack(t)
	for _, c := range []struct {
		name string
		opts func(t *testing.T) generator.Options
	}{
		{"code-node", func(t *testing.T) generator.Options {
			opts := seedOptions("slack1", generator.HashingCodeNode)
			opts.Verify, opts.VerifyCredential = "slack", "Slack signing secret (e2e)"
			importSecretCredential(t, opts.VerifyCredential, slackSecret)
			return opts
		}},
		{"keysvc", func(t *testing.T) generator.Options {
			opts := seedOptions("slack2", generator.HashingKeysvc)
			opts.Verify = "slack"
			opts.KeysvcURL = startKeysvc(t, opts.EventsTable, "KEYSVC_SECRET_SLACK="+slackSecret)
			return opts
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts(t)
			d := deploy(t, opts)
			check := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
			r := post(t, d.url, "application/json", check, slackSigned(t, check, time.Now()))
			var answer map[string]any
			if r.status != 200 || json.Unmarshal([]byte(r.body), &answer) != nil || answer["challenge"] != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
				t.Errorf("Slack's URL check: %d %s, want 200 and its challenge", r.status, r.body)
			}
			forged := post(t, d.url, "application/json", check, map[string]string{"X-Slack-Request-Timestamp": "1700000000", "X-Slack-Signature": "v0=" + strings.Repeat("0", 64)})
			if forged.status != 401 || strings.Contains(forged.body, "3eZbrw1a") {
				t.Errorf("a forged URL check: %d %s, want 401 without the challenge", forged.status, forged.body)
			}
			if n := countRows(t, opts.EventsTable); n != 0 {
				t.Errorf("the URL check reserved %d keys, want none", n)
			}
			if n := countRows(t, opts.BusinessTable); n != 0 {
				t.Errorf("the URL check ran the business step %d times, want never", n)
			}
			event := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","team_id":"T0001","type":"event_callback","event_id":"Ev0SLACK1","event":{"type":"app_mention","text":"hi"}}`)
			if r := post(t, d.url, "application/json", event, slackSigned(t, event, time.Now())); r.status != 200 || !strings.Contains(r.body, `"processed"`) {
				t.Errorf("a Slack event after the check: %d %s, want 200 processed", r.status, r.body)
			}
			if n := countRows(t, opts.BusinessTable); n != 1 {
				t.Errorf("the event ran the business step %d times, want once", n)
			}
		})
	}
}

// The inbox pattern's receivers answer Slack's URL check its challenge
// after the signature check, and save nothing: the Code node's and the
// community node's (Save Inbox Receipt); a forged check gets 401; an event
// after it is saved.
func TestInboxSlackURLVerification(t *testing.T) {
	needStack(t)
	const credential = "Slack signing secret (e2e inbox)"
	importSecretCredential(t, credential, slackSecret)
	for _, c := range []struct {
		name, prefix string
		hashing      generator.Hashing
	}{
		{"code-node", "slacki1", generator.HashingCodeNode},
		{"node", "slacki2", generator.HashingNode},
	} {
		t.Run(c.name, func(t *testing.T) {
			// No effect rule matches a Slack event: the outbox is never called.
			opts := inboxOptions(c.prefix, "http://127.0.0.1:9/unused")
			opts.Hashing, opts.Verify, opts.VerifyCredential = c.hashing, "slack", credential
			d := deploy(t, opts)
			inboxRows := func() int { return countRows(t, opts.DBSchema+".inbox_events") }
			check := []byte(`{"token":"Zq8WbT1xLr","challenge":"c7Hn2VqPz0sK4mYd","type":"url_verification"}`)
			r := post(t, d.url, "application/json", check, slackSigned(t, check, time.Now()))
			var answer map[string]any
			if r.status != 200 || json.Unmarshal([]byte(r.body), &answer) != nil || answer["challenge"] != "c7Hn2VqPz0sK4mYd" {
				t.Errorf("Slack's URL check: %d %s, want 200 and its challenge", r.status, r.body)
			}
			forged := post(t, d.url, "application/json", check, map[string]string{"X-Slack-Request-Timestamp": "1700000000", "X-Slack-Signature": "v0=" + strings.Repeat("0", 64)})
			if forged.status != 401 || strings.Contains(forged.body, "c7Hn2VqPz0sK4mYd") {
				t.Errorf("a forged URL check: %d %s, want 401 without the challenge", forged.status, forged.body)
			}
			if n := inboxRows(); n != 0 {
				t.Errorf("the URL check saved %d receipts, want none", n)
			}
			event := []byte(`{"token":"Zq8WbT1xLr","team_id":"T0001","type":"event_callback","event_id":"Ev0SLACKINBOX","event":{"type":"app_mention","text":"hi"}}`)
			if r := post(t, d.url, "application/json", event, slackSigned(t, event, time.Now())); r.status != 200 || !strings.Contains(r.body, `"received"`) {
				t.Errorf("a Slack event after the check: %d %s, want 200 received", r.status, r.body)
			}
			if n := inboxRows(); n != 1 {
				t.Errorf("%d receipts after one event, want 1", n)
			}
		})
	}
}
