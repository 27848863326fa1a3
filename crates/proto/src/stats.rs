//! Counters.
//!
//! Owns: [`Stats`] (per endpoint, updated on every packet), [`DropCounts`],
//! and [`PeerStats`] (a snapshot of one peer's connection state).
//!
//! Must not: influence protocol decisions; counters are only ever written.

use crate::time::Duration;
use crate::DropReason;

/// Packets rejected by [`Endpoint::handle_datagram`](crate::Endpoint::handle_datagram), by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DropCounts {
    /// Not a well-formed memwire packet ([`DropReason::Malformed`]).
    pub malformed: u64,
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
}

impl DropCounts {
    pub(crate) fn count(&mut self, reason: &DropReason) {
        let slot = match reason {
            DropReason::Malformed(_) => &mut self.malformed,
            DropReason::WrongJob => &mut self.wrong_job,
            DropReason::WrongTarget => &mut self.wrong_target,
            DropReason::UnknownPeer => &mut self.unknown_peer,
            DropReason::StaleEpoch => &mut self.stale_epoch,
            DropReason::Duplicate => &mut self.duplicate,
            DropReason::OutOfWindow => &mut self.out_of_window,
            DropReason::BadMac => &mut self.bad_mac,
            DropReason::DeadPeer => &mut self.dead_peer,
        };
        *slot += 1;
    }

    /// Sum over all reasons.
    pub fn total(&self) -> u64 {
        self.malformed
            + self.wrong_job
            + self.wrong_target
            + self.unknown_peer
            + self.stale_epoch
            + self.duplicate
            + self.out_of_window
            + self.bad_mac
            + self.dead_peer
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
}
