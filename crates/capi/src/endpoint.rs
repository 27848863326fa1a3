//! The endpoint as C sees it: `mw_init`/`mw_finalize`, rank and size,
//! progress, completion and ordering (flush, quiet, fence, barrier), counters.
//!
//! Owns: the rule that keeps Rust's borrows sound across C: regions and
//! handles borrow the endpoint (`Region<'static>`, `Handle<'static>` point
//! into its box), so the endpoint counts them and `mw_finalize` refuses while
//! any exist. Also: at most one endpoint per process at a time through C.
//!
//! Must not: run remote operations (`rma`, `atomic` do), or let a panic or a
//! Rust error cross into C: every exported function runs inside `guard` and
//! returns an `mw_status`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use mw_core::{CollTuning, Config, Endpoint, PeerEvent, Team};

use crate::config::mw_config;
use crate::ffi;
use crate::status::{guard, mw_status, Failure};

/// This process's memwire endpoint: its place in the job. Opaque; created by
/// `mw_init`, destroyed by `mw_finalize`.
#[derive(Debug)]
pub struct mw_endpoint {
    pub(crate) ep: Endpoint,
    /// Regions, FIFOs, teams and handles that borrow `ep`.
    live: AtomicUsize,
    /// The job's team for the collectives (`coll`), formed by the first one;
    /// it borrows `ep` and is dropped before it (`mw_finalize`).
    pub(crate) world: Mutex<World>,
}

/// The job's team as C uses it (a NULL team), and the algorithms set for it
/// before it was formed (`mw_team_set_algorithm` is local, forming the team
/// is collective: the setting waits for the first collective).
#[derive(Debug, Default)]
pub(crate) struct World {
    pub(crate) team: Option<Team<'static>>,
    pub(crate) tuning: Option<CollTuning>,
}

/// Whether an endpoint created through C exists in this process.
static ENDPOINT_EXISTS: AtomicBool = AtomicBool::new(false);

impl mw_endpoint {
    /// Counts a new region or handle that borrows this endpoint.
    pub(crate) fn retain(&self) {
        self.live.fetch_add(1, Ordering::AcqRel);
    }

    /// Uncounts a region or handle once it no longer touches the endpoint.
    pub(crate) fn release(&self) {
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The endpoint behind a C pointer, for as long as regions and handles may
/// borrow it.
///
/// # Safety
/// `ep`, if non-NULL, must come from `mw_init` and not be finalized yet.
pub(crate) unsafe fn endpoint(ep: *const mw_endpoint) -> Result<&'static mw_endpoint, Failure> {
    // SAFETY: a live endpoint per the contract. 'static is sound because the
    // box is freed only by `mw_finalize`, which refuses while a region or
    // handle (the only holders of this reference beyond one call) exists.
    unsafe { ffi::obj::<'static, mw_endpoint>(ep, "ep") }
}

/// Joins the job this process was started in (by `mwrun -n N prog`, or the
/// `MW_RANK`/`MW_SIZE`/`MW_BOOTSTRAP` variables; a process started alone is
/// a job of one) and stores the new endpoint in `*ep`. Collective: every
/// rank of the job calls it. `MW_*` environment variables configure it.
/// Only one endpoint may exist per process: a second `mw_init` before
/// `mw_finalize` returns `MW_ERR_IN_USE`.
///
/// # Safety
/// `ep` must be NULL or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn mw_init(ep: *mut *mut mw_endpoint) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let out = unsafe { ffi::out(ep, "ep") }?;
        init(out, Config::from_env)
    })
}

/// `mw_init` with the settings of `config` (`mw_config_new`,
/// `mw_config_from_env`, `mw_config_set*`) instead of the `MW_*`
/// environment variables alone. The job's bootstrap variables (set by
/// `mwrun`) are still read from the environment. `config` is not consumed:
/// free it with `mw_config_free` whenever convenient. Settings every rank
/// must agree on (e.g. `MW_AUTH`, `MW_ACK_EVERY`) must be the same on
/// every rank.
///
/// # Safety
/// `config` must be NULL or a live configuration; `ep` NULL or valid for
/// writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn mw_init_with(config: *const mw_config, ep: *mut *mut mw_endpoint) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (config, out) = unsafe { (ffi::obj(config, "config")?, ffi::out(ep, "ep")?) };
        let config = config.build()?;
        init(out, || Ok(config))
    })
}

