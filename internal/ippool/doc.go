// Package ippool owns the static IP addresses the hatchery hands to the VMs
// it clones: the ranges of the configuration (iprange and each [[networks]]
// entry) with their network settings, and the local reservations (with a
// time to live) of spawns in flight (docs/design.md#ip-management).
//
// It takes the addresses VMs hold as plain input (a set of addresses, for
// example inventory.UsedBy or an inventory.Index) and never reads vCenter
// itself.
package ippool
