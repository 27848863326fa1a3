//! Active messages: a request that runs a registered handler at the target,
//! and the handler's reply.
//!
//! Owns: [`AmArgs`] (up to [`AM_MAX_ARGS`] u64 arguments, a fixed-size value
//! type), the layouts of [`AmRequest`] and [`AmReply`] (seed 003, PPRAM-Link's
//! active messages; GASNet-style short/medium messages), and the in-place
//! forms a same-host round trip uses ([`AmRequestView`], [`AmReplyView`],
//! [`AmRequest::emit_plain_header`], [`AmReply::emit_ok_header`]).
//!
//! Why in-place forms: an [`AmArgs`] is 72 bytes written field by field and
//! then moved whole, through a `Result` or into a struct, several times
//! between a record's arrival and the handler's reply. Each move reads
//! back, in wide loads, what narrow stores wrote just before, which the CPU
//! cannot forward to the loads: they wait for the stores to reach the cache
//! (the likely reason, not confirmed with performance counters). On a
//! same-host 8-byte active message that was on the critical path, on both
//! sides (measurements: docs/perf-notes.md, "active-message views"): the
//! views leave the arguments in the message and decode them straight into
//! their destination.
//!
//! Must not: know which handler ids are reserved or what a handler does
//! (mw-core's), or accept more than [`AM_MAX_ARGS`] arguments or unknown flag
//! bits.
//!
//! ```text
//! AmRequest (8 + 8 × nargs bytes, then the body: the payload)
//! offset size       field
//!  0      1         opcode   OpCode::AmRequest
//!  1      1         flags    bits 0-3 nargs (0..=8), bit 6 RNDV, bit 7 WANT_REPLY, bits 4-5 zero
//!  2      2         handler  handler id at the target
//!  4      4         req      the reply carries it
//!  8      8 × nargs args
//!  ...    ...       body     the payload, or with RNDV a RndvDesc (32 bytes)
//!
//! AmReply (8 + 8 × nargs bytes, then the body)
//!  0      1         opcode   OpCode::AmReply
//!  1      1         nargs    0..=8
//!  2      1         status   Status (NoHandler when the id is unknown)
//!  3      1         flags    bit 0 RNDV, bits 1-7 zero
//!  4      4         req      the AmRequest this answers
//!  8      8 × nargs args
//!  ...    ...       body     the payload, or with RNDV a RndvDesc (32 bytes)
//! ```
//!
//! With RNDV set the payload is too large to travel inline: the body is a
//! [`RndvDesc`](super::RndvDesc) naming a region at the sender that holds it,
//! the receiver GETs it and answers [`RndvDone`](super::RndvDone) carrying
//! the descriptor's token (seed 002, SR8000's receiver-driven GET, applied to AM payloads).

use core::fmt;

use super::bytes::{get16, get32, get64, need, set16, set32, set64};
use super::Status;
use crate::{Error, Result};

/// Most u64 arguments an active message carries.
pub const AM_MAX_ARGS: usize = 8;
/// The longest header of an [`AmRequest`] or [`AmReply`]: the fixed fields
/// and [`AM_MAX_ARGS`] arguments (a stack buffer of this size always fits).
pub const AM_MAX_HEADER_LEN: usize = field::ARGS + AM_MAX_ARGS * field::ARG_SIZE;

mod field {
    use core::ops::Range;
    pub const FLAGS: usize = 1;
    pub const HANDLER: Range<usize> = 2..4;
    pub const NARGS: usize = 1;
    pub const STATUS: usize = 2;
    pub const REPLY_FLAGS: usize = 3;
    pub const REQ: Range<usize> = 4..8;
    pub const ARGS: usize = 8;
    pub const ARG_SIZE: usize = 8;
}

const NARGS_MASK: u8 = 0x0f;
const FLAG_WANT_REPLY: u8 = 1 << 7;
const FLAG_RNDV: u8 = 1 << 6;
const REPLY_FLAG_RNDV: u8 = 1;

/// Zero to [`AM_MAX_ARGS`] u64 arguments, stored inline (no allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AmArgs {
    // Invariant: len <= AM_MAX_ARGS and values[len..] are zero, so the
    // derived equality compares exactly the used arguments.
    len: u8,
    values: [u64; AM_MAX_ARGS],
}

impl AmArgs {
    /// No arguments.
    pub const EMPTY: AmArgs = AmArgs { len: 0, values: [0; AM_MAX_ARGS] };

    /// The arguments in `args`, or `None` if there are more than [`AM_MAX_ARGS`].
    pub fn from_slice(args: &[u64]) -> Option<AmArgs> {
        if args.len() > AM_MAX_ARGS {
            return None;
        }
        let mut out = AmArgs::EMPTY;
        out.values[..args.len()].copy_from_slice(args);
        out.len = args.len() as u8;
        Some(out)
    }

