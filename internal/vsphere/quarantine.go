package vsphere

import (
	"context"
	"fmt"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// Quarantine of broken templates (docs/design.md#quarantine): the spawn
// path asks quarantineBegin before it clones and quarantineEnd when it
// returns; GateSpawn refuses a quarantined template's jobs before they are
// booked. The book and the accounting of an attempt are the custody's
// (internal/custody), shared with the warm pool's provisionings.

// quarantineKey names what a worker of model is made from: the V2 model's
// template (spec.image), or the V1 model (its path), whose template this
// hatchery builds (modelref.Key.QuarantineKey). It is the key of the
// model's warm pool too, so that spawns and provisionings share one record
// (warmpool.Key.QuarantineKey). A job's spawn reads it in its plan.
func quarantineKey(model sdk.WorkerStarterWorkerModel) string {
	return modelref.KeyOf(model).QuarantineKey()
}

// GateSpawn implements hatchery.SpawnGate: a job whose template (or V1
// model) is quarantined is refused before anything is reserved or booked,
// unless its back-off is over and no probe is in flight (the job may then
// become the probe). It reads memory only.
func (h *HatcheryVSphere) GateSpawn(_ context.Context, model sdk.WorkerStarterWorkerModel, jobID string) *refusal.Refusal {
	if isRegisterJob(jobID) {
		return nil // a registration rebuilds the V1 template: never refused
	}
	if v := h.custody.Quarantine.Check(quarantineKey(model)); !v.Allowed {
		return custody.Refusal(v)
	}
	return nil
}

// quarantineBegin starts a spawn of args for job on the quarantine book
// under key (its plan's QuarantineKey): the returned attempt must be ended
// by quarantineEnd. A quarantined
// template refuses the spawn (the error wraps a *refusal.Refusal: the
// framework releases the job without counting an attempt).
func (h *HatcheryVSphere) quarantineBegin(args spawn.Arguments, key string) (*quarantine.Attempt, error) {
	a, v := h.custody.Quarantine.Begin(key)
	if a == nil {
		r := custody.Refusal(v)
		h.log.Info("spawn refused", logkey.VM, args.WorkerName, logkey.Job, args.JobID, logkey.Model, args.Model.GetName(), logkey.Reason, r.Reason, logkey.Detail, r.Detail)
		return nil, fmt.Errorf("spawn worker %q for job %q: %w", args.WorkerName, args.JobID, r)
	}
	if a.Probe() {
		e := v.Entry
		h.log.Info("probing quarantined template", logkey.VM, args.WorkerName, logkey.Job, args.JobID, logkey.Model, args.Model.GetName(), logkey.Detail, e.Key)
	}
	return a, nil
}

// quarantineEnd records the outcome of a spawn on its attempt, logs a line
// when the template's state changes, and returns the error the spawn
// returns: a vCenter fault wrapped in a *hatchery.BackendError (no job is
// failed for it), a failure that quarantined the template saying so (the
// job's spawn info names the quarantine).
func (h *HatcheryVSphere) quarantineEnd(ctx context.Context, a *quarantine.Attempt, args spawn.Arguments, err error) error {
	log := h.log.With(logkey.VM, args.WorkerName, logkey.Job, args.JobID, logkey.Model, args.Model.GetName())
	cause, detail := h.custody.EndAttempt(ctx, a, log, "spawned a worker", vcenter.Classify(err))
	if detail != "" {
		err = fmt.Errorf("%w; %s", err, detail)
	}
	if cause == spawnfault.VCenter {
		return &hatchery.BackendError{Err: err}
	}
	return err
}

// quarantineStatusLines are the /mon/status lines of the quarantined
// templates: one in alert each, saying why and until when.
func (h *HatcheryVSphere) quarantineStatusLines() []sdk.MonitoringStatusLine {
	var lines []sdk.MonitoringStatusLine
	for _, e := range h.custody.Quarantine.Quarantined() {
		v := fmt.Sprintf("%s quarantined until %s after %d consecutive failures: %s", e.Key, e.Until.UTC().Format(time.RFC3339), e.Failures, e.Reason)
		if e.State == quarantine.Probing {
			v = fmt.Sprintf("%s quarantined, probe spawn in flight, after %d consecutive failures: %s", e.Key, e.Failures, e.Reason)
		}
		lines = append(lines, sdk.MonitoringStatusLine{Component: "vsphere/quarantine", Value: v, Status: sdk.MonitoringStatusAlert})
	}
	return lines
}

// quarantinePolicy is the quarantine's tuning from cfg. An unvalidated
// threshold (0) falls back to the default, as the durations do.
func quarantinePolicy(cfg *config.Config) quarantine.Policy {
	n := cfg.QuarantineThreshold
	if n <= 0 {
		n = config.DefaultQuarantineThreshold
	}
	return quarantine.Policy{
		Threshold:   n,
		BackoffBase: cfg.QuarantineBackoffDuration(),
		BackoffMax:  cfg.QuarantineBackoffMaxDuration(),
	}
}
