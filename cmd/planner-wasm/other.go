//go:build !(js && wasm)

package main

import (
	"fmt"
	"os"
)

// On any other platform the command only says how it is built; the planner
// package's `go generate` builds it.
func main() {
	fmt.Fprintln(os.Stderr, "planner-wasm runs in the browser: build it with GOOS=js GOARCH=wasm (go generate ./internal/planner)")
	os.Exit(2)
}
