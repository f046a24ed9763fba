package sandbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// As root, PostgreSQL runs as another user: a 0700 cache folder (mktemp -d)
// and the folders below it are opened to that user, search only, and said
// so; a 0700 folder above the cache is left alone and named, with the fix.
// Not root, there is nothing to open.
func TestOpenToThePostgresUser(t *testing.T) {
	u, err := runAs()
	if err != nil {
		t.Fatal(err)
	}
	if u == nil {
		t.Skip("not root: PostgreSQL runs as this user")
	}
	outer, err := os.MkdirTemp("", "idemhook-reach-") // 0700, root's; t.TempDir's parent would be too
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outer) })
	cache := filepath.Join(outer, "cache")
	bin := filepath.Join(cache, "postgres", "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	err = u.openTo(filepath.Join(bin, "initdb"), cache, &progress)
	var unreachable *UnreachableError
	if !errors.As(err, &unreachable) || unreachable.Dir != outer || unreachable.User != u.name ||
		!strings.Contains(err.Error(), "chmod o+x "+outer) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a 0700 folder above the cache: %v, want an *UnreachableError naming %s, user %s and the fix, in one line", err, outer, u.name)
	}
	if fi, _ := os.Stat(outer); fi.Mode().Perm() != 0o700 {
		t.Errorf("the folder above the cache was changed to %v", fi.Mode().Perm())
	}
	if err := os.Chmod(outer, 0o755); err != nil {
		t.Fatal(err)
	}
	progress.Reset()
	if err := u.openTo(filepath.Join(bin, "initdb"), cache, &progress); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{cache, filepath.Dir(bin), bin} {
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o701 {
			t.Errorf("%s: %v, want 0701 (o+x added, nothing else)", d, fi.Mode().Perm())
		}
		if !strings.Contains(progress.String(), "let it enter "+d+" ") {
			t.Errorf("%s opened without a word: %q", d, progress.String())
		}
	}
}
