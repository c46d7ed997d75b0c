package vim

// The waits' side of the wait collector (waits.go): how one wait
// reads its object, subscribes to its notifications and falls back to
// polling; a task's wait (WaitTask) and a VM's (WaitForShutdown,
// WaitForGuestOperations, WaitForIP).

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// firstRead is whether a wait reads its object before it subscribes.
type firstRead int

const (
	// readFirst: read at once (and return without subscribing when
	// already done), unless obj is in the collector's view already.
	readFirst firstRead = iota
	// skipFirst: no first read (a task just started has rarely ended):
	// the first poll, or the values reported as the object enters the
	// view, come first.
	skipFirst
	// readUnlessLive: no first read while the collector is live (the
	// values reported as the object enters the view are its current
	// ones, and cost no more than the read); a read at once otherwise.
	// For a wait whose condition is rarely met when it begins.
	readUnlessLive
)

// awaitObject waits for obj: read tells whether the wait is over (and
// reads what the caller needs). first says whether it reads at once
// (firstRead). Then it subscribes to obj's notifications and reads again
// when the values the filter reports (as obj enters the collector's view,
// then as they change) pass worth, told whether they are fresh (obj
// entered the view for this wait, so they were all read after it began:
// waitSub.entered), when the collector was lost, at least every
// WaitFallbackFactor × PollInterval, and, while obj is not in a live
// collector's view, every pollFirst doubling to PollInterval (the poll it
// replaces). It returns ctx's error when ctx ends.
func (c *Collector) awaitObject(ctx context.Context, obj types.ManagedObjectReference, first firstRead, pollFirst time.Duration,
	read func(context.Context) (bool, error), worth func(vals map[string]any, fresh bool) bool) error {
	// An object in the collector's view needs no first read: its values
	// reported so far, and every change since (the next long poll goes on
	// from the last one's version), tell the wait when to read.
	if first == readFirst && !c.waits.watched(obj) {
		if done, err := read(ctx); err != nil || done {
			return err
		}
	}
	sub := c.waits.subscribe(obj)
	defer c.waits.unsubscribe(sub)
	// Not live (yet, or lost before the subscription): a collector lost
	// after it wakes the wait, so checking after subscribing misses none.
	if first == readUnlessLive && !c.waits.isLive() {
		if done, err := read(ctx); err != nil || done {
			return err
		}
	}
	pollFirst = min(max(pollFirst, time.Millisecond), c.pollInterval)
	poll := pollFirst
	fallback := WaitFallbackFactor * c.pollInterval
	live := false
	timer := time.NewTimer(poll)
	defer timer.Stop()
	var wake <-chan struct{}
	if sub != nil {
		wake = sub.wake
	}
	for {
		readNow := false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			readNow = true
		case <-wake:
			isLive, dirty, fresh, vals := c.waits.state(sub)
			entered := isLive && !live
			if isLive != live {
				live = isLive
				poll = pollFirst
			}
			readNow = dirty || (live && vals != nil && worth(vals, fresh))
			switch {
			case readNow:
			case entered:
				// Notified from now on: only the fallback read.
				timer.Reset(fallback)
			case !live:
				// Out of the view: poll from now on.
				timer.Reset(poll)
			}
		}
		if !readNow {
			continue
		}
		if done, err := read(ctx); err != nil || done {
			return err
		}
		next := fallback
		if !live {
			next = poll
			poll = min(poll*2, c.pollInterval)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// WaitTask waits until a task succeeds or fails, or ctx ends. It learns
// of the task's info.state from the wait collector (waits.go) and
// takes its outcome from the reported values when the state (as the task
// enters the collector's view, then as it changes) says it ended and they
// carry it (taskOutcome), reading the task's info otherwise; until it is in the
// view (or without the collector) it polls, from taskPollMin doubling to
// PollInterval. A failed task's error is
// task.Error carrying its fault. notified: the outcome came from the
// notification of the task's end, not from a read.
func (c *Collector) WaitTask(ctx context.Context, ref types.ManagedObjectReference) (_ types.AnyType, notified bool, _ error) {
	var (
		result types.AnyType
		terr   error
	)
	// notified: the reported values that said the task ended, which
	// carry its outcome when vCenter reported it with the state.
	var ended map[string]any
	read := func(ctx context.Context) (bool, error) {
		if v := ended; v != nil {
			ended = nil
			if taskOutcome(v, &result, &terr) {
				notified = true
				return true, nil
			}
		}
		var t mo.Task
		if err := c.pc.RetrieveOne(ctx, ref, []string{"info"}, &t); err != nil {
			return false, fmt.Errorf("read task %s: %w", ref.Value, err)
		}
		switch t.Info.State {
		case types.TaskInfoStateSuccess:
			result = t.Info.Result
			return true, nil
		case types.TaskInfoStateError:
			if t.Info.Error == nil {
				terr = fmt.Errorf("task %s failed without a fault", ref.Value)
			} else {
				terr = task.Error{LocalizedMethodFault: t.Info.Error, Description: t.Info.Description}
			}
			return true, nil
		}
		return false, nil
	}
	worth := func(vals map[string]any, _ bool) bool {
		switch fmt.Sprint(vals["info.state"]) {
		case string(types.TaskInfoStateSuccess), string(types.TaskInfoStateError):
			ended = vals
			return true
		}
		return false
	}
	// A task just started has rarely ended: the first read waits for its
	// reported state (or the first poll).
	if err := c.awaitObject(ctx, ref, skipFirst, c.waits.taskPollFirst, read, worth); err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			return nil, false, fmt.Errorf("wait for task %s: %w", ref.Value, err)
		}
		return nil, false, err
	}
	return result, notified, terr
}

