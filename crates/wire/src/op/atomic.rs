//! Remote atomics on 32- and 64-bit words, and their response.
//!
//! Owns: [`AtomicOp`], [`AtomicWidth`], the layouts of [`AtomicRequest`] and
//! [`AtomicResponse`]. Seeds: Cenju-4's atomic add, swap and compare&swap
//! (seed 000), MBCF_SWAP (seed 001), PPRAM-Link's lock (seed 003). Exactly-once
//! execution is the reliability layer's and the endpoint's job, not this one's.
//!
//! Must not: execute the operation, or check the word's alignment and bounds at
//! the target (the endpoint does); it only rejects unknown operations and
//! widths, and field combinations no correct sender produces (an operand wider
//! than the word, a compare value outside compare_swap).
//!
//! ```text
//! AtomicRequest (40 bytes, no body)
//! offset size field
//!  0      1   opcode   OpCode::AtomicRequest
//!  1      1   op       AtomicOp
//!  2      1   width    AtomicWidth: the word size in bytes, 4 or 8
//!  3      1   flags    bit 0 FETCH (reply with the old value); other bits zero
//!  4      4   req
//!  8      8   key
//! 16      8   offset
//! 24      8   operand  (a U32 op: at most u32::MAX; Load: zero)
//! 32      8   compare  CompareSwap only, zero for every other op
//!
//! AtomicResponse (16 bytes, no body)
//!  0      1   opcode   OpCode::AtomicResponse
//!  1      1   status   Status
//!  2      2   reserved, zero
//!  4      4   req
//!  8      8   value    the word before the operation (zero-extended for U32)
//! ```

use core::fmt;

use super::bytes::{exact, get32, get64, reserved, set32, set64, zero};
use super::Status;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const OP: usize = 1;
    pub const WIDTH: usize = 2;
    pub const FLAGS: usize = 3;
    pub const REQ: Range<usize> = 4..8;
    pub const KEY: Range<usize> = 8..16;
    pub const OFFSET: Range<usize> = 16..24;
    pub const OPERAND: Range<usize> = 24..32;
    pub const COMPARE: Range<usize> = 32..40;
    pub const REQUEST_END: usize = 40;

    pub const STATUS: usize = 1;
    pub const RESPONSE_RESERVED: Range<usize> = 2..4;
    pub const VALUE: Range<usize> = 8..16;
    pub const RESPONSE_END: usize = 16;
}

const FLAG_FETCH: u8 = 1 << 0;

/// What an atomic operation does to the target word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AtomicOp {
    /// `word += operand` (wrapping).
    Add = 1,
    /// `word = operand`, returning the old value.
    Swap = 2,
    /// `if word == compare { word = operand }`, returning the old value.
    CompareSwap = 3,
    /// `word &= operand`.
    And = 4,
    /// `word |= operand`.
    Or = 5,
    /// `word ^= operand`.
    Xor = 6,
    /// Reads the word atomically (always fetches; operand is zero).
    Load = 7,
    /// `word = operand`, atomically.
    Store = 8,
}

impl AtomicOp {
    /// Decodes the op byte; unknown values are [`Error::UnknownType`].
    pub fn from_u8(value: u8) -> Result<AtomicOp> {
        Ok(match value {
            1 => AtomicOp::Add,
            2 => AtomicOp::Swap,
            3 => AtomicOp::CompareSwap,
            4 => AtomicOp::And,
            5 => AtomicOp::Or,
            6 => AtomicOp::Xor,
            7 => AtomicOp::Load,
            8 => AtomicOp::Store,
            _ => return Err(Error::UnknownType),
        })
    }

    /// Short lower-case name used in traces.
    pub const fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "add",
            AtomicOp::Swap => "swap",
            AtomicOp::CompareSwap => "cswap",
            AtomicOp::And => "and",
            AtomicOp::Or => "or",
            AtomicOp::Xor => "xor",
            AtomicOp::Load => "load",
            AtomicOp::Store => "store",
        }
    }
}

/// Size of the target word of an atomic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AtomicWidth {
    /// A 4-byte word, 4-byte aligned.
    U32 = 4,
    /// An 8-byte word, 8-byte aligned.
    U64 = 8,
}

impl AtomicWidth {
    /// Decodes the width byte (the size in bytes); other values are [`Error::UnknownType`].
    pub fn from_u8(value: u8) -> Result<AtomicWidth> {
        match value {
            4 => Ok(AtomicWidth::U32),
            8 => Ok(AtomicWidth::U64),
            _ => Err(Error::UnknownType),
        }
    }

    /// The word size in bytes (also its required alignment).
    pub const fn bytes(self) -> usize {
        self as usize
    }

