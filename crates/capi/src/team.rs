//! Teams as C sees them (MPI's communicators): split a team by color and
//! key, or take a subset by rank list; ask a team's rank and size; free it.
//! The collectives (`coll`) take a team, or NULL for the whole job.
//!
//! Owns: `mw_team`, which keeps a `Team<'static>` borrowing the endpoint
//! (counted like regions, see `endpoint`). Must not: run collectives
//! (`coll` does) or let a team be used with another endpoint.

use mw_core::Team;

use crate::endpoint::{endpoint, mw_endpoint};
use crate::ffi;
use crate::status::{guard, mw_status, Failure};

/// `color` of a rank that joins no team in `mw_team_split` (it gets NULL).
pub const MW_TEAM_NONE: u32 = 0xffff_ffff;

/// A team of ranks. Opaque; created by `mw_team_split` or
/// `mw_team_from_ranks`, destroyed by `mw_team_free`. Used by one thread at
/// a time, and by every member in the same order of collectives.
#[derive(Debug)]
pub struct mw_team {
    /// Always `Some` until dropped; taken first so the team's scratch region
    /// goes before the endpoint stops counting it.
    team: Option<Team<'static>>,
    owner: &'static mw_endpoint,
}

impl Drop for mw_team {
    fn drop(&mut self) {
        drop(self.team.take());
        self.owner.release();
    }
}

/// The team behind `team`, which must belong to `owner`.
///
/// # Safety
/// `team` must be NULL or a live team, used by no other thread meanwhile.
pub(crate) unsafe fn team_of<'a>(owner: &mw_endpoint, team: *mut mw_team) -> Result<&'a mut Team<'static>, Failure> {
    // SAFETY: forwarded contract.
    let t = unsafe { ffi::obj_mut(team, "team") }?;
    if !std::ptr::eq(t.owner, owner) {
        return Err(Failure::invalid("team of another endpoint"));
    }
    Ok(t.team.as_mut().expect("a team is present until it is dropped"))
}

/// Runs `f` on the job's team, formed on first use (collective, like the
/// call that first needs it).
pub(crate) fn with_world<R>(
    owner: &'static mw_endpoint,
    f: impl FnOnce(&mut Team<'static>) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let mut world = owner.world.lock().map_err(|_| Failure::invalid("a collective panicked earlier"))?;
    if world.is_none() {
        *world = Some(owner.ep.team_world()?);
    }
    f(world.as_mut().expect("formed above"))
}

/// Runs `f` on `parent` (NULL: the whole job) and hands the team it makes,
/// if this rank is in it, to C through `out` (NULL otherwise).
///
/// # Safety
/// `parent` must be NULL or a live team of `owner`, used by no other thread.
unsafe fn derive(
    owner: &'static mw_endpoint,
    parent: *mut mw_team,
    out: ffi::Out<'_, *mut mw_team>,
    f: impl FnOnce(&mut Team<'static>) -> mw_core::Result<Option<Team<'static>>>,
) -> Result<(), Failure> {
    let made = if parent.is_null() {
        with_world(owner, |world| Ok(f(world)?))?
    } else {
        // SAFETY: forwarded contract.
        f(unsafe { team_of(owner, parent) }?)?
    };
    out.set(match made {
        Some(team) => {
            owner.retain();
            ffi::give(mw_team { team: Some(team), owner })
        }
        None => std::ptr::null_mut(),
    });
    Ok(())
}

/// Collective over `parent` (NULL: the whole job), as `MPI_Comm_split`:
/// members passing the same `color` form a new team, ordered by `key`
/// (ties by rank in `parent`), stored in `*team`; `MW_TEAM_NONE` joins none
/// and gets NULL.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `parent` NULL or a live team of
/// it; `team` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_team_split(
    ep: *mut mw_endpoint,
    parent: *mut mw_team,
    color: u32,
    key: u32,
    team: *mut *mut mw_team,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(team, "team")?) };
        let color = (color != MW_TEAM_NONE).then_some(color);
        // SAFETY: forwarded contract.
        unsafe { derive(owner, parent, out, |p| p.split(color, key)) }
    })
}

/// Collective over `parent` (NULL: the whole job): the `count` members
/// listed in `ranks` (ranks in `parent`, in the order that becomes the new
/// team's) form a new team, stored in `*team`; everyone passes the same
/// list, and ranks not in it get NULL. A rank outside `parent`, or listed
/// twice, is `MW_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `parent` NULL or a live team of
/// it; `ranks` NULL (only if `count` is 0) or readable for `count` values;
/// `team` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_team_from_ranks(
    ep: *mut mw_endpoint,
    parent: *mut mw_team,
    ranks: *const u32,
    count: usize,
    team: *mut *mut mw_team,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, ranks, out) =
            unsafe { (endpoint(ep)?, ffi::array(ranks, count, "ranks")?, ffi::out(team, "team")?) };
        // SAFETY: forwarded contract.
        unsafe { derive(owner, parent, out, |p| p.subset(ranks)) }
    })
}

/// Destroys the team and sets `*team` to NULL (not collective: each member
/// frees its own, after its last collective on it). A NULL `*team` is a
/// no-op.
///
/// # Safety
/// `team` must be NULL or point to the caller's variable holding NULL or a
/// team from this library, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn mw_team_free(team: *mut *mut mw_team) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        drop(unsafe { ffi::take(team, "team") }?);
        Ok(())
    })
}

/// Stores this rank's rank in `team` in `*rank` and the team's size in
/// `*size` (either may be NULL).
///
/// # Safety
/// `team` must be NULL or a live team used by no other thread; the outputs
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_team_rank(team: *mut mw_team, rank: *mut u32, size: *mut u32) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (t, rank, size) =
            unsafe { (ffi::obj_mut(team, "team")?, ffi::out_opt(rank, "rank")?, ffi::out_opt(size, "size")?) };
        let t = t.team.as_ref().expect("a team is present until it is dropped");
        if let Some(out) = rank {
            out.set(t.rank());
        }
        if let Some(out) = size {
            out.set(t.size());
        }
        Ok(())
    })
}

/// Stores the job rank of `team`'s member `rank` in `*world` (what
/// messages and remote memory operations name it by).
///
/// # Safety
/// `team` must be NULL or a live team used by no other thread; `world` NULL
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_team_world_rank(team: *mut mw_team, rank: u32, world: *mut u32) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (t, out) = unsafe { (ffi::obj_mut(team, "team")?, ffi::out(world, "world")?) };
        let t = t.team.as_ref().expect("a team is present until it is dropped");
        out.set(t.world_rank(rank).ok_or(Failure::invalid("rank outside the team"))?);
        Ok(())
    })
}
