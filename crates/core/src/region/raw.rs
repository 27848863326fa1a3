//! The unsafe island for region memory: reads, writes and atomics through a raw
//! pointer to memory that a [`RegionTable`](super::RegionTable) entry describes.
//!
//! Owns: every dereference of region memory. Must not: decide whether an access
//! is allowed; callers pass ranges already checked against the region's length
//! by [`super::checked_range`], and each method re-asserts it (cheap, and it
//! keeps a logic error elsewhere from becoming memory corruption).
//!
//! Concurrency: memory is written by the progress engine and read by the owner
//! through `Region` accessors, both only while holding the endpoint lock, so
//! plain copies do not race among this process's threads. Regions in a shared
//! mapping ([`OwnedMem::Shared`]) and registered user memory are also written
//! by same-host peers ([`PeerWindow`] stores, `process_vm_writev`) without
//! that lock, so the owner's own accessors (`Region::read`/`write`) copy
//! through [`RawMem::read_shared`]/[`RawMem::write_shared`], made of relaxed
//! atomic loads and stores: a copy racing a peer's store may see old and new
//! bytes mixed (the program orders such writes against its reads with
//! signals, flushes or barriers, as with any RMA), but it is never a data
//! race, and no Rust reference to region memory is handed to user code.
//! Atomics are always the CPU's atomic instructions, whoever executes them
//! (this rank's progress engine serving a remote host, or a same-host peer on
//! its own mapping of the page), so one word never mixes two mechanisms.
//!
//! Views are `Copy` and carry no lifetime, so the only ways to make one are
//! `unsafe`: [`RawMem::new`], [`AlignedBuf::raw`] and [`OwnedMem::raw`] each
//! state how long the memory must outlive every copy. This module and its
//! types are private to `mw-core` (none is reachable from `memwire`).
#![allow(unsafe_code)]

use mw_transport::shm::CopyDest;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// A raw view of registered memory: base pointer and length.
#[derive(Debug, Clone, Copy)]
pub struct RawMem {
    base: *mut u8,
    len: usize,
}

// SAFETY: RawMem is a plain pointer+length; the memory it names is only touched
// under the endpoint lock or through atomics (see module doc), so moving the
// view across threads (the progress thread) does not create unsynchronized access.
unsafe impl Send for RawMem {}
// SAFETY: a shared `&RawMem` allows exactly what a copy of it does (the type
// is `Copy` and `Send`), so sharing adds no access beyond `Send`'s reasoning.
unsafe impl Sync for RawMem {}

impl RawMem {
    /// Describes `len` bytes at `base`.
    ///
    /// # Safety
    /// `base..base+len` must be valid for reads and writes for as long as this
    /// view (or any copy of it) is used, and must not be accessed through Rust
    /// references while the endpoint lock is not held.
    pub unsafe fn new(base: *mut u8, len: usize) -> RawMem {
        RawMem { base, len }
    }

