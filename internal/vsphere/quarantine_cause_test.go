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
		{"not connected", context.Background(), wrap(fmt.Errorf("%w (vc): still connecting", ErrNotConnected)), causeVCenter},
		{"inventory stale", context.Background(), wrap(ErrInventoryStale), causeVCenter},
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
