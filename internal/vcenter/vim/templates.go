package vim

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// templateDevicesTTL bounds how long a template's device list is reused.
// Templates are not edited in place by the hatchery (a V1 registration
// makes a new template, with a new reference); an operator who converts a
// template to a VM, edits its hardware and converts it back is seen within
// this time, or at once when a clone from it fails (forget).
const templateDevicesTTL = 10 * time.Minute

// TemplateDevices memoises the device list and snapshots of templates by
// reference (a new snapshot is seen within templateDevicesTTL), so
// that a spawn decision does not read a device list that never changes
// (one RetrievePropertiesEx of config.hardware.device per clone without
// it): the template read (LoadTemplate) and the clone's specification
// (CloneVirtualMachine) share one read. Its mutex never spans a round
// trip.
type TemplateDevices struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[types.ManagedObjectReference]templateDevicesEntry
	// loading coalesces concurrent misses of one template (a burst of
	// clones of a template not read yet reads it once).
	loading Coalescer[types.ManagedObjectReference]
}

// TemplateInfo is one read of a template: its device list, for a clone's
// specification, and what the hatchery reads of it (TemplateOf).
type TemplateInfo struct {
	// Devices is the template's device list.
	Devices object.VirtualDeviceList
	// Template is its cards, disks and snapshots in the project's terms.
	Template vctypes.Template
}

// templateDevicesEntry is one cached template and when it expires.
type templateDevicesEntry struct {
	info    TemplateInfo
	expires time.Time
}

// NewTemplateDevices returns an empty cache reading the time from now.
func NewTemplateDevices(now func() time.Time) *TemplateDevices {
	if now == nil {
		now = time.Now
	}
	return &TemplateDevices{now: now, entries: map[types.ManagedObjectReference]templateDevicesEntry{}}
}

// Load returns the template's info (devices and snapshots) with a private
// copy of its device list: from the cache, else read through load and
// stored. The copy's devices are fresh shallow copies, so a caller that
// edits a device (a NIC's backing) never changes the cached list.
func (t *TemplateDevices) Load(ctx context.Context, template types.ManagedObjectReference, read func(context.Context, types.ManagedObjectReference) (TemplateInfo, error)) (TemplateInfo, error) {
	if t == nil {
		return read(ctx, template)
	}
	ref := template.Reference()
	if info, ok := t.cached(ref); ok {
		return info, nil
	}
	if wait, done := t.loading.Lead(ref); wait != nil {
		select {
		case <-ctx.Done():
			return TemplateInfo{}, fmt.Errorf("load template %q: %w", template.Value, ctx.Err())
		case <-wait:
		}
		if info, ok := t.cached(ref); ok {
			return info, nil
		}
		// The read in flight failed: read on our own.
	} else {
		defer done()
		// A read may have ended between the miss and the lead.
		if info, ok := t.cached(ref); ok {
			return info, nil
		}
	}
	info, err := read(ctx, template)
	if err != nil {
		return TemplateInfo{}, err
	}
	cached := info
	cached.Devices = copyDevices(info.Devices)
	t.mu.Lock()
	t.entries[ref] = templateDevicesEntry{info: cached, expires: t.now().Add(templateDevicesTTL)}
	t.mu.Unlock()
	return info, nil
}

// cached returns a live entry of ref with a private copy of its devices.
func (t *TemplateDevices) cached(ref types.ManagedObjectReference) (TemplateInfo, bool) {
	t.mu.Lock()
	e, ok := t.entries[ref]
	t.mu.Unlock()
	if !ok || !t.now().Before(e.expires) {
		return TemplateInfo{}, false
	}
	info := e.info
	info.Devices = copyDevices(e.info.Devices)
	return info, true
}

// Forget drops the template's cached devices (a clone from it failed).
func (t *TemplateDevices) Forget(template types.ManagedObjectReference) {
	if t == nil || template.Value == "" {
		return
	}
	t.mu.Lock()
	delete(t.entries, template.Reference())
	t.mu.Unlock()
}

// copyDevices returns a list of shallow copies of the devices: top-level
// fields (a NIC's Backing, a disk's capacity) of the copies can be
// assigned without touching the originals; nested pointers are shared and
// must be replaced, not edited in place.
func copyDevices(in object.VirtualDeviceList) object.VirtualDeviceList {
	out := make(object.VirtualDeviceList, len(in))
	for i, d := range in {
		v := reflect.ValueOf(d)
		if v.Kind() != reflect.Pointer || v.IsNil() {
			out[i] = d
			continue
		}
		c := reflect.New(v.Elem().Type())
		c.Elem().Set(v.Elem())
		cd, ok := c.Interface().(types.BaseVirtualDevice)
		if !ok {
			out[i] = d
			continue
		}
		out[i] = cd
	}
	return out
}
