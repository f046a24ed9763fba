package main

import (
	"debug/elf"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/planner"
)

// The Dockerfile builds with the module's Go release, runs as non-root, and
// the binary its build command builds (CGO_ENABLED=0) is static: no dynamic
// loader, so the distroless static image can run it; it carries the
// planner's module.
func TestDockerfileBuildsAStaticNonRootImage(t *testing.T) {
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	image := regexp.MustCompile(`(?m)^FROM golang:(\S+) AS build`).FindSubmatch(docker)
	if goVersion == nil || image == nil || string(image[1]) != string(goVersion[1]) {
		t.Errorf("the Dockerfile builds with golang:%s, go.mod asks for go %s", image, goVersion)
	}
	for _, want := range []string{"CGO_ENABLED=0", "USER nonroot", "distroless/static"} {
		if !strings.Contains(string(docker), want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
	if testing.Short() {
		return
	}
	// The build stage's command, run as written but for where it puts the
	// binary.
	build := regexp.MustCompile(`(?m)^RUN (.*-o /out/keysvc .*)$`).FindSubmatch(docker)
	if build == nil {
		t.Fatal("the Dockerfile has no RUN line that builds /out/keysvc")
	}
	bin := filepath.Join(t.TempDir(), "keysvc")
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(string(build[1]), "/out/keysvc", bin))
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's %s: %v\n%s", build[1], err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("keysvc built with CGO_ENABLED=0 needs a dynamic loader; the static image cannot run it")
		}
	}
	checkImagePlanner(t, bin)
}

// The image has no Go toolchain: the keysvc its Dockerfile builds serves
// the planner page with the module it carries, the same module a clone
// builds. A keysvc built without it and without go on PATH answers the
// page with a 503 that says what it needs.
func checkImagePlanner(t *testing.T, bin string) {
	t.Helper()
	noGo := "PATH=" + t.TempDir()
	want, err := planner.Files(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, addr, _ := startKeysvcBuild(t, bin, []string{"DATABASE_URL=", noGo}, "--db-file", filepath.Join(t.TempDir(), "keysvc.db"))
	for _, name := range []string{"", "idemhook.wasm.js", "wasm_exec.js"} {
		status, body := get(t, addr, "/planner/"+name)
		if name == "" {
			name = "index.html"
		}
		if status != http.StatusOK || body != string(want[name]) {
			t.Errorf("the image's keysvc, no go on PATH: GET /planner/%s: %d, %d bytes; a clone's page has %d", name, status, len(body), len(want[name]))
		}
	}
	_, addr, _ = startKeysvcBuild(t, keysvcBinary(t), []string{"DATABASE_URL=", noGo}, "--db-file", filepath.Join(t.TempDir(), "keysvc.db"))
	status, body := get(t, addr, "/planner/")
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "https://go.dev/dl/") || !strings.Contains(string(body), "-tags planner_embed") {
		t.Errorf("keysvc without the module and without go: GET /planner/: %d %q; want 503 and what it needs", status, body)
	}
}
