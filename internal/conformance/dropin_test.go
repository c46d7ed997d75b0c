//go:build conformance

package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// upstreamFile is the peer's own `engine config new hatchery:vsphere`,
// filled only with what an operator fills (docs/coexistence.md): the
// vCenter connection, the workers' network (a static range: the simulated
// network has no DHCP), the hatchery's name, the CDS API URL and token,
// the region. The /mon port is set to the suite's free port (upstream's 8086
// may be taken on this machine); every other key stays as upstream wrote
// it, its [log] and [telemetry] sections and placeholder entries included.
//
// The V1 token is left empty (a V2-only hatchery): with it, this daemon
// would register the suite's V1 model before the scenario that checks the
// suite's own daemon does. The generated token, a consumer the tool made
// up and this API does not know, is replaced in any case, as an operator
// replaces it.
func (s *suite) upstreamFile(t *testing.T, env *vcsimtest.Env) string {
	t.Helper()
	engine := filepath.Join(s.peer.state, "bin", "engine")
	if _, err := os.Stat(engine); err != nil {
		engine = filepath.Join(s.peer.dir, "bin", "engine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, engine, "config", "new", "hatchery:vsphere").Output()
	if err != nil {
		t.Fatalf("engine config new hatchery:vsphere: %v", err)
	}
	doc := string(out)
	if err := os.WriteFile(filepath.Join(s.dir, "engine-vsphere.generated.toml"), out, 0o600); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(doc, "\n")
	// set replaces the value of the first line assigning key (as the tool
	// writes it, "key = value", at any indent) after the line holding
	// after.
	set := func(after, key, value string) {
		t.Helper()
		from := 0
		if after != "" {
			for from < len(lines) && !strings.Contains(lines[from], after) {
				from++
			}
		}
		for i := from; i < len(lines); i++ {
			if k, _, ok := strings.Cut(strings.TrimSpace(lines[i]), " = "); ok && k == key {
				indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " "))]
				lines[i] = indent + key + " = " + value
				return
			}
		}
		t.Fatalf("no %q after %q in upstream's file", key, after)
	}
	q := func(v string) string { return fmt.Sprintf("%q", v) }
	// The endpoint as upstream's users write it: host[:port].
	host := strings.TrimSuffix(strings.TrimPrefix(env.Endpoint, "https://"), "/sdk")
	set("[hatchery.vsphere]", "datacenterString", q(env.Datacenter))
	set("[hatchery.vsphere]", "datastoreString", q(env.Datastore))
	set("[hatchery.vsphere]", "endpoint", q(host))
	set("[hatchery.vsphere]", "networkString", q(env.Network))
	set("[hatchery.vsphere]", "password", q(env.Password))
	set("[hatchery.vsphere]", "user", q(env.User))
	// The simulated network has no DHCP server: the operator gives the
	// workers' addresses in upstream's own keys, as the suite's file does.
	set("[hatchery.vsphere]", "iprange", q("10.0.0.10/27"))
	set("[hatchery.vsphere]", "gateway", q("10.0.0.1"))
	set("[hatchery.vsphere]", "dns", q("10.0.0.2"))
	set("[hatchery.vsphere.commonConfiguration]", "name", q(s.peer.cfg.HatcheryName))
	set("[hatchery.vsphere.commonConfiguration.api]", "token", q(""))
	set("[hatchery.vsphere.commonConfiguration.api]", "tokenV2", q(s.peer.cfg.V2Token))
	set("[hatchery.vsphere.commonConfiguration.api.http]", "url", q(s.peer.cfg.APIURL))
	set("[hatchery.vsphere.commonConfiguration.http]", "port", fmt.Sprint(s.monPort))
	set("[hatchery.vsphere.commonConfiguration.provision]", "region", q(s.peer.cfg.Region))
	path := filepath.Join(s.dir, "engine-vsphere.toml")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// dropInEnv is a simulated vCenter of its own for the drop-in scenario,
