// Package instantparent decides the running parent VMs the workers of
// instant-clone models are forked from (docs/instant-clones.md): which
// parents must exist (one per template, placement and flavor in use by a
// model whose cloneMode is instant: Wants), what to do with the parents
// the inventory shows (keep, build, replace when their template changed,
// destroy when unused or failed: Decide), and what a run remembers between
// passes (State: the parents ready to fork from, the failed ones in
// quarantine with their back-off, the flavors jobs asked for). Pure: no
// vCenter call, no goroutine; internal/vsphere's instant-parents loop
// acts on its decisions. Imports internal/config, internal/modelref and
// internal/vctypes only.
package instantparent
