package logkey

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vocabulary holds the string literals that must not be slog keys: the keys
// this package names (use the constant) and the retired synonyms "error"
// (now Err) and "worker" (now VM).
var vocabulary = map[string]string{
	"err": "Err", "error": "Err", "reason": "Reason", "detail": "Detail",
	"vm": "VM", "worker": "VM", "job": "Job", "model": "Model",
	"flavor": "Flavor", "ip": "IP", "placement": "Placement",
}

// firstKey returns the index of the first key argument of a logger method,
// or -1 when the method is not a slog logging call.
func firstKey(method string) int {
	switch method {
	case "With":
		return 0
	case "Debug", "Info", "Warn", "Error":
		return 1
	case "DebugContext", "InfoContext", "WarnContext", "ErrorContext":
		return 2
	case "Log":
		return 3
	}
	return -1
}

// isLogger reports whether the receiver of a call looks like a *slog.Logger
// (log, logger, h.log, f.log, ...): the repository names its loggers so.
func isLogger(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return strings.Contains(strings.ToLower(x.Name), "log")
	case *ast.SelectorExpr:
		return strings.Contains(strings.ToLower(x.Sel.Name), "log")
	}
	return false
}

// isText reports whether a value is free text: a string literal, a
// concatenation with one, an fmt call or err.Error().
func isText(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.BasicLit:
		return x.Kind == token.STRING
	case *ast.BinaryExpr:
		return isText(x.X) || isText(x.Y)
	case *ast.CallExpr:
		if s, ok := x.Fun.(*ast.SelectorExpr); ok {
			if id, ok := s.X.(*ast.Ident); ok && id.Name == "fmt" {
				return true
			}
			return s.Sel.Name == "Error" && len(x.Args) == 0
		}
	}
	return false
}

// offences lists the slog calls of a file that break the vocabulary: a key
// written as a literal where a constant exists, or a reason carrying free
// text instead of a code.
func offences(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := c.Fun.(*ast.SelectorExpr)
		if !ok || !isLogger(sel.X) {
			return true
		}
		k := firstKey(sel.Sel.Name)
		if k < 0 {
			return true
		}
		for i := k; i+1 < len(c.Args); i += 2 {
			key := c.Args[i]
			if lit, ok := key.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if cn, ok := vocabulary[strings.Trim(lit.Value, "\"`")]; ok {
					out = append(out, fset.Position(lit.Pos()).String()+": key "+lit.Value+", use logkey."+cn)
				}
				continue
			}
			if s, ok := key.(*ast.SelectorExpr); ok && s.Sel.Name == "Reason" && isText(c.Args[i+1]) {
				out = append(out, fset.Position(key.Pos()).String()+": reason carries free text, use logkey.Detail (or logkey.Err for an error)")
			}
		}
		return true
	})
	return out
}

func TestOffencesFindsOldKeysAndFreeTextReasons(t *testing.T) {
	const src = `package p
func f() {
	h.log.Warn("a", "error", err, "worker", name)
	log.With("vm", name).Info("b")
	f.log.Log(ctx, lvl, "c", logkey.Reason, "free text")
	h.log.Info("d", logkey.Reason, err.Error())
	h.log.Info("e", logkey.Reason, ReasonBooked, logkey.Err, err, "attempt", n)
	fmt.Println("x", "error", err)
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	require.NoError(t, err)
	got := offences(fset, f)
	require.Len(t, got, 5, "%q", got)
	assert.Contains(t, got[0], `key "error", use logkey.Err`)
	assert.Contains(t, got[1], `key "worker", use logkey.VM`)
	assert.Contains(t, got[2], `key "vm", use logkey.VM`)
	assert.Contains(t, got[3], "reason carries free text")
	assert.Contains(t, got[4], "reason carries free text")
}

// TestSourcesUseTheVocabulary scans the non-test Go sources of sdk/,
// internal/ and cmd/ and fails listing every slog call that breaks the
// vocabulary.
func TestSourcesUseTheVocabulary(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var bad []string
	files := 0
	for _, dir := range []string{"sdk", "internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			files++
			bad = append(bad, offences(fset, f)...)
			return nil
		})
		require.NoError(t, err)
	}
	require.Greater(t, files, 50, "the scan found the sources")
	assert.Empty(t, bad, "slog calls outside the log vocabulary (sdk/logkey):\n%s", strings.Join(bad, "\n"))
}
