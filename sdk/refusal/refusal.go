package refusal

import (
	"errors"
	"fmt"
)

// Reason is the code of a decision not to spawn for a job, from a fixed
// set (docs/flavors-and-capacity.md lists it). It is the value of the
// `reason` log key and of Observer.JobSkipped.
type Reason string

// The refusal codes. The capacity ones (Waits) keep the job queued for this
// hatchery until room frees; the others are about the job itself, or say
// why a reservation was given back.
const (
	// ReasonCapacityCPU: not enough vCPUs (maxCpus, the resource pool or
	// the reserve kept for smaller flavors).
	ReasonCapacityCPU Reason = "capacity-cpu"
	// ReasonCapacityMemory: not enough memory (maxMemoryMB, the resource
	// pool or the reserve kept for smaller flavors).
	ReasonCapacityMemory Reason = "capacity-memory"
	// ReasonCapacity: the hatchery has no room now, without saying which
	// resource (a hatchery answering CanAllocateResources false).
	ReasonCapacity Reason = "capacity"
	// ReasonIP: no free address in the hatchery's IP range (CanSpawn, or
	// the spawn itself when another took the last one since).
	ReasonIP Reason = "ip"
	// ReasonMaxWorkers: provision.maxWorker workers in the pool.
	ReasonMaxWorkers Reason = "max-workers"
	// ReasonMaxProvisioning: maxConcurrentProvisioning spawns in flight or
	// workers pending.
	ReasonMaxProvisioning Reason = "max-provisioning"
	// ReasonMaxRegistering: maxConcurrentRegistering registrations in flight.
	ReasonMaxRegistering Reason = "max-registering"
	// ReasonPoolUnknown: the worker pool has not been listed yet.
	ReasonPoolUnknown Reason = "pool-unknown"
	// ReasonResources: the hatchery could not decide whether it can serve
	// the job or whether the worker fits (its inventory is unreadable).
	ReasonResources Reason = "resources"
	// ReasonPlacement: the hatchery has room but none of its placements
	// ([[placements]]) can take the clone: each is full (its own limits,
	// its pool, its datastores at their floor), cordoned or backing off.
	ReasonPlacement Reason = "placement"
	// ReasonRegion: the job's region is not this hatchery's.
	ReasonRegion Reason = "region"
	// ReasonModel: the job's model is unknown, disabled, of another type,
	// has no command, needs registration, or cannot be registered (V2).
	ReasonModel Reason = "model"
	// ReasonTemplate: the job's V2 model names a template its users may
	// not name on this hatchery (v2TemplateNames); the job is told why
	// (TellsJob).
	ReasonTemplate Reason = "template"
	// ReasonRequirement: the job has a requirement the hatchery does not
	// serve (service, memory or hostname).
	ReasonRequirement Reason = "requirement"
	// ReasonSpawning: a spawn for the job (or a registration of its V1
	// model) is already in flight in this process.
	ReasonSpawning Reason = "spawning"
	// ReasonServed: a VM of the hatchery already serves the job.
	ReasonServed Reason = "served"
	// ReasonRegistering: the V1 model is already being registered by a VM.
	ReasonRegistering Reason = "registering"
	// ReasonQuarantined: the template (or V1 model) the job's worker would
	// be made from failed too often and is not used for a while; the job
	// stays in the queue.
	ReasonQuarantined Reason = "quarantined"
	// ReasonBooked: another hatchery booked (took) the job, before or
	// after this one's admission.
	ReasonBooked Reason = "booked"
	// ReasonJobGone: the job left the queue (run elsewhere, cancelled)
	// while this hatchery was deciding.
	ReasonJobGone Reason = "job-gone"
	// ReasonBookFailed: booking (taking) the job failed for another reason.
	ReasonBookFailed Reason = "book-failed"
	// ReasonAttempts: the hatchery gave up on the job after
	// maxAttemptsNumberBeforeFailure attempts.
	ReasonAttempts Reason = "attempts"
	// ReasonWorkerToken: the worker's token could not be signed.
	ReasonWorkerToken Reason = "worker-token"
	// ReasonShutdown: the hatchery stops.
	ReasonShutdown Reason = "shutdown"
	// ReasonAbandoned: the job's processing ended without deciding (a
	// panic); the reservation is given back by the safety net.
	ReasonAbandoned Reason = "abandoned"
)

// Reasons lists every refusal code, in documentation order
// (docs/flavors-and-capacity.md).
var Reasons = []Reason{
	ReasonCapacityCPU, ReasonCapacityMemory, ReasonCapacity, ReasonIP,
	ReasonMaxWorkers, ReasonMaxProvisioning, ReasonMaxRegistering, ReasonPoolUnknown,
	ReasonResources, ReasonPlacement, ReasonRegion, ReasonModel, ReasonTemplate, ReasonRequirement,
	ReasonSpawning, ReasonServed, ReasonRegistering, ReasonQuarantined,
	ReasonBooked, ReasonJobGone, ReasonBookFailed, ReasonAttempts,
	ReasonWorkerToken, ReasonShutdown, ReasonAbandoned,
}

// HatcheryReasons lists the codes a hatchery's own decisions give (its
// CanSpawn, SpawnGate and AllocateResources, and its SpawnWorker refusing
// at spawn time) and the framework passes on as they are; every other
// code of Reasons is decided by the framework (sdk/hatchery,
// sdk/workerpool), which may give model and resources too. Tests tie each
// half to the decisions producing it.
var HatcheryReasons = []Reason{
	ReasonCapacityCPU, ReasonCapacityMemory, ReasonIP, ReasonResources, ReasonPlacement,
	ReasonModel, ReasonTemplate, ReasonRequirement, ReasonSpawning, ReasonServed,
	ReasonRegistering, ReasonQuarantined,
}

// Waits tells whether a refusal for r keeps the job waiting for room
// (it is counted as "waiting_capacity" in the poll summary and a later
// refresh that finds room looks at the queue again).
func (r Reason) Waits() bool {
	switch r {
	case ReasonCapacityCPU, ReasonCapacityMemory, ReasonCapacity, ReasonIP,
		ReasonMaxWorkers, ReasonMaxProvisioning, ReasonMaxRegistering,
		ReasonPoolUnknown, ReasonResources, ReasonPlacement:
		return true
	}
	return false
}

// TellsJob tells whether a refusal for r is told to the job's users (a
// V2 job's infos, once per job): a refusal they can only lift by changing
// their model, which nothing else would show them while the job waits.
func (r Reason) TellsJob() bool { return r == ReasonTemplate }

// Refusal is a decision not to spawn for a job: its code and a detail for
// humans. A hatchery's AllocateResources returns one (errors.As) to say
// which resource is missing. Detail holds no secret.
type Refusal struct {
	Reason Reason
	Detail string
	// Err is the cause, when an error led to the refusal.
	Err error
}

// Refuse builds a Refusal with a formatted detail.
func Refuse(r Reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// Error implements error: "code: detail".
func (r *Refusal) Error() string {
	switch {
	case r.Detail != "":
		return string(r.Reason) + ": " + r.Detail
	case r.Err != nil:
		return string(r.Reason) + ": " + r.Err.Error()
	}
	return string(r.Reason)
}

// Unwrap returns the cause.
func (r *Refusal) Unwrap() error { return r.Err }

// AsRefusal returns the Refusal in err's chain, or a ReasonResources one
// wrapping err when there is none (nil for a nil err).
func AsRefusal(err error) *Refusal {
	if err == nil {
		return nil
	}
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return &Refusal{Reason: ReasonResources, Detail: err.Error(), Err: err}
}
