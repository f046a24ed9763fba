package architecture

import (
	"go/build"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/idemhook/idemhook"

// page is docs/architecture.md.
func page(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkedList reads the backquoted names that follow the page's
// <!-- check:NAME --> marker, up to the end of its sentence (a period and a
// space).
func checkedList(t *testing.T, name string) []string {
	t.Helper()
	text := page(t)
	_, after, ok := strings.Cut(text, "<!-- check:"+name+" -->")
	if !ok {
		t.Fatalf("docs/architecture.md has no <!-- check:%s --> list", name)
	}
	sentence := after
	if end := regexp.MustCompile(`\.\s`).FindStringIndex(after); end != nil {
		sentence = after[:end[0]]
	}
	var out []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(sentence, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return out
}

// pkgInfo is a package of the module as this machine builds it.
type pkgInfo struct {
	path    string // relative to the module: "internal/keysvc"
	name    string
	imports []string // the module's packages it imports, relative
}

// packages lists the module's packages with non-test Go files for this
// platform, and what of the module each imports (its non-test files).
func packages(t *testing.T) map[string]pkgInfo {
	t.Helper()
	out := map[string]pkgInfo{}
	for _, f := range sources(t) {
		if f.test {
			continue
		}
		if ok, err := build.Default.MatchFile(filepath.Dir(f.path), filepath.Base(f.path)); err != nil || !ok {
			continue
		}
		p := out[f.pkg]
		p.path, p.name = f.pkg, f.file.Name.Name
		for _, imp := range f.file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if rel, ok := strings.CutPrefix(path, module+"/"); ok && !slices.Contains(p.imports, rel) {
				p.imports = append(p.imports, rel)
			}
		}
		slices.Sort(p.imports)
		out[f.pkg] = p
	}
	return out
}

// The packages the page calls public are the module's importable ones: not
// under internal/, not a command, not the e2e suite.
func TestPublicPackages(t *testing.T) {
	var public []string
	for path, p := range packages(t) {
		if p.name == "main" || path == "." || strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/") || strings.HasPrefix(path, "e2e") {
			continue
		}
		public = append(public, path)
	}
	slices.Sort(public)
	if want := checkedList(t, "public"); !slices.Equal(public, want) {
		t.Errorf("importable from outside the module: %v; the page says %v", public, want)
	}
}

// The page's "(imports …)" after each package is what that package
// imports of the module, and every package is on the page.
func TestImportsOnThePage(t *testing.T) {
	pkgs := packages(t)
	resolve := func(name string) string {
		if _, ok := pkgs[name]; ok {
			return name
		}
		return "internal/" + name
	}
	text := page(t)
	described := map[string][]string{}
	group := regexp.MustCompile(`((?:\*\*[a-z0-9/-]+\*\*,? )+)\((?:each )?imports ([^)]*)\)`)
	for _, m := range group.FindAllStringSubmatch(text, -1) {
		var imports []string
		if list := strings.Join(strings.Fields(m[2]), " "); list != "nothing of idemhook" {
			for _, imp := range strings.Split(list, ", ") {
				imports = append(imports, resolve(imp))
			}
		}
		slices.Sort(imports)
		for _, n := range regexp.MustCompile(`\*\*([a-z0-9/-]+)\*\*`).FindAllStringSubmatch(m[1], -1) {
			described[resolve(n[1])] = imports
		}
	}
	for path, p := range pkgs {
		if path == "." || strings.Contains(strings.TrimPrefix(path, "internal/"), "/internal/") || path == "cmd/planner-wasm" {
			continue // go generate programs; the js/wasm module
		}
		want, ok := described[path]
		if !ok {
			t.Errorf("%s is not on the page with what it imports", path)
			continue
		}
		if !slices.Equal(p.imports, want) {
			t.Errorf("%s imports %v; the page says %v", path, p.imports, want)
		}
	}
	for path := range described {
		if _, ok := pkgs[path]; !ok {
			t.Errorf("the page describes %s, which is not a package", path)
		}
	}
}

// The page lists the packages that import pgx.
func TestPgxImporters(t *testing.T) {
	var got []string
	for _, f := range sources(t) {
		if f.test || slices.Contains(got, f.pkg) {
			continue
		}
		for _, imp := range f.file.Imports {
			if strings.Contains(imp.Path.Value, "github.com/jackc/pgx") {
				got = append(got, f.pkg)
				break
			}
		}
	}
	slices.Sort(got)
	if want := checkedList(t, "pgx"); !slices.Equal(got, want) {
		t.Errorf("packages importing pgx: %v; the page says %v", got, want)
	}
}

// SQL text lives in pgsql, and elsewhere only where the page says why.
func TestSQLOutsidePgsql(t *testing.T) {
	var got []string
	for _, p := range sqlPackages(t) {
		if p != "internal/pgsql" {
			got = append(got, p)
		}
	}
	if want := checkedList(t, "sql"); !slices.Equal(got, want) {
		t.Errorf("packages with SQL text outside pgsql: %v; the page says %v", got, want)
	}
}

// cmd/ stays thin: no function there is over 60 lines.
func TestCommandsAreThin(t *testing.T) {
	for _, f := range longFunctions(t) {
		if strings.HasPrefix(f.name, "cmd/") && f.lines > 60 {
			t.Errorf("%s is %d lines: cmd/ reads flags and calls a package", f.name, f.lines)
		}
	}
}
