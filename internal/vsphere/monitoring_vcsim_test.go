package vsphere_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestVcsimMetricsScrapeMatchesSimulator scrapes /mon/metrics over HTTP
// after a collection pass on a simulated datacenter holding our workers,
// our idle provisioned VM, another hatchery's VM, foreign VMs and operator
// templates, and checks every spec gauge against the simulator's state.
func TestVcsimMetricsScrapeMatchesSimulator(t *testing.T) {
	env := warmVcsimEnv(t)
	ours := func(name string, provisioning bool, ip string) string {
		return inventory.Annotation{HatcheryName: warmVcsimHatchery, WorkerName: name, Provisioning: provisioning,
			VMwareModelPath: "debian12", IPAddress: ip, Created: time.Now()}.Marshal()
	}
	other := inventory.Annotation{HatcheryName: "hatch-other", WorkerName: "w-other", IPAddress: "10.10.0.12"}.Marshal()
	env.AddVMs([]vcsimtest.ForeignVM{
		{Name: "worker-a", Annotation: ours("worker-a", false, "10.10.0.10"), PoweredOn: true, NumCPU: 2, MemoryMB: 4096},
		{Name: "worker-b", Annotation: ours("worker-b", false, "10.10.0.11"), PoweredOn: true, NumCPU: 4, MemoryMB: 8192},
		{Name: "warmpool-v2-idle", Annotation: ours("warmpool-v2-idle", true, "10.10.0.13"), NumCPU: 2, MemoryMB: 4096},
		{Name: "w-other", Annotation: other, PoweredOn: true, NumCPU: 8, MemoryMB: 16384},
	})
	env.AddForeignVMs("foreign-", 5) // 1 vCPU / 1024 MB each, powered on
	env.SetResourcePoolRuntime(func(rt *types.ResourcePoolRuntimeInfo) {
		rt.Memory.MaxUsage = 64 << 30
		rt.Memory.OverallUsage = 10 << 30
		rt.Memory.UnreservedForVm = 50 << 30
		rt.Cpu.MaxUsage = 20000
		rt.Cpu.OverallUsage = 3000
		rt.Cpu.UnreservedForVm = 15000
	})
	cfg := warmVcsimConfig(env)
	h := newWarmVcsimHatchery(t, env, cfg, time.Now)
	env.WaitInventory(h.WarmInventory())

	m, err := metrics.New(warmVcsimHatchery)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	h.CollectMetricsOnce(env.Context(), m)
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	text := string(body)

	// What the simulator holds, counted from its own state.
	all := 0
	var totalCPU, totalMem float64
	for _, v := range warmVcsimVMs(t, env) {
		if v.Template {
			continue
		}
		all++
		if v.PoweredOn() {
			totalCPU += float64(v.NumCPU)
			totalMem += float64(v.MemoryMB)
		}
	}
	require.Equal(t, 9, all, "4 annotated + 5 foreign VMs")

	gauge := func(name string) float64 {
		t.Helper()
		re := regexp.MustCompile(`(?m)^` + name + `\{[^}]*\} ([0-9.e+-]+)$`)
		mm := re.FindStringSubmatch(text)
		require.NotNil(t, mm, "metric %s missing from the scrape", name)
		v, err := strconv.ParseFloat(mm[1], 64)
		require.NoError(t, err)
		return v
	}
	assert.Equal(t, 3.0, gauge("cds_hatchery_vsphere_vm_count"), "our two workers and our idle provisioned vm")
	poweredOff := regexp.MustCompile(`(?m)^cds_hatchery_vsphere_provisioned_vm_count\{[^}]*state="poweredOff"[^}]*\} ([0-9.e+-]+)$`).FindStringSubmatch(text)
	require.NotNil(t, poweredOff, "provisioned_vm_count{state=\"poweredOff\"} missing from the scrape")
	assert.Equal(t, "1", poweredOff[1], "our idle provisioned vm, powered off")
	assert.Equal(t, 6.0, gauge("cds_hatchery_vsphere_allocated_vcpus"), "our powered-on vms: 2 + 4")
	assert.Equal(t, 12288.0, gauge("cds_hatchery_vsphere_allocated_memory_mb"))
	assert.Equal(t, float64(all), gauge("cds_hatchery_vsphere_pool_total_vm_count"))
	assert.Equal(t, totalCPU, gauge("cds_hatchery_vsphere_pool_total_vcpus"))
	assert.Equal(t, totalMem, gauge("cds_hatchery_vsphere_pool_total_memory_mb"))
	assert.Equal(t, 0.0, gauge("cds_hatchery_vsphere_template_count"), "operator templates are not ours")
	assert.Equal(t, 20000.0, gauge("cds_hatchery_vsphere_resource_pool_cpu_max_mhz"))
	assert.Equal(t, 3000.0, gauge("cds_hatchery_vsphere_resource_pool_cpu_usage_mhz"))
	assert.Equal(t, 15000.0, gauge("cds_hatchery_vsphere_resource_pool_cpu_unreserved_mhz"))
	assert.Equal(t, float64(64<<30), gauge("cds_hatchery_vsphere_resource_pool_memory_max_bytes"))
	assert.Equal(t, float64(10<<30), gauge("cds_hatchery_vsphere_resource_pool_memory_usage_bytes"))
	assert.Equal(t, float64(50<<30), gauge("cds_hatchery_vsphere_resource_pool_memory_unreserved_bytes"))
	assert.Equal(t, 245.0, gauge("cds_hatchery_vsphere_ip_total_count"), "10.10.0.10/24: .10 to .254")
	assert.Equal(t, 4.0, gauge("cds_hatchery_vsphere_ip_used_count"), "three of ours and the other hatchery's")
	assert.Contains(t, text, `worker_name="worker-a"`)
	assert.Contains(t, text, "cds_hatchery_vsphere_worker_vcpus")
	assert.Contains(t, text, "cds_hatchery_vsphere_worker_memory_mb")
}
