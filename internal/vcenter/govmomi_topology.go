package vcenter

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// TopologyRequest is what CheckTopology resolves besides the client's own
// placement settings (Config.ResourcePool, Config.Folder and the
// [[placements]] entries of Config.Placements, the datacenter being
// resolved at connection), and which privileges it checks.
type TopologyRequest struct {
	// Datastore and Network are datastoreString and networkString ("":
	// the datacenter's default one).
	Datastore, Network string
	// Templates are the templates the configuration names, each with the
	// key naming it (one name may come with several keys).
	Templates []ConfiguredTemplate
	// StaticIPs: the hatchery takes its addresses through lock folders
	// (Folder.Create and Folder.Delete on the folder).
	StaticIPs bool
	// BuildsTemplates: V1 models are registered, which marks a clone as a
	// template (VirtualMachine.Provisioning.MarkAsTemplate on the folder).
	BuildsTemplates bool
	// GrowsDisks: a flavor grows the template's disk
	// (VirtualMachine.Config.DiskExtend on the folder).
	GrowsDisks bool
	// InstantClones: a model's workers are instant clones of a running
	// parent cloned in the folder (VirtualMachine.Provisioning.Clone on
	// the folder, where the parents are).
	InstantClones bool
}

// ConfiguredTemplate is a template name and the configuration key that
// names it ("guestCredentials[0].modelVMWare").
type ConfiguredTemplate struct {
	Key, Name string
}

// TopologyProblem is one thing of the configuration that vCenter does not
// have, or does not let this user do: the key to change (a placement
// setting, "resourcePoolString", or a ConfiguredTemplate's key) and what is
// wrong, with what exists when that helps. Placement is true for the
// placement settings, whose lookup failures the client caches and logs
// itself (PlacementProblems).
type TopologyProblem struct {
	Key       string
	Problem   string
	Placement bool
	// Missing are the privileges the user lacks on the object of Key,
	// comma-separated ("" for a problem that is not of privileges; a
	// string, so that a problem stays comparable); Object names that
	// object (its inventory path, or "template NAME").
	Missing string
	Object  string
}

// TopologyReport is CheckTopology's answer: the problems, the objects
// resolved (inventory paths by setting or key) and notes on what could not
// be checked (e.g. privileges, when vCenter does not answer that).
type TopologyReport struct {
	Problems []TopologyProblem
	Resolved map[string]string
	Notes    []string
}

// The privileges the hatchery uses, by object (the vSphere privilege
// identifiers). Each is what one of its operations needs: a clone
// (VirtualMachine.Inventory.CreateFromExisting in the folder,
// Resource.AssignVMToPool, Datastore.AllocateSpace, Network.Assign,
// VirtualMachine.Provisioning.DeployTemplate and Customize on the
// template), then on its VMs power, reconfigure (name, annotation and its
// ExtraConfig mirror, CPU, memory, devices), guest operations and destroy.
var (
	folderPrivileges = []string{
		"System.Read",
		"VirtualMachine.Inventory.CreateFromExisting",
		"VirtualMachine.Inventory.Delete",
		"VirtualMachine.Interact.PowerOn",
		"VirtualMachine.Interact.PowerOff",
		"VirtualMachine.Interact.Suspend",
		"VirtualMachine.Config.Rename",
		"VirtualMachine.Config.Annotation",
		"VirtualMachine.Config.AdvancedConfig",
		"VirtualMachine.Config.CPUCount",
		"VirtualMachine.Config.Memory",
		"VirtualMachine.Config.EditDevice",
		"VirtualMachine.GuestOperations.Execute",
	}
	poolPrivileges      = []string{"Resource.AssignVMToPool"}
	datastorePrivileges = []string{"Datastore.AllocateSpace"}
	networkPrivileges   = []string{"Network.Assign"}
	templatePrivileges  = []string{"VirtualMachine.Provisioning.DeployTemplate", "VirtualMachine.Provisioning.Customize"}
)

// maxTemplatesListed bounds the template names a missing template's
// problem lists.
const maxTemplatesListed = vim.MaxCandidates

