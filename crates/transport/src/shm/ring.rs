//! A single-producer, single-consumer ring of variable-length records in a
//! shared mapping: the control and small-message path between two ranks of
//! one host (DESIGN §3).
//!
//! Layout of a ring at `offset` in its segment (every part cache-line aligned,
//! so the producer's and the consumer's hot words never share a line):
//!
//! ```text
//! offset +   0  tail: u64   written by the producer only (Release); for observers, not the consumer
//! offset +   8  salt: u64   written once when the ring is created, before anyone attaches
//! offset +  64  head: u64   written by the consumer only (Release), read by the producer (Acquire)
//! offset +  72  done: u64   written by the consumer only (Release): how far it has executed *and
//!                           answered* (see "Completion" below), read by the producer (Acquire)
//! offset + 128  data: `cap` bytes of 64-byte slots
//! ```
//!
//! `tail` and `head` count bytes since the ring was created and never wrap
//! (a u64 of bytes lasts centuries); a position's slot is `pos % cap` (`cap` is a power of two). A
//! record is a 24-byte header (`stamp: u64`, `len: u32`, `kind: u32`,
//! `ack: u64`) then `len` payload bytes, padded to whole 64-byte slots, and
//! never wraps around the end of the data area: when it would not fit
//! before the end, the producer writes a `PAD` record covering the rest and
//! starts at slot 0. A message larger than a record may be is sent as
//! `PART` records followed by a final message record, which the consumer
//! reassembles.
//!
//! **Lap jumps.** A ring the producer knows to be empty starts its next
//! record at the start of the next lap (slot 0) instead of where the last
//! one ended, skipping the rest of the lap without writing anything there.
//! Request-reply traffic then keeps reusing one hot line per direction
//! instead of walking a fresh (cold) line through the whole data area per
//! message, and a hop through a hot line is the cheaper one (measurements:
//! docs/perf-notes.md, "shared-memory ring"). The producer knows the ring
//! is empty from the **ack** its peer writes into every record of the
//! opposite ring of the pair (`Producer::paired`): how far the peer had
//! consumed ours when it wrote the record. So no side ever polls the
//! other's `head` line for it. The consumer looks
//! for the next record at `head` and, when that slot is not published, at
//! the next lap's start: loading the lap start's stamp first, then
//! `head`'s again, tells a jump (`head` still unpublished) from a producer
//! that got to the lap start by filling the lap (then the record at `head`
//! was published before the lap start's, so it is visible by then).
//! The producer counts the skipped bytes as consumed at once (the consumer
//! never reads them, and everything before them was consumed), so a jump
//! leaves the whole ring but the new record free; the consumer's own
//! `head` passes them when it takes the record after them.
//!
//! The stamp of the record at position `pos` is `salt ^ pos`. The consumer
//! polls the stamp where the next record must start, not the tail: a small
//! message then costs the consumer one cache-line transfer (header and
//! payload share the line) instead of two. Before the producer writes it,
//! that slot holds an older record's bytes, possibly payload; the per-ring
//! random salt makes those match the expected stamp with probability 2^-64,
//! whatever the payloads are.
//!
//! Memory ordering, the whole protocol:
//! - the producer writes a record's length, kind and payload with plain
//!   stores, then publishes it with `stamp.store(salt ^ pos, Release)` (and
//!   then `tail.store(new, Release)` for observers);
//! - the consumer reads the stamp at `head` with `Acquire`: when it is
//!   `salt ^ head`, every byte of that record is visible to it; it reads the
//!   record, and then frees its slots with `head.store(new, Release)`;
//! - the producer reads `head` with `Acquire` before reusing slots, so the
//!   consumer's reads of those slots happened before the producer's new
//!   writes. An ack reaches it the same way: the peer stores `head`, then
//!   publishes a record carrying that value (Release); our consumer reads it
//!   after its Acquire of the stamp and hands it on with a Release store
//!   that the producer loads with Acquire (`AckCell`).
//!
//! **Completion.** `head` frees slots; `done` tells the producer that the
//! records below it were executed and whatever they made the consumer send
//! back is already in the opposite ring (published before `done`), so a
//! producer that completes a request when `done` passes its record (a put
//! without an error) and first takes the replies published before that
//! never mistakes a failed request for a successful one. Normally `done`
//! follows `head` record by record, on the same line; a consumer whose reply
//! could not go into the opposite ring yet (it was full, so the reply waits
//! in the caller's queue) holds `done` back ([`Consumer::pop_holding`]) until
//! the caller has pushed it ([`Consumer::release_done`]). `head` moves on
//! meanwhile: holding it would let two full rings wait on each other.
//!
//! The consumer checks every header against the ring's bounds: a corrupt or
//! hostile peer yields an error, never an out-of-bounds access.
//!
//! Owns: record framing and the head/tail protocol above, for both ends. Must
//! not: interpret record payloads, block or wait (a full ring is
//! `PushError::Full` and the caller queues), or let a second producer in: each
//! ring has exactly one, the peer it belongs to.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::segment::Segment;

/// Bytes before the data area (the two index lines).
pub const RING_HEADER: usize = 128;
/// Slot size: records start on cache-line boundaries.
pub const SLOT: usize = 64;
const RECORD_HEADER: usize = 24;
// Every slot can start a record: the SAFETY arguments below rely on it.
const _: () = assert!(RECORD_HEADER <= SLOT);
const KIND_MESSAGE: u32 = 1;
const KIND_PAD: u32 = 2;
/// A leading piece of a message too large for one record; the records that
/// follow (more parts, then a message record) complete it.
const KIND_PART: u32 = 3;
/// Largest message the consumer reassembles from parts.
const MAX_REASSEMBLED: usize = 1 << 30;

/// Bytes a ring with `cap` data bytes occupies in its segment.
pub const fn ring_len(cap: usize) -> usize {
    RING_HEADER + cap
}

/// Why a push did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// Not enough free slots now; retry after the consumer made progress.
    #[error("ring full")]
    Full,
    /// The record can never fit this ring.
    #[error("message larger than the ring")]
    TooBig,
}

/// A ring header failed the bounds check: the peer wrote garbage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("corrupt ring record")]
pub struct Corrupt;

/// A ring's place: segment, offset, capacity, checked once.
#[derive(Debug, Clone)]
pub struct RingView {
    /// Keeps the mapping `base` points into alive (never read otherwise).
    _seg: Arc<Segment>,
    offset: usize,
    cap: usize,
    /// `seg`'s mapping plus `offset`, computed once: every push, pop and
    /// peek addresses the ring from it, and reaching it through the
    /// segment put two dependent loads before each of their accesses
    /// (measurements: docs/perf-notes.md, "shared-memory ring").
    base: std::ptr::NonNull<u8>,
}

// SAFETY: `base` points into the mapping `_seg` keeps alive for as long as
// this view exists (the `Arc` is a field); the view itself holds no data
// behind it, and every access through it follows the ring protocol (atomic
// words, records owned by one side at a time), exactly as through the
// segment, which is `Send` and `Sync`.
unsafe impl Send for RingView {}
// SAFETY: as for `Send`.
unsafe impl Sync for RingView {}

impl RingView {
    /// Describes the ring at `offset` of `seg` with `cap` data bytes. `None`
    /// unless it lies inside the segment, `offset` is 64-aligned and `cap` is
    /// a power of two of at least two slots (so a position's slot is a mask,
    /// not a division: this is on every push, pop and peek).
    pub fn new(seg: Arc<Segment>, offset: usize, cap: usize) -> Option<RingView> {
        let end = offset.checked_add(ring_len(cap))?;
        if !(end <= seg.len() && offset % SLOT == 0 && cap.is_power_of_two() && cap >= 2 * SLOT) {
            return None;
        }
        // SAFETY: `offset < end <= seg.len()`: inside the mapping.
        let base = unsafe { std::ptr::NonNull::new_unchecked(seg.as_ptr().add(offset)) };
        Some(RingView { _seg: seg, offset, cap, base })
    }

