//! A staging area through which a sending process hands a receiving process
//! the chunks of a large message it copies (`assist.rs`), when the sender's
//! memory is private and the kernel's cross-memory copy is slow.
//!
//! Why: between processes, a rendezvous payload in the sender's private
//! memory can only be reached with `process_vm_readv`/`writev`, and where
//! the kernel's copy runs well below a user-space copy, two CPUs each doing
//! a kernel copy move a large message slower than a `get` from a shared
//! mapping would. Staged instead, the sender copies its chunks into this
//! shared area and the receiver copies them out, both with plain loads and
//! stores, both CPUs busy at once.
//!
//! The copies use 16-byte vector loads and stores ([`copy_lines`]), not
//! `memcpy`: glibc's `memcpy` takes `rep movsb` for sizes between 2 KiB and
//! the L2 size on AMD, and `rep movsb` of lines another core just wrote is
//! much slower than the vector loop at this area's chunk size.
//! (measurements: docs/perf-notes.md, "staging area")
//!
//! Layout (the receiver's memory file, mapped by the sender):
//!
//! ```text
//!     0  staged:  u64   chunks the sender published (sender writes, Release)
//!    64  drained: u64   chunks the receiver copied out (receiver writes, Release)
//!   128  descriptors: STAGE_BUFFERS × (start: u64, len: u64)
//!  4096  data: STAGE_BUFFERS buffers of STAGE_CHUNK bytes
//! ```
//!
//! Chunk `i` of a copy goes to buffer `i % STAGE_BUFFERS`. The sender (the
//! only writer of `staged`, the buffers and the descriptors) fills buffer
//! and descriptor once `i - drained < STAGE_BUFFERS` (Acquire on
//! `drained`), then stores `staged = i + 1` (Release). The receiver (the
//! only writer of `drained`) copies chunk `i` out after seeing `staged > i`
//! (Acquire), then stores `drained = i + 1` (Release). The receiver resets
//! both counters before it opens a copy in its assist slot, and a sender
//! stages only chunks it claimed in that slot's open generation, so a copy
//! never sees another's counts.
//!
//! The sender writes with plain stores, or with non-temporal ones while the
//! host keeps the two CPUs far apart ([`StageCopy`]); the caller picks.
//!
//! Owns: the layout, this protocol for both roles, and the vector copies.
//! Must not: claim chunks (`assist.rs` does), decide when staging (or which
//! form of store) is worth it, or trust a descriptor: the receiver checks
//! each against its buffer.

use std::sync::atomic::{AtomicU64, Ordering};

use super::assist::Chunk;
use super::copy::CopyDest;
use super::ring::Corrupt;

/// Buffers of the staging area.
pub const STAGE_BUFFERS: u64 = 4;
/// Bytes per buffer: the most a sender claims at a time when it stages.
pub const STAGE_CHUNK: u64 = 512 << 10;
const DESCRIPTORS_AT: usize = 128;
const DATA_AT: usize = 4096;
/// Bytes of a staging area.
pub const STAGE_LEN: usize = DATA_AT + (STAGE_BUFFERS * STAGE_CHUNK) as usize;

/// A staging area in a shared mapping, for either role.
#[derive(Debug, Clone, Copy)]
pub struct Stage<'a> {
    base: *mut u8,
    _mapping: std::marker::PhantomData<&'a [AtomicU64]>,
}

