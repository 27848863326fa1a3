//! Regions as the user sees them: allocation, registration of user memory,
//! local access to region contents, and waiting on a signal word.
//!
//! Owns: the lifetime rule that makes registration safe. A [`Region`] either
//! owns its memory (`alloc_shared`, alias `alloc`; `alloc_symmetric`) or exists only inside
//! [`Endpoint::with_registered`], whose scope ends with deregistration even
//! on panic; so remote writes can never reach memory that Rust has freed or
//! lent elsewhere. Must not: execute remote operations (target.rs does).

use std::sync::atomic::Ordering;

use crate::deadline::Bound;
use crate::endpoint::Endpoint;
use crate::region::{Access, Arrival, OwnedMem, RawMem, RegionKey, RegisterTarget};
use crate::rma::Cmp;
use crate::{Error, Result};

/// Memory this rank exposes to remote operations. Dropping it deregisters
/// it; later remote operations naming its key fail with `BadKey`.
#[derive(Debug)]
pub struct Region<'ep> {
    ep: &'ep Endpoint,
    key: RegionKey,
    mem: RawMem,
    _owned: Option<OwnedMem>,
}

pub(crate) fn random_key() -> RegionKey {
    let mut bytes = [0u8; 8];
    getrandom::getrandom(&mut bytes).expect("the OS random source failed");
    // Key 0 is never handed out, so a zeroed key in user code is always invalid.
    RegionKey(u64::from_le_bytes(bytes).max(1))
}

impl Endpoint {
    fn insert_region(&self, mem: RawMem, access: Access, key: Option<RegionKey>, fd: Option<i32>) -> Result<RegionKey> {
        let mut state = self.lock();
        let key = match key {
            Some(key) if state.regions.insert(key, mem, access) => key,
            Some(_) => return Err(Error::InvalidArgument("symmetric region key already in use on this rank")),
            None => loop {
                let key = random_key();
                if state.regions.insert(key, mem, access) {
                    break key;
                }
            },
        };
        // Same-host peers find it in our directory and access it directly.
        if let Some(shm) = &mut state.shm {
            shm.publish(key, &mem, fd, access);
        }
        Ok(key)
    }

    /// Region memory: in a shared memory file when same-host peers may map it.
    fn owned_mem(&self, len: usize) -> OwnedMem {
        OwnedMem::zeroed(len, self.shared.shm.is_some())
    }

