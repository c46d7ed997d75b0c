package metrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCollectRebuildsGaugesFromPass: a pass records each part it holds; the
// next pass replaces every per-pass gauge, so a part it lacks is absent
// from the scrape, while counters (collection_errors, soap_*) accumulate.
func TestCollectRebuildsGaugesFromPass(t *testing.T) {
	t.Parallel()
	m, err := New(testHatchery)
	require.NoError(t, err)
	t.Cleanup(m.Close)

	require.NoError(t, m.Collect(Pass{
		Inventory: &Inventory{
			Workers:        []Worker{{Name: "worker-1", Model: "debian12", VCPUs: 2, MemoryMB: 4096}},
			AllocatedVCPUs: 2, VMCount: 1, PoolVMCount: 5,
		},
		IPs:            &IPs{Used: 3, Total: 16},
		ResourcePool:   &ResourcePool{CPUMaxMHz: 1000, MemoryUnreservedBytes: 1 << 30},
		WarmPoolTarget: 4,
		Headroom:       map[string]int{"small": 2},
		SOAP:           map[string]SOAPCount{"CloneVM_Task": {Requests: 2, Bytes: 500}},
	}))
	fams := scrape(t, m)
	for name, want := range map[string]float64{
		"cds_hatchery_vsphere_allocated_vcpus":                       2,
		"cds_hatchery_vsphere_vm_count":                              1,
		"cds_hatchery_vsphere_pool_total_vm_count":                   5,
		"cds_hatchery_vsphere_ip_used_count":                         3,
		"cds_hatchery_vsphere_ip_total_count":                        16,
		"cds_hatchery_vsphere_resource_pool_cpu_max_mhz":             1000,
		"cds_hatchery_vsphere_resource_pool_memory_unreserved_bytes": 1 << 30,
		"cds_hatchery_vsphere_provisioned_vm_target":                 4,
	} {
		v, ok := series(fams, name, svc(testHatchery))
		assert.True(t, ok, name)
		assert.Equal(t, want, v, name)
	}
	v, ok := series(fams, "cds_hatchery_vsphere_worker_memory_mb", svc(testHatchery, "worker_name", "worker-1", "worker_model", "debian12"))
	assert.True(t, ok)
	assert.Equal(t, 4096.0, v)
	v, _ = series(fams, "cds_hatchery_vsphere_flavor_headroom", svc(testHatchery, "flavor", "small"))
	assert.Equal(t, 2.0, v)
	v, _ = series(fams, "cds_hatchery_vsphere_soap_bytes", svc(testHatchery, "method", "CloneVM_Task"))
	assert.Equal(t, 500.0, v)

	// The next pass could read nothing but the configuration.
	require.NoError(t, m.Collect(Pass{
		WarmPoolTarget: 4,
		SOAP:           map[string]SOAPCount{"CloneVM_Task": {Requests: 3, Bytes: 700}},
		Failed:         []Source{SourceInventory, SourceResourcePool},
	}))
	fams = scrape(t, m)
	for _, name := range []string{
		"cds_hatchery_vsphere_vm_count", "cds_hatchery_vsphere_worker_vcpus", "cds_hatchery_vsphere_ip_used_count",
		"cds_hatchery_vsphere_resource_pool_cpu_max_mhz", "cds_hatchery_vsphere_flavor_headroom",
	} {
		assert.NotContains(t, fams, name, "%s survived a pass that did not read it", name)
	}
	v, ok = series(fams, "cds_hatchery_vsphere_provisioned_vm_target", svc(testHatchery))
	assert.True(t, ok)
	assert.Equal(t, 4.0, v)
	v, _ = series(fams, "cds_hatchery_vsphere_soap_requests", svc(testHatchery, "method", "CloneVM_Task"))
	assert.Equal(t, 3.0, v, "cumulative snapshots become a counter")
	v, _ = series(fams, "cds_hatchery_vsphere_soap_bytes", svc(testHatchery, "method", "CloneVM_Task"))
	assert.Equal(t, 700.0, v)
	for src, want := range map[string]float64{"inventory": 1, "resource_pool": 1, "headroom": 0, "ip_range": 0} {
		v, _ = series(fams, "cds_hatchery_vsphere_collection_errors", svc(testHatchery, "source", src))
		assert.Equal(t, want, v, src)
	}
}
