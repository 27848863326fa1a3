//! Direct one-sided operations on a same-host peer's memory: the fast path.
//!
//! A put is a `memcpy` into the peer's mapping of the region, a get a
//! `memcpy` out of it, an atomic the CPU instruction on the mapped word,
//! and put_signal the data copy followed by the signal store with Release
//! (the target's `wait_until` loads with Acquire, so it sees the data).
//! Registered user memory, which is not in a shared mapping, takes one
//! `process_vm_writev`/`readv` copy instead.
//!
//! No endpoint lock, no allocation, no request: the operation is complete
//! when the call returns. The only shared state touched is the link's
//! window cache (a read lock) and the peer's directory slot (one Acquire
//! load that proves the region is still registered with these rights).
//! A caller that stores into the same region over and over (a team's
//! scratch region) pins its window once (`pin_window`) and skips the cache
//! lookup, never the directory check.
//!
//! Each function returns `None` whenever the direct path does not apply —
//! an unknown or withdrawn key, missing rights, out of bounds, misaligned, a
//! region with an arrival log, earlier operations still queued in the ring,
//! the kernel refusing `process_vm_*` — and the caller then sends the
//! operation through the ring, where the owner executes it with exactly the
//! UDP path's checks, errors and counters. So errors are never decided here.
//!
//! Must not: take the endpoint lock, allocate, or decide an error: when in
//! doubt it returns `None` and the ring path decides.

use std::sync::atomic::Ordering;

use mw_wire::op::{AtomicOp, AtomicWidth, SignalOp};

use std::sync::Arc;

use mw_transport::shm::CopyDest;

use super::{CachedWindow, Link, ShmShared, WindowKind, FLAG_LOGGED};
use crate::endpoint::Endpoint;
use crate::region::{checked_range, Access, RegionKey};
use crate::rma::Signal;
use crate::target::{apply_u32, apply_u64};

/// A same-host peer's region whose window was looked up once
/// ([`Endpoint::pin_window`]). Holding it keeps the mapping, never the
/// right to use it: every store through it checks the peer's live
/// directory entry first, as the general path does.
#[derive(Debug)]
pub(crate) struct PinnedWindow {
    rank: u32,
    key: RegionKey,
    window: Arc<CachedWindow>,
}

/// Whether directory flags grant `need` to direct access.
#[inline]
fn allows(flags: u32, need: Access) -> bool {
    flags & FLAG_LOGGED == 0 && Access::from_bits((flags & 7) as u8).is_some_and(|a| a.contains(need))
}

#[inline]
fn range(offset: u64, len: usize, window: &CachedWindow) -> Option<usize> {
    checked_range(offset, len as u64, window.len as usize).ok().map(|(start, _)| start)
}

fn cma_allowed(shm: &ShmShared, link: &Link) -> bool {
    shm.cma && !link.cma_refused.load(Ordering::Relaxed)
}

fn cma_failed(link: &Link, error: &std::io::Error) {
    if error.kind() == std::io::ErrorKind::PermissionDenied {
        link.cma_refused.store(true, Ordering::Relaxed);
    }
}

fn write_window(shm: &ShmShared, link: &Link, window: &CachedWindow, start: usize, data: &[u8]) -> Option<()> {
    match &window.kind {
        WindowKind::Mapped(peer) => {
            peer.mem().write(start, data);
            Some(())
        }
        WindowKind::Cma { base } if cma_allowed(shm, link) => {
            mw_transport::shm::vm_write(link.pid, base + start as u64, data).map_err(|e| cma_failed(link, &e)).ok()
        }
        WindowKind::Cma { .. } => None,
    }
}

/// The stores of a direct put_signal: `data` at `start` of `window`, then
/// the signal word at `at` of `sig` (a shared mapping, the word aligned)
/// with Release, so a reader that loads the signal with Acquire sees the
/// data. `None` (nothing written) when the signal word does not qualify.
#[allow(clippy::too_many_arguments)]
#[inline]
fn write_then_signal(
    shm: &ShmShared,
    link: &Link,
    window: &CachedWindow,
    start: usize,
    data: &[u8],
    sig: &CachedWindow,
    at: usize,
    op: SignalOp,
    value: u64,
) -> Option<()> {
    let WindowKind::Mapped(sig_map) = &sig.kind else { return None };
    let sig_mem = sig_map.mem();
    if !sig_mem.is_aligned(at, 8) {
        return None;
    }
    write_window(shm, link, window, start, data)?;
    let word = sig_mem.atomic_u64(at);
    match op {
        SignalOp::Set => word.store(value, Ordering::Release),
        SignalOp::Add => {
            word.fetch_add(value, Ordering::Release);
        }
    }
    Some(())
}

