package vsphere

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory/inventorytest"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/mock_vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// TestNotReadyUntilFirstConnection: before vCenter first answers
// (Options.Ready open) the framework's calls answer "not ready" without
// reading the inventory and without a warning; once ready they read it.
func TestNotReadyUntilFirstConnection(t *testing.T) {
	t.Parallel()
	var logs testutil.SyncBuffer
	ready := make(chan struct{})
	inv := inventorytest.New()
	inv.SetErr(errors.New("vm inventory is stale: no successful refresh yet"))
	h, err := New(Options{
		Config:    spConfig(),
		Client:    mock_vsphere.NewMockPort(gomock.NewController(t)),
		Inventory: inv,
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
		Ready:     ready,
	})
	require.NoError(t, err)
	ctx := context.Background()
	model := &sdk.Model{Name: "debian12-v1", Group: &sdk.Group{Name: "shared.infra"}}

	_, err = h.WorkersStarted(ctx)
	require.ErrorIs(t, err, hatchery.ErrNotReady)
	assert.False(t, h.NeedRegistration(ctx, model))
	assert.NotContains(t, logs.String(), "level=WARN", "waiting for the first connection is no fault")
	assert.Contains(t, logs.String(), "model registration check deferred")

	close(ready)
	_, err = h.WorkersStarted(ctx)
	require.Error(t, err)
	assert.False(t, errors.Is(err, hatchery.ErrNotReady), "once ready, a failing inventory is a real error")
	assert.False(t, h.NeedRegistration(ctx, model))
	assert.True(t, strings.Contains(logs.String(), "level=WARN msg=\"cannot check model registration\""), "a real problem still warns:\n%s", logs.String())
}