    /// Allocates `len` zeroed bytes, cache-line aligned, that remote ranks
    /// may access with the given rights (DESIGN §1 `alloc_shared`). With
    /// same-host peers the memory is a shared memory file (memfd) they map,
    /// so their puts, gets and atomics are direct loads and stores. The key
    /// is random and this rank's alone: other ranks learn it from
    /// [`Endpoint::exchange_keys`] (or use [`Endpoint::alloc_symmetric`]).
    ///
    /// The region borrows the endpoint, so it is dropped (deregistered)
    /// before [`Endpoint::finalize`] can run.
    pub fn alloc_shared(&self, len: usize, access: Access) -> Result<Region<'_>> {
        let buf = self.owned_mem(len);
        let mem = owned_view(&buf, len);
        let key = self.insert_region(mem, access, None, buf.fd())?;
        Ok(Region { ep: self, key, mem, _owned: Some(buf) })
    }

    /// Short name of [`Endpoint::alloc_shared`]; identical in every respect.
    #[inline]
    pub fn alloc(&self, len: usize, access: Access) -> Result<Region<'_>> {
        self.alloc_shared(len, access)
    }

    /// Collective: every rank allocates `len` bytes under the same key, so
    /// `(rank, region.key(), offset)` names the same place on every rank.
    pub fn alloc_symmetric(&self, len: usize, access: Access) -> Result<Region<'_>> {
        let mut proposal = random_key().0.to_le_bytes().to_vec();
        proposal.extend_from_slice(&(len as u64).to_le_bytes());
        let all = self.allgather_bytes(&proposal)?;
        if all.iter().any(|b| b.len() != 16 || b[8..] != proposal[8..]) {
            return Err(Error::InvalidArgument("alloc_symmetric called with different lengths on different ranks"));
        }
        // Rank 0's proposal wins; every rank registers it, then all wait for
        // each other so no operation can arrive before the key exists.
        let chosen = RegionKey(u64::from_le_bytes(all[0][..8].try_into().expect("length checked")));
        let buf = self.owned_mem(len);
        let mem = owned_view(&buf, len);
        let inserted = self.insert_region(mem, access, Some(chosen), buf.fd());
        self.barrier()?;
        let key = inserted?;
        Ok(Region { ep: self, key, mem, _owned: Some(buf) })
    }

    /// Registers `memory` for the duration of `f` (which receives the region);
    /// it is deregistered when `f` returns or unwinds, before the borrow ends.
    pub fn with_registered<R>(&self, memory: &mut [u8], access: Access, f: impl FnOnce(&Region<'_>) -> R) -> Result<R> {
        // SAFETY: `memory` is exclusively borrowed for this call and the region
        // (and with it the registration) is dropped before we return or unwind.
        let mem = unsafe_region_mem(memory);
        let key = self.insert_region(mem, access, None, None)?;
        let region = Region { ep: self, key, mem, _owned: None };
        Ok(f(&region))
    }

    /// Registers `len` bytes at `base` until the returned region is dropped.
    /// For callers that cannot express the borrow in Rust's types (the C API);
    /// Rust code uses [`Endpoint::with_registered`] instead.
    ///
    /// # Safety
    /// `base..base+len` must be valid for reads and writes, and must not be
    /// freed or reused for anything else, until the returned region is
    /// dropped; while it is registered, the caller must not access the memory
    /// concurrently with remote operations it has not synchronized with
    /// (a completed `wait_until`, barrier or flush orders them).
    #[allow(unsafe_code)]
    pub unsafe fn register_raw(&self, base: *mut u8, len: usize, access: Access) -> Result<Region<'_>> {
        if base.is_null() {
            return Err(Error::InvalidArgument("null memory pointer"));
        }
        // SAFETY: the caller guarantees validity until the region is dropped,
        // and dropping the region deregisters it.
        let mem = unsafe { RawMem::new(base, len) };
        let key = self.insert_region(mem, access, None, None)?;
        Ok(Region { ep: self, key, mem, _owned: None })
    }

    /// Collective: every rank's key for its region, in rank order.
    pub fn exchange_keys(&self, region: &Region<'_>) -> Result<Vec<RegionKey>> {
        let all = self.allgather_bytes(&region.key.0.to_le_bytes())?;
        all.iter()
            .map(|b| <[u8; 8]>::try_from(b.as_slice()).map(|b| RegionKey(u64::from_le_bytes(b))))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| Error::Bootstrap("key exchange returned a malformed key".into()))
    }

    /// Where `rank`'s region `key` can be reached by plain loads and stores
    /// from this process: its first byte in this rank's own address space,
    /// or `None` when it cannot (the peer is on another host or reached over
    /// UDP, declared dead, the region is registered user memory that
    /// same-host peers reach only through `process_vm_*`, or `rank` has no
    /// region `key`). For this rank itself it is the region's own address.
    ///
    /// A peer's region is mapped into this process once (the mapping the
    /// direct puts and gets use) and stays mapped while the peer keeps the
    /// region and this endpoint lives; accesses through the pointer follow
    /// the synchronization rule of any region memory (read what was put
    /// after a completed `wait_until`, barrier or flush; atomics on a word
    /// that others update remotely must be the CPU's atomic instructions,
    /// which is what memwire itself uses on mapped words). A mapping may
    /// also be released once an operation toward the peer finds the region
    /// gone, so the pointer must not be used after the peer frees it. The
    /// region's access rights bind remote operations only, not loads and
    /// stores through the pointer.
    pub fn peer_region_ptr(&self, rank: u32, key: RegionKey) -> Result<Option<std::ptr::NonNull<u8>>> {
        self.check_rank(rank)?;
        if rank == self.rank() {
            let state = self.lock();
            return Ok(state.regions.get(key).ok().and_then(|entry| std::ptr::NonNull::new(entry.mem.base())));
        }
        let Some(link) = self.shared.shm.as_deref().and_then(|shm| shm.link(rank)) else { return Ok(None) };
        if link.dead.load(Ordering::Relaxed) {
            return Ok(None);
        }
        Ok(link.window(key.0).and_then(|window| match &window.kind {
            crate::shm::WindowKind::Mapped(peer) => std::ptr::NonNull::new(peer.mem().base()),
            crate::shm::WindowKind::Cma { .. } => None,
        }))
    }

    /// Points address register `register` at `len` bytes from `offset` of
    /// `region`; remote `put_to_register` calls land there (Cenju-4).
    pub fn set_register(&self, register: u16, region: &Region<'_>, offset: u64, len: u64) -> Result<()> {
        self.lock()
            .regions
            .set_register(register, RegisterTarget { key: region.key, offset, len })
            .map_err(|status| Error::from_status(status).unwrap_or(Error::OutOfBounds))
    }

    /// Clears address register `register`.
    pub fn clear_register(&self, register: u16) {
        self.lock().regions.clear_register(register);
    }

    /// Waits until the u64 at `offset` of `region` satisfies `cmp value`
    /// (a put_signal's target spins here); returns the word's value. No
    /// operation timeout applies: when a peer writes the word is up to its
    /// application (see [`wait_until_timeout`](Self::wait_until_timeout)).
    pub fn wait_until(&self, region: &Region<'_>, offset: u64, cmp: Cmp, value: u64) -> Result<u64> {
        self.wait_until_bounded(region, offset, cmp, value, Bound::Unbounded)
    }

    /// [`wait_until`](Self::wait_until), giving up with [`Error::Timeout`]
    /// when the word does not satisfy `cmp value` within `timeout`.
    pub fn wait_until_timeout(
        &self,
        region: &Region<'_>,
        offset: u64,
        cmp: Cmp,
        value: u64,
        timeout: std::time::Duration,
    ) -> Result<u64> {
        self.wait_until_bounded(region, offset, cmp, value, Bound::After(timeout))
    }

    fn wait_until_bounded(&self, region: &Region<'_>, offset: u64, cmp: Cmp, value: u64, bound: Bound) -> Result<u64> {
        region.check_word(offset)?;
        let mem = region.mem;
        let at = offset as usize;
        let mut seen = mem.load_u64(at);
        if cmp.holds(seen, value) {
            return Ok(seen);
        }
        let until = self.deadline(bound);
        if let Some(shm) = &self.shared.shm {
            // Same-host peers store into this word directly: poll it alone
            // for a while (no lock, no syscall), progressing now and then so
            // ring traffic and UDP peers are still served. After 20 µs (a
            // peer running on another core answers within ~1 µs) each round
            // also yields: if the peer shares our core, it runs now instead
            // of when our time slice ends. Measured on this loaded 2-vCPU VM:
            // without the yield a ping-pong whose ranks shared a core locked
            // into one full spin budget per message; with it, ~23 µs (~4.5 µs
            // when yielding after 2 µs, but then the threads were co-located
            // in every run, and 0.3 µs needs them on separate cores).
            let start = std::time::Instant::now();
            let mut last_progress = start;
            loop {
                for _ in 0..64 {
                    seen = mem.load_u64(at);
                    if cmp.holds(seen, value) {
                        return Ok(seen);
                    }
                    std::hint::spin_loop();
                }
                let now = std::time::Instant::now();
                if now - start >= shm.spin || until.is_some_and(|t| now >= t) {
                    break;
                }
                if now - last_progress >= std::time::Duration::from_micros(10) {
                    self.progress();
                    last_progress = now;
                } else if now - start >= std::time::Duration::from_micros(20) {
                    std::thread::yield_now();
                }
            }
        }
        let holds = self.wait_for_until(
            |_| {
                seen = mem.load_u64(at);
                cmp.holds(seen, value)
            },
            until,
        );
        if holds {
            Ok(seen)
        } else {
            Err(Error::Timeout)
        }
    }
}

