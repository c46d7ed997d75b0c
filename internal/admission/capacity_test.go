package admission_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// outcome is what AllocateResources answered a job: allowed with its
// reservation, or refused with a typed refusal's code and detail.
type outcome struct {
	allowed bool
	reason  refusal.Reason
	detail  string
}

// admit runs AllocateResources for jobID asking for flavor ("": none) and
// returns its outcome and the reservation handed over (nil when refused);
// any other error fails the test.
func (e *env) admit(t *testing.T, jobID, flavor string) (outcome, spawn.Reservation) {
	t.Helper()
	res, err := e.a.AllocateResources(context.Background(), job(flavor), jobID, nil)
	var r *refusal.Refusal
	if errors.As(err, &r) {
		return outcome{reason: r.Reason, detail: r.Detail}, nil
	}
	require.NoError(t, err, "job %s", jobID)
	return outcome{allowed: true}, res
}

func allowed() outcome { return outcome{allowed: true} }

func refused(reason refusal.Reason, detail string) outcome {
	return outcome{reason: reason, detail: detail}
}

// TestWorkedExamples: the three worked examples of
// docs/flavors-and-capacity.md, each job decided alone on the example's
// state, and the per-flavor headroom the page gives for that state.
func TestWorkedExamples(t *testing.T) {
	t.Parallel()
	type decision struct {
		flavor string
		want   outcome
	}
	examples := []struct {
		name     string
		cfg      func() *config.Config
		pool     func() *fakePool
		vms      []inventory.VM
		inFlight string // the flavor of a job admitted first ("": none)
		jobs     []decision
		headroom map[string]int
	}{
		{
			name: "1 vcpu reserve",
			cfg:  func() *config.Config { return exampleConfig(64, 131072) },
			pool: unreadable,
			vms:  []inventory.VM{worker("w-54", 54, 40960)},
			jobs: []decision{
				{"large", refused(refusal.ReasonCapacityCPU, capacity.DetailCPUStarvation)},
				{"medium", allowed()},
				{"small", allowed()},
			},
			headroom: map[string]int{"small": 5, "medium": 1, "large": 0},
		},
		{
			name: "2 memory reserve",
			cfg:  func() *config.Config { return exampleConfig(0, 65536) },
			pool: unreadable,
			vms: []inventory.VM{
				worker("w-l1", 8, 16384), worker("w-l2", 8, 16384), worker("w-m", 4, 8192), worker("w-s", 2, 4096),
			},
			jobs: []decision{
				{"large", refused(refusal.ReasonCapacityMemory, capacity.DetailMemoryStarvation)},
				{"medium", allowed()},
				{"small", allowed()},
			},
			headroom: map[string]int{"small": 5, "medium": 1, "large": 0},
		},
		{
			name:     "3 resource pool with spawns in flight",
			cfg:      func() *config.Config { return exampleConfig(0, 0) },
			pool:     func() *fakePool { return readable(20480, 12000) },
			inFlight: "large",
			jobs: []decision{
				{"small", allowed()},
				{"medium", refused(refusal.ReasonCapacityMemory, capacity.DetailPoolMemory)},
				{"large", refused(refusal.ReasonCapacityMemory, capacity.DetailPoolMemory)},
			},
			headroom: map[string]int{"small": 1, "medium": 0, "large": 0},
		},
	}
	for _, ex := range examples {
		build := func(t *testing.T) *env {
			e := newEnv(ex.cfg(), ex.pool(), ex.vms...)
			if ex.inFlight != "" {
				got, _ := e.admit(t, "in-flight", ex.inFlight)
				require.Equal(t, allowed(), got, "the spawn in flight was admitted")
			}
			return e
		}
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			for _, j := range ex.jobs {
				e := build(t)
				got, res := e.admit(t, "4242", j.flavor)
				assert.Equal(t, j.want, got, "job asking %s", j.flavor)
				assert.Equal(t, j.want.allowed, res != nil, "a reservation is handed over exactly when allowed (%s)", j.flavor)
			}
			e := build(t)
			h, err := e.a.FlavorHeadroom(context.Background())
			require.NoError(t, err)
			assert.Equal(t, ex.headroom, h)
		})
	}
}

// TestWorkedExampleLogLine: the refusal of example 1 is one `capacity
// decision` line carrying every number used, as the page quotes it.
func TestWorkedExampleLogLine(t *testing.T) {
	t.Parallel()
	e := newEnv(exampleConfig(64, 131072), nil, worker("w-54", 54, 40960))
	got, _ := e.admit(t, "4242", "large")
	require.False(t, got.allowed)
	lines := e.log.Lines(`msg="capacity decision"`, "job=4242")
	require.Len(t, lines, 1, e.log.String())
	for _, kv := range []string{
		"model=debian12-generic", "flavor=large", "allowed=false", "reason=capacity-cpu",
		`detail="maxCpus: reserve for smaller flavors (countSmallerFlavorToKeep)"`,
		"used_cpus=54", "next_cpus=8", "reserve_cpus=4", "max_cpus=64",
		"used_memory_mb=40960", "next_memory_mb=16384", "reserve_memory_mb=8192", "max_memory_mb=131072",
		"inflight=0", "pool_readable=false", "reserve_flavor=small", "reserve_count=2",
	} {
		assert.Contains(t, lines[0], kv)
	}
	assert.Contains(t, lines[0], "level=INFO")
}

