package demo

// The demo's simulators (StartSims), the configuration that points the
// daemon at them (demoConfig, DaemonOptions) and the V1 model they serve.

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/vmware/govmomi/vim25/types"
)

// Sims are the demo's two simulators and the hatchery configuration that
// points at them. Tests use them to run the daemon more than once on the
// same simulators (a restart).
type Sims struct {
	// Env is the vCenter simulator.
	Env *vcsimtest.Env
	// API is the CDS API simulator.
	API *cdssim.Server
	// Config is the hatchery's configuration (validated).
	Config *config.Config

	closeSim func()
}

// SimsOptions shape the simulators StartSims starts, for tests; the zero
// value is the demo's.
type SimsOptions struct {
	// API edit the CDS API simulator's options before it starts, in order
	// (shorter booking lifetimes).
	API []func(*cdssim.Options)
	// SerialTasks runs the vCenter simulator's clone, destroy, reconfigure
	// and rename tasks one at a time (vcsimtest.Options.SerialTasks: a
	// workaround for the simulator's own races, for tests with two
	// instances under the race detector).
	SerialTasks bool
}

// StartSims starts the demo's vCenter simulator (templates debian12 and the
// V1 model's, a resource pool of finite capacity) and CDS API simulator (the
// V1 model), and builds the demo configuration for them with the /mon
// address listen ("" is 127.0.0.1 on a free port), shaped by o. Close
// stops them.
func StartSims(listen string, log *slog.Logger, o SimsOptions) (*Sims, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := demoConfig(listen)
	if err != nil {
		return nil, err
	}

	env, closeSim, err := startSimulator(vcsimtest.Options{
		User: vcUser, Password: vcPassword,
		GuestUser: guestUser, GuestPassword: guestPassword,
		Templates: []vcsimtest.Template{
			{Name: imageTemplate, CPUs: 2, MemoryMB: 4096},
			{Name: cloudInitTemplate, CPUs: 2, MemoryMB: 4096},
			{Name: windowsTemplate, CPUs: 2, MemoryMB: 4096, GuestID: vcsimtest.WindowsGuestID},
			{Name: instantTemplate, CPUs: 2, MemoryMB: 4096},
			{Name: v1ModelName, CPUs: 2, MemoryMB: 4096, Annotation: v1TemplateAnnotation(cfg)},
		},
		ReadyDelay:  300 * time.Millisecond,
		Logger:      log.With("component", "vcsim"),
		SerialTasks: o.SerialTasks,
		// vCenter forgets a task some minutes after it ended; the
		// simulator would keep every one, which a soak of hours reads
		// as growth of the process (docs/operations.md#soak).
		TaskRetention: vcsimtest.DefaultTaskRetention,
		// cluster-a and cluster-b, the demo's two placements (demo.toml).
		Placements: true,
	})
	if err != nil {
		return nil, err
	}
	// Resource pools of finite capacity: 64 GB and 64 GHz unreserved, the
	// templates' cluster's and each placement cluster's root pool.
	finite := func(rt *types.ResourcePoolRuntimeInfo) {
		rt.Memory.MaxUsage, rt.Memory.UnreservedForVm, rt.Memory.UnreservedForPool = 64<<30, 64<<30, 64<<30
		rt.Cpu.MaxUsage, rt.Cpu.UnreservedForVm, rt.Cpu.UnreservedForPool = 64000, 64000, 64000
	}
	env.SetResourcePoolRuntime(finite)
	for _, cluster := range []string{vcsimtest.ClusterA, vcsimtest.ClusterB} {
		env.SetClusterPoolRuntime(cluster, finite)
	}

	// The API holds the Windows worker build: the Windows model downloads it.
	ao := cdssim.Options{HatcheryName: hatcheryName, Logger: log.With("component", "cdssim"), WindowsWorker: true}
	for _, f := range o.API {
		f(&ao)
	}
	api, err := cdssim.New(ao)
	if err != nil {
		closeSim()
		return nil, fmt.Errorf("demo: start cds api simulator: %w", err)
	}
	// As the API does: the model shows a reference, the secret holds the value.
	api.AddModelV1(v1Model(), map[string]string{v1PasswordSecret: guestPassword})

	cfg.Endpoint, cfg.User, cfg.Password = env.Endpoint, env.User, env.Password
	cfg.CAFile, cfg.Insecure = env.CAFile, false
	// The clones go to the placements (demo.toml: cluster-a, cluster-b),
	// which name their pools and datastores; resourcePoolString stays
	// unset beside them.
	cfg.FolderString = env.Folder
	cfg.CardName = vcsimtest.CardName
	cc := &cfg.CommonConfiguration
	cc.API.HTTP.URL = api.URL()
	// The demo's workers are simulated and send no logs: the API
	// simulator's URL stands for the CDN, so that the hatchery neither asks
	// for one nor warns that there is none.
	cc.CDN.URL = api.URL()
	cc.API.Token, cc.API.TokenV2 = api.TokenV1(), api.TokenV2()
	if err := cfg.Validate(); err != nil {
		api.Close()
		closeSim()
		return nil, fmt.Errorf("demo: configuration: %w", err)
	}
	return &Sims{Env: env, API: api, Config: cfg, closeSim: closeSim}, nil
}

// Close stops both simulators.
func (s *Sims) Close() {
	s.API.Close()
	s.closeSim()
}

