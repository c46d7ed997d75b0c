//go:build conformance

package conformance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// Templates of the simulated vCenter: the V1 and V2 models' image, a
// cloud-init one and a Windows one (a Windows guest id: the fake guest
// plays a Windows guest in its clones). None holds a worker binary: every
// guest launch runs in a new, empty directory.
const (
	linuxTemplate   = "debian12"
	cloudTemplate   = "debian12-cloud"
	windowsTemplate = "win2022"
)

// suite is what every scenario shares: one real CDS, one simulated
// vCenter whose guests run processes, the daemon's binary and its current
// run, and the recording proxy in front of the API.
type suite struct {
	dir     string
	peer    *peer
	env     *vcsimtest.Env
	bin     string
	cfgPath string
	secrets []string
	monPort int
	logPath string
	proxy   *recorder

	mu      sync.Mutex
	d       *daemon
	results []string // one line per scenario
	failed  int
}

var s *suite

// recorder is a loopback reverse proxy in front of the real API through
// which the daemon (and only the daemon: workers are given the API's own
// URL) reaches it; it keeps every answer with its status and the API's
// Request-Id, so that the suite can list each 4xx/5xx the API gave the
// hatchery with the reason the API logged.
type recorder struct {
	srv *http.Server
	url string

	mu      sync.Mutex
	answers []answer
}

// answer is one API answer to the hatchery.
type answer struct {
	Method, Path, RequestID string
	Status                  int
	At                      time.Time
}

func newRecorder(target string) (*recorder, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &recorder{url: "http://" + ln.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		r.mu.Lock()
		r.answers = append(r.answers, answer{Method: resp.Request.Method, Path: resp.Request.URL.Path,
			RequestID: resp.Header.Get("Request-Id"), Status: resp.StatusCode, At: time.Now()})
		r.mu.Unlock()
		return nil
	}
	rp.ErrorHandler = func(w http.ResponseWriter, req *http.Request, err error) {
		w.WriteHeader(http.StatusBadGateway)
		if errors.Is(err, context.Canceled) {
			return // the daemon gave up the request (its shutdown): no answer to record
		}
		r.mu.Lock()
		r.answers = append(r.answers, answer{Method: req.Method, Path: req.URL.Path, Status: http.StatusBadGateway, At: time.Now()})
		r.mu.Unlock()
	}
	r.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// errors returns the answers with a status of 400 or more.
func (r *recorder) errors() []answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []answer
	for _, a := range r.answers {
		if a.Status >= 400 {
			out = append(out, a)
		}
	}
	return out
}

// count is the number of answers so far.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.answers)
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := findPeer()
	if err != nil {
		fmt.Println("conformance:", err)
		return 1
	}
	if dir == "" {
		fmt.Println("conformance: no real CDS peer: set CDS_REAL to the cds-real folder (its `up STATE` and `down STATE`" +
			" start and stop a real CDS API, CDN and worker; docs/conformance.md), or place it at ../shared/cds-real beside the repository")
		if os.Getenv("CI") == "true" {
			fmt.Println("conformance: CI=true: the peer is required")
			return 1
		}
		fmt.Println("conformance: nothing run")
		return 0
	}
	// Under /var/tmp rather than /tmp: the peer's README warns that a
	// cleaned /tmp loses the database mid-run.
	work, err := os.MkdirTemp("/var/tmp", "hv-conformance-")
	if err != nil {
		fmt.Println("conformance:", err)
		return 1
	}
	code := 1
	defer func() {
		if code == 0 && os.Getenv("CONFORMANCE_KEEP") == "" {
			_ = os.RemoveAll(work)
		} else if code != 0 {
			fmt.Println("conformance: kept for inspection:", work)
		}
	}()
	code = runIn(m, dir, work)
	return code
}

