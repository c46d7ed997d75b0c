//go:build !race

// Built without the race detector, as the other tests on the fault rig
// (faults_helpers_test.go says why); the quarantine's own concurrency is
// tested under -race in internal/quarantine.

package vsphere_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

const qtBroken = "broken"

// qtModel is a V2 model of template image.
func qtModel(image string) sdk.WorkerStarterWorkerModel {
	m := ftModel()
	m.VSphereSpec.Image = image
	return m
}

// qtSpawn does what the framework does for one job: the gate (refused:
// the refusal), the capacity check, then SpawnWorker.
func (r *ftRig) qtSpawn(name, job string, model sdk.WorkerStarterWorkerModel) (*refusal.Refusal, error) {
	r.t.Helper()
	ctx := r.env.Context()
	if ref := r.h.GateSpawn(ctx, model, job); ref != nil {
		return ref, nil
	}
	args := ftArgs(name, job, "")
	args.Model = model
	ok, err := r.h.CanAllocateResources(ctx, model, job, nil)
	require.NoError(r.t, err)
	require.True(r.t, ok, "capacity for job %s", job)
	err = r.h.SpawnWorker(ctx, args)
	if err == nil {
		ftRegister(r.cds, name)
	}
	return nil, err
}

// qtClones counts the VMs the simulator holds that were cloned from
// template (their annotation says so), whatever their state.
func qtClones(env *vcsimtest.Env, template string) int {
	n := 0
	for _, v := range ftSimVMs(env) {
		if v.ours() && v.Annot.VMwareModelPath == template {
			n++
		}
	}
	return n
}

// qtGauge scrapes quarantined_templates from m.
func qtGauge(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/mon/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "cds_hatchery_vsphere_quarantined_templates{") {
			v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			require.NoError(t, err)
			return v
		}
	}
	t.Fatal("quarantined_templates not exported")
	return 0
}

// qtStatus returns the /mon/status lines of the quarantine.
func qtStatus(r *ftRig) []sdk.MonitoringStatusLine {
	var out []sdk.MonitoringStatusLine
	for _, l := range r.h.Status(r.env.Context()) {
		if l.Component == "vsphere/quarantine" {
			out = append(out, l)
		}
	}
	return out
}

// TestQuarantineBrokenTemplate: the guest of every VM cloned from template
// "broken" never becomes ready. For a simulated hour (the hatchery's
// clock, not real time) a job of each template comes every minute. The
// broken template is quarantined after 3 failures (the default
// threshold), then used only by one probe per back-off period (2, 4, 8,
// 16 then 30 minutes): 3 + 4 clones in the hour instead of 60, while every
// job of the other template starts. Once the template is fixed, the next
// probe lifts the quarantine.
func TestQuarantineBrokenTemplate(t *testing.T) {
	vsphere.FaultsShortenReadiness(t, 200*time.Millisecond)
	m, err := metrics.New(ftHatchery)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	r := ftStart(t, ftOpts{mode: ftListing, metrics: m, env: vcsimtest.Options{
		Templates: []vcsimtest.Template{{Name: vcsimtest.DefaultTemplate}, {Name: qtBroken}},
	}})
	r.env.SetGuestNeverReady(qtBroken, true)
	broken, good := qtModel(qtBroken), qtModel(vcsimtest.DefaultTemplate)
	assert.Zero(t, qtGauge(t, m), "0 on a healthy run")
	assert.Empty(t, qtStatus(r))

	var spawned, refused, goodAsked, goodStarted int
	var probesAt []int
	for minute := 0; minute < 60; minute++ {
		ref, err := r.qtSpawn(fmt.Sprintf("worker-b-%d", minute), fmt.Sprintf("job-b%d", minute), broken)
		if ref != nil {
			refused++
			assert.Equal(t, refusal.ReasonQuarantined, ref.Reason)
			assert.Contains(t, ref.Detail, "template broken quarantined until")
		} else {
			spawned++
			require.Error(t, err, "minute %d: the broken template never boots", minute)
			assert.Contains(t, err.Error(), "wait for guest operations ready")
			var be *hatchery.BackendError
			assert.False(t, errors.As(err, &be), "a template fault is not vcenter's")
			if spawned > 3 {
				probesAt = append(probesAt, minute)
			}
		}
		if spawned == 3 && ref == nil {
			// The third failure quarantines, and says so.
			assert.Contains(t, err.Error(), "template broken quarantined until", "the spawn info names the quarantine")
			assert.Equal(t, 1.0, qtGauge(t, m))
			st := qtStatus(r)
			require.Len(t, st, 1)
			assert.Equal(t, sdk.MonitoringStatusAlert, st[0].Status)
			assert.Contains(t, st[0].Value, "template broken quarantined until")
			assert.Contains(t, st[0].Value, "after 3 consecutive failures")
		}
		if minute%5 == 0 {
			goodAsked++
			ref, err := r.qtSpawn(fmt.Sprintf("worker-g-%d", minute), fmt.Sprintf("job-g%d", minute), good)
			require.Nil(t, ref, "the other template is never refused")
			require.NoError(t, err, "the other template's job starts")
			goodStarted++
		}
		r.clock.Advance(time.Minute)
	}
	t.Logf("one simulated hour: broken template cloned %d times (%d jobs refused, probes at minutes %v); other template %d/%d jobs started",
		spawned, refused, probesAt, goodStarted, goodAsked)
	assert.Equal(t, 7, spawned, "3 failures then one probe per back-off period")
	assert.Equal(t, []int{4, 8, 16, 32}, probesAt)
	assert.Equal(t, 7, qtClones(r.env, qtBroken), "vms cloned from the broken template")
	assert.Equal(t, 53, refused)
	assert.Equal(t, goodAsked, goodStarted)
	assert.Equal(t, 12, qtClones(r.env, vcsimtest.DefaultTemplate))

	// Fixed: the next probe (due at minute 62) succeeds and lifts it.
	r.env.SetGuestNeverReady(qtBroken, false)
	r.clock.Advance(2 * time.Minute)
	ref, err := r.qtSpawn("worker-b-probe", "job-bp", broken)
	require.Nil(t, ref)
	require.NoError(t, err, "the probe spawns once the template is fixed")
	assert.Zero(t, qtGauge(t, m))
	assert.Empty(t, qtStatus(r))
	ref, err = r.qtSpawn("worker-b-after", "job-ba", broken)
	require.Nil(t, ref, "lifted: not refused any more")
	require.NoError(t, err)
}

