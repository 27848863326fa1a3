//! The packet header every memwire datagram starts with.
//!
//! ```text
//! offset size field
//!  0      2   magic        0x574D, the bytes "MW"
//!  2      1   version      VERSION; anything else is rejected (no silent fork)
//!  3      1   packet type  PacketType
//!  4      2   flags        Flags; unknown bits are rejected
//!  6      2   payload_len  bytes between header and trailer
//!  8      8   job id       from the job key; packets of other jobs are dropped
//! 16      4   src rank
//! 20      4   dst rank
//! 24      4   src epoch    random per endpoint incarnation, never 0
//! 28      4   dst epoch    the sender's idea of the target's epoch, 0 = unknown yet
//! 32      4   seq          Data: this packet's sequence number; Ack/Nack/Probe:
//!                          the sender's next unused sequence number (its watermark);
//!                          Mcast: the segment's index within its transfer
//! 36      4   ack          next sequence number expected from the peer (valid with ACK)
//! 40      8   sack         bit i set: seq ack+1+i was received (valid with ACK)
//! 48    ...   payload      payload_len bytes
//!  .     16   MAC          present iff flags has MAC
//!  .      4   checksum     present iff flags has CHECKSUM (never with MAC)
//! ```
//! All integers are little-endian. The layout is fixed for a version; changing
//! it means bumping [`VERSION`], never a flag that switches layouts.
//!
//! The trailer is optional and of one kind at most: a 16-byte MAC (keyed,
//! computed by the protocol layer, which holds the key), or a 4-byte CRC32C
//! ([`packet_checksum`], Castagnoli polynomial, little-endian) of the header
//! (with the `CHECKSUM` flag already set) and payload, which catches
//! corruption that the UDP checksum missed when packets are not
//! authenticated. Both cover exactly [`Header::authenticated_bytes`].
//!
//! Owns: this layout, its checked view and [`HeaderRepr`]. Must not: verify the
//! MAC or compare the job id, ranks and epochs with the receiver's (the
//! protocol does: this only exposes them), or look inside the payload (`op`
//! does).

use crate::{Error, Result};

/// Size of the fixed header.
pub const HEADER_LEN: usize = 48;
/// Size of the optional message authentication code trailer.
pub const MAC_LEN: usize = 16;
/// Size of the optional CRC32C trailer.
pub const CHECKSUM_LEN: usize = 4;
/// First two bytes of every memwire packet ("MW" on the wire).
pub const MAGIC: u16 = 0x574D;
/// The protocol version this build speaks. 2: the MAC trailer is POLYVAL
/// then AES-128 (`mw_proto::auth`), no longer keyed BLAKE3.
pub const VERSION: u8 = 2;

mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const VERSION: usize = 2;
    pub const PTYPE: usize = 3;
    pub const FLAGS: Range<usize> = 4..6;
    pub const PAYLOAD_LEN: Range<usize> = 6..8;
    pub const JOB: Range<usize> = 8..16;
    pub const SRC_RANK: Range<usize> = 16..20;
    pub const DST_RANK: Range<usize> = 20..24;
    pub const SRC_EPOCH: Range<usize> = 24..28;
    pub const DST_EPOCH: Range<usize> = 28..32;
    pub const SEQ: Range<usize> = 32..36;
    pub const ACK: Range<usize> = 36..40;
    pub const SACK: Range<usize> = 40..48;
}

/// What a packet is, at the reliability layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// Reliable, sequenced: one segment of a message (FIRST/LAST flags delimit it).
    Data = 1,
    /// Acknowledgement only (cumulative ack + SACK), sent when there is no
    /// reverse data to piggyback on.
    Ack = 2,
    /// Negative acknowledgement: `ack` names the first missing sequence number,
    /// which the sender retransmits at once (seed 004, PM/UDP R4/S3).
    Nack = 3,
    /// Unreliable, unsequenced user datagram (`send_raw`).
    Raw = 4,
    /// Liveness probe: asks the peer for an immediate Ack.
    Probe = 5,
    /// "I do not know you in this epoch": tells a peer its connection state is
    /// stale (the sender restarted or never met it).
    Reset = 6,
    /// One segment of a one-to-many transfer, outside any connection: sent
    /// to a team's IP multicast group (`dst_rank` [`GROUP_RANK`](crate::mcast::GROUP_RANK))
    /// or, as a repair, to one member. The payload is a
    /// [`McastData`](crate::mcast::McastData); no ack fields, no segment flags.
    Mcast = 7,
}

