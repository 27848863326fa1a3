//! Two CPUs copying one large message: the receiver of a same-host
//! rendezvous copies with `process_vm_readv` and, while it does, the sender
//! (which is only waiting for the receiver to finish) copies other chunks of
//! the same message with `process_vm_writev`: two copies at once move it
//! at nearly twice one copy's speed. How the kernel's copy compares with a
//! `memcpy` differs from host to host (measurements: docs/perf-notes.md,
//! "two CPUs per large message"); between threads of one process both
//! sides copy with `memcpy` (see `copy`'s `read_lent`).
//!
//! One slot per (receiver, sender) pair, in the receiver's control segment
//! at the sender's index, one cache line:
//!
//! ```text
//!  0  claim:  u64  generation << 40 | bytes handed out so far
//!  8  done:   u64  bytes the sender finished (for the open generation)
//! 16  token:  u64  generation << 40 | the sender's rendezvous token
//! 24  dest:   u64  address of the receiver's buffer (receiver's memory)
//! 32  total:  u64  bytes of the message
//! 40  offset: u64  where the message starts in the sender's exposed region
//! 48  failed: u64  generation of a chunk the sender claimed and could not copy
//! 56  stage:  u64  key of the receiver's staging area (`stage.rs`), 0 for none
//! ```
//!
//! The protocol, for generation `g` (the receiver's count of opened slots):
//! - the receiver, the slot's only opener, writes `done = 0`, `token`,
//!   `dest`, `total`, `offset` (Relaxed), then `claim = g << 40` (Release);
//! - both sides take chunks with a compare-and-swap on `claim` that keeps
//!   the generation and adds a chunk, and only while the offset is below
//!   `total`; the receiver copies its chunks, the sender its own and then
//!   adds their length to `done` (Release);
//! - the receiver, once no chunk is left, waits until `done` equals the
//!   bytes it did not copy itself (Acquire), and only then reuses the slot.
//!
//! A sender reads the fields after an Acquire load of `claim`, and uses them
//! only after its compare-and-swap on that same `claim` value succeeded: the
//! receiver rewrites the fields only after every chunk of the generation was
//! handed out, when such a swap can no longer succeed, so fields read before
//! a successful swap belong to its generation. A sender that never looks
//! costs nothing: the receiver then takes every chunk itself. A chunk the
//! sender cannot copy (the receiver's buffer is gone, the kernel refuses) is
//! reported in `failed`; the receiver then treats the whole copy as failed
//! and the caller falls back to its other path.
//!
//! Owns: the slot layout and this claim protocol for both roles. Must not:
//! copy (the callers do, with [`super::read_lent`]/[`super::write_lent`]),
//! wait on anything but the slot, or decide which messages are worth it.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits of `claim` and `token` that hold the byte offset or token.
const LOW_BITS: u32 = 40;
const LOW_MASK: u64 = (1 << LOW_BITS) - 1;
/// Largest message a slot describes (offsets must fit `LOW_BITS`).
pub const MAX_ASSISTED: u64 = LOW_MASK;

/// One pair's slot: eight words in one cache line of a control segment.
#[derive(Debug, Clone, Copy)]
pub struct AssistSlot<'a> {
    words: &'a [AtomicU64; 8],
}

/// An open copy as a sender sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    claim: u64,
    /// The sender's rendezvous token the copy is for.
    pub token: u32,
    /// Address of the receiver's buffer.
    pub dest: u64,
    /// Bytes of the message.
    pub total: u64,
    /// Where the message starts in the sender's exposed region.
    pub offset: u64,
    /// Key of the receiver's staging area, 0 when it offers none: a sender
    /// in another process then stages its chunks there (`stage.rs`)
    /// instead of writing them into `dest` with `process_vm_writev`.
    pub stage_key: u64,
}

/// A chunk handed out: `len` bytes at `start` of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Offset of the chunk in the message.
    pub start: u64,
    /// Bytes of the chunk.
    pub len: u64,
}