/// Creates the process's endpoint with the configuration `config` gives
/// (read only once no other endpoint exists) and stores it in `out`.
fn init(out: ffi::Out<'_, *mut mw_endpoint>, config: impl FnOnce() -> mw_core::Result<Config>) -> Result<(), Failure> {
    if ENDPOINT_EXISTS.swap(true, Ordering::AcqRel) {
        return Err(Failure::in_use("this process already has an endpoint (mw_init called twice)"));
    }
    match config().and_then(Endpoint::init_with) {
        Ok(endpoint) => {
            out.set(ffi::give(mw_endpoint {
                ep: endpoint,
                live: AtomicUsize::new(0),
                world: Mutex::new(World::default()),
            }));
            Ok(())
        }
        Err(error) => {
            ENDPOINT_EXISTS.store(false, Ordering::Release);
            Err(error.into())
        }
    }
}

/// Leaves the job: completes this rank's operations, waits for every rank
/// to get here (collective), prints counters if `MW_STATS=1`, frees the
/// endpoint and sets `*ep` to NULL. Every region, FIFO, team and handle of the
/// endpoint must be freed first: otherwise it returns `MW_ERR_IN_USE` and
/// changes nothing. Any other error (e.g. a peer died) is reported after
/// the endpoint has been freed all the same.
///
/// # Safety
/// `ep` must be NULL or point to the caller's variable holding NULL or an
/// endpoint from `mw_init`; no other thread may use the endpoint meanwhile.
#[no_mangle]
pub unsafe extern "C" fn mw_finalize(ep: *mut *mut mw_endpoint) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let endpoint = unsafe {
            ffi::take_if(ep, "ep", |e: &mw_endpoint| match e.live.load(Ordering::Acquire) {
                0 => Ok(()),
                _ => Err(Failure::in_use(
                    "regions, FIFOs, teams, multicast groups or handles of this endpoint still exist; free them first",
                )),
            })
        }?;
        // The team borrows the endpoint in its box: dropped there, before
        // the endpoint moves out to finalize.
        drop(endpoint.world.lock().map(|mut world| world.team.take()));
        let result = endpoint.ep.finalize();
        ENDPOINT_EXISTS.store(false, Ordering::Release);
        result.map_err(Failure::from)
    })
}

/// Stores this process's rank (`0..size`) in `*rank`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `rank` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_rank(ep: *const mw_endpoint, rank: *mut u32) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (ep, out) = unsafe { (endpoint(ep)?, ffi::out(rank, "rank")?) };
        out.set(ep.ep.rank());
        Ok(())
    })
}

/// Stores the number of ranks in the job in `*size`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `size` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_size(ep: *const mw_endpoint, size: *mut u32) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (ep, out) = unsafe { (endpoint(ep)?, ffi::out(size, "size")?) };
        out.set(ep.ep.size());
        Ok(())
    })
}

/// Makes progress once without waiting: receives and serves incoming
/// operations, retransmits, acknowledges. A rank that computes for a long
/// time without calling memwire should call it now and then (or run with
/// `MW_PROGRESS=thread`) so that its peers' operations are served.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_progress(ep: *mut mw_endpoint) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        unsafe { endpoint(ep) }?.ep.progress();
        Ok(())
    })
}

/// Waits until every one-sided operation this rank issued toward `rank`
/// (puts and their variants, atomics, FIFO pushes; also those whose handle
/// was freed unwaited) has been executed in that target's memory, so anyone
/// told afterwards, by any path, sees its effects. Gets and fetching
/// atomics complete through their handles. Returns the error of an
/// implicit put toward `rank` (`mw_put_nbi`, `mw_put_signal_nbi`) that failed
/// since the last report, if any.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_flush(ep: *mut mw_endpoint, rank: u32) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        Ok(unsafe { endpoint(ep) }?.ep.flush(rank)?)
    })
}

/// `mw_flush` toward every rank at once (returning the error of an implicit
/// put toward any rank that failed since the last report).
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_quiet(ep: *mut mw_endpoint) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        Ok(unsafe { endpoint(ep) }?.ep.quiet()?)
    })
}

