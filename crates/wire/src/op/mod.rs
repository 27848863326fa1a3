//! Operation views: the header at the start of every reliable message.
//!
//! Owns: the byte layout of each operation memwire carries (DESIGN §2), one
//! file per family, each with its fields in a private `mod field`; the
//! [`OpCode`] byte; [`OpRepr`], the validated representation the endpoint
//! builds and matches on; [`Message`], a checked view over a whole message;
//! and a tcpdump-like `Display` for traces.
//!
//! Must not: look at or build the packet header (that is [`crate::header`]),
//! segment (the reliability layer delivers a message whole and in order and
//! never looks inside), check regions or bounds at the target (the endpoint
//! does), allocate, or panic on any input.
//!
//! # Layout
//!
//! ```text
//! offset size field
//!  0      1   opcode     OpCode
//!  1      1   sub-code   per op: status, atomic op, signal op, block size, flags; else zero
//!  2      2   per op: handler, register or segment count; else zero
//!  4      4   req        request id chosen by the initiator (context / amount in a few ops)
//!  8    ...   per-op fields, u64s naturally aligned, then the body (user data)
//! ```
//! All integers are little-endian. Reserved bytes must be zero, so an
//! accepted message re-emits to the very same bytes. The per-file docs give
//! each op's exact layout. `req` is 0 when the initiator wants no reply.
//!
//! # Zero copy
//!
//! [`OpRepr::emit_header`] writes only the operation header; the header never
//! depends on the body, so the caller may build the repr with an empty `body`
//! and hand the real body to the reliability layer as a second slice (a 1 MiB
//! put is never concatenated). [`OpRepr::parse`] takes the whole message and
//! returns the repr with `body` borrowing the bytes after the header.
//! Emitting then parsing `header ++ body` gives back an equal repr.
//!
//! Raw datagrams (`send_raw`) have no operation header: they travel as
//! [`PacketType::Raw`](crate::PacketType::Raw) packets whose payload is the
//! user's bytes, unreliable and unordered.

mod am;
mod atomic;
mod bytes;
mod fifo;
mod iov;
mod masked;
mod mcast;
mod register;
mod rma;
mod signal;
mod status;
mod strided;
mod tagged;
#[cfg(test)]
mod tests;
mod unparsed;

use core::fmt;

pub use am::{AmArgs, AmReply, AmReplyView, AmRequest, AmRequestView, AM_MAX_ARGS, AM_MAX_HEADER_LEN};
pub use atomic::{AtomicOp, AtomicRequest, AtomicResponse, AtomicWidth};
pub use fifo::{Credit, FifoPush};
pub use iov::{iov_header_len, IovIter, IovSegments, PutIov, IOV_MAX};
pub use masked::{MaskedBlock, PutMasked};
pub use mcast::{mcast_feedback_len, McastFeedback, McastRanges, MCAST_RANGES_MAX};
pub use register::RegisterPut;
pub use rma::{GetRequest, GetResponse, Put, PutInline, INLINE_MAX};
pub use signal::{PutSignal, SignalOp};
pub use status::{OpStatus, Status};
pub use strided::{strided_extent, GetStridedRequest, PutStrided};
pub use tagged::{Eager, RndvDesc, RndvDone, RndvRts};
pub use unparsed::Unparsed;

use crate::{Error, Result};

/// Writes one operation's header into `buf[..len]`: its opcode, then its
/// fields by `emit`; returns `len`. The direct `emit_header` of the ops the
/// same-host fast paths build (no `OpRepr` dispatch).
#[inline(always)]
fn emit_header_of(buf: &mut [u8], opcode: OpCode, len: usize, emit: impl FnOnce(&mut [u8])) -> usize {
    let b = &mut buf[..len];
    b[0] = opcode as u8;
    emit(b);
    len
}

/// The longest operation header: a [`PutIov`] with [`IOV_MAX`] segments.
/// A buffer this long fits any [`OpRepr::emit_header`].
pub const MAX_HEADER_LEN: usize = iov_header_len(IOV_MAX);

