package cloudinit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
)

// childScript is the guest side of instant clones shipped for templates
// (docs/instant-clones.md, "The guest side").
var childScript = filepath.Join("..", "..", "configs", "guest", "instant-clone-child.sh")

// childGuest is a fake guest for the script: a vmware-rpctool answering
// from guestinfo, and ip and hostname recording their calls, on PATH in a
// temporary directory; the script writes under root.
type childGuest struct {
	t       *testing.T
	dir     string
	root    string
	calls   string
	runcmds string
}

func newChildGuest(t *testing.T) *childGuest {
	t.Helper()
	for _, tool := range []string{"bash", "python3", "base64", "gzip"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the script needs %s", tool)
	}
	dir := t.TempDir()
	g := &childGuest{t: t, dir: dir, root: filepath.Join(dir, "root"), calls: filepath.Join(dir, "calls"), runcmds: filepath.Join(dir, "runcmds")}
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "guestinfo"), 0o755))
	require.NoError(t, os.MkdirAll(bin, 0o755))
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/bash\n"+body), 0o755))
	}
	// vmware-rpctool "info-get guestinfo.KEY": the file KEY, else an
	// error as the real tool answers for an unset key.
	write("vmware-rpctool", `key="${1#info-get guestinfo.}"
f="`+dir+`/guestinfo/$key"
[ -f "$f" ] || { echo "No value found" >&2; exit 1; }
cat "$f"
`)
	write("ip", `echo "ip $*" >>`+g.calls+`
if [ "$1 $2" = "-o link" ]; then printf '1: lo: <LOOPBACK>\n2: ens192: <BROADCAST>\n'; fi
`)
	write("hostname", `echo "hostname $*" >>`+g.calls+"\n")
	write("dhclient", `echo "dhclient $*" >>`+g.calls+"\n")
	write("record-runcmd", `printf '%s\n' "$*" >>`+g.runcmds+"\n")
	return g
}

// setGuestinfo writes the guestinfo keys of opts (none: a blank parent).
func (g *childGuest) setGuestinfo(values map[string]string) {
	g.t.Helper()
	gi := filepath.Join(g.dir, "guestinfo")
	require.NoError(g.t, os.RemoveAll(gi))
	require.NoError(g.t, os.MkdirAll(gi, 0o755))
	for k, v := range values {
		require.NoError(g.t, os.WriteFile(filepath.Join(gi, strings.TrimPrefix(k, "guestinfo.")), []byte(v), 0o644))
	}
}

// run runs one check of the script.
func (g *childGuest) run() string {
	g.t.Helper()
	cmd := exec.Command("bash", childScript)
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Join(g.dir, "bin")+":"+os.Getenv("PATH"),
		"CDS_CHILD_ROOT="+g.root, "CDS_CHILD_ONCE=1", "CDS_CHILD_EXEC="+filepath.Join(g.dir, "bin", "record-runcmd"))
	out, err := cmd.CombinedOutput()
	require.NoError(g.t, err, string(out))
	return string(out)
}

func (g *childGuest) read(path string) string {
	g.t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(g.t, err)
	return string(b)
}

// TestInstantCloneChildScript: the shipped guest script, given the
// guestinfo keys internal/cloudinit writes for a worker (here through a
// fake vmware-rpctool), sets the child's hostname and static address
// (dropping the parent's), writes the worker config (0600) and start
// script, runs the runcmd that starts the worker, and records the
// instance; run again it does nothing; on a parent (no keys, or the
// instance cloud-init applied at its boot) it does nothing; a new child's keys are applied anew, a new DHCP lease when
// it has no address.
func TestInstantCloneChildScript(t *testing.T) {
	t.Parallel()
	g := newChildGuest(t)

	g.run()
	assert.Empty(t, g.read(g.calls), "a parent's blank guestinfo: nothing applied")

	// The parent's boot: cloud-init applied its instance; the script
	// only notes it.
	popts, err := cloudinit.Options("parent-1-xyz", "parent-1", nil, cloudinit.Boot{Script: "true"})
	require.NoError(t, err)
	g.setGuestinfo(cloudinit.Guestinfo(popts))
	require.NoError(t, os.MkdirAll(filepath.Join(g.root, "var", "lib", "cloud", "data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(g.root, "var", "lib", "cloud", "data", "instance-id"), []byte("parent-1-xyz\n"), 0o644))
	g.run()
	assert.Empty(t, g.read(g.calls), "a booted parent's instance is cloud-init's")
	assert.Equal(t, "parent-1-xyz\n", g.read(filepath.Join(g.root, "var", "lib", "cds-hatchery", "instant-instance-id")))

	addr := &cloudinit.Address{IP: "10.0.0.11", Gateway: "10.0.0.1", SubnetMask: "255.255.255.0", DNS: []string{"10.0.0.2"}}
	boot := cloudinit.Boot{Script: "./worker --name=worker-ic-1", CDSConfig: "Y29uZmlnLXdpdGgtdG9rZW4="}
	opts, err := cloudinit.Options("worker-ic-1-abc", "worker-ic-1", addr, boot)
	require.NoError(t, err)
	g.setGuestinfo(cloudinit.Guestinfo(opts))
	g.run()

	calls := g.read(g.calls)
	assert.Contains(t, calls, "hostname worker-ic-1\n")
	assert.Contains(t, calls, "ip addr flush dev ens192\n", "the parent's address is dropped")
	assert.Contains(t, calls, "ip addr add 10.0.0.11/24 dev ens192\n")
	assert.Contains(t, calls, "ip route replace default via 10.0.0.1 dev ens192\n")
	assert.Equal(t, "worker-ic-1\n", g.read(filepath.Join(g.root, "etc", "hostname")))
	assert.Equal(t, "nameserver 10.0.0.2\n", g.read(filepath.Join(g.root, "etc", "resolv.conf")))

	cfgPath := filepath.Join(g.root, cloudinit.ConfigPath)
	assert.Equal(t, boot.CDSConfig, g.read(cfgPath), "the child's own worker config")
	st, err := os.Stat(cfgPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the token is readable by root only")
	start := g.read(filepath.Join(g.root, cloudinit.ScriptPath))
	assert.Contains(t, start, "./worker --name=worker-ic-1")
	st, err = os.Stat(filepath.Join(g.root, cloudinit.ScriptPath))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	runcmds := g.read(g.runcmds)
	assert.Contains(t, runcmds, "/bin/sh -c nohup "+cloudinit.ScriptPath, "the worker is started")
	assert.Equal(t, "worker-ic-1-abc\n", g.read(filepath.Join(g.root, "var", "lib", "cds-hatchery", "instant-instance-id")))

	g.run()
	assert.Equal(t, calls, g.read(g.calls), "an applied instance is not applied again")
	assert.Equal(t, runcmds, g.read(g.runcmds), "nor is its worker started again")

	// Another child (DHCP): applied anew.
	opts, err = cloudinit.Options("worker-ic-2-def", "worker-ic-2", nil, cloudinit.Boot{Script: "./worker", CDSConfig: "b3RoZXI="})
	require.NoError(t, err)
	g.setGuestinfo(cloudinit.Guestinfo(opts))
	g.run()
	calls = g.read(g.calls)
	assert.Contains(t, calls, "hostname worker-ic-2\n")
	assert.Contains(t, calls, "dhclient ens192\n", "a new lease: the parent's address is not kept")
	assert.Equal(t, "b3RoZXI=", g.read(cfgPath))
	assert.Equal(t, "worker-ic-2-def\n", g.read(filepath.Join(g.root, "var", "lib", "cds-hatchery", "instant-instance-id")))
}
