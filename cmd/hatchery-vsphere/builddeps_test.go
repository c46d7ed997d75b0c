package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goTool is the go command that runs this test.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// deps lists the packages the command links with the given build tags.
func deps(t *testing.T, tags string) []string {
	t.Helper()
	args := []string{"list", "-deps"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	out, err := exec.Command(goTool(t), append(args, ".")...).CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	return strings.Fields(string(out))
}

// testCode are the packages a production binary must not link: the
// testing package, govmomi's vCenter simulator, and this project's
// simulators and demo.
var testCode = []string{
	"testing",
	"github.com/vmware/govmomi/simulator",
	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim",
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest",
	"github.com/cds-contrib/hatchery-vsphere/internal/demo",
}

// TestProductionBinaryLinksNoTestCode: the default build (make build, the
// systemd install) carries no simulator and no test code; the demo build
// (tag "demo") does, which shows the check can fail.
func TestProductionBinaryLinksNoTestCode(t *testing.T) {
	t.Parallel()
	prod := deps(t, "")
	for _, p := range testCode {
		assert.NotContains(t, prod, p, "the production build links %s", p)
	}
	demo := deps(t, "demo")
	assert.Contains(t, demo, "github.com/cds-contrib/hatchery-vsphere/internal/demo")
	assert.Contains(t, demo, "github.com/vmware/govmomi/simulator")
}

// TestDemoWithoutTagSaysHowToRunIt: `demo` in a production build refuses
// with the command that runs it.
func TestDemoWithoutTagSaysHowToRunIt(t *testing.T) {
	t.Parallel()
	if runDemo != nil {
		t.Fatal("this test runs in the default build, whose runDemo is nil")
	}
	r := runCmdCtx(context.Background(), nil, &app{demo: runDemo}, "demo", "--jobs", "6", "--once")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "go run -tags demo ./cmd/hatchery-vsphere demo")
	assert.Empty(t, r.stdout)
}