    /// The view of `offset..offset+len` inside this one (in bounds, asserted).
    #[cfg(feature = "fuzzing")]
    pub fn subrange(&self, offset: usize, len: usize) -> RawMem {
        self.assert_in_bounds(offset, len);
        // SAFETY: `offset + len <= self.len` (asserted), so the new base stays
        // inside the memory this view describes, and the sub-view inherits
        // `new`'s contract for a subset of the same bytes.
        RawMem { base: unsafe { self.base.add(offset) }, len }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The base pointer (for callers outside Rust that access the memory directly).
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn assert_in_bounds(&self, offset: usize, len: usize) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "region access {offset}+{len} outside {} bytes (unchecked caller)",
            self.len
        );
    }

    /// Copies `data` to `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) {
        self.assert_in_bounds(offset, data.len());
        // SAFETY: the range is inside the registered memory (asserted above),
        // which is valid for writes per `new`'s contract; `data` is a separate
        // Rust slice (incoming packet or user buffer), so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(offset), data.len()) }
    }

    /// Copies `out.len()` bytes from `offset` into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        self.assert_in_bounds(offset, out.len());
        // SAFETY: in bounds (asserted), valid for reads per `new`; `out` is a
        // distinct Rust slice so it cannot overlap registered memory that is
        // only reachable through this view while the lock is held.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(offset), out.as_mut_ptr(), out.len()) }
    }

    /// Copies `out.dest_len()` bytes from `offset` into `out`, which may be
    /// uninitialized room (see [`CopyDest`]).
    pub fn read_into<D: CopyDest + ?Sized>(&self, offset: usize, out: &mut D) {
        let len = out.dest_len();
        self.assert_in_bounds(offset, len);
        // SAFETY: in bounds (asserted), valid for reads per `new`; `out` is
        // valid for writes of `len` bytes (`CopyDest`'s contract) and, being
        // exclusively borrowed Rust memory, does not overlap this region.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(offset), out.dest_ptr(), len) }
    }

    /// Copies `out.len()` bytes from `offset` into `out` with relaxed atomic
    /// loads (words where aligned, bytes at the edges), for memory that
    /// same-host peers may be storing into at the same time: the bytes of a
    /// racing store may be old or new, but the copy is not a data race.
    pub fn read_shared(&self, offset: usize, out: &mut [u8]) {
        self.assert_in_bounds(offset, out.len());
        let mut done = 0;
        while done < out.len() {
            let at = offset + done;
            if self.is_aligned(at, 8) && out.len() - done >= 8 {
                let word = self.atomic_u64(at).load(Ordering::Relaxed);
                out[done..done + 8].copy_from_slice(&word.to_ne_bytes());
                done += 8;
            } else {
                out[done] = self.atomic_u8(at).load(Ordering::Relaxed);
                done += 1;
            }
        }
    }

    /// Copies `data` to `offset` with relaxed atomic stores (the mirror of
    /// [`RawMem::read_shared`]).
    pub fn write_shared(&self, offset: usize, data: &[u8]) {
        self.assert_in_bounds(offset, data.len());
        let mut done = 0;
        while done < data.len() {
            let at = offset + done;
            if self.is_aligned(at, 8) && data.len() - done >= 8 {
                let word = u64::from_ne_bytes(data[done..done + 8].try_into().expect("8 bytes"));
                self.atomic_u64(at).store(word, Ordering::Relaxed);
                done += 8;
            } else {
                self.atomic_u8(at).store(data[done], Ordering::Relaxed);
                done += 1;
            }
        }
    }

    fn atomic_u8(&self, offset: usize) -> &AtomicU8 {
        self.assert_in_bounds(offset, 1);
        // SAFETY: in bounds (asserted), so the pointer is inside memory valid
        // per `new`; a byte is always aligned, and every concurrent access by
        // this process's safe paths to memory peers also store into goes
        // through atomics (module doc).
        unsafe { AtomicU8::from_ptr(self.base.add(offset)) }
    }

    /// Calls `f` with the bytes at `offset..offset+len` as a shared slice (used
    /// to hand region memory to the protocol without an intermediate copy).
    pub fn with_slice<R>(&self, offset: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        self.assert_in_bounds(offset, len);
        // SAFETY: in bounds and valid per `new`; the slice lives only for the
        // call, during which the endpoint lock is held so nothing writes it.
        let slice = unsafe { std::slice::from_raw_parts(self.base.add(offset), len) };
        f(slice)
    }

    /// Calls `f` with the bytes at `offset..offset+len` as a mutable slice.
    pub fn with_slice_mut<R>(&self, offset: usize, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        self.assert_in_bounds(offset, len);
        // SAFETY: in bounds and valid per `new`; exclusive for the call because
        // the endpoint lock is held and no other view hands out references.
        let slice = unsafe { std::slice::from_raw_parts_mut(self.base.add(offset), len) };
        f(slice)
    }

    /// The 64-bit word at `offset` as an atomic. `offset` must be 8-aligned in
    /// the address space (checked by the caller, asserted here).
    pub fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        self.assert_in_bounds(offset, 8);
        // SAFETY: `self.base.add(offset)` stays in bounds (asserted above).
        let ptr = unsafe { self.base.add(offset) };
        assert!(ptr as usize % 8 == 0, "unaligned atomic (unchecked caller)");
        // SAFETY: aligned (asserted), in bounds, valid for the lifetime of the
        // registration; all concurrent access to this word goes through atomics.
        unsafe { AtomicU64::from_ptr(ptr.cast()) }
    }

    /// The 32-bit word at `offset` as an atomic (4-aligned).
    pub fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        self.assert_in_bounds(offset, 4);
        // SAFETY: in bounds (asserted above).
        let ptr = unsafe { self.base.add(offset) };
        assert!(ptr as usize % 4 == 0, "unaligned atomic (unchecked caller)");
        // SAFETY: aligned (asserted), in bounds, valid while registered; all
        // concurrent access to this word goes through atomics.
        unsafe { AtomicU32::from_ptr(ptr.cast()) }
    }

    /// Whether `offset` is aligned to `width` in the address space.
    pub fn is_aligned(&self, offset: usize, width: usize) -> bool {
        (self.base as usize).wrapping_add(offset) % width == 0
    }

    /// The region's address in this process (for peers that copy into it
    /// with `process_vm_writev`).
    pub fn addr(&self) -> u64 {
        self.base as u64
    }

    /// Acquire-load of the 64-bit word at `offset` (8-aligned), for `wait_until`.
    pub fn load_u64(&self, offset: usize) -> u64 {
        self.atomic_u64(offset).load(Ordering::Acquire)
    }
}

