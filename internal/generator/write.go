//go:build !js

// The planner's WebAssembly module never writes files: it hands them to the
// browser.

package generator

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// WriteFiles writes files (a Files result) into dir, created if missing,
// in name order, and returns the paths written. The CLI, the templates'
// generator and the e2e tests all write generated folders with it.
func WriteFiles(dir string, files map[string][]byte) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(files))
	paths := make([]string, 0, len(names))
	for _, name := range names {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}