// CheckTopology resolves, for an operator before the first job, what the
// hatchery will use: the resource pool, the folder, the datastore and the
// network (through the cached lookups: a failure is cached, logged once
// and shown by PlacementProblems as at run time); each [[placements]]
// entry's pool or cluster, datastores, folder and network, each problem
// under its key (placements[i].datastores[j]), and that each of its
// datastores is mounted on a host of its pool's cluster (checkMounted;
// the top-level datastore on the top-level pool's too); every template req names
// (one read of the names of the inventory's scope; templateFolders unset,
// the others looked for by name in the datacenter's folders), and checks the
// privileges the hatchery needs on them (HasPrivilegeOnEntities for this
// session; a vCenter that does not answer it is a note, not a problem).
// Its error is a failure to ask (not connected, transport, ctx), not a
// problem of the configuration. Every request is bounded by the client's
// request timeout.
func (c *Client) CheckTopology(ctx context.Context, req TopologyRequest) (TopologyReport, error) {
	if err := c.notConnected(); err != nil {
		return TopologyReport{}, err
	}
	t := &topologyCheck{c: c, rep: TopologyReport{Resolved: map[string]string{}}}
	if err := t.topLevel(ctx, req); err != nil {
		return t.rep, err
	}
	for i, p := range c.cfg.Placements {
		if err := t.entry(ctx, i, p); err != nil {
			return t.rep, err
		}
	}
	if err := t.templates(ctx, req); err != nil {
		return t.rep, err
	}
	return t.rep, t.privileges(ctx)
}

// topologyCheck is one CheckTopology: the report it fills and the
// objects whose privileges it checks at the end.
type topologyCheck struct {
	c        *Client
	rep      TopologyReport
	entities []checkedEntity
	// fprivs are the privileges the hatchery needs on a folder its
	// VMs go to (folderPrivileges and those of the configured features).
	fprivs []string
}

// checkedEntity is an object resolved for a key and the privileges the
// hatchery needs on it.
type checkedEntity struct {
	key   string
	what  string
	ref   types.ManagedObjectReference
	privs []string
}

// placement records the lookup of setting: a placement error is a
// problem under its key, another error is the check's error, a resolved
// object is kept with privs for the privilege check.
func (t *topologyCheck) placement(ctx context.Context, setting string, ref types.ManagedObjectReference, err error, privs []string) error {
	if err != nil {
		if pe := vim.PlacementErrorOf(err); pe != nil {
			t.rep.Problems = append(t.rep.Problems, TopologyProblem{Key: setting, Problem: err.Error(), Placement: true})
			return nil
		}
		return fmt.Errorf("check %s: %w", setting, err)
	}
	t.rep.Resolved[setting] = t.c.pathOf(ctx, ref)
	t.entities = append(t.entities, checkedEntity{key: setting, what: t.rep.Resolved[setting], ref: ref, privs: privs})
	return nil
}

// topLevel checks the top-level placement keys: the pool and the
// datastore (only when set, with [[placements]] entries: the clones go
// to the entries' then), the folder, the network, and that the one
// placement they make has its datastore mounted.
func (t *topologyCheck) topLevel(ctx context.Context, req TopologyRequest) error {
	c := t.c
	entries := len(c.cfg.Placements) > 0
	var pool, ds types.ManagedObjectReference
	var err error
	if !entries || c.cfg.ResourcePool != "" {
		pool, err = c.loadResourcePool(ctx)
		if err := t.placement(ctx, "resourcePoolString", pool, err, poolPrivileges); err != nil {
			return err
		}
	}
	folder, err := c.loadFolder(ctx)
	t.fprivs = append([]string(nil), folderPrivileges...)
	if req.StaticIPs {
		t.fprivs = append(t.fprivs, "Folder.Create", "Folder.Delete")
	}
	if req.BuildsTemplates {
		t.fprivs = append(t.fprivs, "VirtualMachine.Provisioning.MarkAsTemplate")
	}
	if req.GrowsDisks {
		t.fprivs = append(t.fprivs, "VirtualMachine.Config.DiskExtend")
	}
	if req.InstantClones {
		t.fprivs = append(t.fprivs, "VirtualMachine.Provisioning.Clone")
	}
	if err := t.placement(ctx, "folderString", folder, err, t.fprivs); err != nil {
		return err
	}
	if !entries || req.Datastore != "" {
		ds, err = c.loadDatastore(ctx, req.Datastore)
		if err := t.placement(ctx, "datastoreString", ds, err, datastorePrivileges); err != nil {
			return err
		}
	}
	if err := t.network(ctx, "networkString", req.Network); err != nil {
		return err
	}
	if !entries && pool.Value != "" && ds.Value != "" {
		// The one placement of the top-level keys.
		return c.checkMounted(ctx, &t.rep, "resourcePoolString", pool, []mountCheck{{key: "datastoreString", ref: ds}})
	}
	return nil
}