// taskOutcome takes an ended task's outcome from the values the wait
// collector reported (waitProps), when they carry it: the state success
// with the result (nil for a task that has none), or the state error with
// its fault. vCenter sets the three together as the task ends, in one
// update; a result or fault not reported (vCenter leaves out a property
// that stayed unset) means a read. The fault's description is not
// reported: task.Error's text does not use it.
func taskOutcome(vals map[string]any, result *types.AnyType, terr *error) bool {
	switch fmt.Sprint(vals["info.state"]) {
	case string(types.TaskInfoStateSuccess):
		r, ok := vals["info.result"]
		if ok {
			*result = r
		}
		return ok
	case string(types.TaskInfoStateError):
		switch f := vals["info.error"].(type) {
		case types.LocalizedMethodFault:
			*terr = task.Error{LocalizedMethodFault: &f}
			return true
		case *types.LocalizedMethodFault:
			*terr = task.Error{LocalizedMethodFault: f}
			return f != nil
		}
	}
	return false
}

// pollVM waits until done says so of props of vm, or ctx ends: it reads
// them (unless first says otherwise), then again when the wait collector (waits.go)
// notifies a change of vm that worth accepts, at least every
// WaitFallbackFactor × PollInterval, and every PollInterval while vm is
// not in the collector's view. Each read is one small RetrieveProperties.
//
// first says whether it reads at once (firstRead: readUnlessLive for a
// wait whose condition is rarely met when it begins). settles (nil: never)
// tells whether reported values end the wait as a read of them would
// (the awaited value is one the filter reports, waitProps): then the wait
// ends on them without a read when they are fresh (waitHub.state: as new
// as this client's last change of vm); values that may predate it are
// confirmed by a read.
func (c *Collector) pollVM(ctx context.Context, vm types.ManagedObjectReference, what string, props []string, first firstRead,
	worth, settles func(map[string]any) bool, done func(*mo.VirtualMachine) bool) error {
	// notified: fresh reported values said the wait is over.
	notified := false
	read := func(ctx context.Context) (bool, error) {
		if notified {
			return true, nil
		}
		var o mo.VirtualMachine
		if err := c.pc.RetrieveOne(ctx, vm, props, &o); err != nil {
			return false, fmt.Errorf("wait for %s of %q: %w", what, c.Name(vm), err)
		}
		return done(&o), nil
	}
	notify := func(vals map[string]any, fresh bool) bool {
		if !worth(vals) {
			return false
		}
		notified = fresh && settles != nil && settles(vals)
		return true
	}
	err := c.awaitObject(ctx, vm, first, c.pollInterval, read, notify)
	if err != nil && ctx.Err() != nil && err == ctx.Err() {
		return fmt.Errorf("wait for %s of %q: %w", what, c.Name(vm), err)
	}
	return err
}

// notifiedAs returns a worth function for pollVM: a notification is worth
// a read when prop's reported value, as text, is want ("" : any value but
// the empty one).
func notifiedAs(prop, want string) func(map[string]any) bool {
	return func(vals map[string]any) bool {
		v, ok := vals[prop]
		if !ok || v == nil {
			return false
		}
		s := fmt.Sprint(v)
		if want == "" {
			return s != ""
		}
		return s == want
	}
}