    /// Replaces the arguments with `args` where they are (no [`AmArgs`]
    /// built and moved in: see the module docs); `false`, and nothing
    /// changed, if there are more than [`AM_MAX_ARGS`].
    #[inline]
    pub fn assign(&mut self, args: &[u64]) -> bool {
        if args.len() > AM_MAX_ARGS {
            return false;
        }
        self.values[..args.len()].copy_from_slice(args);
        self.values[args.len()..].fill(0);
        self.len = args.len() as u8;
        true
    }

    /// Appends one argument; gives it back if all [`AM_MAX_ARGS`] are in use.
    pub fn push(&mut self, value: u64) -> core::result::Result<(), u64> {
        let len = usize::from(self.len);
        if len == AM_MAX_ARGS {
            return Err(value);
        }
        self.values[len] = value;
        self.len += 1;
        Ok(())
    }

    /// The arguments.
    pub fn as_slice(&self) -> &[u64] {
        &self.values[..usize::from(self.len)]
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether there are no arguments.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn wire_len(&self) -> usize {
        field::ARGS + self.len() * field::ARG_SIZE
    }

    fn parse(msg: &[u8], count: u8) -> Result<AmArgs> {
        if usize::from(count) > AM_MAX_ARGS {
            return Err(Error::BadLength);
        }
        let mut args = AmArgs { len: count, values: [0; AM_MAX_ARGS] };
        need(msg, args.wire_len())?;
        for (i, value) in args.values[..usize::from(count)].iter_mut().enumerate() {
            let at = field::ARGS + i * field::ARG_SIZE;
            *value = get64(msg, at..at + field::ARG_SIZE);
        }
        Ok(args)
    }

    fn emit(&self, b: &mut [u8]) {
        for (i, &value) in self.as_slice().iter().enumerate() {
            let at = field::ARGS + i * field::ARG_SIZE;
            set64(b, at..at + field::ARG_SIZE, value);
        }
    }
}

/// Runs handler `handler` at the target with `args` and `body`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmRequest<'a> {
    /// Request id; the [`AmReply`] carries it.
    pub req: u32,
    /// Handler id at the target.
    pub handler: u16,
    /// Whether the initiator waits for an [`AmReply`].
    pub want_reply: bool,
    /// The body is a [`RndvDesc`](super::RndvDesc), not the payload.
    pub rndv: bool,
    /// Up to [`AM_MAX_ARGS`] u64 arguments.
    pub args: AmArgs,
    /// The payload (or its rendezvous descriptor).
    pub body: &'a [u8],
}

/// An [`AmRequest`] read in place: its fixed fields, with the arguments
/// and the body left in the message (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmRequestView<'a> {
    /// Request id; the [`AmReply`] carries it.
    pub req: u32,
    /// Handler id at the target.
    pub handler: u16,
    /// Whether the initiator waits for an [`AmReply`].
    pub want_reply: bool,
    /// The body is a [`RndvDesc`](super::RndvDesc), not the payload.
    pub rndv: bool,
    msg: &'a [u8],
    nargs: usize,
}

impl<'a> AmRequestView<'a> {
    /// Checks `msg` exactly as [`AmRequest::parse`] does (not its opcode)
    /// and reads its fixed fields.
    #[inline(always)]
    pub fn parse(msg: &'a [u8]) -> Result<AmRequestView<'a>> {
        need(msg, field::ARGS)?;
        let flags = msg[field::FLAGS];
        if flags & !(NARGS_MASK | FLAG_WANT_REPLY | FLAG_RNDV) != 0 {
            return Err(Error::Malformed);
        }
        let nargs = args_len(msg, flags & NARGS_MASK)?;
        Ok(AmRequestView {
            req: get32(msg, field::REQ),
            handler: get16(msg, field::HANDLER),
            want_reply: flags & FLAG_WANT_REPLY != 0,
            rndv: flags & FLAG_RNDV != 0,
            msg,
            nargs,
        })
    }

    /// Decodes the arguments into `out` and returns them (a prefix of it).
    #[inline(always)]
    pub fn args_into<'o>(&self, out: &'o mut [u64; AM_MAX_ARGS]) -> &'o [u64] {
        for (i, value) in out[..self.nargs].iter_mut().enumerate() {
            *value = arg_at(self.msg, i);
        }
        &out[..self.nargs]
    }

    /// The payload (or, with `rndv`, its rendezvous descriptor).
    #[inline(always)]
    pub fn body(&self) -> &'a [u8] {
        &self.msg[field::ARGS + self.nargs * field::ARG_SIZE..]
    }
}

