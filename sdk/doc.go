// Package sdk holds the CDS domain types a hatchery exchanges with the CDS API:
// worker models (V1 and V2), requirements, queued jobs, workers and the small
// helpers that read them (flavor resolution, commands, credentials).
//
// JSON field names follow the CDS API exactly (see sdk/cdsclient/testdata/captures).
package sdk
