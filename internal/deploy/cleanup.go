package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/n8napi"
)

// CleanupNow runs the deployed cleanup workflow (the file named cleanup)
// once, now, inside n8n, through RunOnce. This works where `n8n execute`
// does not: on a host or in a container where n8n already runs (the CLI's
// task broker finds its port taken).
func CleanupNow(ctx context.Context, c *n8napi.Client, cleanup string, opts Options) error {
	existing, err := c.Workflows(ctx)
	if err != nil {
		return err
	}
	var target []n8napi.Workflow
	for _, w := range existing {
		if w.Name == cleanup && !w.IsArchived {
			target = append(target, w)
		}
	}
	switch len(target) {
	case 0:
		return fmt.Errorf("n8n has no workflow named %q: run idemhook deploy first", cleanup)
	case 1:
	default:
		return &AmbiguousWorkflowError{Name: cleanup, IDs: ids(target)}
	}
	cleanupNode := map[string]any{"name": "Cleanup", "type": execWorkflowTyp, "typeVersion": 1.4,
		"parameters": map[string]any{"source": "database", "mode": "once",
			"workflowId": map[string]any{"__rl": true, "value": target[0].ID, "mode": "id"},
			"options":    map[string]any{"waitForSubWorkflow": true}}}
	if _, err := RunOnce(ctx, c, "run "+cleanup+" now", cleanupNode, 10*time.Minute, opts); err != nil {
		return fmt.Errorf("run %q: %w", cleanup, err)
	}
	opts.Progressf("ran %q (id %s) in n8n", cleanup, target[0].ID)
	return nil
}

// RunOnce runs node once inside n8n, now, and returns what it output (the
// JSON n8n answers with): n8n's public API cannot start an execution, so
// it publishes a temporary workflow whose Webhook (a random path) runs the
// node, calls it, waits up to timeout, and deletes the workflow again.
// A node that fails is an error carrying n8n's message.
func RunOnce(ctx context.Context, c *n8napi.Client, what string, node map[string]any, timeout time.Duration, opts Options) ([]byte, error) {
	random := make([]byte, 12)
	_, _ = rand.Read(random)
	path := "idemhook-run-" + hex.EncodeToString(random)
	node["position"] = []int{220, 0}
	name, _ := node["name"].(string)
	tmp := n8napi.Workflow{
		Name: "idemhook: " + what + " (temporary)",
		Nodes: []map[string]any{
			{"name": "Run Now", "type": webhookType, "typeVersion": 2.1, "position": []int{0, 0}, "webhookId": NewUUID(),
				"parameters": map[string]any{"httpMethod": "POST", "path": path, "responseMode": "lastNode", "options": map[string]any{}}},
			node,
		},
		Connections: map[string]any{"Run Now": map[string]any{"main": []any{[]any{map[string]any{"node": name, "type": "main", "index": 0}}}}},
		Settings:    map[string]any{"executionOrder": "v1"},
	}
	created, err := c.CreateWorkflow(ctx, tmp)
	if err != nil {
		return nil, fmt.Errorf("create the temporary workflow: %w", err)
	}
	defer func() {
		// A fresh context: the caller's may be done, the workflow must go.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.DeleteWorkflow(ctx, created.ID); err != nil {
			opts.Progressf("could not delete the temporary workflow %s: %v (delete it in the editor)", created.ID, err)
		}
	}()
	if err := c.Publish(ctx, created.ID); err != nil {
		return nil, fmt.Errorf("publish the temporary workflow: %w", err)
	}
	url := opts.ProductionURL(c, path)
	if err := waitLive(ctx, url, opts.LiveWait()); err != nil {
		return nil, fmt.Errorf("temporary workflow at %s: %w", url, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("n8n answered %d %s", resp.StatusCode, strings.TrimSpace(string(body[:min(len(body), 600)])))
	}
	return body, nil
}

// NewUUID returns a random (version 4) UUID, for a Webhook node's
// webhookId.
func NewUUID() string {
	u := make([]byte, 16)
	_, _ = rand.Read(u)
	u[6] = (u[6] & 0x0f) | 0x40
	u[8] = (u[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