impl PacketType {
    /// Decodes the type byte.
    pub fn from_u8(value: u8) -> Result<Self> {
        Ok(match value {
            1 => PacketType::Data,
            2 => PacketType::Ack,
            3 => PacketType::Nack,
            4 => PacketType::Raw,
            5 => PacketType::Probe,
            6 => PacketType::Reset,
            7 => PacketType::Mcast,
            _ => return Err(Error::UnknownType),
        })
    }
}

/// The CRC32C (Castagnoli) of `covered`: a packet's checksum trailer is this
/// over its header (`CHECKSUM` flag set) and payload, little-endian.
/// Hardware-accelerated where the CPU has CRC32C instructions.
pub fn packet_checksum(covered: &[u8]) -> u32 {
    crc32c::crc32c(covered)
}

/// [`packet_checksum`] of the concatenation of `parts` (a packet whose
/// header and payload are not contiguous, e.g. sent with a vectored send).
pub fn packet_checksum_parts(parts: &[&[u8]]) -> u32 {
    parts.iter().fold(0, |crc, part| crc32c::crc32c_append(crc, part))
}

/// Checks what must be checked before anything else of a received datagram
/// can be read: that it is as long as a header and starts with memwire's
/// magic number and this build's version (they say how the rest is laid
/// out, trailer included). [`Header::new_checked`] repeats these checks.
pub fn check_preamble(bytes: &[u8]) -> Result<()> {
    let Some(head) = bytes.get(..HEADER_LEN) else {
        return Err(Error::Truncated);
    };
    if le16(&head[field::MAGIC]) != MAGIC {
        return Err(Error::BadMagic);
    }
    if head[field::VERSION] != VERSION {
        return Err(Error::BadVersion);
    }
    Ok(())
}

/// Whether the last [`CHECKSUM_LEN`] bytes of `datagram` are the CRC32C of
/// the bytes before them, i.e. whether a checksummed packet arrived intact.
/// Reads no header field: call it right after [`check_preamble`], before
/// trusting any length or flag. `false` when the datagram is too short to
/// hold a checksum.
pub fn checksum_matches(datagram: &[u8]) -> bool {
    let Some(covered_len) = datagram.len().checked_sub(CHECKSUM_LEN) else {
        return false;
    };
    let (covered, trailer) = datagram.split_at(covered_len);
    packet_checksum(covered) == le32(trailer)
}

/// The packet type of `bytes` if they start like a memwire packet of this
/// version (magic, version, known type), without checking anything else: a
/// cheap routing decision before the full [`HeaderRepr::parse_packet`].
pub fn peek_packet_type(bytes: &[u8]) -> Option<PacketType> {
    let head = bytes.get(..HEADER_LEN)?;
    if le16(&head[field::MAGIC]) != MAGIC || head[field::VERSION] != VERSION {
        return None;
    }
    PacketType::from_u8(head[field::PTYPE]).ok()
}

/// Header flag bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(u16);

impl Flags {
    /// First segment of a message.
    pub const FIRST: Flags = Flags(1 << 0);
    /// Last segment of a message.
    pub const LAST: Flags = Flags(1 << 1);
    /// `ack` and `sack` carry valid acknowledgement information.
    pub const ACK: Flags = Flags(1 << 2);
    /// A MAC trailer follows the payload.
    pub const MAC: Flags = Flags(1 << 3);
    /// The receiver should acknowledge at once instead of delaying.
    pub const ACK_NOW: Flags = Flags(1 << 4);
    /// A CRC32C trailer follows the payload (never together with `MAC`).
    pub const CHECKSUM: Flags = Flags(1 << 5);
    const KNOWN: u16 = 0x3f;

