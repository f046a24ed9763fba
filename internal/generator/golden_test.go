package generator_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/idemhook/idemhook/internal/generator"
)

// The committed templates are exactly the generator's output. After a
// deliberate change, regenerate them with `go generate ./internal/generator`.
func TestTemplatesMatchGenerator(t *testing.T) {
	for _, tpl := range generator.Templates() {
		files, err := generator.Files(tpl.Options)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join("..", "..", generator.TemplatesDir, tpl.Name)
		committed, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("%v (run `go generate ./internal/generator`)", err)
		}
		for _, e := range committed {
			if _, ok := files[e.Name()]; !ok {
				t.Errorf("%s is committed but no longer generated; run `go generate ./internal/generator`", filepath.Join(dir, e.Name()))
			}
		}
		for name, want := range files {
			path := filepath.Join("..", "..", generator.TemplatesDir, tpl.Name, name)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%v (run `go generate ./internal/generator`)", err)
				continue
			}
			if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")); diff != "" {
				t.Errorf("%s drifted from the generator (-generated +committed); run `go generate ./internal/generator`:\n%s", path, diff)
			}
		}
	}
}