/// Zeroed memory aligned to a cache line, owned by a region the library allocated.
#[derive(Debug)]
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: AlignedBuf uniquely owns its allocation; access goes through RawMem
// under the endpoint lock.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only expose the pointer, never the bytes.
unsafe impl Sync for AlignedBuf {}

const ALIGN: usize = 64;

impl AlignedBuf {
    /// Allocates `len` zeroed bytes (a zero-length request allocates one line).
    pub fn zeroed(len: usize) -> AlignedBuf {
        let layout = Self::layout(len);
        // SAFETY: the layout has nonzero size (at least one cache line).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, len }
    }

    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len.max(ALIGN), ALIGN).expect("region size overflows isize")
    }

    /// A raw view of the whole buffer.
    ///
    /// # Safety
    /// The view and every copy of it must not be used after `self` is
    /// dropped (a region deregisters, removing its views from every table,
    /// before its buffer drops), and [`RawMem::new`]'s rule on references
    /// applies.
    pub unsafe fn raw(&self) -> RawMem {
        // SAFETY: the allocation is valid for `len` bytes while `self` lives,
        // and the caller promises not to use the view longer.
        unsafe { RawMem::new(self.ptr, self.len) }
    }

    /// Copies `out.len()` bytes from `offset` into `out` (bounds asserted);
    /// the borrow of `self` keeps the buffer alive, so this needs no contract.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        // SAFETY: the view lives only for this call, while `&self` keeps the
        // allocation alive; no reference into the buffer exists meanwhile.
        unsafe { self.raw() }.read(offset, out)
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with the same layout.
        unsafe { std::alloc::dealloc(self.ptr, Self::layout(self.len)) }
    }
}

/// Memory a region owns: on the heap, or in a shared memory file that
/// same-host peers map ([`PeerWindow`]).
#[derive(Debug)]
pub enum OwnedMem {
    /// Cache-line aligned heap memory (no same-host peers to share with).
    Heap(AlignedBuf),
    /// A zeroed, page-aligned shared mapping of a memory file.
    Shared(mw_transport::shm::Segment),
}

impl OwnedMem {
    /// `len` zeroed bytes, in a shared memory file when `shared` (falling
    /// back to the heap if the kernel refuses one).
    pub fn zeroed(len: usize, shared: bool) -> OwnedMem {
        if shared {
            if let Ok(seg) = mw_transport::shm::Segment::create("memwire-region", len) {
                return OwnedMem::Shared(seg);
            }
        }
        OwnedMem::Heap(AlignedBuf::zeroed(len))
    }

    /// A raw view of the first `len` bytes (the length asked for).
    ///
    /// # Safety
    /// As [`AlignedBuf::raw`]: the view and its copies must not be used after
    /// `self` is dropped.
    pub unsafe fn raw(&self, len: usize) -> RawMem {
        match self {
            // SAFETY: forwarded; the caller's promise covers the heap buffer.
            OwnedMem::Heap(buf) => unsafe { buf.raw() },
            OwnedMem::Shared(seg) => {
                assert!(len <= seg.len(), "view longer than the segment");
                // SAFETY: the mapping is valid for `seg.len() >= len` bytes
                // while `self` lives, and the caller does not use the view
                // longer (a region deregisters before its OwnedMem drops).
                unsafe { RawMem::new(seg.as_ptr(), len) }
            }
        }
    }

    /// The memory file's fd, for peers to map (shared memory only).
    pub fn fd(&self) -> Option<i32> {
        match self {
            OwnedMem::Heap(_) => None,
            OwnedMem::Shared(seg) => seg.fd(),
        }
    }
}

/// A same-host peer's region, mapped into this process: direct loads,
/// stores, copies and CPU atomics on the peer's memory.
#[derive(Debug)]
pub struct PeerWindow {
    seg: mw_transport::shm::Segment,
    /// The view of the whole mapping; lent out only by reference ([`PeerWindow::mem`]).
    mem: RawMem,
    /// Page tables filled in ([`PeerWindow::prefault_once`]).
    prefaulted: std::sync::atomic::AtomicBool,
}

