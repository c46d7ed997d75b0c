package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/types"
)

// cloneVM clones templateName into a new VM vmName carrying annot (IP
// allocated and recorded in annot when a range is configured) with the
// flavor applied, powered on. On failure a half-made VM is marked for
// deletion; the IP reservation is released at once when no clone was
// started or vCenter answered a fault, and kept until it expires (or the
// inventory shows the IP) when the clone's outcome is unknown: vCenter may
// still create the VM holding that IP.
func (h *HatcheryVSphere) cloneVM(ctx context.Context, templateName, vmName string, annot *inventory.Annotation, flavor *config.Flavor) (types.ManagedObjectReference, error) {
	return h.cloneVMBoot(ctx, templateName, vmName, annot, flavor, nil)
}

// cloneVMBoot is cloneVM; a non-nil boot makes a cloud-init clone
// (prepareCloneSpecBoot).
func (h *HatcheryVSphere) cloneVMBoot(ctx context.Context, templateName, vmName string, annot *inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot) (types.ManagedObjectReference, error) {
	if annot == nil {
		return types.ManagedObjectReference{}, fmt.Errorf("clone %q from template %q: no annotation", vmName, templateName)
	}
	// Cleanup leaves a name being cloned alone: the VM may not be in the
	// inventory yet. A warm-pool VM is already Provisioning: it stays so.
	if h.life.Move(vmName, lifecycle.Gone, lifecycle.Cloning) == nil {
		// Refused when the clone failed and marked the name.
		defer func() { _ = h.life.Move(vmName, lifecycle.Cloning, lifecycle.Gone) }()
	}
	if annot.Created.IsZero() {
		annot.Created = h.now().UTC()
	}
	leased := ""
	needIP := h.ips.Enabled() && annot.IPAddress == ""
	var vms []inventory.VM
	if _, listing := h.inv.(inventory.Listing); needIP || !listing {
		// A shared snapshot costs no round trip: it also gives the
		// template's reference (a lookup by name walks the VM folder).
		var err error
		if vms, err = h.inv.VMs(ctx); err != nil {
			return types.ManagedObjectReference{}, fmt.Errorf("clone %q from template %q: list vms: %w", vmName, templateName, err)
		}
	}
	if needIP {
		// Read the inventory first, then pick under the pool's lock only.
		lease, err := h.ips.Reserve(ctx, h.indexOf(vms).Used, vmName)
		if err != nil {
			return types.ManagedObjectReference{}, fmt.Errorf("clone %q from template %q: reserve ip: %w", vmName, templateName, err)
		}
		leased = lease.IP
		annot.IPAddress = lease.IP
		h.log.Info("ip reserved", logkey.VM, vmName, logkey.IP, lease.IP)
	}
	// fail cleans up after a failed step. created: a VM of that name may
	// exist (it is marked for deletion); unknown: vCenter may still create
	// it, so its IP stays reserved.
	fail := func(step string, err error, created, unknown bool) (types.ManagedObjectReference, error) {
		switch {
		case leased != "" && unknown:
			h.log.Info("ip kept reserved", logkey.VM, vmName, logkey.IP, leased, logkey.Detail, "clone outcome unknown: "+step)
		case leased != "":
			h.ips.Release(leased, vmName)
			annot.IPAddress = ""
		}
		if created {
			h.markToDelete(vmName)
		}
		if fault.Is(err, &types.DuplicateName{}) {
			// The name is taken: for a pool slot, by another instance
			// of this hatchery (docs/high-availability.md); the caller
			// decides.
			h.log.Debug("clone refused: name taken", logkey.VM, vmName, logkey.Model, templateName, logkey.Detail, step)
		} else {
			h.log.Warn("clone failed", logkey.VM, vmName, logkey.Model, templateName, logkey.Detail, step)
		}
		return types.ManagedObjectReference{}, fmt.Errorf("clone %q from template %q: %s: %w", vmName, templateName, step, err)
	}

	template, err := h.loadTemplate(ctx, vms, templateName)
	if err != nil {
		return fail("load template", markTemplateFault(err), false, false)
	}
	spec, err := h.prepareCloneSpecBoot(ctx, template, annot, flavor, boot)
	if err != nil {
		h.tmplDevs.forget(template.Ref)
		return fail("prepare clone spec", err, false, false)
	}
	folder, err := h.vs.LoadFolder(ctx)
	if err != nil {
		return fail("load folder", err, false, false)
	}
	markStage(ctx, StageBookToClone)
	ref, err := h.vs.CloneVirtualMachine(ctx, template.Ref, folder, vmName, spec)
	h.inv.Invalidate()
	if err != nil {
		// The template may have changed under its cached device list.
		h.tmplDevs.forget(template.Ref)
		// A failed clone task may leave a half-made VM behind (it carries
		// our annotation): the cleanup destroys it. A name already taken
		// is someone else's VM: never marked.
		return fail("clone", markTemplateFault(err), !fault.Is(err, &types.DuplicateName{}), !isVCenterFault(err))
	}
	if ref == nil {
		// vCenter reported success: the VM probably exists with its IP.
		return fail("clone", errors.New("no reference returned"), true, true)
	}
	markStage(ctx, StageClone)
	h.log.Info("vm cloned", logkey.VM, vmName, logkey.Model, templateName, logkey.Flavor, flavorName(flavor), logkey.IP, annot.IPAddress)
	return *ref, nil
}

