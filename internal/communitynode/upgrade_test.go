package communitynode_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/idemhook/idemhook/internal/communitynode"
)

// A workflow as n8n-nodes-idemhook 0.1.0 left it in n8n's export: its
// default store (PostgreSQL) left out, as n8n leaves out every parameter at
// its default; one node on keysvc; Save Inbox Receipt; and a node saved by
// 0.2.0, which is kept.
const workflow010 = `{
  "name": "Idempotent Webhook (idemhook)",
  "nodes": [
    {"name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2.1, "parameters": {"path": "x"}},
    {"name": "Idempotency Guard", "type": "n8n-nodes-idemhook.idempotencyGuard", "typeVersion": 1,
     "parameters": {"operation": "acquireLease", "leaseSeconds": 90, "options": {"errorOutput": true, "eventsTable": "shop.events", "timeoutSeconds": 5}},
     "credentials": {"postgres": {"id": "7", "name": "Postgres (shop)"}}},
    {"name": "Release Key", "type": "CUSTOM.idempotencyGuard", "typeVersion": 1,
     "parameters": {"operation": "release", "key": "={{ $('Idempotency Guard').first().json.idempotency.key }}"},
     "credentials": {"postgres": {"id": "7", "name": "Postgres (shop)"}}},
    {"name": "On keysvc", "type": "n8n-nodes-idemhook.idempotencyGuard", "typeVersion": 1,
     "parameters": {"store": "keysvc", "options": {"provider": "stripe", "eventsTable": "x"}},
     "credentials": {"idemhookKeysvcApi": {"id": "8", "name": "keysvc"}}},
    {"name": "Receipt", "type": "n8n-nodes-idemhook.idempotencyGuard", "typeVersion": 1,
     "parameters": {"operation": "receive", "signature": "stripe"},
     "credentials": {"postgres": {"id": "7", "name": "Postgres (shop)"}, "crypto": {"id": "9", "name": "Stripe secret"}}},
    {"name": "Saved by 0.2.0", "type": "n8n-nodes-idemhook.idempotencyGuard", "typeVersion": 1,
     "parameters": {"operation": "reserve", "options": {"provider": "github"}},
     "credentials": {"idemhookKeysvcApi": {"id": "8", "name": "keysvc"}}}
  ],
  "connections": {"Webhook": {"main": [[{"node": "Idempotency Guard", "type": "main", "index": 0}]]}}
}`

type node struct {
	Name        string                    `json:"name"`
	Type        string                    `json:"type"`
	TypeVersion float64                   `json:"typeVersion"`
	Parameters  map[string]any            `json:"parameters"`
	Credentials map[string]map[string]any `json:"credentials"`
}

func TestUpgradeWorkflowMovesTheNodesOf010(t *testing.T) {
	out, changes, err := communitynode.UpgradeWorkflow([]byte(workflow010))
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Nodes       []node         `json:"nodes"`
		Connections map[string]any `json:"connections"`
	}
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatal(err)
	}
	byName := map[string]node{}
	for _, n := range w.Nodes {
		byName[n.Name] = n
	}
	guard := byName["Idempotency Guard"]
	if guard.Type != communitynode.PostgresType || guard.TypeVersion != communitynode.VersionReserve {
		t.Errorf("the PostgreSQL node: %s v%v, want %s v1", guard.Type, guard.TypeVersion, communitynode.PostgresType)
	}
	options := guard.Parameters["options"].(map[string]any)
	if options["eventsTable"] != "shop.events" || options["errorOutput"] != true || options["timeoutSeconds"] != nil || guard.Parameters["leaseSeconds"] != 90.0 {
		t.Errorf("its parameters: %v", guard.Parameters)
	}
	if guard.Credentials["postgres"]["name"] != "Postgres (shop)" {
		t.Errorf("its credential: %v", guard.Credentials)
	}
	if got := byName["Release Key"].Type; got != communitynode.PostgresCustomType {
		t.Errorf("the CUSTOM node: %s, want %s", got, communitynode.PostgresCustomType)
	}
	receipt := byName["Receipt"]
	if receipt.Type != communitynode.PostgresType || receipt.Credentials["crypto"]["name"] != "Stripe secret" || receipt.Parameters["signature"] != "stripe" {
		t.Errorf("Save Inbox Receipt: %+v", receipt)
	}
	keysvc := byName["On keysvc"]
	if keysvc.Type != communitynode.KeysvcType || keysvc.Parameters["store"] != nil || keysvc.Parameters["options"].(map[string]any)["eventsTable"] != nil ||
		keysvc.Parameters["options"].(map[string]any)["provider"] != "stripe" {
		t.Errorf("the keysvc node: %+v", keysvc)
	}
	if kept := byName["Saved by 0.2.0"]; kept.Type != communitynode.KeysvcType || kept.Parameters["options"].(map[string]any)["provider"] != "github" {
		t.Errorf("a node of 0.2.0 changed: %+v", kept)
	}
	if len(changes) != 4 || w.Connections["Webhook"] == nil {
		t.Errorf("%d changes (want 4), connections %v: %v", len(changes), w.Connections, changes)
	}
	// Run again: nothing left to change.
	if _, again, err := communitynode.UpgradeWorkflow(out); err != nil || len(again) != 0 {
		t.Errorf("a second run: %v, %v", again, err)
	}
}

func TestUpgradeWorkflowTakesAnArrayAndRefusesWhatIsNoWorkflow(t *testing.T) {
	out, changes, err := communitynode.UpgradeWorkflow([]byte("[" + workflow010 + "," + workflow010 + "]"))
	if err != nil || len(changes) != 8 {
		t.Fatalf("an array of two: %d changes, %v", len(changes), err)
	}
	var ws []map[string]any
	if err := json.Unmarshal(out, &ws); err != nil || len(ws) != 2 {
		t.Fatalf("the array written: %v", err)
	}
	for _, bad := range []string{`{"name":"no nodes"}`, `not json`, `[{"nodes":[1]}]`} {
		if _, _, err := communitynode.UpgradeWorkflow([]byte(bad)); !errors.Is(err, communitynode.ErrNotAWorkflow) {
			t.Errorf("%s: %v, want ErrNotAWorkflow", bad, err)
		}
	}
}
