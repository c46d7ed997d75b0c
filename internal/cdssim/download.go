package cdssim

import (
	"net/http"
	"slices"
)

// WorkerBinary is what the simulator serves as the CDS worker on GET
// /download/worker/linux/amd64 (and linux/x86_64): a stand-in, not a
// program.
var WorkerBinary = []byte("#!/bin/sh\necho cdssim worker stand-in\n")

// The names the API's download route checks: its binaries, operating
// systems and architectures. The real API answers 400 for a name outside
// them.
var (
	downloadBinaries = []string{"engine", "worker", "cdsctl"}
	downloadOS       = []string{"windows", "darwin", "linux", "freebsd", "openbsd"}
	downloadArch     = []string{"amd64", "arm", "386", "arm64", "ppc64le"}
)

// downloadArchName is the architecture a download path names, as the API
// reads it: uname -m's spellings of amd64 and 386 are accepted.
func downloadArchName(a string) string {
	switch a {
	case "x86_64":
		return "amd64"
	case "i386", "i686":
		return "386"
	}
	return a
}

// download answers GET /download/{name}/{os}/{arch} as the real API does,
// without authentication: the worker for linux/amd64 (WorkerBinary, as
// application/octet-stream; windows/amd64 too with Options.WindowsWorker),
// 400 "wrong request" for a binary, OS or
// architecture the API does not know, and 500 for a known one it does not
// hold (the real API, holding only linux/amd64 here and unable to fetch
// the others, answers so).
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	reqID := requestID()
	w.Header().Set("Request-Id", reqID)
	name, goos, arch := r.PathValue("name"), r.PathValue("os"), downloadArchName(r.PathValue("arch"))
	var ae *apiErr
	switch {
	case !slices.Contains(downloadBinaries, name):
		ae = newErr(400, errIDWrongRequest, "wrong request", "invalid given binary name: \""+name+"\"")
	case !slices.Contains(downloadOS, goos):
		ae = newErr(400, errIDWrongRequest, "wrong request", "invalid given OS: \""+goos+"\"")
	case !slices.Contains(downloadArch, arch):
		ae = newErr(400, errIDWrongRequest, "wrong request", "invalid given ARCH: \""+r.PathValue("arch")+"\"")
	case name != "worker" || arch != "amd64" || (goos != "linux" && !(goos == "windows" && s.opts.WindowsWorker)):
		ae = newErr(500, errIDInternal, "internal server error", "")
	}
	if ae != nil {
		writeErr(w, reqID, ae)
		s.record(r, ae.status)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment;filename="cds-worker-`+goos+`-amd64"`)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(WorkerBinary)
	s.record(r, http.StatusOK)
}
