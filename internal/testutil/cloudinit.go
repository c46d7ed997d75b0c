package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CheckCloudConfig validates userdata with `cloud-init schema` (Debian's
// cloud-init package) when it is installed; with CI=true it must be
// (.ci/run installs it). The caller has already read the userdata with the
// project's own parser (cloudinit.ParseCloudConfig).
func CheckCloudConfig(t testing.TB, userdata []byte) {
	t.Helper()
	bin, err := exec.LookPath("cloud-init")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cloud-init is not installed (CI=true): .ci/run installs Debian's cloud-init package")
		}
		t.Logf("cloud-init not installed: userdata checked by ParseCloudConfig only")
		return
	}
	f := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(f, userdata, 0o600); err != nil {
		t.Fatalf("write userdata: %v", err)
	}
	out, err := exec.Command(bin, "schema", "-c", f).CombinedOutput()
	if err != nil {
		t.Fatalf("cloud-init schema rejects the userdata: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "Valid cloud-config") {
		t.Errorf("cloud-init schema does not say %q: %s", "Valid cloud-config", out)
	}
}
