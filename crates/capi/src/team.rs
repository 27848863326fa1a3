//! Teams as C sees them (MPI's communicators): split a team by color and
//! key, or take a subset by rank list; ask a team's rank and size; force
//! the algorithm a collective uses on it; free it. The collectives (`coll`)
//! take a team, or NULL for the whole job.
//!
//! Owns: `mw_team`, which keeps a `Team<'static>` borrowing the endpoint
//! (counted like regions, see `endpoint`), and the `MW_COLLECTIVE_*` table.
//! Must not: run collectives (`coll` does) or let a team be used with
//! another endpoint.

use std::ffi::{c_char, CStr};

use mw_core::{
    AllgatherAlgo, AllreduceAlgo, AlltoallAlgo, BarrierAlgo, BcastAlgo, CollTuning, McastAlgo, ReduceAlgo, Team,
    VectorAlgo,
};

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

fn lock_world(owner: &mw_endpoint) -> Result<std::sync::MutexGuard<'_, crate::endpoint::World>, Failure> {
    owner.world.lock().map_err(|_| Failure::invalid("a collective panicked earlier"))
}

/// Runs `f` on the job's team, formed on first use (collective, like the
/// call that first needs it).
pub(crate) fn with_world<R>(
    owner: &'static mw_endpoint,
    f: impl FnOnce(&mut Team<'static>) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let mut world = lock_world(owner)?;
    if world.team.is_none() {
        let mut team = owner.ep.team_world()?;
        if let Some(tuning) = world.tuning {
            team.set_tuning(tuning);
        }
        world.team = Some(team);
    }
    f(world.team.as_mut().expect("formed above"))
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

/// A collective whose algorithm `mw_team_set_algorithm` sets: one of
/// `MW_COLLECTIVE_*`.
pub type mw_collective = u32;
/// `mw_team_barrier` (names: a|all_to_all, b|tree, c|counters,
/// d|multicast, e|dissemination, binomial).
pub const MW_COLLECTIVE_BARRIER: mw_collective = 1;
/// `mw_bcast` (binomial, scatter_allgather, direct).
pub const MW_COLLECTIVE_BCAST: mw_collective = 2;
/// `mw_allgather` (ring, recursive_doubling, bruck, direct).
pub const MW_COLLECTIVE_ALLGATHER: mw_collective = 3;
/// `mw_alltoall` (pairwise, bruck, direct, allgather).
pub const MW_COLLECTIVE_ALLTOALL: mw_collective = 4;
/// `mw_allreduce` (recursive_doubling, reduce_scatter_allgather, ring).
pub const MW_COLLECTIVE_ALLREDUCE: mw_collective = 5;
/// `mw_reduce` (binomial, reduce_scatter_gather).
pub const MW_COLLECTIVE_REDUCE: mw_collective = 6;
/// `mw_multicast` (tree, ip).
pub const MW_COLLECTIVE_MULTICAST: mw_collective = 7;
/// `mw_allgatherv` and `mw_alltoallv` (exchange, direct).
pub const MW_COLLECTIVE_VECTOR: mw_collective = 8;

/// Sets `collective`'s algorithm in `tuning` to the one called `name`.
fn set_algorithm(tuning: &mut CollTuning, collective: mw_collective, name: &str) -> Result<(), Failure> {
    fn parsed<T>(algo: Option<T>) -> Result<T, Failure> {
        algo.ok_or(Failure::invalid("no such algorithm for this collective (see MW_COLLECTIVE_* for the names)"))
    }
    match collective {
        MW_COLLECTIVE_BARRIER => tuning.barrier = parsed(BarrierAlgo::parse(name))?,
        MW_COLLECTIVE_BCAST => tuning.bcast = parsed(BcastAlgo::parse(name))?,
        MW_COLLECTIVE_ALLGATHER => tuning.allgather = parsed(AllgatherAlgo::parse(name))?,
        MW_COLLECTIVE_ALLTOALL => tuning.alltoall = parsed(AlltoallAlgo::parse(name))?,
        MW_COLLECTIVE_ALLREDUCE => tuning.allreduce = parsed(AllreduceAlgo::parse(name))?,
        MW_COLLECTIVE_REDUCE => tuning.reduce = parsed(ReduceAlgo::parse(name))?,
        MW_COLLECTIVE_MULTICAST => tuning.mcast = parsed(McastAlgo::parse(name))?,
        MW_COLLECTIVE_VECTOR => tuning.vector = parsed(VectorAlgo::parse(name))?,
        _ => return Err(Failure::invalid("unknown MW_COLLECTIVE_* value")),
    }
    Ok(())
}

/// The short name of `collective`'s algorithm in `tuning`.
fn algorithm_name(tuning: &CollTuning, collective: mw_collective) -> Result<&'static str, Failure> {
    Ok(match collective {
        MW_COLLECTIVE_BARRIER => tuning.barrier.name(),
        MW_COLLECTIVE_BCAST => tuning.bcast.name(),
        MW_COLLECTIVE_ALLGATHER => tuning.allgather.name(),
        MW_COLLECTIVE_ALLTOALL => tuning.alltoall.name(),
        MW_COLLECTIVE_ALLREDUCE => tuning.allreduce.name(),
        MW_COLLECTIVE_REDUCE => tuning.reduce.name(),
        MW_COLLECTIVE_MULTICAST => tuning.mcast.name(),
        MW_COLLECTIVE_VECTOR => tuning.vector.name(),
        _ => return Err(Failure::invalid("unknown MW_COLLECTIVE_* value")),
    })
}

/// Runs `f` on the algorithms of `team`, or of the job's team when `team` is
/// NULL: its own once formed, else those it will be formed with. Never
/// forms a team (that is collective; this is not).
///
/// # Safety
/// `team` must be NULL or a live team of `owner`, used by no other thread.
unsafe fn with_tuning<R>(
    owner: &'static mw_endpoint,
    team: *mut mw_team,
    f: impl FnOnce(&mut CollTuning) -> Result<R, Failure>,
) -> Result<R, Failure> {
    fn apply<R>(t: &mut Team<'static>, f: impl FnOnce(&mut CollTuning) -> Result<R, Failure>) -> Result<R, Failure> {
        let mut tuning = t.tuning();
        let out = f(&mut tuning)?;
        t.set_tuning(tuning);
        Ok(out)
    }
    if !team.is_null() {
        // SAFETY: forwarded contract.
        return apply(unsafe { team_of(owner, team) }?, f);
    }
    let mut world = lock_world(owner)?;
    let crate::endpoint::World { team, tuning } = &mut *world;
    match team {
        Some(t) => apply(t, f),
        None => f(tuning.get_or_insert_with(|| owner.ep.coll_tuning())),
    }
}

/// Makes `collective` on `team` (NULL: the whole job) use the algorithm
/// named `algorithm` when a call does not say otherwise: a name as the
/// `MW_COLL_*` variables take them (listed at `MW_COLLECTIVE_*`), `"auto"`
/// or NULL for the library's choice by size and team size. For tests and
/// benchmarks: every member must set the same before its next call of that
/// collective, or members would run different steps and wait forever.
/// Local (nothing is sent). An unknown collective or name is
/// `MW_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it,
/// used by no other thread; `algorithm` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mw_team_set_algorithm(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    collective: mw_collective,
    algorithm: *const c_char,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        let name = if algorithm.is_null() {
            "auto"
        } else {
            // SAFETY: forwarded contract (NUL-terminated).
            unsafe { CStr::from_ptr(algorithm) }.to_str().map_err(|_| Failure::invalid("algorithm is not UTF-8"))?
        };
        // SAFETY: forwarded contract.
        unsafe { with_tuning(owner, team, |tuning| set_algorithm(tuning, collective, name)) }
    })
}