impl<'a> Stage<'a> {
    /// The staging area at `base`.
    ///
    /// # Safety
    /// `base` must be 64-byte aligned and valid for reads and writes of
    /// [`STAGE_LEN`] bytes for `'a`, in a mapping whose other users access
    /// it only through a `Stage` (this module's protocol).
    pub unsafe fn new(base: *mut u8) -> Stage<'a> {
        debug_assert!(base as usize % 64 == 0);
        Stage { base, _mapping: std::marker::PhantomData }
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at % 8 == 0 && at < DATA_AT);
        // SAFETY: `at` is below DATA_AT, inside the area (`new`'s contract),
        // 8-aligned (the base is 64-aligned), and the header words are only
        // ever accessed atomically, by both processes.
        unsafe { AtomicU64::from_ptr(self.base.add(at).cast()) }
    }

    fn staged(&self) -> &AtomicU64 {
        self.word(0)
    }

    fn drained(&self) -> &AtomicU64 {
        self.word(64)
    }

    fn descriptor(&self, index: u64) -> (&AtomicU64, &AtomicU64) {
        let at = DESCRIPTORS_AT + 16 * (index % STAGE_BUFFERS) as usize;
        (self.word(at), self.word(at + 8))
    }

    fn buffer(&self, index: u64) -> *mut u8 {
        // SAFETY: DATA_AT + (index % BUFFERS + 1) * CHUNK <= STAGE_LEN.
        unsafe { self.base.add(DATA_AT + ((index % STAGE_BUFFERS) * STAGE_CHUNK) as usize) }
    }

    /// Receiver: empties the counters for the next copy. Only while no
    /// sender can stage (before the copy is opened in the assist slot).
    pub fn reset(&self) {
        self.staged().store(0, Ordering::Relaxed);
        self.drained().store(0, Ordering::Relaxed);
    }

    /// Receiver: chunks published so far (Acquire: their bytes are visible).
    pub fn staged_count(&self) -> u64 {
        self.staged().load(Ordering::Acquire)
    }

    /// Receiver: copies staged chunk `index` (below
    /// [`Self::staged_count`]) into `out` where its descriptor says, frees
    /// its buffer, and returns where it went. A descriptor outside `out` or
    /// longer than a buffer is `Corrupt` (nothing copied, the buffer still
    /// freed so the sender is not left waiting).
    pub fn drain_into<D: CopyDest + ?Sized>(&self, index: u64, out: &mut D) -> Result<Chunk, Corrupt> {
        let (start, len) = self.descriptor(index);
        let chunk = Chunk { start: start.load(Ordering::Relaxed), len: len.load(Ordering::Relaxed) };
        let fits = chunk.len <= STAGE_CHUNK
            && chunk.start.checked_add(chunk.len).is_some_and(|end| end <= out.dest_len() as u64);
        if fits {
            // SAFETY: the chunk lies inside `out` (checked just above) and
            // inside buffer `index` (len <= STAGE_CHUNK); the sender
            // published it (the caller saw `staged > index`, Acquire) and
            // leaves the buffer alone until `drained` passes `index`.
            unsafe { copy_lines(out.dest_ptr().add(chunk.start as usize), self.buffer(index), chunk.len as usize) };
        }
        self.drained().store(index + 1, Ordering::Release);
        if fits {
            Ok(chunk)
        } else {
            Err(Corrupt)
        }
    }

    /// Sender: publishes `src` (at most [`STAGE_CHUNK`] bytes) as the chunk
    /// at `start` of the message, once a buffer is free:
    /// [`Self::wait_for_buffer`] then [`Self::publish`]. `false` when
    /// `give_up` said so (nothing published).
    pub fn stage(&self, start: u64, src: &[u8], how: StageCopy, give_up: impl FnMut() -> bool) -> bool {
        if !self.wait_for_buffer(give_up) {
            return false;
        }
        self.publish(start, src, how);
        true
    }

    /// Sender: waits until the next chunk's buffer is free (spinning
    /// briefly, then yielding the CPU between looks). `give_up` is asked now
    /// and then while the receiver has not freed it; `false` when it said so.
    pub fn wait_for_buffer(&self, mut give_up: impl FnMut() -> bool) -> bool {
        // Ours alone to write during the copy (module docs).
        let index = self.staged().load(Ordering::Relaxed);
        let mut spins = 0u32;
        while index - self.drained().load(Ordering::Acquire).min(index) >= STAGE_BUFFERS {
            spins = spins.wrapping_add(1);
            if spins < 64 {
                std::hint::spin_loop();
                continue;
            }
            // The receiver may be waiting for this CPU (more ranks than
            // CPUs): spinning on through our time slice starves it
            // (measurements: docs/perf-notes.md, "staging area").
            std::thread::yield_now();
            if spins % 64 == 0 && give_up() {
                return false;
            }
        }
        true
    }

    /// Sender: copies `src` (at most [`STAGE_CHUNK`] bytes) into the next
    /// chunk's buffer and publishes it as the chunk at `start` of the
    /// message. Only after [`wait_for_buffer`](Self::wait_for_buffer) said
    /// the buffer is free. `how` picks the stores (see [`StageCopy`]).
    pub fn publish(&self, start: u64, src: &[u8], how: StageCopy) {
        assert!(src.len() as u64 <= STAGE_CHUNK, "a staged chunk is larger than a buffer");
        let index = self.staged().load(Ordering::Relaxed);
        assert!(
            index - self.drained().load(Ordering::Acquire).min(index) < STAGE_BUFFERS,
            "publish without a free buffer"
        );
        // SAFETY: buffer `index % BUFFERS` is free: the receiver drained the
        // chunk that used it last (Acquire just above) and reads it again
        // only after our Release of `staged` below; `src` fits it (asserted).
        unsafe {
            match how {
                StageCopy::Cached => copy_lines(self.buffer(index), src.as_ptr(), src.len()),
                // The buffer is 64-byte aligned (DATA_AT and STAGE_CHUNK are
                // multiples of 64), as `stream_lines` requires.
                StageCopy::Streaming => stream_lines(self.buffer(index), src.as_ptr(), src.len()),
            }
        }
        let (at, len) = self.descriptor(index);
        at.store(start, Ordering::Relaxed);
        len.store(src.len() as u64, Ordering::Relaxed);
        self.staged().store(index + 1, Ordering::Release);
    }
}

