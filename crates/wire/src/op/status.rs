//! Completion status codes and the generic status reply.
//!
//! Owns: [`Status`], the one-byte result every response carries, and
//! [`OpStatus`], the reply to operations that have no data response (put
//! errors, FIFO push results, non-fetching atomics that failed, …).
//!
//! Must not: map statuses to user-visible errors (mw-core's `Error` and the C
//! API's one table do) or accept an unknown status byte.
//!
//! ```text
//! OpStatus (8 bytes, no body)
//! offset size field
//!  0      1   opcode  OpCode::OpStatus
//!  1      1   status  Status
//!  2      2   reserved, zero
//!  4      4   req     the request this answers
//! ```

use core::fmt;

use super::bytes::{exact, get32, reserved, set32, zero};
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const STATUS: usize = 1;
    pub const RESERVED: Range<usize> = 2..4;
    pub const REQ: Range<usize> = 4..8;
    pub const LEN: usize = 8;
}

/// Outcome of an operation at the target, carried in every response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    /// The operation was carried out.
    Ok = 0,
    /// The region key is not registered at the target.
    BadKey = 1,
    /// `offset + len` lies outside the region (or overflows).
    OutOfBounds = 2,
    /// The region does not grant the access the operation needs.
    NoPermission = 3,
    /// The address is not aligned as the operation requires (atomics, signals).
    Misaligned = 4,
    /// The target does not support this operation or variant.
    Unsupported = 5,
    /// No active-message handler is registered under the requested id.
    NoHandler = 6,
    /// The target had to cut the data short (e.g. a receive buffer too small).
    Truncated = 7,
    /// The target cannot take the operation now (full FIFO, no credit); retry later.
    WouldBlock = 8,
    /// An argument is invalid at the target (bad register, bad stride, …).
    BadArgument = 9,
    /// The receiver gave the message up before all of it arrived (its
    /// receive timed out or was dropped): it was not delivered.
    Cancelled = 10,
}

impl Status {
    /// Decodes the status byte; unknown values are [`Error::UnknownType`].
    pub fn from_u8(value: u8) -> Result<Status> {
        Ok(match value {
            0 => Status::Ok,
            1 => Status::BadKey,
            2 => Status::OutOfBounds,
            3 => Status::NoPermission,
            4 => Status::Misaligned,
            5 => Status::Unsupported,
            6 => Status::NoHandler,
            7 => Status::Truncated,
            8 => Status::WouldBlock,
            9 => Status::BadArgument,
            10 => Status::Cancelled,
            _ => return Err(Error::UnknownType),
        })
    }

    /// Whether this is [`Status::Ok`].
    pub const fn is_ok(self) -> bool {
        matches!(self, Status::Ok)
    }

    /// Short lower-case name used in traces.
    pub const fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::BadKey => "bad-key",
            Status::OutOfBounds => "out-of-bounds",
            Status::NoPermission => "no-permission",
            Status::Misaligned => "misaligned",
            Status::Unsupported => "unsupported",
            Status::NoHandler => "no-handler",
            Status::Truncated => "truncated",
            Status::WouldBlock => "would-block",
            Status::BadArgument => "bad-argument",
            Status::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Generic completion or error reply for an operation without a data response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpStatus {
    /// The request id this answers.
    pub req: u32,
    /// The outcome.
    pub status: Status,
}

impl OpStatus {
    pub(super) const HEADER_LEN: usize = field::LEN;

    #[inline(always)]
    pub(super) fn parse(msg: &[u8]) -> Result<OpStatus> {
        exact(msg, field::LEN)?;
        reserved(msg, field::RESERVED)?;
        Ok(OpStatus { req: get32(msg, field::REQ), status: Status::from_u8(msg[field::STATUS])? })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        b[field::STATUS] = self.status as u8;
        zero(b, field::RESERVED);
        set32(b, field::REQ, self.req);
    }
}

impl fmt::Display for OpStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "status req={} {}", self.req, self.status)
    }
}
