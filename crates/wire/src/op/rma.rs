//! Plain remote memory access: put, inline put, get and the get response.
//!
//! Owns: the layouts of [`Put`], [`PutInline`], [`GetRequest`] and
//! [`GetResponse`]. Seeds: Cenju-4's remote DMA put and its inline mode for
//! tiny payloads (seed 000), MBCF's remote WRITE/READ (seed 001), SR8000's
//! GET (seed 002).
//!
//! Must not: check the key, bounds or access rights at the target (the endpoint
//! does), or accept an inline put longer than [`INLINE_MAX`].
//!
//! ```text
//! Put, PutInline (24 bytes, then the body: the data to write)
//! offset size field
//!  0      1   opcode  OpCode::Put or OpCode::PutInline
//!  1      3   reserved, zero
//!  4      4   req     0 = no completion reply wanted
//!  8      8   key     region key at the target
//! 16      8   offset  byte offset in the region
//! 24    ...   body    (PutInline: at most INLINE_MAX bytes)
//!
//! GetRequest (32 bytes, no body)
//!  0      1   opcode  OpCode::GetRequest
//!  1      3   reserved, zero
//!  4      4   req
//!  8      8   key
//! 16      8   offset
//! 24      8   len     bytes wanted
//!
//! GetResponse (8 bytes, then the data read; empty unless status is Ok)
//!  0      1   opcode  OpCode::GetResponse
//!  1      1   status  Status
//!  2      2   reserved, zero
//!  4      4   req     the GetRequest or GetStridedRequest this answers
//!  8    ...   body
//! ```

use core::fmt;

use super::bytes::{exact, get32, get64, need, reserved, set32, set64, zero};
use super::Status;
use crate::{Error, Result};

/// Largest body a [`PutInline`] may carry (Cenju-4 inline mode, seed 000).
pub const INLINE_MAX: usize = 32;

mod field {
    use core::ops::Range;
    pub const STATUS: usize = 1;
    pub const RESERVED_1_4: Range<usize> = 1..4;
    pub const RESERVED_2_4: Range<usize> = 2..4;
    pub const REQ: Range<usize> = 4..8;
    pub const KEY: Range<usize> = 8..16;
    pub const OFFSET: Range<usize> = 16..24;
    pub const GET_LEN: Range<usize> = 24..32;
    pub const PUT_END: usize = 24;
    pub const GET_END: usize = 32;
    pub const RESPONSE_END: usize = 8;
}

/// Writes `body` at `offset` of region `key` at the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Put<'a> {
    /// Request id; 0 means no completion reply is wanted.
    pub req: u32,
    /// Region key at the target.
    pub key: u64,
    /// Byte offset in the region.
    pub offset: u64,
    /// The data to write.
    pub body: &'a [u8],
}

/// A put of at most [`INLINE_MAX`] bytes, which the target may apply on its
/// fast path without staging (Cenju-4 inline mode, seed 000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutInline<'a> {
    /// Request id; 0 means no completion reply is wanted.
    pub req: u32,
    /// Region key at the target.
    pub key: u64,
    /// Byte offset in the region.
    pub offset: u64,
    /// The data to write, at most [`INLINE_MAX`] bytes.
    pub body: &'a [u8],
}

/// Asks for `len` bytes at `offset` of region `key`; answered with a
/// [`GetResponse`] (seed 002: GET as a put plus a handler at the target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetRequest {
    /// Request id the response will carry.
    pub req: u32,
    /// Region key at the target.
    pub key: u64,
    /// Byte offset in the region.
    pub offset: u64,
    /// Number of bytes wanted.
    pub len: u64,
}

/// The answer to a [`GetRequest`] or a
/// [`GetStridedRequest`](super::GetStridedRequest): the data, or an error status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetResponse<'a> {
    /// The request this answers.
    pub req: u32,
    /// Outcome; the body is empty unless it is [`Status::Ok`].
    pub status: Status,
    /// The data read.
    pub body: &'a [u8],
}

fn parse_put_fields(msg: &[u8]) -> Result<(u32, u64, u64)> {
    need(msg, field::PUT_END)?;
    reserved(msg, field::RESERVED_1_4)?;
    Ok((get32(msg, field::REQ), get64(msg, field::KEY), get64(msg, field::OFFSET)))
}

fn emit_put_fields(b: &mut [u8], req: u32, key: u64, offset: u64) {
    zero(b, field::RESERVED_1_4);
    set32(b, field::REQ, req);
    set64(b, field::KEY, key);
    set64(b, field::OFFSET, offset);
}

impl<'a> Put<'a> {
    pub(super) const HEADER_LEN: usize = field::PUT_END;

    #[inline(always)]
    pub(super) fn parse(msg: &'a [u8]) -> Result<Put<'a>> {
        let (req, key, offset) = parse_put_fields(msg)?;
        Ok(Put { req, key, offset, body: &msg[field::PUT_END..] })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        emit_put_fields(b, self.req, self.key, self.offset);
    }
}

impl<'a> PutInline<'a> {
    pub(super) const HEADER_LEN: usize = field::PUT_END;

    #[inline(always)]
    pub(super) fn parse(msg: &'a [u8]) -> Result<PutInline<'a>> {
        let (req, key, offset) = parse_put_fields(msg)?;
        let body = &msg[field::PUT_END..];
        if body.len() > INLINE_MAX {
            return Err(Error::BadLength);
        }
        Ok(PutInline { req, key, offset, body })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        emit_put_fields(b, self.req, self.key, self.offset);
    }
}

impl GetRequest {
    pub(super) const HEADER_LEN: usize = field::GET_END;

    #[inline(always)]
    pub(super) fn parse(msg: &[u8]) -> Result<GetRequest> {
        exact(msg, field::GET_END)?;
        let (req, key, offset) = parse_put_fields(msg)?;
        Ok(GetRequest { req, key, offset, len: get64(msg, field::GET_LEN) })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        emit_put_fields(b, self.req, self.key, self.offset);
        set64(b, field::GET_LEN, self.len);
    }
}

impl<'a> GetResponse<'a> {
    pub(super) const HEADER_LEN: usize = field::RESPONSE_END;

    #[inline(always)]
    pub(super) fn parse(msg: &'a [u8]) -> Result<GetResponse<'a>> {
        need(msg, field::RESPONSE_END)?;
        reserved(msg, field::RESERVED_2_4)?;
        let status = Status::from_u8(msg[field::STATUS])?;
        let body = &msg[field::RESPONSE_END..];
        if !status.is_ok() && !body.is_empty() {
            return Err(Error::Malformed);
        }
        Ok(GetResponse { req: get32(msg, field::REQ), status, body })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        b[field::STATUS] = self.status as u8;
        zero(b, field::RESERVED_2_4);
        set32(b, field::REQ, self.req);
    }
}

impl fmt::Display for Put<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "put req={} key={:#x} off={} len={}", self.req, self.key, self.offset, self.body.len())
    }
}

impl fmt::Display for PutInline<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "put-inline req={} key={:#x} off={} len={}", self.req, self.key, self.offset, self.body.len())
    }
}

impl fmt::Display for GetRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "get req={} key={:#x} off={} len={}", self.req, self.key, self.offset, self.len)
    }
}

impl fmt::Display for GetResponse<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "get-resp req={} {} len={}", self.req, self.status, self.body.len())
    }
}
