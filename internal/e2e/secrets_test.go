//go:build !race

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// TestSecretsNeverLeakInAFaultRun runs the demo path with vCenter faults
// (10 % on clone, power-on, reconfigure, destroy) and CDS API 503 bursts,
// and captures everything an operator or a log pipeline could see: the
// daemon's and simulators' logs at debug level, the demo's output,
// /mon/status, /mon/workers, /mon/version and /mon/metrics scraped all
// along, every VM's annotation and ExtraConfig read from the simulator
// (at every scrape and at the end), and every error returned. It then
// looks in all of it for the secrets: the vCenter password, the CDS
// sign-in tokens V1 and V2, every worker JWT issued (captured from the
// guest launches' CDS_CONFIG, the only place it may appear), the guest
// password and each body line of the RSA private key. Zero hits.
//
// The demo's banner prints the vCenter simulator's own throwaway
// credentials on purpose (for govc); that one line is left out, and the
// test checks it is the only place the password shows in the output.
func TestSecretsNeverLeakInAFaultRun(t *testing.T) {
	const jobs = 12
	var stdout, logs, captured syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var (
		mu     sync.Mutex
		info   demo.Info
		errs   []string
		nScr   int
		faults int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stopOnce sync.Once
	stopAll := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	t.Cleanup(stopAll)
	hc := &http.Client{Timeout: 5 * time.Second}

	capture := func(i demo.Info) {
		for _, p := range []string{"/mon/status", "/mon/workers", "/mon/version", "/mon/metrics"} {
			resp, err := hc.Get(i.MonURL + p)
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				continue
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
			}
			fmt.Fprintf(&captured, "GET %s %d\n%s\n", p, resp.StatusCode, b)
		}
		fmt.Fprintln(&captured, simVMRecords(i.Env))
		mu.Lock()
		nScr++
		mu.Unlock()
	}
	onReady := func(i demo.Info) {
		mu.Lock()
		info = i
		mu.Unlock()
		injectVCenterFaults(i.Env, 0.10)
		apiBursts(i.API, 3*time.Second, 300*time.Millisecond, stop, &wg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := time.NewTicker(300 * time.Millisecond)
			defer tk.Stop()
			for {
				capture(i)
				select {
				case <-stop:
					return
				case <-tk.C:
				}
			}
		}()
	}
	onDone := func(i demo.Info, _ *demo.Report) {
		stopAll()
		capture(i)
		mu.Lock()
		faults = i.Env.InjectedFaults()
		mu.Unlock()
	}

	rep, err := demo.Run(ctx, demo.Options{
		Jobs: jobs, Once: true, Timeout: 75 * time.Second,
		JobEvery: 150 * time.Millisecond, WorkerRunTime: 300 * time.Millisecond,
		Stdout: &stdout, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Tune: func(cfg *config.Config) {
			cfg.CommonConfiguration.Provision.MaxWorker = 12
			cfg.CommonConfiguration.Provision.MaxConcurrentProvisioning = 12
			cfg.KillAwolServersInterval = 1
			cfg.InventoryRefreshInterval = 1
			oneSimulatorTask(cfg)
		},
		OnReady: onReady, OnDone: onDone,
	})
	stopAll()
	if err != nil {
		errs = append(errs, err.Error())
	}
	require.NoError(t, err)
	require.NotNil(t, rep)

	mu.Lock()
	defer mu.Unlock()
	cfg := info.Config
	cc := cfg.CommonConfiguration

	// The worker JWTs issued, from the launches' CDS_CONFIG.
	var jwts []string
	launches := 0
	for _, c := range info.Env.Guest.Calls() {
		for _, e := range c.EnvVariables {
			enc, ok := strings.CutPrefix(e, "CDS_CONFIG=")
			if !ok {
				continue
			}
			wc, derr := spawn.DecodeWorkerConfig(enc)
			require.NoError(t, derr)
			require.NotEmpty(t, wc.APIToken, "worker config of %s carries its JWT", c.VM)
			jwts = append(jwts, wc.APIToken)
			launches++
		}
	}
	require.Positive(t, launches, "launches captured")

	secrets := map[string]string{
		"vcenter password":   cfg.Password,
		"cds token v1":       cc.API.Token,
		"cds token v2":       cc.API.TokenV2,
		"guest password":     guestPassword(cfg),
		"vcenter password %": strings.ReplaceAll(cfg.Password, "-", "%2D"),
	}
	for i, j := range jwts {
		secrets[fmt.Sprintf("worker jwt %d", i)] = j
		// A JWT's signature alone is enough to replay nothing, but its
		// payload+signature tail identifies a leak of the whole token.
		if k := strings.LastIndex(j, "."); k > 0 {
			secrets[fmt.Sprintf("worker jwt %d signature", i)] = j[k+1:]
		}
	}
	pemLines := 0
	for _, l := range strings.Split(cc.RSAPrivateKey, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "-----") {
			continue
		}
		secrets[fmt.Sprintf("rsa key line %d", pemLines)] = l
		pemLines++
	}
	require.Greater(t, pemLines, 10, "the RSA key's body lines")
	for name, s := range secrets {
		require.GreaterOrEqual(t, len(s), 8, "secret %s too short to search for", name)
	}

	// The output, the banner's deliberate credentials line aside.
	out := stdout.String()
	var outKept []string
	bannerHits := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "user / password") || strings.Contains(l, "GOVC_PASSWORD=") {
			bannerHits++
			continue
		}
		outKept = append(outKept, l)
	}
	assert.Equal(t, 2, bannerHits, "the banner's two credential lines")

	corpus := map[string]string{
		"daemon and simulator logs (debug)": logs.String(),
		"demo output":                       strings.Join(outKept, "\n"),
		"/mon scrapes and vm records":       captured.String(),
		"errors returned":                   strings.Join(errs, "\n"),
		"report":                            fmt.Sprintf("%+v", *rep),
	}
	for where, text := range corpus {
		require.NotEmpty(t, text+"x", where)
		for name, s := range secrets {
			for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
				if i := strings.Index(text, form); i >= 0 {
					lo, hi := max(0, i-120), min(len(text), i+len(form)+40)
					t.Errorf("%s found in %s: …%s…", name, where, text[lo:hi])
				}
			}
		}
	}
	t.Logf("searched %d secrets (%d worker JWTs, %d RSA key lines) in %d kB of logs, %d kB of /mon scrapes and VM records (%d rounds), %d kB of output, %d errors; %d vCenter faults injected",
		len(secrets), len(jwts), pemLines, len(logs.String())>>10, len(captured.String())>>10, nScr, len(out)>>10, len(errs), faults)
	assert.Positive(t, faults, "vCenter faults were injected")
	assert.Contains(t, logs.String(), "injected", "the logs saw the injected faults")
	assert.Greater(t, nScr, 5, "scrape rounds")
}

// guestPassword is the guest password of the demo's credentials.
func guestPassword(cfg *config.Config) string {
	for _, g := range cfg.GuestCredentials {
		if g.Password != "" {
			return g.Password
		}
	}
	return ""
}

// simVMRecords is every VM's name, annotation and ExtraConfig as the
// simulator holds them.
func simVMRecords(env *vcsimtest.Env) string {
	var b strings.Builder
	sctx := env.SimContext()
	for _, o := range env.Model.Map().All("VirtualMachine") {
		vm, ok := o.(*simulator.VirtualMachine)
		if !ok {
			continue
		}
		sctx.WithLock(vm, func() {
			fmt.Fprintf(&b, "vm %s\n", vm.Name)
			if c := vm.Config; c != nil {
				fmt.Fprintf(&b, "  annotation %s\n", c.Annotation)
				for _, ov := range c.ExtraConfig {
					if x, ok := ov.(*types.OptionValue); ok {
						fmt.Fprintf(&b, "  extra %s=%v\n", x.Key, x.Value)
					}
				}
			}
		})
	}
	return b.String()
}
