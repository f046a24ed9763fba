package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/planner"
)

// A user who runs `go install github.com/idemhook/idemhook/cmd/idemhook@…`
// gets the module zip the Go proxy makes of the committed files, which do
// not include the planner's WebAssembly module: `idemhook planner` builds it
// from that module's source with the user's Go toolchain and writes the same
// page as a clone does; without the go command it says what it needs.
//
// The test serves this clone's tracked files as a module version from a
// local proxy (GOPROXY=file://…), installs the command from it as a user
// would (the other modules from the usual proxy, checked against the usual
// checksum database), and runs it. The version is named after the files' digest, so a
// second run with the same files finds its packages in the build cache; it
// is removed from the module cache afterwards.
func TestGoInstallUsersGetThePlanner(t *testing.T) {
	if testing.Short() {
		t.Skip("installs idemhook from a local module proxy and builds the planner's module; not run with -short")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files := trackedFiles(t, root)
	version := proxyVersion(files)
	proxy := t.TempDir()
	writeProxy(t, proxy, version, files)

	modcache := strings.TrimSpace(goEnv(t, "GOMODCACHE"))
	bin := t.TempDir()
	env := append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+strings.TrimSpace(goEnv(t, "GOPROXY")), "GONOSUMDB=github.com/idemhook/idemhook", "GOBIN="+bin,
		"GOFLAGS=-modcacherw", "GOWORK=off")
	t.Cleanup(func() {
		os.RemoveAll(filepath.Join(modcache, "github.com", "idemhook", "idemhook@"+version))
		downloads := filepath.Join(modcache, "cache", "download", "github.com", "idemhook", "idemhook", "@v")
		stale, _ := filepath.Glob(filepath.Join(downloads, version+".*"))
		for _, f := range stale {
			os.Remove(f)
		}
		if left, _ := os.ReadDir(downloads); len(left) == 1 && left[0].Name() == "list" {
			os.Remove(filepath.Join(downloads, "list")) // it named only this test's versions
		}
	})
	install := exec.Command("go", "install", "github.com/idemhook/idemhook/cmd/idemhook@"+version)
	install.Dir, install.Env = t.TempDir(), env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install …@%s: %v\n%s", version, err, out)
	}

	out := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "idemhook"), "planner", "--out", out)
	cmd.Dir, cmd.Env = t.TempDir(), env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the installed idemhook planner: %v\n%s", err, stderr.String())
	}
	from := filepath.Join(modcache, "github.com", "idemhook", "idemhook@"+version)
	if !strings.Contains(stderr.String(), "from "+from+" ") {
		t.Errorf("the installed idemhook did not build the module from the installed module's source (%s): %q", from, stderr.String())
	}
	want, err := planner.Files(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range want {
		if got, err := os.ReadFile(filepath.Join(out, name)); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s written by the installed idemhook: %d bytes (%v), this clone's page has %d", name, len(got), err, len(b))
		}
	}
	t.Logf("go install …@%s, then idemhook planner: %s", version, strings.TrimSpace(stderr.String()))

	// Without the go command on PATH it says what it needs.
	cmd = exec.Command(filepath.Join(bin, "idemhook"), "planner", "--out", t.TempDir())
	cmd.Dir, cmd.Env = t.TempDir(), append(env, "PATH="+t.TempDir())
	msg, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 || !strings.Contains(string(msg), "https://go.dev/dl/") || !strings.Contains(string(msg), "-tags planner_embed") {
		t.Errorf("without go on PATH: exit %d, %q; want exit 1 and what it needs", code, msg)
	}
}

// trackedFiles are the files of the clone at root that git tracks (as
// they are in the working tree), as the Go proxy would zip them: no
// symbolic link (a module zip holds none).
func trackedFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-s", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v (this test needs the clone's git)", err)
	}
	files := map[string][]byte{}
	for _, entry := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		meta, path, _ := strings.Cut(entry, "\t")
		if mode := strings.Fields(meta)[0]; mode != "100644" && mode != "100755" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, path))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		files[path] = b
	}
	return files
}

// proxyVersion is a pseudo-version named after the files' digest.
func proxyVersion(files map[string][]byte) string {
	h := sha256.New()
	for _, name := range sortedNames(files) {
		fmt.Fprintf(h, "%s %d\n", name, len(files[name]))
		h.Write(files[name])
	}
	return "v0.0.0-20000101000000-" + hex.EncodeToString(h.Sum(nil))[:12]
}

func sortedNames(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// writeProxy lays out one version of the module as a GOPROXY serves it:
// the .info, the .mod and the zip of the files.
func writeProxy(t *testing.T, proxy, version string, files map[string][]byte) {
	t.Helper()
	dir := filepath.Join(proxy, "github.com", "idemhook", "idemhook", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	for _, name := range sortedNames(files) {
		w, err := zw.Create("github.com/idemhook/idemhook@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(files[name])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2000-01-01T00:00:00Z"}`),
		version + ".mod":  files["go.mod"],
		version + ".zip":  zipped.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