/// The view of memory a region is about to own.
#[allow(unsafe_code)]
fn owned_view(buf: &OwnedMem, len: usize) -> RawMem {
    // SAFETY: the caller moves `buf` into the `Region` that also keeps this
    // view; the region's `Drop` removes the view from the region table and
    // the shm directory before its fields (and with them `buf`) drop, and
    // the view is not copied anywhere else but those tables.
    unsafe { buf.raw(len) }
}

/// Builds the raw view of a user buffer for `with_registered`.
#[allow(unsafe_code)]
fn unsafe_region_mem(memory: &mut [u8]) -> RawMem {
    // SAFETY: see `with_registered`: the registration never outlives the borrow.
    unsafe { RawMem::new(memory.as_mut_ptr(), memory.len()) }
}

/// A raw view of a buffer that a blocking call (`recv`) lends to the
/// progress engine for the duration of the call only.
#[allow(unsafe_code)]
pub(crate) fn scoped_mem(memory: &mut [u8]) -> RawMem {
    // SAFETY: the caller keeps `memory` exclusively borrowed until the request
    // writing through this view is complete or cancelled (a drop guard, so
    // also on unwind); writes happen only under the endpoint lock.
    unsafe { RawMem::new(memory.as_mut_ptr(), memory.len()) }
}

