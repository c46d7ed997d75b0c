// Package conformance holds the conformance suite: the real daemon
// (`hatchery-vsphere start` with a configuration file, as operators run
// it) against a real CDS API, CDN and worker, with govmomi's vCenter
// simulator whose guests run what the hatchery launches
// (vcsimtest.GuestRunner). The real CDS API is the arbiter of the
// protocol: what the in-process API simulator (internal/cdssim) accepts
// is only as strict as what it was taught, and this suite is where a
// difference shows.
//
// The tests carry the build tag `conformance` and run with `make
// conformance` (docs/conformance.md): they need the peer, a folder that
// starts the real CDS (`up STATE` / `down STATE`), found in $CDS_REAL,
// else ../shared/cds-real beside the repository. Without it the suite says
// so and how to get it, and passes nothing; with CI=true it fails.
package conformance
