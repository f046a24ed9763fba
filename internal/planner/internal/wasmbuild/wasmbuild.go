// Package wasmbuild builds the planner page's WebAssembly module from
// idemhook's Go source with the Go toolchain, reproducibly: the same sources
// and toolchain give the same bytes. The module is not committed (84 copies
// of it made most of the repository's history); it is built where it is
// needed, and the go command's build cache makes a second build a link at
// most.
package wasmbuild

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MainPackage is the module's main package, relative to the module root.
const MainPackage = "./cmd/planner-wasm"

// Module is the page's WebAssembly module and the wasm_exec.js of the
// toolchain that built it (the two must come from the same Go release).
type Module struct {
	Wasm      []byte
	ExecJS    []byte
	GoVersion string // the release that built it, "go1.26.8"
}

// Build compiles cmd/planner-wasm from the module source at root. The
// flags make the build reproducible: the same sources and toolchain give
// the same bytes.
func Build(ctx context.Context, root string) (Module, error) {
	dir, err := os.MkdirTemp("", "idemhook-wasm-")
	if err != nil {
		return Module{}, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "idemhook.wasm")
	// No inlining (-gcflags=all=-l): the page downloads the module, and
	// inlined copies of functions made it 13 % larger compressed (2.08 MB
	// against 1.80 MB, gzip -9, on 2026-12-07); the page derives a key in
	// well under a frame either way.
	if _, err := goForWasm(ctx, root, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-gcflags=all=-l", "-o", out, MainPackage); err != nil {
		return Module{}, err
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		return Module{}, err
	}
	// The toolchain that built it: GOTOOLCHAIN may have switched to the
	// release go.mod asks for, so ask the go command rather than assume.
	env, err := goForWasm(ctx, root, "env", "GOROOT", "GOVERSION")
	if err != nil {
		return Module{}, err
	}
	goroot, version, _ := strings.Cut(strings.TrimSpace(string(env)), "\n")
	execJS, err := os.ReadFile(filepath.Join(goroot, "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		return Module{}, fmt.Errorf("wasm_exec.js of %s: %w", version, err)
	}
	return Module{Wasm: wasm, ExecJS: execJS, GoVersion: strings.TrimSpace(version)}, nil
}

// goForWasm runs the go command in root for js/wasm, as the module is built,
// and returns its standard output; an error carries its standard error.
// GOWORK=off: a go.work above root must not change what is built.
func goForWasm(ctx context.Context, root string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s in %s: %v\n%s", args[0], root, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Gzip compresses b with a fixed header (no name, no time), so the same
// module gives the same file.
func Gzip(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
