//! Protocol tuning knobs.
//!
//! Owns: [`Config`] and its defaults. Every rank of a job must use the same
//! `max_datagram`, `max_message`, `recv_window`, `initial_seq`, `auth` and
//! `checksum` (a rank drops datagrams longer than its `max_datagram` and
//! messages longer than its `max_message`, the sender sizes its window from
//! its own `recv_window`, both ends start sequence numbers at `initial_seq`,
//! and a rank rejects packets it cannot authenticate or checksum); the other
//! fields may differ per rank.
//!
//! Must not: read the environment or files (the endpoint layer maps `MW_*`
//! variables onto these fields).

use crate::auth::{trailer_len, AuthKey};
use crate::time::Duration;
use mw_wire::HEADER_LEN;

/// Tuning of the reliability protocol. [`Config::default`] suits a LAN or
/// loopback; the comments give the reasoning for each default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Largest datagram the protocol emits, header and trailer included; a
    /// received datagram longer than this is dropped (`DropReason::Oversized`).
    /// Sets the segment size: `max_datagram - 48` payload bytes per Data
    /// packet (16 fewer with `auth`, 4 fewer with `checksum`). Default 1472 =
    /// Ethernet MTU 1500 - IPv4 20 - UDP 8, so no IP fragmentation on a
    /// standard LAN. Must be in `49..=65583`.
    pub max_datagram: usize,
    /// Largest message [`Endpoint::submit`](crate::Endpoint::submit) accepts
    /// and a receiver reassembles. A peer whose segments add up to more (no
    /// correct sender does) has the message discarded and counted
    /// (`DropReason::OversizedMessage`) instead of growing the reassembly
    /// buffer without bound: this caps the memory one peer can make us hold
    /// for a message in progress. Default 64 MiB + 64 KiB: the largest
    /// operation chunk the endpoint layer allows (`MW_CHUNK`) plus room for
    /// operation headers. Must be at least 1.
    pub max_message: usize,
    /// Longest a receiver delays an acknowledgement hoping to coalesce it with
    /// more acks or piggyback it on reverse Data. Default 50 µs: a couple of
    /// LAN round trips. A lone put completes only when its ack arrives, so
    /// this delay is its completion time whenever no reverse Data comes
    /// sooner, which argues for a short delay; a shorter one than the
    /// default costs collectives on oversubscribed CPUs, whose acks then no
    /// longer ride on reverse Data and each take a syscall (measurements:
    /// docs/perf-notes.md, "ack delay and window bytes"). Ping-pongs ride
    /// their acks on the reply either way, and bulk transfers are acked every
    /// `ack_every` packets when those come faster than this (the simulated
    /// 1 Gb/s bulk transfer of `crates/sim/tests/goodput.rs` sends more acks
    /// at the same goodput). Flushes ask for an immediate ack
    /// (`ACK_NOW`). Also added to the sender's RTO, since the peer may
    /// legitimately hold its ack that long.
    pub max_ack_delay: Duration,
    /// Acknowledge at least every this many in-order Data packets. Default
    /// 32: one ack per ~45 KiB of LAN datagrams (PM/UDP's "Ack
    /// compression"), so a bulk sender refills its window in bursts that
    /// make GSO sends and GRO receives of a few dozen datagrams (8 made one
    /// ack per receive batch and bursts of 5-12 datagrams between hosts).
    /// A sender with fewer than twice this many packets in flight asks for an
    /// immediate ack on the packet that fills its window, so a small window
    /// never waits on a delayed ack; senders assume their peers use their
    /// own value. Minimum 1.
    pub ack_every: u32,
    /// Acknowledge at least every this many bytes of in-order payload, too.
    /// Default 128 KiB: with LAN datagrams `ack_every` acts first (32 × 1424
    /// bytes), with 64 KB loopback datagrams this does (an ack every two), so
    /// that a byte-limited window (`max_window_bytes`) of a few large
    /// datagrams is replenished before it runs dry. Minimum 1.
    pub ack_every_bytes: usize,
    /// Retransmission timeout before any RTT sample (RFC 6298 §2.1 says 1 s for
    /// the Internet; on a LAN 1 ms is already hundreds of round trips).
    pub rto_initial: Duration,
    /// Floor of the computed RTO. Default 200 µs: above loopback/LAN RTT plus
    /// scheduling noise, far below the Internet's 1 s (RFC 6298 §2.4), which
    /// would make every tail loss cost a second.
    pub rto_min: Duration,
    /// Ceiling of the RTO after exponential backoff. Default 100 ms, so a
    /// silent peer is probed ~20 times within `peer_dead_after`; that keeps
    /// false "dead" verdicts negligible even under heavy loss.
    pub rto_max: Duration,
    /// Congestion window (packets in flight) of a new connection. Default 32
    /// ≈ 45 KiB: about the bandwidth-delay product of 10 Gb/s × 40 µs.
    pub initial_window: u32,
    /// Smallest congestion window; loss never shrinks it further. Default 2.
    pub min_window: u32,
    /// Largest congestion window in packets. Default 256 (≈ 360 KiB at 1472 B).
    pub max_window: u32,
    /// Share of a round trip's packets (percent, 0-100) that may be lost
    /// before the losses count as congestion. A loss detected while the
    /// current round's losses stay at or below this share of the congestion
    /// window (or are its first), and while the RTT shows no queue building (the latest sample
    /// at most twice the connection's smallest plus 100 µs), is
    /// retransmitted without shrinking the window: random loss on
    /// an uncongested path (a flaky link, a dropping middlebox) then costs
    /// only its retransmissions, where halving per loss would hold the
    /// window near `sqrt(1.5 / loss)` packets. Losses above the share, a
    /// retransmission lost again, and a timeout shrink it as before, so a
    /// queue that overflows (incast, a slower receiver) still throttles
    /// the senders. `0` reacts to every loss (RFC 5681). Default 10.
    pub loss_tolerance_pct: u32,
    /// Cap on unacknowledged payload bytes in flight per peer, whatever the
    /// packet count. Default 384 KiB: above `max_window` LAN datagrams (256
    /// × 1424 bytes ≈ 356 KiB), so it only limits large datagrams (jumbo
    /// frames, 64 KB on loopback), where six in flight with an ack every
    /// two (`ack_every_bytes`) keep the pipe full. More does not help there
    /// and hurts: every byte in flight sits in the retransmission buffer,
    /// which the sender copied it into and the kernel copies it out of, and
    /// at this default both stay warm in the caches (measurements:
    /// docs/perf-notes.md, "ack delay and window bytes"). Should stay below
    /// the peer's socket receive buffer.
    pub max_window_bytes: usize,
    /// How far past the cumulative ack a receiver buffers out-of-order packets
    /// (and so how far past its oldest unacked packet a sender may run).
    /// Default 256: ≥ `max_window`, so the congestion window is what limits.
    /// SACK reports the first 64 beyond the cumulative ack; later ones are
    /// still kept and covered once the hole fills. Memory for the buffer is
    /// allocated only when packets actually arrive out of order.
    pub recv_window: u32,
    /// A peer from which nothing has been heard for this long while we wait on
    /// it (unacked data, or an unanswered keepalive probe) is declared dead and
    /// everything pending toward it fails. Default 2 s: ~20 backed-off
    /// retransmissions must all go unanswered first.
    pub peer_dead_after: Duration,
    /// When set, an idle peer we have talked to is probed after this much
    /// silence, so its death is noticed even without traffic. Default `None`:
    /// no background traffic unless asked for.
    pub keepalive: Option<Duration>,
    /// First sequence number of every connection. 0 in production; tests set
    /// it near `u32::MAX` to exercise wraparound. Must match on all ranks.
    pub initial_seq: u32,
    /// When set, every packet carries a 16-byte MAC under this key and every
    /// packet without a valid one is dropped (`DropReason::BadMac`). Default
    /// `None`: the endpoint layer turns it on between hosts.
    pub auth: Option<AuthKey>,
    /// When set, every packet carries a 4-byte CRC32C trailer, verified
    /// before any other field of a received packet is used (only magic and
    /// version are looked at first); a packet without a matching one is
    /// dropped (`DropReason::BadChecksum`). It catches corruption the UDP
    /// checksum let through (a middlebox that rewrote the packet and
    /// recomputed it, or a 1-in-65536 collision) when packets are not
    /// authenticated; the MAC already does, so the two are exclusive.
    /// Default `false`: the endpoint layer turns it on between hosts when
    /// authentication is off, and leaves loopback without it.
    pub checksum: bool,
    /// Without authentication (`auth` is `None`), the job's MAC key used to
    /// prove epochs: a packet that announces its sender's epoch (destination
    /// epoch 0, or a Reset) carries a MAC under it instead of the checksum,
    /// and a packet that would change a known peer's epoch (a restart), or
    /// set an unknown peer's without naming this endpoint's, is accepted
    /// only with a valid one; without, it is dropped
    /// ([`DropReason::UnprovenEpoch`](crate::DropReason::UnprovenEpoch)).
    /// So a forged or corrupted datagram with another source epoch cannot
    /// make a live peer look restarted, and a restarted peer is still
    /// recognised. Every packet reserves room for the MAC (16 bytes less
    /// payload per datagram). Default `None`: epochs are taken as they come.
    /// Ranks of one job must agree.
    pub epoch_key: Option<AuthKey>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_datagram: 1472,
            max_message: (64 << 20) + (64 << 10),
            max_ack_delay: Duration::from_micros(50),
            ack_every: 32,
            ack_every_bytes: 128 << 10,
            rto_initial: Duration::from_millis(1),
            rto_min: Duration::from_micros(200),
            rto_max: Duration::from_millis(100),
            initial_window: 32,
            min_window: 2,
            max_window: 256,
            loss_tolerance_pct: 10,
            max_window_bytes: 384 << 10,
            recv_window: 256,
            peer_dead_after: Duration::from_secs(2),
            keepalive: None,
            initial_seq: 0,
            auth: None,
            checksum: false,
            epoch_key: None,
        }
    }
}

