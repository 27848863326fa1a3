//! Team multicast as C sees it (Cenju-4's multicast, seed 000): each member
//! registers a region as its part of a group, then one member's bytes land
//! at the same offset of every member's region, by IP multicast where the
//! team's network allows it, else down a tree.
//!
//! Owns: `mw_mcast_group`, which keeps a `McastGroup<'static>` borrowing a
//! region (counted in the region, whose `mw_region_free` refuses meanwhile)
//! and the endpoint (counted like regions). Must not: move data itself
//! (core's `Team::multicast` does).

use std::sync::atomic::Ordering;

use mw_core::McastGroup;

use crate::coll::with_team;
use crate::endpoint::{endpoint, mw_endpoint};
use crate::ffi;
use crate::region::{self, mw_region};
use crate::status::{guard, mw_status, Failure};
use crate::team::mw_team;

/// A multicast group: one region per member of a team. Opaque; created by
/// `mw_mcast_group_create`, destroyed by `mw_mcast_group_free`.
#[derive(Debug)]
pub struct mw_mcast_group {
    /// Always `Some` until dropped; taken first, before the region and the
    /// endpoint stop counting it.
    group: Option<McastGroup<'static>>,
    region: &'static mw_region,
    owner: &'static mw_endpoint,
}

impl Drop for mw_mcast_group {
    fn drop(&mut self) {
        drop(self.group.take());
        self.region.groups.fetch_sub(1, Ordering::AcqRel);
        self.owner.release();
    }
}

/// Collective over `team` (NULL: the whole job): registers `region` (this
/// member's destination; it needs `MW_ACCESS_WRITE`) as its part of a new
/// group, stored in `*group`. The team's first group also decides whether
/// it uses IP multicast (`MW_MCAST`). The region cannot be freed while the
/// group exists.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// `region` NULL or a live region of it; `group` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_mcast_group_create(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    region: *const mw_region,
    group: *mut *mut mw_mcast_group,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract; the region is kept alive by its
        // `groups` count (its free refuses while it is nonzero), so the
        // 'static borrow lasts as long as the group that holds it.
        let (owner, r, out) = unsafe { (endpoint(ep)?, region::region::<'static>(region)?, ffi::out(group, "group")?) };
        if !std::ptr::eq(r.owner(), owner) {
            return Err(Failure::invalid("region of another endpoint"));
        }
        // SAFETY: forwarded contract.
        let made = unsafe { with_team(owner, team, |t| Ok(t.multicast_group(r.get())?)) }?;
        r.groups.fetch_add(1, Ordering::AcqRel);
        owner.retain();
        out.set(ffi::give(mw_mcast_group { group: Some(made), region: r, owner }));
        Ok(())
    })
}

/// Destroys the group (not collective) and sets `*group` to NULL; a NULL
/// `*group` is a no-op.
///
/// # Safety
/// `group` must be NULL or point to the caller's variable holding NULL or a
/// group from this library, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn mw_mcast_group_free(group: *mut *mut mw_mcast_group) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        drop(unsafe { ffi::take(group, "group") }?);
        Ok(())
    })
}

/// Stores the bytes usable at every member (the smallest member region) in `*len`.
///
/// # Safety
/// `group` must be NULL or a live group; `len` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_mcast_group_len(group: *const mw_mcast_group, len: *mut usize) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (g, out) = unsafe { (ffi::obj(group, "group")?, ffi::out(len, "len")?) };
        out.set(g.group.as_ref().expect("a group is present until it is dropped").len());
        Ok(())
    })
}

/// Collective over `team` (NULL: the whole job, which must be the team the
/// group was made on): the `len` bytes at `offset` of team rank `root`'s
/// region land at `offset` of every member's region. Returns on each member
/// once its range holds the data (on the root, once every member's does).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// `group` NULL or a live group of that team.
#[no_mangle]
pub unsafe extern "C" fn mw_multicast(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    group: *const mw_mcast_group,
    root: u32,
    offset: usize,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, g) = unsafe { (endpoint(ep)?, ffi::obj(group, "group")?) };
        let group = g.group.as_ref().expect("a group is present until it is dropped");
        // SAFETY: forwarded contract.
        unsafe { with_team(owner, team, |t| Ok(t.multicast(group, root, offset, len)?)) }
    })
}

/// Stores in `*ip` whether `team` (NULL: the whole job) multicasts by IP
/// multicast (decided when its first group was made; false before). Not
/// collective.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// `ip` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_team_uses_ip_multicast(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    ip: *mut bool,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(ip, "ip")?) };
        if team.is_null() {
            // Not collective: a job team not formed yet has made no group.
            let world = owner.world.lock().map_err(|_| Failure::invalid("a collective panicked earlier"))?;
            out.set(world.team.as_ref().is_some_and(|t| t.uses_ip_multicast()));
            return Ok(());
        }
        // SAFETY: forwarded contract.
        out.set(unsafe { with_team(owner, team, |t| Ok(t.uses_ip_multicast())) }?);
        Ok(())
    })
}
