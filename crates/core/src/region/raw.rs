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
//! mapping ([`OwnedMem::Shared`]) are also written directly by same-host
//! peers ([`PeerWindow`]), without that lock: as with any RMA, the program
//! orders such writes against its own reads with signals, flushes or
//! barriers. Atomics are always the CPU's atomic instructions, whoever
//! executes them (this rank's progress engine serving a remote host, or a
//! same-host peer on its own mapping of the page), so one word never mixes
//! two mechanisms.
#![allow(unsafe_code)]

use mw_transport::shm::CopyDest;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A raw view of registered memory: base pointer and length.
#[derive(Debug, Clone, Copy)]
pub struct RawMem {
    base: *mut u8,
    len: usize,
}

// SAFETY: RawMem is a plain pointer+length; the memory it names is only touched
// under the endpoint lock (see module doc), so moving the view across threads
// (the progress thread) does not create unsynchronized access.
unsafe impl Send for RawMem {}

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
    pub fn raw(&self) -> RawMem {
        // SAFETY: the allocation is live while `self` is, and RawMem users hold
        // the endpoint lock; the region deregisters before this buffer drops.
        unsafe { RawMem::new(self.ptr, self.len) }
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
    pub fn raw(&self, len: usize) -> RawMem {
        match self {
            OwnedMem::Heap(buf) => buf.raw(),
            OwnedMem::Shared(seg) => {
                assert!(len <= seg.len(), "view longer than the segment");
                // SAFETY: the mapping is valid for `seg.len() >= len` bytes
                // while `self` lives; the region deregisters before its
                // OwnedMem drops (field order in `Region`).
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
    len: usize,
    /// Page tables filled in ([`PeerWindow::prefault_once`]).
    prefaulted: std::sync::atomic::AtomicBool,
}

impl PeerWindow {
    /// Maps `len` bytes of the memory file `fd` of process `pid`.
    pub fn open(pid: u32, fd: i32, len: usize) -> std::io::Result<PeerWindow> {
        let seg = mw_transport::shm::Segment::open_peer(pid, fd, len)?;
        Ok(PeerWindow { seg, len, prefaulted: std::sync::atomic::AtomicBool::new(false) })
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

    /// A raw view of the peer's region, valid while `self` lives.
    pub fn mem(&self) -> RawMem {
        // SAFETY: the mapping covers `len` bytes (checked by open_peer) and
        // stays mapped while `self` lives; callers use the view only while
        // they hold the window (under the window cache's read lock).
        unsafe { RawMem::new(self.seg.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_and_atomics() {
        let buf = AlignedBuf::zeroed(64);
        let mem = buf.raw();
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
    #[should_panic]
    fn out_of_bounds_is_caught() {
        let buf = AlignedBuf::zeroed(16);
        buf.raw().write(10, &[0u8; 10]);
    }
}
