//! The packet-authentication hook: the one place where a MAC will be
//! computed on every packet sent and verified on every packet received.
//!
//! Owns: [`seal`] (called exactly once per emitted packet, by
//! `Endpoint::poll_transmit`) and [`verify`] (called exactly once per received
//! datagram, by `Endpoint::handle_datagram`, after the header parses and
//! before any field is trusted), and the trailer space reserved in every
//! packet ([`TRAILER_RESERVE`]).
//!
//! Must not: know about sequence numbers, acks or peers. Today there is no key
//! and no MAC: `seal` leaves packets as they are and `verify` rejects packets
//! that claim a MAC (this build cannot check one). When the job key arrives,
//! only this file changes: `seal` sets `Flags::MAC` and appends the 16-byte
//! trailer over `Header::authenticated_bytes`, `verify` recomputes and
//! compares in constant time, and `TRAILER_RESERVE` becomes `MAC_LEN`.

use crate::DropReason;
use mw_wire::{Flags, HeaderRepr};

/// Bytes reserved at the end of every packet for the MAC trailer (0 until
/// authentication exists; then `mw_wire::MAC_LEN`).
pub const TRAILER_RESERVE: usize = 0;

/// Finishes an emitted packet of `len` bytes in `buf` (header and payload
/// written) and returns its final length, trailer included.
pub(crate) fn seal(_buf: &mut [u8], len: usize) -> usize {
    len
}

/// Accepts or rejects a received datagram whose header parsed as `repr`.
pub(crate) fn verify(_datagram: &[u8], repr: &HeaderRepr) -> Result<(), DropReason> {
    if repr.flags.contains(Flags::MAC) {
        return Err(DropReason::BadMac);
    }
    Ok(())
}
