//! Multicast feedback: what a member of an IP multicast transfer tells the
//! root over the reliable path — how far it has everything, which segments
//! it misses (a Nack), or that it holds the whole transfer.
//!
//! Owns: [`McastRanges`] (a non-allocating view over the missing ranges)
//! and the layout of [`McastFeedback`]. The segments themselves travel as
//! [`McastData`](crate::mcast::McastData) packets.
//!
//! Must not: decide what to repair or when (`mw_proto::mcast` does), or accept
//! more than [`MCAST_RANGES_MAX`] ranges, or ranges out of order or touching.
//!
//! ```text
//! McastFeedback (32 + 8 × count bytes, no body)
//! offset      size       field
//!  0          1          opcode    OpCode::McastFeedback
//!  1          1          flags     bit 0 DONE: the member holds the whole transfer; other bits zero
//!  2          2          count     missing ranges that follow, at most MCAST_RANGES_MAX; 0 with DONE
//!  4          4          reserved, zero
//!  8          8          team      the team's multicast identity
//! 16          8          transfer  which transfer of the team
//! 24          4          contig    every segment below this index has arrived
//! 28          4          reserved, zero
//! 32          8 × count  ranges    (start u32, end u32): segments start..end are missing;
//!                                  contig <= start < end, ascending, never touching
//! ```

use core::fmt;

use super::bytes::{exact, get16, get32, get64, need, reserved, set16, set32, set64, zero};
use crate::{Error, Result};

/// Most missing ranges one [`McastFeedback`] may list.
pub const MCAST_RANGES_MAX: usize = 64;

mod field {
    use core::ops::Range;
    pub const FLAGS: usize = 1;
    pub const COUNT: Range<usize> = 2..4;
    pub const RESERVED_A: Range<usize> = 4..8;
    pub const TEAM: Range<usize> = 8..16;
    pub const TRANSFER: Range<usize> = 16..24;
    pub const CONTIG: Range<usize> = 24..28;
    pub const RESERVED_B: Range<usize> = 28..32;
    pub const RANGES: usize = 32;
    pub const RANGE_SIZE: usize = 8;
}

const FLAG_DONE: u8 = 1;

/// Header length of a [`McastFeedback`] listing `count` ranges.
pub const fn mcast_feedback_len(count: usize) -> usize {
    field::RANGES + count * field::RANGE_SIZE
}

#[derive(Clone, Copy)]
enum Inner<'a> {
    /// Parsed: the range array as it sits in the message.
    Wire(&'a [u8]),
    /// Built by the sender.
    Pairs(&'a [(u32, u32)]),
}

/// The missing `(start, end)` segment ranges of a [`McastFeedback`]: a view
/// into a parsed message or a borrowed slice to emit. Never allocates; two
/// values are equal when they list the same ranges.
#[derive(Clone, Copy)]
pub struct McastRanges<'a> {
    inner: Inner<'a>,
}

impl<'a> McastRanges<'a> {
    /// Ranges to emit (at most [`MCAST_RANGES_MAX`], ascending, not touching).
    pub const fn from_pairs(pairs: &'a [(u32, u32)]) -> McastRanges<'a> {
        McastRanges { inner: Inner::Pairs(pairs) }
    }

    /// No ranges.
    pub const fn none() -> McastRanges<'static> {
        McastRanges { inner: Inner::Pairs(&[]) }
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        match self.inner {
            Inner::Wire(bytes) => bytes.len() / field::RANGE_SIZE,
            Inner::Pairs(pairs) => pairs.len(),
        }
    }

    /// Whether there are no ranges.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `index`-th range as `(start, end)`.
    pub fn get(&self, index: usize) -> Option<(u32, u32)> {
        if index >= self.len() {
            return None;
        }
        Some(match self.inner {
            Inner::Wire(bytes) => {
                let at = index * field::RANGE_SIZE;
                (get32(bytes, at..at + 4), get32(bytes, at + 4..at + 8))
            }
            Inner::Pairs(pairs) => pairs[index],
        })
    }

    /// Iterates over the ranges in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (u32, u32)> + 'a {
        let copy = *self;
        (0..copy.len()).map(move |i| copy.get(i).expect("index below len"))
    }
}

impl PartialEq for McastRanges<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for McastRanges<'_> {}

impl fmt::Debug for McastRanges<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A member's report on one multicast transfer, sent to its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McastFeedback<'a> {
    /// The team's multicast identity.
    pub team: u64,
    /// Which transfer.
    pub transfer: u64,
    /// Every segment below this index has arrived.
    pub contig: u32,
    /// The member holds the whole transfer (then `missing` is empty).
    pub done: bool,
    /// Segments the member misses, at or above `contig`.
    pub missing: McastRanges<'a>,
}

impl<'a> McastFeedback<'a> {
    pub(super) const MIN_HEADER_LEN: usize = field::RANGES;

    pub(super) fn header_len(&self) -> usize {
        mcast_feedback_len(self.missing.len())
    }

    #[inline]
    pub(super) fn parse(msg: &'a [u8]) -> Result<McastFeedback<'a>> {
        need(msg, field::RANGES)?;
        reserved(msg, field::RESERVED_A)?;
        reserved(msg, field::RESERVED_B)?;
        let flags = msg[field::FLAGS];
        if flags & !FLAG_DONE != 0 {
            return Err(Error::Malformed);
        }
        let count = usize::from(get16(msg, field::COUNT));
        if count > MCAST_RANGES_MAX {
            return Err(Error::BadLength);
        }
        exact(msg, mcast_feedback_len(count))?;
        let done = flags & FLAG_DONE != 0;
        if done && count != 0 {
            return Err(Error::Malformed);
        }
        let contig = get32(msg, field::CONTIG);
        let missing = McastRanges { inner: Inner::Wire(&msg[field::RANGES..]) };
        // Ascending, non-empty, not touching, all at or above contig: a
        // receiver never sends anything else, and the root may rely on it.
        let mut floor = u64::from(contig);
        for (start, end) in missing.iter() {
            if u64::from(start) < floor || start >= end {
                return Err(Error::Malformed);
            }
            floor = u64::from(end) + 1;
        }
        Ok(McastFeedback {
            team: get64(msg, field::TEAM),
            transfer: get64(msg, field::TRANSFER),
            contig,
            done,
            missing,
        })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        let count = self.missing.len();
        debug_assert!(count <= MCAST_RANGES_MAX, "McastFeedback with {count} ranges");
        b[field::FLAGS] = if self.done { FLAG_DONE } else { 0 };
        set16(b, field::COUNT, count as u16);
        zero(b, field::RESERVED_A);
        set64(b, field::TEAM, self.team);
        set64(b, field::TRANSFER, self.transfer);
        set32(b, field::CONTIG, self.contig);
        zero(b, field::RESERVED_B);
        for (i, (start, end)) in self.missing.iter().enumerate() {
            let at = field::RANGES + i * field::RANGE_SIZE;
            set32(b, at..at + 4, start);
            set32(b, at + 4..at + 8, end);
        }
    }
}

impl fmt::Display for McastFeedback<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mcast-feedback team={:#x} transfer={} contig={}", self.team, self.transfer, self.contig)?;
        if self.done {
            f.write_str(" done")?;
        }
        if !self.missing.is_empty() {
            write!(f, " missing={:?}", self.missing)?;
        }
        Ok(())
    }
}