    /// Where position `pos` falls in the data area.
    #[inline]
    fn slot_of(&self, pos: u64) -> usize {
        pos as usize & (self.cap - 1)
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at == 0 || at == 8 || at == SLOT || at == SLOT + 8);
        // SAFETY: `base` is the mapping plus `offset`, and offset + at + 8
        // is inside the mapping (checked in `new`); the word is 64-aligned
        // (offset is, the mapping is page aligned), and this word
        // is only ever accessed atomically by every process that maps it.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(at).cast()) }
    }

    fn tail(&self) -> &AtomicU64 {
        self.word(0)
    }

    fn head(&self) -> &AtomicU64 {
        self.word(SLOT)
    }

    fn done(&self) -> &AtomicU64 {
        self.word(SLOT + 8)
    }

    fn salt(&self) -> u64 {
        self.word(8).load(Ordering::Acquire)
    }

    /// Gives a freshly created (zeroed) ring its random salt. Must run
    /// before any producer or consumer attaches to it.
    pub fn init_salt(&self) {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_usize(self.offset);
        hasher.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
        );
        self.word(8).store(hasher.finish() | 1, Ordering::Release);
    }

    /// The stamp word of the record header at `pos` (slot aligned, < cap).
    fn stamp(&self, pos: usize) -> &AtomicU64 {
        debug_assert!(pos % SLOT == 0 && pos < self.cap);
        // SAFETY: `pos + 8 <= cap` (slot aligned and below cap), so the word
        // is inside the data area; 8-aligned (slots are 64-aligned); record
        // stamps are only ever accessed atomically, by both sides.
        unsafe { AtomicU64::from_ptr(self.data().add(pos).cast()) }
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: `base` is the mapping plus `offset`, and offset +
        // RING_HEADER is inside the mapping (checked in `new`).
        unsafe { self.base.as_ptr().add(RING_HEADER) }
    }

    /// Where the record after consumer position `head` starts, if it is
    /// published: at `head`, or at the next lap's start when the producer
    /// jumped there (module docs). Two stamp loads when nothing is there.
    #[inline]
    fn next_at(&self, salt: u64, head: u64) -> Option<u64> {
        let pos = self.slot_of(head);
        if self.stamp(pos).load(Ordering::Acquire) == salt ^ head {
            return Some(head);
        }
        if pos == 0 {
            return None;
        }
        let lap = (head | (self.cap as u64 - 1)) + 1;
        if self.stamp(0).load(Ordering::Acquire) != salt ^ lap {
            return None;
        }
        // Loaded after the lap start's stamp: a record at `head` published
        // before it is visible now, so one still missing means a jump.
        if self.stamp(pos).load(Ordering::Acquire) == salt ^ head {
            return Some(head);
        }
        Some(lap)
    }

    /// Bytes published and not yet consumed (0: the consumer has executed
    /// everything sent so far). Readable from any thread of either side.
    pub fn pending_bytes(&self) -> u64 {
        let head = self.head().load(Ordering::Acquire);
        self.tail().load(Ordering::Acquire).saturating_sub(head)
    }

    /// How far the consumer has consumed (Acquire).
    pub fn consumed(&self) -> u64 {
        self.head().load(Ordering::Acquire)
    }

    /// How far the consumer has executed and answered (Acquire; module docs,
    /// "Completion"): at most [`consumed`](Self::consumed).
    pub fn executed(&self) -> u64 {
        self.done().load(Ordering::Acquire)
    }

    /// Position just past the last record the producer published (Acquire):
    /// read after [`Producer::done`], it covers every reply the consumer
    /// published before that `done`.
    pub fn published(&self) -> u64 {
        self.tail().load(Ordering::Acquire)
    }

    /// Data capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// A [`RingPeek`] of this ring (its salt must be set).
    pub fn peek(&self) -> RingPeek {
        RingPeek { view: self.clone(), salt: self.salt() }
    }
}

/// How far the peer has consumed our ring, as the acks in its records
/// told our consumer: handed from the [`Consumer`] of the peer's ring to
/// the [`Producer`] of ours (one pair per peer, see [`Producer::paired`]).
/// Process-local memory, never shared with the peer.
#[derive(Debug, Default)]
struct AckCell(AtomicU64);

/// The producing end. Exactly one per ring (the type is not `Clone`; the
/// endpoint creates one per peer).
#[derive(Debug)]
pub struct Producer {
    view: RingView,
    salt: u64,
    /// Our copy of `tail` (we are its only writer).
    tail: u64,
    /// What we know `head` to be at least (read, or acked by the peer);
    /// free space is at least `cap - (tail - head_seen)`.
    head_seen: u64,
    /// The peer's ring to us, whose published `head` every record we write
    /// carries as its ack; and where our consumer of that ring leaves the
    /// acks the peer sends us. `None` for a lone ring (acks are 0, no jumps).
    pairing: Option<(RingView, Arc<AckCell>)>,
}

impl Producer {
    /// The producer of `view`'s ring, continuing from its current tail.
    pub fn new(view: RingView) -> Producer {
        let tail = view.tail().load(Ordering::Acquire);
        let head_seen = view.head().load(Ordering::Acquire);
        let salt = view.salt();
        Producer { view, salt, tail, head_seen, pairing: None }
    }

    /// The two ends of a pair of rings between us and one peer: the
    /// producer of `out` (the peer consumes it) and the consumer of
    /// `inbound` (the peer produces it). Records each way carry acks of the
    /// other ring, which let the producer jump to lap starts (module docs)
    /// without reading the peer's `head` line. The peer must pair its ends
    /// too for its acks to arrive; a lone end works, just without jumps.
    pub fn paired(out: RingView, inbound: RingView) -> (Producer, Consumer) {
        let cell = Arc::new(AckCell::default());
        let mut producer = Producer::new(out);
        let mut consumer = Consumer::new(inbound.clone());
        producer.pairing = Some((inbound, Arc::clone(&cell)));
        consumer.acks = Some(cell);
        (producer, consumer)
    }

    /// Bytes a message of `len` payload bytes takes in the ring.
    pub fn record_len(len: usize) -> usize {
        (RECORD_HEADER + len).div_ceil(SLOT) * SLOT
    }

    /// Appends one message made of `parts` and publishes it. Returns the
    /// position just past it: the message has been consumed once
    /// [`consumed`](Producer::consumed) reaches that value.
    pub fn push(&mut self, parts: &[&[u8]]) -> Result<u64, PushError> {
        if let Some(end) = self.push_one_slot(parts) {
            return Ok(end);
        }
        self.push_record(parts, KIND_MESSAGE)
    }

    /// [`push`](Self::push)'s fast path: a message of one or two parts
    /// that fits one slot (a same-host message's header and a small
    /// payload), into a paired ring with a slot free. It skips what cannot
    /// apply to one slot (part counts, padding, the size limits), which
    /// [`push_record`](Self::push_record) would check on every small
    /// same-host message's path (measurements: docs/perf-notes.md,
    /// "shared-memory ring").
    /// `None` leaves the message to `push_record`, having changed only what
    /// that would change the same way (a newer ack taken in, a jump to the
    /// lap start).
    #[inline]
    fn push_one_slot(&mut self, parts: &[&[u8]]) -> Option<u64> {
        let (first, second): (&[u8], &[u8]) = match parts {
            [one] => (one, &[]),
            [first, second] => (first, second),
            _ => return None,
        };
        self.push_slot_with(first.len() + second.len(), |body| {
            let (to_first, to_second) = body.split_at_mut(first.len());
            copy_short(to_first, first);
            copy_short(to_second, second);
        })
    }