// network checks the network named name under key.
func (t *topologyCheck) network(ctx context.Context, key, name string) error {
	var ref types.ManagedObjectReference
	n, err := t.c.loadNetwork(ctx, name)
	if err == nil {
		ref = n.Reference()
	}
	return t.placement(ctx, key, ref, err, networkPrivileges)
}

// entry checks the [[placements]] entry i: its pool or cluster, its
// datastores (and that its pool's hosts mount them), its folder and its
// network when set.
func (t *topologyCheck) entry(ctx context.Context, i int, p PlacementKeys) error {
	c := t.c
	key := fmt.Sprintf("placements[%d]", i)
	pool, perr := c.resourcePoolAt(ctx, p.ResourcePool)
	if err := t.placement(ctx, key+".resourcePool", pool, perr, poolPrivileges); err != nil {
		return err
	}
	var dss []mountCheck
	for j, name := range p.Datastores {
		dkey := fmt.Sprintf("%s.datastores[%d]", key, j)
		d, err := c.loadDatastore(ctx, name)
		if err := t.placement(ctx, dkey, d, err, datastorePrivileges); err != nil {
			return err
		}
		if err == nil {
			dss = append(dss, mountCheck{key: dkey, ref: d})
		}
	}
	if p.Folder != "" {
		f, err := c.folderAt(ctx, p.Folder)
		if err := t.placement(ctx, key+".folder", f, err, t.fprivs); err != nil {
			return err
		}
	}
	if p.Network != "" {
		if err := t.network(ctx, key+".network", p.Network); err != nil {
			return err
		}
	}
	if perr == nil && len(dss) > 0 {
		return c.checkMounted(ctx, &t.rep, key+".resourcePool", pool, dss)
	}
	return nil
}

// templates checks the templateFolders entries (with a scope) and every
// template req names.
func (t *topologyCheck) templates(ctx context.Context, req TopologyRequest) error {
	c := t.c
	if c.TemplateFoldersSet() {
		problems, resolved, err := c.checkTemplateFolders(ctx)
		if err != nil {
			return err
		}
		t.rep.Problems = append(t.rep.Problems, problems...)
		for k, v := range resolved {
			t.rep.Resolved[k] = v
		}
		if len(problems) > 0 {
			// The scope cannot be read: the template check would only
			// repeat the folder's problem.
			req.Templates = nil
		}
	}
	if len(req.Templates) == 0 {
		return nil
	}
	found, problems, err := c.checkTemplates(ctx, req.Templates)
	if err != nil {
		return err
	}
	t.rep.Problems = append(t.rep.Problems, problems...)
	for _, tp := range req.Templates {
		if ref, ok := found[tp.Name]; ok {
			t.rep.Resolved[tp.Key] = tp.Name
			t.entities = append(t.entities, checkedEntity{key: tp.Key, what: "template " + tp.Name, ref: ref, privs: templatePrivileges})
		}
	}
	return nil
}

// privileges asks, in one request, for the privileges of every resolved
// object and adds a problem per object naming those it lacks; a vCenter
// that does not answer is a note.
func (t *topologyCheck) privileges(ctx context.Context) error {
	if len(t.entities) == 0 {
		return nil
	}
	refs := make([]types.ManagedObjectReference, 0, len(t.entities))
	seen := map[string]bool{}
	var privs []string
	for _, e := range t.entities {
		refs = append(refs, e.ref)
		for _, p := range e.privs {
			if !seen[p] {
				seen[p] = true
				privs = append(privs, p)
			}
		}
	}
	granted, err := t.c.privileges(ctx, refs, privs)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("check privileges: %w", err)
		}
		t.rep.Notes = append(t.rep.Notes, fmt.Sprintf("privileges not checked: %v", err))
		return nil
	}
	for _, e := range t.entities {
		var missing []string
		for _, p := range e.privs {
			if !granted[e.ref][p] {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			t.rep.Problems = append(t.rep.Problems, TopologyProblem{Key: e.key, Missing: strings.Join(missing, ", "), Object: e.what,
				Problem: fmt.Sprintf("user %q lacks the privileges %s on %s", t.c.cfg.User, strings.Join(missing, ", "), e.what)})
		}
	}
	return nil
}

