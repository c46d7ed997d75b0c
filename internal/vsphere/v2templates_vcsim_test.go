package vsphere_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// TestVcsimV2TemplateNotAllowed: with v2TemplateNames = ["debian1?"], a V2
// job whose model names another team's template (which exists in the
// datacenter) is refused with the code template: its infos get one
// warning naming the template and the patterns, it is neither taken nor
// cloned for, and it stays waiting; a job naming an allowed template is
// still taken and spawned. Without the check the first job would be taken
// and its template cloned (two CloneVM_Task, no warning).
func TestVcsimV2TemplateNotAllowed(t *testing.T) {
	t.Parallel()
	const name = "hatch-tpl"
	env := vcsimtest.Start(t, vcsimtest.Options{Templates: []vcsimtest.Template{{Name: vcsimtest.DefaultTemplate}, {Name: "team-b-secret"}}})
	viSetPool(env, 1<<40, 1<<20) // the resource pool never limits
	ctx, cancel := context.WithTimeout(env.Context(), 120*time.Second)
	defer cancel()
	sim := cdssim.Start(t, cdssim.Options{CDN: &sdk.CDNConfig{HTTPURL: "http://cdn.test"}})

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	pub, err := hatchery.PublicKeyPEM(key)
	require.NoError(t, err)

	cfg := env.Config()
	cc := hatchery.DefaultCommonConfiguration()
	cc.Name = name
	cc.RSAPrivateKey = keyPEM
	cc.HTTP = hatchery.HTTPConfig{Addr: "127.0.0.1", Port: 0}
	cc.API.HTTP.URL = sim.URL()
	cc.API.TokenV2 = sim.TokenV2()
	cc.API.RequestTimeout = 5
	cfg.CommonConfiguration = cc
	cfg.Flavors = viFlavors()
	cfg.DefaultFlavor = "small"
	cfg.V2TemplateNames = []string{"debian1?"}
	// A static address: the simulated guest reports the one its
	// customization gave it.
	cfg.IPRange = "10.79.0.10/24"
	cfg.Gateway, cfg.SubnetMask, cfg.DNS = "10.79.0.1", "255.255.255.0", "10.79.0.2"
	inv := env.Inventory(cfg)
	logs := &testutil.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	vh, err := vsphere.New(vsphere.Options{Config: cfg, Client: env.Client, Inventory: inv, Logger: log})
	require.NoError(t, err)
	client, err := cdsclient.New(cdsclient.Config{
		APIURL: sim.URL(), TokenV2: cc.API.TokenV2, RequestTimeout: 5 * time.Second, ServiceName: name,
		PublicKey: pub, Version: "test", Logger: log,
	})
	require.NoError(t, err)
	skips := &sqSkips{}
	fw, err := hatchery.New(hatchery.Options{
		Config: cc, Hatchery: vh, Client: client, Logger: log, Version: "test", Observer: skips,
		DisableMonServer: true,
		Intervals: hatchery.Intervals{
			// Polls often, so that the refused job is looked at again and
			// again: it is told once.
			Heartbeat: time.Second, QueuePolling: 100 * time.Millisecond, Register: time.Hour,
			WorkerPool: 50 * time.Millisecond, WorkerPoolMin: 10 * time.Millisecond,
			BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Shutdown: 10 * time.Second,
		},
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = fw.Run(runCtx) }()
	defer func() { stop(); <-done }()

	addJob := func(model, image string) string {
		spec, err := json.Marshal(sdk.V2WorkerModelVSphereSpec{Image: image, Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword})
		require.NoError(t, err)
		return sim.AddJobV2(cdssim.JobV2{
			Model:  sdk.V2WorkerModel{Name: model, OSArch: "linux/amd64", Type: sdk.VSphere, Spec: spec},
			RunsOn: sdk.V2JobRunsOn{Model: model, Flavor: "small"},
		})
	}
	before := env.Client.Stats()

	refused := addJob("stolen", "team-b-secret")
	var told []string
	require.Eventually(t, func() bool {
		st, _ := sim.JobV2(refused)
		told = told[:0]
		for _, in := range st.Infos {
			told = append(told, in.Level+": "+in.Message)
		}
		return len(told) > 0
	}, 60*time.Second, 10*time.Millisecond, "the refused job is told why")
	assert.Equal(t, []string{`warning: hatchery hatch-tpl does not start workers for this job: template "team-b-secret" is not among the templates V2 models may name here (v2TemplateNames: "debian1?")`}, told)

	allowed := addJob("ci", vcsimtest.DefaultTemplate)
	require.Eventually(t, func() bool {
		st, _ := sim.JobV2(allowed)
		return st.TakenBy == name && strings.Contains(logs.String(), `"msg":"worker spawned"`)
	}, 90*time.Second, 10*time.Millisecond, "the job naming an allowed template is taken and spawned")

	// The refused job was looked at again since (the allowed one's
	// processing came after); still told once, never taken.
	require.Eventually(t, func() bool {
		return strings.Count(logs.String(), `"reason":"template"`) >= 2
	}, 30*time.Second, 10*time.Millisecond, "the refused job is refused again at later polls")
	st, _ := sim.JobV2(refused)
	assert.Equal(t, sdk.StatusWaiting, st.Status)
	assert.Empty(t, st.TakenBy)
	assert.Len(t, st.Infos, 1, "told once")
	assert.Contains(t, skips.got(), string(refusal.ReasonTemplate))

	sent := env.Client.Stats().Sub(before)
	assert.EqualValues(t, 1, sent["CloneVM_Task"].Requests, "one clone: the allowed job's")
	for _, v := range warmVcsimVMs(t, env) {
		if v.Annotation != nil && !v.Template {
			assert.NotEqual(t, "team-b-secret", v.Annotation.VMwareModelPath, "vm %s cloned from the refused template", v.Name)
		}
	}
}
