//! Put with signal: data, then a 64-bit signal word set or added at the target.
//!
//! Owns: [`SignalOp`] and the layout of [`PutSignal`]. Seeds: Cenju-4's
//! notification address (seed 000), MBCF's Memory-Based Signal (seed 001). The
//! ordering guarantee (the signal is visible only after the data) is the
//! target's; this module only carries the fields.
//!
//! Must not: order the data and the signal (the target does) or accept an
//! unknown signal operation.
//!
//! ```text
//! PutSignal (48 bytes, then the body: the data)
//! offset size field
//!  0      1   opcode         OpCode::PutSignal
//!  1      1   signal op      SignalOp
//!  2      2   reserved, zero
//!  4      4   req
//!  8      8   key            where the data goes
//! 16      8   offset
//! 24      8   signal key     where the signal word is (8-byte aligned)
//! 32      8   signal offset
//! 40      8   signal value   stored or added
//! 48    ...   body
//! ```

use core::fmt;

use super::bytes::{get32, get64, need, reserved, set32, set64, zero};
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const SIGNAL_OP: usize = 1;
    pub const RESERVED: Range<usize> = 2..4;
    pub const REQ: Range<usize> = 4..8;
    pub const KEY: Range<usize> = 8..16;
    pub const OFFSET: Range<usize> = 16..24;
    pub const SIGNAL_KEY: Range<usize> = 24..32;
    pub const SIGNAL_OFFSET: Range<usize> = 32..40;
    pub const SIGNAL_VALUE: Range<usize> = 40..48;
    pub const END: usize = 48;
}

/// How the signal word is updated once the data has landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SignalOp {
    /// `signal = value`.
    Set = 1,
    /// `signal += value` (wrapping), so several senders can count arrivals.
    Add = 2,
}

impl SignalOp {
    /// Decodes the signal op byte; unknown values are [`Error::UnknownType`].
    pub fn from_u8(value: u8) -> Result<SignalOp> {
        match value {
            1 => Ok(SignalOp::Set),
            2 => Ok(SignalOp::Add),
            _ => Err(Error::UnknownType),
        }
    }

    /// Short lower-case name used in traces.
    pub const fn name(self) -> &'static str {
        match self {
            SignalOp::Set => "set",
            SignalOp::Add => "add",
        }
    }
}

/// Writes `body` at `offset` of region `key`, then updates the signal word at
/// `signal_offset` of region `signal_key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutSignal<'a> {
    /// Request id; 0 means no completion reply is wanted.
    pub req: u32,
    /// Region key of the data.
    pub key: u64,
    /// Byte offset of the data in its region.
    pub offset: u64,
    /// Region key of the signal word.
    pub signal_key: u64,
    /// Byte offset of the signal word (8-byte aligned).
    pub signal_offset: u64,
    /// Set or add.
    pub signal_op: SignalOp,
    /// Value stored into or added to the signal word.
    pub signal_value: u64,
    /// The data to write.
    pub body: &'a [u8],
}

impl<'a> PutSignal<'a> {
    pub(super) const HEADER_LEN: usize = field::END;

    #[inline(always)]
    pub(super) fn parse(msg: &'a [u8]) -> Result<PutSignal<'a>> {
        need(msg, field::END)?;
        reserved(msg, field::RESERVED)?;
        Ok(PutSignal {
            req: get32(msg, field::REQ),
            key: get64(msg, field::KEY),
            offset: get64(msg, field::OFFSET),
            signal_key: get64(msg, field::SIGNAL_KEY),
            signal_offset: get64(msg, field::SIGNAL_OFFSET),
            signal_op: SignalOp::from_u8(msg[field::SIGNAL_OP])?,
            signal_value: get64(msg, field::SIGNAL_VALUE),
            body: &msg[field::END..],
        })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        b[field::SIGNAL_OP] = self.signal_op as u8;
        zero(b, field::RESERVED);
        set32(b, field::REQ, self.req);
        set64(b, field::KEY, self.key);
        set64(b, field::OFFSET, self.offset);
        set64(b, field::SIGNAL_KEY, self.signal_key);
        set64(b, field::SIGNAL_OFFSET, self.signal_offset);
        set64(b, field::SIGNAL_VALUE, self.signal_value);
    }
}

impl fmt::Display for PutSignal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "put-signal req={} key={:#x} off={} len={} signal={:#x}:{} {} {}",
            self.req,
            self.key,
            self.offset,
            self.body.len(),
            self.signal_key,
            self.signal_offset,
            self.signal_op.name(),
            self.signal_value
        )
    }
}
