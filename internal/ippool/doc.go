// Package ippool owns the static IP addresses the hatchery hands to the VMs
// it clones: the ranges of the configuration (iprange and each [[networks]]
// entry) with their network settings, the local reservations (with a
// time to live) of spawns in flight, and, with UseLocks, the address locks
// that keep two instances of one hatchery from handing out one address
// (docs/design.md#ip-management, docs/high-availability.md).
//
// It takes the addresses VMs hold as plain input (a set of addresses, for
// example inventory.UsedBy or an inventory.Index) and never reads the
// inventory itself; it reaches vCenter only through the Locker it is
// given (vctypes.Locks, in vctypes terms), never with its mutex
// held. It speaks the project's vCenter vocabulary (internal/vctypes) and
// imports no govmomi package.
package ippool
