// Package spawn holds the data a spawn carries from the framework
// (sdk/hatchery) to a hatchery (internal/vsphere) and to the packages
// that build a worker (internal/guest, internal/spawntiming,
// internal/config): the spawn's arguments (Arguments), the worker's
// configuration (WorkerConfig, handed to the worker as CDS_CONFIG), the
// values the model commands are rendered with (ModelTemplateData) and the
// admission's reservation handed to the spawn (Reservation).
//
// It is data and the pure functions over it (encoding, template
// rendering and checking): no network, no state. The framework's own
// machinery (queue, booking, loops) stays in sdk/hatchery, so a package
// that only needs these types does not depend on the framework.
//
// WorkerConfig and ModelTemplateData hold the worker's token: never log
// them, nor a rendered script (ModelTemplateData's String hides
// everything).
package spawn
