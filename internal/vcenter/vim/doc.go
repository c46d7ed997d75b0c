// Package vim is the half of the govmomi adapter that holds no Client:
// what vCenter reports by itself, read through property collectors, and
// govmomi's data in the project's terms.
//
// It owns:
//   - the property-collector side of a connection, one Collector that
//     internal/vcenter's Client makes once connected and delegates to
//     (collector.go): the views over the inventory's scope, the listing and
//     the lookups by name through them, the template folders found by name
//     (scope.go); the VM change watch (watch.go) and its filter on the
//     scope's membership (members.go); the probe and the reads by reference
//     (probe.go); the wait collector (waits.go, its loop waits_loop.go) and the waits that learn
//     from it, a task's and a VM's (await.go); the VMs' names as last seen;
//   - the one translation between govmomi's types and the project's
//     vCenter vocabulary (internal/vctypes), fault classification included
//     (vocabulary.go: RefOf, MORef, VMInfoOf, VMUpdateOf, OptionsOf,
//     ApplyRecord, ConfigSpecOf, FaultKindOf, Classify and the fault
//     predicates the adapter acts on; it is the only package that imports
//     govmomi's fault package), the flavor's growth rule (growth.go), the
//     clone's specification built from a request and the template read in
//     those terms (clone.go) with the per-template cache of device lists
//     (templates.go), the placement and datacenter lookups' errors
//     (placement_errors.go, datacenter.go).
//
// It does not own the connection, the session and its re-login, the
// requests and their timeouts, the task slots, the placements' lookups or
// what the scope's configured folders are: internal/vcenter's Client, which
// imports it, does (the Collector is handed the *vim25.Client, the session
// generation and a function resolving the scope's folders, never the
// Client). Of the project's packages it imports only internal/vctypes and
// sdk/logkey.
//
// docs/architecture.md ("The port's layout", "Waits from change
// notifications") describes it.
package vim
