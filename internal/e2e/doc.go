// Package e2e holds the end-to-end tests of the daemon on the demo's path.
// Its tests are built without the race detector but one, which runs
// under -race in CI; see e2e_test.go.
package e2e
