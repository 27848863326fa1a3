//! The payload of a [`PacketType::Mcast`](crate::PacketType::Mcast) packet:
//! one segment of a one-to-many transfer sent by IP multicast to a team's
//! group address (or, as a repair, by unicast to one member).
//!
//! Owns: the segment header that follows the packet header, and the rule
//! that a segment lies inside its transfer. The packet header around it is
//! [`crate::header`]'s (job id, source rank and epoch, MAC trailer); in an
//! `Mcast` packet its `seq` field is the segment's index and `dst_rank` is
//! [`GROUP_RANK`] for a multicast or the member's rank for a repair.
//!
//! ```text
//! McastData (32 bytes, then the segment's bytes)
//! offset size field
//!  0      8   team      the team's multicast identity (same on every member)
//!  8      8   transfer  which multicast of the team (its collective sequence number)
//! 16      8   total     bytes of the whole transfer
//! 24      8   offset    where this segment's bytes start within the transfer
//! 32    ...   data      offset + data.len() <= total
//! ```
//! All integers are little-endian. Whether `offset` is where the receiver
//! expects segment `seq` to start is the receiver's business (it knows the
//! segment size); this module only guarantees the segment lies inside the
//! transfer, without overflow.
//!
//! Must not: allocate, panic on any input, or know about segment sizes,
//! windows or repairs (crate `mw-proto` does).

use core::fmt;

use crate::{Error, Result};

/// `dst_rank` of a packet multicast to the whole group.
pub const GROUP_RANK: u32 = u32::MAX;

mod field {
    use core::ops::Range;
    pub const TEAM: Range<usize> = 0..8;
    pub const TRANSFER: Range<usize> = 8..16;
    pub const TOTAL: Range<usize> = 16..24;
    pub const OFFSET: Range<usize> = 24..32;
    pub const END: usize = 32;
}

fn get64(b: &[u8], r: core::ops::Range<usize>) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[r]);
    u64::from_le_bytes(a)
}

/// One segment of a multicast transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McastData<'a> {
    /// The team's multicast identity.
    pub team: u64,
    /// Which transfer of the team.
    pub transfer: u64,
    /// Length of the whole transfer in bytes.
    pub total: u64,
    /// Offset of `data` within the transfer.
    pub offset: u64,
    /// The segment's bytes.
    pub data: &'a [u8],
}

impl<'a> McastData<'a> {
    /// Bytes of the segment header before the data.
    pub const HEADER_LEN: usize = field::END;

    /// Decodes a packet payload. Never panics; a segment reaching past its
    /// transfer (or overflowing) is [`Error::BadLength`].
    pub fn parse(payload: &'a [u8]) -> Result<McastData<'a>> {
        if payload.len() < field::END {
            return Err(Error::Truncated);
        }
        let total = get64(payload, field::TOTAL);
        let offset = get64(payload, field::OFFSET);
        let data = &payload[field::END..];
        let end = offset.checked_add(data.len() as u64).ok_or(Error::BadLength)?;
        if end > total {
            return Err(Error::BadLength);
        }
        Ok(McastData {
            team: get64(payload, field::TEAM),
            transfer: get64(payload, field::TRANSFER),
            total,
            offset,
            data,
        })
    }

    /// Writes the segment header (not the data) into the front of `buf`
    /// and returns [`Self::HEADER_LEN`]. The data follows it as the caller
    /// copies it, so it is never staged next to its header twice.
    ///
    /// # Panics
    /// If `buf` is shorter than [`Self::HEADER_LEN`].
    pub fn emit_header(&self, buf: &mut [u8]) -> usize {
        let b = &mut buf[..field::END];
        b[field::TEAM].copy_from_slice(&self.team.to_le_bytes());
        b[field::TRANSFER].copy_from_slice(&self.transfer.to_le_bytes());
        b[field::TOTAL].copy_from_slice(&self.total.to_le_bytes());
        b[field::OFFSET].copy_from_slice(&self.offset.to_le_bytes());
        field::END
    }

    /// Header plus data.
    pub fn buffer_len(&self) -> usize {
        field::END + self.data.len()
    }

    /// Writes header and data into the front of `buf`; returns [`Self::buffer_len`].
    ///
    /// # Panics
    /// If `buf` is shorter than [`Self::buffer_len`].
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let at = self.emit_header(buf);
        buf[at..at + self.data.len()].copy_from_slice(self.data);
        at + self.data.len()
    }
}

impl fmt::Display for McastData<'_> {
    /// A tcpdump-like one-line summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "mcast team={:#x} transfer={} bytes {}..{} of {}",
            self.team,
            self.transfer,
            self.offset,
            self.offset + self.data.len() as u64,
            self.total
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_fixture() {
        let seg = McastData { team: 0x0102_0304_0506_0708, transfer: 9, total: 100, offset: 96, data: b"abcd" };
        let mut buf = [0u8; 64];
        let len = seg.emit(&mut buf);
        assert_eq!(len, 36);
        assert_eq!(&buf[..8], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&buf[16..24], &100u64.to_le_bytes());
        assert_eq!(McastData::parse(&buf[..len]).unwrap(), seg);
        assert_eq!(seg.to_string(), "mcast team=0x102030405060708 transfer=9 bytes 96..100 of 100");
    }

    #[test]
    fn segments_outside_their_transfer_are_refused() {
        let mut buf = [0u8; 40];
        assert_eq!(McastData::parse(&buf[..31]), Err(Error::Truncated));
        McastData { team: 1, transfer: 1, total: 8, offset: 1, data: &[0; 8] }.emit(&mut buf);
        assert_eq!(McastData::parse(&buf), Err(Error::BadLength));
        McastData { team: 1, transfer: 1, total: u64::MAX, offset: u64::MAX - 2, data: &[0; 8] }.emit(&mut buf);
        assert_eq!(McastData::parse(&buf), Err(Error::BadLength), "offset + len overflows");
        let empty = McastData { team: 1, transfer: 2, total: 0, offset: 0, data: &[] };
        empty.emit(&mut buf);
        assert_eq!(McastData::parse(&buf[..32]), Ok(empty));
    }
}
