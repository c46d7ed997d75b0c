package testutil

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportedNamesDocumented: every exported name of the non-test Go files
// under sdk/, internal/ and cmd/ has a doc comment: functions, methods of
// exported types, types, constants and variables (a comment on their group
// counts), and the methods of exported interfaces. Generated files are
// left out.
func TestExportedNamesDocumented(t *testing.T) {
	t.Parallel()
	var missing []string
	for _, dir := range []string{"sdk", "internal", "cmd"} {
		root := filepath.Join("..", "..", dir)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			missing = append(missing, undocumented(t, p)...)
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", root, err)
		}
	}
	if len(missing) > 0 {
		t.Errorf("exported names without a doc comment:\n%s", strings.Join(missing, "\n"))
	}
}

// TestUndocumentedFindsEachKind: the check above reports each kind of
// undocumented name, and accepts documented ones.
func TestUndocumentedFindsEachKind(t *testing.T) {
	t.Parallel()
	src := `package p

func F() {}

// G is documented.
func G() {}

type T struct{}

func (T) M() {}

func (t *T) N() {}

type u struct{}

func (u) M() {}

// I is documented.
type I interface {
	A()
	// B is documented.
	B()
}

var V = 1

// The group is documented.
const (
	C1 = 1
	C2 = 2
)
`
	p := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got := undocumented(t, p)
	for i := range got {
		got[i] = got[i][strings.LastIndex(got[i], ": ")+2:]
	}
	want := []string{"func F", "type T", "method T.M", "method T.N", "interface method I.A", "value V"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// undocumented lists the exported names of one Go file that lack a doc
// comment, as "path:line: kind name".
func undocumented(t *testing.T, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	if ast.IsGenerated(f) {
		return nil
	}
	var out []string
	report := func(pos token.Pos, what string) {
		out = append(out, fset.Position(pos).String()+": "+what)
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Doc != nil {
				continue
			}
			if d.Recv == nil {
				report(d.Pos(), "func "+d.Name.Name)
				continue
			}
			if recv := receiverName(d.Recv.List[0].Type); ast.IsExported(recv) {
				report(d.Pos(), "method "+recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if s.Doc == nil && d.Doc == nil {
						report(s.Pos(), "type "+s.Name.Name)
					}
					if it, ok := s.Type.(*ast.InterfaceType); ok {
						for _, m := range it.Methods.List {
							if len(m.Names) == 1 && m.Names[0].IsExported() && m.Doc == nil && m.Comment == nil {
								report(m.Pos(), "interface method "+s.Name.Name+"."+m.Names[0].Name)
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
							report(n.Pos(), "value "+n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// receiverName is the type name of a method's receiver (T, *T, T[X]).
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
