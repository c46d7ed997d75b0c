package vsphere

import (
	"context"
	"errors"

	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// SpawnWorker starts one worker (001 §6.2).
func (h *HatcheryVSphere) SpawnWorker(ctx context.Context, args hatchery.SpawnArguments) error {
	return errors.New("not implemented")
}
