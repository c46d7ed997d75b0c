package hatchery

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// TestV1AndV2JobsTakeOnePath: a V1 job and a V2 run job go through the
// same steps (processJob), their differences being data (queuedJob): the
// spawn gets the job's ids, its booking time and the reservation the
// hatchery's admission returned; the start is logged with its attempt;
// a failed spawn counts one attempt and releases the job. It fails if one
// kind skipped a step the other takes (e.g. the reservation not handed
// to a V2 spawn, an attempt not counted).
func TestV1AndV2JobsTakeOnePath(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"v1", "v2"} {
		for _, fail := range []bool{false, true} {
			name := kind + " spawned"
			if fail {
				name = kind + " spawn failed"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := newResRig(t, nil)
				if fail {
					r.ah.spawnErr = errors.New("clone failed")
				}
				var got outcome
				var attempts func() int
				var released func() int
				jobID := "1"
				if kind == "v1" {
					r.c.addJob(1, resReqs()...)
					got = r.f.processV1(context.Background(), r.v1(1))
					attempts = func() int { return r.f.attempts.count(1) }
					released = func() (n int) { r.c.snapshot(func(c *fakeClient) { n = c.releases }); return n }
				} else {
					jobID = "run-1"
					r.addV2(jobID)
					got = r.f.processV2(context.Background(), jobID)
					attempts = func() int { return r.f.attemptsV2.count(jobID) }
					released = func() (n int) { r.c.snapshot(func(c *fakeClient) { n = c.v2releases }); return n }
				}
				want := outcomeStarted
				if fail {
					want = outcomeFailed
				}
				require.Equal(t, want, got)
				res := r.ah.only(t)
				var spawns []spawn.Arguments
				r.ah.get(func(h *fakeHatchery) { spawns = append(spawns, h.spawns...) })
				require.Len(t, spawns, 1)
				args := spawns[0]
				assert.Equal(t, jobID, args.JobID)
				assert.Same(t, res, args.Reservation, "the admission's reservation is handed to the spawn")
				assert.False(t, args.Booked.IsZero())
				if kind == "v1" {
					assert.EqualValues(t, 1, args.WorkerConfig.BookedJobID)
					assert.NotEmpty(t, args.Requirements)
				} else {
					assert.Equal(t, jobID, args.WorkerConfig.RunJobID)
				}
				assert.Contains(t, r.logs.String(), `"msg":"spawning worker","job":"`+jobID+`"`)
				assert.Contains(t, r.logs.String(), `"attempt":1`)
				assert.Equal(t, 1, attempts(), "one attempt counted")
				if fail {
					assert.Equal(t, 1, released(), "the job is released")
				} else {
					assert.Zero(t, released())
				}
				r.assertFreed(t)
			})
		}
	}
}
