package vsphere

import "context"

// STUB — owned by the warm-pool/cleanup work (issue 4).

// markToDelete records that the VM named name (ours) must be destroyed; the
// next cleanup pass powers it off and destroys it, retrying until it is gone.
func (h *HatcheryVSphere) markToDelete(name string) { h.toDelete.Add(name) }

// deleteServer powers off and destroys one VM of ours (001 §8.3).
func (h *HatcheryVSphere) deleteServer(ctx context.Context, vm VM) error { return nil }