fn read_window<D: CopyDest + ?Sized>(
    shm: &ShmShared,
    link: &Link,
    window: &CachedWindow,
    start: usize,
    out: &mut D,
) -> Option<()> {
    match &window.kind {
        WindowKind::Mapped(peer) => {
            peer.mem().read_into(start, out);
            Some(())
        }
        WindowKind::Cma { base } if cma_allowed(shm, link) => {
            mw_transport::shm::vm_read(link.pid, base + start as u64, out).map_err(|e| cma_failed(link, &e)).ok()
        }
        WindowKind::Cma { .. } => None,
    }
}

/// Fills `out` (initialized or not, see [`CopyDest`]) from `offset` of the
/// peer's region `key`, straight from its memory (a mapping, or
/// `process_vm_readv`). `None` when direct access does not apply (see the
/// module doc), and then `out` may hold part of a copy. Reads are never
/// ordered behind ring operations, so callers check [`Link::is_idle`] when
/// that matters (a rendezvous pull does not: the payload is immutable
/// while exposed).
pub(crate) fn read_direct<D: CopyDest + ?Sized>(
    shm: &ShmShared,
    link: &Link,
    key: RegionKey,
    offset: u64,
    out: &mut D,
) -> Option<()> {
    if link.dead.load(Ordering::Relaxed) {
        return None;
    }
    link.with_windows([key.0], |[window], [flags]| {
        if !allows(flags, Access::READ) {
            return None;
        }
        read_window(shm, link, window, range(offset, out.dest_len(), window)?, out)
    })
}

/// Messages from this size on are copied by both CPUs when the sender's
/// memory is not in a shared mapping (`mw_transport::shm::assist`); below
/// it, handing out chunks costs more than the second CPU saves.
pub(crate) const ASSIST_MIN: usize = 512 << 10;
/// Bytes per chunk either side takes: large enough that the claim traffic
/// is noise, small enough that the receiver's final wait for the sender's
/// last chunk is short (~20 us).
pub(crate) const ASSIST_CHUNK: u64 = 256 << 10;

/// Messages from this size on, from a sender in another process, go
/// through the receiver's staging area (`mw_transport::shm::stage`).
/// Measured on the test host (`mwbench --bench bandwidth --op send_recv
/// --transport shm`, ranks as processes under mwrun, builds alternating,
/// GB/s, kernel copies -> staged): 16 MiB 13-15 -> 22-24, 8 MiB 19-21 ->
/// 34-36, 4 MiB 22-23 -> 36-38, 2 MiB 22-23 -> 31-32; but with staging
/// from 512 KiB on, 1 MiB went 19-23 -> 14-18 and 512 KiB 12-18 -> 11:
/// those fit the caches, where the kernel's copy is fast, and make a
/// pipeline of one or two chunks.
pub(crate) const STAGE_MIN: usize = 2 << 20;

