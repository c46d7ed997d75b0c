package vsphere

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
)

// A hatchery signed in with one API version only must still see that
// version's workers: the other version's "no session" is not an outage.
func TestLoadAPIWorkersWithOneSession(t *testing.T) {
	t.Parallel()
	noSession := fmt.Errorf("GET /v2/worker: %w", cdsclient.ErrNoSession)
	cases := []struct {
		name    string
		cds     *cdsclienttest.Fake
		known   []string
		wantErr bool
	}{
		{name: "v1 only", cds: &cdsclienttest.Fake{V1Workers: []sdk.Worker{{Name: "w1"}}, V2WorkersErr: noSession}, known: []string{"w1"}},
		{name: "v2 only", cds: &cdsclienttest.Fake{V1WorkersErr: noSession, V2Workers: []sdk.V2Worker{{Name: "w2", Status: sdk.StatusDisabled}}}, known: []string{"w2"}},
		{name: "no session at all", cds: &cdsclienttest.Fake{V1WorkersErr: noSession, V2WorkersErr: noSession}, wantErr: true},
		{name: "v2 outage", cds: &cdsclienttest.Fake{V1Workers: []sdk.Worker{{Name: "w1"}}, V2WorkersErr: cdsclient.ErrServer}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &HatcheryVSphere{cds: warmAPI(tc.cds)}
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