// TestCapacityChecks: each check of "The checks, in order" refuses with
// its code and detail, and what counts as used is this hatchery's
// powered-on VMs only (docs/design.md#allocated).
func TestCapacityChecks(t *testing.T) {
	t.Parallel()
	limits := func(maxCPUs int, maxMemoryMB int64) func() *config.Config {
		return func() *config.Config {
			c := exampleConfig(maxCPUs, maxMemoryMB)
			c.CountSmallerFlavorToKeep = 0
			return c
		}
	}
	tpl := template("debian12", 6, 2048)
	cases := []struct {
		name   string
		cfg    func() *config.Config
		pool   *fakePool
		vms    []inventory.VM
		flavor string
		want   outcome
		// reserved is the footprint the decision reserved (cpus, MB).
		reserved [2]int64
	}{
		{name: "pool without unreserved cpu", cfg: limits(0, 0), pool: readable(1<<20, 0), flavor: "small",
			want: refused(refusal.ReasonCapacityCPU, capacity.DetailPoolCPU)},
		{name: "pool memory short", cfg: limits(0, 0), pool: readable(4095, 1000), flavor: "small",
			want: refused(refusal.ReasonCapacityMemory, capacity.DetailPoolMemory)},
		{name: "pool memory just enough", cfg: limits(0, 0), pool: readable(4096, 1), flavor: "small",
			want: allowed(), reserved: [2]int64{2, 4096}},
		{name: "maxCpus reached", cfg: limits(10, 0), vms: []inventory.VM{worker("w", 8, 1024)}, flavor: "medium",
			want: refused(refusal.ReasonCapacityCPU, capacity.DetailCPULimit)},
		{name: "maxCpus filled exactly", cfg: limits(10, 0), vms: []inventory.VM{worker("w", 8, 1024)}, flavor: "small",
			want: allowed(), reserved: [2]int64{2, 4096}},
		{name: "maxMemoryMB reached", cfg: limits(0, 8192), vms: []inventory.VM{worker("w", 1, 4096)}, flavor: "medium",
			want: refused(refusal.ReasonCapacityMemory, capacity.DetailMemoryLimit)},
		{name: "maxMemoryMB filled exactly", cfg: limits(0, 8192), vms: []inventory.VM{worker("w", 1, 4096)}, flavor: "small",
			want: allowed(), reserved: [2]int64{2, 4096}},
		{name: "only our powered-on vms count", cfg: limits(4, 0), flavor: "medium",
			vms: []inventory.VM{
				vm("theirs", "hatch-b", 16, 1024, true),
				vm("ours-off", testutil.Hatchery, 16, 1024, false),
				vm("unowned", "", 16, 1024, true),
				template("debian12", 16, 1024),
			},
			want: allowed(), reserved: [2]int64{4, 8192}},
		{name: "no flavor: the template's hardware", cfg: limits(8, 0), flavor: "",
			vms:  []inventory.VM{tpl, worker("w", 4, 1024)},
			want: refused(refusal.ReasonCapacityCPU, capacity.DetailCPULimit)},
		{name: "no flavor: the template's hardware fits", cfg: limits(10, 0), flavor: "",
			vms:  []inventory.VM{tpl, worker("w", 4, 1024)},
			want: allowed(), reserved: [2]int64{6, 2048}},
		{name: "footprint unknown: allowed within counts, nothing reserved", cfg: limits(8, 0), flavor: "",
			vms:  []inventory.VM{worker("w", 7, 1024)},
			want: allowed()},
		{name: "footprint unknown: no room left", cfg: limits(8, 0), flavor: "",
			vms:  []inventory.VM{worker("w", 8, 1024)},
			want: refused(refusal.ReasonCapacityCPU, capacity.DetailCPULimit)},
		{name: "a worker without flavor reserves nothing", cfg: func() *config.Config { return exampleConfig(64, 0) }, flavor: "",
			vms:  []inventory.VM{template("debian12", 8, 16384), worker("w-54", 54, 40960)},
			want: allowed(), reserved: [2]int64{8, 16384}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(tc.cfg(), tc.pool, tc.vms...)
			got, _ := e.admit(t, "job-1", tc.flavor)
			assert.Equal(t, tc.want, got)
			n, cpus, mem := e.a.ReservedFootprint()
			assert.Equal(t, tc.reserved, [2]int64{cpus, mem}, "footprint reserved")
			wantN := 0
			if tc.reserved != [2]int64{} {
				wantN = 1
			}
			assert.Equal(t, wantN, n, "reservations held")
		})
	}
}

