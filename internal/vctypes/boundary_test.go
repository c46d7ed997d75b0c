package vctypes_test

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/cds-contrib/hatchery-vsphere"

// DecisionPackages are the packages that decide (docs/architecture.md,
// "The vCenter port"), and internal/custody, which makes the writes the
// hatchery and the warm pool share: they speak the project's vCenter
// vocabulary (internal/vctypes) and import no govmomi package, nor
// internal/vcenter, whose port is govmomi's.
var DecisionPackages = []string{
	"internal/admission", "internal/capacity", "internal/warmpool", "internal/quarantine",
	"internal/lifecycle", "internal/ippool", "internal/spawnfault", "internal/guest",
	"internal/custody", "internal/instantparent",
}

// imports returns the imports of the non-test Go files of the package in
// dir (relative to the module's root), with the default build tags.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	p, err := build.Default.ImportDir(filepath.Join("..", "..", dir), 0)
	require.NoError(t, err, dir)
	return p.Imports
}

// TestDecisionPackagesImportNoGovmomi: no decision package imports a
// govmomi package or internal/vcenter. It fails when one does (as
// admission, guest, ippool, spawnfault and warmpool did); the check of
// internal/vcenter and internal/vctypes shows it reads real imports.
func TestDecisionPackagesImportNoGovmomi(t *testing.T) {
	t.Parallel()
	for _, dir := range DecisionPackages {
		for _, imp := range imports(t, dir) {
			assert.False(t, strings.HasPrefix(imp, "github.com/vmware/govmomi"), "%s imports %s", dir, imp)
			assert.NotEqual(t, module+"/internal/vcenter", imp, "%s imports internal/vcenter: use the vocabulary (internal/vctypes)", dir)
		}
	}
	assert.Contains(t, imports(t, "internal/vcenter"), "github.com/vmware/govmomi/vim25/types", "the check reads the imports")
	for _, imp := range imports(t, "internal/vctypes") {
		assert.NotContains(t, imp, ".", "internal/vctypes imports only the standard library: %s", imp)
	}
}

// TestFaultsClassifiedInOnePlace: govmomi's fault package (fault.Is,
// fault.As) is imported by internal/vcenter only, whose FaultKindOf is the
// one rule that tells vCenter's faults apart (vocabulary.go); every other
// package tests a vctypes.FaultKind. It fails when a second copy of the
// rule appears in another package's production code.
func TestFaultsClassifiedInOnePlace(t *testing.T) {
	t.Parallel()
	const faultPkg = "github.com/vmware/govmomi/fault"
	var users []string
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		p, err := build.Default.ImportDir(path, 0)
		if err != nil {
			return nil // no buildable Go file here
		}
		for _, imp := range p.Imports {
			if imp == faultPkg {
				rel, _ := filepath.Rel(root, path)
				users = append(users, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"internal/vcenter"}, users, "packages importing %s", faultPkg)
}

// TestDecisionPackagesUseNoGovmomiType: no expression of a decision
// package's code has a govmomi type, even one reached through another
// package (a result of a function of internal/clonespec): they speak the
// vocabulary, not govmomi smuggled. The packages are type-checked from the
// compiler's export data (go list -export). internal/inventory (which
// imports internal/vcenter, so is no decision package) and
// internal/cloudinit are held to it too: inventory.VM, the ownership
// record and the guestinfo are in the vocabulary. The check of
// internal/clonespec, which still builds govmomi's specifications, shows
// it finds such uses.
func TestDecisionPackagesUseNoGovmomiType(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs go list -export")
	}
	root := filepath.Join("..", "..")
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}
	for _, dir := range append(DecisionPackages, "internal/inventory") {
		args = append(args, "./"+dir)
	}
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list -export")
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	uses := func(dir string) []string {
		p, err := build.Default.ImportDir(filepath.Join(root, dir), 0)
		require.NoError(t, err, dir)
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			require.NoError(t, err)
			files = append(files, f)
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
		_, err = (&types.Config{Importer: imp}).Check(module+"/"+dir, fset, files, info)
		require.NoError(t, err, dir)
		var found []string
		for expr, tv := range info.Types {
			if tv.Type != nil && govmomiType(tv.Type, map[types.Type]bool{}) {
				found = append(found, fmt.Sprintf("%s: %s", fset.Position(expr.Pos()), tv.Type))
			}
		}
		return found
	}
	for _, dir := range DecisionPackages {
		assert.Empty(t, uses(dir), "%s uses govmomi types", dir)
	}
	for _, dir := range []string{"internal/inventory", "internal/cloudinit"} {
		assert.Empty(t, uses(dir), "%s uses govmomi types", dir)
		for _, imp := range imports(t, dir) {
			assert.NotContains(t, imp, "github.com/vmware/govmomi", "%s imports govmomi", dir)
		}
	}
	// internal/vsphere still hands the port govmomi's clone and
	// reconfigure specifications (built by internal/clonespec and
	// internal/vcenter), but imports no govmomi package itself.
	for _, imp := range imports(t, "internal/vsphere") {
		assert.NotContains(t, imp, "github.com/vmware/govmomi", "internal/vsphere imports govmomi")
	}
	assert.NotEmpty(t, uses("internal/clonespec"), "the check finds govmomi types where they are")
}

// govmomiType tells whether t is a govmomi type or is made of one (a
// pointer, slice, map, channel, function or struct literal type over
// one). A named type of another package is not looked into: using
// inventory.VM is fine, reading its govmomi field is not.
func govmomiType(t types.Type, seen map[types.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil && strings.HasPrefix(p.Path(), "github.com/vmware/govmomi") {
			return true
		}
		for i := range t.TypeArgs().Len() {
			if govmomiType(t.TypeArgs().At(i), seen) {
				return true
			}
		}
		return false
	case *types.Alias:
		return govmomiType(types.Unalias(t), seen)
	case *types.Pointer:
		return govmomiType(t.Elem(), seen)
	case *types.Slice:
		return govmomiType(t.Elem(), seen)
	case *types.Array:
		return govmomiType(t.Elem(), seen)
	case *types.Map:
		return govmomiType(t.Key(), seen) || govmomiType(t.Elem(), seen)
	case *types.Chan:
		return govmomiType(t.Elem(), seen)
	case *types.Tuple:
		for i := range t.Len() {
			if govmomiType(t.At(i).Type(), seen) {
				return true
			}
		}
	case *types.Signature:
		return govmomiType(t.Params(), seen) || govmomiType(t.Results(), seen)
	case *types.Struct:
		for i := range t.NumFields() {
			if govmomiType(t.Field(i).Type(), seen) {
				return true
			}
		}
	}
	return false
}

// goTool is the go command that runs this test.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