// demoRequestTimeout bounds each of the demo daemon's vCenter requests:
// the test clients' bound (vcsimtest.TestRequestTimeout, 60 s) rather than
// vcenter.DefaultRequestTimeout (15 s, sized for a real vCenter). The
// simulator answers from this very process, on a machine that may be busy
// (two cores shared with builds and tests): at a load average of 20, two
// soaks saw a watch's read of the VM changes (which vcsim answers by
// collecting every filter again) answered after more than 15 s at the
// same second, logged as WARN 'vcenter unreachable'
// (docs/high-availability.md says the same of the two-instance test). A
// starved process is not an unreachable vCenter.
const demoRequestTimeout = vcsimtest.TestRequestTimeout

// DaemonOptions are the options the demo runs the daemon with: fast loops
// and back-offs, short readiness polls, log to log.
func DaemonOptions(cfg *config.Config, log *slog.Logger) daemon.Options {
	return daemon.Options{
		Config:          cfg,
		Logger:          log,
		Version:         "demo",
		DialBackoffMin:  100 * time.Millisecond,
		DialBackoffMax:  time.Second,
		Intervals:       hatchery.Intervals{Heartbeat: 5 * time.Second, QueuePolling: 2 * time.Second, WorkerPool: time.Second, BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second, Shutdown: 10 * time.Second},
		MetricsInterval: 2 * time.Second,
		ShutdownTimeout: 20 * time.Second,
		// The instant parents are tended as often as the demo's other
		// loops run (demo.toml, demoConfig): a parent built at start
		// serves the first instant job.
		InstantParentsInterval: 2 * time.Second,
		VCenterConfig: func(cc *vcenter.Config) {
			cc.PollInterval = 100 * time.Millisecond // waits for readiness and IPs end fast
			cc.RequestTimeout = demoRequestTimeout
		},
	}
}

// demoConfig is configs/demo.toml with the /mon address of listen, a fresh
// RSA key and placeholders for what the simulators decide.
func demoConfig(listen string) (*config.Config, error) {
	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := config.LoadFrom(bytes.NewReader(config.DemoConfig()), config.LoadOptions{LookupEnv: noEnv})
	if err != nil {
		return nil, fmt.Errorf("demo: load configs/demo.toml: %w", err)
	}
	cc := &cfg.CommonConfiguration
	cc.Name = hatcheryName
	cc.HTTP.Addr, cc.HTTP.Port = "127.0.0.1", 0
	if listen != "" {
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			return nil, fmt.Errorf("demo: --listen %q: %w", listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("demo: --listen %q: bad port", listen)
		}
		if host == "" {
			host = "127.0.0.1"
		}
		cc.HTTP.Addr, cc.HTTP.Port = host, p
	}
	key, err := GenerateRSAKeyPEM()
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	cc.RSAPrivateKey = key
	// demo.toml's 5 addresses would hold the jobs back behind the warm pool.
	cfg.IPRange = "10.0.0.10/27"
	// Short loops, so that the demo moves.
	cfg.KillAwolServersInterval = 2
	cfg.KillDisabledWorkersInterval = 5
	cfg.WorkerProvisioningInterval = 3
	cfg.InventoryRefreshInterval = 2
	for i := range cfg.GuestCredentials {
		if cfg.GuestCredentials[i].Bootstrap == config.BootstrapCloudInit {
			continue // no guest account: cloud-init starts the worker
		}
		cfg.GuestCredentials[i].Username, cfg.GuestCredentials[i].Password = guestUser, guestPassword
	}
	return cfg, nil
}

// v1Model is the demo's V1 worker model: image debian12.
func v1Model() sdk.Model {
	return sdk.Model{
		Name:             v1ModelName,
		Type:             sdk.VSphere,
		Group:            &sdk.Group{ID: 1, Name: v1ModelGroup},
		UserLastModified: v1ModelModified,
		ModelVirtualMachine: sdk.ModelVirtualMachine{
			// The API's default command, written with {{.API}}.
			Image: imageTemplate, Cmd: v1ModelCmd, PostCmd: "sudo shutdown -h now",
			User: guestUser, Password: "{{." + v1PasswordSecret + "}}",
		},
	}
}

// v1ModelCmd is the V1 model's command: the CDS API's default command
// (without its exec, so that the post-command powers the VM off).
const v1ModelCmd = "curl {{.API}}/download/worker/linux/$(uname -m) -o worker --retry 10 --retry-max-time 120 && chmod +x worker && ./worker"

// v1PasswordSecret is the V1 model's secret holding its guest password.
const v1PasswordSecret = "secrets.vsphere_password"

// v1ModelModified is the V1 model's version, also written in its template.
var v1ModelModified = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// v1TemplateAnnotation marks the V1 model's template as this hatchery's,
// built from the current version of the model: no registration is needed.
func v1TemplateAnnotation(cfg *config.Config) string {
	return inventory.Annotation{
		HatcheryName:            cfg.CommonConfiguration.Name,
		WorkerModelPath:         v1ModelGroup + "/" + v1ModelName,
		VMwareModelPath:         imageTemplate,
		WorkerModelLastModified: strconv.FormatInt(v1ModelModified.Unix(), 10),
		Model:                   true,
		Created:                 time.Now().UTC(),
	}.Marshal()
}
