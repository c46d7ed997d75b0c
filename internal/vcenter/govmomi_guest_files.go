package vcenter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/vmware/govmomi/guest"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// guestFileTimeout bounds a read of a file in a guest: the lookup of the
// guest's file manager, the transfer's URL (InitiateFileTransferFromGuest),
// the VM's host for that URL, and the HTTPS GET of a small file from the
// host; or a file's deletion. A healthy vCenter and host answer each in
// well under a second; the files read are a program's few bytes of
// output.
const guestFileTimeout = 30 * time.Second

// ReadGuestFile reads the file path in the guest of vm with auth, the
// way vCenter hands a guest's files out: InitiateFileTransferFromGuest,
// then an HTTPS GET of the URL it gives, on the VM's host. At most
// maxBytes are read (the rest is left unread). A refused account is a
// vctypes.FaultInvalidGuestLogin, a vCenter without guest file transfers
// a vctypes.FaultNotSupported; the file stays in the guest
// (DeleteGuestFile). Bounded by guestFileTimeout. Neither the account
// nor the transfer's URL (it carries a ticket) is in an error.
func (c *Client) ReadGuestFile(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, path string, maxBytes int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, guestFileTimeout)
	defer cancel()
	b, err := c.readGuestFile(ctx, vim.MORef(vm), vim.GuestAuthOf(auth), path, maxBytes)
	return b, Classify(err)
}

// DeleteGuestFile deletes the file path in the guest of vm with auth
// (DeleteFileInGuest). Bounded by guestFileTimeout.
func (c *Client) DeleteGuestFile(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, path string) error {
	ctx, cancel := context.WithTimeout(ctx, guestFileTimeout)
	defer cancel()
	ref := vim.MORef(vm)
	fm, err := c.guestFileManager(ctx, ref)
	if err != nil {
		return Classify(err)
	}
	if err := fm.DeleteFile(ctx, vim.GuestAuthOf(auth), path); err != nil {
		return Classify(fmt.Errorf("delete %s in the guest of %q: %w", path, c.vmName(ref), err))
	}
	return nil
}

// guestFileManager is the guest file manager for vm, of this connection.
func (c *Client) guestFileManager(ctx context.Context, vm types.ManagedObjectReference) (*guest.FileManager, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	fm, err := guest.NewOperationsManager(c.vim, vm).FileManager(ctx)
	if err != nil {
		return nil, fmt.Errorf("find guest file manager for %q: %w", c.vmName(vm), err)
	}
	return fm, nil
}

func (c *Client) readGuestFile(ctx context.Context, vm types.ManagedObjectReference, auth types.BaseGuestAuthentication, path string, maxBytes int64) ([]byte, error) {
	fm, err := c.guestFileManager(ctx, vm)
	if err != nil {
		return nil, err
	}
	info, err := fm.InitiateFileTransferFromGuest(ctx, auth, path)
	if err != nil {
		return nil, fmt.Errorf("transfer %s from the guest of %q: %w", path, c.vmName(vm), err)
	}
	u, err := fm.TransferURL(ctx, info.Url)
	if err != nil {
		return nil, fmt.Errorf("transfer %s from the guest of %q: %w", path, c.vmName(vm), withoutURL(err))
	}
	res, err := c.vim.DownloadRequest(ctx, u, &soap.DefaultDownload)
	if err != nil {
		return nil, fmt.Errorf("download %s from the guest of %q: %w", path, c.vmName(vm), withoutURL(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download %s from the guest of %q: the host answered %s", path, c.vmName(vm), res.Status)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, maxBytes))
	if err != nil {
		return nil, fmt.Errorf("download %s from the guest of %q: %w", path, c.vmName(vm), withoutURL(err))
	}
	return b, nil
}

// withoutURL is err without the URL a *url.Error names: a guest file
// transfer's URL carries the ticket that opens the file.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
