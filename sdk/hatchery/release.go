package hatchery

import (
	"context"
	"errors"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// Bounds of releaseRetried: at most releaseAttempts calls, waiting from
// releaseBackoff doubling between them (about 3 s in all), so that a spawn
// failing during shutdown still releases its job within the shutdown bound.
const (
	releaseAttempts = 5
	releaseBackoff  = 200 * time.Millisecond
)

// releaseRetried releases a job the hatchery booked or took, retrying while
// the API answers 5xx or cannot be reached. A release lost in a 5xx burst
// would leave the job held by this hatchery with no worker: every hatchery,
// this one included, is then refused the job as already booked. A 4xx answer
// (not booked by us any more, gone) is final. A V1 release answered "already
// released" (cdsclient.ErrAlreadyReleased: the API dropped the booking, or it
// was given back before) is done: the job is not ours to release any more,
// so it returns nil after one call, logged at Info for job (its key). Each
// call runs on a context that survives shutdown, bounded by the request
// timeout.
func (f *Framework) releaseRetried(ctx context.Context, job string, release func(context.Context) error) error {
	delay := releaseBackoff
	var err error
	for i := 0; i < releaseAttempts; i++ {
		if i > 0 {
			t := time.NewTimer(delay)
			<-t.C
			delay *= 2
		}
		rctx, cancel := f.detached(ctx)
		err = release(rctx)
		cancel()
		if errors.Is(err, cdsclient.ErrAlreadyReleased) {
			f.log.Info("job already released by the api, nothing to release", logkey.Job, job)
			return nil
		}
		if err == nil || !retryableRelease(err) {
			return err
		}
	}
	return err
}

// retryableRelease tells whether a failed release may succeed later: a 5xx
// or a transport error, not an API answer saying no.
func retryableRelease(err error) bool {
	var ae *cdsclient.APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500
	}
	return true
}
