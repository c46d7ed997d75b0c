package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/mock_vsphere"
)

// TestInventoryWaitsQuietlyForFirstConnection: a refresh failing because
// vCenter was never reached logs at info; after a first listing, a failing
// refresh warns.
func TestInventoryWaitsQuietlyForFirstConnection(t *testing.T) {
	t.Parallel()
	var logs testutil.SyncBuffer
	vs := mock_vsphere.NewMockPort(gomock.NewController(t))
	inv := NewShared(vs, time.Minute, 0, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()

	vs.EXPECT().ListVirtualMachines(gomock.Any()).Return(nil, fmt.Errorf("%w (vc): still connecting", vctypes.ErrNotConnected))
	inv.refresh(ctx)
	assert.NotContains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "vm inventory waits for the first vcenter connection")

	// Connected, but the listing fails: a real problem, even though the
	// previous (quiet) attempt failed too.
	vs.EXPECT().ListVirtualMachines(gomock.Any()).Return(nil, errors.New("permission denied"))
	inv.refresh(ctx)
	assert.Contains(t, logs.String(), `level=WARN msg="vm inventory refresh failed; keeping the last snapshot" err="permission denied"`)

	vs.EXPECT().ListVirtualMachines(gomock.Any()).Return(nil, nil)
	inv.refresh(ctx)
	vs.EXPECT().ListVirtualMachines(gomock.Any()).Return(nil, fmt.Errorf("%w (vc): connection refused", vctypes.ErrNotConnected))
	inv.refresh(ctx)
	assert.Contains(t, logs.String(), "level=WARN msg=\"vm inventory refresh failed; keeping the last snapshot\" err=\"vcenter not connected (vc): connection refused\"", "losing vCenter after the start is a real problem")
}

// TestInventoryRefreshCutByShutdownIsQuiet: a refresh that fails because
// Run's context ended (the daemon stopping) logs no WARN, and does not hide
// the next real failure.
func TestInventoryRefreshCutByShutdownIsQuiet(t *testing.T) {
	t.Parallel()
	var logs testutil.SyncBuffer
	vs := mock_vsphere.NewMockPort(gomock.NewController(t))
	inv := NewShared(vs, time.Minute, 0, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ctx := context.Background()

	vs.EXPECT().ListVirtualMachines(gomock.Any()).Return(nil, nil)
	inv.refresh(ctx)
	vs.EXPECT().ListVirtualMachines(gomock.Any()).Return(nil, fmt.Errorf("list vms: Post \"https://vc/sdk\": %w", context.Canceled))
	inv.refresh(ctx)
	assert.NotContains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), `level=DEBUG msg="vm inventory refresh cut by shutdown"`)

	vs.EXPECT().ListVirtualMachines(gomock.Any()).Return(nil, errors.New("permission denied"))
	inv.refresh(ctx)
	assert.Contains(t, logs.String(), `level=WARN msg="vm inventory refresh failed; keeping the last snapshot" err="permission denied"`)
}