// WaitForShutdown blocks until the VM is powered off or ctx ends.
func (c *Collector) WaitForShutdown(ctx context.Context, vm types.ManagedObjectReference) error {
	off := notifiedAs("runtime.powerState", string(types.VirtualMachinePowerStatePoweredOff))
	return c.pollVM(ctx, vm, "power off", []string{"runtime.powerState"}, readUnlessLive, off, off, func(o *mo.VirtualMachine) bool {
		return o.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOff
	})
}

// WaitForGuestOperations blocks until guest.guestOperationsReady is
// true or ctx ends.
func (c *Collector) WaitForGuestOperations(ctx context.Context, vm types.ManagedObjectReference) error {
	ready := notifiedAs("guest.guestOperationsReady", "true")
	return c.pollVM(ctx, vm, "guest operations", []string{"guest.guestOperationsReady"}, readUnlessLive, ready, ready, func(o *mo.VirtualMachine) bool {
		return o.Guest != nil && o.Guest.GuestOperationsReady != nil && *o.Guest.GuestOperationsReady
	})
}

// WaitForIP blocks until the guest reports an IPv4 address
// in guest.net or guest.ipAddress — expectedIP when not empty — or ctx
// ends, and returns it. Link-local and loopback addresses are skipped, so
// a container bridge or APIPA address is never taken for the VM's address.
func (c *Collector) WaitForIP(ctx context.Context, vm types.ManagedObjectReference, expectedIP string) (string, error) {
	var found string
	// guest.net is a list, not watched (scalars only): a change of
	// guest.ipAddress wakes the read, the fallback catches the rest. The
	// expected address reported as guest.ipAddress is what pickIP would
	// find: no read.
	var settles func(map[string]any) bool
	if want := net.ParseIP(expectedIP); want != nil && want.To4() != nil {
		settles = func(vals map[string]any) bool {
			if got := net.ParseIP(fmt.Sprint(vals["guest.ipAddress"])); got != nil && got.Equal(want) {
				found = expectedIP
				return true
			}
			return false
		}
	}
	err := c.pollVM(ctx, vm, "ip address", []string{"guest.ipAddress", "guest.net"}, readFirst, notifiedAs("guest.ipAddress", ""), settles, func(o *mo.VirtualMachine) bool {
		found = pickIP(o.Guest, expectedIP)
		return found != ""
	})
	if err != nil {
		return "", err
	}
	return found, nil
}

// pickIP returns expected when the guest reports it, else ("" expected)
// the first usable IPv4 address: guest.net first, then guest.ipAddress.
func pickIP(g *types.GuestInfo, expected string) string {
	if g == nil {
		return ""
	}
	candidates := make([]string, 0, 4)
	for _, n := range g.Net {
		candidates = append(candidates, n.IpAddress...)
	}
	candidates = append(candidates, g.IpAddress)
	for _, s := range candidates {
		ip := net.ParseIP(s)
		if ip == nil || ip.To4() == nil {
			continue
		}
		if expected != "" {
			if ip.Equal(net.ParseIP(expected)) {
				return expected
			}
			continue
		}
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
			continue
		}
		return ip.String()
	}
	return ""
}

// Touch records that a task of the caller that changes obj starts: until
// it ended (Settle), obj's reported values may predate its effects.
func (c *Collector) Touch(obj types.ManagedObjectReference) { c.waits.touch(obj) }

// Keep asks for obj to join the wait collector's view with its next
// addition, without a wait on it: the caller is about to start a task that
// changes it and then to wait on it (waitHub.keep).
func (c *Collector) Keep(obj types.ManagedObjectReference) { c.waits.keep(obj) }

// Settle records that a task Touch announced ended; notified: its outcome
// came from the notification of its end (WaitTask).
func (c *Collector) Settle(obj types.ManagedObjectReference, notified bool) {
	c.waits.settle(obj, notified)
}

// Reported returns obj's last reported value of prop when obj is in the
// view of a live wait collector and the value was reported: a hint that
// may predate the caller's last change of obj, never a proof.
func (c *Collector) Reported(obj types.ManagedObjectReference, prop string) (any, bool) {
	return c.waits.reported(obj, prop)
}
