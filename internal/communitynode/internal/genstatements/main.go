// Command genstatements writes the community node's generated.ts from
// package pgsql and signature/provider. Run it with `go generate
// ./internal/communitynode`; a test fails until it is run after a change.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemhook/idemhook/internal/communitynode"
)

func main() {
	b, err := communitynode.StatementsTS()
	if err == nil {
		// go generate runs in the package folder, internal/communitynode.
		err = os.WriteFile(filepath.Join("..", "..", communitynode.GeneratedFile), b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genstatements:", err)
		os.Exit(1)
	}
}
