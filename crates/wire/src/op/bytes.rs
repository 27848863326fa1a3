//! Little-endian field access and the length and reserved-byte checks that
//! every operation parser shares.
//!
//! Owns: nothing of the layout itself (each op file keeps its own `mod field`);
//! only the primitive reads, writes and checks, so that each parser first
//! proves the bytes are there (`need` / `exact`) and then reads fixed ranges.
//!
//! Must not: know any operation's layout, or read a byte before `need`/`exact`
//! has proven it is there.

use core::ops::Range;

use crate::{Error, Result};

pub(super) fn get16(b: &[u8], r: Range<usize>) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[r]);
    u16::from_le_bytes(a)
}

pub(super) fn get32(b: &[u8], r: Range<usize>) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[r]);
    u32::from_le_bytes(a)
}

pub(super) fn get64(b: &[u8], r: Range<usize>) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[r]);
    u64::from_le_bytes(a)
}

pub(super) fn set16(b: &mut [u8], r: Range<usize>, v: u16) {
    b[r].copy_from_slice(&v.to_le_bytes());
}

pub(super) fn set32(b: &mut [u8], r: Range<usize>, v: u32) {
    b[r].copy_from_slice(&v.to_le_bytes());
}

pub(super) fn set64(b: &mut [u8], r: Range<usize>, v: u64) {
    b[r].copy_from_slice(&v.to_le_bytes());
}

/// The message holds at least `len` bytes of header.
pub(super) fn need(msg: &[u8], len: usize) -> Result<()> {
    if msg.len() < len {
        return Err(Error::Truncated);
    }
    Ok(())
}

/// The message is exactly `len` bytes: an operation without a body.
pub(super) fn exact(msg: &[u8], len: usize) -> Result<()> {
    need(msg, len)?;
    if msg.len() > len {
        return Err(Error::BadLength);
    }
    Ok(())
}

/// Reserved bytes are zero (so that every accepted message re-emits to the
/// same bytes, and the bytes stay free for a later version).
pub(super) fn reserved(msg: &[u8], r: Range<usize>) -> Result<()> {
    if msg[r].iter().any(|&b| b != 0) {
        return Err(Error::Malformed);
    }
    Ok(())
}

/// Writes zeros into reserved bytes (the emitter's buffer may hold old data).
pub(super) fn zero(b: &mut [u8], r: Range<usize>) {
    b[r].fill(0);
}