// mountCheck is a resolved datastore and the key that names it.
type mountCheck struct {
	key string
	ref types.ManagedObjectReference
}

// checkMounted adds to rep a problem under each datastore's key that no
// host of pool's compute resource (its cluster, or its standalone host)
// mounts: vCenter would refuse every clone of that placement to it
// (DatastoreNotWritableOnHost). It reads the pool's owner, the owner's
// hosts and each datastore's host mounts, one request each; a failure to
// read is the error.
func (c *Client) checkMounted(ctx context.Context, rep *TopologyReport, poolKey string, pool types.ManagedObjectReference, dss []mountCheck) error {
	var rp mo.ResourcePool
	if err := c.pc.RetrieveOne(ctx, pool, []string{"owner"}, &rp); err != nil {
		return fmt.Errorf("check %s: read owner of resource pool %q: %w", poolKey, pool.Value, err)
	}
	var cr mo.ComputeResource
	if err := c.pc.RetrieveOne(ctx, rp.Owner, []string{"host"}, &cr); err != nil {
		return fmt.Errorf("check %s: read hosts of %q: %w", poolKey, rp.Owner.Value, err)
	}
	hosts := map[types.ManagedObjectReference]bool{}
	for _, h := range cr.Host {
		hosts[h] = true
	}
	for _, d := range dss {
		var m mo.Datastore
		if err := c.pc.RetrieveOne(ctx, d.ref, []string{"host"}, &m); err != nil {
			return fmt.Errorf("check %s: read hosts of datastore %q: %w", d.key, d.ref.Value, err)
		}
		mounted := false
		for _, h := range m.Host {
			if hosts[h.Key] && (h.MountInfo.Mounted == nil || *h.MountInfo.Mounted) {
				mounted = true
				break
			}
		}
		if !mounted {
			rep.Problems = append(rep.Problems, TopologyProblem{Key: d.key, Problem: fmt.Sprintf(
				"datastore %s is mounted on no host of %s (%s): clones there would fail; choose a datastore its hosts mount",
				c.pathOf(ctx, d.ref), c.pathOf(ctx, rp.Owner), poolKey)})
		}
	}
	return nil
}

// pathOf is ref's inventory path, its id when that cannot be read (it
// only names the object in a report).
func (c *Client) pathOf(ctx context.Context, ref types.ManagedObjectReference) string {
	e, err := c.findNames().Element(ctx, ref)
	if err != nil || e == nil {
		return ref.Value
	}
	return e.Path
}

