//! Counters.
//!
//! Owns: [`Stats`] (per endpoint, updated on every packet), [`DropCounts`],
//! and [`PeerStats`] (a snapshot of one peer's connection state).
//!
//! Must not: influence protocol decisions; counters are only ever written.

use crate::time::Duration;
use crate::DropReason;

/// Packets rejected by [`Endpoint::handle_datagram`](crate::Endpoint::handle_datagram)
/// (and [`Endpoint::accept_mcast`](crate::Endpoint::accept_mcast)), one
/// counter per reason: each [`DropReason`], and each [`mw_wire::Error`] of
/// a packet that does not parse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DropCounts {
    /// Shorter than a header, or than the payload and trailer its header announces.
    pub truncated: u64,
    /// Not memwire's magic number: not our packet at all.
    pub bad_magic: u64,
    /// A memwire packet of another protocol version.
    pub bad_version: u64,
    /// Unknown packet type (or, for a multicast segment, a non-multicast packet).
    pub unknown_type: u64,
    /// Longer than its header announces, or a length field out of its range.
    pub bad_length: u64,
    /// A field combination no sender produces (reserved flag bits, a MAC and
    /// a checksum together, epoch 0, a segment continuing no message…).
    pub malformed: u64,
    /// Longer than `Config::max_datagram` ([`DropReason::Oversized`]).
    pub oversized: u64,
    /// Segments adding up to a message longer than `Config::max_message`
    /// ([`DropReason::OversizedMessage`]); the message is discarded.
    pub oversized_message: u64,
    /// Checksum missing, wrong, or unexpected ([`DropReason::BadChecksum`]):
    /// corrupted on the way, or a peer that disagrees on checksumming.
    pub bad_checksum: u64,
    /// Another job's packet.
    pub wrong_job: u64,
    /// Addressed to another rank.
    pub wrong_target: u64,
    /// From a rank outside the job (or claiming to be us).
    pub unknown_peer: u64,
    /// Addressed to an earlier incarnation of us, or from an earlier one of the peer.
    pub stale_epoch: u64,
    /// Data we already had (a retransmission or network duplicate).
    pub duplicate: u64,
    /// Data beyond the receive window.
    pub out_of_window: u64,
    /// MAC missing, wrong, or unverifiable.
    pub bad_mac: u64,
    /// From a peer we declared dead (same incarnation).
    pub dead_peer: u64,
    /// Would have changed a peer's epoch without proving it
    /// ([`DropReason::UnprovenEpoch`]): forged or corrupted.
    pub unproven_epoch: u64,
}

impl DropCounts {
    pub(crate) fn count(&mut self, reason: &DropReason) {
        let slot = match reason {
            DropReason::Malformed(e) => match e {
                mw_wire::Error::Truncated => &mut self.truncated,
                mw_wire::Error::BadMagic => &mut self.bad_magic,
                mw_wire::Error::BadVersion => &mut self.bad_version,
                mw_wire::Error::UnknownType => &mut self.unknown_type,
                mw_wire::Error::BadLength => &mut self.bad_length,
                _ => &mut self.malformed,
            },
            DropReason::Oversized => &mut self.oversized,
            DropReason::OversizedMessage => &mut self.oversized_message,
            DropReason::BadChecksum => &mut self.bad_checksum,
            DropReason::WrongJob => &mut self.wrong_job,
            DropReason::WrongTarget => &mut self.wrong_target,
            DropReason::UnknownPeer => &mut self.unknown_peer,
            DropReason::StaleEpoch => &mut self.stale_epoch,
            DropReason::Duplicate => &mut self.duplicate,
            DropReason::OutOfWindow => &mut self.out_of_window,
            DropReason::BadMac => &mut self.bad_mac,
            DropReason::DeadPeer => &mut self.dead_peer,
            DropReason::UnprovenEpoch => &mut self.unproven_epoch,
        };
        *slot += 1;
    }

