package daemon

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// TestCapacityRefusalCountedOnce: capacity_refusals is counted at one
// door, the daemon's observer's JobSkipped, which the framework calls once
// per refusal of a job whichever decision refused (sdk/hatchery's
// TestRefusalReportedOnceWhicheverPath). Each code naming a resource
// counts once under it; the other signals of the same refusals (a
// maxWorker refusal's MaxWorkersReached, a refusal at spawn time's
// SpawnFailed) count nothing more; codes naming no resource count
// nothing. It fails if a second door counts again. Not parallel (see
// TestInventoryLine).
func TestCapacityRefusalCountedOnce(t *testing.T) {
	m, err := metrics.New("hatch-door")
	require.NoError(t, err)
	defer m.Close()
	obs := metricsObserver{m: m, ctx: t.Context()}
	for _, r := range refusal.Reasons {
		obs.JobSkipped(r)
	}
	obs.MaxWorkersReached()
	obs.SpawnFailed(hatchery.SpawnEvent{Model: "debian12", JobID: "1",
		Err: fmt.Errorf("spawn worker: %w", refusal.Refuse(refusal.ReasonIP, "no address left"))}, time.Second)

	fams := testutil.Scrape(t, m.Handler())
	for _, res := range metrics.CapacityResources {
		v, ok := testutil.Series(fams, "cds_hatchery_vsphere_capacity_refusals", testutil.Labels{"resource": string(res)})
		require.True(t, ok, "capacity_refusals{resource=%q}", res)
		assert.Equal(t, 1.0, v, "capacity_refusals{resource=%q}: one refusal, one count", res)
	}
}

// TestCapacityRefusalsHaveOneDoor: in the production code, metrics'
// Refused (capacity_refusals) is called from one place, the daemon's
// observer (observer.go). It fails when a decision counts its own
// refusals again (as admission, CanSpawn and the spawn did, each beside
// the framework's report of the same refusal).
func TestCapacityRefusalsHaveOneDoor(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	var callers []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Refused" {
					rel, _ := filepath.Rel(root, p)
					callers = append(callers, filepath.ToSlash(rel))
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"internal/daemon/observer.go"}, callers)
}