/// How a sender writes a chunk into a staging buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageCopy {
    /// Plain stores ([`copy_lines`]): the lines stay in the sender's cache,
    /// where a receiver sharing that cache reads them. The faster form
    /// while the two CPUs share a cache.
    Cached,
    /// Non-temporal stores ([`stream_lines`]): the lines go to memory, and
    /// the receiver reads them from there. The faster form while the host
    /// puts the two CPUs far apart, where every line of plain stores would
    /// cross between the two caches twice (measurements: docs/perf-notes.md,
    /// "staging area").
    Streaming,
}

/// Copies `len` bytes with 16-byte vector loads and non-temporal 16-byte
/// stores, then fences: the stores are in memory order before any later
/// store (such as the one that publishes the chunk). Elsewhere than x86-64,
/// a plain copy.
///
/// # Safety
/// As [`copy_lines`]; and `dst` must be 16-byte aligned.
pub unsafe fn stream_lines(dst: *mut u8, src: *const u8, len: usize) {
    debug_assert!(dst as usize % 16 == 0, "stream_lines needs a 16-byte aligned destination");
    // SAFETY: the caller's contract, with the alignment `STREAM` needs.
    unsafe { copy_vectors::<true>(dst, src, len) }
}

/// Copies `len` bytes with 16-byte vector loads and stores, four per cache
/// line (see the module docs for why not `memcpy`).
///
/// # Safety
/// `src` valid for reads and `dst` for writes of `len` bytes; the ranges
/// do not overlap.
pub unsafe fn copy_lines(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { copy_vectors::<false>(dst, src, len) }
}

