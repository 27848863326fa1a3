//! Remote FIFO push and flow-control credit.
//!
//! Owns: the layouts of [`FifoPush`] (seed 001, MBCF's Memory-Based FIFO;
//! seed 000, Cenju-4's message buffers) and [`Credit`], the grant a receiver
//! sends so that a sender may put more into a buffer that needs room at the
//! target (FIFO slots, the unexpected-message buffer). A full FIFO answers a
//! push with [`Status::WouldBlock`](super::Status::WouldBlock) in an
//! [`OpStatus`](super::OpStatus); nothing is dropped.
//!
//! Must not: know FIFO sizes, slots or watermarks (the owner's state in
//! mw-core), or decide when credit is due.
//!
//! ```text
//! FifoPush (16 bytes, then the body: one FIFO entry)
//! offset size field
//!  0      1   opcode  OpCode::FifoPush
//!  1      3   reserved, zero
//!  4      4   req
//!  8      8   key     the FIFO's key at the target
//! 16    ...   body
//!
//! Credit (8 bytes, no body)
//!  0      1   opcode  OpCode::Credit
//!  1      1   class   which buffer the credit is for (meaning set by the endpoint)
//!  2      2   reserved, zero
//!  4      4   amount  units granted (slots, or bytes, by class)
//! ```

use core::fmt;

use super::bytes::{exact, get32, get64, need, reserved, set32, set64, zero};
use crate::Result;

mod field {
    use core::ops::Range;
    pub const PUSH_RESERVED: Range<usize> = 1..4;
    pub const REQ: Range<usize> = 4..8;
    pub const KEY: Range<usize> = 8..16;
    pub const PUSH_END: usize = 16;

    pub const CLASS: usize = 1;
    pub const CREDIT_RESERVED: Range<usize> = 2..4;
    pub const AMOUNT: Range<usize> = 4..8;
    pub const CREDIT_END: usize = 8;
}

/// Appends `body` as one entry to the remote FIFO `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FifoPush<'a> {
    /// Request id; the push result comes back in an [`OpStatus`](super::OpStatus).
    pub req: u32,
    /// The FIFO's key at the target.
    pub key: u64,
    /// The entry.
    pub body: &'a [u8],
}

/// A flow-control credit grant from a receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credit {
    /// Which buffer the credit is for (the endpoint assigns the classes).
    pub class: u8,
    /// Units granted.
    pub amount: u32,
}

impl<'a> FifoPush<'a> {
    pub(super) const HEADER_LEN: usize = field::PUSH_END;

    #[inline(always)]
    pub(super) fn parse(msg: &'a [u8]) -> Result<FifoPush<'a>> {
        need(msg, field::PUSH_END)?;
        reserved(msg, field::PUSH_RESERVED)?;
        Ok(FifoPush { req: get32(msg, field::REQ), key: get64(msg, field::KEY), body: &msg[field::PUSH_END..] })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        zero(b, field::PUSH_RESERVED);
        set32(b, field::REQ, self.req);
        set64(b, field::KEY, self.key);
    }
}

impl Credit {
    pub(super) const HEADER_LEN: usize = field::CREDIT_END;

    #[inline(always)]
    pub(super) fn parse(msg: &[u8]) -> Result<Credit> {
        exact(msg, field::CREDIT_END)?;
        reserved(msg, field::CREDIT_RESERVED)?;
        Ok(Credit { class: msg[field::CLASS], amount: get32(msg, field::AMOUNT) })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        b[field::CLASS] = self.class;
        zero(b, field::CREDIT_RESERVED);
        set32(b, field::AMOUNT, self.amount);
    }
}

impl fmt::Display for FifoPush<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fifo-push req={} key={:#x} len={}", self.req, self.key, self.body.len())
    }
}

impl fmt::Display for Credit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "credit class={} amount={}", self.class, self.amount)
    }
}
