package vcenter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// attributeTimeout bounds one attribute call (the folder's lookup, the
// field definitions' read, the definition's creation and the value's
// read or write). They are metadata requests a healthy vCenter answers in
// well under a second; what the hatchery keeps there is not needed to
// run (the warm pools' learnt demand, docs/warm-pools.md), so a vCenter
// that does not answer fails the call within this bound rather than
// holding the warm pool's pass.
const attributeTimeout = 30 * time.Second

// MaxAttributeValue is the largest value SetFolderAttribute writes, in
// bytes. A custom attribute is read with its object by every client that
// shows it: the hatchery keeps it small (a pool's learnt demand is about
// 1.9 KB, docs/warm-pools.md, "After a restart").
const MaxAttributeValue = 4096

// ErrAttributeTooLarge is wrapped by SetFolderAttribute's error for a
// value longer than MaxAttributeValue: nothing was sent.
var ErrAttributeTooLarge = errors.New("attribute value too large")

// folderFieldType is the managed object type of the hatchery's custom
// fields: they apply to folders only, so they show on no VM.
const folderFieldType = "Folder"

// FolderAttribute reads the custom attribute name of the folder new VMs
// go to (LoadFolder): its value and true, or false when the field is not
// defined or the folder has no value for it. Two requests after the
// folder's lookup (cached): the field definitions, then the folder's
// customValue. Its error names the attribute and is classified.
func (c *Client) FolderAttribute(ctx context.Context, name string) (string, bool, error) {
	if err := c.notConnected(); err != nil {
		return "", false, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.scaled(attributeTimeout))
	defer cancel()
	folder, err := c.LoadFolder(ctx)
	if err != nil {
		return "", false, fmt.Errorf("read folder attribute %q: %w", name, Classify(err))
	}
	m, err := object.GetCustomFieldsManager(c.vim)
	if err != nil {
		return "", false, fmt.Errorf("read folder attribute %q: %w", name, err)
	}
	key, ok, err := folderFieldKey(ctx, m, name)
	if err != nil || !ok {
		return "", false, err
	}
	var f mo.Folder
	if err := c.pc.RetrieveOne(ctx, vim.MORef(folder), []string{"customValue"}, &f); err != nil {
		return "", false, fmt.Errorf("read folder attribute %q of %s: %w", name, folder.Value, Classify(err))
	}
	for _, v := range f.CustomValue {
		if sv, isString := v.(*types.CustomFieldStringValue); isString && sv.Key == key {
			return sv.Value, true, nil
		}
	}
	return "", false, nil
}

// SetFolderAttribute sets the custom attribute name of the folder new VMs
// go to (LoadFolder) to value, defining the field (for folders only) when
// it is not defined yet; another process defining it at the same moment
// is not an error (its definition is used). The last writer wins. A value
// longer than MaxAttributeValue is refused before any request
// (ErrAttributeTooLarge). It writes on that folder only, never on a VM.
func (c *Client) SetFolderAttribute(ctx context.Context, name, value string) error {
	if len(value) > MaxAttributeValue {
		return fmt.Errorf("set folder attribute %q: %d bytes, at most %d: %w", name, len(value), MaxAttributeValue, ErrAttributeTooLarge)
	}
	if err := c.notConnected(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.scaled(attributeTimeout))
	defer cancel()
	folder, err := c.LoadFolder(ctx)
	if err != nil {
		return fmt.Errorf("set folder attribute %q: %w", name, Classify(err))
	}
	m, err := object.GetCustomFieldsManager(c.vim)
	if err != nil {
		return fmt.Errorf("set folder attribute %q: %w", name, err)
	}
	key, ok, err := folderFieldKey(ctx, m, name)
	if err != nil {
		return err
	}
	if !ok {
		def, err := m.Add(ctx, name, folderFieldType, nil, nil)
		switch {
		case err == nil:
			key = def.Key
		case vim.FaultKindOf(err) == vctypes.FaultDuplicateName:
			// Another process defined it since our read.
			if key, ok, err = folderFieldKey(ctx, m, name); err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("define folder attribute %q: the name is taken by a field of another type: %w", name, Classify(err))
			}
		default:
			return fmt.Errorf("define folder attribute %q: %w", name, Classify(err))
		}
	}
	if err := m.Set(ctx, vim.MORef(folder), key, value); err != nil {
		return fmt.Errorf("set folder attribute %q of %s: %w", name, folder.Value, Classify(err))
	}
	return nil
}

// folderFieldKey is the key of the custom field name defined for folders
// (or for every type), false when there is none. One request.
func folderFieldKey(ctx context.Context, m *object.CustomFieldsManager, name string) (int32, bool, error) {
	defs, err := m.Field(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("read custom field definitions for %q: %w", name, Classify(err))
	}
	for _, d := range defs {
		if d.Name == name && (d.ManagedObjectType == folderFieldType || d.ManagedObjectType == "") {
			return d.Key, true, nil
		}
	}
	return 0, false, nil
}
