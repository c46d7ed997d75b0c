package vsphere

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// Quarantine of broken templates (docs/design.md#quarantine): the spawn
// path asks quarantineBegin before it clones and quarantineEnd when it
// returns; GateSpawn refuses a quarantined template's jobs before they are
// booked.

// quarantineKey names what a worker of model is made from: the V2 model's
// template (spec.image), or the V1 model (its path), whose template this
// hatchery builds.
func quarantineKey(model sdk.WorkerStarterWorkerModel) string {
	if model.IsV1() {
		return "model " + model.GetName()
	}
	return "template " + model.GetVSphereImage()
}

// quarantineKey is the quarantine key of the pool's template: the one
// quarantineKey(model) gives a spawn of the same V2 template or V1 model,
// so spawns and provisionings share one record.
func (k poolKey) quarantineKey() string {
	if k.v1 {
		return "model " + k.model
	}
	return "template " + k.model
}

// refuseQuarantined is the refusal of a job whose template is quarantined.
func refuseQuarantined(v quarantine.Verdict) *refusal.Refusal {
	e := v.Entry
	if e.State == quarantine.Probing {
		return refusal.Refuse(refusal.ReasonQuarantined, "%s quarantined after %d consecutive failures (last: %s), a probe spawn is in flight",
			e.Key, e.Failures, e.Reason)
	}
	return refusal.Refuse(refusal.ReasonQuarantined, "%s quarantined until %s after %d consecutive failures (last: %s)",
		e.Key, e.Until.UTC().Format(time.RFC3339), e.Failures, e.Reason)
}

// GateSpawn implements hatchery.SpawnGate: a job whose template (or V1
// model) is quarantined is refused before anything is reserved or booked,
// unless its back-off is over and no probe is in flight (the job may then
// become the probe). It reads memory only.
func (h *HatcheryVSphere) GateSpawn(_ context.Context, model sdk.WorkerStarterWorkerModel, jobID string) *refusal.Refusal {
	if isRegisterJob(jobID) {
		return nil // a registration rebuilds the V1 template: never refused
	}
	if v := h.quar.Check(quarantineKey(model)); !v.Allowed {
		return refuseQuarantined(v)
	}
	return nil
}

// quarantineBegin starts a spawn of model for job on the quarantine book:
// the returned attempt must be ended by quarantineEnd. A quarantined
// template refuses the spawn (the error wraps a *refusal.Refusal: the
// framework releases the job without counting an attempt).
func (h *HatcheryVSphere) quarantineBegin(args hatchery.SpawnArguments) (*quarantine.Attempt, error) {
	a, v := h.quar.Begin(quarantineKey(args.Model))
	if a == nil {
		r := refuseQuarantined(v)
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
func (h *HatcheryVSphere) quarantineEnd(ctx context.Context, a *quarantine.Attempt, args hatchery.SpawnArguments, err error) error {
	log := h.log.With(logkey.VM, args.WorkerName, logkey.Job, args.JobID, logkey.Model, args.Model.GetName())
	cause, detail := h.endAttempt(ctx, a, log, "spawned a worker", err)
	if detail != "" {
		err = fmt.Errorf("%w; %s", err, detail)
	}
	if cause == causeVCenter {
		return &hatchery.BackendError{Err: err}
	}
	return err
}

// endAttempt records the outcome of a spawn or of a warm-pool provisioning
// (err nil: success) on its quarantine attempt, and logs with log a change
// of the template's state (lifted says what lifted it). It returns the
// failure's cause and, when the failure quarantined the template, the
// sentence that says so.
func (h *HatcheryVSphere) endAttempt(ctx context.Context, a *quarantine.Attempt, log *slog.Logger, lifted string, err error) (spawnFailureCause, string) {
	cause := spawnCause(ctx, err)
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	tr, e := a.End(err == nil, cause.quarantine(), reason)
	switch tr {
	case quarantine.Entered, quarantine.Renewed:
		h.recordQuarantined()
		detail := fmt.Sprintf("%s quarantined until %s after %d consecutive failures", e.Key, e.Until.UTC().Format(time.RFC3339), e.Failures)
		log.Warn("template quarantined", logkey.Reason, refusal.ReasonQuarantined, logkey.Detail, detail, logkey.Err, err)
		return cause, detail
	case quarantine.Lifted:
		h.recordQuarantined()
		log.Info("template quarantine lifted", logkey.Detail, e.Key+" "+lifted)
	}
	return cause, ""
}

// recordQuarantined sets the quarantined_templates gauge to the count now.
func (h *HatcheryVSphere) recordQuarantined() {
	h.quarGauge.Lock()
	defer h.quarGauge.Unlock()
	h.metrics.QuarantinedTemplates(len(h.quar.Quarantined()))
}

// spawnFailureCause is what a spawn failure points at.
type spawnFailureCause int

const (
	causeNone spawnFailureCause = iota // success, or elsewhere (capacity, IP, job gone...)
	causeTemplate
	causeVCenter
)

// quarantine maps the cause on the quarantine's: only the template counts.
func (c spawnFailureCause) quarantine() quarantine.Cause {
	if c == causeTemplate {
		return quarantine.CauseTemplate
	}
	return quarantine.CauseOther
}

// spawnCause classifies a spawn's error (nil: causeNone). vCenter itself
// comes first (isVCenterDown): it fails the spawn whatever step it was at. Then a spawn whose own ctx ended (shutdown, the
// job gone) says nothing. Then the template: the guest of a VM made from
// it never became ready or could not launch the worker, or vCenter
// refused to clone it (templateFault marks both); a clone refused for
// lack of resources is capacity, not the template.
func spawnCause(ctx context.Context, err error) spawnFailureCause {
	var tf *templateFault
	switch {
	case err == nil:
		return causeNone
	case isVCenterDown(err):
		return causeVCenter
	case ctx.Err() != nil:
		return causeNone
	case !errors.As(err, &tf):
		return causeNone
	}
	var ir types.BaseInsufficientResourcesFault
	if _, ok := fault.As(err, &ir); ok {
		return causeNone
	}
	if fault.Is(err, &types.DuplicateName{}) {
		return causeNone
	}
	return causeTemplate
}

// isVCenterDown tells whether err is vCenter's own failure rather than an
// answer about the request: not connected, the session lost, vCenter's
// internal error (SystemError), the inventory unreadable for too long, or a
// transport error (no answer) other than a deadline.
func isVCenterDown(err error) bool {
	if errors.Is(err, vcenter.ErrNotConnected) || errors.Is(err, inventory.ErrStale) || fault.Is(err, &types.NotAuthenticated{}) {
		return true
	}
	// SystemErrorFault is the same fault under its SOAP detail name (the
	// simulator's injected "network failure" answers it).
	if fault.Is(err, &types.SystemError{}) || fault.Is(err, &types.SystemErrorFault{}) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne)
}

// templateFault marks a spawn failure that happened on the template or on
// a VM made from it: the clone itself, the guest's readiness, the worker's
// launch. Its text is the cause's.
type templateFault struct{ err error }

func (e *templateFault) Error() string { return e.err.Error() }
func (e *templateFault) Unwrap() error { return e.err }

// markTemplateFault wraps err (nil stays nil) as a templateFault.
func markTemplateFault(err error) error {
	if err == nil {
		return nil
	}
	return &templateFault{err: err}
}

// quarantineStatusLines are the /mon/status lines of the quarantined
// templates: one in alert each, saying why and until when.
func (h *HatcheryVSphere) quarantineStatusLines() []sdk.MonitoringStatusLine {
	var lines []sdk.MonitoringStatusLine
	for _, e := range h.quar.Quarantined() {
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
