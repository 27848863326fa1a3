//! memwire's reliability protocol as a deterministic, sans-IO state machine.
//!
//! Owns: everything between "a message to rank P" and "datagrams on the
//! wire" (and, in [`mcast`], between "these bytes to every member of a
//! group" and segments multicast or repaired): per-peer sequence numbers, cumulative acks with a SACK bitmap,
//! delayed and piggybacked acks, Nacks, fast and timeout retransmission, RTT
//! estimation, the congestion window, segmentation and reassembly,
//! exactly-once in-order delivery, connection epochs, peer-dead detection,
//! and the counters of all that. The rules are those of PM/UDP (seed 004,
//! S1-S4 and R1-R5), brought up to date (SACK instead of R5's drops, RFC 6298
//! timers, AIMD windows); code implementing a seed rule cites it.
//!
//! Must not: open sockets, read clocks, draw random numbers, spawn threads or
//! use `unsafe`. Time comes in as [`time::Instant`] arguments, datagrams come
//! in through [`Endpoint::handle_datagram`] and go out through
//! [`Endpoint::poll_transmit`]; the caller (the endpoint layer in production,
//! `mw-sim` in tests) moves the bytes. Everything here is deterministic: the
//! same inputs produce the same outputs.
//!
//! # Hot-path budget
//!
//! For an in-order, single-packet message (STYLE habit 8): no heap
//! allocation once buffers have grown to the working set (`tests/alloc.rs`
//! counts them), no copy on delivery (the callback sees the datagram's own
//! bytes), one copy on submit (into the per-peer stream that doubles as the
//! retransmission source) and one into the caller's transmit buffer; O(1)
//! amortized work per packet (no scan over peers or over the window: the loss
//! sweep, SACK marking and Nack hole search each touch a packet a bounded
//! number of times); timers cost a heap operation only when a deadline moves
//! earlier. `benches/packet.rs` measures it (results: docs/perf-notes.md,
//! "protocol hot path").
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod auth;
mod config;
mod endpoint;
pub mod mcast;
mod peer;
mod stats;
pub mod time;
mod timer;

pub use auth::{job_id_from_key, AuthKey, TRAILER_RESERVE};
pub use config::{Config, ConfigError};
pub use endpoint::Endpoint;
pub use stats::{DropCounts, PeerStats, Stats};

/// Identifies a submitted message: per peer, consecutive from 0 in submit
/// order, and never reused for the lifetime of the [`Endpoint`] (ids keep
/// counting across a peer's restart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MsgId(pub u64);

/// A datagram written by [`Endpoint::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Rank to send it to.
    pub peer: u32,
    /// Bytes written at the start of the caller's buffer.
    pub len: usize,
}

/// A datagram chosen by [`Endpoint::poll_transmit_gather`]: its header
/// (`head_len` bytes) and then its trailer (`trailer_len` bytes) were written
/// at the start of the caller's buffer; its payload stays in the
/// retransmission buffer, lent by [`Endpoint::gather_payload`]. Datagrams
/// are taken one by one, then sent together, so several payloads are lent
/// at once without copying any of them.
#[derive(Debug, Clone, Copy)]
pub struct GatherTx {
    /// Rank to send it to.
    pub peer: u32,
    /// Header bytes at the start of the buffer.
    pub head_len: usize,
    /// Trailer bytes right after the header in the buffer (MAC or checksum).
    pub trailer_len: usize,
    packet: Option<peer::send::DataPacket>,
}

impl GatherTx {
    /// Payload bytes.
    pub fn payload_len(&self) -> usize {
        self.packet.map_or(0, |p| p.len)
    }
}

/// A datagram from [`Endpoint::poll_transmit_parts`]: `head`, `payload[0]`,
/// `payload[1]` and `trailer`, concatenated, are the bytes to send (any but
/// `head` may be empty).
#[derive(Debug, Clone, Copy)]
pub struct TransmitParts<'a> {
    /// Rank to send it to.
    pub peer: u32,
    /// The packet header.
    pub head: &'a [u8],
    /// The payload, in place in the retransmission buffer (two slices when
    /// it wraps around that ring).
    pub payload: [&'a [u8]; 2],
    /// The trailer: the MAC with authentication, the CRC32C with checksums,
    /// else empty.
    pub trailer: &'a [u8],
}

impl TransmitParts<'_> {
    /// Length of the whole datagram.
    pub fn len(&self) -> usize {
        self.head.len() + self.payload_len() + self.trailer.len()
    }

    /// Always false: a datagram has at least a header.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Payload bytes.
    pub fn payload_len(&self) -> usize {
        self.payload[0].len() + self.payload[1].len()
    }

    /// The datagram's pieces in order, for a vectored send.
    pub fn slices(&self) -> [&[u8]; 4] {
        [self.head, self.payload[0], self.payload[1], self.trailer]
    }

    /// Copies the whole datagram into `out`, returning its length.
    ///
    /// # Panics
    ///
    /// If `out` is shorter than [`len`](Self::len).
    pub fn copy_to(&self, out: &mut [u8]) -> usize {
        let mut at = 0;
        for part in self.slices() {
            out[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        at
    }
}

/// A multicast segment accepted by [`Endpoint::accept_mcast`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McastSegment<'a> {
    /// The root that sent it.
    pub from: u32,
    /// The segment's index within its transfer.
    pub index: u32,
    /// Sent to the whole group (else to this endpoint alone, as a repair).
    pub to_group: bool,
    /// The segment.
    pub data: mw_wire::mcast::McastData<'a>,
}