    /// Pushes a message of `len` bytes that `write` puts straight into the
    /// record's slot (it gets exactly `len` bytes), for a caller that would
    /// otherwise assemble it in a buffer first (a same-host message's
    /// header). Only for what fits one slot of a paired ring with a slot
    /// free: `None` otherwise, `write` not called, and the caller pushes
    /// the message with [`push`](Self::push) instead.
    #[inline]
    pub fn push_slot_with(&mut self, len: usize, write: impl FnOnce(&mut [u8])) -> Option<u64> {
        if len > SLOT - RECORD_HEADER {
            return None;
        }
        let (pos, ack) = self.claim_one_slot()?;
        // SAFETY: `claim_one_slot` gave a free slot at `pos`, which nobody
        // reads until its stamp is stored below (the consumer reads only
        // the stamp word until then, and the slice starts after the
        // header); RECORD_HEADER + len <= SLOT bytes fit in it. If `write`
        // panics, the slot stays unpublished and is claimed again next time.
        unsafe {
            let at = self.view.data().add(pos);
            write_header(at, len as u32, KIND_MESSAGE, ack);
            write(std::slice::from_raw_parts_mut(at.add(RECORD_HEADER), len));
        }
        Some(self.publish_one_slot(pos))
    }

    /// The one-slot paths' reservation: the free slot at the tail (its
    /// position in the data area) and the ack to write into its header.
    /// `None` when the ring is unpaired or has no slot free, having changed
    /// only what `push_record` would change the same way (a newer ack taken
    /// in, a jump to the lap start).
    #[inline(always)]
    fn claim_one_slot(&mut self) -> Option<(usize, u64)> {
        let (inbound, cell) = self.pairing.as_ref()?;
        let ack = inbound.head().load(Ordering::Relaxed);
        let acked = cell.0.load(Ordering::Acquire);
        // As in `push_record`: never past what we published.
        if acked > self.head_seen && acked <= self.tail {
            self.head_seen = acked;
        }
        let cap = self.view.cap as u64;
        let at = self.tail & (cap - 1);
        // `push_record`'s jump rule; its `at >= record` holds for one slot
        // at any nonzero slot-aligned `at`.
        if self.head_seen == self.tail && at != 0 {
            self.tail += cap - at;
            self.head_seen = self.tail;
        }
        if cap - (self.tail - self.head_seen) < SLOT as u64 {
            return None;
        }
        // One slot at a slot-aligned position ends at or before the end of
        // the data area (no padding record), and it is free: the consumer
        // moved past it (`head_seen`, from its head or its acks, both
        // Acquire), so nobody reads it now.
        Some((self.view.slot_of(self.tail), ack))
    }

    /// Publishes the one-slot record written at `pos` (the tail's slot);
    /// returns the new tail.
    #[inline(always)]
    fn publish_one_slot(&mut self, pos: usize) -> u64 {
        self.view.stamp(pos).store(self.salt ^ self.tail, Ordering::Release);
        self.tail += SLOT as u64;
        self.view.tail().store(self.tail, Ordering::Release);
        self.tail
    }

    /// Appends a leading piece of a larger message (see the module docs);
    /// the message ends with the next [`push`](Producer::push).
    pub fn push_part(&mut self, parts: &[&[u8]]) -> Result<u64, PushError> {
        self.push_record(parts, KIND_PART)
    }

    fn push_record(&mut self, parts: &[&[u8]], kind: u32) -> Result<u64, PushError> {
        let len = parts_len(parts);
        let cap = self.view.cap;
        let record = Self::record_len(len);
        if record > cap || len > u32::MAX as usize {
            return Err(PushError::TooBig);
        }
        let mut ack = 0;
        if let Some((inbound, cell)) = &self.pairing {
            ack = inbound.head().load(Ordering::Relaxed);
            let acked = cell.0.load(Ordering::Acquire);
            // Never past what we published: a confused peer's ack must not
            // make free space out of thin air (only its own ring would suffer,
            // but the arithmetic below must not underflow either).
            if acked > self.head_seen && acked <= self.tail {
                self.head_seen = acked;
            }
            let at = self.view.slot_of(self.tail) as u64;
            if self.head_seen == self.tail && at != 0 && at >= record as u64 {
                // Everything consumed: start the next lap instead (module
                // docs). The skipped bytes count as consumed already: the
                // consumer never reads them (it finds the lap start's record
                // instead), so everything below the lap start is free. Were
                // they counted as in use until the consumer passed the lap
                // start, the ring would hold just `at - record` more bytes
                // until then: a second message in a row would not fit.
                self.tail += cap as u64 - at;
                self.head_seen = self.tail;
            }
        }
        let pos = self.view.slot_of(self.tail);
        let to_end = cap - pos;
        let need = if record <= to_end { record } else { to_end + record };
        if self.free() < need as u64 {
            // At least what a jump made free: the consumer's own head stays
            // behind a lap start until it has taken the record there.
            self.head_seen = self.head_seen.max(self.view.head().load(Ordering::Acquire));
            if self.free() < need as u64 {
                return Err(PushError::Full);
            }
        }
        let data = self.view.data();
        if record > to_end {
            // SAFETY: pos + RECORD_HEADER <= cap (pos is slot aligned and < cap,
            // and a slot holds a header), and
            // the slots from pos to the end are free (checked above).
            unsafe { write_header(data.add(pos), (to_end - RECORD_HEADER) as u32, KIND_PAD, ack) };
            self.view.stamp(pos).store(self.salt ^ self.tail, Ordering::Release);
            self.tail += to_end as u64;
        }
        let pos = self.view.slot_of(self.tail);
        // SAFETY: the record fits in [pos, pos + record) <= cap (no wrap by
        // construction) and those slots are free: the consumer has moved
        // `head` past them (Acquire above), so nobody reads them now.
        unsafe {
            write_header(data.add(pos), len as u32, kind, ack);
            let at = data.add(pos + RECORD_HEADER);
            // Straight-line for the usual header + payload: this is on every
            // message's path, and the general loop over parts is not free.
            match parts {
                [one] => copy_short_raw(one.as_ptr(), at, one.len()),
                [head, body] => {
                    copy_short_raw(head.as_ptr(), at, head.len());
                    copy_short_raw(body.as_ptr(), at.add(head.len()), body.len());
                }
                _ => {
                    let mut at = at;
                    for part in parts {
                        std::ptr::copy_nonoverlapping(part.as_ptr(), at, part.len());
                        at = at.add(part.len());
                    }
                }
            }
        }
        self.view.stamp(pos).store(self.salt ^ self.tail, Ordering::Release);
        self.tail += record as u64;
        self.view.tail().store(self.tail, Ordering::Release);
        Ok(self.tail)
    }

    fn free(&self) -> u64 {
        self.view.cap as u64 - (self.tail - self.head_seen)
    }

    /// How far the consumer has consumed (Acquire).
    pub fn consumed(&self) -> u64 {
        self.view.head().load(Ordering::Acquire)
    }

    /// How far the consumer has executed and answered (Acquire; module docs,
    /// "Completion"): a request whose record ends at or below this, and
    /// whose error (if any) was not among the replies taken after reading
    /// this, succeeded.
    pub fn done(&self) -> u64 {
        self.view.executed()
    }

    /// Position just past the last published message.
    pub fn published(&self) -> u64 {
        self.tail
    }

    /// The ring's view (for lock-free idleness checks by other threads).
    pub fn view(&self) -> &RingView {
        &self.view
    }
}

