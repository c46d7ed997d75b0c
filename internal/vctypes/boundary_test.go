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
// vocabulary (internal/vctypes, which holds the port, Port, too) and
// import no govmomi package, nor internal/vcenter, the govmomi adapter.
var DecisionPackages = []string{
	"internal/admission", "internal/capacity", "internal/warmpool", "internal/quarantine",
	"internal/lifecycle", "internal/ippool", "internal/spawnfault", "internal/guest",
	"internal/custody", "internal/instantparent",
}

// VCheckGovmomi are the functions of internal/vcheck (`vcenter check`)
// that still speak govmomi, with why (docs/architecture.md, "The port's
// layout"). None since its clone became a request
// (vctypes.Clone): vcheck holds VMs as vctypes.Ref and reads and writes
// vCenter through the port's methods in the project's terms. A function
// the port's next change makes speak govmomi again joins the list with
// its reason.
var VCheckGovmomi = map[string]string{}

// imports returns the imports of the non-test Go files of the package in
// dir (relative to the module's root), with the default build tags.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	p, err := build.Default.ImportDir(filepath.Join("..", "..", dir), 0)
	require.NoError(t, err, dir)
	return p.Imports
}

// PortConsumers are the packages that are no decision packages but take
// the port (Port, this package's) or speak only its vocabulary, and the
// mock generated from it: since the port's interfaces moved here from
// internal/vcenter, none of them imports internal/vcenter or govmomi
// (internal/inventory did, for vcenter.InventorySource and the sentinel
// errors).
var PortConsumers = []string{
	"internal/inventory", "internal/cloudinit", "internal/clonespec", "internal/collector", "mock_vsphere",
}

// TestDecisionPackagesImportNoGovmomi: no decision package, nor any of
// PortConsumers, imports a govmomi package or internal/vcenter. It fails
// when one does (as admission, guest, ippool, spawnfault and warmpool
// did, and inventory until the port moved here); the check of
// internal/vcenter, internal/vctypes and mock_vsphere shows it reads real
// imports.
func TestDecisionPackagesImportNoGovmomi(t *testing.T) {
	t.Parallel()
	for _, dir := range append(append([]string{}, DecisionPackages...), PortConsumers...) {
		for _, imp := range imports(t, dir) {
			assert.False(t, strings.HasPrefix(imp, "github.com/vmware/govmomi"), "%s imports %s", dir, imp)
			assert.NotEqual(t, module+"/internal/vcenter", imp, "%s imports internal/vcenter: use the vocabulary (internal/vctypes)", dir)
		}
	}
	assert.Contains(t, imports(t, "internal/vcenter"), "github.com/vmware/govmomi/vim25/types", "the check reads the imports")
	assert.Contains(t, imports(t, "mock_vsphere"), module+"/internal/vctypes", "the mock is generated from the port here")
	for _, imp := range imports(t, "internal/vctypes") {
		assert.NotContains(t, imp, ".", "internal/vctypes imports only the standard library: %s", imp)
	}
}

// TestFaultsClassifiedInOnePlace: govmomi's fault package (fault.Is,
// fault.As) is imported by internal/vcenter/vim only, whose FaultKindOf is
// the one rule that tells vCenter's faults apart (vocabulary.go, with the
// predicates the adapter acts on); every other package, internal/vcenter
// included, tests a vctypes.FaultKind or calls those. It fails when a second copy of the
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
	assert.Equal(t, []string{"internal/vcenter/vim"}, users, "packages importing %s", faultPkg)
}

