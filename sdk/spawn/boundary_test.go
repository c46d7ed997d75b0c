package spawn_test

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/cds-contrib/hatchery-vsphere"

// imports returns the imports of the non-test Go files of the package in
// dir (relative to the module's root).
func imports(t *testing.T, dir string) []string {
	t.Helper()
	p, err := build.Default.ImportDir(filepath.Join("..", "..", dir), 0)
	require.NoError(t, err, dir)
	return p.Imports
}

// TestWorkerBuildersNeedNotTheFramework: the packages that build a worker
// from a spawn's data take that data from sdk/spawn, not from the
// framework (sdk/hatchery); sdk/spawn itself imports no other package of
// the project than sdk and sdk/refusal. It fails when one of them imports
// the framework again for a data type (as guest, spawntiming and admission
// did), or when sdk/spawn grows a dependency on the framework.
func TestWorkerBuildersNeedNotTheFramework(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"internal/guest", "internal/spawntiming", "internal/admission", "internal/custody", "internal/warmpool"} {
		assert.NotContains(t, imports(t, dir), module+"/sdk/hatchery", "%s imports the framework", dir)
	}
	for _, imp := range imports(t, "sdk/spawn") {
		if strings.HasPrefix(imp, module) {
			assert.Contains(t, []string{module + "/sdk", module + "/sdk/refusal"}, imp, "sdk/spawn imports %s", imp)
		}
	}
	assert.Contains(t, imports(t, "sdk/hatchery"), module+"/sdk/spawn", "the check reads the imports")
}
