package hatchery

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
)

func TestReleaseRetried(t *testing.T) {
	t.Parallel()
	serverErr := &cdsclient.APIError{Status: 503}
	notBooked := &cdsclient.APIError{Status: 400, ID: 135}
	cases := []struct {
		name      string
		answers   []error
		wantCalls int
		wantErr   error
	}{
		{name: "first try", answers: []error{nil}, wantCalls: 1},
		{name: "5xx burst then ok", answers: []error{serverErr, serverErr, nil}, wantCalls: 3},
		{name: "unreachable then ok", answers: []error{errors.New("connection refused"), nil}, wantCalls: 2},
		{name: "4xx is final", answers: []error{notBooked}, wantCalls: 1, wantErr: notBooked},
		{name: "gives up", answers: []error{serverErr, serverErr, serverErr, serverErr, serverErr, nil}, wantCalls: releaseAttempts, wantErr: serverErr},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &Framework{cfg: CommonConfiguration{}}
			f.cfg.API.RequestTimeout = 1
			calls := 0
			err := f.releaseRetried(context.Background(), func(context.Context) error {
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
