package architecture

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the module's root, from this package's folder.
const root = "../.."

// goFile is one parsed Go file of the module, by its package's import path
// relative to the module ("internal/keysvc", "." for none).
type goFile struct {
	pkg, path string
	test      bool
	fset      *token.FileSet
	file      *ast.File
}

// sources parses every Go file of the module, outside node_modules and
// testdata.
func sources(t *testing.T) []goFile {
	t.Helper()
	var out []goFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "node_modules" || name == "testdata" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		out = append(out, goFile{pkg: filepath.ToSlash(rel), path: path, test: strings.HasSuffix(path, "_test.go"), fset: fset, file: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// funcLength is a non-test function and its length in lines.
type funcLength struct {
	name  string
	lines int
}

// longFunctions lists the non-test functions (and methods) of the module,
// generated files left out, longest first.
func longFunctions(t *testing.T) []funcLength {
	var out []funcLength
	for _, f := range sources(t) {
		if f.test || ast.IsGenerated(f.file) {
			continue
		}
		for _, d := range f.file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := f.pkg + "." + fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) > 0 {
				name = f.pkg + "." + recvName(fn.Recv.List[0].Type) + "." + fn.Name.Name
			}
			lines := f.fset.Position(fn.End()).Line - f.fset.Position(fn.Pos()).Line + 1
			out = append(out, funcLength{name, lines})
		}
	}
	slices.SortFunc(out, func(a, b funcLength) int { return b.lines - a.lines })
	return out
}

func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}

// The limits docs/architecture.md states: no function over 100 lines, at
// most 20 over 60.
func TestFunctionLengths(t *testing.T) {
	const most, over60Max = 100, 20
	var over60 []string
	for _, f := range longFunctions(t) {
		if f.lines > most {
			t.Errorf("%s is %d lines, over %d: split it where its steps are", f.name, f.lines, most)
		}
		if f.lines > 60 {
			over60 = append(over60, f.name)
		}
	}
	if len(over60) > over60Max {
		t.Errorf("%d functions are over 60 lines, at most %d: %s", len(over60), over60Max, strings.Join(over60, ", "))
	}
	if testing.Verbose() {
		for _, f := range longFunctions(t)[:min(30, len(longFunctions(t)))] {
			t.Logf("%4d %s", f.lines, f.name)
		}
	}
}

// sqlText matches a string literal that holds SQL a database runs: a
// statement's first words.
var sqlText = regexp.MustCompile(`(?i)(^|[^A-Za-z0-9_])(SELECT\s+\S.*\s+FROM\s|INSERT\s+INTO\s|DELETE\s+FROM\s|UPDATE\s+\S+\s+SET\s|CREATE\s+(TABLE|INDEX|SCHEMA|OR\s+REPLACE|UNIQUE|DATABASE|ROLE|EXTENSION)\s|ALTER\s+TABLE\s|DROP\s+(TABLE|SCHEMA|DATABASE)\s|CALL\s+\S+\(|TRUNCATE\s)`)

// sqlPackages lists the packages whose non-test Go files hold SQL text in
// a string literal (or embed .sql files).
func sqlPackages(t *testing.T) []string {
	var out []string
	for _, f := range sources(t) {
		if f.test || slices.Contains(out, f.pkg) {
			continue
		}
		found := false
		ast.Inspect(f.file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && sqlText.MatchString(lit.Value) {
				found = true
			}
			return !found
		})
		for _, c := range f.file.Comments {
			for _, l := range c.List {
				if strings.HasPrefix(l.Text, "//go:embed") && strings.Contains(l.Text, ".sql") {
					found = true
				}
			}
		}
		if found {
			out = append(out, f.pkg)
		}
	}
	slices.Sort(out)
	return out
}