/// Why a [`Config`] cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `max_datagram` leaves no room for payload, or exceeds what `payload_len` can describe.
    MaxDatagram,
    /// A window is zero, `min_window <= initial_window <= max_window` does
    /// not hold, or `loss_tolerance_pct` is above 100.
    Window,
    /// `recv_window` is zero or above 2^20.
    RecvWindow,
    /// `rto_min <= rto_initial <= rto_max` does not hold, or `rto_min` is zero.
    Rto,
    /// `ack_every` or `ack_every_bytes` is zero.
    AckEvery,
    /// `max_message` is zero.
    MaxMessage,
    /// Both `auth` and `checksum` are set: a packet carries one trailer at most.
    Trailer,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ConfigError::MaxDatagram => "max_datagram out of range",
            ConfigError::Window => "inconsistent congestion window limits (or loss_tolerance_pct above 100)",
            ConfigError::RecvWindow => "recv_window out of range",
            ConfigError::Rto => "inconsistent RTO limits",
            ConfigError::AckEvery => "ack_every and ack_every_bytes must be at least 1",
            ConfigError::MaxMessage => "max_message must be at least 1",
            ConfigError::Trailer => "auth and checksum are exclusive (the MAC already detects corruption)",
        })
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Checks the invariants [`Endpoint::new`](crate::Endpoint::new) relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.auth.is_some() && self.checksum {
            return Err(ConfigError::Trailer);
        }
        let trailer = trailer_len(self);
        if self.max_datagram <= HEADER_LEN + trailer || self.max_datagram > HEADER_LEN + usize::from(u16::MAX) + trailer
        {
            return Err(ConfigError::MaxDatagram);
        }
        if self.min_window == 0
            || self.min_window > self.initial_window
            || self.initial_window > self.max_window
            || self.loss_tolerance_pct > 100
        {
            return Err(ConfigError::Window);
        }
        if self.recv_window == 0 || self.recv_window > 1 << 20 {
            return Err(ConfigError::RecvWindow);
        }
        if self.rto_min.is_zero() || self.rto_min > self.rto_initial || self.rto_initial > self.rto_max {
            return Err(ConfigError::Rto);
        }
        if self.ack_every == 0 || self.ack_every_bytes == 0 {
            return Err(ConfigError::AckEvery);
        }
        if self.max_message == 0 {
            return Err(ConfigError::MaxMessage);
        }
        Ok(())
    }

    /// Payload bytes per Data packet.
    pub fn segment_size(&self) -> usize {
        self.max_datagram - HEADER_LEN - trailer_len(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        let c = Config::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.segment_size(), 1424);
        assert_eq!(Config { ack_every: 0, ..Config::default() }.validate(), Err(ConfigError::AckEvery));
        assert_eq!(Config { max_datagram: 48, ..Config::default() }.validate(), Err(ConfigError::MaxDatagram));
        let auth = Config { auth: Some(AuthKey::from_bytes([1; 32])), ..Config::default() };
        assert_eq!(auth.segment_size(), 1408);
        assert_eq!(Config { max_datagram: 64, ..auth.clone() }.validate(), Err(ConfigError::MaxDatagram));
        let crc = Config { checksum: true, ..Config::default() };
        assert_eq!(crc.validate(), Ok(()));
        assert_eq!(crc.segment_size(), 1420);
        assert_eq!(Config { checksum: true, ..auth }.validate(), Err(ConfigError::Trailer));
        assert_eq!(Config { max_message: 0, ..Config::default() }.validate(), Err(ConfigError::MaxMessage));
    }
}
