//! Put to an address register: the target decides where the data lands.
//!
//! Owns: the layout of [`RegisterPut`] (seed 000, Cenju-4's address
//! registers: the target points a small set of named landing registers at
//! offsets of its regions, senders name only the register, so the same data
//! can land at a different address on each rank, e.g. under multicast).
//!
//! Must not: know where a register points (the target's table in mw-core), or
//! check the data against it.
//!
//! ```text
//! RegisterPut (8 bytes, then the body: the data)
//! offset size field
//!  0      1   opcode    OpCode::RegisterPut
//!  1      1   reserved, zero
//!  2      2   register  landing register number at the target
//!  4      4   req
//!  8    ...   body
//! ```

use core::fmt;

use super::bytes::{get16, get32, need, reserved, set16, set32, zero};
use crate::Result;

mod field {
    use core::ops::Range;
    pub const RESERVED: Range<usize> = 1..2;
    pub const REGISTER: Range<usize> = 2..4;
    pub const REQ: Range<usize> = 4..8;
    pub const END: usize = 8;
}

/// Writes `body` wherever the target's address register `register` points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterPut<'a> {
    /// Request id; 0 means no completion reply is wanted.
    pub req: u32,
    /// Landing register number at the target.
    pub register: u16,
    /// The data to write.
    pub body: &'a [u8],
}

impl<'a> RegisterPut<'a> {
    pub(super) const HEADER_LEN: usize = field::END;

    #[inline(always)]
    pub(super) fn parse(msg: &'a [u8]) -> Result<RegisterPut<'a>> {
        need(msg, field::END)?;
        reserved(msg, field::RESERVED)?;
        Ok(RegisterPut { req: get32(msg, field::REQ), register: get16(msg, field::REGISTER), body: &msg[field::END..] })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        zero(b, field::RESERVED);
        set16(b, field::REGISTER, self.register);
        set32(b, field::REQ, self.req);
    }
}

impl fmt::Display for RegisterPut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "register-put req={} reg={} len={}", self.req, self.register, self.body.len())
    }
}
