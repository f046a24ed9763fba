//go:build planner_embed

package planner

import _ "embed"

// A build with -tags planner_embed carries the module that `go generate
// ./internal/planner` wrote into module/ (which git ignores): for a keysvc
// or an idemhook that runs where there is no Go toolchain to build it.
// keysvc's Dockerfile builds so.
var (
	//go:embed module/idemhook.wasm.gz
	embeddedGzip []byte
	//go:embed module/wasm_exec.js
	embeddedExecJS []byte
)

func embedded() (gz, execJS []byte, ok bool) { return embeddedGzip, embeddedExecJS, true }