/// The first byte of every message: which operation it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OpCode {
    /// [`Put`].
    Put = 1,
    /// [`PutInline`].
    PutInline = 2,
    /// [`GetRequest`].
    GetRequest = 3,
    /// [`GetResponse`].
    GetResponse = 4,
    /// [`AtomicRequest`].
    AtomicRequest = 5,
    /// [`AtomicResponse`].
    AtomicResponse = 6,
    /// [`PutSignal`].
    PutSignal = 7,
    /// [`PutStrided`].
    PutStrided = 8,
    /// [`GetStridedRequest`].
    GetStridedRequest = 9,
    /// [`PutIov`].
    PutIov = 10,
    /// [`PutMasked`].
    PutMasked = 11,
    /// [`RegisterPut`].
    RegisterPut = 12,
    /// [`OpStatus`].
    OpStatus = 13,
    /// [`AmRequest`].
    AmRequest = 14,
    /// [`AmReply`].
    AmReply = 15,
    /// [`Eager`].
    Eager = 16,
    /// [`RndvRts`].
    RndvRts = 17,
    /// [`RndvDone`].
    RndvDone = 18,
    /// [`FifoPush`].
    FifoPush = 19,
    /// [`Credit`].
    Credit = 20,
    /// [`McastFeedback`].
    McastFeedback = 21,
}

impl OpCode {
    /// Every opcode, in numeric order.
    pub const ALL: [OpCode; 21] = [
        OpCode::Put,
        OpCode::PutInline,
        OpCode::GetRequest,
        OpCode::GetResponse,
        OpCode::AtomicRequest,
        OpCode::AtomicResponse,
        OpCode::PutSignal,
        OpCode::PutStrided,
        OpCode::GetStridedRequest,
        OpCode::PutIov,
        OpCode::PutMasked,
        OpCode::RegisterPut,
        OpCode::OpStatus,
        OpCode::AmRequest,
        OpCode::AmReply,
        OpCode::Eager,
        OpCode::RndvRts,
        OpCode::RndvDone,
        OpCode::FifoPush,
        OpCode::Credit,
        OpCode::McastFeedback,
    ];

    /// Decodes the opcode byte; unknown values are [`Error::UnknownType`].
    pub fn from_u8(value: u8) -> Result<OpCode> {
        match value {
            1..=21 => Ok(OpCode::ALL[usize::from(value) - 1]),
            _ => Err(Error::UnknownType),
        }
    }

    /// The fixed part of this operation's header: the shortest message with
    /// this opcode (variable parts, such as iov segments or AM args, follow it).
    pub const fn min_header_len(self) -> usize {
        match self {
            OpCode::Put => Put::HEADER_LEN,
            OpCode::PutInline => PutInline::HEADER_LEN,
            OpCode::GetRequest => GetRequest::HEADER_LEN,
            OpCode::GetResponse => GetResponse::HEADER_LEN,
            OpCode::AtomicRequest => AtomicRequest::HEADER_LEN,
            OpCode::AtomicResponse => AtomicResponse::HEADER_LEN,
            OpCode::PutSignal => PutSignal::HEADER_LEN,
            OpCode::PutStrided => PutStrided::HEADER_LEN,
            OpCode::GetStridedRequest => GetStridedRequest::HEADER_LEN,
            OpCode::PutIov => iov_header_len(0),
            OpCode::PutMasked => PutMasked::HEADER_LEN,
            OpCode::RegisterPut => RegisterPut::HEADER_LEN,
            OpCode::OpStatus => OpStatus::HEADER_LEN,
            OpCode::AmRequest => AmRequest::MIN_HEADER_LEN,
            OpCode::AmReply => AmReply::MIN_HEADER_LEN,
            OpCode::Eager => Eager::HEADER_LEN,
            OpCode::RndvRts => RndvRts::HEADER_LEN,
            OpCode::RndvDone => RndvDone::HEADER_LEN,
            OpCode::FifoPush => FifoPush::HEADER_LEN,
            OpCode::Credit => Credit::HEADER_LEN,
            OpCode::McastFeedback => McastFeedback::MIN_HEADER_LEN,
        }
    }

