package hatchery

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/workerpool"
)

// VersionInfo is the body of /mon/version.
type VersionInfo struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Version string `json:"version"`
}

// StatusHeld is the /mon/workers status of a VM held for inspection.
const StatusHeld = "Held"

// HeldWorker is a VM of a failed spawn held for inspection (the debug
// hold, docs/design.md#debug-hold). It holds no secret.
type HeldWorker struct {
	Name   string
	Reason string
	Until  time.Time
}

// HeldLister is implemented by a hatchery that holds the VMs of failed
// spawns: /mon/workers lists them after the pool. They are not workers
// and are not counted in the pool (their VMs count in the hatchery's own
// capacity).
type HeldLister interface {
	// HeldWorkers lists the held VMs with why and until when.
	HeldWorkers(ctx context.Context) []HeldWorker
}

// Handler serves /mon/version, /mon/status, /mon/workers and /mon/metrics,
// without authentication. Run serves it on commonConfiguration.http unless
// DisableMonServer is set.
func (f *Framework) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mon/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, VersionInfo{Name: f.cfg.Name, Type: f.h.ModelType(), Version: f.version})
	})
	mux.HandleFunc("GET /mon/status", func(w http.ResponseWriter, r *http.Request) {
		st := f.Status(r.Context())
		writeJSON(w, StatusHTTPCode(st), st)
	})
	mux.HandleFunc("GET /mon/workers", func(w http.ResponseWriter, r *http.Request) {
		pool := f.Pool()
		if hl, ok := f.h.(HeldLister); ok {
			for _, hw := range hl.HeldWorkers(r.Context()) {
				until := hw.Until
				pool = append(pool, workerpool.Worker{Name: hw.Name, Status: StatusHeld, Source: workerpool.SourceHeld, Reason: hw.Reason, HeldUntil: &until})
			}
		}
		writeJSON(w, http.StatusOK, pool)
	})
	mux.Handle("/mon/metrics", f.metrics)
	return mux
}

// Status is the framework's whole status, as /mon/status and heartbeats
// show it.
func (f *Framework) Status(ctx context.Context) sdk.MonitoringStatus {
	return sdk.MonitoringStatus{Now: f.now(), Lines: f.statusLines(ctx)}
}

// StatusHTTPCode is 503 when a line is an alert, 200 otherwise.
func StatusHTTPCode(st sdk.MonitoringStatus) int {
	for _, l := range st.Lines {
		if l.Status == sdk.MonitoringStatusAlert {
			return http.StatusServiceUnavailable
		}
	}
	return http.StatusOK
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}