/// The loop of [`copy_lines`] (`STREAM` false) and [`stream_lines`]
/// (`STREAM` true: non-temporal stores, then a fence).
///
/// # Safety
/// As [`copy_lines`]; with `STREAM`, `dst` 16-byte aligned.
#[inline(always)]
unsafe fn copy_vectors<const STREAM: bool>(dst: *mut u8, src: *const u8, len: usize) {
    #[cfg_attr(miri, allow(unused_mut))]
    let mut at = 0;
    // Miri runs no streaming stores (their intrinsic is inline assembly):
    // there the plain copy below does it all, and Miri checks the stage
    // protocol around it (`make miri`).
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_storeu_si128, _mm_stream_si128};
        while at + 64 <= len {
            // SAFETY: `at + 64 <= len`, so all four loads and stores are in
            // bounds (the caller's contract); the loads and plain stores are
            // the unaligned forms, the streaming stores land 16-byte aligned
            // (`dst` is then, and `at` is a multiple of 64). SSE2 is part of
            // x86-64.
            unsafe {
                let s = src.add(at).cast::<__m128i>();
                let d = dst.add(at).cast::<__m128i>();
                let words = [
                    _mm_loadu_si128(s),
                    _mm_loadu_si128(s.add(1)),
                    _mm_loadu_si128(s.add(2)),
                    _mm_loadu_si128(s.add(3)),
                ];
                for (i, word) in words.into_iter().enumerate() {
                    if STREAM {
                        _mm_stream_si128(d.add(i), word);
                    } else {
                        _mm_storeu_si128(d.add(i), word);
                    }
                }
            }
            at += 64;
        }
        if STREAM {
            // Non-temporal stores are not ordered with later stores by the
            // usual x86 rules; a Release store after them does not cover them.
            // SAFETY: a fence has no memory operands.
            unsafe { _mm_sfence() };
        }
    }
    // SAFETY: the rest, `at..len`, is in bounds (caller's contract).
    unsafe { std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), len - at) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One cache line, so a vector of them is 64-aligned as `Stage` requires.
    #[derive(Clone, Copy)]
    #[repr(C, align(64))]
    struct Line([u64; 8]);

    /// A staging area on the heap, 64-aligned.
    fn area() -> Vec<Line> {
        vec![Line([0; 8]); STAGE_LEN / 64]
    }

    #[test]
    fn copy_lines_copies_every_length_and_alignment() {
        let src: Vec<u8> = (0..700u32).map(|i| (i * 7 + 3) as u8).collect();
        for offset in 0..3 {
            for len in [0, 1, 15, 63, 64, 65, 127, 128, 129, 500, 697 - offset] {
                let mut dst = vec![0u8; 700];
                // SAFETY: both ranges are in bounds of their vectors.
                unsafe { copy_lines(dst.as_mut_ptr().add(offset), src.as_ptr().add(offset), len) };
                assert_eq!(&dst[offset..offset + len], &src[offset..offset + len], "len {len} offset {offset}");
                assert!(dst[..offset].iter().chain(&dst[offset + len..]).all(|&b| b == 0), "wrote outside");
            }
        }
    }

    #[test]
    fn stream_lines_copies_every_length_from_any_source_alignment() {
        let src: Vec<u8> = (0..800u32).map(|i| (i * 13 + 5) as u8).collect();
        for src_offset in 0..3 {
            for len in [0, 1, 15, 63, 64, 65, 127, 128, 129, 500, 700] {
                // The destination 64-byte aligned, as a staging buffer is.
                let mut dst = vec![Line([0; 8]); 12];
                let dst = dst.as_mut_ptr().cast::<u8>();
                // SAFETY: `src_offset + len <= 703` bytes of `src`, `len` of
                // the 768-byte aligned destination.
                unsafe { stream_lines(dst, src.as_ptr().add(src_offset), len) };
                // SAFETY: the destination's 768 bytes, written above.
                let dst = unsafe { std::slice::from_raw_parts(dst, 768) };
                assert_eq!(&dst[..len], &src[src_offset..src_offset + len], "len {len} offset {src_offset}");
                assert!(dst[len..].iter().all(|&b| b == 0), "wrote outside");
            }
        }
    }

    #[test]
    fn chunks_pass_in_order_through_the_buffers_between_two_threads() {
        let mut mem = area();
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: the vector holds STAGE_LEN bytes, 64-aligned; the test's
        // two threads use it only through these `Stage`s, and it outlives them.
        let stage = unsafe { Stage::new(base) };
        let base_addr = base as usize;
        stage.reset();
        // A message of 13 chunks, the last one short: more than the buffers
        // hold, so the sender must wait for the receiver to drain.
        let total = 12 * STAGE_CHUNK as usize + 1000;
        let message: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
        let mut out = vec![0u8; total];
        std::thread::scope(|scope| {
            let message = &message;
            scope.spawn(move || {
                // SAFETY: as above.
                let stage = unsafe { Stage::new(base_addr as *mut u8) };
                // Both forms of store, switching between chunks as a sender
                // does when the host moves its CPUs.
                let forms = [StageCopy::Cached, StageCopy::Streaming, StageCopy::Streaming, StageCopy::Cached];
                for (i, start) in (0..total).step_by(STAGE_CHUNK as usize).enumerate() {
                    let end = (start + STAGE_CHUNK as usize).min(total);
                    assert!(stage.stage(start as u64, &message[start..end], forms[i % forms.len()], || false));
                }
            });
            let chunks = total.div_ceil(STAGE_CHUNK as usize) as u64;
            for index in 0..chunks {
                while stage.staged_count() <= index {
                    std::hint::spin_loop();
                }
                let chunk = stage.drain_into(index, &mut out[..]).expect("in bounds");
                assert_eq!(chunk.start, index * STAGE_CHUNK);
            }
        });
        assert!(out == message, "the message arrived intact");
    }

    #[test]
    fn a_descriptor_outside_the_destination_is_corrupt_and_frees_the_buffer() {
        let mut mem = area();
        // SAFETY: as in the test above (one thread).
        let stage = unsafe { Stage::new(mem.as_mut_ptr().cast()) };
        stage.reset();
        assert!(stage.stage(4096, &[1u8; 100], StageCopy::Streaming, || false));
        let mut small = vec![0u8; 4096];
        assert_eq!(stage.drain_into(0, &mut small[..]), Err(Corrupt));
        assert!(small.iter().all(|&b| b == 0), "nothing copied");
        // The buffer is free again: four more chunks fit without waiting.
        for i in 0..STAGE_BUFFERS {
            assert!(stage.stage(i, &[2u8; 8], StageCopy::Cached, || panic!("no buffer should be busy")));
        }
    }

    #[test]
    fn a_sender_that_gives_up_publishes_nothing() {
        let mut mem = area();
        // SAFETY: as above.
        let stage = unsafe { Stage::new(mem.as_mut_ptr().cast()) };
        stage.reset();
        for i in 0..STAGE_BUFFERS {
            assert!(stage.stage(i * 8, &[3u8; 8], StageCopy::Cached, || false));
        }
        let mut asked = 0;
        assert!(!stage.stage(99, &[4u8; 8], StageCopy::Cached, || {
            asked += 1;
            asked == 3
        }));
        assert_eq!(stage.staged_count(), STAGE_BUFFERS, "the fifth chunk was not published");
    }
}
