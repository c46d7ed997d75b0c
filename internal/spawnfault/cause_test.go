package spawnfault

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

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
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
		want Cause
	}{
		{"success", context.Background(), nil, None},
		{"not connected", context.Background(), wrap(fmt.Errorf("%w (vc): still connecting", vctypes.ErrNotConnected)), VCenter},
		{"inventory stale", context.Background(), wrap(inventory.ErrStale), VCenter},
		{"session lost", context.Background(), wrap(taskFault(&types.NotAuthenticated{})), VCenter},
		{"vcenter internal error", context.Background(), wrap(taskFault(&types.SystemError{Reason: "x"})), VCenter},
		{"no answer", context.Background(), wrap(refused), VCenter},
		{"no answer during the guest wait", context.Background(), wrap(MarkTemplate(refused)), VCenter},
		{"guest never ready", context.Background(), wrap(MarkTemplate(deadline)), Template},
		{"guest login refused", context.Background(), wrap(MarkTemplate(taskFault(&types.InvalidGuestLogin{}))), Template},
		{"clone fault on the template", context.Background(), wrap(MarkTemplate(taskFault(&types.FileNotFound{}))), Template},
		{"clone refused for resources", context.Background(), wrap(MarkTemplate(taskFault(&types.InsufficientMemoryResourcesFault{}))), None},
		{"clone name taken", context.Background(), wrap(MarkTemplate(taskFault(&types.DuplicateName{}))), None},
		{"spawn cancelled", cancelled, wrap(MarkTemplate(context.Canceled)), None},
		{"other step", context.Background(), wrap(errors.New("no free ip")), None},
	}
	for _, tc := range cases {
		// The spawn path classifies an error where it leaves the port
		// (vcenter.Classify); Classify reads the kinds.
		assert.Equal(t, tc.want, Classify(tc.ctx, vcenter.Classify(tc.err)), tc.name)
	}
}

// TestIsVCenterFault: a fault vCenter answered (classified where it left
// the port) makes an outcome known; a timeout, a cancellation or no answer
// leaves it unknown. Fails if IsVCenterFault stopped reading the kind
// vcenter.Classify attached, or counted a deadline as an answer.
func TestIsVCenterFault(t *testing.T) {
	t.Parallel()
	refused := &url.Error{Op: "Post", URL: "https://vc/sdk", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	assert.True(t, IsVCenterFault(vcenter.Classify(fmt.Errorf("clone: %w", taskFault(&types.FileNotFound{})))))
	assert.True(t, IsVCenterFault(vcenter.Classify(taskFault(&types.DuplicateName{}))))
	assert.False(t, IsVCenterFault(vcenter.Classify(fmt.Errorf("clone: %w", context.DeadlineExceeded))))
	assert.False(t, IsVCenterFault(vcenter.Classify(refused)))
	assert.False(t, IsVCenterFault(nil))
}
