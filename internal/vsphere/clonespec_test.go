package vsphere

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

func TestPrepareCloneSpec(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cfg       func(*config.Config)
		nics      int
		ip        string
		wantFixed bool
		wantMask  string
		wantGW    string
		wantDNS   []string
	}{
		{name: "dhcp without ip range", nics: 1},
		{name: "dhcp with two nics", nics: 2},
		{
			name: "fixed ip from iprange",
			cfg: func(c *config.Config) {
				c.IPRange, c.Gateway, c.DNS, c.SubnetMask = "10.0.0.10/24", "10.0.0.1", "10.0.0.2, 10.0.0.3", "255.255.255.0"
			},
			nics: 1, ip: "10.0.0.10", wantFixed: true, wantMask: "255.255.255.0", wantGW: "10.0.0.1", wantDNS: []string{"10.0.0.2", "10.0.0.3"},
		},
		{
			name: "fixed ip from a [[networks]] entry uses its own settings",
			cfg: func(c *config.Config) {
				c.IPRange, c.Gateway, c.SubnetMask = "10.0.0.10/30", "10.0.0.1", "255.255.255.0"
				c.Networks = []config.Network{{IPRange: "172.16.4.20/22", Gateway: "172.16.4.1", DNS: "172.16.4.2"}}
			},
			nics: 2, ip: "172.16.4.21", wantFixed: true, wantMask: "255.255.252.0", wantGW: "172.16.4.1", wantDNS: []string{"172.16.4.2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := spConfig()
			if tt.cfg != nil {
				tt.cfg(cfg)
			}
			f := newSpFixture(t, cfg)
			tmpl := spRef("VirtualMachine", "vm-tmpl")
			f.expectCloneSpecCalls(tmpl, tt.nics)
			annot := &inventory.Annotation{HatcheryName: spHatchery, WorkerName: "Worker_One.x", JobID: "42", IPAddress: tt.ip}

			req, err := f.h.clones.Request(context.Background(), f.h.log, clonespec.Template{Ref: tmpl, Name: tmpl.Value}, annot, nil, nil)
			require.NoError(t, err)
			spec := spSpec(t, req, tt.nics)

			// NIC edit on the configured network (the adapter sets its
			// backing: vcenter's TestCloneRequestOnVcsim).
			assert.Equal(t, &vctypes.CloneNetwork{Name: "VM Network", CardType: "vmxnet3"}, req.Network)
			require.Len(t, spec.Config.DeviceChange, 1)
			dc := spec.Config.DeviceChange[0].GetVirtualDeviceConfigSpec()
			assert.Equal(t, types.VirtualDeviceConfigSpecOperationEdit, dc.Operation)
			card, ok := dc.Device.(types.BaseVirtualEthernetCard)
			require.True(t, ok, "edited device is an ethernet card")
			assert.Equal(t, int32(4000), card.GetVirtualEthernetCard().Key)

			// Placement: linked clone in the configured pool and datastore.
			assert.Equal(t, vim.MORef(spPoolRef), *spec.Location.Pool)
			assert.Equal(t, vim.MORef(spDSRef), *spec.Location.Datastore)
			assert.Equal(t, string(types.VirtualMachineRelocateDiskMoveOptionsMoveChildMostDiskBacking), spec.Location.DiskMoveType)
			assert.True(t, spec.PowerOn)
			assert.False(t, spec.Template)
			require.NotNil(t, spec.Config.Tools)
			assert.True(t, *spec.Config.Tools.AfterPowerOn)

			// Annotation and its mirror.
			got, err := inventory.AnnotationFromVM(spec.Config.Annotation, nil)
			require.NoError(t, err)
			assert.Equal(t, *annot, *got)
			mirror, err := inventory.AnnotationFromVM("", vim.OptionsOf(spec.Config.ExtraConfig))
			require.NoError(t, err)
			assert.Equal(t, *annot, *mirror)

			// Customization.
			prep, ok := spec.Customization.Identity.(*types.CustomizationLinuxPrep)
			require.True(t, ok)
			assert.Equal(t, "worker-one-x", prep.HostName.(*types.CustomizationFixedName).Name)
			require.Len(t, spec.Customization.NicSettingMap, tt.nics)
			for i, m := range spec.Customization.NicSettingMap {
				if i == 0 && tt.wantFixed {
					fixed, ok := m.Adapter.Ip.(*types.CustomizationFixedIp)
					require.True(t, ok, "first nic has a fixed ip")
					assert.Equal(t, tt.ip, fixed.IpAddress)
					assert.Equal(t, tt.wantMask, m.Adapter.SubnetMask)
					assert.Equal(t, []string{tt.wantGW}, m.Adapter.Gateway)
					assert.Equal(t, tt.wantDNS, m.Adapter.DnsServerList)
					assert.Equal(t, tt.wantDNS, spec.Customization.GlobalIPSettings.DnsServerList)
					continue
				}
				_, dhcp := m.Adapter.Ip.(*types.CustomizationDhcpIpGenerator)
				assert.True(t, dhcp, "nic %d uses dhcp", i)
			}
		})
	}
}