/// Writes the name of the algorithm `collective` uses on `team` (NULL: the
/// whole job) when a call does not say otherwise, NUL-terminated, into
/// `name` (`capacity` bytes): `"auto"` unless one was forced here or by
/// `MW_COLL_*`. A name that does not fit is `MW_ERR_TRUNCATED` (32 bytes
/// always suffice).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it,
/// used by no other thread; `name` writable for `capacity` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_team_algorithm(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    collective: mw_collective,
    name: *mut c_char,
    capacity: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::bytes_mut(name.cast(), capacity, "name")?) };
        // SAFETY: forwarded contract.
        let text = unsafe { with_tuning(owner, team, |tuning| algorithm_name(tuning, collective)) }?;
        if text.len() >= out.len() {
            return Err(Failure::from(mw_core::Error::Truncated));
        }
        out[..text.len()].copy_from_slice(text.as_bytes());
        out[text.len()] = 0;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_collective_takes_its_own_names_and_refuses_others() {
        let mut tuning = CollTuning::default();
        for (collective, name) in [
            (MW_COLLECTIVE_BARRIER, "dissemination"),
            (MW_COLLECTIVE_BCAST, "binomial"),
            (MW_COLLECTIVE_ALLGATHER, "bruck"),
            (MW_COLLECTIVE_ALLTOALL, "pairwise"),
            (MW_COLLECTIVE_ALLREDUCE, "ring"),
            (MW_COLLECTIVE_REDUCE, "reduce_scatter_gather"),
            (MW_COLLECTIVE_MULTICAST, "tree"),
        ] {
            assert_eq!(algorithm_name(&tuning, collective).unwrap(), "auto");
            set_algorithm(&mut tuning, collective, name).unwrap();
            // The short name it reports stands for the same algorithm.
            let short = algorithm_name(&tuning, collective).unwrap();
            assert_ne!(short, "auto", "{name}");
            let mut again = CollTuning::default();
            set_algorithm(&mut again, collective, short).unwrap();
            assert_eq!(algorithm_name(&again, collective).unwrap(), short);
            assert!(set_algorithm(&mut tuning, collective, "no_such_algorithm").is_err());
            assert_eq!(algorithm_name(&tuning, collective).unwrap(), short, "a refused name changes nothing");
        }
        assert!(set_algorithm(&mut tuning, MW_COLLECTIVE_BARRIER, "ring").is_err(), "not a barrier");
        assert!(set_algorithm(&mut tuning, 0, "auto").is_err());
        assert!(algorithm_name(&tuning, 99).is_err());
    }
}
