//! Masked put: write only selected 4-byte words of a 64- or 256-byte block.
//!
//! Owns: [`MaskedBlock`] and the layout of [`PutMasked`] (seed 003,
//! PPRAM-Link's selected-word write `writesw`, used for DSM write-back of the
//! dirty words of a block, so that two ranks' diffs of one block merge).
//!
//! Must not: apply the mask (the target does, word by word), or accept a block
//! size other than 64 or 256 bytes or a body of the wrong length.
//!
//! ```text
//! PutMasked (32 bytes, then the whole block: 64 or 256 bytes)
//! offset size field
//!  0      1   opcode  OpCode::PutMasked
//!  1      1   block   MaskedBlock
//!  2      2   reserved, zero
//!  4      4   req
//!  8      8   key
//! 16      8   offset  of the block in the region
//! 24      8   mask    bit i set: write the 4-byte word i of the block
//!                     (B64: only bits 0..16 may be set)
//! 32    ...   body    the block, exactly its size
//! ```

use core::fmt;

use super::bytes::{get32, get64, need, reserved, set32, set64, zero};
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const BLOCK: usize = 1;
    pub const RESERVED: Range<usize> = 2..4;
    pub const REQ: Range<usize> = 4..8;
    pub const KEY: Range<usize> = 8..16;
    pub const OFFSET: Range<usize> = 16..24;
    pub const MASK: Range<usize> = 24..32;
    pub const END: usize = 32;
}

/// Size of the block a [`PutMasked`] writes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MaskedBlock {
    /// 64 bytes: 16 words, mask bits 0..16.
    B64 = 1,
    /// 256 bytes: 64 words, every mask bit.
    B256 = 2,
}

impl MaskedBlock {
    /// Decodes the block byte; unknown values are [`Error::UnknownType`].
    pub fn from_u8(value: u8) -> Result<MaskedBlock> {
        match value {
            1 => Ok(MaskedBlock::B64),
            2 => Ok(MaskedBlock::B256),
            _ => Err(Error::UnknownType),
        }
    }

    /// Block size in bytes.
    pub const fn bytes(self) -> usize {
        match self {
            MaskedBlock::B64 => 64,
            MaskedBlock::B256 => 256,
        }
    }

    /// Number of 4-byte words in the block (= usable mask bits).
    pub const fn words(self) -> usize {
        self.bytes() / 4
    }

    /// The mask bits that may be set for this block size.
    pub const fn valid_mask(self) -> u64 {
        match self {
            MaskedBlock::B64 => 0xffff,
            MaskedBlock::B256 => u64::MAX,
        }
    }
}

/// Writes the words of the block in `body` selected by `mask` to `offset` of
/// region `key`; unselected words at the target are left untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutMasked<'a> {
    /// Request id; 0 means no completion reply is wanted.
    pub req: u32,
    /// Region key at the target.
    pub key: u64,
    /// Byte offset of the block in the region.
    pub offset: u64,
    /// Block size.
    pub block: MaskedBlock,
    /// Bit i selects the 4-byte word i.
    pub mask: u64,
    /// The whole block ([`MaskedBlock::bytes`] bytes).
    pub body: &'a [u8],
}

impl<'a> PutMasked<'a> {
    pub(super) const HEADER_LEN: usize = field::END;

    #[inline(always)]
    pub(super) fn parse(msg: &'a [u8]) -> Result<PutMasked<'a>> {
        need(msg, field::END)?;
        reserved(msg, field::RESERVED)?;
        let block = MaskedBlock::from_u8(msg[field::BLOCK])?;
        let mask = get64(msg, field::MASK);
        if mask & !block.valid_mask() != 0 {
            return Err(Error::Malformed);
        }
        let body = &msg[field::END..];
        if body.len() != block.bytes() {
            return Err(Error::BadLength);
        }
        Ok(PutMasked {
            req: get32(msg, field::REQ),
            key: get64(msg, field::KEY),
            offset: get64(msg, field::OFFSET),
            block,
            mask,
            body,
        })
    }

    #[inline]
    pub(super) fn emit(&self, b: &mut [u8]) {
        b[field::BLOCK] = self.block as u8;
        zero(b, field::RESERVED);
        set32(b, field::REQ, self.req);
        set64(b, field::KEY, self.key);
        set64(b, field::OFFSET, self.offset);
        set64(b, field::MASK, self.mask);
    }
}

impl fmt::Display for PutMasked<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "put-masked req={} key={:#x} off={} block={} mask={:#x} len={}",
            self.req,
            self.key,
            self.offset,
            self.block.bytes(),
            self.mask,
            self.body.len()
        )
    }
}
