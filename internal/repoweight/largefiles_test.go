package repoweight

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository this package is in.
var root = filepath.Join("..", "..")

// limit is .ci/large-files' limit, in bytes.
const limit = 1_000_000

// check runs .ci/large-files on the repository at dir.
func check(t *testing.T, dir string) (ok bool, output string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join(root, ".ci", "large-files"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, dir)
	out, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("%s: %v", script, err)
	}
	return err == nil, string(out)
}

// git runs git in dir, failing the test on an error.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The repository as it is passes the check.
func TestNoUnlistedLargeFile(t *testing.T) {
	if ok, out := check(t, root); !ok {
		t.Error(out)
	}
}

// The check refuses a tracked file over the limit that the list does not
// name (a file only added to the index too), accepts it listed with a
// reason, and refuses an entry without a reason and one for a file that is
// not over the limit any more.
func TestLargeFilesRefusesWhatTheListDoesNotName(t *testing.T) {
	repo := t.TempDir()
	git(t, repo, "init", "-q")
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("at-the-limit.bin", bytes.Repeat([]byte{1}, limit))
	write("README", []byte("small\n"))
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "small and at the limit")
	if ok, out := check(t, repo); !ok {
		t.Fatalf("no file over the limit, no list: refused: %s", out)
	}

	write("build/over.wasm", bytes.Repeat([]byte{2}, limit+1))
	git(t, repo, "add", "build/over.wasm") // in the index, not yet committed
	ok, out := check(t, repo)
	if ok || !strings.Contains(out, "build/over.wasm is 1000001 bytes") || !strings.Contains(out, ".ci/large-files.txt does not list it") {
		t.Errorf("a file over the limit, unlisted: passed %v: %s", ok, out)
	}

	for _, c := range []struct {
		list string
		pass bool
		want string
	}{
		{"# a comment\n\nbuild/over.wasm   a fixture the browser test must load as it is\n", true, "but the 1 that .ci/large-files.txt names"},
		{"build/over.wasm\n", false, "lists build/over.wasm without a reason"},
		{"build/over.wasm  a reason\nat-the-limit.bin  no longer over the limit\n", false, "lists at-the-limit.bin, which is not a tracked file over 1000000 bytes"},
		{"build/over.wasm  a reason\ngone.bin  never tracked\n", false, "lists gone.bin"},
	} {
		write(".ci/large-files.txt", []byte(c.list))
		if ok, out := check(t, repo); ok != c.pass || !strings.Contains(out, c.want) {
			t.Errorf("with the list %q: passed %v, want %v and %q: %s", c.list, ok, c.pass, c.want, out)
		}
	}
}