    /// Short lower-case name used in traces.
    pub const fn name(self) -> &'static str {
        match self {
            OpCode::Put => "put",
            OpCode::PutInline => "put-inline",
            OpCode::GetRequest => "get",
            OpCode::GetResponse => "get-resp",
            OpCode::AtomicRequest => "atomic",
            OpCode::AtomicResponse => "atomic-resp",
            OpCode::PutSignal => "put-signal",
            OpCode::PutStrided => "put-strided",
            OpCode::GetStridedRequest => "get-strided",
            OpCode::PutIov => "put-iov",
            OpCode::PutMasked => "put-masked",
            OpCode::RegisterPut => "register-put",
            OpCode::OpStatus => "status",
            OpCode::AmRequest => "am",
            OpCode::AmReply => "am-reply",
            OpCode::Eager => "eager",
            OpCode::RndvRts => "rndv-rts",
            OpCode::RndvDone => "rndv-done",
            OpCode::FifoPush => "fifo-push",
            OpCode::Credit => "credit",
            OpCode::McastFeedback => "mcast-feedback",
        }
    }
}

impl fmt::Display for OpCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A validated operation: one variant per [`OpCode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpRepr<'a> {
    /// Remote write.
    Put(Put<'a>),
    /// Remote write of at most [`INLINE_MAX`] bytes.
    PutInline(PutInline<'a>),
    /// Remote read request.
    GetRequest(GetRequest),
    /// Data (or error) answering a get.
    GetResponse(GetResponse<'a>),
    /// Remote atomic.
    AtomicRequest(AtomicRequest),
    /// Old value (or error) answering a fetching atomic.
    AtomicResponse(AtomicResponse),
    /// Remote write followed by a signal-word update.
    PutSignal(PutSignal<'a>),
    /// Strided remote write.
    PutStrided(PutStrided<'a>),
    /// Strided remote read request.
    GetStridedRequest(GetStridedRequest),
    /// Vectored remote write.
    PutIov(PutIov<'a>),
    /// Selected-word write of a 64- or 256-byte block.
    PutMasked(PutMasked<'a>),
    /// Write through a target-side address register.
    RegisterPut(RegisterPut<'a>),
    /// Generic completion or error reply.
    OpStatus(OpStatus),
    /// Active-message request.
    AmRequest(AmRequest<'a>),
    /// Active-message reply.
    AmReply(AmReply<'a>),
    /// Tagged message, data inline.
    Eager(Eager<'a>),
    /// Tagged message, rendezvous ready-to-send.
    RndvRts(RndvRts),
    /// Rendezvous completion from the receiver.
    RndvDone(RndvDone),
    /// Remote FIFO push.
    FifoPush(FifoPush<'a>),
    /// Flow-control credit grant.
    Credit(Credit),
    /// A multicast member's progress, Nack or completion report to the root.
    McastFeedback(McastFeedback<'a>),
}

impl<'a> OpRepr<'a> {
    /// Decodes and validates a whole message (operation header, then body).
    /// Never panics and never allocates; invalid input gives a typed error.
    pub fn parse(msg: &'a [u8]) -> Result<OpRepr<'a>> {
        let code = OpCode::from_u8(*msg.first().ok_or(Error::Truncated)?)?;
        match code {
            OpCode::Put => Put::parse(msg).map(OpRepr::Put),
            OpCode::PutInline => PutInline::parse(msg).map(OpRepr::PutInline),
            OpCode::GetRequest => GetRequest::parse(msg).map(OpRepr::GetRequest),
            OpCode::GetResponse => GetResponse::parse(msg).map(OpRepr::GetResponse),
            OpCode::AtomicRequest => AtomicRequest::parse(msg).map(OpRepr::AtomicRequest),
            OpCode::AtomicResponse => AtomicResponse::parse(msg).map(OpRepr::AtomicResponse),
            OpCode::PutSignal => PutSignal::parse(msg).map(OpRepr::PutSignal),
            OpCode::PutStrided => PutStrided::parse(msg).map(OpRepr::PutStrided),
            OpCode::GetStridedRequest => GetStridedRequest::parse(msg).map(OpRepr::GetStridedRequest),
            OpCode::PutIov => PutIov::parse(msg).map(OpRepr::PutIov),
            OpCode::PutMasked => PutMasked::parse(msg).map(OpRepr::PutMasked),
            OpCode::RegisterPut => RegisterPut::parse(msg).map(OpRepr::RegisterPut),
            OpCode::OpStatus => OpStatus::parse(msg).map(OpRepr::OpStatus),
            OpCode::AmRequest => AmRequest::parse(msg).map(OpRepr::AmRequest),
            OpCode::AmReply => AmReply::parse(msg).map(OpRepr::AmReply),
            OpCode::Eager => Eager::parse(msg).map(OpRepr::Eager),
            OpCode::RndvRts => RndvRts::parse(msg).map(OpRepr::RndvRts),
            OpCode::RndvDone => RndvDone::parse(msg).map(OpRepr::RndvDone),
            OpCode::FifoPush => FifoPush::parse(msg).map(OpRepr::FifoPush),
            OpCode::Credit => Credit::parse(msg).map(OpRepr::Credit),
            OpCode::McastFeedback => McastFeedback::parse(msg).map(OpRepr::McastFeedback),
        }
    }

    /// Which operation this is.
    pub fn opcode(&self) -> OpCode {
        match self {
            OpRepr::Put(_) => OpCode::Put,
            OpRepr::PutInline(_) => OpCode::PutInline,
            OpRepr::GetRequest(_) => OpCode::GetRequest,
            OpRepr::GetResponse(_) => OpCode::GetResponse,
            OpRepr::AtomicRequest(_) => OpCode::AtomicRequest,
            OpRepr::AtomicResponse(_) => OpCode::AtomicResponse,
            OpRepr::PutSignal(_) => OpCode::PutSignal,
            OpRepr::PutStrided(_) => OpCode::PutStrided,
            OpRepr::GetStridedRequest(_) => OpCode::GetStridedRequest,
            OpRepr::PutIov(_) => OpCode::PutIov,
            OpRepr::PutMasked(_) => OpCode::PutMasked,
            OpRepr::RegisterPut(_) => OpCode::RegisterPut,
            OpRepr::OpStatus(_) => OpCode::OpStatus,
            OpRepr::AmRequest(_) => OpCode::AmRequest,
            OpRepr::AmReply(_) => OpCode::AmReply,
            OpRepr::Eager(_) => OpCode::Eager,
            OpRepr::RndvRts(_) => OpCode::RndvRts,
            OpRepr::RndvDone(_) => OpCode::RndvDone,
            OpRepr::FifoPush(_) => OpCode::FifoPush,
            OpRepr::Credit(_) => OpCode::Credit,
            OpRepr::McastFeedback(_) => OpCode::McastFeedback,
        }
    }

    /// Length of the operation header [`emit_header`](Self::emit_header) writes
    /// (at most [`MAX_HEADER_LEN`]).
    pub fn header_len(&self) -> usize {
        match self {
            OpRepr::PutIov(op) => op.header_len(),
            OpRepr::AmRequest(op) => op.header_len(),
            OpRepr::AmReply(op) => op.header_len(),
            OpRepr::McastFeedback(op) => op.header_len(),
            _ => self.opcode().min_header_len(),
        }
    }

    /// Length of the whole message: header plus body.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.body().len()
    }

    /// The body (user data); empty for operations that have none.
    pub fn body(&self) -> &'a [u8] {
        match *self {
            OpRepr::Put(op) => op.body,
            OpRepr::PutInline(op) => op.body,
            OpRepr::GetResponse(op) => op.body,
            OpRepr::PutSignal(op) => op.body,
            OpRepr::PutStrided(op) => op.body,
            OpRepr::PutIov(op) => op.body,
            OpRepr::PutMasked(op) => op.body,
            OpRepr::RegisterPut(op) => op.body,
            OpRepr::AmRequest(op) => op.body,
            OpRepr::AmReply(op) => op.body,
            OpRepr::Eager(op) => op.body,
            OpRepr::FifoPush(op) => op.body,
            OpRepr::GetRequest(_)
            | OpRepr::AtomicRequest(_)
            | OpRepr::AtomicResponse(_)
            | OpRepr::GetStridedRequest(_)
            | OpRepr::OpStatus(_)
            | OpRepr::RndvRts(_)
            | OpRepr::RndvDone(_)
            | OpRepr::Credit(_)
            | OpRepr::McastFeedback(_) => &[],
        }
    }

    /// The request id the operation carries (the sender's for rendezvous),
    /// `None` for [`Eager`], [`Credit`] and [`McastFeedback`].
    pub fn req(&self) -> Option<u32> {
        Some(match self {
            OpRepr::Put(op) => op.req,
            OpRepr::PutInline(op) => op.req,
            OpRepr::GetRequest(op) => op.req,
            OpRepr::GetResponse(op) => op.req,
            OpRepr::AtomicRequest(op) => op.req,
            OpRepr::AtomicResponse(op) => op.req,
            OpRepr::PutSignal(op) => op.req,
            OpRepr::PutStrided(op) => op.req,
            OpRepr::GetStridedRequest(op) => op.req,
            OpRepr::PutIov(op) => op.req,
            OpRepr::PutMasked(op) => op.req,
            OpRepr::RegisterPut(op) => op.req,
            OpRepr::OpStatus(op) => op.req,
            OpRepr::AmRequest(op) => op.req,
            OpRepr::AmReply(op) => op.req,
            OpRepr::RndvRts(op) => op.sender_req,
            OpRepr::RndvDone(op) => op.sender_req,
            OpRepr::FifoPush(op) => op.req,
            OpRepr::Eager(_) | OpRepr::Credit(_) | OpRepr::McastFeedback(_) => return None,
        })
    }

    /// Writes the operation header (not the body) into the front of `buf` and
    /// returns its length, [`header_len`](Self::header_len). The header does
    /// not depend on `body`, which the caller sends as a separate slice.
    ///
    /// A repr the parser would reject (e.g. a [`PutInline`] body over
    /// [`INLINE_MAX`], a [`PutIov`] with more than [`IOV_MAX`] segments)
    /// yields bytes the peer rejects; it does not corrupt anything here.
    ///
    /// # Panics
    /// If `buf` is shorter than `header_len()`; [`MAX_HEADER_LEN`] always fits.
    pub fn emit_header(&self, buf: &mut [u8]) -> usize {
        let len = self.header_len();
        let b = &mut buf[..len];
        // Each op writes every byte of its header, reserved ones as zero.
        b[0] = self.opcode() as u8;
        match self {
            OpRepr::Put(op) => op.emit(b),
            OpRepr::PutInline(op) => op.emit(b),
            OpRepr::GetRequest(op) => op.emit(b),
            OpRepr::GetResponse(op) => op.emit(b),
            OpRepr::AtomicRequest(op) => op.emit(b),
            OpRepr::AtomicResponse(op) => op.emit(b),
            OpRepr::PutSignal(op) => op.emit(b),
            OpRepr::PutStrided(op) => op.emit(b),
            OpRepr::GetStridedRequest(op) => op.emit(b),
            OpRepr::PutIov(op) => op.emit(b),
            OpRepr::PutMasked(op) => op.emit(b),
            OpRepr::RegisterPut(op) => op.emit(b),
            OpRepr::OpStatus(op) => op.emit(b),
            OpRepr::AmRequest(op) => op.emit(b),
            OpRepr::AmReply(op) => op.emit(b),
            OpRepr::Eager(op) => op.emit(b),
            OpRepr::RndvRts(op) => op.emit(b),
            OpRepr::RndvDone(op) => op.emit(b),
            OpRepr::FifoPush(op) => op.emit(b),
            OpRepr::Credit(op) => op.emit(b),
            OpRepr::McastFeedback(op) => op.emit(b),
        }
        len
    }

    /// Writes the whole message, header then body, into the front of `buf`
    /// and returns its length, [`buffer_len`](Self::buffer_len). For small
    /// messages and tests; the data path uses [`emit_header`](Self::emit_header).
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let header = self.emit_header(buf);
        let body = self.body();
        buf[header..header + body.len()].copy_from_slice(body);
        header + body.len()
    }
}

impl fmt::Display for OpRepr<'_> {
    /// A tcpdump-like one-line summary: op name, key fields, body length.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpRepr::Put(op) => op.fmt(f),
            OpRepr::PutInline(op) => op.fmt(f),
            OpRepr::GetRequest(op) => op.fmt(f),
            OpRepr::GetResponse(op) => op.fmt(f),
            OpRepr::AtomicRequest(op) => op.fmt(f),
            OpRepr::AtomicResponse(op) => op.fmt(f),
            OpRepr::PutSignal(op) => op.fmt(f),
            OpRepr::PutStrided(op) => op.fmt(f),
            OpRepr::GetStridedRequest(op) => op.fmt(f),
            OpRepr::PutIov(op) => op.fmt(f),
            OpRepr::PutMasked(op) => op.fmt(f),
            OpRepr::RegisterPut(op) => op.fmt(f),
            OpRepr::OpStatus(op) => op.fmt(f),
            OpRepr::AmRequest(op) => op.fmt(f),
            OpRepr::AmReply(op) => op.fmt(f),
            OpRepr::Eager(op) => op.fmt(f),
            OpRepr::RndvRts(op) => op.fmt(f),
            OpRepr::RndvDone(op) => op.fmt(f),
            OpRepr::FifoPush(op) => op.fmt(f),
            OpRepr::Credit(op) => op.fmt(f),
            OpRepr::McastFeedback(op) => op.fmt(f),
        }
    }
}

/// A checked view over a whole message: the opcode is known and the fixed
/// part of its header is present. Lets a tracer or dispatcher look at the
/// operation kind without decoding it; [`Message::repr`] decodes fully.
#[derive(Debug, Clone)]
pub struct Message<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Message<T> {
    /// Wraps a buffer without checking it; [`opcode`](Self::opcode) may then
    /// fail and [`sub_code`](Self::sub_code) panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Message<T> {
        Message { buffer }
    }

    /// Wraps a buffer after checking that its opcode is known and the fixed
    /// part of that operation's header is present.
    pub fn new_checked(buffer: T) -> Result<Message<T>> {
        let bytes = buffer.as_ref();
        let code = OpCode::from_u8(*bytes.first().ok_or(Error::Truncated)?)?;
        if bytes.len() < code.min_header_len() {
            return Err(Error::Truncated);
        }
        Ok(Message { buffer })
    }

    /// The operation code.
    pub fn opcode(&self) -> Result<OpCode> {
        OpCode::from_u8(*self.buffer.as_ref().first().ok_or(Error::Truncated)?)
    }

    /// Byte 1: the op-specific sub-code (status, atomic op, flags, …).
    pub fn sub_code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// The whole message.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Decodes and validates the whole message.
    pub fn repr(&self) -> Result<OpRepr<'_>> {
        OpRepr::parse(self.buffer.as_ref())
    }

    /// Consumes the view, returning the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}
