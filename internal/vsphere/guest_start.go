package vsphere

import (
	"context"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// guest starts workers through guest operations (internal/guest) with the
// hatchery's vCenter port (it speaks guest.Port's vocabulary) and current
// logger.
func (h *HatcheryVSphere) guest() guest.Starter {
	return guest.Starter{Port: h.vs, Log: h.log}
}

// guestFor is the starter of a worker whose plan is p: for a Windows
// model (docs/windows.md) PowerShell with the plan's Windows readiness
// bounds, else guest().
func (h *HatcheryVSphere) guestFor(p admission.Plan) guest.Starter {
	s := h.guest()
	if p.IsWindows() {
		to := windowsTimeouts(p.Windows)
		s.Windows, s.Timeouts = true, &to
	}
	return s
}

// guestOf is the starter of the VM whose record is annot, its OS read in
// the running configuration (config.Config.OSOfRecord): a registration's;
// a job's spawn reads its plan (guestFor).
func (h *HatcheryVSphere) guestOf(annot *inventory.Annotation) guest.Starter {
	cfg := h.conf()
	s := h.guest()
	if annot != nil && cfg.OSOfRecord(annot.WorkerModelPath, annot.VMwareModelPath) == config.OSWindows {
		to := windowsTimeouts(cfg.WindowsReadinessTimeouts())
		s.Windows, s.Timeouts = true, &to
	}
	return s
}

// windowsTimeouts are guest.Readiness with the Windows readiness keys'
// bounds w (windowsGuestOpsTimeout, windowsIPTimeout, windowsEnvTimeout).
func windowsTimeouts(w config.WindowsReadiness) guest.Timeouts {
	to := guest.Readiness
	to.GuestOps, to.IP, to.Env = w.GuestOps, w.IP, w.Env
	return to
}

// bootWait bounds a guestinfo (cloud-init, cloudbase-init) worker's boot
// until its IP: the guest-operations and IP bounds together, the Windows
// ones for a Windows model's VM (the VM recorded by annot, read in the
// running configuration; a job's spawn reads its plan: planBootWait).
func (h *HatcheryVSphere) bootWait(annot *inventory.Annotation) time.Duration {
	cfg := h.conf()
	windows := annot != nil && cfg.OSOfRecord(annot.WorkerModelPath, annot.VMwareModelPath) == config.OSWindows
	return bootWaitOf(windows, cfg.WindowsReadinessTimeouts())
}

// planBootWait is bootWait for a worker whose plan is p.
func planBootWait(p admission.Plan) time.Duration { return bootWaitOf(p.IsWindows(), p.Windows) }

// bootWaitOf is bootWait for a guest that runs Windows or not, with the
// Windows bounds w.
func bootWaitOf(windows bool, w config.WindowsReadiness) time.Duration {
	if windows {
		return w.GuestOps + w.IP
	}
	return guest.Readiness.GuestOps + guest.Readiness.IP
}

// guestCredentials resolves the guest account of a model from the
// configuration, else from the model and its secrets (guest.Credentials).
func (h *HatcheryVSphere) guestCredentials(ctx context.Context, model sdk.WorkerStarterWorkerModel) (guest.Access, error) {
	return guest.Credentials(ctx, h.conf(), h.cds, model)
}
