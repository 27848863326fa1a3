//! Strided put and strided get.
//!
//! Owns: the layouts of [`PutStrided`] and [`GetStridedRequest`] (seed 003,
//! PPRAM-Link's stride scatter/gather; T3E-style). The initiator packs the
//! elements back to back; the stride applies at the target. A strided get is
//! answered with an ordinary [`GetResponse`](super::GetResponse) whose body is
//! the packed elements.
//!
//! Must not: check strides or the elements' extent against the target region
//! (the endpoint does, overflow-safely), or accept a body whose length is not
//! `count × elem_size`.
//!
//! ```text
//! PutStrided (40 bytes, then count × elem_size packed bytes)
//! GetStridedRequest (40 bytes, no body)
//! offset size field
//!  0      1   opcode     OpCode::PutStrided or OpCode::GetStridedRequest
//!  1      3   reserved, zero
//!  4      4   req
//!  8      8   key
//! 16      8   offset     of the first element in the region
//! 24      4   elem_size  bytes per element
//! 28      4   count      number of elements
//! 32      8   stride     bytes from one element's start to the next's, at the target
//! 40    ...   body       (PutStrided only) exactly elem_size × count bytes
//! ```
//! The extent `(count - 1) × stride + elem_size` and `offset + extent` must
//! not overflow a u64 ([`Error::Malformed`] otherwise); whether they lie in
//! the region is the target's check.

use core::fmt;

use super::bytes::{exact, get32, get64, need, reserved, set32, set64, zero};
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const RESERVED: Range<usize> = 1..4;
    pub const REQ: Range<usize> = 4..8;
    pub const KEY: Range<usize> = 8..16;
    pub const OFFSET: Range<usize> = 16..24;
    pub const ELEM_SIZE: Range<usize> = 24..28;
    pub const COUNT: Range<usize> = 28..32;
    pub const STRIDE: Range<usize> = 32..40;
    pub const END: usize = 40;
}

/// Bytes spanned at the target by `count` elements of `elem_size` bytes,
/// `stride` bytes apart: `(count - 1) × stride + elem_size`, 0 when `count`
/// is 0, `None` on overflow.
pub fn strided_extent(elem_size: u32, count: u32, stride: u64) -> Option<u64> {
    if count == 0 {
        return Some(0);
    }
    u64::from(count - 1).checked_mul(stride)?.checked_add(u64::from(elem_size))
}

/// Writes `count` elements of `elem_size` bytes, packed back to back in the
/// body, every `stride` bytes from `offset` of region `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutStrided<'a> {
    /// Request id; 0 means no completion reply is wanted.
    pub req: u32,
    /// Region key at the target.
    pub key: u64,
    /// Byte offset of the first element.
    pub offset: u64,
    /// Bytes per element.
    pub elem_size: u32,
    /// Number of elements.
    pub count: u32,
    /// Distance between element starts at the target.
    pub stride: u64,
    /// The packed elements: exactly `elem_size × count` bytes.
    pub body: &'a [u8],
}

/// Reads `count` elements of `elem_size` bytes every `stride` bytes from
/// `offset` of region `key`; answered with a packed
/// [`GetResponse`](super::GetResponse).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetStridedRequest {
    /// Request id the response will carry.
    pub req: u32,
    /// Region key at the target.
    pub key: u64,
    /// Byte offset of the first element.
    pub offset: u64,
    /// Bytes per element.
    pub elem_size: u32,
    /// Number of elements.
    pub count: u32,
    /// Distance between element starts at the target.
    pub stride: u64,
}

struct Fields {
    req: u32,
    key: u64,
    offset: u64,
    elem_size: u32,
    count: u32,
    stride: u64,
}

fn parse_fields(msg: &[u8]) -> Result<Fields> {
    need(msg, field::END)?;
    reserved(msg, field::RESERVED)?;
    let fields = Fields {
        req: get32(msg, field::REQ),
        key: get64(msg, field::KEY),
        offset: get64(msg, field::OFFSET),
        elem_size: get32(msg, field::ELEM_SIZE),
        count: get32(msg, field::COUNT),
        stride: get64(msg, field::STRIDE),
    };
    let extent = strided_extent(fields.elem_size, fields.count, fields.stride).ok_or(Error::Malformed)?;
    fields.offset.checked_add(extent).ok_or(Error::Malformed)?;
    Ok(fields)
}

fn emit_fields(b: &mut [u8], f: Fields) {
    zero(b, field::RESERVED);
    set32(b, field::REQ, f.req);
    set64(b, field::KEY, f.key);
    set64(b, field::OFFSET, f.offset);
    set32(b, field::ELEM_SIZE, f.elem_size);
    set32(b, field::COUNT, f.count);
    set64(b, field::STRIDE, f.stride);
}

impl<'a> PutStrided<'a> {
    pub(super) const HEADER_LEN: usize = field::END;

    /// Bytes spanned at the target (see [`strided_extent`]).
    pub fn extent(&self) -> Option<u64> {
        strided_extent(self.elem_size, self.count, self.stride)
    }

    #[inline(always)]
    pub(super) fn parse(msg: &'a [u8]) -> Result<PutStrided<'a>> {
        let f = parse_fields(msg)?;
        let body = &msg[field::END..];
        // u32 × u32 always fits a u64; compare in u64 so a 32-bit usize cannot wrap.
        let want = u64::from(f.elem_size) * u64::from(f.count);
        if u64::try_from(body.len()).ok() != Some(want) {
            return Err(Error::BadLength);
        }
        Ok(PutStrided {
            req: f.req,
            key: f.key,
            offset: f.offset,
            elem_size: f.elem_size,
            count: f.count,
            stride: f.stride,
            body,
        })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        let fields = Fields {
            req: self.req,
            key: self.key,
            offset: self.offset,
            elem_size: self.elem_size,
            count: self.count,
            stride: self.stride,
        };
        emit_fields(b, fields);
    }
}

impl GetStridedRequest {
    pub(super) const HEADER_LEN: usize = field::END;

    /// Bytes spanned at the target (see [`strided_extent`]).
    pub fn extent(&self) -> Option<u64> {
        strided_extent(self.elem_size, self.count, self.stride)
    }

    /// Bytes the response body carries: `elem_size × count`.
    pub fn packed_len(&self) -> u64 {
        u64::from(self.elem_size) * u64::from(self.count)
    }

    #[inline(always)]
    pub(super) fn parse(msg: &[u8]) -> Result<GetStridedRequest> {
        exact(msg, field::END)?;
        let f = parse_fields(msg)?;
        Ok(GetStridedRequest {
            req: f.req,
            key: f.key,
            offset: f.offset,
            elem_size: f.elem_size,
            count: f.count,
            stride: f.stride,
        })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        let fields = Fields {
            req: self.req,
            key: self.key,
            offset: self.offset,
            elem_size: self.elem_size,
            count: self.count,
            stride: self.stride,
        };
        emit_fields(b, fields);
    }
}

impl fmt::Display for PutStrided<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "put-strided req={} key={:#x} off={} elem={} count={} stride={} len={}",
            self.req,
            self.key,
            self.offset,
            self.elem_size,
            self.count,
            self.stride,
            self.body.len()
        )
    }
}

impl fmt::Display for GetStridedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "get-strided req={} key={:#x} off={} elem={} count={} stride={}",
            self.req, self.key, self.offset, self.elem_size, self.count, self.stride
        )
    }
}