// checkTemplates reads the names and template flags of the VMs of the
// inventory's scope (one read), looks for the others by name when
// templateFolders is unset (vim.Collector.Discover), and returns the
// templates found, by name, and a problem per key whose template is
// missing or is a VM.
func (c *Client) checkTemplates(ctx context.Context, want []ConfiguredTemplate) (map[string]types.ManagedObjectReference, []TopologyProblem, error) {
	vms, err := c.templateCandidates(ctx)
	if err != nil {
		return nil, nil, err
	}
	where := fmt.Sprintf("datacenter %q", c.dc.Name())
	if c.TemplateFoldersSet() {
		where = "the hatchery's folder (folderString) or templateFolders"
	}
	templates := map[string]types.ManagedObjectReference{}
	plainVMs := map[string]bool{}
	for _, vm := range vms {
		if vm.Config != nil && vm.Config.Template {
			templates[vm.Name] = vm.Self
		} else {
			plainVMs[vm.Name] = true
		}
	}
	if !c.TemplateFoldersSet() {
		// A template outside the derived scope is looked for by name, as
		// a spawn would (LoadVirtualMachine), and its folder joins the scope.
		for _, t := range want {
			if _, ok := templates[t.Name]; ok || plainVMs[t.Name] {
				continue
			}
			ref, err := c.col.Discover(ctx, t.Name)
			if errors.Is(err, ErrNoSuchVM) {
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			var o mo.VirtualMachine
			if err := c.pc.RetrieveOne(ctx, ref, []string{"config.template"}, &o); err != nil {
				return nil, nil, fmt.Errorf("read template flag of vm %q: %w", t.Name, err)
			}
			if o.Config != nil && o.Config.Template {
				templates[t.Name] = ref
			} else {
				plainVMs[t.Name] = true
			}
		}
	}
	names := make([]string, 0, len(templates))
	for n := range templates {
		names = append(names, n)
	}
	sort.Strings(names)
	listed, more := names, 0
	if len(listed) > maxTemplatesListed {
		listed, more = listed[:maxTemplatesListed], len(listed)-maxTemplatesListed
	}
	existing := "none"
	if len(listed) > 0 {
		existing = strings.Join(listed, ", ")
		if more > 0 {
			existing += fmt.Sprintf(" (and %d more)", more)
		}
	}
	var problems []TopologyProblem
	for _, t := range want {
		if _, ok := templates[t.Name]; ok {
			continue
		}
		if plainVMs[t.Name] {
			problems = append(problems, TopologyProblem{Key: t.Key, Problem: fmt.Sprintf("%q is a VM of %s, not a template: mark it as a template", t.Name, where)})
			continue
		}
		problems = append(problems, TopologyProblem{Key: t.Key, Problem: fmt.Sprintf("no template %q in %s; templates: %s", t.Name, where, existing)})
	}
	return templates, problems, nil
}

// templateCandidates lists the name and template flag of every VM of the
// inventory's scope (its reused views): where templates are looked for
// first (checkTemplates looks for the others by name when templateFolders
// is unset).
func (c *Client) templateCandidates(ctx context.Context) ([]mo.VirtualMachine, error) {
	props := []string{"name", "config.template"}
	v, err := c.col.View(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the scope for the template check: %w", err)
	}
	vms, err := c.col.RetrieveScope(ctx, v, props)
	if err != nil {
		return nil, fmt.Errorf("list vm names of the scope for the template check: %w", err)
	}
	return vms, nil
}

// checkTemplateFolders resolves each templateFolders entry: a path that
// is no folder is a problem under its key; a failure to ask is the error.
func (c *Client) checkTemplateFolders(ctx context.Context) ([]TopologyProblem, map[string]string, error) {
	var problems []TopologyProblem
	resolved := map[string]string{}
	for i, path := range c.cfg.TemplateFolders {
		key := fmt.Sprintf("templateFolders[%d]", i)
		ref, err := object.NewSearchIndex(c.vim).FindByInventoryPath(ctx, strings.TrimPrefix(path, "/"))
		switch {
		case err != nil:
			return problems, resolved, fmt.Errorf("find folder %q (%s): %w", path, key, err)
		case ref == nil:
			problems = append(problems, TopologyProblem{Key: key, Problem: fmt.Sprintf("no folder %q in the inventory", path)})
		case ref.Reference().Type != "Folder":
			problems = append(problems, TopologyProblem{Key: key, Problem: fmt.Sprintf("%q is a %s, not a folder", path, ref.Reference().Type)})
		default:
			resolved[key] = path
		}
	}
	return problems, resolved, nil
}

// privileges asks vCenter which of privs this session holds on each of
// refs (AuthorizationManager.HasPrivilegeOnEntities, one request).
func (c *Client) privileges(ctx context.Context, refs []types.ManagedObjectReference, privs []string) (map[types.ManagedObjectReference]map[string]bool, error) {
	if c.vim.ServiceContent.AuthorizationManager == nil {
		return nil, errors.New("vcenter has no authorization manager")
	}
	us, err := c.sm.UserSession(ctx)
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	if us == nil {
		return nil, errors.New("read session: not logged in")
	}
	// The session's own privileges: govmomi's object.AuthorizationManager
	// wraps only the per-user call, so the method is called directly.
	res, err := methods.HasPrivilegeOnEntities(ctx, c.vim, &types.HasPrivilegeOnEntities{
		This: *c.vim.ServiceContent.AuthorizationManager, Entity: refs, SessionId: us.Key, PrivId: privs,
	})
	if err != nil {
		return nil, fmt.Errorf("has privilege on entities: %w", err)
	}
	out := map[types.ManagedObjectReference]map[string]bool{}
	for _, ep := range res.Returnval {
		m := map[string]bool{}
		for _, a := range ep.PrivAvailability {
			m[a.PrivId] = a.IsGranted
		}
		out[ep.Entity] = m
	}
	return out, nil
}
