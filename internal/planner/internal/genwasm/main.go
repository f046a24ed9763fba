// Command genwasm builds the planner page's WebAssembly module from
// cmd/planner-wasm and copies wasm_exec.js from the same Go toolchain into
// planner/web. Run it with `go generate ./internal/planner` after changing the key
// spec, the generator or cmd/planner-wasm; the planner's test fails until
// the committed module matches the sources.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/idemhook/idemhook/internal/planner/internal/wasmbuild"
)

func main() {
	// go generate runs in the package folder, planner/.
	wasm, err := wasmbuild.Build(filepath.Join("..", ".."))
	if err != nil {
		fail(err)
	}
	gz, err := wasmbuild.Gzip(wasm)
	if err != nil {
		fail(err)
	}
	digest, err := wasmbuild.SourcesDigest(filepath.Join("..", ".."))
	if err != nil {
		fail(err)
	}
	execJS, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		fail(err)
	}
	for name, b := range map[string][]byte{
		filepath.Join("web", "idemhook.wasm.gz"): gz,
		filepath.Join("web", "wasm_exec.js"):     execJS,
		wasmbuild.ToolchainFile:                  []byte(runtime.Version() + "\n"),
		wasmbuild.SourcesFile:                    []byte(digest + "\n"),
	} {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			fail(err)
		}
	}
	fmt.Printf("wrote web/idemhook.wasm.gz (%d bytes, %d uncompressed) and web/wasm_exec.js from %s\n", len(gz), len(wasm), runtime.Version())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "genwasm:", err)
	os.Exit(1)
}
