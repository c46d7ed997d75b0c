package testutil

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// MaxFuncLines is the longest a production function may be, from its
// `func` line to its closing brace (docs/architecture.md, the
// `internal/testutil/` row: no production function over 120 lines).
const MaxFuncLines = 120

// longFuncsAllowed are the functions still over MaxFuncLines, by
// "path Recv.Name"; the list only shrinks. No production function is on
// it: internal/vcsimtest is test support (the simulator's environment),
// linked into no production binary but the demo.
var longFuncsAllowed = map[string]bool{
	"internal/vcsimtest/env.go New": true,
}

// longFuncs returns the functions of the Go file at path (src, when not
// nil, is its source) over max lines, by "name Recv.Name", and their
// lengths.
func longFuncs(t *testing.T, fset *token.FileSet, path, name string, src any, max int) map[string]int {
	t.Helper()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	out := map[string]int{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		if n <= max {
			continue
		}
		fn := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) > 0 {
			typ := fd.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if ix, ok := typ.(*ast.IndexExpr); ok {
				typ = ix.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				fn = id.Name + "." + fn
			}
		}
		out[name+" "+fn] = n
	}
	return out
}

// TestNoLongProductionFunctions: no function of the non-test Go files
// under sdk/, internal/ and cmd/ is over MaxFuncLines lines, but those of
// longFuncsAllowed; and each of those is still there and still long (an
// entry split goes from the list). Generated code (mock_vsphere/) is left
// out.
func TestNoLongProductionFunctions(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	found := map[string]int{}
	for _, dir := range []string{"sdk", "internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			for k, n := range longFuncs(t, fset, p, filepath.ToSlash(rel), nil, MaxFuncLines) {
				found[k] = n
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", dir, err)
		}
	}
	var over []string
	for k, n := range found {
		if !longFuncsAllowed[k] {
			over = append(over, fmt.Sprintf("%s (%d lines)", k, n))
		}
	}
	sort.Strings(over)
	if len(over) > 0 {
		t.Errorf("functions over %d lines (split them):\n%s", MaxFuncLines, strings.Join(over, "\n"))
	}
	for k := range longFuncsAllowed {
		if _, ok := found[k]; !ok {
			t.Errorf("%s is no longer over %d lines (or gone): take it off longFuncsAllowed", k, MaxFuncLines)
		}
	}
}

// TestLongFuncsCountsFromFuncToBrace: the check counts a function's lines
// from its func line to its closing brace, names methods by receiver
// (pointer or not), and leaves short functions out.
func TestLongFuncsCountsFromFuncToBrace(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("\t_ = 1\n", 3)
	src := "package p\n\ntype T struct{}\n\nfunc (t *T) Long() {\n" + body + "}\n\nfunc Short() {}\n\nfunc (T) Five() {\n" + body + "}\n"
	got := longFuncs(t, token.NewFileSet(), "p.go", "p.go", src, 4)
	if len(got) != 2 || got["p.go T.Long"] != 5 || got["p.go T.Five"] != 5 {
		t.Errorf("got %v, want T.Long and T.Five at 5 lines", got)
	}
}

// MaxPackageLines is the most lines a production package's non-test Go
// files may hold together (docs/architecture.md, the `internal/testutil/`
// row: no non-test package over 4,000 lines).
const MaxPackageLines = 4000

// largePackagesAllowed are the packages still over MaxPackageLines, by
// path; the list only shrinks. internal/vcsimtest is test support (the
// simulator's environment), linked into no production binary but the
// demo. (internal/vcenter left it when its property-collector side and
// its pure translation went to internal/vcenter/vim: docs/architecture.md,
// "The port's layout".)
var largePackagesAllowed = map[string]bool{
	"internal/vcsimtest": true,
}

// TestNoLargeProductionPackages: no package under sdk/, internal/ and
// cmd/ has more than MaxPackageLines lines of non-test Go, but those of
// largePackagesAllowed; and each of those is still over (an entry split
// goes from the list).
func TestNoLargeProductionPackages(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	lines := map[string]int{}
	for _, dir := range []string{"sdk", "internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			lines[filepath.ToSlash(rel)] += bytes.Count(b, []byte("\n"))
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", dir, err)
		}
	}
	if lines["internal/config"] == 0 {
		t.Fatal("no line counted in internal/config: the walk is wrong")
	}
	var over []string
	for pkg, n := range lines {
		if n > MaxPackageLines && !largePackagesAllowed[pkg] {
			over = append(over, fmt.Sprintf("%s (%d lines)", pkg, n))
		}
	}
	sort.Strings(over)
	if len(over) > 0 {
		t.Errorf("packages over %d non-test lines (split them):\n%s", MaxPackageLines, strings.Join(over, "\n"))
	}
	for pkg := range largePackagesAllowed {
		if lines[pkg] <= MaxPackageLines {
			t.Errorf("%s is no longer over %d lines (%d) or gone: take it off largePackagesAllowed", pkg, MaxPackageLines, lines[pkg])
		}
	}
}