    /// The largest operand or compare value a word of this width holds.
    pub const fn max_value(self) -> u64 {
        match self {
            AtomicWidth::U32 => u32::MAX as u64,
            AtomicWidth::U64 => u64::MAX,
        }
    }
}

/// An atomic read-modify-write (or load/store) on one word at the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicRequest {
    /// Request id; the reply (an [`AtomicResponse`] when `fetch`, otherwise an
    /// [`OpStatus`](super::OpStatus) on error) carries it.
    pub req: u32,
    /// Region key at the target.
    pub key: u64,
    /// Byte offset of the word in the region; aligned to the width.
    pub offset: u64,
    /// The operation.
    pub op: AtomicOp,
    /// Word size.
    pub width: AtomicWidth,
    /// Whether the old value is returned in an [`AtomicResponse`]
    /// (always true for [`AtomicOp::Load`]).
    pub fetch: bool,
    /// The operand (new value for Swap, CompareSwap and Store); zero for Load.
    pub operand: u64,
    /// The expected value for CompareSwap; zero for every other op.
    pub compare: u64,
}

/// The result of a fetching [`AtomicRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicResponse {
    /// The request this answers.
    pub req: u32,
    /// Outcome.
    pub status: Status,
    /// The word before the operation (zero-extended for U32; zero on error).
    pub value: u64,
}

impl AtomicRequest {
    pub(super) const HEADER_LEN: usize = field::REQUEST_END;

    #[inline(always)]
    pub(super) fn parse(msg: &[u8]) -> Result<AtomicRequest> {
        exact(msg, field::REQUEST_END)?;
        let op = AtomicOp::from_u8(msg[field::OP])?;
        let width = AtomicWidth::from_u8(msg[field::WIDTH])?;
        let flags = msg[field::FLAGS];
        if flags & !FLAG_FETCH != 0 {
            return Err(Error::Malformed);
        }
        let repr = AtomicRequest {
            req: get32(msg, field::REQ),
            key: get64(msg, field::KEY),
            offset: get64(msg, field::OFFSET),
            op,
            width,
            fetch: flags & FLAG_FETCH != 0,
            operand: get64(msg, field::OPERAND),
            compare: get64(msg, field::COMPARE),
        };
        repr.check()?;
        Ok(repr)
    }

    /// Field combinations no correct sender produces: operands wider than the
    /// word, a compare value on anything but CompareSwap, a Load that does not
    /// fetch or carries an operand.
    fn check(&self) -> Result<()> {
        let max = self.width.max_value();
        if self.operand > max || self.compare > max {
            return Err(Error::Malformed);
        }
        if self.op != AtomicOp::CompareSwap && self.compare != 0 {
            return Err(Error::Malformed);
        }
        if self.op == AtomicOp::Load && (!self.fetch || self.operand != 0) {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        b[field::OP] = self.op as u8;
        b[field::WIDTH] = self.width as u8;
        b[field::FLAGS] = if self.fetch { FLAG_FETCH } else { 0 };
        set32(b, field::REQ, self.req);
        set64(b, field::KEY, self.key);
        set64(b, field::OFFSET, self.offset);
        set64(b, field::OPERAND, self.operand);
        set64(b, field::COMPARE, self.compare);
    }
}

impl AtomicResponse {
    pub(super) const HEADER_LEN: usize = field::RESPONSE_END;

    #[inline(always)]
    pub(super) fn parse(msg: &[u8]) -> Result<AtomicResponse> {
        exact(msg, field::RESPONSE_END)?;
        reserved(msg, field::RESPONSE_RESERVED)?;
        Ok(AtomicResponse {
            req: get32(msg, field::REQ),
            status: Status::from_u8(msg[field::STATUS])?,
            value: get64(msg, field::VALUE),
        })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        b[field::STATUS] = self.status as u8;
        zero(b, field::RESPONSE_RESERVED);
        set32(b, field::REQ, self.req);
        set64(b, field::VALUE, self.value);
    }
}

impl fmt::Display for AtomicRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = self.width.bytes() * 8;
        write!(f, "atomic req={} key={:#x} off={} {}/u{}", self.req, self.key, self.offset, self.op.name(), bits)?;
        if self.fetch {
            f.write_str(" fetch")?;
        }
        write!(f, " operand={:#x}", self.operand)?;
        if self.op == AtomicOp::CompareSwap {
            write!(f, " compare={:#x}", self.compare)?;
        }
        Ok(())
    }
}

impl fmt::Display for AtomicResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "atomic-resp req={} {} value={:#x}", self.req, self.status, self.value)
    }
}
