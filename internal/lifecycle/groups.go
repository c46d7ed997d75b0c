package lifecycle

// The phase groups: the sets of phases the loops of internal/vsphere and
// internal/warmpool test a VM for. They live here, next to the transitions
// they must agree with (TestGroupsAgreeWithTransitions), and nowhere else;
// each function returns a fresh slice.

// Markable: a VM in one of these phases may be marked for deletion
// (markToDelete); one already marked, being deleted or destroyed stays as
// it is.
func Markable() []Phase {
	return []Phase{Gone, Cloning, Provisioning, Idle, Claimed, Preparing, Running, Started, Held}
}

// Deletable: a deletion may start on a VM in one of these phases. A VM
// being cloned, provisioned, claimed or prepared belongs to the loop doing
// it, which marks it when it fails.
func Deletable() []Phase {
	return []Phase{Gone, Idle, Running, Started, Marked, Destroyed, Held}
}

// Claimable: a pool VM in one of these phases may be claimed or removed as
// surplus (Gone: the inventory shows it idle, the table knows nothing
// more).
func Claimable() []Phase { return []Phase{Gone, Idle} }

// LeavingPool: a pool VM in one of these phases no longer counts in its
// pool.
func LeavingPool() []Phase { return []Phase{Claimed, Marked, Deleting, Destroyed} }

// Consumed: an entry holding a VM's reference in one of these phases means
// the VM was claimed: a lagging snapshot may still show it idle under its
// provisioned name.
func Consumed() []Phase { return []Phase{Claimed, Preparing, Running, Started} }

// ToDelete: the cleanup deletes a VM in one of these phases (marked) or is
// deleting it.
func ToDelete() []Phase { return []Phase{Marked, Deleting} }

// Destroying: a VM in one of these phases is being destroyed or was
// destroyed by this process.
func Destroying() []Phase { return []Phase{Deleting, Destroyed} }

// Removed: a VM in one of these phases is on its way out (marked, being
// deleted, destroyed): never counted as held, idle or serving.
func Removed() []Phase { return []Phase{Marked, Deleting, Destroyed} }
