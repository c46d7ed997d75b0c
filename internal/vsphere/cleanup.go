package vsphere

import "context"

// STUB — owned by the warm-pool/cleanup work (issue 4).

// killAwolServers is one pass of the awol cleanup (001 §8.1, DESIGN §5.6).
func (h *HatcheryVSphere) killAwolServers(ctx context.Context) {}

// killDisabledWorkers is one pass of the disabled-worker cleanup (001 §8.2).
func (h *HatcheryVSphere) killDisabledWorkers(ctx context.Context) {}
