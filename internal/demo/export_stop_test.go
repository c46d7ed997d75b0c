package demo

// Stopped exposes stopped to the external tests.
var Stopped = stopped
