package vcenter

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
)

// PlacementError is a placement setting that vCenter resolves to no object
// or to several (vim.PlacementError); it wraps vctypes.ErrPlacementUnresolved.
type PlacementError = vim.PlacementError

// DatacenterNotFoundError is the error of a connection whose login worked
// but whose datacenter (datacenterString) does not exist
// (vim.DatacenterNotFoundError).
type DatacenterNotFoundError = vim.DatacenterNotFoundError

// PlacementProblem is a placement setting whose lookup fails now
// (vim.PlacementProblem).
type PlacementProblem = vim.PlacementProblem

// PlacementProblems lists the placement settings whose lookup fails now
// (no such object, or several), each with its error and its next retry;
// empty when every lookup made so far resolved. Safe for concurrent use;
// no round trip.
func (c *Client) PlacementProblems() []PlacementProblem { return c.placement.problems() }