    /// No flags.
    pub const fn empty() -> Flags {
        Flags(0)
    }
    /// The raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }
    /// Parses raw bits, rejecting unknown ones and a MAC together with a
    /// checksum (a packet has one trailer at most).
    pub fn from_bits(bits: u16) -> Result<Flags> {
        let both = Self::MAC.0 | Self::CHECKSUM.0;
        if bits & !Self::KNOWN != 0 || bits & both == both {
            return Err(Error::Malformed);
        }
        Ok(Flags(bits))
    }
    /// Bytes of trailer these flags announce after the payload.
    pub const fn trailer_len(self) -> usize {
        if self.contains(Flags::MAC) {
            MAC_LEN
        } else if self.contains(Flags::CHECKSUM) {
            CHECKSUM_LEN
        } else {
            0
        }
    }
    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Sets or clears the bits of `other`.
    pub fn set(&mut self, other: Flags, on: bool) {
        if on {
            self.0 |= other.0
        } else {
            self.0 &= !other.0
        }
    }
}

impl core::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

/// A read/write view of a packet header over a byte buffer.
#[derive(Debug, Clone)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

fn le16(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}
fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}
fn le64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wraps a buffer without checking it; accessors may panic if it is short.
    /// Use only on buffers this process built (the emit path).
    pub const fn new_unchecked(buffer: T) -> Header<T> {
        Header { buffer }
    }

    /// Wraps a buffer after checking that the fixed header and the payload and
    /// trailer it announces are all present, and that magic and version match.
    pub fn new_checked(buffer: T) -> Result<Header<T>> {
        let header = Header::new_unchecked(buffer);
        header.check()?;
        Ok(header)
    }

    fn check(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.magic() != MAGIC {
            return Err(Error::BadMagic);
        }
        if self.version() != VERSION {
            return Err(Error::BadVersion);
        }
        let flags = Flags::from_bits(le16(&data[field::FLAGS]))?;
        let want = HEADER_LEN + usize::from(self.payload_len()) + flags.trailer_len();
        if data.len() < want {
            return Err(Error::Truncated);
        }
        if data.len() > want {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    /// Consumes the view, returning the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Magic number field.
    pub fn magic(&self) -> u16 {
        le16(&self.buffer.as_ref()[field::MAGIC])
    }
    /// Version field.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    /// Raw packet type byte.
    pub fn packet_type_raw(&self) -> u8 {
        self.buffer.as_ref()[field::PTYPE]
    }
    /// Raw flag bits.
    pub fn flags_raw(&self) -> u16 {
        le16(&self.buffer.as_ref()[field::FLAGS])
    }
    /// Payload length field.
    pub fn payload_len(&self) -> u16 {
        le16(&self.buffer.as_ref()[field::PAYLOAD_LEN])
    }
    /// Job id field.
    pub fn job_id(&self) -> u64 {
        le64(&self.buffer.as_ref()[field::JOB])
    }
    /// Source rank field.
    pub fn src_rank(&self) -> u32 {
        le32(&self.buffer.as_ref()[field::SRC_RANK])
    }
    /// Target rank field.
    pub fn dst_rank(&self) -> u32 {
        le32(&self.buffer.as_ref()[field::DST_RANK])
    }
    /// Source epoch field.
    pub fn src_epoch(&self) -> u32 {
        le32(&self.buffer.as_ref()[field::SRC_EPOCH])
    }
    /// Target epoch field.
    pub fn dst_epoch(&self) -> u32 {
        le32(&self.buffer.as_ref()[field::DST_EPOCH])
    }
    /// Sequence number (or watermark, for control packets).
    pub fn seq(&self) -> u32 {
        le32(&self.buffer.as_ref()[field::SEQ])
    }
    /// Cumulative ack field.
    pub fn ack(&self) -> u32 {
        le32(&self.buffer.as_ref()[field::ACK])
    }
    /// Selective-ack bitmap field.
    pub fn sack(&self) -> u64 {
        le64(&self.buffer.as_ref()[field::SACK])
    }
    /// The payload bytes (checked views only).
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        let end = HEADER_LEN + usize::from(self.payload_len());
        &data[HEADER_LEN..end]
    }
    /// Header plus payload: the bytes a MAC or checksum covers.
    pub fn authenticated_bytes(&self) -> &[u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &self.buffer.as_ref()[..end]
    }
    /// The MAC trailer, when the MAC flag is set (checked views only).
    pub fn mac(&self) -> Option<&[u8]> {
        let flags = Flags(self.flags_raw());
        if !flags.contains(Flags::MAC) {
            return None;
        }
        let start = HEADER_LEN + usize::from(self.payload_len());
        Some(&self.buffer.as_ref()[start..start + MAC_LEN])
    }
    /// The checksum trailer, when the CHECKSUM flag is set (checked views only).
    pub fn checksum(&self) -> Option<u32> {
        if !Flags(self.flags_raw()).contains(Flags::CHECKSUM) {
            return None;
        }
        let start = HEADER_LEN + usize::from(self.payload_len());
        Some(le32(&self.buffer.as_ref()[start..start + CHECKSUM_LEN]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    fn put16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_le_bytes());
    }
    fn put32(&mut self, r: core::ops::Range<usize>, v: u32) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_le_bytes());
    }
    /// Sets the ack fields and the ACK flag; used when an ack is piggybacked
    /// onto a packet that is retransmitted from a stored copy.
    pub fn set_ack(&mut self, ack: u32, sack: u64) {
        self.put32(field::ACK, ack);
        self.buffer.as_mut()[field::SACK].copy_from_slice(&sack.to_le_bytes());
        let flags = self.flags_raw() | Flags::ACK.bits();
        self.put16(field::FLAGS, flags);
    }
    /// Sets or clears flag bits in place.
    pub fn set_flag(&mut self, flag: Flags, on: bool) {
        let mut flags = Flags(self.flags_raw());
        flags.set(flag, on);
        self.put16(field::FLAGS, flags.bits());
    }
    /// Sets the target epoch (it may become known between first send and a retransmission).
    pub fn set_dst_epoch(&mut self, epoch: u32) {
        self.put32(field::DST_EPOCH, epoch);
    }
    /// Mutable payload bytes; `payload_len` must already be set.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
    /// Mutable MAC trailer; the MAC flag and `payload_len` must already be set.
    pub fn mac_mut(&mut self) -> &mut [u8] {
        let start = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[start..start + MAC_LEN]
    }
}