// TestUnknownFlavorLetThrough: an unknown flavor is allowed without a
// reservation, so that the spawn reports it to the job ("An unknown
// flavor"); AllocateResources hands nothing over, and the decision is
// one WARN line naming the flavor asked.
func TestUnknownFlavorLetThrough(t *testing.T) {
	t.Parallel()
	e := newEnv(exampleConfig(1, 1), nil, worker("w", 8, 16384))
	ok, err := e.a.CanAllocateResources(context.Background(), job("huge"), "job-1", nil)
	require.NoError(t, err)
	assert.True(t, ok, "allowed even with no room: the spawn reports the flavor")
	res, err := e.a.AllocateResources(context.Background(), job("huge"), "job-2", nil)
	require.NoError(t, err)
	assert.Nil(t, res, "nothing handed over")
	n, _, _ := e.a.ReservedFootprint()
	assert.Zero(t, n, "nothing reserved")
	lines := e.log.Lines("level=WARN", `msg="capacity decision"`, "flavor=huge", "allowed=true")
	assert.Len(t, lines, 2)
	for _, l := range lines {
		assert.Contains(t, l, capacity.DetailUnknownFlavor)
	}
}

// TestResolvedFlavorHandedOver: the reservation carries the flavor the
// admission resolved (a copy), which the spawn builds.
func TestResolvedFlavorHandedOver(t *testing.T) {
	t.Parallel()
	e := newEnv(exampleConfig(0, 0), nil)
	_, res := e.admit(t, "job-1", "Medium")
	require.NotNil(t, res)
	f, ok, err := admission.ResolvedFlavor(res)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotNil(t, f)
	assert.Equal(t, medium, *f)
	f.CPUs = 99
	again, _, _ := admission.ResolvedFlavor(res)
	assert.Equal(t, int32(4), again.CPUs, "a copy: the reservation's flavor does not change")

	_, ok, _ = admission.ResolvedFlavor(nil)
	assert.False(t, ok, "no reservation: a spawn without admission")
}

// TestInventoryUnreadable: no decision on old data: the admission answers
// no, with the error (Graceful degradation), and logs reason=resources.
func TestInventoryUnreadable(t *testing.T) {
	t.Parallel()
	e := newEnv(exampleConfig(64, 0), nil)
	e.inv.SetErr(errors.New("vcenter unreachable"))
	ok, err := e.a.CanAllocateResources(context.Background(), job("small"), "job-1", nil)
	assert.False(t, ok)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "vcenter unreachable")
	assert.Contains(t, err.Error(), `"job-1"`, "the error names the job")
	res, err := e.a.AllocateResources(context.Background(), job("small"), "job-2", nil)
	assert.Nil(t, res)
	assert.Error(t, err)
	assert.Len(t, e.log.Lines(`msg="capacity decision"`, "allowed=false", "reason=resources", `detail="inventory unreadable"`), 2)
	n, _, _ := e.a.ReservedFootprint()
	assert.Zero(t, n)
}

// TestInventoryUnreadableAtShutdown: a decision cut by the shutdown (its
// ctx ended while it read the inventory) is refused at INFO, not WARN: a
// healthy run that stops logs no WARN.
func TestInventoryUnreadableAtShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(exampleConfig(64, 0), nil)
	e.inv.SetErr(fmt.Errorf("wait for first vm inventory: %w", context.Canceled))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ok, err := e.a.CanAllocateResources(ctx, job("small"), "job-1", nil)
	assert.False(t, ok)
	require.ErrorIs(t, err, context.Canceled)
	assert.Len(t, e.log.Lines(`msg="capacity decision"`, "level=INFO", `detail="inventory unreadable"`), 1)
	assert.Empty(t, e.log.Lines("level=WARN"))
}

// TestHeadroomIsWhatPasses: a flavor's headroom is how many more workers
// of it pass one after the other (Per-flavor headroom): that many are
// admitted, the next is refused.
func TestHeadroomIsWhatPasses(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"small", "medium", "large"} {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			e := newEnv(exampleConfig(40, 65536), readable(40000, 1000), worker("w", 10, 8192))
			h, err := e.a.FlavorHeadroom(context.Background())
			require.NoError(t, err)
			n := h[f]
			require.Positive(t, n, "a headroom to check")
			for i := 0; i < n; i++ {
				got, _ := e.admit(t, fmt.Sprintf("job-%d", i), f)
				require.True(t, got.allowed, "job %d of %d", i+1, n)
			}
			got, _ := e.admit(t, "one-more", f)
			assert.False(t, got.allowed, "headroom %d: the next one is refused", n)
			h, err = e.a.FlavorHeadroom(context.Background())
			require.NoError(t, err)
			assert.Zero(t, h[f], "no headroom left")
		})
	}
	e := newEnv(exampleConfig(0, 0), nil)
	h, err := e.a.FlavorHeadroom(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"small": admission.HeadroomUnlimited, "medium": admission.HeadroomUnlimited, "large": admission.HeadroomUnlimited}, h,
		"no static limit and the pool unreadable: nothing limits")
}
