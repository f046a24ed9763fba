package communitynode_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idemhook/idemhook/internal/communitynode"
)

// The packages' generated files are what package pgsql, signature/provider
// and the Code node's JavaScript say today: the nodes key, reserve and
// verify with the code every other part of idemhook runs.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := communitynode.Generated()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Errorf("%d generated files, want 4", len(files))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("%s: %v (run `go generate ./internal/communitynode`)", name, err)
			continue
		}
		if string(got) != string(want) {
			t.Errorf("%s is out of date: run `go generate ./internal/communitynode`", name)
		}
	}
}

func TestSourceRoot(t *testing.T) {
	root, err := communitynode.SourceRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range communitynode.Packages {
		if _, err := os.Stat(filepath.Join(root, p.SourceDir(), "package.json")); err != nil {
			t.Errorf("SourceRoot gave %s: %v", root, err)
		}
	}
	if _, err := communitynode.SourceRoot(t.TempDir()); err != communitynode.ErrNoSource {
		t.Errorf("outside a clone: %v, want ErrNoSource", err)
	}
}

// The self-hosted package compiles the verifiable one's guard folder through
// a symbolic link, so that both run one copy of the guard's code.
func TestSelfHostedPackageLinksTheGuard(t *testing.T) {
	link := filepath.Join("..", "..", communitynode.Postgres.SourceDir(), "nodes", "IdempotencyGuardPostgres", "guard")
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatalf("%s is not a symbolic link: %v", link, err)
	}
	want := filepath.Join("..", "..", "..", communitynode.Keysvc.SourceDir(), "nodes", "IdempotencyGuard", "guard")
	if target != want {
		t.Errorf("%s points at %s, want %s", link, target, want)
	}
}

// The constants name what the packages say.
func TestTypeConstants(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{communitynode.KeysvcType, communitynode.Keysvc.Type()}, {communitynode.KeysvcCustomType, communitynode.Keysvc.CustomType()},
		{communitynode.PostgresType, communitynode.Postgres.Type()}, {communitynode.PostgresCustomType, communitynode.Postgres.CustomType()},
	} {
		if c.got != c.want {
			t.Errorf("constant %s, package %s", c.got, c.want)
		}
	}
}
