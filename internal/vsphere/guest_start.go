package vsphere

import (
	"context"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// guest starts workers through guest operations (internal/guest) with the
// hatchery's vCenter port (adapted: vcenter.Ports) and current logger.
func (h *HatcheryVSphere) guest() guest.Starter {
	return guest.Starter{Port: vcenter.PortsOf(h.vs), Log: h.log}
}

// guestOf is the starter of the VM whose record is annot: for a Windows
// model's VM (config.Config.OSOfRecord, docs/windows.md) PowerShell with
// the Windows readiness bounds, else guest().
func (h *HatcheryVSphere) guestOf(annot *inventory.Annotation) guest.Starter {
	s := h.guest()
	if h.isWindowsRecord(annot) {
		to := h.windowsTimeouts()
		s.Windows, s.Timeouts = true, &to
	}
	return s
}

// isWindowsRecord tells whether the VM recorded by annot runs a Windows
// model.
func (h *HatcheryVSphere) isWindowsRecord(annot *inventory.Annotation) bool {
	return annot != nil && h.conf().OSOfRecord(annot.WorkerModelPath, annot.VMwareModelPath) == config.OSWindows
}

// windowsTimeouts are guest.Readiness with the Windows readiness keys'
// bounds (windowsGuestOpsTimeout, windowsIPTimeout, windowsEnvTimeout).
func (h *HatcheryVSphere) windowsTimeouts() guest.Timeouts {
	to := guest.Readiness
	w := h.conf().WindowsReadinessTimeouts()
	to.GuestOps, to.IP, to.Env = w.GuestOps, w.IP, w.Env
	return to
}

// bootWait bounds a guestinfo (cloud-init, cloudbase-init) worker's boot
// until its IP: the guest-operations and IP bounds together, the Windows
// ones for a Windows model's VM.
func (h *HatcheryVSphere) bootWait(annot *inventory.Annotation) time.Duration {
	if h.isWindowsRecord(annot) {
		w := h.conf().WindowsReadinessTimeouts()
		return w.GuestOps + w.IP
	}
	return guest.Readiness.GuestOps + guest.Readiness.IP
}

// guestCredentials resolves the guest account of a model from the
// configuration, else from the model and its secrets (guest.Credentials).
func (h *HatcheryVSphere) guestCredentials(ctx context.Context, model sdk.WorkerStarterWorkerModel) (guest.Access, error) {
	return guest.Credentials(ctx, h.conf(), h.cds, model)
}