/// [`read_direct`] for a rendezvous pull of sender token `token`: the
/// same copy, but for a large message from user memory (cross-memory
/// attach) the sender, waiting for this pull, is offered chunks of it to
/// write into `out` itself (`process_vm_writev`) while this side reads the
/// rest. When the sender is another thread of this process both sides copy
/// with `memcpy` (`mw_transport::shm::read_lent`/`write_lent`). `Some` only when every byte of `out` has landed; `None` as
/// `read_direct`, and also when the sender failed a chunk or died while
/// copying.
pub(crate) fn read_for_pull<D: CopyDest + ?Sized>(
    shm: &ShmShared,
    link: &Link,
    key: RegionKey,
    offset: u64,
    out: &mut D,
    token: u32,
    staging: Option<(RegionKey, crate::region::RawMem)>,
) -> Option<()> {
    let len = out.dest_len();
    if link.dead.load(Ordering::Relaxed) {
        return None;
    }
    let assisted = (ASSIST_MIN as u64..=mw_transport::shm::MAX_ASSISTED).contains(&(len as u64));
    let slot = if assisted { shm.own.assist_slot(link.their_index) } else { None };
    link.with_windows([key.0], |[window], [flags]| {
        if !allows(flags, Access::READ) {
            return None;
        }
        let start = range(offset, len, window)?;
        match (&window.kind, slot) {
            (WindowKind::Cma { base }, Some(slot)) if cma_allowed(shm, link) => {
                copy_assisted(shm, link, &slot, base + start as u64, offset, out, token, staging)
            }
            (WindowKind::Cma { base }, None) if cma_allowed(shm, link) => {
                // SAFETY: the window is a rendezvous exposure, checked
                // against its published length just above; its sender keeps
                // the payload allocated and unchanged until this pull's
                // `RndvDone`, which is sent only after this copy returned.
                #[allow(unsafe_code)]
                let copied = unsafe { mw_transport::shm::read_lent(link.far, base + start as u64, out, 0, len) };
                copied.map_err(|e| cma_failed(link, &e)).ok()
            }
            _ => read_window(shm, link, window, start, out),
        }
    })
}

/// How long the receiver waits for the next staged chunk before it copies
/// a chunk itself with the kernel's copy. About what staging one takes when
/// the two CPUs share a cache (512 KiB at ~20 GB/s); when the host puts the
/// two vCPUs far apart, staging slows down tenfold (every line crosses
/// between the two caches twice) and the receiver then takes a share.
const STAGING_WAIT: std::time::Duration = std::time::Duration::from_micros(30);