/// A validated, decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRepr {
    /// Packet type.
    pub packet_type: PacketType,
    /// Flags.
    pub flags: Flags,
    /// Length of the payload that follows the header.
    pub payload_len: u16,
    /// Job id.
    pub job_id: u64,
    /// Sending rank.
    pub src_rank: u32,
    /// Target rank.
    pub dst_rank: u32,
    /// Sender's epoch (never 0).
    pub src_epoch: u32,
    /// Sender's idea of the target's epoch, 0 when unknown.
    pub dst_epoch: u32,
    /// Sequence number or watermark.
    pub seq: u32,
    /// Cumulative ack: next sequence number expected.
    pub ack: u32,
    /// Selective-ack bitmap for `ack + 1 ..= ack + 64`.
    pub sack: u64,
}

impl HeaderRepr {
    /// Decodes and validates a checked header view.
    pub fn parse<T: AsRef<[u8]>>(header: &Header<T>) -> Result<HeaderRepr> {
        let packet_type = PacketType::from_u8(header.packet_type_raw())?;
        let flags = Flags::from_bits(header.flags_raw())?;
        let segment_bits = flags.contains(Flags::FIRST) || flags.contains(Flags::LAST);
        match packet_type {
            PacketType::Data => {}
            PacketType::Ack | PacketType::Nack => {
                if segment_bits || !flags.contains(Flags::ACK) || header.payload_len() != 0 {
                    return Err(Error::Malformed);
                }
            }
            PacketType::Raw | PacketType::Probe | PacketType::Reset => {
                if segment_bits {
                    return Err(Error::Malformed);
                }
            }
            PacketType::Mcast => {
                let ack_bits = flags.contains(Flags::ACK) || flags.contains(Flags::ACK_NOW);
                if segment_bits || ack_bits || header.ack() != 0 || header.sack() != 0 {
                    return Err(Error::Malformed);
                }
            }
        }
        if header.src_epoch() == 0 {
            return Err(Error::Malformed);
        }
        Ok(HeaderRepr {
            packet_type,
            flags,
            payload_len: header.payload_len(),
            job_id: header.job_id(),
            src_rank: header.src_rank(),
            dst_rank: header.dst_rank(),
            src_epoch: header.src_epoch(),
            dst_epoch: header.dst_epoch(),
            seq: header.seq(),
            ack: header.ack(),
            sack: header.sack(),
        })
    }