impl<'a> AssistSlot<'a> {
    /// The slot made of `words` (a cache line of a shared mapping that every
    /// process accesses only atomically).
    pub(super) fn new(words: &'a [AtomicU64; 8]) -> AssistSlot<'a> {
        AssistSlot { words }
    }

    fn claim(&self) -> &AtomicU64 {
        &self.words[0]
    }
    fn done(&self) -> &AtomicU64 {
        &self.words[1]
    }

    /// Receiver: opens the next generation for a copy of `total` bytes
    /// (at most [`MAX_ASSISTED`]) into `dest`; returns the generation.
    /// `stage_key`: the receiver's staging area, 0 for none.
    pub fn open(&self, token: u32, dest: u64, total: u64, offset: u64, stage_key: u64) -> u64 {
        debug_assert!(total <= MAX_ASSISTED);
        let generation = ((self.claim().load(Ordering::Relaxed) >> LOW_BITS) + 1) & ((1 << (64 - LOW_BITS)) - 1);
        let generation = generation.max(1);
        self.done().store(0, Ordering::Relaxed);
        self.words[2].store(generation << LOW_BITS | u64::from(token), Ordering::Relaxed);
        self.words[3].store(dest, Ordering::Relaxed);
        self.words[4].store(total, Ordering::Relaxed);
        self.words[5].store(offset, Ordering::Relaxed);
        self.words[7].store(stage_key, Ordering::Relaxed);
        self.claim().store(generation << LOW_BITS, Ordering::Release);
        generation
    }

    /// Sender: the copy open in this slot with chunks still to hand out.
    pub fn offer(&self) -> Option<Offer> {
        let claim = self.claim().load(Ordering::Acquire);
        let generation = claim >> LOW_BITS;
        if generation == 0 {
            return None;
        }
        let token = self.words[2].load(Ordering::Relaxed);
        let total = self.words[4].load(Ordering::Relaxed);
        if token >> LOW_BITS != generation || claim & LOW_MASK >= total {
            return None;
        }
        Some(Offer {
            claim,
            token: (token & LOW_MASK) as u32,
            dest: self.words[3].load(Ordering::Relaxed),
            total,
            offset: self.words[5].load(Ordering::Relaxed),
            stage_key: self.words[7].load(Ordering::Relaxed),
        })
    }

    /// Either side: takes the next chunk of up to `chunk` bytes of
    /// generation `generation` whose message is `total` bytes long.
    /// `None` when every chunk has been handed out (or the slot moved on).
    pub fn take(&self, generation: u64, total: u64, chunk: u64) -> Option<Chunk> {
        let mut claim = self.claim().load(Ordering::Acquire);
        loop {
            let start = claim & LOW_MASK;
            if claim >> LOW_BITS != generation || start >= total {
                return None;
            }
            let len = chunk.min(total - start);
            match self.claim().compare_exchange_weak(claim, claim + len, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(Chunk { start, len }),
                Err(now) => claim = now,
            }
        }
    }

    /// Receiver: bytes of generation `generation` handed out so far (to
    /// either side).
    pub fn handed_out(&self, generation: u64) -> u64 {
        let claim = self.claim().load(Ordering::Acquire);
        if claim >> LOW_BITS == generation {
            claim & LOW_MASK
        } else {
            0
        }
    }

    /// Sender: takes the next chunk of `offer`'s copy; `None` once none is
    /// left. The first success also proves the offer's fields were that
    /// generation's (see the module docs).
    pub fn take_offered(&self, offer: &Offer, chunk: u64) -> Option<Chunk> {
        self.take(offer.claim >> LOW_BITS, offer.total, chunk)
    }

    /// Sender: `chunk` of `offer` landed in the receiver's buffer.
    pub fn finished(&self, chunk: Chunk) {
        self.done().fetch_add(chunk.len, Ordering::Release);
    }

    /// Sender: `chunk` of `offer` could not be copied. Counted as finished
    /// so the receiver stops waiting, and flagged so it knows the copy is bad.
    pub fn failed(&self, offer: &Offer, chunk: Chunk) {
        self.words[6].store(offer.claim >> LOW_BITS, Ordering::Release);
        self.done().fetch_add(chunk.len, Ordering::Release);
    }

    /// Receiver: bytes of generation `generation` the sender has finished,
    /// and whether any of its chunks failed.
    pub fn sender_done(&self, generation: u64) -> (u64, bool) {
        let done = self.done().load(Ordering::Acquire);
        (done, self.words[6].load(Ordering::Acquire) == generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot_words() -> Box<[AtomicU64; 8]> {
        Box::new(std::array::from_fn(|_| AtomicU64::new(0)))
    }

    #[test]
    fn chunks_cover_the_message_once_between_two_takers() {
        let words = slot_words();
        let slot = AssistSlot::new(&words);
        assert_eq!(slot.offer(), None, "a never-opened slot offers nothing");
        let generation = slot.open(7, 0x1000, 10_000, 64, 0xabc);
        let offer = slot.offer().expect("open");
        assert_eq!(
            (offer.token, offer.dest, offer.total, offer.offset, offer.stage_key),
            (7, 0x1000, 10_000, 64, 0xabc)
        );
        let mut covered = vec![0u8; 10_000];
        let mut mine = 0;
        loop {
            let (a, b) = (slot.take(generation, 10_000, 3000), slot.take_offered(&offer, 3000));
            if a.is_none() && b.is_none() {
                break;
            }
            for c in a.iter() {
                mine += c.len;
                covered[c.start as usize..(c.start + c.len) as usize].iter_mut().for_each(|b| *b += 1);
            }
            for c in b.iter() {
                slot.finished(*c);
                covered[c.start as usize..(c.start + c.len) as usize].iter_mut().for_each(|b| *b += 1);
            }
        }
        assert!(covered.iter().all(|&n| n == 1), "every byte handed out exactly once");
        assert_eq!(slot.handed_out(generation), 10_000);
        assert_eq!(slot.handed_out(generation + 1), 0, "another generation has handed out nothing");
        assert_eq!(slot.sender_done(generation), (10_000 - mine, false));
        assert_eq!(slot.offer(), None, "nothing left to offer");
    }

    #[test]
    fn a_stale_offer_cannot_take_from_the_next_generation() {
        let words = slot_words();
        let slot = AssistSlot::new(&words);
        let first = slot.open(1, 0x1000, 100, 0, 0);
        let stale = slot.offer().expect("open");
        while slot.take(first, 100, 64).is_some() {}
        let second = slot.open(2, 0x2000, 100, 0, 0);
        assert_ne!(first, second);
        assert_eq!(slot.take_offered(&stale, 64), None, "the old generation is closed");
        let fresh = slot.offer().expect("second open");
        assert_eq!(fresh.token, 2);
        assert!(slot.take_offered(&fresh, 64).is_some());
    }

    #[test]
    fn a_failed_chunk_is_reported_for_its_generation_only() {
        let words = slot_words();
        let slot = AssistSlot::new(&words);
        let generation = slot.open(3, 0x1000, 100, 0, 0);
        let offer = slot.offer().expect("open");
        let chunk = slot.take_offered(&offer, 100).expect("a chunk");
        slot.failed(&offer, chunk);
        assert_eq!(slot.sender_done(generation), (100, true));
        let next = slot.open(4, 0x1000, 100, 0, 0);
        assert_eq!(slot.sender_done(next), (0, false));
    }
}