/// A raw view of data that a blocking `send` exposes, in place, to one
/// rendezvous pull for the duration of the call only.
#[allow(unsafe_code)]
pub(crate) fn readonly_mem(memory: &[u8]) -> RawMem {
    // SAFETY: the view is registered with `Access::READ` only, so no remote
    // operation writes through it (every write path checks WRITE or ATOMIC
    // first) and no `Region` handle exists for it; the caller deregisters it
    // before the borrow of `memory` ends (a drop guard, so also on unwind).
    unsafe { RawMem::new(memory.as_ptr().cast_mut(), memory.len()) }
}

/// A raw view of a buffer handed over by `isend_owned`, exposed read-only to
/// one rendezvous pull while the exposure owns the `Vec`.
#[allow(unsafe_code)]
pub(crate) fn owned_mem(memory: &[u8]) -> RawMem {
    // SAFETY: registered with `Access::READ` only (no write path accepts
    // it); the caller moves the `Vec` that owns these bytes into the
    // exposure (moving a `Vec` does not move its heap buffer) and neither
    // mutates nor drops it until the exposure is withdrawn from every table.
    unsafe { RawMem::new(memory.as_ptr().cast_mut(), memory.len()) }
}

impl Region<'_> {
    /// The key remote ranks name this region by.
    pub fn key(&self) -> RegionKey {
        self.key
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.mem.len()
    }

    /// The first byte of the region's memory, for callers that access it
    /// directly (the C API). Reading or writing through it is subject to the
    /// same synchronization rule as [`Endpoint::register_raw`].
    pub fn as_ptr(&self) -> *mut u8 {
        self.mem.base()
    }

    /// The raw view (collectives read their scratch regions through it).
    pub(crate) fn raw(&self) -> RawMem {
        self.mem
    }

    /// Whether the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.mem.is_empty()
    }

    fn check(&self, offset: u64, len: usize) -> Result<usize> {
        crate::region::checked_range(offset, len as u64, self.mem.len()).map(|(o, _)| o).map_err(|_| Error::OutOfBounds)
    }

    fn check_word(&self, offset: u64) -> Result<()> {
        let at = self.check(offset, 8)?;
        if !self.mem.is_aligned(at, 8) {
            return Err(Error::Misaligned);
        }
        Ok(())
    }

    /// Copies bytes out of the region. The progress engine does not run
    /// during the copy, so operations it executes are seen whole or not at
    /// all; a same-host peer storing directly into the region at the same
    /// time (direct puts, put_signal) is not held off: its bytes may be
    /// seen in part, but the copy is made of atomic loads, so this is never
    /// a data race. Order such stores before the read with a signal
    /// ([`Endpoint::wait_until`]), a flush or a barrier.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        let at = self.check(offset, out.len())?;
        let _guard = self.ep.lock();
        self.mem.read_shared(at, out);
        Ok(())
    }

    /// The whole region as a vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        let _ = self.read(0, &mut out);
        out
    }

    /// Copies bytes into the region, with the same rule as
    /// [`Region::read`]: atomic stores, the progress engine held off,
    /// same-host peers' direct stores not (order them with signals,
    /// flushes or barriers).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        let at = self.check(offset, data.len())?;
        let _guard = self.ep.lock();
        self.mem.write_shared(at, data);
        Ok(())
    }

    /// Fills `len` bytes from `offset` with `byte` (as [`Region::write`]).
    pub fn fill(&self, offset: u64, len: usize, byte: u8) -> Result<()> {
        let at = self.check(offset, len)?;
        let _guard = self.ep.lock();
        // One cache-line-sized pattern, copied repeatedly: no allocation.
        let pattern = [byte; 64];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(pattern.len());
            self.mem.write_shared(at + done, &pattern[..n]);
            done += n;
        }
        Ok(())
    }

    /// Runs `f` on the region's bytes as one `&mut [u8]`, with this
    /// endpoint's progress engine held off (so operations served by this
    /// rank wait until `f` returns). Use [`Region::read`], [`Region::write`]
    /// and [`Region::fill`] instead unless the copy matters.
    ///
    /// # Safety
    /// Same-host peers store into the region's memory directly, without
    /// this endpoint's lock (direct puts, put_signal, atomics, and the
    /// cross-memory copies of large transfers), so a `&mut [u8]` over it is
    /// exclusive only if the program guarantees that no operation by another
    /// rank writes or reads the region while `f` runs: for example, every
    /// rank that targets it is between the same two barriers as this call,
    /// or has seen a signal this rank sets after `f` returns. `f` must not
    /// call into the endpoint (it would deadlock, not be unsound).
    #[allow(unsafe_code)]
    pub unsafe fn with_bytes<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let _guard = self.ep.lock();
        self.mem.with_slice_mut(0, self.mem.len(), f)
    }

    /// Atomic load of the u64 at `offset` (8-byte aligned).
    pub fn load_u64(&self, offset: u64) -> Result<u64> {
        self.check_word(offset)?;
        Ok(self.mem.load_u64(offset as usize))
    }

    /// Atomic store of the u64 at `offset` (8-byte aligned).
    pub fn store_u64(&self, offset: u64, value: u64) -> Result<()> {
        self.check_word(offset)?;
        self.mem.atomic_u64(offset as usize).store(value, Ordering::Release);
        Ok(())
    }

    /// Keeps a log of the newest `capacity` remote arrivals (Cenju-4 log buffer).
    pub fn enable_arrival_log(&self, capacity: usize) {
        let mut state = self.ep.lock();
        state.regions.enable_log(self.key, capacity);
        // Arrivals are logged by whoever executes them: peers must now come
        // through this rank instead of writing directly.
        let access = state.regions.get(self.key).map(|entry| entry.access);
        if let (Some(shm), Ok(access)) = (&mut state.shm, access) {
            shm.set_logged(self.key, access);
        }
    }

    /// Takes the oldest logged arrival.
    pub fn pop_arrival(&self) -> Option<Arrival> {
        self.ep.lock().regions.pop_arrival(self.key)
    }

    /// How many arrivals the log dropped because it was full.
    pub fn arrivals_lost(&self) -> u64 {
        self.ep.lock().regions.arrivals_lost(self.key)
    }
}

impl Drop for Region<'_> {
    fn drop(&mut self) {
        let mut state = self.ep.lock();
        if let Some(shm) = &mut state.shm {
            shm.unpublish(self.key);
        }
        state.regions.remove(self.key);
    }
}