    /// Every counter with its name, in declaration order (for printing).
    pub fn by_reason(&self) -> [(&'static str, u64); 18] {
        [
            ("truncated", self.truncated),
            ("bad_magic", self.bad_magic),
            ("bad_version", self.bad_version),
            ("unknown_type", self.unknown_type),
            ("bad_length", self.bad_length),
            ("malformed", self.malformed),
            ("oversized", self.oversized),
            ("oversized_message", self.oversized_message),
            ("bad_checksum", self.bad_checksum),
            ("wrong_job", self.wrong_job),
            ("wrong_target", self.wrong_target),
            ("unknown_peer", self.unknown_peer),
            ("stale_epoch", self.stale_epoch),
            ("duplicate", self.duplicate),
            ("out_of_window", self.out_of_window),
            ("bad_mac", self.bad_mac),
            ("dead_peer", self.dead_peer),
            ("unproven_epoch", self.unproven_epoch),
        ]
    }

    /// Packets that were not well-formed memwire packets of this job's
    /// configuration, whatever the exact reason: truncated, bad magic,
    /// version, type or length, malformed, oversized (datagram or message),
    /// or a bad checksum.
    pub fn not_well_formed(&self) -> u64 {
        self.truncated
            + self.bad_magic
            + self.bad_version
            + self.unknown_type
            + self.bad_length
            + self.malformed
            + self.oversized
            + self.oversized_message
            + self.bad_checksum
    }

    /// Sum over all reasons.
    pub fn total(&self) -> u64 {
        self.by_reason().iter().map(|(_, n)| n).sum()
    }
}

impl core::fmt::Display for DropCounts {
    /// `total N` followed by `reason=count` for each nonzero counter.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "total {}", self.total())?;
        for (name, n) in self.by_reason() {
            if n != 0 {
                write!(f, " {name}={n}")?;
            }
        }
        Ok(())
    }
}

/// Per-endpoint counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams returned by `poll_transmit` (raw datagrams built by `encode_raw` are not counted).
    pub packets_sent: u64,
    /// Bytes of those datagrams.
    pub bytes_sent: u64,
    /// Datagrams fed to `handle_datagram`, accepted or not.
    pub packets_received: u64,
    /// Bytes of those datagrams.
    pub bytes_received: u64,
    /// Data packets sent for the first time.
    pub data_sent: u64,
    /// Data packets that passed the header, job and MAC checks, duplicates
    /// included (a duplicate on a lossless path is a spurious retransmission).
    pub data_received: u64,
    /// Data packets retransmitted because the RTO expired (seed 004, PM/UDP S4).
    pub retransmits_timeout: u64,
    /// Data packets retransmitted early, on a Nack or SACK evidence (PM/UDP S3).
    pub retransmits_fast: u64,
    /// Standalone Ack packets sent.
    pub acks_sent: u64,
    /// Nack packets sent (one per newly detected hole run).
    pub nacks_sent: u64,
    /// Nack packets received.
    pub nacks_received: u64,
    /// Probe packets sent (ack requests with no data to carry them, keepalives).
    pub probes_sent: u64,
    /// Reset packets sent in answer to packets for an earlier incarnation of us.
    pub resets_sent: u64,
    /// Messages accepted by `submit`.
    pub messages_submitted: u64,
    /// Whole messages passed to the `deliver` callback.
    pub messages_delivered: u64,
    /// Raw datagrams received and queued as events.
    pub raw_received: u64,
    /// Peers declared dead.
    pub peers_dead: u64,
    /// Peer restarts noticed.
    pub peers_restarted: u64,
    /// Times this endpoint noticed it had not been running for a while
    /// (stopped or starved) and restarted its peers' silence clocks.
    pub stalls_forgiven: u64,
    /// Multicast segments built by `encode_mcast` (to the group or as repairs).
    pub mcast_sent: u64,
    /// Multicast segments accepted by `accept_mcast`.
    pub mcast_received: u64,
    /// Rejected datagrams by reason (multicast segments included).
    pub drops: DropCounts,
}

