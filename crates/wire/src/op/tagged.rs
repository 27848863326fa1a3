//! Tagged messages: eager sends and the rendezvous protocol.
//!
//! Owns: the layouts of [`Eager`], [`RndvRts`] and [`RndvDone`]. Below the
//! eager threshold the data travels in the message ([`Eager`]); above it the
//! sender announces the message with a ready-to-send ([`RndvRts`]) naming a
//! region that holds the data, the receiver pulls it with an ordinary
//! [`GetRequest`](super::GetRequest) into the posted buffer and then tells
//! the sender with [`RndvDone`] (seed 002, SR8000: receiver-driven GET for
//! large messages, so no large receive buffers are needed). Matching
//! (context, source, tag, wildcards) is the endpoint's job.
//!
//! Must not: match messages to receives, hold unexpected messages, or decide
//! the eager threshold (mw-core's `msg` does).
//!
//! ```text
//! Eager (16 bytes, then the body: the message)
//! offset size field
//!  0      1   opcode   OpCode::Eager
//!  1      3   reserved, zero
//!  4      4   context  communicator / team context id
//!  8      8   tag
//! 16    ...   body
//!
//! RndvRts (48 bytes, no body)
//!  0      1   opcode      OpCode::RndvRts
//!  1      3   reserved, zero
//!  4      4   context
//!  8      8   tag
//! 16      8   total_len   message length in bytes
//! 24      4   sender_req  the sender's request, echoed in RndvDone
//! 28      4   reserved, zero
//! 32      8   key         region at the sender holding the data
//! 40      8   offset      of the data in that region
//!
//! RndvDesc (32 bytes; the body of an AmRequest / AmReply with RNDV set)
//!  0      8   total_len   payload length in bytes
//!  8      8   key         region at the sender holding the payload
//! 16      8   offset      of the payload in that region
//! 24      4   token       the sender's id for this payload, echoed in RndvDone
//! 28      4   reserved, zero
//!
//! RndvDone (8 bytes, no body)
//!  0      1   opcode      OpCode::RndvDone
//!  1      1   status      Status (Truncated if the posted buffer was too small)
//!  2      2   reserved, zero
//!  4      4   sender_req
//! ```

use core::fmt;

use super::bytes::{exact, get32, get64, need, reserved, set32, set64, zero};
use super::Status;
use crate::Result;

mod field {
    use core::ops::Range;
    pub const RESERVED_1_4: Range<usize> = 1..4;
    pub const CONTEXT: Range<usize> = 4..8;
    pub const TAG: Range<usize> = 8..16;
    pub const EAGER_END: usize = 16;

    pub const TOTAL_LEN: Range<usize> = 16..24;
    pub const SENDER_REQ: Range<usize> = 24..28;
    pub const RTS_RESERVED: Range<usize> = 28..32;
    pub const KEY: Range<usize> = 32..40;
    pub const OFFSET: Range<usize> = 40..48;
    pub const RTS_END: usize = 48;

    pub const STATUS: usize = 1;
    pub const DONE_RESERVED: Range<usize> = 2..4;
    pub const DONE_REQ: Range<usize> = 4..8;
    pub const DONE_END: usize = 8;

    pub const DESC_TOTAL: Range<usize> = 0..8;
    pub const DESC_KEY: Range<usize> = 8..16;
    pub const DESC_OFFSET: Range<usize> = 16..24;
    pub const DESC_TOKEN: Range<usize> = 24..28;
    pub const DESC_RESERVED: Range<usize> = 28..32;
    pub const DESC_END: usize = 32;
}

/// A tagged message whose data travels inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eager<'a> {
    /// Communicator / team context id.
    pub context: u32,
    /// Message tag.
    pub tag: u64,
    /// The message.
    pub body: &'a [u8],
}

/// Rendezvous ready-to-send: the message of `total_len` bytes sits at
/// `offset` of region `key` at the sender; the receiver GETs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RndvRts {
    /// Communicator / team context id.
    pub context: u32,
    /// Message tag.
    pub tag: u64,
    /// Message length in bytes.
    pub total_len: u64,
    /// The sender's request id, echoed in [`RndvDone`].
    pub sender_req: u32,
    /// Region key at the sender holding the data.
    pub key: u64,
    /// Offset of the data in that region.
    pub offset: u64,
}

/// The receiver has pulled a rendezvous message (or gave up): the sender may
/// release its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RndvDone {
    /// The sender's request id from the [`RndvRts`].
    pub sender_req: u32,
    /// Outcome at the receiver.
    pub status: Status,
}

/// Where a large active-message payload waits to be pulled: the body of an
/// [`AmRequest`](super::AmRequest) or [`AmReply`](super::AmReply) whose
/// `rndv` flag is set. The receiver GETs `total_len` bytes at `offset` of
/// region `key` and then sends [`RndvDone`] carrying `token`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RndvDesc {
    /// Payload length in bytes.
    pub total_len: u64,
    /// Region key at the sender holding the payload.
    pub key: u64,
    /// Offset of the payload in that region.
    pub offset: u64,
    /// The sender's id for this payload; [`RndvDone::sender_req`] echoes it.
    pub token: u32,
}

