package vcsimtest

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/vmware/govmomi/simulator"

	"github.com/cds-contrib/hatchery-vsphere/internal/latencyfile"
)

// The latency model: how long vCenter operations and guest boots take on
// a real vSphere, scaled down by LatencyScale so that a benchmark of
// bursts of jobs runs in minutes (docs/architecture.md, "Latency model").
// One table, one factor: a benchmark prints both (LatencyModel.Print).

// LatencyScale divides every real duration of the model.
const LatencyScale = 50

// LatencyJitter is the coefficient of variation (stddev/mean) applied to
// every modelled duration.
const LatencyJitter = 0.1

// Latency is one modelled operation: its duration on a real vSphere.
type Latency struct {
	// Op names the operation.
	Op string
	// Real is its typical duration on vSphere (a 40 GB template on shared
	// storage; guest boot of a small Linux).
	Real time.Duration
	// Task is the simulator task it delays (simulator.TaskDelay), "" for
	// guest timings.
	Task string
}

// Operations of the model: the names of its file form (internal/latencyfile).
const (
	OpFullClone   = latencyfile.OpFullClone
	OpLinkedClone = latencyfile.OpLinkedClone
	// OpInstantClone is an instant clone to a ready worker: the fork
	// (OpInstantCloneTask) then the guest's re-identification
	// (OpInstantReidentify); their sum.
	OpInstantClone = "instant clone"
	// OpInstantCloneTask is InstantClone_Task: the fork of a running
	// parent, no disk copy, no boot (the published figure is 1-2 s).
	OpInstantCloneTask = latencyfile.OpInstantCloneTask
	// OpInstantReidentify is the child's guest taking its own identity
	// (hostname, network, worker config) from its guestinfo after the
	// fork, until guest operations are ready.
	OpInstantReidentify = latencyfile.OpInstantReidentify
	OpGuestReady        = latencyfile.OpGuestReady
	OpResume            = latencyfile.OpResume
	OpPowerOn           = latencyfile.OpPowerOn
	OpReconfigure       = latencyfile.OpReconfigure
	OpRename            = latencyfile.OpRename
)

// Latencies is the model's table.
var Latencies = []Latency{
	{Op: OpFullClone, Real: 88 * time.Second, Task: "CloneVm"},
	{Op: OpLinkedClone, Real: 52 * time.Second, Task: "CloneVm"},
	// An instant clone is ready in 21 s (the fork's task, then the
	// child's re-identification) where a linked clone takes 52 s of task
	// and 30 s of boot; the total is not played itself, its two parts are.
	{Op: OpInstantClone, Real: 21 * time.Second},
	{Op: OpInstantCloneTask, Real: 2 * time.Second, Task: "InstantClone"},
	{Op: OpInstantReidentify, Real: 19 * time.Second}, // Options.InstantReadyDelay
	{Op: OpGuestReady, Real: 30 * time.Second},
	{Op: OpResume, Real: 3 * time.Second}, // power on of a suspended VM -> guest ready (Options.ResumeDelay)
	{Op: OpPowerOn, Real: 2 * time.Second, Task: "PowerOn"},
	{Op: OpReconfigure, Real: time.Second, Task: "ReconfigVm"},
	{Op: OpRename, Real: time.Second, Task: "Rename"},
}

// Modelled returns the scaled duration of op (0 when op is unknown).
func Modelled(op string) time.Duration {
	for _, l := range Latencies {
		if l.Op == op {
			return l.Real / LatencyScale
		}
	}
	return 0
}

// taskDelayMu serialises ApplyTaskDelays: simulator.TaskDelay is global to
// the process.
var taskDelayMu sync.Mutex

// ApplyTaskDelays sets the simulator's task delays (process-wide:
// simulator.TaskDelay) to the model, with cloneOp (OpFullClone or
// OpLinkedClone) as the clone task's duration, the instant clone's task
// (InstantClone, instantclone.go) as OpInstantCloneTask, and returns the
// function restoring the previous delays. The simulator does not tell a linked
// clone from a full one (it ignores the disk move type): the caller picks
// the figure of the clone mode its hatchery uses. Tasks run concurrently
// (no lock hand-off), as on vCenter. Never use it in parallel tests.
func ApplyTaskDelays(cloneOp string) (restore func()) {
	taskDelayMu.Lock()
	prev := simulator.TaskDelay
	d := simulator.DelayConfig{MethodDelay: map[string]int{"LockHandoff": 0}, DelayJitter: LatencyJitter}
	for _, l := range Latencies {
		if l.Task == "" || (l.Task == "CloneVm" && l.Op != cloneOp) {
			continue
		}
		d.MethodDelay[l.Task] = int((l.Real / LatencyScale).Milliseconds())
	}
	simulator.TaskDelay = d
	return func() {
		simulator.TaskDelay = prev
		taskDelayMu.Unlock()
	}
}

// LatencyOptions returns Options with the guest readiness of the model:
// guest operations ready OpGuestReady after each power-on (OpResume after
// one that resumes a suspended VM, OpInstantReidentify after an instant
// clone's fork), with jitter, and the clones of one template powering
// their VMs on concurrently, as on vCenter (Options.ClonePowerOnUnlocked).
func LatencyOptions(o Options) Options {
	o.ClonePowerOnUnlocked = true
	o.ReadyDelay = Modelled(OpGuestReady)
	o.ReadyJitter = LatencyJitter
	o.ResumeDelay = Modelled(OpResume)
	o.InstantReadyDelay = Modelled(OpInstantReidentify)
	return o
}

// PrintLatencyModel writes the model's table: operation, real and
// modelled duration.
func PrintLatencyModel(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "latency model (real / %d, jitter %.0f%%):\n", LatencyScale, LatencyJitter*100)
	fmt.Fprintf(tw, "  operation\treal\tmodelled\tsimulator task\n")
	for _, l := range Latencies {
		task := l.Task
		if task == "" {
			task = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", l.Op, l.Real, l.Real/LatencyScale, task)
	}
	_ = tw.Flush()
}

// jittered varies d by a normal factor of coefficient of variation cv,
// never below 0.
func jittered(d time.Duration, cv float64) time.Duration {
	if cv <= 0 || d <= 0 {
		return d
	}
	j := time.Duration(float64(d) * (1 + cv*rand.NormFloat64()))
	return max(j, 0)
}

// UseLatencyFile replaces the model's real durations by those of the
// file at path (internal/latencyfile: what `vcenter check
// --latency-model` measured on an operator's vCenter), operation by
// operation; the instant clone's total follows its two parts. It changes
// the process-wide table: call it once, before any benchmark runs
// (`make bench-latency LATENCY_MODEL=FILE`), never in parallel tests.
func UseLatencyFile(path string) error {
	real, err := latencyfile.Read(path)
	if err != nil {
		return err
	}
	taskDelayMu.Lock()
	defer taskDelayMu.Unlock()
	for i, l := range Latencies {
		if d, ok := real[l.Op]; ok {
			Latencies[i].Real = d
		}
	}
	var task, reid time.Duration
	for _, l := range Latencies {
		switch l.Op {
		case OpInstantCloneTask:
			task = l.Real
		case OpInstantReidentify:
			reid = l.Real
		}
	}
	for i, l := range Latencies {
		if l.Op == OpInstantClone {
			Latencies[i].Real = task + reid
		}
	}
	return nil
}
