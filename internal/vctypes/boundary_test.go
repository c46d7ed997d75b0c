package vctypes_test

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/cds-contrib/hatchery-vsphere"

// DecisionPackages are the packages that decide (docs/architecture.md,
// "The vCenter port"): they speak the project's vCenter vocabulary
// (internal/vctypes) and import no govmomi package, nor internal/vcenter,
// whose port is govmomi's.
var DecisionPackages = []string{
	"internal/admission", "internal/capacity", "internal/warmpool", "internal/quarantine",
	"internal/lifecycle", "internal/ippool", "internal/spawnfault", "internal/guest",
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