/// An [`AmReply`] read in place (see [`AmRequestView`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmReplyView<'a> {
    /// The request this answers.
    pub req: u32,
    /// Outcome.
    pub status: Status,
    /// The body is a [`RndvDesc`](super::RndvDesc), not the payload.
    pub rndv: bool,
    msg: &'a [u8],
    nargs: usize,
}

impl<'a> AmReplyView<'a> {
    /// Checks `msg` exactly as [`AmReply::parse`] does (not its opcode)
    /// and reads its fixed fields.
    #[inline(always)]
    pub fn parse(msg: &'a [u8]) -> Result<AmReplyView<'a>> {
        need(msg, field::ARGS)?;
        let flags = msg[field::REPLY_FLAGS];
        if flags & !REPLY_FLAG_RNDV != 0 {
            return Err(Error::Malformed);
        }
        let status = Status::from_u8(msg[field::STATUS])?;
        let nargs = args_len(msg, msg[field::NARGS])?;
        Ok(AmReplyView { req: get32(msg, field::REQ), status, rndv: flags & REPLY_FLAG_RNDV != 0, msg, nargs })
    }

    /// Number of arguments.
    #[inline(always)]
    pub fn args_len(&self) -> usize {
        self.nargs
    }

    /// Argument `i` (below [`args_len`](Self::args_len)).
    #[inline(always)]
    pub fn arg(&self, i: usize) -> u64 {
        assert!(i < self.nargs, "argument {i} of {}", self.nargs);
        arg_at(self.msg, i)
    }

    /// The payload (or, with `rndv`, its rendezvous descriptor).
    #[inline(always)]
    pub fn body(&self) -> &'a [u8] {
        &self.msg[field::ARGS + self.nargs * field::ARG_SIZE..]
    }
}

/// How many arguments `msg` carries by its count field `count`, checked as
/// `AmArgs::parse` checks it.
#[inline(always)]
fn args_len(msg: &[u8], count: u8) -> Result<usize> {
    let nargs = usize::from(count);
    if nargs > AM_MAX_ARGS {
        return Err(Error::BadLength);
    }
    need(msg, field::ARGS + nargs * field::ARG_SIZE)?;
    Ok(nargs)
}

/// Argument `i` of a message whose length was checked for it.
#[inline(always)]
fn arg_at(msg: &[u8], i: usize) -> u64 {
    let at = field::ARGS + i * field::ARG_SIZE;
    get64(msg, at..at + field::ARG_SIZE)
}

/// A handler's reply to an [`AmRequest`] (or the target's error status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmReply<'a> {
    /// The request this answers.
    pub req: u32,
    /// Outcome ([`Status::NoHandler`] if the handler id is unknown).
    pub status: Status,
    /// The body is a [`RndvDesc`](super::RndvDesc), not the payload.
    pub rndv: bool,
    /// Up to [`AM_MAX_ARGS`] u64 results.
    pub args: AmArgs,
    /// The reply payload (or its rendezvous descriptor).
    pub body: &'a [u8],
}

impl<'a> AmRequest<'a> {
    pub(super) const MIN_HEADER_LEN: usize = field::ARGS;

    /// Bytes of the header [`emit_plain_header`](Self::emit_plain_header)
    /// writes for `nargs` arguments (at most [`AM_MAX_ARGS`]), for a caller
    /// that must size the message before writing it.
    #[inline]
    pub const fn plain_header_len(nargs: usize) -> usize {
        field::ARGS + nargs * field::ARG_SIZE
    }

    pub(super) fn header_len(&self) -> usize {
        self.args.wire_len()
    }

