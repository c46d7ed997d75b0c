package vcenter

// The waits' side of the wait collector (govmomi_waits.go): how one wait
// reads its object, subscribes to its notifications and falls back to
// polling.

import (
	"context"
	"time"

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
// waitFallbackFactor × PollInterval, and, while obj is not in a live
// collector's view, every pollFirst doubling to PollInterval (the poll it
// replaces). It returns ctx's error when ctx ends.
func (c *Client) awaitObject(ctx context.Context, obj types.ManagedObjectReference, first firstRead, pollFirst time.Duration,
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
	pollFirst = min(max(pollFirst, time.Millisecond), c.PollInterval)
	poll := pollFirst
	fallback := waitFallbackFactor * c.PollInterval
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
			poll = min(poll*2, c.PollInterval)
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