func TestPrepareCloneSpecTemplateWithoutNIC(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	tmpl := spRef("VirtualMachine", "vm-tmpl")
	f.vs.EXPECT().LoadTemplate(gomock.Any(), tmpl).Return(spTemplateMO(spDevices(0), nil), nil)
	_, err := f.h.clones.Request(context.Background(), f.h.log, clonespec.Template{Ref: tmpl, Name: tmpl.Value}, &inventory.Annotation{HatcheryName: spHatchery, WorkerName: "w"}, nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has no network card")
}

func TestCloneVM(t *testing.T) {
	t.Parallel()
	taskFault := task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{Fault: &types.InsufficientResourcesFault{}, LocalizedMessage: "insufficient resources"}}
	tests := []struct {
		name     string
		cloneErr error
		// keepIP: the clone's outcome is unknown, vCenter may still
		// create the VM holding the IP.
		keepIP bool
	}{
		{name: "success"},
		{name: "task fault", cloneErr: fmt.Errorf("clone: %w", taskFault)},
		{name: "soap fault", cloneErr: soap.WrapVimFault(&types.InvalidState{})},
		{name: "task wait timed out", cloneErr: fmt.Errorf("wait for task task-1: %w", context.DeadlineExceeded), keepIP: true},
		{name: "ctx cancelled", cloneErr: fmt.Errorf("wait for task task-1: %w", context.Canceled), keepIP: true},
		{name: "connection lost", cloneErr: errors.New("read task task-1: connection reset by peer"), keepIP: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := spConfig()
			cfg.IPRange, cfg.Gateway, cfg.SubnetMask = "10.0.0.10/24", "10.0.0.1", "255.255.255.0"
			f := newSpFixture(t, cfg)
			// 10.0.0.10 is held by a powered-off VM's annotation.
			f.inv.Add(inventory.VM{Name: "off", PowerState: vctypes.PoweredOff, Annotation: &inventory.Annotation{HatcheryName: "other", IPAddress: "10.0.0.10"}})
			tmpl := spRef("VirtualMachine", "vm-tmpl")
			f.vs.EXPECT().LoadVirtualMachine(gomock.Any(), "debian12").Return(tmpl, nil)
			f.expectCloneSpecCalls(tmpl, 1)
			f.vs.EXPECT().LoadFolder(gomock.Any()).Return(spFolderRef, nil)
			newRef := spRef("VirtualMachine", "vm-new")
			f.vs.EXPECT().CloneVirtualMachine(gomock.Any(), spClone{tmpl: tmpl, name: "worker-1"}).
				DoAndReturn(func(_ context.Context, req vctypes.Clone) (vctypes.Ref, error) {
					assert.True(t, strings.Contains(req.Record.Notes, `"ip_address":"10.0.0.11"`))
					if tt.cloneErr != nil {
						return vctypes.Ref{}, tt.cloneErr
					}
					return newRef, nil
				})
			if tt.cloneErr == nil {
			}
			annot := &inventory.Annotation{HatcheryName: spHatchery, WorkerName: "worker-1"}
			vm, err := f.h.cloneVM(context.Background(), modelref.Template{Name: "debian12"}, "worker-1", annot, nil)
			used, _ := f.h.ips.Counts(nil)
			if tt.cloneErr != nil {
				require.ErrorIs(t, err, tt.cloneErr)
				assert.Contains(t, err.Error(), `clone "worker-1" from template "debian12"`)
				assert.True(t, isMarked(f.h, "worker-1"), "half-made vm marked for deletion")
				assert.False(t, f.h.life.In("worker-1", lifecycle.Cloning), "clone no longer in flight")
				if tt.keepIP {
					assert.Equal(t, 1, used, "outcome unknown: ip kept reserved")
					used, _ = f.h.ips.Counts(inventory.UsedBy([]inventory.VM{{Name: "worker-1", Annotation: &inventory.Annotation{IPAddress: "10.0.0.11"}}}))
					assert.Equal(t, 1, used, "the late vm holds the reserved ip")
					f.clock.Advance(ippool.ReservationTTL)
					used, _ = f.h.ips.Counts(nil)
					assert.Equal(t, 0, used, "the reservation expires")
					return
				}
				assert.Equal(t, 0, used, "vcenter answered a fault: ip reservation released")
				assert.Empty(t, annot.IPAddress)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, newRef, vm)
			assert.Equal(t, "10.0.0.11", annot.IPAddress)
			assert.Equal(t, 1, used, "ip stays reserved until the inventory shows the vm")
			assert.False(t, annot.Created.IsZero())
			assert.Positive(t, f.inv.Invalidations())
		})
	}
}

// TestCloneCutByTheShutdownIsNoWarning: a clone whose task wait ends
// because the shutdown cancelled its context cleans up as any clone of
// unknown outcome (the name marked, the address kept reserved) but logs
// why at INFO: a healthy stop logs no WARN.
func TestCloneCutByTheShutdownIsNoWarning(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	var logs testutil.SyncBuffer
	f.h.log = slog.New(slog.NewTextHandler(&logs, nil))
	tmpl := spRef("VirtualMachine", "vm-tmpl")
	f.vs.EXPECT().LoadVirtualMachine(gomock.Any(), "debian12").Return(tmpl, nil)
	f.expectCloneSpecCalls(tmpl, 1)
	f.vs.EXPECT().LoadFolder(gomock.Any()).Return(spFolderRef, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.vs.EXPECT().CloneVirtualMachine(gomock.Any(), spClone{tmpl: tmpl, name: "worker-1"}).
		DoAndReturn(func(context.Context, vctypes.Clone) (vctypes.Ref, error) {
			cancel() // SIGTERM while the clone task runs
			return vctypes.Ref{}, fmt.Errorf("wait for task task-1: %w", context.Canceled)
		})

	_, err := f.h.cloneVM(ctx, modelref.Template{Name: "debian12"}, "worker-1", &inventory.Annotation{HatcheryName: spHatchery, WorkerName: "worker-1"}, nil)

	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, isMarked(f.h, "worker-1"), "half-made vm marked for deletion")
	assert.NotContains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "clone cut by the shutdown")
}