// shaped as a vCenter upstream's hatchery runs against: upstream places
// its clones in the datacenter's default resource pool (it has no key
// naming one), so the datacenter has one, the cluster's
// (vcsimtest.Options.NoStandaloneHost); the suite's simulator also has a
// standalone host, where upstream's placement (and this hatchery's,
// without resourcePoolString) is ambiguous.
func (s *suite) dropInEnv(t *testing.T) *vcsimtest.Env {
	t.Helper()
	// Short: the worker's plugins listen on unix sockets under the
	// launch's directory, whose path may not exceed 108 bytes.
	guests := filepath.Join(s.dir, "gd")
	if err := os.MkdirAll(guests, 0o755); err != nil {
		t.Fatal(err)
	}
	runnerLog, err := os.Create(filepath.Join(s.dir, "guests-dropin.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runnerLog.Close() })
	env, err := vcsimtest.New(vcsimtest.Options{
		Templates:        []vcsimtest.Template{{Name: linuxTemplate}},
		NoStandaloneHost: true,
		Runner: &vcsimtest.GuestRunnerOptions{Root: guests, Log: &syncWriter{w: runnerLog},
			Env: []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}},
	})
	if err != nil {
		t.Fatalf("vcenter simulator: %v", err)
	}
	t.Cleanup(env.Close)
	// Room for the worker, as in the suite's simulator.
	env.SetResourcePoolRuntime(func(rt *types.ResourcePoolRuntimeInfo) {
		rt.Memory.MaxUsage, rt.Memory.UnreservedForVm, rt.Memory.UnreservedForPool = 64<<30, 64<<30, 64<<30
		rt.Cpu.MaxUsage, rt.Cpu.UnreservedForVm, rt.Cpu.UnreservedForPool = 64000, 64000, 64000
	})
	return env
}

// TestDropInUpstreamEngineFile: the production binary started as
// upstream's units start upstream (`start hatchery:vsphere --config
// FILE`) with upstream's own generated file, filled as an operator fills
// it, runs a V2 job to Success with its log in CDN. The vCenter's CA is
// trusted the way upstream's hatchery trusts it, through the system's
// trust store (SSL_CERT_FILE): upstream's file has no CA key.
func TestDropInUpstreamEngineFile(t *testing.T) {
	scenario(t, "upstream's own `engine config new hatchery:vsphere` file, filled as an operator fills it, runs a V2 job to Success, logs in CDN")
	s.stopDaemon(t) // the suite's own daemon, if one runs: same name, same port
	env := s.dropInEnv(t)
	path := s.upstreamFile(t, env)
	from := len(logLines(s.logPath))
	d, err := startDaemonArgs(context.Background(), s.bin, []string{"start", "hatchery:vsphere", "--config", path},
		s.logPath, []string{"SSL_CERT_FILE=" + env.CAFile}, s.monPort)
	if err != nil {
		t.Fatalf("start with upstream's file: %v; log:\n%s", err, strings.Join(lastLines(logLines(s.logPath), 30), "\n"))
	}
	defer func() {
		if err := d.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	started := strings.Join(logLines(s.logPath)[from:], "\n")
	for _, want := range []string{
		`msg="upstream configuration" key="[log], [telemetry]" detail="ignored: sections of other CDS services`,
		`key=hatchery.vsphere.guestCredentials[0] detail="ignored: upstream's placeholder entry`,
		`key=hatchery.vsphere.workerProvisioning[0] detail="ignored: upstream's placeholder entry`,
	} {
		if !strings.Contains(started, want) {
			t.Errorf("the start does not say %s", want)
		}
	}

	j, err := s.peer.injectV2(context.Background(), "wf-v2-dropin", linuxTemplate, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.v2Final(t, j, 3*time.Minute); st != "Success" {
		infos, _ := s.peer.v2Infos(context.Background(), j)
		t.Fatalf("job ended %s; infos %q", st, infos)
	}
	s.v2Logs(t, j, "hello from v2")
	// Upstream's killAwolServersInterval = 0 is the default here: a
	// cleanup pass every 120 s, so the wait is longer than noLeak's.
	waitFor(t, 4*time.Minute, "every worker VM destroyed and no guest process left", func() (bool, string) {
		var vms []string
		sctx := env.SimContext()
		for _, vm := range env.VMs() {
			sctx.WithLock(vm, func() {
				if vm.Config != nil && !vm.Config.Template {
					vms = append(vms, fmt.Sprintf("%s (%s)", vm.Name, vm.Runtime.PowerState))
				}
			})
		}
		procs := env.Runner.Running()
		return len(vms) == 0 && len(procs) == 0, fmt.Sprintf("vms %v, guest processes in %v", vms, procs)
	})
}
