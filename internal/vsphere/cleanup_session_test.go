package vsphere

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
)

// A hatchery signed in with one API version only must still see that
// version's workers: the other version's "no session" is not an outage.
func TestLoadAPIWorkersWithOneSession(t *testing.T) {
	t.Parallel()
	noSession := fmt.Errorf("GET /v2/worker: %w", cdsclient.ErrNoSession)
	cases := []struct {
		name    string
		cds     *warmCDS
		known   []string
		wantErr bool
	}{
		{name: "v1 only", cds: &warmCDS{v1: []sdk.Worker{{Name: "w1"}}, v2Err: noSession}, known: []string{"w1"}},
		{name: "v2 only", cds: &warmCDS{v1Err: noSession, v2: []sdk.V2Worker{{Name: "w2", Status: sdk.StatusDisabled}}}, known: []string{"w2"}},
		{name: "no session at all", cds: &warmCDS{v1Err: noSession, v2Err: noSession}, wantErr: true},
		{name: "v2 outage", cds: &warmCDS{v1: []sdk.Worker{{Name: "w1"}}, v2Err: cdsclient.ErrServer}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &HatcheryVSphere{cds: tc.cds}
			h.cfg.Store(warmConfig())
			w, err := h.loadAPIWorkers(context.Background())
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Len(t, w.known, len(tc.known))
			for _, n := range tc.known {
				require.True(t, w.known[n], n)
			}
		})
	}
}