/// Something the layer above must know, from [`Endpoint::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Every message to `peer` with id `<= upto` has been delivered there,
    /// *and* every message `peer` submitted before it generated that
    /// acknowledgement has already been delivered here (causal completion:
    /// an error reply the target sent for a message always arrives before
    /// the message's completion).
    Acked {
        /// The target rank.
        peer: u32,
        /// Highest acknowledged message id (ids are consecutive per peer).
        upto: MsgId,
    },
    /// Nothing was heard from `peer` for `Config::peer_dead_after` while we
    /// waited on it. Every message toward it not yet reported `Acked` has
    /// failed; later submits return [`SubmitError::PeerDead`]. A packet from a
    /// new incarnation of the peer (new epoch) revives it with `PeerRestarted`.
    PeerDead {
        /// The silent rank.
        peer: u32,
    },
    /// `peer` restarted (a packet with a new epoch arrived): the old
    /// connection is discarded and communication continues with the new
    /// incarnation, with message ids continuing where they were.
    PeerRestarted {
        /// The restarted rank.
        peer: u32,
        /// Messages toward it not yet reported `Acked`, up to and including
        /// this id, have failed (`None`: nothing was pending).
        failed_upto: Option<MsgId>,
    },
    /// An unreliable datagram (`PacketType::Raw`) from `peer`.
    Raw {
        /// The sending rank.
        peer: u32,
        /// Its payload.
        data: Vec<u8>,
    },
}

/// Why [`Endpoint::submit`] or [`Endpoint::encode_raw`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// The peer was declared dead.
    PeerDead,
    /// The rank is outside the job, or is this endpoint itself.
    BadRank,
    /// A raw datagram larger than one segment (`Config::segment_size`), or
    /// a message larger than `Config::max_message`.
    TooLarge,
    /// The output buffer is smaller than the packet.
    BufferTooSmall,
}

impl core::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            SubmitError::PeerDead => "peer declared dead",
            SubmitError::BadRank => "rank out of range or self",
            SubmitError::TooLarge => "raw datagram larger than one segment, or message larger than max_message",
            SubmitError::BufferTooSmall => "output buffer too small",
        })
    }
}

impl std::error::Error for SubmitError {}

/// Why [`Endpoint::handle_datagram`] rejected a datagram; each is counted in
/// [`Stats::drops`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// Not a well-formed memwire packet (the wire error says how), or, with
    /// `mw_wire::Error::Malformed`, a segment that continues no message.
    Malformed(mw_wire::Error),
    /// Longer than `Config::max_datagram`: no rank of this job built it.
    Oversized,
    /// A Data segment that would make the peer's message longer than
    /// `Config::max_message`; the message in progress is discarded (its
    /// remaining segments are dropped the same way) so a peer cannot make
    /// the reassembly buffer grow without bound. The sequence number is
    /// still consumed and acknowledged.
    OversizedMessage,
    /// Checksum trailer missing or not matching the bytes (checksum on: the
    /// packet was corrupted on the way), or present while this endpoint does
    /// not checksum (ranks disagree on `Config::checksum`).
    BadChecksum,
    /// Another job's packet.
    WrongJob,
    /// Addressed to another rank.
    WrongTarget,
    /// From a rank outside the job, or claiming to be this rank.
    UnknownPeer,
    /// For an earlier incarnation of this endpoint, or from an earlier incarnation of the peer.
    StaleEpoch,
    /// Data already received (retransmission or network duplicate); its ack
    /// information was still used.
    Duplicate,
    /// Data too far beyond the cumulative ack to buffer.
    OutOfWindow,
    /// MAC missing or wrong (authentication on), or present while this
    /// endpoint has no key to check it (authentication off).
    BadMac,
    /// From a peer declared dead (same incarnation).
    DeadPeer,
    /// Would change the peer's epoch (or set it without naming ours)
    /// without proving it came from a holder of the job key
    /// (`Config::epoch_key`): a forged or corrupted packet, not a restart.
    UnprovenEpoch,
}

impl core::fmt::Display for DropReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DropReason::Malformed(e) => write!(f, "malformed packet: {e}"),
            DropReason::Oversized => f.write_str("datagram longer than max_datagram"),
            DropReason::OversizedMessage => f.write_str("message longer than max_message"),
            DropReason::BadChecksum => f.write_str("bad, missing or unexpected checksum"),
            DropReason::WrongJob => f.write_str("packet of another job"),
            DropReason::WrongTarget => f.write_str("packet for another rank"),
            DropReason::UnknownPeer => f.write_str("packet from an unknown rank"),
            DropReason::StaleEpoch => f.write_str("packet of a stale epoch"),
            DropReason::Duplicate => f.write_str("duplicate data"),
            DropReason::OutOfWindow => f.write_str("data beyond the receive window"),
            DropReason::BadMac => f.write_str("bad or unverifiable MAC"),
            DropReason::DeadPeer => f.write_str("packet from a peer declared dead"),
            DropReason::UnprovenEpoch => f.write_str("epoch change without proof"),
        }
    }
}

impl std::error::Error for DropReason {}

/// `a` comes before `b` in sequence-number space (RFC 1982 serial
/// arithmetic; valid while the two are less than 2^31 apart).
pub(crate) fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[cfg(test)]
mod tests {
    use super::seq_lt;

    #[test]
    fn serial_comparison_wraps() {
        assert!(seq_lt(1, 2));
        assert!(!seq_lt(2, 2));
        assert!(seq_lt(u32::MAX, 0));
        assert!(!seq_lt(0, u32::MAX));
        assert!(seq_lt(u32::MAX - 5, 10));
    }
}
