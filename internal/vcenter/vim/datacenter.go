package vim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
)

// DatacenterNotFoundError is the error of a connection whose login worked
// but whose datacenter (datacenterString) does not exist: a configuration
// mistake, not an unreachable vCenter. Existing lists the datacenters the
// user can see, for the message.
type DatacenterNotFoundError struct {
	Host     string
	Name     string
	Existing []string
	Err      error
}

// Error says the login worked and names the missing and existing datacenters.
func (e *DatacenterNotFoundError) Error() string {
	existing := "none visible to this user"
	if len(e.Existing) > 0 {
		existing = strings.Join(e.Existing, ", ")
	}
	return fmt.Sprintf("find datacenter %q (datacenterString): logged in to vcenter %s, but no such datacenter; datacenters: %s", e.Name, e.Host, existing)
}

// Unwrap returns the finder's error.
func (e *DatacenterNotFoundError) Unwrap() error { return e.Err }

// FindDatacenter resolves datacenterString ("" : the only datacenter) at
// the connection, host naming vCenter in errors. A name that does not
// exist is a *DatacenterNotFoundError (listing the existing ones; a
// failure to list them is logged to log at DEBUG).
func FindDatacenter(ctx context.Context, vim *vim25.Client, host, name string, log *slog.Logger) (*object.Datacenter, error) {
	if name == "" {
		dc, err := find.NewFinder(vim, true).DefaultDatacenter(ctx)
		if err != nil {
			return nil, fmt.Errorf("find default datacenter (set datacenterString): %w", err)
		}
		return dc, nil
	}
	dc, err := find.NewFinder(vim, true).Datacenter(ctx, name)
	var nf *find.NotFoundError
	switch {
	case err == nil:
		return dc, nil
	case errors.As(err, &nf):
		existing, lerr := datacenterNames(ctx, vim)
		if lerr != nil {
			log.Debug("list datacenters for the error message", logkey.Err, lerr)
		}
		return nil, &DatacenterNotFoundError{Host: host, Name: name, Existing: existing, Err: err}
	default:
		return nil, fmt.Errorf("find datacenter %q (datacenterString): %w", name, err)
	}
}

// datacenterNames lists the names of every datacenter the user can see,
// through one container view; each request is bounded by the client's
// request timeout.
func datacenterNames(ctx context.Context, vim *vim25.Client) ([]string, error) {
	m := view.NewManager(vim)
	v, err := m.CreateContainerView(ctx, vim.ServiceContent.RootFolder, []string{"Datacenter"}, true)
	if err != nil {
		return nil, fmt.Errorf("create datacenter view: %w", err)
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }()
	var dcs []mo.Datacenter
	if err := v.Retrieve(ctx, []string{"Datacenter"}, []string{"name"}, &dcs); err != nil {
		return nil, fmt.Errorf("list datacenters: %w", err)
	}
	names := make([]string, 0, len(dcs))
	for _, d := range dcs {
		names = append(names, d.Name)
	}
	sort.Strings(names)
	return names, nil
}
