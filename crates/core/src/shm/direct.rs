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

use super::{CachedWindow, Link, ShmShared, WindowKind, FLAG_LOGGED};
use crate::endpoint::Endpoint;
use crate::region::{checked_range, Access, RegionKey};
use crate::rma::Signal;
use crate::target::{apply_u32, apply_u64};

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

/// Reads `out.len()` bytes at `offset` of the peer's region `key` straight
/// from its memory (a mapping, or `process_vm_readv`). `None` when direct
/// access does not apply (see the module doc); reads are never ordered
/// behind ring operations, so callers check [`Link::is_idle`] when that
/// matters (a rendezvous pull does not: the payload is immutable while
/// exposed).
pub(crate) fn read_direct(shm: &ShmShared, link: &Link, key: RegionKey, offset: u64, out: &mut [u8]) -> Option<()> {
    if link.dead.load(Ordering::Relaxed) {
        return None;
    }
    link.with_windows([key.0], |[window], [flags]| {
        if !allows(flags, Access::READ) {
            return None;
        }
        let start = range(offset, out.len(), window)?;
        match &window.kind {
            WindowKind::Mapped(peer) => {
                peer.mem().read(start, out);
                Some(())
            }
            WindowKind::Cma { base } if cma_allowed(shm, link) => {
                mw_transport::shm::vm_read(link.pid, base + start as u64, out).map_err(|e| cma_failed(link, &e)).ok()
            }
            WindowKind::Cma { .. } => None,
        }
    })
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
            let WindowKind::Mapped(sig_map) = &sig.kind else { return None };
            let start = range(offset, data.len(), window)?;
            let at = range(signal.offset, 8, sig)?;
            let sig_mem = sig_map.mem();
            if !sig_mem.is_aligned(at, 8) {
                return None;
            }
            write_window(shm, link, window, start, data)?;
            let word = sig_mem.atomic_u64(at);
            match signal.op {
                SignalOp::Set => word.store(signal.value, Ordering::Release),
                SignalOp::Add => {
                    word.fetch_add(signal.value, Ordering::Release);
                }
            }
            Some(())
        })?;
        shm.wake_for_store(link);
        shm.count_direct();
        Some(())
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
