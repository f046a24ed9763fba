package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Dockerfile builds with the module's Go release, runs as non-root, and
// the binary it builds (CGO_ENABLED=0) is static: no dynamic loader, so the
// distroless static image can run it.
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
	bin := filepath.Join(t.TempDir(), "keysvc")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
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
}
