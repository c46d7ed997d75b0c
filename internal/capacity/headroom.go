package capacity

// HeadroomUnlimited is the headroom of a flavor nothing limits: no static
// limit is configured and the resource pool could not be read.
const HeadroomUnlimited = -1

// maxHeadroom bounds the count of Headroom; reaching it is reported as
// HeadroomUnlimited.
const maxHeadroom = 100000

// Headroom returns, for every flavor (by name), how many more workers of
// it Decide would let through one after the other from base (base.Next,
// Known and Reserve are ignored; the reserve of countSmaller smaller
// flavors applies).
func Headroom(base Input, flavors []Flavor, countSmaller int) map[string]int {
	out := make(map[string]int, len(flavors))
	for _, f := range flavors {
		in := base
		in.Next, in.Known = f.Footprint(), true
		in.Reserve, _ = StarvationReserve(flavors, &f, countSmaller)
		out[f.Name] = HeadroomOf(in)
	}
	return out
}

// HeadroomOf counts how many workers of in.Next fit one after another.
func HeadroomOf(in Input) int {
	if in.MaxCPUs <= 0 && in.MaxMemoryMB <= 0 && !in.Pool.Readable {
		return HeadroomUnlimited
	}
	n := 0
	for Decide(in).Allowed {
		n++
		if n >= maxHeadroom {
			return HeadroomUnlimited
		}
		in.Used = in.Used.Add(in.Next)
		in.InFlight = in.InFlight.Add(in.Next)
	}
	return n
}