func runIn(m *testing.M, peerDir, work string) int {
	ctx := context.Background()
	peerLog, err := os.Create(filepath.Join(work, "peer.log"))
	if err != nil {
		fmt.Println("conformance:", err)
		return 1
	}
	defer peerLog.Close()
	t0 := time.Now()
	// up picks free ports, then starts the services on them: another
	// process may take one in between (bind: address already in use).
	// Such a start is tried again in a new state directory.
	var p *peer
	for attempt := 1; ; attempt++ {
		p, err = startPeer(ctx, peerDir, filepath.Join(work, fmt.Sprintf("cds-%d", attempt)), peerLog)
		if err == nil {
			break
		}
		if p != nil {
			p.stop(peerLog)
		}
		fmt.Printf("conformance: start the real CDS (attempt %d): %v (log: %s)\n", attempt, err, peerLog.Name())
		if b, rerr := os.ReadFile(peerLog.Name()); rerr == nil {
			for _, l := range lastLines(strings.Split(string(b), "\n"), 400) {
				if strings.HasPrefix(l, "up: ") && (strings.Contains(l, "FAILED") || strings.Contains(l, "exited")) {
					fmt.Println("conformance:   " + l)
				}
			}
		}
		if attempt == 3 {
			return 1
		}
	}
	defer p.stop(peerLog)
	fmt.Printf("conformance: real CDS %s up in %s (api %s)\n", short(p.commit), time.Since(t0).Round(time.Millisecond), p.cfg.APIURL)

	bin, err := buildDaemon(work)
	if err != nil {
		fmt.Println("conformance:", err)
		return 1
	}
	guests := filepath.Join(work, "guests")
	if err := os.MkdirAll(guests, 0o755); err != nil {
		fmt.Println("conformance:", err)
		return 1
	}
	runnerLog, err := os.Create(filepath.Join(work, "guests.log"))
	if err != nil {
		fmt.Println("conformance:", err)
		return 1
	}
	defer runnerLog.Close()
	env, err := vcsimtest.New(vcsimtest.Options{
		Templates: []vcsimtest.Template{{Name: linuxTemplate}, {Name: cloudTemplate}, {Name: windowsTemplate, GuestID: vcsimtest.WindowsGuestID}},
		Runner: &vcsimtest.GuestRunnerOptions{Root: guests, Log: &syncWriter{w: runnerLog},
			Env: []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}},
	})
	if err != nil {
		fmt.Println("conformance: vcenter simulator:", err)
		return 1
	}
	defer env.Close()
	// vcsim's resource pool reports about 1 GB unreserved: give it room
	// for the scenarios' VMs (64 GB, 64 GHz), as a cluster's pool would.
	env.SetResourcePoolRuntime(func(rt *types.ResourcePoolRuntimeInfo) {
		rt.Memory.MaxUsage, rt.Memory.UnreservedForVm, rt.Memory.UnreservedForPool = 64<<30, 64<<30, 64<<30
		rt.Cpu.MaxUsage, rt.Cpu.UnreservedForVm, rt.Cpu.UnreservedForPool = 64000, 64000, 64000
	})

	rec, err := newRecorder(p.cfg.APIURL)
	if err != nil {
		fmt.Println("conformance:", err)
		return 1
	}
	defer rec.srv.Close()
	monPort, err := freePort()
	if err != nil {
		fmt.Println("conformance:", err)
		return 1
	}
	cfgPath, err := writeConfig(work, env, p, monPort, rec.url)
	if err != nil {
		fmt.Println("conformance:", err)
		return 1
	}
	key, err := newRSAKey()
	if err != nil {
		fmt.Println("conformance:", err)
		return 1
	}
	s = &suite{dir: work, peer: p, env: env, bin: bin, cfgPath: cfgPath, monPort: monPort, proxy: rec,
		logPath: filepath.Join(work, "hatchery.log"),
		secrets: []string{
			"CDS_HATCHERY_VSPHERE_PASSWORD=" + env.Password,
			"CDS_HATCHERY_VSPHERE_API_TOKEN=" + p.cfg.V1Token,
			"CDS_HATCHERY_VSPHERE_API_TOKENV2=" + p.cfg.V2Token,
			"CDS_HATCHERY_VSPHERE_RSA_PRIVATE_KEY=" + key,
		}}
	if err := s.setupCDS(ctx); err != nil {
		fmt.Println("conformance: set up CDS:", err)
		return 1
	}

	code := m.Run()
	s.mu.Lock()
	d := s.d
	s.mu.Unlock()
	if d != nil {
		if err := d.stop(); err != nil {
			fmt.Println("conformance: daemon stop:", err)
			code = 1
		}
	}
	if !s.reportAPIErrors() {
		code = 1
	}
	fmt.Printf("conformance: the suite took %s (the peer's start, the build and %d scenarios)\n", time.Since(t0).Round(time.Second), len(s.results))
	if code == 0 {
		fmt.Printf("conformance: %d scenarios passed against CDS %s\n", len(s.results), p.commit)
	} else {
		fmt.Printf("conformance: FAILED (%d of %d scenarios failed) against CDS %s; daemon log %s\n", s.failed, len(s.results), p.commit, s.logPath)
	}
	return code
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// expectedAPIError says why an answer of 4xx/5xx to the hatchery is part
// of the protocol ("" when it is not expected).
func expectedAPIError(a answer) string { return "" }

// reportAPIErrors prints every 4xx/5xx the API gave the hatchery during
// the suite, with the reason the API logged, and tells whether each was
// expected.
func (s *suite) reportAPIErrors() bool {
	errs := s.proxy.errors()
	causes := s.apiCauses()
	fmt.Printf("conformance: the API answered %d requests of the hatchery, %d of them with 4xx/5xx\n", s.proxy.count(), len(errs))
	ok := true
	counts := map[string]int{}
	var lines []string
	for _, a := range errs {
		why := expectedAPIError(a)
		verdict := "UNEXPECTED"
		if why != "" {
			verdict = "expected: " + why
		} else {
			ok = false
		}
		line := fmt.Sprintf("  %d %s %s — %s; api log: %s", a.Status, a.Method, a.Path, verdict, causes[a.RequestID])
		if counts[line] == 0 {
			lines = append(lines, line)
		}
		counts[line]++
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Printf("%s (x%d)\n", l, counts[l])
	}
	return ok
}

// apiCauses maps a request id to the reason the API logged for it (the
// line before its end line), from the API's request log.
func (s *suite) apiCauses() map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(s.peer.cfg.Logs.API)
	if err != nil {
		return out
	}
	lines := strings.Split(ansiColour.ReplaceAllString(string(b), ""), "\n")
	for i, l := range lines {
		if !requestEnd.MatchString(l) {
			continue
		}
		m := logField.FindAllStringSubmatch(l, -1)
		for _, f := range m {
			if f[1] == "request_id" && i > 0 && !requestEnd.MatchString(lines[i-1]) {
				out[f[2]] = strings.TrimSpace(cutLogPrefix(lines[i-1]))
			}
		}
	}
	return out
}

// cutLogPrefix drops the date and level of an API log line.
func cutLogPrefix(l string) string {
	if i := strings.Index(l, "] "); i >= 0 && i < 40 {
		return l[i+2:]
	}
	return l
}
