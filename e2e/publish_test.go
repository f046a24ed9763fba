package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/tidwall/sjson"
)

// Import and publish go through the n8n CLI as the README tells users
// (deploy does exactly that). A publish that does not go live, here a second
// workflow on a taken webhook path, is detected and reported.
func TestPublishOnTakenPathIsReported(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	opts := seedOptions("s9", generator.HashingCodeNode)
	d := deploy(t, opts)

	raw, err := os.ReadFile(filepath.Join(d.dir, "workflow.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Another workflow (another id and webhookId) claiming the same path.
	const otherID = "idemhookS9Clash1"
	raw, _ = sjson.SetBytes(raw, "id", otherID)
	raw, _ = sjson.SetBytes(raw, "name", "e2e s9 clash")
	raw, _ = sjson.SetBytes(raw, "nodes.0.webhookId", "00000000-0000-4000-8000-000000000009")
	clash := filepath.Join(t.TempDir(), "clash.json")
	if err := os.WriteFile(clash, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.ImportWorkflow(ctx, clash); err != nil {
		t.Fatal(err)
	}
	// The path answers already (for the first workflow), so probing alone
	// would be fooled: Publish must read n8n's publication status.
	err = st.Publish(ctx, otherID, opts.WebhookPath)
	if !errors.Is(err, sandbox.ErrNotLive) {
		t.Fatalf("publishing a second workflow on a taken path: err = %v, want ErrNotLive", err)
	}
	t.Logf("reported as: %v", err)
	if _, err := st.N8N(ctx, "unpublish:workflow", "--id="+otherID); err != nil {
		t.Log(err)
	}
	// The first workflow still serves the path.
	r := post(t, d.url, "application/json", []byte(`{"id":"evt_s9"}`), nil)
	if r.status != 200 {
		t.Errorf("the original workflow stopped answering: %d %s", r.status, r.body)
	}
}

// Every node of every generated workflow uses a type and typeVersion that the
// running n8n knows, and the latest one it offers.
func TestNodeTypeVersionsAreN8NsLatest(t *testing.T) {
	needStack(t)
	known, err := st.NodeTypeVersions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for typ, v := range generator.TypeVersions {
		versions, ok := known[typ]
		if !ok {
			t.Errorf("n8n %s has no node type %s", sandbox.N8NVersion, typ)
			continue
		}
		if latest := slices.Max(versions); v != latest {
			t.Errorf("%s: generator uses typeVersion %v, n8n %s's latest is %v (all: %v)", typ, v, sandbox.N8NVersion, latest, versions)
		}
	}
}