// isVCenterFault tells whether err carries a fault vCenter answered (a
// failed task's fault or a SOAP fault): the operation's outcome is known.
// Anything else (the task wait timed out, ctx ended, the connection
// failed) leaves it unknown: the task may still run on vCenter.
func isVCenterFault(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var f types.BaseMethodFault
	_, ok := fault.As(err, &f)
	return ok
}

// loadTemplate returns the template named name: from vms when it is there
// (no round trip; a template recreated since the snapshot fails the clone
// with a not-found fault and the job is retried), else looked up by name.
func (h *HatcheryVSphere) loadTemplate(ctx context.Context, vms []inventory.VM, name string) (templateRef, error) {
	for _, v := range vms {
		if v.Name == name && v.Template && v.Ref.Value != "" {
			return templateRef{Ref: v.Ref, Name: name}, nil
		}
	}
	ref, err := h.vs.LoadVirtualMachine(ctx, name)
	if err != nil {
		return templateRef{}, err
	}
	return templateRef{Ref: ref, Name: name}, nil
}

// templateRef is a template's reference and the name errors and logs give
// it (a reference carries no name).
type templateRef struct {
	Ref  types.ManagedObjectReference
	Name string
}

// prepareCloneSpec builds the clone specification (docs/architecture.md, docs/flavors-and-capacity.md):
// the template's first NIC moved to the configured network, placement in
// the configured pool and datastore as a linked clone, Linux customization
// (hostname, fixed IP or DHCP), the annotation and its mirror, the flavor's
// CPU/RAM/disk, tools after power on, powered on.
func (h *HatcheryVSphere) prepareCloneSpec(ctx context.Context, template templateRef, annot *inventory.Annotation, flavor *config.Flavor) (*types.VirtualMachineCloneSpec, error) {
	return h.prepareCloneSpecBoot(ctx, template, annot, flavor, nil)
}