impl RndvDesc {
    /// Encoded length.
    pub const LEN: usize = field::DESC_END;

    /// Decodes a descriptor; the body must be exactly [`RndvDesc::LEN`] bytes.
    pub fn parse(body: &[u8]) -> Result<RndvDesc> {
        exact(body, field::DESC_END)?;
        reserved(body, field::DESC_RESERVED)?;
        Ok(RndvDesc {
            total_len: get64(body, field::DESC_TOTAL),
            key: get64(body, field::DESC_KEY),
            offset: get64(body, field::DESC_OFFSET),
            token: get32(body, field::DESC_TOKEN),
        })
    }

    /// Encodes the descriptor.
    pub fn to_bytes(&self) -> [u8; RndvDesc::LEN] {
        let mut b = [0u8; RndvDesc::LEN];
        set64(&mut b, field::DESC_TOTAL, self.total_len);
        set64(&mut b, field::DESC_KEY, self.key);
        set64(&mut b, field::DESC_OFFSET, self.offset);
        set32(&mut b, field::DESC_TOKEN, self.token);
        b
    }
}

impl<'a> Eager<'a> {
    /// Bytes of an eager message's header (opcode included): what
    /// [`emit_header`](Self::emit_header) writes before the body.
    pub const HEADER_LEN: usize = field::EAGER_END;

    /// Parses `msg` as an eager message, not checking its opcode (for a
    /// caller that did). Every other check applies.
    #[inline(always)]
    pub fn parse(msg: &'a [u8]) -> Result<Eager<'a>> {
        need(msg, field::EAGER_END)?;
        reserved(msg, field::RESERVED_1_4)?;
        Ok(Eager { context: get32(msg, field::CONTEXT), tag: get64(msg, field::TAG), body: &msg[field::EAGER_END..] })
    }

    /// Writes the header (opcode included) into `buf` and returns its
    /// length: what [`OpRepr::emit_header`](super::OpRepr::emit_header)
    /// does for an eager message, without the dispatch. Panics if `buf` is
    /// shorter than the header.
    #[inline]
    pub fn emit_header(&self, buf: &mut [u8]) -> usize {
        super::emit_header_of(buf, super::OpCode::Eager, Self::HEADER_LEN, |b| self.emit(b))
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        zero(b, field::RESERVED_1_4);
        set32(b, field::CONTEXT, self.context);
        set64(b, field::TAG, self.tag);
    }
}

impl RndvRts {
    pub(super) const HEADER_LEN: usize = field::RTS_END;

    #[inline(always)]
    pub(super) fn parse(msg: &[u8]) -> Result<RndvRts> {
        exact(msg, field::RTS_END)?;
        reserved(msg, field::RESERVED_1_4)?;
        reserved(msg, field::RTS_RESERVED)?;
        Ok(RndvRts {
            context: get32(msg, field::CONTEXT),
            tag: get64(msg, field::TAG),
            total_len: get64(msg, field::TOTAL_LEN),
            sender_req: get32(msg, field::SENDER_REQ),
            key: get64(msg, field::KEY),
            offset: get64(msg, field::OFFSET),
        })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        set32(b, field::CONTEXT, self.context);
        set64(b, field::TAG, self.tag);
        zero(b, field::RESERVED_1_4);
        set64(b, field::TOTAL_LEN, self.total_len);
        set32(b, field::SENDER_REQ, self.sender_req);
        zero(b, field::RTS_RESERVED);
        set64(b, field::KEY, self.key);
        set64(b, field::OFFSET, self.offset);
    }
}

impl RndvDone {
    pub(super) const HEADER_LEN: usize = field::DONE_END;

    #[inline(always)]
    pub(super) fn parse(msg: &[u8]) -> Result<RndvDone> {
        exact(msg, field::DONE_END)?;
        reserved(msg, field::DONE_RESERVED)?;
        Ok(RndvDone { sender_req: get32(msg, field::DONE_REQ), status: Status::from_u8(msg[field::STATUS])? })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        b[field::STATUS] = self.status as u8;
        zero(b, field::DONE_RESERVED);
        set32(b, field::DONE_REQ, self.sender_req);
    }
}

impl fmt::Display for Eager<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "eager ctx={} tag={:#x} len={}", self.context, self.tag, self.body.len())
    }
}

impl fmt::Display for RndvRts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rndv-rts ctx={} tag={:#x} total={} sreq={} key={:#x} off={}",
            self.context, self.tag, self.total_len, self.sender_req, self.key, self.offset
        )
    }
}

impl fmt::Display for RndvDone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rndv-done sreq={} {}", self.sender_req, self.status)
    }
}
