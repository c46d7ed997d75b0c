package hatchery

import (
	"crypto/rand"
	"strings"
)

// maxWorkerNameLen is the DNS label limit: worker names become VM names and
// guest hostnames.
const maxWorkerNameLen = 63

const randAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// randomSuffix returns n random lower-case alphanumerics.
func randomSuffix(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	for i := range b {
		b[i] = randAlphabet[int(b[i])%len(randAlphabet)]
	}
	return string(b)
}

// dnsLabel lower-cases s and replaces every character outside [a-z0-9-] by
// '-', collapsing runs and trimming dashes at both ends.
func dnsLabel(s string) string {
	var sb strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			sb.WriteRune(r)
			dash = false
			continue
		}
		if !dash {
			sb.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(sb.String(), "-")
}

// WorkerName builds a unique DNS-safe worker name: [prefix]<model>-<random>,
// at most 63 characters, lower case. model is the model's short name
// (the part after the last '/').
func WorkerName(prefix, model string) string {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	suffix := randomSuffix(10)
	base := dnsLabel(prefix + model)
	if base == "" {
		base = "worker"
	}
	if max := maxWorkerNameLen - len(suffix) - 1; len(base) > max {
		base = strings.TrimRight(base[:max], "-")
	}
	return base + "-" + suffix
}
