// Package placement decides where a clone goes when the configuration
// has several placements ([[placements]]: a resource pool or cluster, its
// datastores, folder, network and limits; docs/configuration.md): the one
// with the most weighted headroom for the clone's footprint, never a
// cordoned one, never one backing off after faults that point at it, never
// a datastore below its floor. It owns the placements' states (active,
// cordoned, backing off, probing) and what operators read of them
// (Status). Pure: it reads vCenter through the figures it is handed and
// imports no govmomi package.
package placement