// outageClient fails CloneVirtualMachine as net/http does when vCenter
// does not answer, while down is set. (The simulator's own "network
// failure" injection answers a SystemError fault, which is an answer of
// vCenter, not an outage.)
type outageClient struct {
	vctypes.Port
	down  atomic.Bool
	calls atomic.Int32
}

func (c *outageClient) CloneVirtualMachine(ctx context.Context, req vctypes.Clone) (vctypes.Ref, error) {
	if c.down.Load() {
		c.calls.Add(1)
		return vctypes.Ref{}, &url.Error{Op: "Post", URL: "https://127.0.0.1/sdk", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	}
	return c.Port.CloneVirtualMachine(ctx, req)
}

// TestQuarantineVCenterOutage: while vCenter does not answer, every spawn
// fails with a hatchery.BackendError (the framework releases the job
// without counting the attempt) and the template is not quarantined, many
// failures past the threshold; once vCenter answers, the next spawn starts.
func TestQuarantineVCenterOutage(t *testing.T) {
	var oc *outageClient
	r := ftStart(t, ftOpts{mode: ftListing, wrap: func(c vctypes.Port) vctypes.Port {
		oc = &outageClient{Port: c}
		return oc
	}})
	oc.down.Store(true)
	model := qtModel(vcsimtest.DefaultTemplate)
	for i := range 6 {
		ref, err := r.qtSpawn(fmt.Sprintf("worker-o-%d", i), fmt.Sprintf("job-o%d", i), model)
		require.Nil(t, ref, "spawn %d: never quarantined for vcenter's fault", i)
		require.Error(t, err)
		var be *hatchery.BackendError
		assert.True(t, errors.As(err, &be), "spawn %d: a vcenter fault: %v", i, err)
		r.clock.Advance(time.Minute)
	}
	assert.EqualValues(t, 6, oc.calls.Load())
	assert.Empty(t, qtStatus(r))
	oc.down.Store(false)
	ref, err := r.qtSpawn("worker-o-back", "job-ob", model)
	require.Nil(t, ref)
	require.NoError(t, err, "vcenter back: the job starts")
	// No VM is left by the outage. (A clone whose outcome is unknown keeps
	// its IP reserved until the reservation expires, in real time: the
	// full invariant check of the fault tests does not apply here.)
	r.ftCleanup(1)
	assert.Equal(t, []string{"worker-o-back"}, ftOurs(r.env))
	r.ftCheckForeign()
}
