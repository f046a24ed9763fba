// Command gentemplates regenerates templates/workflows from
// generator.Templates(). Run it with `go generate ./internal/generator` from the module
// root; the generator's golden test fails until it is run after a change.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemhook/idemhook/internal/generator"
)

func main() {
	// go generate runs in the package folder, generator/.
	root := filepath.Join("..", "..")
	for _, tpl := range generator.Templates() {
		files, err := generator.Files(tpl.Options)
		if err != nil {
			fail(err)
		}
		dir := filepath.Join(root, generator.TemplatesDir, tpl.Name)
		// Start from an empty folder: a file the options no longer produce
		// must not stay behind.
		if err := os.RemoveAll(dir); err != nil {
			fail(err)
		}
		if _, err := generator.WriteFiles(dir, files); err != nil {
			fail(err)
		}
		fmt.Println("wrote", dir)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gentemplates:", err)
	os.Exit(1)
}