    /// Checks and decodes a whole datagram: the header representation plus
    /// the payload slice.
    pub fn parse_packet(bytes: &[u8]) -> Result<(HeaderRepr, &[u8])> {
        let header = Header::new_checked(bytes)?;
        let repr = HeaderRepr::parse(&header)?;
        let end = HEADER_LEN + usize::from(repr.payload_len);
        Ok((repr, &bytes[HEADER_LEN..end]))
    }

    /// Bytes the whole packet occupies: header, payload and trailer.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + usize::from(self.payload_len) + self.flags.trailer_len()
    }

    /// Writes the header fields (not payload or trailer) into `header`.
    /// The buffer must be at least [`HEADER_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut Header<T>) {
        let b = header.buffer.as_mut();
        b[field::MAGIC].copy_from_slice(&MAGIC.to_le_bytes());
        b[field::VERSION] = VERSION;
        b[field::PTYPE] = self.packet_type as u8;
        b[field::FLAGS].copy_from_slice(&self.flags.bits().to_le_bytes());
        b[field::PAYLOAD_LEN].copy_from_slice(&self.payload_len.to_le_bytes());
        b[field::JOB].copy_from_slice(&self.job_id.to_le_bytes());
        b[field::SRC_RANK].copy_from_slice(&self.src_rank.to_le_bytes());
        b[field::DST_RANK].copy_from_slice(&self.dst_rank.to_le_bytes());
        b[field::SRC_EPOCH].copy_from_slice(&self.src_epoch.to_le_bytes());
        b[field::DST_EPOCH].copy_from_slice(&self.dst_epoch.to_le_bytes());
        b[field::SEQ].copy_from_slice(&self.seq.to_le_bytes());
        b[field::ACK].copy_from_slice(&self.ack.to_le_bytes());
        b[field::SACK].copy_from_slice(&self.sack.to_le_bytes());
    }

    /// Writes the header into the front of `buf` (at least [`HEADER_LEN`] bytes).
    pub fn emit_into(&self, buf: &mut [u8]) {
        self.emit(&mut Header::new_unchecked(&mut buf[..HEADER_LEN]));
    }
}