/// Total length of a message given in `parts` (straight-line for the usual
/// one or two).
#[inline]
pub fn parts_len(parts: &[&[u8]]) -> usize {
    match parts {
        [one] => one.len(),
        [head, body] => head.len() + body.len(),
        _ => parts.iter().map(|p| p.len()).sum(),
    }
}

/// Writes a record header's length, kind and ack (not its stamp, which
/// publishes the record and is stored atomically afterwards).
///
/// # Safety
/// `at..at+RECORD_HEADER` must be valid for writes and not concurrently accessed.
unsafe fn write_header(at: *mut u8, len: u32, kind: u32, ack: u64) {
    let mut fields = [0u8; RECORD_HEADER - 8];
    fields[..4].copy_from_slice(&len.to_le_bytes());
    fields[4..8].copy_from_slice(&kind.to_le_bytes());
    fields[8..].copy_from_slice(&ack.to_le_bytes());
    // SAFETY: per this function's contract (bytes 8..RECORD_HEADER of the header).
    unsafe { std::ptr::copy_nonoverlapping(fields.as_ptr(), at.add(8), fields.len()) };
}

/// Copies `src` to the start of `dst`, which must be at least as long.
/// Runs of up to 32 bytes (a message header, a small payload: every
/// same-host message's path copies a few) take two overlapping moves
/// inline; longer ones go to `memcpy`. Not for speed in a loop, where
/// libc's `memcpy` is as fast: on the path of a message that a spinning
/// thread has just seen arrive, a call into it costs more than the short
/// copy itself (its vector code after a spin seems to pay a warm-up;
/// measurements: docs/perf-notes.md, "shared-memory ring").
#[inline(always)]
pub fn copy_short(dst: &mut [u8], src: &[u8]) {
    assert!(dst.len() >= src.len(), "copy_short: destination shorter than source");
    // SAFETY: `src` is readable and `dst` writable for `src.len()` bytes
    // (checked above), and a shared and an exclusive slice never overlap.
    unsafe { copy_short_raw(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
}

/// [`copy_short`] on raw pointers.
///
/// # Safety
/// `src` must be readable and `dst` writable for `n` bytes, and the two
/// ranges must not overlap.
#[inline(always)]
unsafe fn copy_short_raw(src: *const u8, dst: *mut u8, n: usize) {
    use std::ptr::{read_unaligned, write_unaligned};
    // SAFETY: in every arm, each access lies in the first `n` bytes of its
    // range (the second move of a pair starts at `n - width`, and `n >=
    // width` in its arm), which the caller guarantees; unaligned accesses
    // are allowed. Both loads come before both stores and the ranges do not
    // overlap, so where the two stores overlap they write the same bytes.
    unsafe {
        match n {
            0 => {}
            1..=3 => {
                for i in 0..n {
                    *dst.add(i) = *src.add(i);
                }
            }
            4..=7 => {
                let (a, b) = (read_unaligned(src.cast::<u32>()), read_unaligned(src.add(n - 4).cast::<u32>()));
                write_unaligned(dst.cast::<u32>(), a);
                write_unaligned(dst.add(n - 4).cast::<u32>(), b);
            }
            8..=16 => {
                let (a, b) = (read_unaligned(src.cast::<u64>()), read_unaligned(src.add(n - 8).cast::<u64>()));
                write_unaligned(dst.cast::<u64>(), a);
                write_unaligned(dst.add(n - 8).cast::<u64>(), b);
            }
            17..=32 => {
                let (a, b) = (read_unaligned(src.cast::<u128>()), read_unaligned(src.add(n - 16).cast::<u128>()));
                write_unaligned(dst.cast::<u128>(), a);
                write_unaligned(dst.add(n - 16).cast::<u128>(), b);
            }
            _ => std::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

/// A read-only look at whether a ring holds a record its consumer has not
/// taken yet, for threads that do not own the [`Consumer`] (a waiter that
/// must not take the consumer's lock just to find the ring empty). It reads
/// the shared `head` the consumer publishes and the stamp at that position:
/// two loads, no write, so any number of threads may peek while the consumer
/// pops. A peek may be stale by the record the consumer is taking right
/// now; it is a hint to go and pop, never a claim on the record.
#[derive(Debug, Clone)]
pub struct RingPeek {
    view: RingView,
    salt: u64,
}

impl RingPeek {
    /// Whether the record after the consumer's published head is there.
    #[inline]
    pub fn has_pending(&self) -> bool {
        let head = self.view.head().load(Ordering::Acquire);
        self.view.next_at(self.salt, head).is_some()
    }
}

/// A published record at a consumer's head (see `Consumer::head_record`).
struct HeadRecord {
    /// Slot position of its header in the data area.
    pos: usize,
    /// Payload bytes.
    len: usize,
    kind: u32,
    /// Bytes it takes in the ring, padding included.
    record: usize,
}

impl HeadRecord {
    /// Its payload in `view`'s data area.
    fn payload<'a>(&self, view: &'a RingView) -> &'a [u8] {
        // SAFETY: pos + RECORD_HEADER + len <= cap (checked in `Consumer::head_record`);
        // published, and not reused by the producer until the consumer moves
        // head past it, which it does only after its last use of this slice.
        unsafe { std::slice::from_raw_parts(view.data().add(self.pos + RECORD_HEADER), self.len) }
    }
}

/// The consuming end. Exactly one per ring.
#[derive(Debug)]
pub struct Consumer {
    view: RingView,
    salt: u64,
    head: u64,
    /// Parts of a message being reassembled.
    partial: Vec<u8>,
    /// Where the acks in the records go, for our producer to the same peer
    /// (see [`Producer::paired`]).
    acks: Option<Arc<AckCell>>,
    /// `done` is held back (module docs, "Completion").
    holding: bool,
}

impl Consumer {
    /// The consumer of `view`'s ring, continuing from its current head.
    pub fn new(view: RingView) -> Consumer {
        let head = view.head().load(Ordering::Acquire);
        let salt = view.salt();
        Consumer { view, salt, head, partial: Vec::new(), acks: None, holding: false }
    }

    /// Whether a record is waiting: an Acquire load of the stamp where it
    /// would start (the line its header and a small payload share), and of
    /// the next lap's start when that is not it.
    #[inline]
    pub fn has_pending(&self) -> bool {
        self.view.next_at(self.salt, self.head).is_some()
    }

    /// The next record, if published: where it is and what it holds,
    /// checked against the ring's bounds. Moves `head` over the rest of a
    /// lap the producer skipped (unpublished until the record is consumed)
    /// and hands the record's ack to our producer.
    fn head_record(&mut self) -> Result<Option<HeadRecord>, Corrupt> {
        let Some(at) = self.view.next_at(self.salt, self.head) else { return Ok(None) };
        self.head = at;
        let pos = self.view.slot_of(at);
        let mut fields = [0u8; RECORD_HEADER - 8];
        // SAFETY: pos + RECORD_HEADER <= cap (pos is slot aligned and < cap,
        // and a slot holds a header); the record was published (its stamp,
        // Acquire in next_at), so the producer wrote it and will not touch it
        // until we move head past it.
        unsafe { std::ptr::copy_nonoverlapping(self.view.data().add(pos + 8), fields.as_mut_ptr(), fields.len()) };
        let len = u32::from_le_bytes(fields[..4].try_into().expect("4 bytes")) as usize;
        let kind = u32::from_le_bytes(fields[4..8].try_into().expect("4 bytes"));
        let record = Producer::record_len(len);
        if record > self.view.cap - pos {
            return Err(Corrupt);
        }
        if let Some(cell) = &self.acks {
            let ack = u64::from_le_bytes(fields[8..].try_into().expect("8 bytes"));
            // Acks only grow; the producer bounds them by what it published.
            if ack > cell.0.load(Ordering::Relaxed) {
                cell.0.store(ack, Ordering::Release);
            }
        }
        Ok(Some(HeadRecord { pos, len, kind, record }))
    }

    /// Hands the next message to `f`, then frees its slots. Returns
    /// `Ok(false)` when the ring is empty.
    pub fn pop(&mut self, f: impl FnOnce(&[u8])) -> Result<bool, Corrupt> {
        self.pop_holding(|msg| {
            f(msg);
            false
        })
    }

    /// [`pop`](Self::pop) for a caller whose answers to a message may not
    /// all be in the opposite ring when `f` returns: `f` says so by
    /// returning `true`, and `done` then stays below this message until
    /// [`release_done`](Self::release_done) (module docs, "Completion").
    ///
    /// A message of one slot is copied out and its slot freed (`head`
    /// moves) before `f` runs; `done` still waits for `f`. An answer `f`
    /// pushes into the paired ring then acks the message it answers, and
    /// the peer's next message can start a lap ("Lap jumps"): with the
    /// ack one message behind, an active-message ping-pong's requests
    /// walked the ring, a cold line each (measurements: docs/perf-notes.md,
    /// "shared-memory ring").
    pub fn pop_holding(&mut self, f: impl FnOnce(&[u8]) -> bool) -> Result<bool, Corrupt> {
        loop {
            let Some(head) = self.head_record()? else { return Ok(false) };
            match head.kind {
                KIND_PAD => {
                    self.advance(head.record as u64);
                    continue;
                }
                KIND_MESSAGE | KIND_PART => {
                    if head.kind == KIND_PART || !self.partial.is_empty() {
                        if self.partial.len() + head.len > MAX_REASSEMBLED {
                            return Err(Corrupt);
                        }
                        self.partial.extend_from_slice(head.payload(&self.view));
                        self.advance(head.record as u64);
                        if head.kind == KIND_PART {
                            continue;
                        }
                        let whole = std::mem::take(&mut self.partial);
                        let hold = f(&whole);
                        self.settle(hold);
                        return Ok(true);
                    }
                    if head.record == SLOT {
                        self.take_one_slot(&head, f);
                        return Ok(true);
                    }
                    let hold = f(head.payload(&self.view));
                    self.advance(head.record as u64);
                    self.settle(hold);
                    return Ok(true);
                }
                _ => return Err(Corrupt),
            }
        }
    }

    /// Hands the next record to `f` when it is a whole message (not a piece
    /// of one, not padding, none being reassembled) and frees its slots if
    /// `f` returns `true`; otherwise the record stays for [`pop`](Self::pop).
    /// Returns whether a record was taken. A caller that wants only some
    /// messages (a receive waiting for its own) takes them this way without
    /// copying anything out first.
    #[inline]
    pub fn pop_if(&mut self, f: impl FnOnce(&[u8]) -> bool) -> Result<bool, Corrupt> {
        if !self.partial.is_empty() {
            return Ok(false);
        }
        let Some(head) = self.head_record()? else { return Ok(false) };
        if head.kind != KIND_MESSAGE || !f(head.payload(&self.view)) {
            return Ok(false);
        }
        self.advance(head.record as u64);
        self.settle(false);
        Ok(true)
    }

    /// [`pop_holding`](Self::pop_holding) for a front record that is a
    /// whole message of one slot whose payload `wanted` accepts (read in
    /// place); anything else stays for `pop_holding` and this returns
    /// `Ok(false)`. For a caller with a faster path for some messages (a
    /// same-host target answering active-message requests) that must not
    /// pay for the general one before it can answer.
    pub fn pop_slot_if(
        &mut self,
        wanted: impl FnOnce(&[u8]) -> bool,
        f: impl FnOnce(&[u8]) -> bool,
    ) -> Result<bool, Corrupt> {
        if !self.partial.is_empty() {
            return Ok(false);
        }
        let Some(head) = self.head_record()? else { return Ok(false) };
        if head.kind != KIND_MESSAGE || head.record != SLOT || !wanted(head.payload(&self.view)) {
            return Ok(false);
        }
        self.take_one_slot(&head, f);
        Ok(true)
    }

    /// Takes `head`, a whole message of one slot: copies its payload out
    /// and frees the slot before `f` runs (see `pop_holding`), then
    /// settles `done` as `f` says.
    fn take_one_slot(&mut self, head: &HeadRecord, f: impl FnOnce(&[u8]) -> bool) {
        let mut local = [0u8; SLOT - RECORD_HEADER];
        // SAFETY: the record is one whole slot at `pos` (slot aligned, below
        // `cap`), published and not reused until `head` passes it below: its
        // payload area is readable. A fixed length: no call.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.view.data().add(head.pos + RECORD_HEADER),
                local.as_mut_ptr(),
                local.len(),
            );
        }
        self.advance(head.record as u64);
        let hold = f(&local[..head.len]);
        self.settle(hold);
    }

    /// Whether `done` is held back (see [`pop_holding`](Self::pop_holding)).
    pub fn holds_done(&self) -> bool {
        self.holding
    }

    /// Lets `done` catch up with everything consumed: the caller has put
    /// every answer it held back into the opposite ring.
    pub fn release_done(&mut self) {
        self.holding = false;
        self.settle(false);
    }

    /// Position just past the last record the producer published (Acquire).
    pub fn published(&self) -> u64 {
        self.view.published()
    }

    /// Where the consumer will look for the next record (past every record
    /// taken; at a lap start it jumped to, before taking the record there).
    pub fn position(&self) -> u64 {
        self.head
    }

    /// Frees the slots of the record just taken (and any skipped before it).
    fn advance(&mut self, by: u64) {
        self.head += by;
        self.view.head().store(self.head, Ordering::Release);
    }

    /// After a message was executed: `done` follows `head` unless a
    /// message's answer is held back (from now, if `hold`).
    fn settle(&mut self, hold: bool) {
        self.holding |= hold;
        if !self.holding {
            self.view.done().store(self.head, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(cap: usize) -> (Producer, Consumer) {
        let seg = Arc::new(Segment::create("memwire-ring-test", ring_len(cap)).unwrap());
        let view = RingView::new(seg, 0, cap).unwrap();
        view.init_salt();
        (Producer::new(view.clone()), Consumer::new(view))
    }

    #[test]
    fn payloads_that_look_like_headers_are_never_taken_for_records() {
        // Records of varying sizes shift record starts from lap to lap, so
        // record starts land on old payload bytes; fill every payload with
        // what an unsalted stamp of every position would be, plus plausible
        // lengths and kinds.
        let cap = 1024;
        let (mut tx, mut rx) = ring(cap);
        let mut next_in = 0u64;
        let mut next_out = 0u64;
        for round in 0..5000usize {
            let len = 8 + (round * 53) % 400;
            let mut body = vec![0u8; len];
            for (i, word) in body.chunks_mut(8).enumerate() {
                let fake = (round * 64 + i * 64) as u64;
                word.copy_from_slice(&fake.to_le_bytes()[..word.len()]);
            }
            body[..8].copy_from_slice(&next_in.to_le_bytes());
            if tx.push(&[&body]).is_ok() {
                next_in += 1;
            }
            if round % 2 == 0 {
                while rx
                    .pop(|msg| {
                        assert_eq!(u64::from_le_bytes(msg[..8].try_into().unwrap()), next_out);
                        next_out += 1;
                    })
                    .unwrap()
                {}
                assert!(!rx.has_pending(), "a record where none was published");
            }
        }
        assert!(next_out > 1000 && next_out <= next_in);
    }

    #[test]
    fn messages_arrive_in_order_across_wraps() {
        let (mut tx, mut rx) = ring(1024);
        let mut next_in = 0u32;
        let mut next_out = 0u32;
        for round in 0..2000usize {
            let len = (round * 37) % 300;
            let body = vec![(round % 251) as u8; len];
            match tx.push(&[&next_in.to_le_bytes(), &body]) {
                Ok(end) => {
                    assert_eq!(end, tx.published());
                    next_in += 1;
                }
                Err(PushError::Full) => {}
                Err(e) => panic!("{e}"),
            }
            if round % 3 == 0 {
                while rx
                    .pop(|msg| {
                        assert_eq!(u32::from_le_bytes(msg[..4].try_into().unwrap()), next_out);
                        next_out += 1;
                    })
                    .unwrap()
                {}
                assert_eq!(tx.consumed(), tx.published());
                assert_eq!(tx.view().pending_bytes(), 0);
            }
        }
        assert!(next_out > 1000, "{next_out}");
        assert_eq!(tx.push(&[&[0u8; 1024]]), Err(PushError::TooBig));
    }

    #[test]
    fn parts_are_reassembled() {
        let (mut tx, mut rx) = ring(1024);
        tx.push_part(&[b"hel"]).unwrap();
        assert!(!rx.pop(|_| panic!("incomplete message delivered")).unwrap());
        tx.push_part(&[b"lo "]).unwrap();
        tx.push(&[b"world"]).unwrap();
        tx.push(&[b"next"]).unwrap();
        let mut got = Vec::new();
        while rx.pop(|m| got.push(m.to_vec())).unwrap() {}
        assert_eq!(got, [b"hello world".to_vec(), b"next".to_vec()]);
    }

    #[test]
    fn a_corrupt_header_is_an_error_not_a_crash() {
        let (mut tx, mut rx) = ring(256);
        tx.push(&[b"hello"]).unwrap();
        // Forge a length that runs past the end of the data area.
        // SAFETY: the data area starts RING_HEADER bytes into the mapping.
        unsafe { write_header(tx.view.data(), 10_000, KIND_MESSAGE, 0) };
        assert_eq!(rx.pop(|_| {}), Err(Corrupt));
    }

    #[test]
    fn two_threads_stream_through_a_small_ring() {
        let (mut tx, mut rx) = ring(512);
        const N: u64 = if cfg!(miri) { 300 } else { 100_000 }; // Miri: `make miri`
                                                               // Each side backs off to yielding while the other makes no progress:
                                                               // with other tests' threads on the same two CPUs, pure spinning made
                                                               // each hand-over wait for a time slice (the test took ~2 minutes).
        let producer = std::thread::spawn(move || {
            let backoff = crossbeam_utils::Backoff::new();
            let mut i = 0u64;
            while i < N {
                if tx.push(&[&i.to_le_bytes()]).is_ok() {
                    i += 1;
                    backoff.reset();
                } else {
                    backoff.snooze();
                }
            }
        });
        let backoff = crossbeam_utils::Backoff::new();
        let mut expect = 0u64;
        while expect < N {
            let took = rx
                .pop(|msg| {
                    assert_eq!(u64::from_le_bytes(msg.try_into().unwrap()), expect);
                    expect += 1;
                })
                .unwrap();
            if took {
                backoff.reset();
            } else {
                backoff.snooze();
            }
        }
        producer.join().unwrap();
    }

    #[test]
    fn pop_if_takes_only_accepted_whole_messages_and_keeps_order() {
        let (mut tx, mut rx) = ring(1024);
        assert_eq!(rx.pop_if(|_| true), Ok(false), "empty ring");
        tx.push(&[b"first"]).unwrap();
        tx.push(&[b"second"]).unwrap();
        // Declined: it stays, and a later look sees the same record.
        assert_eq!(rx.pop_if(|m| m == b"second"), Ok(false));
        let mut seen = Vec::new();
        assert_eq!(
            rx.pop_if(|m| {
                seen = m.to_vec();
                true
            }),
            Ok(true)
        );
        assert_eq!(seen, b"first");
        // A message in parts is never offered, not even its last record.
        tx.push_part(&[b"par"]).unwrap();
        tx.push(&[b"ts"]).unwrap();
        assert_eq!(rx.pop_if(|m| m == b"second"), Ok(true));
        assert_eq!(rx.pop_if(|_| panic!("a part was offered")), Ok(false));
        let mut whole = Vec::new();
        assert_eq!(rx.pop(|m| whole = m.to_vec()), Ok(true));
        assert_eq!(whole, b"parts");
        // Padding at the end of the data area is left to `pop`, which
        // skips it; the record after it is offered again.
        let mut sent = 0;
        while tx.published() % 1024 < 1024 - 64 {
            tx.push(&[&[7u8; 40]]).unwrap();
            sent += 1;
            assert_eq!(rx.pop_if(|m| m == [7u8; 40]), Ok(true));
        }
        assert!(sent > 0);
        tx.push(&[&[9u8; 100]]).unwrap(); // does not fit the last slot: padding first
        assert_eq!(rx.pop_if(|_| true), Ok(false), "padding is not a message");
        let mut last = Vec::new();
        assert_eq!(rx.pop(|m| last = m.to_vec()), Ok(true));
        assert_eq!(last, [9u8; 100]);
        assert_eq!(rx.pop_if(|_| true), Ok(false));
    }

    /// Two pairs of ends over one pair of rings, as two peers hold them.
    fn pair_of_peers(cap: usize) -> ((Producer, Consumer), (Producer, Consumer)) {
        let seg = Arc::new(Segment::create("memwire-ring-pair-test", 2 * ring_len(cap)).unwrap());
        let a_to_b = RingView::new(Arc::clone(&seg), 0, cap).unwrap();
        let b_to_a = RingView::new(seg, ring_len(cap), cap).unwrap();
        a_to_b.init_salt();
        b_to_a.init_salt();
        (Producer::paired(a_to_b.clone(), b_to_a.clone()), Producer::paired(b_to_a, a_to_b))
    }

    #[test]
    fn request_reply_traffic_reuses_the_lap_start() {
        let cap = 4096;
        let ((mut a_tx, mut a_rx), (mut b_tx, mut b_rx)) = pair_of_peers(cap);
        for i in 0..1000u64 {
            let end = a_tx.push(&[&i.to_le_bytes()]).unwrap();
            let mut got = None;
            assert!(b_rx.pop(|m| got = Some(u64::from_le_bytes(m.try_into().unwrap()))).unwrap());
            assert_eq!(got, Some(i));
            let reply = b_tx.push(&[&(i + 1_000_000).to_le_bytes(), &[5u8; 30]]).unwrap();
            assert!(a_rx.pop(|m| assert_eq!(m[..8], (i + 1_000_000).to_le_bytes())).unwrap());
            if i >= 2 {
                // Both records start a lap: one hot line per direction.
                assert_eq!((end - SLOT as u64) % cap as u64, 0, "request {i} at {end}");
                assert_eq!((reply - SLOT as u64) % cap as u64, 0, "reply {i} at {reply}");
            }
            assert_eq!(a_tx.consumed(), end);
            assert_eq!(a_tx.view().pending_bytes(), 0);
        }
        assert!(a_tx.published() > 900 * cap as u64);
    }

    #[test]
    fn a_reply_sent_while_executing_a_small_request_acks_it() {
        // An active message's handler replies from inside `pop_holding`.
        // A one-slot request is copied out and its slots freed before the
        // handler runs, so the reply's ack covers the request and the next
        // request also starts a lap (one hot line each way). Before, the
        // ack missed it, and requests walked the ring, a cold line each.
        let cap = 4096;
        let ((mut a_tx, mut a_rx), (mut b_tx, mut b_rx)) = pair_of_peers(cap);
        for i in 0..1000u64 {
            let payload: Vec<u8> = (0..40u8).map(|b| b ^ i as u8).collect();
            let end = a_tx.push(&[&i.to_le_bytes(), &payload[..32]]).unwrap();
            let mut reply_end = 0;
            let executed = b_rx
                .pop_holding(|m| {
                    assert_eq!(m[..8], i.to_le_bytes());
                    assert_eq!(m[8..], payload[..32]);
                    reply_end = b_tx.push(&[&m[..8]]).unwrap();
                    false
                })
                .unwrap();
            assert!(executed);
            assert!(a_rx.pop(|m| assert_eq!(m, i.to_le_bytes())).unwrap());
            if i >= 2 {
                assert_eq!((end - SLOT as u64) % cap as u64, 0, "request {i} at {end}");
                assert_eq!((reply_end - SLOT as u64) % cap as u64, 0, "reply {i} at {reply_end}");
            }
            assert_eq!(a_tx.view().executed(), end, "done follows once the handler returned");
        }
    }

    #[test]
    fn copy_short_copies_every_length_and_nothing_more() {
        let src: Vec<u8> = (1..=80u8).collect();
        for len in 0..=80 {
            let mut dst = [0xEEu8; 96];
            copy_short(&mut dst, &src[..len]);
            assert_eq!(dst[..len], src[..len], "length {len}");
            assert!(dst[len..].iter().all(|&b| b == 0xEE), "wrote past {len} bytes");
        }
    }

    #[test]
    #[should_panic(expected = "destination shorter")]
    fn copy_short_refuses_a_short_destination() {
        copy_short(&mut [0u8; 4], &[1u8; 5]);
    }

    #[test]
    fn a_jump_leaves_the_rest_of_the_ring_free_for_a_burst() {
        // After a request-reply exchange the next record jumps to a lap
        // start; the records right behind it must still find the whole ring
        // free (the skipped bytes are not "in use" until the consumer has
        // taken the record after them), or every burst after a reply would
        // spill into the caller's overflow queue.
        let cap = 4096;
        let ((mut a_tx, mut a_rx), (mut b_tx, mut b_rx)) = pair_of_peers(cap);
        for round in 0..50u64 {
            a_tx.push(&[&round.to_le_bytes()]).unwrap();
            assert!(b_rx.pop(|_| ()).unwrap());
            b_tx.push(&[&round.to_le_bytes()]).unwrap();
            assert!(a_rx.pop(|_| ()).unwrap());
            // The reply carried the ack: this burst starts with a jump.
            let burst = cap / SLOT;
            for i in 0..burst as u64 {
                a_tx.push(&[&i.to_le_bytes()]).unwrap_or_else(|e| panic!("round {round}, record {i}: {e}"));
            }
            assert_eq!(a_tx.push(&[&0u64.to_le_bytes()]), Err(PushError::Full), "the ring holds cap bytes, no more");
            let mut seen = 0u64;
            while b_rx.pop(|m| assert_eq!(m, seen.to_le_bytes())).unwrap() {
                seen += 1;
                assert!(seen <= burst as u64);
            }
            assert_eq!(seen, burst as u64, "round {round}");
            assert_eq!(a_tx.consumed(), a_tx.published());
        }
    }

    #[test]
    fn jumps_never_skip_or_reorder_records_whatever_the_interleaving() {
        // A deterministic mix of bursts, replies, lagging consumers, large
        // records and parts, checked message by message on both sides.
        let cap = 2048;
        let ((mut a_tx, mut a_rx), (mut b_tx, mut b_rx)) = pair_of_peers(cap);
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let (mut a_sent, mut a_seen, mut b_sent, mut b_seen) = (0u64, 0u64, 0u64, 0u64);
        let mut jumps = 0;
        for _ in 0..20_000 {
            let len = [0, 8, 40, 100, 500, 900][next(6) as usize];
            let body = |seq: u64| {
                let mut v = vec![(seq % 251) as u8; len.max(8)];
                v[..8].copy_from_slice(&seq.to_le_bytes());
                v
            };
            match next(6) {
                0 | 1 => {
                    let before = a_tx.published();
                    if a_tx.push(&[&body(a_sent)]).is_ok() {
                        a_sent += 1;
                        let record = Producer::record_len(len.max(8)) as u64;
                        let start = a_tx.published() - record;
                        let room = cap as u64 - before % cap as u64;
                        // At a lap start though it fitted where the last ended.
                        if start % cap as u64 == 0 && before % cap as u64 != 0 && record <= room {
                            jumps += 1;
                        }
                    }
                }
                2 => {
                    if b_tx.push(&[&body(b_sent)]).is_ok() {
                        b_sent += 1;
                    }
                }
                3 => {
                    let check = |m: &[u8], seq: &mut u64| {
                        assert_eq!(m[..8], seq.to_le_bytes(), "order");
                        assert!(m[8..].iter().all(|&x| x == (*seq % 251) as u8), "payload");
                        *seq += 1;
                    };
                    for _ in 0..next(4) {
                        b_rx.pop(|m| check(m, &mut b_seen)).unwrap();
                    }
                    for _ in 0..next(4) {
                        a_rx.pop(|m| check(m, &mut a_seen)).unwrap();
                    }
                }
                4 => {
                    // A message in parts, as large messages travel.
                    let whole = body(a_sent);
                    let (first, rest) = whole.split_at(whole.len() / 2);
                    if a_tx.push_part(&[first]).is_ok() {
                        while a_tx.push(&[rest]).is_err() {
                            b_rx.pop(|m| {
                                assert_eq!(m[..8], b_seen.to_le_bytes());
                                b_seen += 1;
                            })
                            .unwrap();
                        }
                        a_sent += 1;
                    }
                }
                _ => {
                    assert_eq!(b_rx.has_pending(), b_seen < a_sent, "pending at b");
                    assert_eq!(a_rx.has_pending(), a_seen < b_sent, "pending at a");
                    // A reply round: b drains, answers (its record acks
                    // everything), a takes the answers: a's next push may jump.
                    while b_rx
                        .pop(|m| {
                            assert_eq!(m[..8], b_seen.to_le_bytes());
                            b_seen += 1;
                        })
                        .unwrap()
                    {}
                    if b_tx.push(&[&body(b_sent)]).is_ok() {
                        b_sent += 1;
                    }
                    while a_rx
                        .pop(|m| {
                            assert_eq!(m[..8], a_seen.to_le_bytes());
                            a_seen += 1;
                        })
                        .unwrap()
                    {}
                }
            }
        }
        while b_rx
            .pop(|m| {
                assert_eq!(m[..8], b_seen.to_le_bytes());
                b_seen += 1;
            })
            .unwrap()
        {}
        while a_rx
            .pop(|m| {
                assert_eq!(m[..8], a_seen.to_le_bytes());
                a_seen += 1;
            })
            .unwrap()
        {}
        assert_eq!((a_seen, b_seen), (b_sent, a_sent));
        assert!(a_sent > 1000 && b_sent > 1000, "{a_sent} {b_sent}");
        assert!(jumps > 100, "the mix jumped {jumps} times");
    }

    #[test]
    fn a_peer_thread_pair_ping_pongs_and_streams_through_jumping_rings() {
        let cap = 1024;
        let ((mut a_tx, mut a_rx), (mut b_tx, mut b_rx)) = pair_of_peers(cap);
        const N: u64 = if cfg!(miri) { 300 } else { 50_000 }; // Miri: `make miri`
                                                              // Both sides back off to yielding while nothing moves (see
                                                              // `two_threads_stream_through_a_small_ring`).
        let echo = std::thread::spawn(move || {
            let backoff = crossbeam_utils::Backoff::new();
            let mut seen = 0u64;
            while seen < N {
                let mut got = None;
                if b_rx.pop(|m| got = Some(u64::from_le_bytes(m[..8].try_into().unwrap()))).unwrap() {
                    assert_eq!(got, Some(seen));
                    seen += 1;
                    backoff.reset();
                    // Echo every third, so some stretches stream one way.
                    if seen % 3 == 0 {
                        while b_tx.push(&[&seen.to_le_bytes()]).is_err() {
                            backoff.snooze();
                        }
                    }
                } else {
                    backoff.snooze();
                }
            }
        });
        let backoff = crossbeam_utils::Backoff::new();
        let (mut sent, mut echoes) = (0u64, 0u64);
        while sent < N || echoes < N / 3 {
            let mut moved = false;
            if sent < N && a_tx.push(&[&sent.to_le_bytes(), &[1u8; 20]]).is_ok() {
                sent += 1;
                moved = true;
            }
            moved |= a_rx
                .pop(|m| {
                    echoes += 1;
                    assert_eq!(u64::from_le_bytes(m.try_into().unwrap()), echoes * 3);
                })
                .unwrap();
            if moved {
                backoff.reset();
            } else {
                backoff.snooze();
            }
        }
        echo.join().unwrap();
    }

    #[test]
    fn a_one_slot_push_writes_what_the_general_path_writes() {
        // The fast paths (`push_one_slot`, and `push_slot_with` writing the
        // same bytes in place) against `push_record` for the same messages
        // into identical paired rings: the same bytes, the same positions,
        // jumps included, for every length a slot holds, in one part and in
        // two.
        let cap = 1024;
        // Each: our producer, our consumer of the answers; the peer's producer
        // (answers) and consumer (our messages).
        let ((mut fast, mut fast_answers), (mut fast_peer, mut fast_peer_rx)) = pair_of_peers(cap);
        let ((mut with, mut with_answers), (mut with_peer, mut with_peer_rx)) = pair_of_peers(cap);
        let ((mut slow, mut slow_answers), (mut slow_peer, mut slow_peer_rx)) = pair_of_peers(cap);
        for len in 0..=SLOT - RECORD_HEADER {
            let body: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let (head, tail) = body.split_at(len / 3);
            for parts in [&[&body[..]][..], &[head, tail][..]] {
                let end = fast.push_one_slot(parts).expect("one slot, paired, room");
                let written = with.push_slot_with(len, |slot| {
                    assert_eq!(slot.len(), len, "the slice is the message");
                    slot.copy_from_slice(&body);
                });
                assert_eq!(written, Some(end));
                assert_eq!(slow.push_record(parts, KIND_MESSAGE), Ok(end));
                let start = (end - SLOT as u64) as usize % cap;
                for other in [&with, &slow] {
                    // SAFETY: all data areas are `cap` bytes; nothing else runs.
                    let (a, b) = unsafe {
                        (
                            std::slice::from_raw_parts(fast.view.data().add(start), SLOT),
                            std::slice::from_raw_parts(other.view.data().add(start), SLOT),
                        )
                    };
                    // Past the stamp (each ring has its own salt): length,
                    // kind, ack and payload.
                    assert_eq!(a[8..RECORD_HEADER + len], b[8..RECORD_HEADER + len], "len {len}");
                }
                for rx in [&mut fast_peer_rx, &mut with_peer_rx, &mut slow_peer_rx] {
                    let mut got = Vec::new();
                    assert!(rx.pop(|m| got = m.to_vec()).unwrap());
                    assert_eq!(got, body);
                }
                // Every other message, an answer acks it: the next push jumps.
                if len % 2 == 0 {
                    for (peer, answers) in [
                        (&mut fast_peer, &mut fast_answers),
                        (&mut with_peer, &mut with_answers),
                        (&mut slow_peer, &mut slow_answers),
                    ] {
                        peer.push(&[b"ack"]).unwrap();
                        assert!(answers.pop(|_| {}).unwrap());
                    }
                }
            }
        }
        assert!(fast.published() > cap as u64, "the test wrapped the ring");
        // Too long for a slot, or three parts: left to the general path.
        assert_eq!(fast.push_one_slot(&[&[0u8; SLOT - RECORD_HEADER + 1]]), None);
        assert_eq!(fast.push_one_slot(&[b"a", b"b", b"c"]), None);
        assert_eq!(with.push_slot_with(SLOT - RECORD_HEADER + 1, |_| panic!("called for a message too long")), None);
        // A full ring: nothing written, and the consumer finds only what
        // was published before.
        let mut published = 0;
        while with.push_slot_with(8, |slot| slot.copy_from_slice(&7u64.to_le_bytes())).is_some() {
            published += 1;
        }
        assert_eq!(published, cap / SLOT);
        assert_eq!(with.push_slot_with(8, |_| panic!("called with no slot free")), None);
        let mut popped = 0;
        while with_peer_rx.pop(|m| assert_eq!(m, 7u64.to_le_bytes())).unwrap() {
            popped += 1;
        }
        assert_eq!(popped, published);
        // An unpaired ring has no ack to write: left to the general path.
        let (mut unpaired, _) = ring(cap);
        assert_eq!(unpaired.push_slot_with(8, |_| panic!("called on an unpaired ring")), None);
    }

    #[test]
    fn an_ack_beyond_what_was_published_frees_nothing() {
        let cap = 512;
        let ((mut a_tx, _a_rx), (_b_tx, mut b_rx)) = pair_of_peers(cap);
        let cell = Arc::clone(&a_tx.pairing.as_ref().unwrap().1);
        cell.0.store(u64::MAX, Ordering::Release);
        let mut pushed = 0;
        while a_tx.push(&[&[3u8; 40]]).is_ok() {
            pushed += 1;
        }
        assert_eq!(pushed, cap / SLOT, "a bogus ack made room");
        let mut popped = 0;
        while b_rx.pop(|m| assert_eq!(m, [3u8; 40])).unwrap() {
            popped += 1;
        }
        assert_eq!(popped, pushed);
    }

    #[test]
    fn pop_slot_if_takes_only_wanted_one_slot_messages_and_holds_as_told() {
        let (mut tx, mut rx) = ring(1024);
        tx.push(&[b"skip me"]).unwrap();
        tx.push(&[b"take me"]).unwrap();
        tx.push(&[&[9u8; 100]]).unwrap(); // three slots
                                          // Not wanted: stays, for the general pop.
        assert_eq!(rx.pop_slot_if(|m| m == b"take me", |_| unreachable!("not wanted")), Ok(false));
        assert!(rx.pop(|m| assert_eq!(m, b"skip me")).unwrap());
        // Wanted: taken, its slot freed before `f` runs, `done` held as `f` says.
        let head_before = rx.view.head().load(Ordering::Acquire);
        assert_eq!(
            rx.pop_slot_if(
                |m| m == b"take me",
                |m| {
                    assert_eq!(m, b"take me");
                    true
                }
            ),
            Ok(true)
        );
        assert_eq!(rx.view.head().load(Ordering::Acquire), head_before + SLOT as u64);
        assert!(rx.holds_done());
        assert_eq!(rx.view.done().load(Ordering::Acquire), head_before, "done held below the message");
        rx.release_done();
        assert_eq!(rx.view.done().load(Ordering::Acquire), head_before + SLOT as u64);
        // A message of more than one slot is left to the general pop, even if wanted.
        assert_eq!(rx.pop_slot_if(|_| true, |_| unreachable!("three slots")), Ok(false));
        assert!(rx.pop(|m| assert_eq!(m, &[9u8; 100][..])).unwrap());
        assert_eq!(rx.pop_slot_if(|_| true, |_| unreachable!("empty")), Ok(false));
    }
}
