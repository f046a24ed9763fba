// Package planner is the planner page: paste a delivery, see its key and the
// rule that produced it, and download the files `idemhook generate` writes,
// all in the browser. The page is static (HTML, CSS, a script and the Go key
// spec and generator compiled to WebAssembly) and makes no network request
// with what is pasted. keysvc serves it at / and /planner/; `idemhook
// planner --out DIR` writes the same bytes for any static host or for
// opening from disk.
package planner

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"sync"
)

//go:generate go run ./internal/genwasm

// web holds the page's hand-written files, wasm_exec.js from the Go
// toolchain that built the module, and the module itself, gzipped
// (idemhook.wasm.gz, built from cmd/planner-wasm by go generate).
//
//go:embed web
var web embed.FS

// WasmFile is the compressed module in web/; wasmScript is what the page
// loads instead: a script that defines the module in base64, because a page
// opened from disk may load scripts but may not fetch files.
const (
	WasmFile   = "idemhook.wasm.gz"
	wasmScript = "idemhook.wasm.js"
)

var (
	once  sync.Once
	files map[string][]byte
	err   error
)

// Files returns the page's files by name, as `idemhook planner` writes them
// and keysvc serves them.
func Files() (map[string][]byte, error) {
	once.Do(func() { files, err = build() })
	return files, err
}

func build() (map[string][]byte, error) {
	out := map[string][]byte{}
	entries, err := fs.ReadDir(web, "web")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := web.ReadFile("web/" + e.Name())
		if err != nil {
			return nil, err
		}
		if e.Name() == WasmFile {
			if b, err = wasmAsScript(b); err != nil {
				return nil, err
			}
			out[wasmScript] = b
			continue
		}
		out[e.Name()] = b
	}
	for _, need := range []string{"index.html", "planner.js", "planner.css", "wasm_exec.js", wasmScript} {
		if out[need] == nil {
			return nil, fmt.Errorf("planner: %s is missing (run go generate ./internal/planner)", need)
		}
	}
	return out, nil
}

// wasmAsScript turns the gzipped module into the script the page loads: the
// gzip itself in base64 (a quarter of the module's size, for the browser to
// parse), which the page decompresses as it compiles it.
func wasmAsScript(gz []byte) ([]byte, error) {
	if _, err := gzip.NewReader(bytes.NewReader(gz)); err != nil {
		return nil, fmt.Errorf("planner: %s: %w", WasmFile, err)
	}
	var b bytes.Buffer
	b.WriteString("// The idemhook planner's WebAssembly module (cmd/planner-wasm), gzipped, in base64.\nconst IDEMHOOK_WASM_GZIP_BASE64 = '")
	b.WriteString(base64.StdEncoding.EncodeToString(gz))
	b.WriteString("';\n")
	return b.Bytes(), nil
}

// Wasm returns the module itself, decompressed.
func Wasm() ([]byte, error) {
	gz, err := web.ReadFile("web/" + WasmFile)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
