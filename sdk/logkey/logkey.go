// Package logkey owns the log vocabulary: the attribute keys that the
// hatchery's log/slog lines share across packages, so that one thing is
// always logged under one key. Use these constants, never the string
// literals, as slog keys:
//
//   - Err: the error value itself (pass the error, not err.Error()).
//   - Reason: a refusal code from the fixed set of refusal.Reason (or a
//     package's own documented code set), never free text.
//   - Detail: free text that explains a decision, when no code fits.
//   - VM: the name of a VM; a worker's name is its VM's name, so a worker
//     is logged under this key too.
//   - Job: the CDS job (its id or key).
//   - Model: the worker model (its name or path).
//   - Flavor: the flavor name.
//   - IP: an IP address of a worker VM.
//   - Placement: the name of a placement ([[placements]]).
package logkey

// The log keys (see the package comment for their meaning).
const (
	// Err carries the error value.
	Err = "err"
	// Reason carries a refusal code, from a fixed set.
	Reason = "reason"
	// Detail carries free text that explains a decision.
	Detail = "detail"
	// VM carries a VM's name, which is also its worker's name.
	VM = "vm"
	// Job carries a CDS job's id or key.
	Job = "job"
	// Model carries a worker model's name or path.
	Model = "model"
	// Flavor carries a flavor's name.
	Flavor = "flavor"
	// IP carries a worker VM's IP address.
	IP = "ip"
	// Placement carries a placement's name.
	Placement = "placement"
)
