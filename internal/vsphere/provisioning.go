package vsphere

import "context"

// STUB — owned by the warm-pool work (issue 4).

// provisioningState is the warm pool's own state.
type provisioningState struct{}

func newProvisioningState() *provisioningState { return &provisioningState{} }

// provisioning is one pass of the provisioning loop (V2 then V1, 001 §6.3).
func (h *HatcheryVSphere) provisioning(ctx context.Context) {}
