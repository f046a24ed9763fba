// Command genpresets writes rules/presets.json, the presets as
// rules.Preset parses them, for the planner page's WebAssembly build (it
// reads no YAML). Run it with `go generate ./internal/rules` after changing a
// preset; a test fails until the file matches.
package main

import (
	"fmt"
	"os"

	"github.com/idemhook/idemhook/internal/rules"
)

func main() {
	b, err := rules.PresetTable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "genpresets:", err)
		os.Exit(1)
	}
	if err := os.WriteFile("presets.json", b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genpresets:", err)
		os.Exit(1)
	}
}