/// Reads `out` from `remote` in the sender's memory, sharing the chunks
/// with the sender through `slot`. Does not return while the sender may
/// still be writing into `out` or into `staging`.
///
/// With `staging` (a sender in another process), the sender copies its
/// chunks into that shared area and this side copies them out, both with
/// plain loads and stores (`mw_transport::shm::stage`); once it has staged
/// one, this side drains and takes a chunk itself only when nothing new
/// was staged for [`STAGING_WAIT`]. Before that, and without staging, this
/// side copies chunks itself with the kernel's copy.
#[allow(clippy::too_many_arguments)]
fn copy_assisted<D: CopyDest + ?Sized>(
    shm: &ShmShared,
    link: &Link,
    slot: &mw_transport::shm::AssistSlot<'_>,
    remote: u64,
    offset: u64,
    out: &mut D,
    token: u32,
    staging: Option<(RegionKey, crate::region::RawMem)>,
) -> Option<()> {
    let total = out.dest_len() as u64;
    let stage = staging.filter(|(_, mem)| mem.len() >= mw_transport::shm::STAGE_LEN).map(|(key, mem)| {
        // SAFETY: `mem` is this rank's staging area, a shared mapping of
        // STAGE_LEN bytes, page aligned, that lives as long as the endpoint
        // state whose lock our caller holds; only `Stage`s touch it (here,
        // and in the sender that finds its key in our assist slot).
        #[allow(unsafe_code)]
        let stage = unsafe { mw_transport::shm::Stage::new(mem.base()) };
        (key, stage)
    });
    if let Some((_, stage)) = &stage {
        stage.reset();
    }
    let stage_key = stage.as_ref().map_or(0, |(key, _)| key.0);
    let stage = stage.map(|(_, stage)| stage);
    let generation = slot.open(token, out.dest_ptr() as u64, total, offset, stage_key);
    // A sender asleep in its wait would miss the offer (the rendezvous
    // announcement may have been minutes ago): wake it to take chunks.
    shm.wake_for_store(link);
    let mut mine = 0u64;
    let mut drained = 0u64;
    let mut ok = true;
    // The sender's progress (bytes finished, chunks staged) and when it last moved.
    let mut progress = (0u64, 0u64);
    let mut progress_at = std::time::Instant::now();
    let mut spins = 0u32;
    let mut last_check = progress_at;
    loop {
        let staged = stage.as_ref().map_or(0, |s| s.staged_count());
        if drained < staged {
            let stage = stage.as_ref().expect("chunks are staged only with a stage");
            while drained < staged {
                // A bad descriptor fails the copy (the sender is confused);
                // the chunk is still drained, so the sender is not left waiting.
                ok &= stage.drain_into(drained, out).is_ok();
                drained += 1;
            }
            spins = 0;
            continue;
        }
        let (done, failed) = slot.sender_done(generation);
        if (done, staged) != progress {
            progress = (done, staged);
            progress_at = std::time::Instant::now();
            spins = 0;
        }
        let handed = slot.handed_out(generation);
        if handed < total {
            // The sender staging for us is the faster copy: leave it the
            // rest while it keeps up.
            let sender_busy = staged > 0 && progress_at.elapsed() < STAGING_WAIT;
            if !sender_busy {
                if let Some(chunk) = slot.take(generation, total, ASSIST_CHUNK) {
                    mine += chunk.len;
                    if ok {
                        let (start, len) = (chunk.start as usize, chunk.len as usize);
                        // SAFETY: `remote` is the exposed payload (its window
                        // checked by the caller) and `start + len <= total`:
                        // the sender keeps it allocated and unchanged until
                        // this pull's `RndvDone`, sent after this returned.
                        #[allow(unsafe_code)]
                        let copied =
                            unsafe { mw_transport::shm::read_lent(link.far, remote + chunk.start, out, start, len) };
                        if let Err(error) = copied {
                            cma_failed(link, &error);
                            ok = false; // keep taking chunks, so the sender gets no more
                        }
                    }
                    progress_at = std::time::Instant::now();
                    continue;
                }
            }
        } else if done >= total - mine && stage.as_ref().map_or(0, |s| s.staged_count()) == drained {
            // Every chunk is in: the sender publishes a staged chunk before
            // it counts it in `done`, so none is left to drain.
            return (ok && !failed).then_some(());
        }
        // Waiting for the sender. `out` must outlive its writes: a dead
        // sender writes no more, so that wait ends with the process. A
        // sender that is a thread of this process is never given up on: it
        // writes with a `memcpy`, which nothing but `out` staying allocated
        // makes safe, and every chunk it claimed ends in `finished` or
        // `failed` within that copy.
        spins += 1;
        if spins < 1 << 12 {
            std::hint::spin_loop();
            continue;
        }
        std::thread::yield_now();
        if link.far != mw_transport::shm::Far::Local && link.gone_since(&mut last_check) {
            return None;
        }
    }
}

impl Endpoint {
    /// The link to `rank` when a direct access may go now (nothing of ours
    /// toward it is still in the ring, so order is kept).
    #[inline]
    fn shm_direct(&self, rank: u32) -> Option<(&ShmShared, &Link)> {
        let shm = self.shared.shm.as_deref()?;
        let link = shm.link(rank)?;
        (link.is_idle() && !link.dead.load(Ordering::Relaxed)).then_some((shm, link))
    }

    /// Put by direct store; `None`: use the ring.
    pub(crate) fn shm_put(&self, rank: u32, key: RegionKey, offset: u64, data: &[u8]) -> Option<()> {
        let (shm, link) = self.shm_direct(rank)?;
        link.with_windows([key.0], |[window], [flags]| {
            if !allows(flags, Access::WRITE) {
                return None;
            }
            write_window(shm, link, window, range(offset, data.len(), window)?, data)
        })?;
        shm.wake_for_store(link);
        shm.count_direct();
        Some(())
    }

    /// put_signal by direct stores: the data, then the signal word with
    /// Release. The signal must be in a shared mapping.
    pub(crate) fn shm_put_signal(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        data: &[u8],
        signal: Signal,
    ) -> Option<()> {
        let (shm, link) = self.shm_direct(rank)?;
        link.with_windows([key.0, signal.key.0], |[window, sig], [flags, sig_flags]| {
            if !allows(flags, Access::WRITE) || !allows(sig_flags, Access::WRITE) {
                return None;
            }
            let start = range(offset, data.len(), window)?;
            let at = range(signal.offset, 8, sig)?;
            write_then_signal(shm, link, window, start, data, sig, at, signal.op, signal.value)
        })?;
        shm.wake_for_store(link);
        shm.count_direct();
        Some(())
    }

