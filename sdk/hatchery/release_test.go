package hatchery

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
)

func TestReleaseRetried(t *testing.T) {
	t.Parallel()
	serverErr := &cdsclient.APIError{Status: 503}
	notBooked := &cdsclient.APIError{Status: 400, ID: 135, Message: "Job already released"}
	forbidden := &cdsclient.APIError{Status: 403, ID: 11}
	cases := []struct {
		name      string
		answers   []error
		wantCalls int
		wantErr   error
	}{
		{name: "first try", answers: []error{nil}, wantCalls: 1},
		{name: "5xx burst then ok", answers: []error{serverErr, serverErr, nil}, wantCalls: 3},
		{name: "unreachable then ok", answers: []error{errors.New("connection refused"), nil}, wantCalls: 2},
		{name: "4xx is final", answers: []error{forbidden}, wantCalls: 1, wantErr: forbidden},
		// The API dropped the booking: the job is not ours any more, the
		// release is done, and the caller logs no failure.
		{name: "already released is done", answers: []error{notBooked, nil}, wantCalls: 1},
		{name: "gives up", answers: []error{serverErr, serverErr, serverErr, serverErr, serverErr, nil}, wantCalls: releaseAttempts, wantErr: serverErr},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &Framework{cfg: CommonConfiguration{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			f.cfg.API.RequestTimeout = 1
			calls := 0
			err := f.releaseRetried(context.Background(), "42", func(context.Context) error {
				calls++
				return tc.answers[calls-1]
			})
			require.Equal(t, tc.wantCalls, calls)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
		})
	}
}
