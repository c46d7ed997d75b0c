package hatchery

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strconv"
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

// httpURLSetter is a CDS client that sends the hatchery's URL at sign-in
// (cdsclient.Client.SetHTTPURL).
type httpURLSetter interface {
	SetHTTPURL(u string)
}

// ServiceURL is the URL of this hatchery's /mon endpoints that the
// sign-in sends (V1 service.http_url, V2 http_url) and the API shows in its
// service list: commonConfiguration.url when set; otherwise http:// and the
// address the /mon server listens on (listen, "" when it does not listen:
// then commonConfiguration.http), a listener on every interface named by
// the machine's host name. "" when no URL is known (no listener on a port
// chosen at start).
func ServiceURL(cfg CommonConfiguration, listen string) string {
	if cfg.URL != "" {
		return cfg.URL
	}
	host, port := cfg.HTTP.Addr, strconv.Itoa(cfg.HTTP.Port)
	if h, p, err := net.SplitHostPort(listen); listen != "" && err == nil {
		host, port = h, p
	}
	if port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		name, err := os.Hostname()
		if err != nil || name == "" {
			name = "localhost"
		}
		host = name
	}
	return "http://" + net.JoinHostPort(host, port)
}