/// Orders one-sided operations per target: at each target, those issued
/// before the fence (puts, gets, atomics, put_signal, ...) take effect
/// before those issued to it after; a get issued before a put into its
/// range returns the bytes from before the put. It waits for nothing and
/// orders nothing across targets or with other paths (use
/// `mw_flush`/`mw_quiet` for that). memwire already executes each
/// initiator's operations at a target in issue order on every path, so it
/// costs nothing (over UDP, operations issued while a get to the same
/// target waits for its get window are held behind that get's requests).
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_fence(ep: *mut mw_endpoint) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        unsafe { endpoint(ep) }?.ep.fence();
        Ok(())
    })
}

/// Collective: returns when every rank has called it, serving peers'
/// operations while it waits. A dissemination barrier: ceil(log2 N) rounds
/// of one message per rank; `MW_ERR_PEER_UNREACHABLE` if a peer fails
/// first. (`mw_team_barrier` offers the other methods.) Waits for a rank
/// that is alive but does not come at most the endpoint's wait timeout (`MW_WAIT_TIMEOUT_MS`, none by default),
/// then `MW_ERR_TIMEOUT`: the barrier is still in
/// progress, and the next `mw_barrier` call continues it.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_barrier(ep: *mut mw_endpoint) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        Ok(unsafe { endpoint(ep) }?.ep.barrier()?)
    })
}

/// Collective over the whole job (PM's network preemption): returns when
/// every operation any rank issued before the call is complete and
/// acknowledged, and nothing of the job is in flight. After it the whole
/// job may be stopped (SIGSTOP) and continued without losing anything.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_quiesce(ep: *mut mw_endpoint) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        Ok(unsafe { endpoint(ep) }?.ep.quiesce()?)
    })
}

/// What happened to a peer: one of `MW_PEER_*`.
pub type mw_peer_event_kind = u32;
/// The peer stayed silent past the deadline (`MW_PEER_DEAD_MS`, default
/// 2000 ms) while this rank waited on it: it is treated as dead, and every
/// operation toward it fails with `MW_ERR_PEER_UNREACHABLE` from then on.
pub const MW_PEER_DOWN: mw_peer_event_kind = 1;
/// The peer came back as a new incarnation (a restarted process):
/// operations addressed to the old one failed.
pub const MW_PEER_RESTARTED: mw_peer_event_kind = 2;

/// A change in a peer's liveness, from `mw_poll_peer_event`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mw_peer_event {
    /// `MW_PEER_DOWN` or `MW_PEER_RESTARTED`.
    pub kind: mw_peer_event_kind,
    /// The peer's rank.
    pub rank: u32,
}

/// Takes the oldest peer failure or restart noticed so far: sets `*found`
/// to whether there was one and, if so, stores it in `*event` (unless
/// NULL). Each event is reported once. Does not make progress: a failure
/// is noticed while this rank waits on the peer (in any call) or, with
/// keepalives (the default), while it makes progress at all.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `found` NULL or valid for writes;
/// `event` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_poll_peer_event(
    ep: *mut mw_endpoint,
    found: *mut bool,
    event: *mut mw_peer_event,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (ep, found, out) = unsafe { (endpoint(ep)?, ffi::out(found, "found")?, ffi::out_opt(event, "event")?) };
        let next = ep.ep.poll_peer_event();
        if let (Some(next), Some(out)) = (next, out) {
            out.set(match next {
                PeerEvent::Down { rank } => mw_peer_event { kind: MW_PEER_DOWN, rank },
                PeerEvent::Restarted { rank } => mw_peer_event { kind: MW_PEER_RESTARTED, rank },
            });
        }
        found.set(next.is_some());
        Ok(())
    })
}

/// Sets `*down` to whether `rank` has been declared down (and has not come
/// back as a new incarnation). A rank outside `0..size` is `MW_ERR_BAD_RANK`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `down` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_is_peer_down(ep: *mut mw_endpoint, rank: u32, down: *mut bool) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (ep, out) = unsafe { (endpoint(ep)?, ffi::out(down, "down")?) };
        let size = ep.ep.size();
        if rank >= size {
            return Err(mw_core::Error::BadRank { rank, size }.into());
        }
        out.set(ep.ep.is_peer_down(rank));
        Ok(())
    })
}