impl PeerWindow {
    /// Maps `len` bytes of the memory file `fd` of process `pid`. Safe to
    /// call (mapping is not access), but crate-private: only the shm
    /// directory, which learned `pid`, `fd` and `len` from the peer's own
    /// published entry, opens windows.
    pub fn open(pid: u32, fd: i32, len: usize) -> std::io::Result<PeerWindow> {
        let seg = mw_transport::shm::Segment::open_peer(pid, fd, len)?;
        // SAFETY: the mapping covers `len` bytes (checked by open_peer) and
        // stays mapped while `seg` lives, which is as long as this window;
        // the view is lent out only by reference, borrowed from the window.
        let mem = unsafe { RawMem::new(seg.as_ptr(), len) };
        Ok(PeerWindow { seg, mem, prefaulted: std::sync::atomic::AtomicBool::new(false) })
    }

    /// Faults the whole mapping in, the first time only: for a window
    /// written in large pieces right away (a staging area), where first
    /// touches cost ~3 us a page on these VMs (a 512 KiB staged chunk took
    /// 384-433 us instead of 40).
    pub fn prefault_once(&self) {
        if !self.prefaulted.swap(true, Ordering::Relaxed) {
            self.seg.prefault();
        }
    }

    /// The view of the peer's region, borrowed from the window: callers
    /// use it while they hold the window (under the window cache's read
    /// lock) and never copy it out of the borrow.
    pub fn mem(&self) -> &RawMem {
        &self.mem
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_and_atomics() {
        let buf = AlignedBuf::zeroed(64);
        // SAFETY: `mem` is used only while `buf` lives (this test's scope).
        let mem = unsafe { buf.raw() };
        mem.write(3, b"abc");
        let mut out = [0u8; 3];
        mem.read(3, &mut out);
        assert_eq!(&out, b"abc");
        mem.atomic_u64(8).fetch_add(5, Ordering::SeqCst);
        assert_eq!(mem.load_u64(8), 5);
        mem.atomic_u32(16).store(7, Ordering::SeqCst);
        assert!(mem.is_aligned(16, 8));
        assert!(!mem.is_aligned(17, 4));
    }

    #[test]
    fn shared_copies_match_plain_copies_at_every_alignment() {
        let buf = AlignedBuf::zeroed(64);
        // SAFETY: `mem` is used only while `buf` lives (this test's scope).
        let mem = unsafe { buf.raw() };
        let data: Vec<u8> = (1..=40).collect();
        for offset in 0..9 {
            for len in [0, 1, 7, 8, 9, 17, 40] {
                mem.write(0, &[0u8; 64]);
                mem.write_shared(offset, &data[..len]);
                let mut plain = [0u8; 64];
                mem.read(0, &mut plain);
                assert_eq!(&plain[offset..offset + len], &data[..len], "write_shared {offset}+{len}");
                assert!(plain[..offset].iter().chain(&plain[offset + len..]).all(|&b| b == 0), "outside the range");
                let mut back = vec![0u8; len];
                mem.read_shared(offset, &mut back);
                assert_eq!(back, &data[..len], "read_shared {offset}+{len}");
            }
        }
    }

    #[test]
    fn shared_copies_race_with_atomic_stores_soundly() {
        // A peer storing into the mapping while the owner copies: with both
        // sides atomic, each word read is one the writer stored (Miri checks
        // that no access here is a data race).
        let buf = AlignedBuf::zeroed(64);
        // SAFETY: both threads are joined inside the scope, before `buf` drops.
        let mem = unsafe { buf.raw() };
        std::thread::scope(|s| {
            s.spawn(|| {
                for round in 1..=20u8 {
                    mem.write_shared(0, &[round; 64]);
                }
            });
            for _ in 0..20 {
                let mut out = [0u8; 64];
                mem.read_shared(0, &mut out);
                for word in out.chunks(8) {
                    assert!(word.iter().all(|&b| b == word[0]), "a word mixed two stores: {word:?}");
                }
            }
        });
    }

    #[test]
    fn owned_reads_need_no_contract() {
        let buf = AlignedBuf::zeroed(16);
        // SAFETY: the view is used within `buf`'s lifetime.
        unsafe { buf.raw() }.write(4, b"xy");
        let mut out = [0u8; 2];
        buf.read(4, &mut out);
        assert_eq!(&out, b"xy");
    }

    #[test]
    #[should_panic]
    fn out_of_bounds_is_caught() {
        let buf = AlignedBuf::zeroed(16);
        // SAFETY: the view is used within `buf`'s lifetime.
        unsafe { buf.raw() }.write(10, &[0u8; 10]);
    }
}
