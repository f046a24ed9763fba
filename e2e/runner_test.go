package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The runner is a test-only workflow that runs another published workflow
// now, through its Execute Workflow Trigger, and answers with that
// workflow's output: the recoverer and the outbox dispatcher on demand, in
// well under a second, where `n8n execute` starts a whole n8n process.
const runnerPath = "e2e-run-workflow"

const runnerWorkflow = `{
  "id": "idemhookE2ERunner",
  "name": "e2e runner",
  "nodes": [
    {"parameters": {"httpMethod": "POST", "path": "` + runnerPath + `", "responseMode": "lastNode", "responseData": "allEntries", "options": {}},
     "id": "0e2e0000-0000-4000-8000-000000000001", "name": "Run Request", "type": "n8n-nodes-base.webhook", "typeVersion": 2.1,
     "position": [0, 300], "webhookId": "0e2e0000-0000-4000-8000-0000000000aa"},
    {"parameters": {"source": "database", "workflowId": {"__rl": true, "value": "={{ $json.body.workflowId }}", "mode": "id"},
       "mode": "once", "options": {"waitForSubWorkflow": true}},
     "id": "0e2e0000-0000-4000-8000-000000000002", "name": "Run Workflow", "type": "n8n-nodes-base.executeWorkflow", "typeVersion": 1.4,
     "position": [220, 300]}
  ],
  "connections": {"Run Request": {"main": [[{"node": "Run Workflow", "type": "main", "index": 0}]]}},
  "active": false, "settings": {"executionOrder": "v1"}, "pinData": {}
}`

func deployRunner(ctx context.Context, dir string) error {
	file := filepath.Join(dir, "runner.json")
	if err := os.WriteFile(file, []byte(runnerWorkflow), 0o644); err != nil {
		return err
	}
	return st.Deploy(ctx, file)
}

// runWorkflow runs the published workflow id now and returns its output
// items (each item's json).
func runWorkflow(t *testing.T, id string) []map[string]any {
	t.Helper()
	out, err := runWorkflowNoFatal(id)
	if err != nil {
		t.Fatalf("run workflow %s: %v", id, err)
	}
	return out
}

func runWorkflowNoFatal(id string) ([]map[string]any, error) {
	body, _ := json.Marshal(map[string]string{"workflowId": id})
	r, err := sendWithTimeout(st.WebhookURL+"/webhook/"+runnerPath, "application/json", body, nil, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	if r.status != 200 {
		return nil, fmt.Errorf("%d %s", r.status, r.body)
	}
	var items []map[string]any
	if err := json.Unmarshal([]byte(r.body), &items); err != nil {
		// One item comes back as an object.
		var one map[string]any
		if err2 := json.Unmarshal([]byte(r.body), &one); err2 != nil {
			return nil, fmt.Errorf("runner answer %q: %v", r.body, err)
		}
		items = []map[string]any{one}
	}
	return items, nil
}