    /// Parses `msg` as an active-message request, not checking its opcode
    /// (for a caller that did: [`OpRepr::parse`](super::OpRepr::parse)
    /// dispatches on it). Every other check applies.
    #[inline(always)]
    pub fn parse(msg: &'a [u8]) -> Result<AmRequest<'a>> {
        need(msg, field::ARGS)?;
        let flags = msg[field::FLAGS];
        if flags & !(NARGS_MASK | FLAG_WANT_REPLY | FLAG_RNDV) != 0 {
            return Err(Error::Malformed);
        }
        let args = AmArgs::parse(msg, flags & NARGS_MASK)?;
        Ok(AmRequest {
            req: get32(msg, field::REQ),
            handler: get16(msg, field::HANDLER),
            want_reply: flags & FLAG_WANT_REPLY != 0,
            rndv: flags & FLAG_RNDV != 0,
            args,
            body: &msg[args.wire_len()..],
        })
    }

    /// Writes the header (opcode included) into `buf` and returns its
    /// length: what [`OpRepr::emit_header`](super::OpRepr::emit_header) does
    /// for a request, without the dispatch. Panics if `buf` is shorter than
    /// [`AM_MAX_HEADER_LEN`] bytes.
    #[inline]
    pub fn emit_header(&self, buf: &mut [u8]) -> usize {
        super::emit_header_of(buf, super::OpCode::AmRequest, self.header_len(), |b| self.emit(b))
    }

    /// The header [`emit_header`](Self::emit_header) writes for an eager
    /// request (no rendezvous) with `args`, written from the slice (no
    /// [`AmArgs`] built first: see the module docs). `None`, and nothing
    /// written, for more than [`AM_MAX_ARGS`] arguments.
    #[inline]
    pub fn emit_plain_header(req: u32, handler: u16, want_reply: bool, args: &[u64], buf: &mut [u8]) -> Option<usize> {
        if args.len() > AM_MAX_ARGS {
            return None;
        }
        let len = field::ARGS + args.len() * field::ARG_SIZE;
        Some(super::emit_header_of(buf, super::OpCode::AmRequest, len, |b| {
            b[field::FLAGS] = args.len() as u8 | if want_reply { FLAG_WANT_REPLY } else { 0 };
            set16(b, field::HANDLER, handler);
            set32(b, field::REQ, req);
            for (i, &value) in args.iter().enumerate() {
                let at = field::ARGS + i * field::ARG_SIZE;
                set64(b, at..at + field::ARG_SIZE, value);
            }
        }))
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        let reply = if self.want_reply { FLAG_WANT_REPLY } else { 0 };
        let rndv = if self.rndv { FLAG_RNDV } else { 0 };
        b[field::FLAGS] = self.args.len | reply | rndv;
        set16(b, field::HANDLER, self.handler);
        set32(b, field::REQ, self.req);
        self.args.emit(b);
    }
}

impl<'a> AmReply<'a> {
    pub(super) const MIN_HEADER_LEN: usize = field::ARGS;

    /// Bytes of the header [`emit_ok_header`](Self::emit_ok_header) writes
    /// for `args`.
    #[inline]
    pub fn ok_header_len(args: &AmArgs) -> usize {
        args.wire_len()
    }

    pub(super) fn header_len(&self) -> usize {
        self.args.wire_len()
    }

    /// Parses `msg` as an active-message reply, not checking its opcode
    /// (for a caller that did). Every other check applies.
    #[inline(always)]
    pub fn parse(msg: &'a [u8]) -> Result<AmReply<'a>> {
        need(msg, field::ARGS)?;
        let flags = msg[field::REPLY_FLAGS];
        if flags & !REPLY_FLAG_RNDV != 0 {
            return Err(Error::Malformed);
        }
        let status = Status::from_u8(msg[field::STATUS])?;
        let args = AmArgs::parse(msg, msg[field::NARGS])?;
        Ok(AmReply {
            req: get32(msg, field::REQ),
            status,
            rndv: flags & REPLY_FLAG_RNDV != 0,
            args,
            body: &msg[args.wire_len()..],
        })
    }

    /// Writes the header (opcode included) into `buf` and returns its
    /// length, as [`AmRequest::emit_header`] does for a request.
    #[inline]
    pub fn emit_header(&self, buf: &mut [u8]) -> usize {
        super::emit_header_of(buf, super::OpCode::AmReply, self.header_len(), |b| self.emit(b))
    }

    /// The header [`emit_header`](Self::emit_header) writes for a
    /// successful inline reply to `req` carrying `args`, from `args` where
    /// they are (see the module docs).
    #[inline]
    pub fn emit_ok_header(req: u32, args: &AmArgs, buf: &mut [u8]) -> usize {
        super::emit_header_of(buf, super::OpCode::AmReply, args.wire_len(), |b| {
            b[field::NARGS] = args.len;
            b[field::STATUS] = Status::Ok as u8;
            b[field::REPLY_FLAGS] = 0;
            set32(b, field::REQ, req);
            args.emit(b);
        })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        b[field::NARGS] = self.args.len;
        b[field::STATUS] = self.status as u8;
        b[field::REPLY_FLAGS] = if self.rndv { REPLY_FLAG_RNDV } else { 0 };
        set32(b, field::REQ, self.req);
        self.args.emit(b);
    }
}

fn fmt_args(f: &mut fmt::Formatter<'_>, args: &AmArgs) -> fmt::Result {
    f.write_str(" args=[")?;
    for (i, value) in args.as_slice().iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{value:#x}")?;
    }
    f.write_str("]")
}

impl fmt::Display for AmRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "am req={} handler={}", self.req, self.handler)?;
        if self.want_reply {
            f.write_str(" want-reply")?;
        }
        if self.rndv {
            f.write_str(" rndv")?;
        }
        fmt_args(f, &self.args)?;
        write!(f, " len={}", self.body.len())
    }
}

impl fmt::Display for AmReply<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "am-reply req={} {}", self.req, self.status)?;
        if self.rndv {
            f.write_str(" rndv")?;
        }
        fmt_args(f, &self.args)?;
        write!(f, " len={}", self.body.len())
    }
}