impl core::fmt::Display for Stats {
    /// A few labelled lines (no trailing newline), for `MW_STATS` output and logs.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        writeln!(
            f,
            "packets    sent {} ({} B), received {} ({} B)",
            self.packets_sent, self.bytes_sent, self.packets_received, self.bytes_received
        )?;
        writeln!(
            f,
            "data       {} sent once, {} retransmitted on timeout, {} fast; {} received ({} duplicates)",
            self.data_sent, self.retransmits_timeout, self.retransmits_fast, self.data_received, self.drops.duplicate
        )?;
        writeln!(
            f,
            "control    acks {} sent, nacks {} sent / {} received, probes {}, resets {}",
            self.acks_sent, self.nacks_sent, self.nacks_received, self.probes_sent, self.resets_sent
        )?;
        writeln!(
            f,
            "messages   {} submitted, {} delivered, {} raw received",
            self.messages_submitted, self.messages_delivered, self.raw_received
        )?;
        writeln!(
            f,
            "peers      {} declared dead, {} restarts noticed, {} stalls forgiven",
            self.peers_dead, self.peers_restarted, self.stalls_forgiven
        )?;
        writeln!(f, "multicast  {} segments sent, {} accepted", self.mcast_sent, self.mcast_received)?;
        write!(f, "drops      {}", self.drops)
    }
}

/// A snapshot of one peer's connection, for diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerStats {
    /// The peer's epoch, once a packet from it has been seen.
    pub epoch: Option<u32>,
    /// Declared dead (until it restarts with a new epoch).
    pub dead: bool,
    /// Smoothed round-trip time, once measured.
    pub srtt: Option<Duration>,
    /// Current retransmission timeout, backoff included.
    pub rto: Duration,
    /// Congestion window in packets.
    pub cwnd: u32,
    /// Slow-start threshold in packets.
    pub ssthresh: u32,
    /// Data packets in flight (sent, neither acked nor deemed lost).
    pub inflight: u32,
    /// Payload bytes in flight.
    pub inflight_bytes: usize,
    /// Bytes submitted but not yet sent once.
    pub queued_bytes: usize,
    /// Messages submitted and not yet reported by an `Acked` event.
    pub unacked_messages: usize,
    /// Next sequence number expected from the peer.
    pub rcv_nxt: u32,
    /// Out-of-order packets buffered from the peer.
    pub out_of_order: u32,
    /// Bytes of the peer's message in progress held for reassembly (at most
    /// `Config::max_message`).
    pub reassembly_bytes: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_counter_and_prints_by_name() {
        let mut d = DropCounts::default();
        let reasons = [
            DropReason::Malformed(mw_wire::Error::Truncated),
            DropReason::Malformed(mw_wire::Error::BadMagic),
            DropReason::Malformed(mw_wire::Error::BadVersion),
            DropReason::Malformed(mw_wire::Error::UnknownType),
            DropReason::Malformed(mw_wire::Error::BadLength),
            DropReason::Malformed(mw_wire::Error::Malformed),
            DropReason::Oversized,
            DropReason::OversizedMessage,
            DropReason::BadChecksum,
            DropReason::WrongJob,
            DropReason::WrongTarget,
            DropReason::UnknownPeer,
            DropReason::StaleEpoch,
            DropReason::Duplicate,
            DropReason::OutOfWindow,
            DropReason::BadMac,
            DropReason::DeadPeer,
            DropReason::UnprovenEpoch,
        ];
        for (i, reason) in reasons.iter().enumerate() {
            for _ in 0..=i {
                d.count(reason);
            }
        }
        // Reason i was counted i + 1 times, into counter i and no other.
        for (i, (name, n)) in d.by_reason().into_iter().enumerate() {
            assert_eq!(n, i as u64 + 1, "{name}");
        }
        assert_eq!(d.total(), (1..=18).sum::<u64>());
        assert_eq!(d.not_well_formed(), (1..=9).sum::<u64>());
        let text = d.to_string();
        assert!(text.starts_with("total 171 truncated=1 bad_magic=2 bad_version=3"), "{text}");
        assert!(text.ends_with("dead_peer=17 unproven_epoch=18"), "{text}");
        assert_eq!(DropCounts::default().to_string(), "total 0");
        let stats = Stats { packets_sent: 5, drops: d, ..Stats::default() };
        let shown = stats.to_string();
        assert_eq!(shown.lines().count(), 7, "{shown}");
        assert!(shown.starts_with("packets    sent 5 (0 B)"), "{shown}");
    }
}
