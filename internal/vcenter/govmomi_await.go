package vcenter

// The waits' side of the wait collector (govmomi_waits.go): how one wait
// reads its object, subscribes to its notifications and falls back to
// polling.

import (
	"context"
	"time"

	"github.com/vmware/govmomi/vim25/types"
)

// awaitObject waits for obj: read tells whether the wait is over (and
// reads what the caller needs). Unless skipFirstRead, it reads at once and
// returns without a filter when already done. Then it subscribes to obj's
// notifications and reads again when its filter is made, when a
// notification's values pass worth (nil: every notification), at least
// every waitFallbackFactor × PollInterval, and, while the object has no
// live filter, every pollFirst doubling to PollInterval (the poll it
// replaces). It returns ctx's error when ctx ends.
func (c *Client) awaitObject(ctx context.Context, obj types.ManagedObjectReference, skipFirstRead bool, pollFirst time.Duration,
	read func(context.Context) (bool, error), worth func(map[string]any) bool) error {
	if !skipFirstRead {
		if done, err := read(ctx); err != nil || done {
			return err
		}
	}
	sub := c.waits.subscribe(ctx, obj)
	defer c.waits.unsubscribe(sub)
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
			isLive, dirty, vals := c.waits.state(sub)
			if isLive != live {
				live = isLive
				poll = pollFirst
			}
			readNow = dirty || (live && (worth == nil || worth(vals)))
			if !readNow && !live {
				// Lost its filter: poll from now on.
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
