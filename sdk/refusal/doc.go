// Package refusal owns the answer to "why was this job not started?": the
// fixed set of refusal codes (Reason) and the typed decision carrying one
// (Refusal) that every decision not to spawn returns, whoever takes it —
// the framework's filters and worker counts (sdk/hatchery,
// sdk/workerpool), the hatchery's resource decisions (internal/capacity,
// internal/admission), the template quarantine. A code is the value of
// the `reason` log key and of the skip metrics; whether the job waits for
// room is the code's (Reason.Waits), never the text of its detail. It also
// remembers which refusals of a job were reported already (Repeats), so a
// job refused at every poll for the same reason is reported once.
//
// It decides nothing and imports only the standard library. The codes
// (Reasons lists them all) and what each means for an operator are listed
// in docs/flavors-and-capacity.md.
package refusal
