// Command genwasm builds the planner page's WebAssembly module from
// cmd/planner-wasm and copies wasm_exec.js from the same Go toolchain into
// planner/module, which git ignores, for a build that carries the module:
// `go generate ./internal/planner`, then `go build -tags planner_embed`
// (keysvc's Dockerfile does both). Without that tag the module is built
// from source when the page is first needed, and nothing here is read.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemhook/idemhook/internal/planner/internal/wasmbuild"
)

func main() {
	// go generate runs in the package folder, planner/.
	m, err := wasmbuild.Build(context.Background(), filepath.Join("..", ".."))
	if err != nil {
		fail(err)
	}
	gz, err := wasmbuild.Gzip(m.Wasm)
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll("module", 0o755); err != nil {
		fail(err)
	}
	// Each file whole or not at all: a build that embeds them may run
	// beside this one.
	for name, b := range map[string][]byte{"idemhook.wasm.gz": gz, "wasm_exec.js": m.ExecJS} {
		tmp := filepath.Join("module", "."+name+".tmp")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			fail(err)
		}
		if err := os.Rename(tmp, filepath.Join("module", name)); err != nil {
			fail(err)
		}
	}
	fmt.Printf("wrote module/idemhook.wasm.gz (%d bytes, %d uncompressed) and module/wasm_exec.js from %s, for go build -tags planner_embed\n", len(gz), len(m.Wasm), m.GoVersion)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "genwasm:", err)
	os.Exit(1)
}
