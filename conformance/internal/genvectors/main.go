// Command genvectors writes conformance/key-vectors.json from the cases in
// conformance/cases.go. Run it with `go generate ./conformance`.
package main

import (
	"fmt"
	"os"

	"github.com/idemhook/idemhook/conformance"
)

func main() {
	out, err := conformance.Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "genvectors:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(conformance.FileName, out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genvectors:", err)
		os.Exit(1)
	}
}
