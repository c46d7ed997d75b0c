package capacity

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// testFlavors is the array example of docs/flavors-and-capacity.md, plus
// xlarge.
func testFlavors() []Flavor {
	return []Flavor{
		{Name: "small", CPUs: 2, MemoryMB: 4096},
		{Name: "medium", CPUs: 4, MemoryMB: 8192},
		{Name: "large", CPUs: 8, MemoryMB: 16384},
		{Name: "xlarge", CPUs: 16, MemoryMB: 32768},
	}
}

// TestFlavorHeadroomTable checks the pure computation against numbers
// worked out by hand (flavors small 2/4096, medium 4/8192, large 8/16384,
// xlarge 16/32768).
func TestFlavorHeadroomTable(t *testing.T) {
	t.Parallel()
	pool := func(memMB, cpuMHz int64) Pool {
		return Pool{Readable: true, UnreservedMemoryBytes: memMB << 20, UnreservedCPUMHz: cpuMHz}
	}
	cases := []struct {
		name  string
		in    Input
		count int
		want  map[string]int
	}{
		{name: "maxCpus 32, nothing used: 32/cpus",
			in:   Input{MaxCPUs: 32},
			want: map[string]int{"small": 16, "medium": 8, "large": 4, "xlarge": 2}},
		{name: "maxCpus 32, 8 used, keep 2 small: small 24/2; medium 8+4k+4+4<=32; large 8+8k+8+4<=32; xlarge 8+16+4<=32",
			in: Input{MaxCPUs: 32, Used: Footprint{CPUs: 8, MemoryMB: 1}}, count: 2,
			want: map[string]int{"small": 12, "medium": 5, "large": 2, "xlarge": 1}},
		{name: "pool only: 40960 MB unreserved",
			in:   Input{Pool: pool(40960, 1000)},
			want: map[string]int{"small": 10, "medium": 5, "large": 2, "xlarge": 1}},
		{name: "pool only with 8192 MB in flight",
			in:   Input{Pool: pool(40960, 1000), Used: Footprint{CPUs: 4, MemoryMB: 8192}, InFlight: Footprint{CPUs: 4, MemoryMB: 8192}},
			want: map[string]int{"small": 8, "medium": 4, "large": 2, "xlarge": 1}},
		{name: "pool without unreserved cpu",
			in:   Input{Pool: pool(1<<20, 0), MaxCPUs: 100},
			want: map[string]int{"small": 0, "medium": 0, "large": 0, "xlarge": 0}},
		{name: "nothing limits",
			in:   Input{},
			want: map[string]int{"small": HeadroomUnlimited, "medium": HeadroomUnlimited, "large": HeadroomUnlimited, "xlarge": HeadroomUnlimited}},
		{name: "cpu 24 and memory 65536, keep 1 small: medium cpu 4k+2<=24 (5) vs mem 8192k+4096<=65536 (7)",
			in: Input{MaxCPUs: 24, MaxMemoryMB: 65536}, count: 1,
			want: map[string]int{"small": 12, "medium": 5, "large": 2, "xlarge": 1}},
		{name: "memory binds: 20000 MB static",
			in:   Input{MaxCPUs: 1000, MaxMemoryMB: 20000},
			want: map[string]int{"small": 4, "medium": 2, "large": 1, "xlarge": 0}},
		{name: "already over the limit",
			in:   Input{MaxCPUs: 16, Used: Footprint{CPUs: 20}},
			want: map[string]int{"small": 0, "medium": 0, "large": 0, "xlarge": 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Headroom(tc.in, testFlavors(), tc.count))
		})
	}
}
