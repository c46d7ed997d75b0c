//go:build conformance

package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// daemon is one run of the production binary: `hatchery-vsphere start
// --config FILE`, with its secrets in its environment, its log in a file.
type daemon struct {
	cmd     *exec.Cmd
	logPath string
	monURL  string
	done    chan struct{}
	err     error
}

// configTemplate is the daemon's configuration: the vCenter simulator,
// the real API, short loop intervals so that a scenario sees the cleanup
// within seconds, a V1 model template, a cloud-init template and the
// flavors a V2 runs-on may name. Secrets come from the environment.
var configTemplate = template.Must(template.New("hatchery.toml").Parse(`
[hatchery.vsphere]
  endpoint = "{{.Endpoint}}"
  user = "{{.User}}"
  caFile = "{{.CAFile}}"
  datacenterString = "{{.Datacenter}}"
  datastoreString = "{{.Datastore}}"
  networkString = "{{.Network}}"
  resourcePoolString = "{{.ResourcePool}}"
  folderString = "{{.Folder}}"
  cardName = "{{.CardName}}"
  iprange = "10.0.0.10/27"
  gateway = "10.0.0.1"
  dns = "10.0.0.2"
  subnetMask = "255.255.255.0"
  killAwolServersInterval = 2
  killDisabledWorkersInterval = 5
  inventoryRefreshInterval = 2
  quarantineThreshold = 10
  defaultFlavor = "small"
  # No drain at stop: the suite's stops test what a stop does to spawns in
  # flight without one (cut, their jobs released, TestSIGTERMWithJobsBooked);
  # the drain itself is tested on the CDS simulator (internal/e2e,
  # TestRollingUpgradeWithDrain), it adds no exchange with the API.
  drainTimeout = 0
  [hatchery.vsphere.commonConfiguration]
    name = "{{.Name}}"
    [hatchery.vsphere.commonConfiguration.http]
      addr = "127.0.0.1"
      port = {{.MonPort}}
    [hatchery.vsphere.commonConfiguration.api]
      [hatchery.vsphere.commonConfiguration.api.http]
        url = "{{.Proxy}}"
    [hatchery.vsphere.commonConfiguration.provision]
      region = "{{.Region}}"
      maxWorker = 6
      maxConcurrentProvisioning = 4
      registerFrequency = 5
      maxAttemptsNumberBeforeFailure = 2
      [hatchery.vsphere.commonConfiguration.provision.workerApiHttp]
        url = "{{.API}}"
  [[hatchery.vsphere.flavors]]
    name = "small"
    cpus = 2
    memoryMB = 4096
  [[hatchery.vsphere.flavors]]
    name = "medium"
    cpus = 4
    memoryMB = 8192
  [[hatchery.vsphere.guestCredentials]]
    modelVMWare = "{{.CloudTemplate}}"
    bootstrap = "cloud-init"
  [[hatchery.vsphere.guestCredentials]]
    modelVMWare = "{{.WindowsTemplate}}"
    username = "{{.GuestUser}}"
    password = "{{.GuestPassword}}"
    os = "windows"
`))

// configData fills configTemplate.
type configData struct {
	Endpoint, User, CAFile                               string
	Datacenter, Datastore, Network, ResourcePool, Folder string
	CardName, Name, API, Proxy, Region, CloudTemplate    string
	MonPort                                              int
	// The Windows model's template and the guest account the simulator's
	// fake guest accepts (vcsimtest's defaults, test values).
	WindowsTemplate, GuestUser, GuestPassword string
}

// freePort is a loopback TCP port nothing listens on.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// buildDaemon builds the production binary (no build tag: no simulator in
// it) into dir.
func buildDaemon(dir string) (string, error) {
	bin := filepath.Join(dir, "hatchery-vsphere")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/cds-contrib/hatchery-vsphere/cmd/hatchery-vsphere").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w: %s", err, out)
	}
	return bin, nil
}

// newRSAKey is a PEM PKCS#1 key for the hatchery's worker tokens.
func newRSAKey() (string, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})), nil
}

// writeConfig writes the daemon's configuration for env and p into dir.
// The hatchery reaches the API through proxy; its workers reach the API
// itself (provision.workerApiHttp).
func writeConfig(dir string, env *vcsimtest.Env, p *peer, monPort int, proxy string) (string, error) {
	var b bytes.Buffer
	err := configTemplate.Execute(&b, configData{
		Endpoint: env.Endpoint, User: env.User, CAFile: env.CAFile,
		Datacenter: env.Datacenter, Datastore: env.Datastore, Network: env.Network,
		ResourcePool: env.ResourcePool, Folder: env.Folder, CardName: vcsimtest.CardName,
		Name: p.cfg.HatcheryName, API: p.cfg.APIURL, Proxy: proxy, Region: p.cfg.Region,
		CloudTemplate: cloudTemplate, MonPort: monPort,
		WindowsTemplate: windowsTemplate, GuestUser: vcsimtest.DefaultGuestUser, GuestPassword: vcsimtest.DefaultGuestPassword,
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "hatchery.toml")
	return path, os.WriteFile(path, b.Bytes(), 0o600)
}

// startDaemon starts bin with the configuration and the secrets, and
// waits for /mon/status to answer.
func startDaemon(ctx context.Context, bin, cfgPath, logPath string, env []string, monPort int) (*daemon, error) {
	return startDaemonArgs(ctx, bin, []string{"start", "--config", cfgPath}, logPath, env, monPort)
}

// startDaemonArgs is startDaemon with the command line's arguments.
func startDaemonArgs(ctx context.Context, bin string, args []string, logPath string, env []string, monPort int) (*daemon, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "==== start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	d := &daemon{cmd: cmd, logPath: logPath, monURL: fmt.Sprintf("http://127.0.0.1:%d", monPort), done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	deadline := time.After(30 * time.Second)
	for {
		resp, err := http.Get(d.monURL + "/mon/version")
		if err == nil {
			resp.Body.Close()
			return d, nil
		}
		select {
		case <-d.done:
			return nil, fmt.Errorf("daemon exited at start: %v", d.err)
		case <-deadline:
			d.kill()
			return nil, fmt.Errorf("daemon /mon not answering after 30 s: %w", err)
		case <-ctx.Done():
			d.kill()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// stop sends SIGTERM and waits for the exit (bounded: the daemon's own
// shutdown is bounded by 30 s).
func (d *daemon) stop() error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return d.err
	case <-time.After(45 * time.Second):
		d.kill()
		return fmt.Errorf("daemon still running 45 s after SIGTERM")
	}
}

// kill ends the daemon at once.
func (d *daemon) kill() {
	_ = d.cmd.Process.Kill()
	<-d.done
}

// logLines returns the daemon log's lines (every run appends to it).
func logLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// syncWriter serialises writes to a shared log.
type syncWriter struct {
	mu sync.Mutex
	w  *os.File
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// testingT is the part of *testing.T the helpers use.
type testingT interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

var _ testingT = (*testing.T)(nil)
