package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// onlineConfig is the `config new` file pointed at the simulator vc, with
// the placement keys set (pool "" leaves the datacenter's default) and
// extra appended (TOML tables).
func onlineConfig(t *testing.T, vc *vcsimtest.Env, pool, extra string) string {
	t.Helper()
	doc := runCmd(t, nil, nil, "config", "new").stdout
	for old, repl := range map[string]string{
		`endpoint = "vcenter.example.com"`:    `endpoint = "` + vc.Endpoint + `"`,
		`user = "cds-hatchery@vsphere.local"`: `user = "` + vc.User + `"`,
		`caFile = ""`:                         `caFile = "` + vc.CAFile + `"`,
		`datacenterString = "datacenter1"`:    `datacenterString = "` + vc.Datacenter + `"`,
		`resourcePoolString = ""`:             `resourcePoolString = "` + pool + `"`,
		`datastoreString = ""`:                `datastoreString = "` + vc.Datastore + `"`,
		`networkString = ""`:                  `networkString = "` + vc.Network + `"`,
		`folderString = ""`:                   `folderString = "` + vc.Folder + `"`,
	} {
		require.Contains(t, doc, old)
		doc = strings.Replace(doc, old, repl, 1)
	}
	return writeFile(t, doc+"\n"+extra)
}

