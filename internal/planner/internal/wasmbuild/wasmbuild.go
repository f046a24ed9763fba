// Package wasmbuild builds the planner page's WebAssembly module
// reproducibly: the same sources and Go toolchain give the same bytes, so a
// test can tell a committed module from a stale one.
package wasmbuild

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ToolchainFile records, next to the committed module, the Go release that
// built it.
const ToolchainFile = "wasm-toolchain.txt"

// Build compiles cmd/planner-wasm from the module at root and returns the
// module's bytes. The flags make the build reproducible: the same sources and
// toolchain give the same bytes.
func Build(root string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "idemhook-wasm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "idemhook.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, "./cmd/planner-wasm")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/planner-wasm: %v\n%s", err, strings.TrimSpace(string(b)))
	}
	return os.ReadFile(out)
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
