//! Vectored put: one body scattered to several offsets of one region.
//!
//! Owns: [`IovSegments`] (a non-allocating view over the segment list) and
//! the layout of [`PutIov`] (T3E-style gather list, DESIGN §2 "put_iov").
//!
//! Must not: check segments against the target region (the endpoint does,
//! overflow-safely), or accept more than [`IOV_MAX`] segments or a body whose
//! length is not the sum of the segment lengths.
//!
//! ```text
//! PutIov (16 + 12 × count bytes rounded up to a multiple of 8, then the body)
//! offset        size         field
//!  0            1            opcode   OpCode::PutIov
//!  1            1            reserved, zero
//!  2            2            count    number of segments, at most IOV_MAX
//!  4            4            req
//!  8            8            key
//! 16            8 × count    segment offsets (u64, naturally aligned)
//! 16 + 8×count  4 × count    segment lengths (u32)
//!  ...          0 or 4       padding to a multiple of 8, zero
//!  header_len   ...          body: the segments' bytes back to back
//! ```
//! The lengths must add up to the body length exactly ([`Error::BadLength`]).

use core::fmt;

use super::bytes::{get16, get32, get64, need, reserved, set16, set32, set64, zero};
use crate::{Error, Result};

/// Most segments one [`PutIov`] may carry.
pub const IOV_MAX: usize = 256;

mod field {
    use core::ops::Range;
    pub const RESERVED: usize = 1;
    pub const COUNT: Range<usize> = 2..4;
    pub const REQ: Range<usize> = 4..8;
    pub const KEY: Range<usize> = 8..16;
    pub const SEGMENTS: usize = 16;
    pub const OFFSET_SIZE: usize = 8;
    pub const LEN_SIZE: usize = 4;
}

/// Header length of a [`PutIov`] with `count` segments.
pub const fn iov_header_len(count: usize) -> usize {
    (field::SEGMENTS + count * (field::OFFSET_SIZE + field::LEN_SIZE) + 7) & !7
}

#[derive(Clone, Copy)]
enum Inner<'a> {
    /// Parsed: the offsets and lengths arrays as they sit in the message.
    Wire { offsets: &'a [u8], lens: &'a [u8] },
    /// Built by the sender.
    Pairs(&'a [(u64, u32)]),
}

/// The `(offset, len)` segments of a [`PutIov`]: either a view into a parsed
/// message or a borrowed slice of pairs to emit. Iterating never allocates;
/// two values are equal when they list the same segments.
#[derive(Clone, Copy)]
pub struct IovSegments<'a> {
    inner: Inner<'a>,
}

impl<'a> IovSegments<'a> {
    /// Segments to emit, from `(offset, len)` pairs (at most [`IOV_MAX`]).
    pub const fn from_pairs(pairs: &'a [(u64, u32)]) -> IovSegments<'a> {
        IovSegments { inner: Inner::Pairs(pairs) }
    }

    /// Number of segments.
    pub fn len(&self) -> usize {
        match self.inner {
            Inner::Wire { lens, .. } => lens.len() / field::LEN_SIZE,
            Inner::Pairs(pairs) => pairs.len(),
        }
    }

    /// Whether there are no segments.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `index`-th segment as `(offset, len)`.
    pub fn get(&self, index: usize) -> Option<(u64, u32)> {
        if index >= self.len() {
            return None;
        }
        Some(match self.inner {
            Inner::Wire { offsets, lens } => {
                let o = index * field::OFFSET_SIZE;
                let l = index * field::LEN_SIZE;
                (get64(offsets, o..o + field::OFFSET_SIZE), get32(lens, l..l + field::LEN_SIZE))
            }
            Inner::Pairs(pairs) => pairs[index],
        })
    }

    /// Iterates over the segments in order.
    pub fn iter(&self) -> IovIter<'a> {
        IovIter { segments: *self, next: 0 }
    }

    /// Sum of the segment lengths (what the body length must be).
    pub fn total_len(&self) -> u64 {
        // A parsed list has at most 65535 × u32::MAX bytes, far from u64::MAX;
        // saturating keeps an absurd built list from wrapping.
        self.iter().fold(0u64, |sum, (_, len)| sum.saturating_add(u64::from(len)))
    }
}

impl PartialEq for IovSegments<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for IovSegments<'_> {}

impl fmt::Debug for IovSegments<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &IovSegments<'a> {
    type Item = (u64, u32);
    type IntoIter = IovIter<'a>;
    fn into_iter(self) -> IovIter<'a> {
        self.iter()
    }
}

/// Iterator over the `(offset, len)` pairs of an [`IovSegments`].
#[derive(Debug, Clone)]
pub struct IovIter<'a> {
    segments: IovSegments<'a>,
    next: usize,
}

impl Iterator for IovIter<'_> {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
        let item = self.segments.get(self.next)?;
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.segments.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for IovIter<'_> {}

/// Writes the body, cut into consecutive pieces of the segments' lengths, at
/// the segments' offsets of region `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutIov<'a> {
    /// Request id; 0 means no completion reply is wanted.
    pub req: u32,
    /// Region key at the target.
    pub key: u64,
    /// Where each piece of the body goes.
    pub segments: IovSegments<'a>,
    /// The pieces back to back; its length is the sum of the segment lengths.
    pub body: &'a [u8],
}

impl<'a> PutIov<'a> {
    pub(super) fn header_len(&self) -> usize {
        iov_header_len(self.segments.len())
    }

    #[inline(always)]
    pub(super) fn parse(msg: &'a [u8]) -> Result<PutIov<'a>> {
        need(msg, field::SEGMENTS)?;
        reserved(msg, field::RESERVED..field::RESERVED + 1)?;
        let count = usize::from(get16(msg, field::COUNT));
        if count > IOV_MAX {
            return Err(Error::BadLength);
        }
        let header_len = iov_header_len(count);
        need(msg, header_len)?;
        let lens_at = field::SEGMENTS + count * field::OFFSET_SIZE;
        let pad_at = lens_at + count * field::LEN_SIZE;
        reserved(msg, pad_at..header_len)?;
        let segments =
            IovSegments { inner: Inner::Wire { offsets: &msg[field::SEGMENTS..lens_at], lens: &msg[lens_at..pad_at] } };
        let body = &msg[header_len..];
        if u64::try_from(body.len()).ok() != Some(segments.total_len()) {
            return Err(Error::BadLength);
        }
        Ok(PutIov { req: get32(msg, field::REQ), key: get64(msg, field::KEY), segments, body })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        let count = self.segments.len();
        debug_assert!(count <= IOV_MAX, "PutIov with {count} segments (IOV_MAX is {IOV_MAX})");
        b[field::RESERVED] = 0;
        set16(b, field::COUNT, count as u16);
        set32(b, field::REQ, self.req);
        set64(b, field::KEY, self.key);
        let lens_at = field::SEGMENTS + count * field::OFFSET_SIZE;
        for (i, (offset, len)) in self.segments.iter().enumerate() {
            let o = field::SEGMENTS + i * field::OFFSET_SIZE;
            let l = lens_at + i * field::LEN_SIZE;
            set64(b, o..o + field::OFFSET_SIZE, offset);
            set32(b, l..l + field::LEN_SIZE, len);
        }
        zero(b, lens_at + count * field::LEN_SIZE..iov_header_len(count));
    }
}

impl fmt::Display for PutIov<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "put-iov req={} key={:#x} segs={} len={}", self.req, self.key, self.segments.len(), self.body.len())
    }
}