// TestDecisionPackagesUseNoGovmomiType: no expression of a decision
// package's code has a govmomi type, even one reached through another
// package (a result of a function of internal/clonespec): they speak the
// vocabulary, not govmomi smuggled. The packages are type-checked from the
// compiler's export data (go list -export). internal/inventory (no
// decision package: it holds the hatchery's view of the VMs) and
// internal/cloudinit are held to it too: inventory.VM, the ownership
// record and the guestinfo are in the vocabulary; internal/vcheck too,
// but for the functions of VCheckGovmomi; internal/clonespec too, whose
// clone request is the vocabulary's. The check of internal/vcenter, the
// adapter, shows it finds such uses.
func TestDecisionPackagesUseNoGovmomiType(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs go list -export")
	}
	root := filepath.Join("..", "..")
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}
	for _, dir := range append(DecisionPackages, "internal/inventory", "internal/vcheck") {
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
	usesByFunc := func(dir string) []govmomiUse {
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
		var found []govmomiUse
		for expr, tv := range info.Types {
			if tv.Type != nil && govmomiType(tv.Type, map[types.Type]bool{}) {
				found = append(found, govmomiUse{at: fmt.Sprintf("%s: %s", fset.Position(expr.Pos()), tv.Type), fn: enclosingFunc(files, expr.Pos())})
			}
		}
		return found
	}
	uses := func(dir string) []string {
		var out []string
		for _, u := range usesByFunc(dir) {
			out = append(out, u.at)
		}
		return out
	}
	for _, dir := range DecisionPackages {
		assert.Empty(t, uses(dir), "%s uses govmomi types", dir)
	}
	for _, dir := range []string{"internal/inventory", "internal/cloudinit", "internal/clonespec"} {
		assert.Empty(t, uses(dir), "%s uses govmomi types", dir)
		for _, imp := range imports(t, dir) {
			assert.NotContains(t, imp, "github.com/vmware/govmomi", "%s imports govmomi", dir)
		}
	}
	// internal/vsphere hands the port requests in the project's terms
	// (a clone, a reconfigure) and imports no govmomi package.
	for _, imp := range imports(t, "internal/vsphere") {
		assert.NotContains(t, imp, "github.com/vmware/govmomi", "internal/vsphere imports govmomi")
	}
	assert.NotEmpty(t, uses("internal/vcenter"), "the check finds govmomi types where they are: the adapter")
	// internal/vcheck: govmomi only in the functions of VCheckGovmomi,
	// and every one of them still uses it (a function whose call moved
	// behind the port leaves the list).
	var outside []string
	listed := map[string]bool{}
	for _, u := range usesByFunc("internal/vcheck") {
		if VCheckGovmomi[u.fn] != "" {
			listed[u.fn] = true
			continue
		}
		outside = append(outside, u.at)
	}
	assert.Empty(t, outside, "internal/vcheck uses govmomi types outside VCheckGovmomi")
	for fn := range VCheckGovmomi {
		assert.True(t, listed[fn], "internal/vcheck's %s uses no govmomi type: take it out of VCheckGovmomi", fn)
	}
}

// govmomiUse is an expression of a govmomi type: where, and the name of
// the function declaration it is in ("" outside any).
type govmomiUse struct {
	at string
	fn string
}

// enclosingFunc is the name of the function declaration of files that
// holds pos ("" when none does).
func enclosingFunc(files []*ast.File, pos token.Pos) string {
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Pos() <= pos && pos < fd.End() {
				return fd.Name.Name
			}
		}
	}
	return ""
}

// TestVCheckImportsGovmomiOnlyWhereListed: internal/vcheck imports
// govmomi packages only in the files that declare a function of
// VCheckGovmomi; TestDecisionPackagesUseNoGovmomiType holds the rest of
// those files to the vocabulary, expression by expression.
func TestVCheckImportsGovmomiOnlyWhereListed(t *testing.T) {
	t.Parallel()
	p, err := build.Default.ImportDir(filepath.Join("..", "..", "internal", "vcheck"), 0)
	require.NoError(t, err)
	listedFiles := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && VCheckGovmomi[fd.Name.Name] != "" {
				listedFiles[name] = true
			}
		}
	}
	govmomi := 0
	for imp, at := range p.ImportPos {
		if !strings.HasPrefix(imp, "github.com/vmware/govmomi") {
			continue
		}
		for _, pos := range at {
			govmomi++
			assert.True(t, listedFiles[filepath.Base(pos.Filename)], "%s imports %s: only the files of VCheckGovmomi's functions may", pos, imp)
		}
	}
	if len(VCheckGovmomi) > 0 {
		assert.NotZero(t, govmomi, "the check reads vcheck's imports")
	}
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
