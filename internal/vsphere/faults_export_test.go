package vsphere

import (
	"context"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
)

// Hooks for the external (vcsim) fault tests, compiled into tests only.

// FaultsShortenReadiness shortens the readiness timeouts for one test and
// restores them at its end. The timeouts are package state: a test calling
// it must not run in parallel.
func FaultsShortenReadiness(t testing.TB, guestOps time.Duration) {
	t.Helper()
	saved := guest.Readiness
	t.Cleanup(func() { guest.Readiness = saved })
	guest.Readiness.GuestOps = guestOps
	guest.Readiness.IP = guestOps
	guest.Readiness.Env = guestOps
	guest.Readiness.EnvRetry = guestOps / 10
	guest.Readiness.Resume = guestOps
	guest.Readiness.Cleanup = 10 * time.Second
}

// FaultsReservedIPs returns the IPs reserved by spawns (sorted).
func (h *HatcheryVSphere) FaultsReservedIPs() []string {
	return h.ips.Reserved()
}

// FaultsIPCounts is the pool's used (by vms or reserved) and total counts.
func (h *HatcheryVSphere) FaultsIPCounts(vms []inventory.VM) (used, total int) {
	return h.ips.Counts(inventory.UsedBy(vms))
}

// FaultsMarkedToDelete tells whether the VM named name is marked for deletion.
func (h *HatcheryVSphere) FaultsMarkedToDelete(name string) bool { return isMarked(h, name) }

// FaultsDeleteMarkAbsentTTL is how long a delete mark survives while its
// VM is missing from the inventory.
func FaultsDeleteMarkAbsentTTL() time.Duration { return deleteMarkAbsentTTL }

// FaultsReleaseGrace is how long a released capacity reservation still counts.
func (h *HatcheryVSphere) FaultsReleaseGrace() time.Duration { return h.releaseGrace() }

// FaultsKillDisabledWorkersPass runs one disabled-workers cleanup pass.
func (h *HatcheryVSphere) FaultsKillDisabledWorkersPass(ctx context.Context) {
	h.killDisabledWorkers(ctx)
}