// prepareCloneSpecBoot is prepareCloneSpec; with a non-nil boot the clone
// has no guest customization: its guestinfo carries the cloud-init
// metadata (hostname, static IP plan) and userdata (docs/cloud-init.md).
func (h *HatcheryVSphere) prepareCloneSpecBoot(ctx context.Context, template templateRef, annot *inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot) (*types.VirtualMachineCloneSpec, error) {
	tname := template.Name
	if annot == nil {
		return nil, fmt.Errorf("clone spec from template %q: no annotation", tname)
	}
	tinfo, err := h.tmplDevs.load(ctx, template.Ref, h.loadTemplateInfo)
	if err != nil {
		return nil, fmt.Errorf("load devices of template %q: %w", tname, err)
	}
	devices := tinfo.Devices
	cards := devices.SelectByType((*types.VirtualEthernetCard)(nil))
	if len(cards) == 0 {
		return nil, fmt.Errorf("template %q has no network card: a worker template needs one", tname)
	}
	first, ok := cards[0].(types.BaseVirtualEthernetCard)
	if !ok {
		return nil, fmt.Errorf("template %q: first network card is not an ethernet card", tname)
	}
	if err := h.vs.SetupEthernetCard(ctx, first.GetVirtualEthernetCard(), h.cfg.CardName, h.cfg.NetworkString); err != nil {
		return nil, fmt.Errorf("set up network card of template %q on network %q: %w", tname, h.cfg.NetworkString, err)
	}
	pool, err := h.vs.LoadResourcePool(ctx)
	if err != nil {
		return nil, fmt.Errorf("load resource pool %q: %w", h.cfg.ResourcePoolString, err)
	}
	ds, err := h.vs.LoadDatastore(ctx, h.cfg.DatastoreString)
	if err != nil {
		return nil, fmt.Errorf("load datastore %q: %w", h.cfg.DatastoreString, err)
	}

	// One adapter mapping per NIC of the template (vSphere refuses a
	// mismatch): the first gets the static IP when one was allocated, every
	// other NIC, and the first without an IP range, DHCP.
	nics := make([]types.CustomizationAdapterMapping, len(cards))
	global := types.CustomizationGlobalIPSettings{}
	for i := range nics {
		nics[i].Adapter.Ip = &types.CustomizationDhcpIpGenerator{}
	}
	var lease *ippool.Lease
	if annot.IPAddress != "" {
		l, ok := h.ips.Lookup(annot.IPAddress)
		if !ok {
			return nil, fmt.Errorf("ip %s of vm %q is in no configured range", annot.IPAddress, annot.WorkerName)
		}
		lease = &l
		nics[0].Adapter = types.CustomizationIPSettings{
			Ip:            &types.CustomizationFixedIp{IpAddress: lease.IP},
			SubnetMask:    lease.SubnetMask,
			DnsServerList: lease.DNS,
		}
		if lease.Gateway != "" {
			nics[0].Adapter.Gateway = []string{lease.Gateway}
		}
		global.DnsServerList = lease.DNS
	}
	hostname := sanitizeHostname(annot.WorkerName)
	if hostname == "" {
		return nil, fmt.Errorf("clone spec from template %q: worker name %q gives no valid hostname", tname, annot.WorkerName)
	}

	config := &types.VirtualMachineConfigSpec{
		DeviceChange: []types.BaseVirtualDeviceConfigSpec{
			&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: cards[0]},
		},
		Tools: &types.ToolsConfigInfo{AfterPowerOn: types.NewBool(true)},
	}
	annot.ApplyTo(config)
	if err := applyFlavor(config, flavor, devices); err != nil {
		return nil, fmt.Errorf("apply flavor %q to clone of template %q: %w", flavorName(flavor), tname, err)
	}

	mode := decideCloneMode(tinfo, flavor, h.cfg.LinkedCloneSnapshot)
	h.logCloneMode(template, annot, flavor, mode)
	diskMove := types.VirtualMachineRelocateDiskMoveOptionsMoveChildMostDiskBacking
	if mode.Mode == CloneModeLinked {
		diskMove = types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking
	}
	poolRef, dsRef := pool.Reference(), ds.Reference()
	spec := &types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{
			Pool:         &poolRef,
			Datastore:    &dsRef,
			DiskMoveType: string(diskMove),
		},
		Snapshot: mode.Snapshot,
		Customization: &types.CustomizationSpec{
			Identity: &types.CustomizationLinuxPrep{
				HostName: &types.CustomizationFixedName{Name: hostname},
			},
			GlobalIPSettings: global,
			NicSettingMap:    nics,
		},
		Config:   config,
		PowerOn:  true,
		Template: false,
	}
	if boot != nil {
		opts, err := cloudinit.Options(h.instanceID(annot.WorkerName), hostname, cloudInitAddress(lease), *boot)
		if err != nil {
			return nil, fmt.Errorf("cloud-init guestinfo of clone %q of template %q: %w", annot.WorkerName, tname, err)
		}
		config.ExtraConfig = append(config.ExtraConfig, opts...)
		// cloud-init configures hostname and network from the metadata;
		// a customization would race it.
		spec.Customization = nil
	}
	return spec, nil
}

// instanceID is a cloud-init instance id new for every worker: the VM name
// and the time, so that a reused (claimed) VM runs its userdata again.
func (h *HatcheryVSphere) instanceID(vmName string) string {
	return vmName + "-" + strconv.FormatInt(h.now().UnixNano(), 36)
}

// maxHostnameLen is the DNS label limit a Linux hostname must respect.
const maxHostnameLen = 63

// sanitizeHostname turns a VM name into a valid hostname label: lower
// case letters, digits and dashes, no leading or trailing dash, at most 63
// characters.
func sanitizeHostname(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > maxHostnameLen {
		s = strings.TrimRight(s[:maxHostnameLen], "-")
	}
	return s
}

// flavorName is the flavor's name, "" for none.
func flavorName(f *config.Flavor) string {
	if f == nil {
		return ""
	}
	return f.Name
}