// TestConfigCheckOnline: `config check --online` connects to vCenter and
// reports each topology problem with its key and what exists, exiting
// non-zero; offline `config check` of the same file still says
// "configuration OK" (it never connects). Without the online check, the
// ambiguous default pool of a datacenter holding a cluster and a standalone
// host (the simulator's VPX model) went unseen until the daemon ran.
func TestConfigCheckOnline(t *testing.T) {
	t.Parallel()
	vc := vcsimtest.Start(t, vcsimtest.Options{Password: plantedPassword})
	env := secretsEnv()

	t.Run("ambiguous default pool", func(t *testing.T) {
		path := onlineConfig(t, vc, "", "")
		r := runCmd(t, env, nil, "config", "check", "--config", path)
		require.Equal(t, exitOK, r.code, "offline check stays offline: %s", r.stderr)
		assert.Contains(t, r.stdout, "configuration OK")

		r = runCmd(t, env, nil, "config", "check", "--config", path, "--online")
		t.Logf("config check --online:\n%s", r.stderr)
		require.Equal(t, exitFail, r.code, r.stdout)
		assert.Contains(t, r.stderr, "hatchery.vsphere.resourcePoolString: ")
		assert.Contains(t, r.stderr, "set resourcePoolString to one of: ")
		assert.Contains(t, r.stderr, "/DC0/host/DC0_C0/Resources")
		assert.Contains(t, r.stderr, "/DC0/host/DC0_H0/Resources")
		assert.NotContains(t, r.stdout, "configuration OK")
		assert.NotContains(t, r.stdout+r.stderr, plantedPassword)
	})

	t.Run("missing template and datastore privilege", func(t *testing.T) {
		vc := vcsimtest.Start(t, vcsimtest.Options{Password: plantedPassword})
		vc.DenyPrivileges("Datastore.AllocateSpace")
		path := onlineConfig(t, vc, vc.ResourcePool, `
[[hatchery.vsphere.guestCredentials]]
  modelVMWare = "`+vcsimtest.DefaultTemplate+`"
  username = "root"
[[hatchery.vsphere.guestCredentials]]
  modelVMWare = "ubuntu24"
  username = "root"
`)
		r := runCmd(t, env, nil, "config", "check", "--config", path, "--online")
		t.Logf("config check --online:\n%s", r.stderr)
		require.Equal(t, exitFail, r.code, r.stdout)
		assert.Contains(t, r.stderr, `hatchery.vsphere.guestCredentials[1].modelVMWare: no template "ubuntu24" in datacenter "DC0"; templates: `+vcsimtest.DefaultTemplate)
		assert.NotContains(t, r.stderr, "guestCredentials[0]")
		assert.Contains(t, r.stderr, "hatchery.vsphere.datastoreString: user \""+vc.User+"\" lacks the privileges Datastore.AllocateSpace on /DC0/datastore/"+vcsimtest.DatastoreName)
		assert.NotContains(t, r.stderr, "resourcePoolString")
		assert.NotContains(t, r.stdout+r.stderr, plantedPassword)
	})

	t.Run("ok", func(t *testing.T) {
		path := onlineConfig(t, vc, vc.ResourcePool, `
[[hatchery.vsphere.guestCredentials]]
  modelVMWare = "`+vcsimtest.DefaultTemplate+`"
  username = "root"
`)
		r := runCmd(t, env, nil, "config", "check", "--config", path, "--online")
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "vcenter topology OK: resourcePoolString "+vc.ResourcePool+", folderString "+vc.Folder)
		assert.Contains(t, r.stdout, "1 template key(s), privileges granted")
		assert.Contains(t, r.stdout, "configuration OK")
	})

	// With templateFolders, templates are looked for only in the scope: a
	// template of the datacenter outside it is reported missing (the
	// daemon would not find it either), and an entry naming no folder is a
	// problem under its own key. Without the scope-aware check the first
	// case said OK (the template exists in the datacenter).
	t.Run("templateFolders scope", func(t *testing.T) {
		vc := vcsimtest.Start(t, vcsimtest.Options{Password: plantedPassword, Folder: "/DC0/vm/cds"})
		model := `
[[hatchery.vsphere.guestCredentials]]
  modelVMWare = "` + vcsimtest.DefaultTemplate + `"
  username = "root"
`
		path := onlineConfig(t, vc, vc.ResourcePool, model)
		doc := strings.Replace(readFile(t, path), `#templateFolders = ["/datacenter1/vm/templates"]`, `templateFolders = ["/DC0/vm/cds"]`, 1)
		r := runCmd(t, env, nil, "config", "check", "--config", writeFile(t, doc), "--online")
		t.Logf("config check --online:\n%s", r.stderr)
		require.Equal(t, exitFail, r.code, r.stdout)
		assert.Contains(t, r.stderr, `hatchery.vsphere.guestCredentials[0].modelVMWare: no template "`+vcsimtest.DefaultTemplate+`" in the hatchery's folder (folderString) or templateFolders; templates: none`)

		doc = strings.Replace(readFile(t, path), `#templateFolders = ["/datacenter1/vm/templates"]`, `templateFolders = ["/DC0/vm", "/DC0/vm/nowhere"]`, 1)
		r = runCmd(t, env, nil, "config", "check", "--config", writeFile(t, doc), "--online")
		t.Logf("config check --online:\n%s", r.stderr)
		require.Equal(t, exitFail, r.code, r.stdout)
		assert.Contains(t, r.stderr, `hatchery.vsphere.templateFolders[1]: no folder "/DC0/vm/nowhere" in the inventory`)
		assert.NotContains(t, r.stderr, "templateFolders[0]")
		assert.NotContains(t, r.stdout+r.stderr, plantedPassword)

		doc = strings.Replace(readFile(t, path), `#templateFolders = ["/datacenter1/vm/templates"]`, `templateFolders = ["/DC0/vm"]`, 1)
		r = runCmd(t, env, nil, "config", "check", "--config", writeFile(t, doc), "--online")
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "configuration OK")
	})

	// [[placements]]: each entry's pool or cluster, datastores, folder and
	// network is checked under its own key, and a datastore no host of the
	// entry's cluster mounts is a problem under its datastores[j] key
	// (vCenter would refuse every clone there). The top-level pool is not
	// checked when entries are set (the clones go to theirs): its
	// ambiguous default is no problem then.
	t.Run("placements", func(t *testing.T) {
		vc := vcsimtest.Start(t, vcsimtest.Options{Password: plantedPassword, Placements: true})
		// With [[placements]] the top-level datastoreString must be empty
		// (config.Config.Validate): each entry names its own datastores.
		noTopDatastore := func(path string) string {
			return writeFile(t, strings.Replace(readFile(t, path), `datastoreString = "`+vc.Datastore+`"`, `datastoreString = ""`, 1))
		}
		path := onlineConfig(t, vc, "", `
[[hatchery.vsphere.placements]]
  name = "a"
  resourcePool = "`+vc.ClusterPath(vcsimtest.ClusterA)+`"
  datastores = ["`+vcsimtest.DatastoreA+`", "`+vcsimtest.DatastoreB+`"]
  folder = "/DC0/vm/nowhere"
[[hatchery.vsphere.placements]]
  name = "b"
  resourcePool = "Resources"
  datastores = ["LocalDS_9"]
  network = "no-such-network"
`)
		path = noTopDatastore(path)
		r := runCmd(t, env, nil, "config", "check", "--config", path, "--online")
		t.Logf("config check --online:\n%s", r.stderr)
		require.Equal(t, exitFail, r.code, r.stdout)
		assert.Contains(t, r.stderr, "hatchery.vsphere.placements[0].datastores[1]: datastore /DC0/datastore/"+vcsimtest.DatastoreB+" is mounted on no host of /DC0/host/"+vcsimtest.ClusterA+" (placements[0].resourcePool)")
		assert.NotContains(t, r.stderr, "placements[0].datastores[0]")
		assert.NotContains(t, r.stderr, "placements[0].resourcePool:")
		assert.Contains(t, r.stderr, `hatchery.vsphere.placements[0].folder: find folder "/DC0/vm/nowhere" (placements[0].folder)`)
		assert.Contains(t, r.stderr, `hatchery.vsphere.placements[1].resourcePool: find resource pool "Resources" (placements[1].resourcePool)`)
		assert.Contains(t, r.stderr, "set placements[1].resourcePool to one of: ")
		assert.Contains(t, r.stderr, `hatchery.vsphere.placements[1].datastores[0]: find datastore "LocalDS_9" (placements[1].datastores[0])`)
		assert.Contains(t, r.stderr, `hatchery.vsphere.placements[1].network: find network "no-such-network" (placements[1].network)`)
		assert.NotContains(t, r.stderr, "hatchery.vsphere.resourcePoolString", "the top-level pool is not used with entries")
		assert.NotContains(t, r.stdout+r.stderr, plantedPassword)

		path = onlineConfig(t, vc, "", `
[[hatchery.vsphere.guestCredentials]]
  modelVMWare = "`+vcsimtest.DefaultTemplate+`"
  username = "root"
[[hatchery.vsphere.placements]]
  name = "a"
  resourcePool = "`+vc.ClusterPath(vcsimtest.ClusterA)+`"
  datastores = ["`+vcsimtest.DatastoreA+`", "`+vcsimtest.DatastoreName+`"]
[[hatchery.vsphere.placements]]
  name = "b"
  resourcePool = "`+vc.ClusterPoolPath(vcsimtest.ClusterB)+`"
  datastores = ["`+vcsimtest.DatastoreB+`"]
  folder = "`+vc.Folder+`"
`)
		path = noTopDatastore(path)
		r = runCmd(t, env, nil, "config", "check", "--config", path, "--online")
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "2 placement(s), 1 template key(s), privileges granted")
		assert.Contains(t, r.stdout, "configuration OK")
	})

	t.Run("missing datacenter", func(t *testing.T) {
		path := onlineConfig(t, vc, vc.ResourcePool, "")
		doc := strings.Replace(readFile(t, path), `datacenterString = "DC0"`, `datacenterString = "DC9"`, 1)
		r := runCmd(t, env, nil, "config", "check", "--config", writeFile(t, doc), "--online")
		require.Equal(t, exitFail, r.code, r.stdout)
		assert.Contains(t, r.stderr, `hatchery.vsphere.datacenterString: find datacenter "DC9"`)
		assert.Contains(t, r.stderr, "datacenters: DC0")
	})
}

// readFile returns the content of path.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
