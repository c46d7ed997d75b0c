package vsphere

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// taskFault is a failed task's error carrying f, as the adapter returns it.
func taskFault(f types.BaseMethodFault) error {
	return task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{Fault: f, LocalizedMessage: "task failed"}}
}

func TestSpawnCause(t *testing.T) {
	t.Parallel()
	refused := &url.Error{Op: "Post", URL: "https://vc/sdk", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	deadline := &url.Error{Op: "Post", URL: "https://vc/sdk", Err: context.DeadlineExceeded}
	wrap := func(err error) error { return fmt.Errorf("spawn worker %q for job %q: step: %w", "w", "j", err) }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want spawnFailureCause
	}{
		{"success", context.Background(), nil, causeNone},
		{"not connected", context.Background(), wrap(fmt.Errorf("%w (vc): still connecting", vcenter.ErrNotConnected)), causeVCenter},
		{"inventory stale", context.Background(), wrap(inventory.ErrStale), causeVCenter},
		{"session lost", context.Background(), wrap(taskFault(&types.NotAuthenticated{})), causeVCenter},
		{"vcenter internal error", context.Background(), wrap(taskFault(&types.SystemError{Reason: "x"})), causeVCenter},
		{"no answer", context.Background(), wrap(refused), causeVCenter},
		{"no answer during the guest wait", context.Background(), wrap(markTemplateFault(refused)), causeVCenter},
		{"guest never ready", context.Background(), wrap(markTemplateFault(deadline)), causeTemplate},
		{"guest login refused", context.Background(), wrap(markTemplateFault(taskFault(&types.InvalidGuestLogin{}))), causeTemplate},
		{"clone fault on the template", context.Background(), wrap(markTemplateFault(taskFault(&types.FileNotFound{}))), causeTemplate},
		{"clone refused for resources", context.Background(), wrap(markTemplateFault(taskFault(&types.InsufficientMemoryResourcesFault{}))), causeNone},
		{"clone name taken", context.Background(), wrap(markTemplateFault(taskFault(&types.DuplicateName{}))), causeNone},
		{"spawn cancelled", cancelled, wrap(markTemplateFault(context.Canceled)), causeNone},
		{"other step", context.Background(), wrap(errors.New("no free ip")), causeNone},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, spawnCause(tc.ctx, tc.err), tc.name)
	}
}

// TestQuarantinedTemplateRefusedWithoutVCenter: once a template is
// quarantined, GateSpawn refuses its jobs with the code quarantined, and a
// spawn that passed the gate before is refused by SpawnWorker, both
// without one vCenter call (the strict mock fails on any), while another
// template's job passes the gate.
func TestQuarantinedTemplateRefusedWithoutVCenter(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	model := sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "m", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "broken"},
		Cmd:         "./worker",
	}
	for i := 0; i < config.DefaultQuarantineThreshold; i++ {
		a, _ := f.h.quar.Begin(quarantineKey(model))
		a.End(false, quarantine.CauseTemplate, "guest never ready")
	}
	ctx := context.Background()
	r := f.h.GateSpawn(ctx, model, "job-1")
	if assert.NotNil(t, r) {
		assert.Equal(t, refusal.ReasonQuarantined, r.Reason)
		assert.Contains(t, r.Detail, "template broken quarantined until 2025-03-01T12:02:00Z after 3 consecutive failures")
	}
	err := f.h.SpawnWorker(ctx, hatchery.SpawnArguments{WorkerName: "w-1", JobID: "job-1", Model: model})
	var ref *refusal.Refusal
	if assert.True(t, errors.As(err, &ref), "a refusal: %v", err) {
		assert.Equal(t, refusal.ReasonQuarantined, ref.Reason)
	}
	other := model
	other.VSphereSpec.Image = "debian12"
	assert.Nil(t, f.h.GateSpawn(ctx, other, "job-2"))
	assert.Nil(t, f.h.GateSpawn(ctx, model, ""), "a registration is never refused")
	lines := f.h.quarantineStatusLines()
	if assert.Len(t, lines, 1) {
		assert.Equal(t, sdk.MonitoringStatusAlert, lines[0].Status)
	}
}
