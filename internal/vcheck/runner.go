package vcheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// logoutTimeout bounds the logout at the end of a run: one request.
const logoutTimeout = 5 * time.Second

// runner is one run: its configuration, connection, scratch folder and
// report.
type runner struct {
	cfg *config.Config
	o   Options
	log *slog.Logger
	vc  *vcenter.Client
	rep *Report
	// scratch is the run's folder (zero until made).
	scratch     vctypes.Ref
	scratchName string
	// vms are the VMs this run made, destroyed at its end.
	vms []vmRef
	// measured are the passed operations' times, by latency model
	// operation (internal/latencyfile).
	measured map[string][]time.Duration
	// ips takes the static addresses of the run's clones (nil until the
	// first is taken; only with static IPs); owners are the reservations
	// it holds, released at the end (releaseAddresses).
	ips    *ippool.Pool
	owners []string
}

func newRunner(cfg *config.Config, o Options) *runner {
	if o.GuestReadyTimeout <= 0 {
		o.GuestReadyTimeout = DefaultGuestReadyTimeout
	}
	if o.NotifyTimeout <= 0 {
		o.NotifyTimeout = DefaultNotifyTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RunID == "" {
		o.RunID = o.Now().UTC().Format("20060102T150405.000")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &runner{cfg: cfg, o: o, log: log, rep: &Report{RunID: o.RunID}, measured: map[string][]time.Duration{}}
}

// close logs out.
func (r *runner) close(ctx context.Context) {
	if r.vc == nil {
		return
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
	defer cancel()
	r.vc.Close(lctx)
}

// add appends a result of capability on object that started at start.
func (r *runner) add(capability, object string, start time.Time, st Status, detail string) *Result {
	r.rep.Results = append(r.rep.Results, Result{Capability: capability, Object: object, Status: st, Duration: time.Since(start), Detail: detail})
	res := &r.rep.Results[len(r.rep.Results)-1]
	r.log.Debug("vcenter check", "capability", capability, "object", object, "status", string(st))
	return res
}

// outcome appends the result of an attempt that returned err: pass, or
// unsupported when vCenter answered that it does not offer the operation,
// else fail with the fault's kind and fix (what to change, fix when the
// kind has no more precise one).
func (r *runner) outcome(capability, object string, start time.Time, err error, fix string) *Result {
	if err == nil {
		return r.add(capability, object, start, Pass, "")
	}
	kind := vcenter.FaultKindOf(err)
	st := Fail
	if kind == vctypes.FaultNotSupported {
		st = Unsupported
	}
	res := r.add(capability, object, start, st, err.Error())
	if kind != vctypes.NoFault {
		res.Fault = kind.Error()
	}
	res.Fix = fixOf(kind, fix)
	if kind == vctypes.NoFault && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		res.Fix = "the run was stopped, or this step outlived its bound, before vCenter answered: run the check again (it removes what this run left)"
	}
	r.log.Info("vcenter check failed", "capability", capability, "object", object, logkey.Err, err)
	return res
}

// fixOf is what to change for a fault of kind; fallback when the kind says
// nothing more precise than the capability's own fix.
func fixOf(kind vctypes.FaultKind, fallback string) string {
	switch kind {
	case vctypes.FaultNoPermission:
		return "grant the vCenter user the privilege named above on that object (docs/vcenter-check.md#privileges)"
	case vctypes.FaultNoDiskSpace:
		return "free space on the datastore or choose another (datastoreString, placements[].datastores)"
	case vctypes.FaultDatastoreUnavailable:
		return "choose a datastore the placement's hosts mount and can reach"
	case vctypes.FaultHostUnavailable:
		return "bring a host of the placement back (connected, out of maintenance) or choose another placement"
	case vctypes.FaultInsufficientResources:
		return "give the resource pool room (limits, reservations) or choose another placement"
	case vctypes.FaultInvalidGuestLogin:
		return "set the guest account of the model (guestCredentials/models username and password) to one the template accepts"
	case vctypes.FaultNotSupported:
		if fallback != "" {
			return fallback
		}
		return "this vCenter or template does not offer it: see docs/vcenter-check.md"
	}
	return fallback
}

// session connects (the dial's login and datacenter lookup): one line.
// Unreachable and refused credentials each give their own fix.
func (r *runner) session(ctx context.Context, dial Dialer) bool {
	start := time.Now()
	vc, err := dial(ctx)
	if err == nil {
		r.vc = vc
		r.add("session", r.cfg.Endpoint, start, Pass, "logged in as "+r.cfg.User)
		return true
	}
	res := r.add("session", r.cfg.Endpoint, start, Fail, err.Error())
	var dnf *vcenter.DatacenterNotFoundError
	var ue *url.Error
	var ne net.Error
	switch {
	case vcenter.IsLoginRefused(err):
		res.Fix = "vCenter refused the user or password: set user and password (or CDS_HATCHERY_VSPHERE_PASSWORD)"
	case errors.As(err, &dnf):
		res.Fix = "set datacenterString to a datacenter of this vCenter"
	case errors.As(err, &ue) || errors.As(err, &ne):
		res.Fix = "vCenter did not answer: check endpoint, the network to it and caFile"
	default:
		res.Fix = "check endpoint, user, password and caFile"
	}
	if k := vcenter.FaultKindOf(err); k != vctypes.NoFault {
		res.Fault = k.Error()
	}
	return false
}

// errorf is a check's own failure (not a vCenter fault).
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
