// Package promtest proves the shipped monitoring against a real Prometheus:
// the rules of configs/prometheus pass promtool's checks and unit tests, and
// a Prometheus on loopback scraping the in-process demo answers every
// expression of the Grafana dashboard and of docs/metrics.md, and fires the
// spawn-failure alert when the demo's spawns fail. It holds tests only.
package promtest
