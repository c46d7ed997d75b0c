// Package poolsize decides how many VMs a warm pool should hold when its
// entry scales with demand instead of keeping a fixed number
// (docs/warm-pools.md). It owns:
//
//   - the demand a pool sees (Demand): queue arrivals of the pool's model
//     and flavor, learnt per quarter hour of the week, with the arrivals
//     of the last quarter hour kept apart for a short-term correction;
//   - the policy (Policy, Schedule) and the sizer (Sizer.Decide): the
//     target the pool is filled to, grown ahead of the demand expected
//     within the look-ahead, shrunk only after an idle period, held
//     between the entry's (or the active schedule's) min and max and
//     never past the pool's share of capacity or its placements'
//     headroom, with a typed reason for every change;
//   - the synthetic week of job arrivals and the replay that measures a
//     policy's warm starts and idle VM-hours (Trace, Replay), which
//     `make bench-latency` prints.
//
// It is pure: no vCenter, no clock of its own (every call takes the
// time), no goroutine. The warm pool (internal/warmpool) asks it for a
// target each pass and removes or clones VMs accordingly.
package poolsize
