package vsphere

import (
	"context"
	"fmt"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// bootstrapAccess resolves how a worker of model starts (accessOf) from
// the running configuration: a registration's; a job's spawn reads its
// plan.
func (h *HatcheryVSphere) bootstrapAccess(ctx context.Context, model sdk.WorkerStarterWorkerModel) (ga guest.Access, cloudInit bool, err error) {
	return h.accessOf(ctx, model, h.conf().SettingsOf(model))
}

// accessOf resolves how a worker of model whose settings are s starts:
// through cloud-init (cloudInit true; no guest account, only the entry's
// preStartScript), else through guest operations with the model's guest
// credentials (guest.CredentialsOf: the entry's account, else the
// model's).
func (h *HatcheryVSphere) accessOf(ctx context.Context, model sdk.WorkerStarterWorkerModel, s config.ModelSettings) (ga guest.Access, cloudInit bool, err error) {
	if s.Bootstrap != config.BootstrapCloudInit {
		ga, err = guest.CredentialsOf(ctx, s.Entry, h.cds, model)
		return ga, false, err
	}
	if s.Entry != nil {
		ga.PreStartScript = s.Entry.PreStartScript
	}
	return ga, true, nil
}

// cloudInitBootOf is cloudInitBoot with model's OS read in the running
// configuration: a registration's; a job's spawn reads its plan.
func (h *HatcheryVSphere) cloudInitBootOf(model sdk.WorkerStarterWorkerModel, cloudInit bool, script string, cfg spawn.WorkerConfig) *cloudinit.Boot {
	return cloudInitBoot(cloudInit, h.conf().IsWindows(model), script, cfg)
}

// cloudInitBoot is the boot payload of a cloud-init worker, nil for a
// guest-operations one; for a Windows model cloudbase-init's, its script
// wrapped as a guest-operations launch wraps it (guest.WindowsScript).
func cloudInitBoot(cloudInit, windows bool, script string, cfg spawn.WorkerConfig) *cloudinit.Boot {
	if !cloudInit {
		return nil
	}
	if windows {
		return &cloudinit.Boot{Script: guest.WindowsScript(script), CDSConfig: cfg.EncodeBase64(), Windows: true}
	}
	return &cloudinit.Boot{Script: script, CDSConfig: cfg.EncodeBase64()}
}

// startCloudInitWorker waits for a cloud-init worker's VM to be ready —
// the guest reports its IP (the static one when one was allocated), which
// cloud-init brings up before it runs the userdata; not for a registration
// (waitIP false), whose VM may be done and off before anyone looks — and
// records the start in the annotation. No guest operation is made. The
// VM's userdata is removed once the API lists the worker.
func (h *HatcheryVSphere) startCloudInitWorker(ctx context.Context, vm vctypes.Ref, name string, annot *inventory.Annotation, waitIP bool) error {
	var wait time.Duration
	if waitIP {
		wait = h.bootWait(annot)
	}
	return h.bootCloudInitWorker(ctx, vm, name, annot, waitIP, wait)
}

// bootCloudInitWorker is startCloudInitWorker with the bound of the wait
// for the IP given (bootWait; a job's spawn: planBootWait).
func (h *HatcheryVSphere) bootCloudInitWorker(ctx context.Context, vm vctypes.Ref, name string, annot *inventory.Annotation, waitIP bool, wait time.Duration) error {
	h.custody.TrackUserdata(name, vm)
	ip := annot.IPAddress
	if waitIP {
		// Boot, then cloud-init's network stage: the guest-operations
		// and IP stages of a guest-operations spawn, in one wait.
		var err error
		ip, err = guest.WaitIP(ctx, h.vs, vm, annot.IPAddress, wait)
		if err != nil {
			return guest.StepErr("wait for ip", err)
		}
		spawntiming.Mark(ctx, spawntiming.StageIP)
	}
	started := h.now().UTC()
	annot.WorkerStarted = &started
	h.log.Info("worker booting through cloud-init", logkey.VM, name, logkey.Job, annot.JobID, logkey.Model, annot.ModelName(), logkey.IP, ip)
	if err := h.writeAnnotation(ctx, vm, annot); err != nil {
		h.recordUnrecordedStart(name, started)
		h.log.Warn("record worker start failed", logkey.VM, name, logkey.Job, annot.JobID, logkey.Err, err)
	}
	spawntiming.Mark(ctx, spawntiming.StageLaunch)
	return nil
}

// scrubRegistered removes the userdata of the VMs whose worker the API
// lists: it registered, the token was used. The awol cleanup forgets the
// VMs it destroys.
func (h *HatcheryVSphere) scrubRegistered(ctx context.Context, workers apiWorkers) {
	for name, ref := range h.custody.Userdata() {
		if workers.known[name] {
			h.custody.ScrubUserdata(ctx, ref, name, "worker registered")
		}
	}
}

// clearGuestinfo removes all the cloud-init guestinfo (metadata and
// userdata) from a VM about to become a template, bounded like a scrub.
func (h *HatcheryVSphere) clearGuestinfo(ctx context.Context, vm vctypes.Ref, name string) error {
	defer h.custody.ForgetUserdata(name)
	sctx, cancel := context.WithTimeout(ctx, custody.ScrubTimeout)
	defer cancel()
	spec := vcenter.ConfigSpecOf(vctypes.ConfigChange{Options: cloudinit.BlankOptions()})
	if err := h.vs.ReconfigureVirtualMachine(sctx, vcenter.MORef(vm), spec); err != nil {
		return fmt.Errorf("clear guestinfo of vm %q: %w", name, err)
	}
	h.log.Info("cloud-init guestinfo cleared", logkey.VM, name, logkey.Detail, "becomes a model template")
	return nil
}