    /// Looks up once the window of `rank`'s region `key`, for a caller that
    /// will store into it many times ([`put_signal_pinned`](Self::put_signal_pinned)).
    /// `None` unless `rank` shares this host and the region is in a shared
    /// mapping there.
    pub(crate) fn pin_window(&self, rank: u32, key: RegionKey) -> Option<PinnedWindow> {
        let link = self.shared.shm.as_deref()?.link(rank)?;
        let window = link.window(key.0)?;
        matches!(window.kind, WindowKind::Mapped(_)).then_some(PinnedWindow { rank, key, window })
    }

    /// [`shm_put_signal`](Self::shm_put_signal) (`Set` only) with the
    /// signal word in the data's region, whose window was pinned: no cache
    /// lookup, only the check of the live directory entry (a team's
    /// collectives put small data many times into the same scratch
    /// regions). `None`: use the general path. With `wake` false the caller
    /// must call [`wake_pinned`](Self::wake_pinned) for `target` before it
    /// waits for anything: a caller storing to several peers pays one
    /// fence for all of them instead of one each, and the stores' cache
    /// line transfers overlap.
    #[inline]
    pub(crate) fn put_signal_pinned(
        &self,
        target: &PinnedWindow,
        offset: u64,
        data: &[u8],
        signal_offset: u64,
        value: u64,
        wake: bool,
    ) -> Option<()> {
        let (shm, link) = self.shm_direct(target.rank)?;
        let window = &*target.window;
        let (live, flags) = link.peer.dir_key_flags(window.slot);
        if live != target.key.0 || !allows(flags, Access::WRITE) {
            return None;
        }
        let start = range(offset, data.len(), window)?;
        let at = range(signal_offset, 8, window)?;
        write_then_signal(shm, link, window, start, data, window, at, SignalOp::Set, value)?;
        if wake {
            shm.wake_for_store(link);
        }
        shm.count_direct();
        Some(())
    }

    /// Finishes [`put_signal_pinned`](Self::put_signal_pinned) calls made
    /// with `wake` false: one fence, then each target's peer is woken if
    /// it may be asleep.
    pub(crate) fn wake_pinned<'a>(&self, targets: impl IntoIterator<Item = &'a PinnedWindow>) {
        let Some(shm) = self.shared.shm.as_deref() else { return };
        mw_transport::shm::full_fence();
        for target in targets {
            if let Some(link) = shm.link(target.rank) {
                shm.wake_if_asleep(link);
            }
        }
    }

    /// Get by direct load; `None`: use the ring.
    pub(crate) fn shm_get(&self, rank: u32, key: RegionKey, offset: u64, out: &mut [u8]) -> Option<()> {
        let (shm, link) = self.shm_direct(rank)?;
        read_direct(shm, link, key, offset, out)?;
        shm.count_direct();
        Some(())
    }

    /// An atomic as the CPU instruction on the mapped word; returns the old
    /// value. `None`: use the ring (the owner applies the same instruction).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn shm_atomic(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        op: AtomicOp,
        width: AtomicWidth,
        operand: u64,
        compare: u64,
    ) -> Option<u64> {
        let (shm, link) = self.shm_direct(rank)?;
        let old = link.with_windows([key.0], |[window], [flags]| {
            if !allows(flags, Access::ATOMIC) {
                return None;
            }
            let WindowKind::Mapped(peer) = &window.kind else { return None };
            let bytes = match width {
                AtomicWidth::U32 => 4,
                AtomicWidth::U64 => 8,
            };
            let at = range(offset, bytes, window)?;
            let mem = peer.mem();
            if !mem.is_aligned(at, bytes) {
                return None;
            }
            Some(match width {
                AtomicWidth::U64 => apply_u64(mem.atomic_u64(at), op, operand, compare),
                AtomicWidth::U32 => u64::from(apply_u32(mem.atomic_u32(at), op, operand as u32, compare as u32)),
            })
        })?;
        if op != AtomicOp::Load {
            shm.wake_for_store(link);
        }
        shm.count_direct();
        Some(old)
    }
}
