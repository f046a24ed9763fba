// Command genstatements writes the community node packages' generated files
// (communitynode.Generated). Run it with `go generate
// ./internal/communitynode`; a test fails until it is run after a change.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemhook/idemhook/internal/communitynode"
)

func main() {
	if err := generate(); err != nil {
		fmt.Fprintln(os.Stderr, "genstatements:", err)
		os.Exit(1)
	}
}

func generate() error {
	files, err := communitynode.Generated()
	if err != nil {
		return err
	}
	// go generate runs in the package folder, internal/communitynode.
	for name, b := range files {
		if err := os.WriteFile(filepath.Join("..", "..", filepath.FromSlash(name)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
