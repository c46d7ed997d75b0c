package vcenter

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Ports adapts a Port to the decision packages' ports, which speak the
// project's vocabulary (internal/vctypes) and import no govmomi package:
// guest.Port. Each
// method converts its arguments (vocabulary.go), calls the Port and
// returns its error classified (Classify), so that a decision tests a
// fault with errors.Is(err, vctypes.FaultX). It holds nothing but the
// Port: tests that drive decisions through mock_vsphere.MockPort keep
// doing so through it.
type Ports struct {
	Port Port
}

// PortsOf adapts p.
func PortsOf(p Port) Ports { return Ports{Port: p} }

// WaitForGuestOperationsReady blocks until the guest of vm runs programs
// or ctx ends.
func (p Ports) WaitForGuestOperationsReady(ctx context.Context, vm vctypes.Ref) error {
	return Classify(p.Port.WaitForGuestOperationsReady(ctx, MORef(vm)))
}

// StartProgramInGuest starts prog in the guest of vm with auth and
// returns its pid.
func (p Ports) StartProgramInGuest(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, prog vctypes.GuestProgram) (int64, error) {
	pid, err := p.Port.StartProgramInGuest(ctx, MORef(vm), GuestAuthOf(auth), GuestProgramSpec(prog))
	return pid, Classify(err)
}

// WaitForVirtualMachineIP blocks until the guest of vm reports an IPv4
// address (expectedIP when not empty) or ctx ends, and returns it.
func (p Ports) WaitForVirtualMachineIP(ctx context.Context, vm vctypes.Ref, expectedIP string) (string, error) {
	ip, err := p.Port.WaitForVirtualMachineIP(ctx, MORef(vm), expectedIP)
	return ip, Classify(err)
}
