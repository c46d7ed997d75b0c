package capacity

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// TestDecide walks every check of Decide, in its order, with numbers
// worked out by hand (flavors of testFlavors).
func TestDecide(t *testing.T) {
	t.Parallel()
	large := Footprint{CPUs: 8, MemoryMB: 16384}
	small := Footprint{CPUs: 2, MemoryMB: 4096}
	pool := func(memMB, cpuMHz int64) Pool {
		return Pool{Readable: true, Read: true, UnreservedMemoryBytes: memMB << 20, UnreservedCPUMHz: cpuMHz}
	}
	cases := []struct {
		name string
		in   Input
		want Decision
	}{
		{name: "nothing limits", in: Input{Next: large, Known: true}, want: Allow(DetailFits)},
		{name: "pool without unreserved cpu refuses first", in: Input{Pool: pool(1<<20, 0), Next: small, Known: true, MaxCPUs: 100},
			want: Refuse(refusal.ReasonCapacityCPU, DetailPoolCPU)},
		{name: "pool memory exact", in: Input{Pool: pool(16384, 1), Next: large, Known: true}, want: Allow(DetailFits)},
		{name: "pool memory one MB short", in: Input{Pool: pool(16383, 1), Next: large, Known: true},
			want: Refuse(refusal.ReasonCapacityMemory, DetailPoolMemory)},
		{name: "pool memory counts the spawns in flight", in: Input{Pool: pool(20480, 1), Next: large, Known: true, InFlight: small, Used: small},
			want: Allow(DetailFits)},
		{name: "pool memory with more in flight", in: Input{Pool: pool(20479, 1), Next: large, Known: true, InFlight: small, Used: small},
			want: Refuse(refusal.ReasonCapacityMemory, DetailPoolMemory)},
		{name: "pool refuses although static limits fit", in: Input{Pool: pool(8192, 4000), MaxCPUs: 16, MaxMemoryMB: 65536, Next: large, Known: true},
			want: Refuse(refusal.ReasonCapacityMemory, DetailPoolMemory)},
		{name: "unreadable pool: static limits only", in: Input{Pool: Pool{Read: true}, MaxCPUs: 16, Used: Footprint{CPUs: 8}, Next: large, Known: true},
			want: Allow(DetailFits)},
		{name: "maxCpus exact", in: Input{MaxCPUs: 16, Used: Footprint{CPUs: 8}, Next: large, Known: true}, want: Allow(DetailFits)},
		{name: "maxCpus overshot", in: Input{MaxCPUs: 15, Used: Footprint{CPUs: 8}, Next: large, Known: true},
			want: Refuse(refusal.ReasonCapacityCPU, DetailCPULimit)},
		{name: "maxMemoryMB overshot", in: Input{MaxMemoryMB: 20000, Used: Footprint{MemoryMB: 4096}, Next: large, Known: true},
			want: Refuse(refusal.ReasonCapacityMemory, DetailMemoryLimit)},
		{name: "cpu checked before memory", in: Input{MaxCPUs: 1, MaxMemoryMB: 1, Next: large, Known: true},
			want: Refuse(refusal.ReasonCapacityCPU, DetailCPULimit)},
		{name: "cpu reserve: 8 + 8 + 2×2 = 20 fits 20", in: Input{MaxCPUs: 20, Used: Footprint{CPUs: 8}, Next: large, Known: true, Reserve: small.Times(2)},
			want: Allow(DetailFits)},
		{name: "cpu reserve: 19 left short", in: Input{MaxCPUs: 19, Used: Footprint{CPUs: 8}, Next: large, Known: true, Reserve: small.Times(2)},
			want: Refuse(refusal.ReasonCapacityCPU, DetailCPUStarvation)},
		{name: "memory reserve: 24575 MB left short", in: Input{MaxMemoryMB: 32767, Used: Footprint{MemoryMB: 8192}, Next: large, Known: true, Reserve: small.Times(2)},
			want: Refuse(refusal.ReasonCapacityMemory, DetailMemoryStarvation)},
		{name: "reserve needs a static limit", in: Input{Pool: pool(1<<20, 1), Next: large, Known: true, Reserve: small.Times(100)},
			want: Allow(DetailFits)},
		{name: "unknown footprint allowed within counts", in: Input{MaxCPUs: 5, Used: Footprint{CPUs: 4}}, want: Allow(DetailFootprintUnknown)},
		{name: "unknown footprint refused at the limit", in: Input{MaxCPUs: 5, Used: Footprint{CPUs: 5}},
			want: Refuse(refusal.ReasonCapacityCPU, DetailCPULimit)},
		{name: "unknown footprint, memory at the limit", in: Input{MaxMemoryMB: 4096, Used: Footprint{MemoryMB: 4096}},
			want: Refuse(refusal.ReasonCapacityMemory, DetailMemoryLimit)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Decide(tc.in))
		})
	}
}

// TestReasonsAreFrameworkCodes: every refusal code is a distinct one of
// the framework's, one that keeps the job waiting for room, and a refusing
// Decide only ever answers one of the set.
func TestReasonsAreFrameworkCodes(t *testing.T) {
	t.Parallel()
	framework := map[refusal.Reason]bool{
		refusal.ReasonCapacityCPU: true, refusal.ReasonCapacityMemory: true, refusal.ReasonResources: true,
		refusal.ReasonPlacement: true,
	}
	seen := map[refusal.Reason]bool{}
	for _, c := range Reasons() {
		require.True(t, framework[c], "%q is not a capacity code of sdk/refusal", c)
		require.False(t, seen[c], "%q listed twice", c)
		seen[c] = true
		require.True(t, c.Waits(), "%q keeps the job waiting", c)
	}
	require.Len(t, seen, len(framework))

	set := map[refusal.Reason]bool{}
	for _, r := range Reasons() {
		set[r] = true
	}
	for _, in := range []Input{
		{Pool: Pool{Readable: true}},
		{Pool: Pool{Readable: true, UnreservedCPUMHz: 1}, Next: Footprint{MemoryMB: 1}, Known: true},
		{MaxCPUs: 1, Next: Footprint{CPUs: 2}, Known: true},
		{MaxMemoryMB: 1, Next: Footprint{MemoryMB: 2}, Known: true},
		{MaxCPUs: 4, Next: Footprint{CPUs: 2}, Known: true, Reserve: Footprint{CPUs: 4}},
		{MaxMemoryMB: 4, Next: Footprint{MemoryMB: 2}, Known: true, Reserve: Footprint{MemoryMB: 4}},
	} {
		d := Decide(in)
		require.False(t, d.Allowed, "%+v", in)
		require.True(t, set[d.Reason], "%+v: %q", in, d.Reason)
		require.NotEmpty(t, d.Detail)
	}
}
