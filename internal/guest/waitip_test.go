package guest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// ipAnswer is an IPWaiter answering ip and err, recording the deadline it
// was asked under.
type ipAnswer struct {
	ip       string
	err      error
	deadline time.Time
}

func (a *ipAnswer) WaitForVirtualMachineIP(ctx context.Context, _ vctypes.Ref, _ string) (string, error) {
	a.deadline, _ = ctx.Deadline()
	return a.ip, a.err
}

// TestWaitIP: the guest's address is returned, bounded by the timeout
// given; with a static address expected, another one is an error, and a
// failed wait is returned as it is.
func TestWaitIP(t *testing.T) {
	t.Parallel()
	vm := vctypes.Ref{Type: "VirtualMachine", Value: "vm-1"}
	failed := errors.New("no answer")
	for _, tc := range []struct {
		name, expected string
		answer         ipAnswer
		want           string
		wantErr        string
		wantIs         error
	}{
		{name: "dhcp: any address", answer: ipAnswer{ip: "10.0.0.9"}, want: "10.0.0.9"},
		{name: "static: the expected address", expected: "10.0.0.5", answer: ipAnswer{ip: "10.0.0.5"}, want: "10.0.0.5"},
		{name: "static: another address", expected: "10.0.0.5", answer: ipAnswer{ip: "10.0.0.9"}, wantErr: "guest reports 10.0.0.9, expected 10.0.0.5"},
		{name: "the wait fails", expected: "10.0.0.5", answer: ipAnswer{err: failed}, wantIs: failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := tc.answer
			before := time.Now()
			ip, err := WaitIP(context.Background(), &a, vm, tc.expected, time.Hour)
			require.False(t, a.deadline.IsZero(), "the wait is bounded")
			assert.WithinRange(t, a.deadline, before.Add(time.Hour), time.Now().Add(time.Hour))
			switch {
			case tc.wantErr != "":
				require.EqualError(t, err, tc.wantErr)
				assert.Empty(t, ip)
			case tc.wantIs != nil:
				require.ErrorIs(t, err, tc.wantIs)
				assert.Empty(t, ip)
			default:
				require.NoError(t, err)
				assert.Equal(t, tc.want, ip)
			}
		})
	}
}
