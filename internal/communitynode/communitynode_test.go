package communitynode_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idemhook/idemhook/internal/communitynode"
)

// The node's generated.ts is what package pgsql and signature/provider say
// today: the node reserves with the statement every other part of idemhook
// runs.
func TestGeneratedTSIsCurrent(t *testing.T) {
	want, err := communitynode.StatementsTS()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", communitynode.GeneratedFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is out of date: run `go generate ./internal/communitynode`", communitynode.GeneratedFile)
	}
}

func TestSourceRoot(t *testing.T) {
	root, err := communitynode.SourceRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, communitynode.SourceDir, "package.json")); err != nil {
		t.Errorf("SourceRoot gave %s: %v", root, err)
	}
	if _, err := communitynode.SourceRoot(t.TempDir()); err != communitynode.ErrNoSource {
		t.Errorf("outside a clone: %v, want ErrNoSource", err)
	}
}
