package repoweight

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A commit that changes the generator, after `go generate ./...` (every
// generator, the planner's module among them) and `git add -A`, adds no
// file over 1 MB: the module the generator's change rebuilds is ignored by
// git, not committed. The commit is made in a new repository holding this
// clone's tracked files as they are in the working tree, so that the test
// sees this tree's .gitignore.
func TestCommitChangingTheGeneratorAddsNoLargeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go generate ./..., which builds the planner's module; not run with -short")
	}
	repo := copyTracked(t)
	git(t, repo, "init", "-q")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "as the clone is")

	// A change to what the generator does, which the planner's module
	// carries (the page shows each flag's usage).
	flags := filepath.Join(repo, "internal", "generator", "flags.go")
	src, err := os.ReadFile(flags)
	if err != nil {
		t.Fatal(err)
	}
	usage := regexp.MustCompile(`Usage:\s*"`)
	at := usage.FindIndex(src)
	if at == nil {
		t.Fatal("internal/generator/flags.go has no `Usage: \"` left to change: pick another change of the generator here")
	}
	changed := append(append(append([]byte{}, src[:at[1]]...), "changed by a test: "...), src[at[1]:]...)
	if err := os.WriteFile(flags, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	generate := exec.Command("go", "generate", "./...")
	generate.Dir = repo
	if out, err := generate.CombinedOutput(); err != nil {
		t.Fatalf("go generate ./...: %v\n%s", err, out)
	}
	// The planner's module (1.8 MB gzipped) is rebuilt: without a file
	// over the limit in the tree there would be nothing to keep out.
	large := 0
	err = filepath.WalkDir(repo, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() && info.Size() > limit {
			large++
			t.Logf("after go generate ./...: %s, %d bytes", strings.TrimPrefix(path, repo+"/"), info.Size())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if large == 0 {
		t.Fatal("go generate ./... wrote no file over 1 MB: the planner's module was not built, and the commit below proves nothing")
	}
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "the generator changed")

	added := 0
	for _, line := range strings.Split(strings.TrimSpace(git(t, repo, "diff-tree", "-r", "--no-commit-id", "HEAD~1", "HEAD")), "\n") {
		// :old-mode new-mode old-blob new-blob status\tpath
		meta, path, _ := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		if len(f) < 5 || strings.HasPrefix(f[4], "D") {
			continue
		}
		size, err := strconv.Atoi(strings.TrimSpace(git(t, repo, "cat-file", "-s", f[3])))
		if err != nil {
			t.Fatal(err)
		}
		added++
		t.Logf("the commit writes %s (%d bytes)", path, size)
		if size > limit {
			t.Errorf("the commit adds %s, %d bytes: over 1 MB", path, size)
		}
	}
	if added == 0 {
		t.Fatal("the commit changed nothing: the test's change to the generator did not take")
	}
	if ok, out := check(t, repo); !ok {
		t.Errorf(".ci/large-files after the commit: %s", out)
	}
}

// copyTracked copies the files git tracks in this clone (as they are in
// the working tree; symbolic links as links) into a new folder.
func copyTracked(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-s", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v (this test needs the clone's git)", err)
	}
	dst := t.TempDir()
	for _, entry := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		meta, path, _ := strings.Cut(entry, "\t")
		from, to := filepath.Join(root, path), filepath.Join(dst, path)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		switch strings.Fields(meta)[0] {
		case "120000":
			link, err := os.Readlink(from)
			if err == nil {
				err = os.Symlink(link, to)
			}
			if err != nil {
				t.Fatal(err)
			}
		case "100644", "100755":
			b, err := os.ReadFile(from)
			if os.IsNotExist(err) {
				continue // deleted in the working tree
			}
			info, statErr := os.Stat(from)
			if err == nil && statErr == nil {
				err = os.WriteFile(to, b, info.Mode().Perm())
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return dst
}