impl core::fmt::Display for HeaderRepr {
    /// A tcpdump-like one-line summary for traces.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{:?} {}->{} seq={} len={}",
            self.packet_type, self.src_rank, self.dst_rank, self.seq, self.payload_len
        )?;
        if self.flags.contains(Flags::FIRST) {
            f.write_str(" F")?;
        }
        if self.flags.contains(Flags::LAST) {
            f.write_str(" L")?;
        }
        if self.flags.contains(Flags::ACK) {
            write!(f, " ack={} sack={:#x}", self.ack, self.sack)?;
        }
        if self.flags.contains(Flags::MAC) {
            f.write_str(" mac")?;
        }
        if self.flags.contains(Flags::CHECKSUM) {
            f.write_str(" crc")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> HeaderRepr {
        HeaderRepr {
            packet_type: PacketType::Data,
            flags: Flags::FIRST | Flags::LAST | Flags::ACK,
            payload_len: 5,
            job_id: 0x1122_3344_5566_7788,
            src_rank: 3,
            dst_rank: 7,
            src_epoch: 0xdead_beef,
            dst_epoch: 42,
            seq: 1000,
            ack: 77,
            sack: 0b1011,
        }
    }

    #[test]
    fn round_trip() {
        let repr = sample();
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit_into(&mut buf);
        buf[HEADER_LEN..].copy_from_slice(b"hello");
        let (parsed, payload) = HeaderRepr::parse_packet(&buf).unwrap();
        assert_eq!(parsed, repr);
        assert_eq!(payload, b"hello");
    }

    #[test]
    fn fixture_bytes() {
        let repr = sample();
        let mut buf = vec![0u8; HEADER_LEN];
        repr.emit_into(&mut buf);
        assert_eq!(&buf[0..8], &[0x4d, 0x57, 2, 1, 0x07, 0x00, 5, 0]);
        assert_eq!(&buf[8..16], &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
        assert_eq!(&buf[32..36], &1000u32.to_le_bytes());
    }

    #[test]
    fn rejects_bad_input() {
        let repr = sample();
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit_into(&mut buf);
        assert_eq!(HeaderRepr::parse_packet(&buf[..10]).unwrap_err(), Error::Truncated);
        assert_eq!(HeaderRepr::parse_packet(&buf[..50]).unwrap_err(), Error::Truncated);
        let mut long = buf.clone();
        long.push(0);
        assert_eq!(HeaderRepr::parse_packet(&long).unwrap_err(), Error::BadLength);
        let mut bad = buf.clone();
        bad[0] = 0;
        assert_eq!(HeaderRepr::parse_packet(&bad).unwrap_err(), Error::BadMagic);
        let mut bad = buf.clone();
        bad[2] = 9;
        assert_eq!(HeaderRepr::parse_packet(&bad).unwrap_err(), Error::BadVersion);
        let mut bad = buf.clone();
        bad[3] = 99;
        assert_eq!(HeaderRepr::parse_packet(&bad).unwrap_err(), Error::UnknownType);
        let mut bad = buf.clone();
        bad[5] = 0x80;
        assert_eq!(HeaderRepr::parse_packet(&bad).unwrap_err(), Error::Malformed);
        let mut bad = buf.clone();
        bad[24..28].copy_from_slice(&[0; 4]);
        assert_eq!(HeaderRepr::parse_packet(&bad).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn mac_trailer_located() {
        let mut repr = sample();
        repr.flags = repr.flags | Flags::MAC;
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit_into(&mut buf);
        let mut view = Header::new_unchecked(&mut buf[..]);
        view.mac_mut().copy_from_slice(&[0xab; MAC_LEN]);
        let view = Header::new_checked(&buf[..]).unwrap();
        assert_eq!(view.mac(), Some(&[0xab; MAC_LEN][..]));
        assert_eq!(view.authenticated_bytes().len(), HEADER_LEN + 5);
    }

    #[test]
    fn checksum_trailer_located_and_verified() {
        let mut repr = sample();
        repr.flags = repr.flags | Flags::CHECKSUM;
        let mut buf = vec![0u8; repr.buffer_len()];
        assert_eq!(buf.len(), HEADER_LEN + 5 + CHECKSUM_LEN);
        repr.emit_into(&mut buf);
        buf[HEADER_LEN..HEADER_LEN + 5].copy_from_slice(b"hello");
        let crc = packet_checksum(&buf[..HEADER_LEN + 5]);
        buf[HEADER_LEN + 5..].copy_from_slice(&crc.to_le_bytes());
        assert!(checksum_matches(&buf));
        let view = Header::new_checked(&buf[..]).unwrap();
        assert_eq!(view.checksum(), Some(crc));
        assert_eq!(view.mac(), None);
        assert_eq!(HeaderRepr::parse_packet(&buf).unwrap().1, b"hello");
        for bit in 0..buf.len() * 8 {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(!checksum_matches(&bad), "flip of bit {bit} not detected");
        }
        assert!(!checksum_matches(&buf[..3]));
        // CRC32C of "123456789" is the standard check value 0xE3069283.
        assert_eq!(packet_checksum(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn checksum_of_parts_equals_checksum_of_concatenation() {
        let whole: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
        for cuts in [(0, 0), (0, 3000), (17, 17), (24, 1500), (1, 2999), (3000, 3000)] {
            let (a, rest) = whole.split_at(cuts.0);
            let (b, c) = rest.split_at(cuts.1 - cuts.0);
            assert_eq!(packet_checksum_parts(&[a, b, c, &[]]), packet_checksum(&whole), "cuts {cuts:?}");
        }
        assert_eq!(packet_checksum_parts(&[]), packet_checksum(&[]));
    }

    #[test]
    fn mac_and_checksum_are_exclusive() {
        assert_eq!(Flags::from_bits((Flags::MAC | Flags::CHECKSUM).bits()), Err(Error::Malformed));
        assert_eq!(Flags::CHECKSUM.trailer_len(), CHECKSUM_LEN);
        assert_eq!(Flags::MAC.trailer_len(), MAC_LEN);
        assert_eq!(Flags::empty().trailer_len(), 0);
    }

    #[test]
    fn preamble_is_checked_first() {
        let repr = sample();
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit_into(&mut buf);
        assert_eq!(check_preamble(&buf), Ok(()));
        assert_eq!(check_preamble(&buf[..HEADER_LEN - 1]), Err(Error::Truncated));
        buf[2] = VERSION + 1;
        assert_eq!(check_preamble(&buf), Err(Error::BadVersion));
        buf[0] = 0;
        assert_eq!(check_preamble(&buf), Err(Error::BadMagic));
    }

    #[test]
    fn mcast_packets_carry_no_ack_or_segment_fields() {
        let mut repr = sample();
        repr.packet_type = PacketType::Mcast;
        repr.flags = Flags::empty();
        repr.ack = 0;
        repr.sack = 0;
        repr.dst_rank = crate::mcast::GROUP_RANK;
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit_into(&mut buf);
        assert_eq!(HeaderRepr::parse_packet(&buf).unwrap().0, repr);
        for bad in [
            HeaderRepr { flags: Flags::FIRST, ..repr },
            HeaderRepr { flags: Flags::ACK, ..repr },
            HeaderRepr { flags: Flags::ACK_NOW, ..repr },
            HeaderRepr { ack: 1, ..repr },
            HeaderRepr { sack: 1, ..repr },
        ] {
            bad.emit_into(&mut buf);
            assert_eq!(HeaderRepr::parse_packet(&buf).unwrap_err(), Error::Malformed, "{bad:?}");
        }
    }

    #[test]
    fn peeking_at_the_type() {
        let repr = sample();
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit_into(&mut buf);
        assert_eq!(peek_packet_type(&buf), Some(PacketType::Data));
        assert_eq!(peek_packet_type(&buf[..HEADER_LEN - 1]), None);
        buf[3] = 7;
        assert_eq!(peek_packet_type(&buf), Some(PacketType::Mcast));
        buf[0] = 0;
        assert_eq!(peek_packet_type(&buf), None);
        assert_eq!(peek_packet_type(b"MWDB"), None);
    }

    #[test]
    fn control_packets_must_not_carry_segment_flags() {
        let mut repr = sample();
        repr.packet_type = PacketType::Ack;
        repr.payload_len = 0;
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit_into(&mut buf);
        assert_eq!(HeaderRepr::parse_packet(&buf).unwrap_err(), Error::Malformed);
    }
}
