// Package wasmbuild builds the planner page's WebAssembly module
// reproducibly: the same sources and Go toolchain give the same bytes, so a
// test can tell a committed module from a stale one.
package wasmbuild

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// ToolchainFile records, next to the committed module, the Go release that
// built it.
const ToolchainFile = "wasm-toolchain.txt"

// SourcesFile records, next to the committed module, SourcesDigest of the
// sources it was built from: a quick test compares it without building.
const SourcesFile = "wasm-sources.txt"

// module is the import path prefix of the packages whose files feed the module.
const module = "github.com/idemhook/idemhook"

// SourcesDigest is a SHA-256 over every Go and embedded file of this
// module's packages that cmd/planner-wasm builds from (GOOS=js), names and
// contents: it changes whenever a change there can change the module. The
// standard library and other modules are left to the toolchain and go.sum.
func SourcesDigest(root string) (string, error) {
	out, err := goForWasm(root, "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \",\"}}\t{{join .EmbedFiles \",\"}}", mainPackage)
	if err != nil {
		return "", err
	}
	type file struct{ name, path string }
	var files []file
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 || (f[0] != module && !strings.HasPrefix(f[0], module+"/")) {
			continue
		}
		for _, list := range f[2:] {
			for _, n := range strings.Split(list, ",") {
				if n != "" {
					files = append(files, file{strings.TrimPrefix(f[0], module) + "/" + n, filepath.Join(f[1], n)})
				}
			}
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f.name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

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
	// No inlining (-gcflags=all=-l): the page downloads the module, and
	// inlined copies of functions made it 13 % larger compressed (2.08 MB
	// against 1.80 MB, gzip -9, on 2026-12-07); the page derives a key in
	// well under a frame either way.
	if _, err := goForWasm(root, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-gcflags=all=-l", "-o", out, mainPackage); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

// mainPackage is the module's main package, relative to the module root.
const mainPackage = "./cmd/planner-wasm"

// goForWasm runs the go command in root for js/wasm, as the module is built,
// and returns its standard output; an error carries its standard error.
func goForWasm(root string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s %s: %v\n%s", args[0], mainPackage, err, strings.TrimSpace(stderr.String()))
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
