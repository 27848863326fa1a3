//! One peer: the connection with one remote rank in one pair of epochs.
//!
//! Owns: the peer's epoch (and the ones it retired), liveness bookkeeping,
//! the send and receive halves ([`send`], [`recv`]), its RTT estimator
//! ([`rtt`]), its timer table, and the choice of which packet to emit next
//! toward it (control first, then retransmissions, then new data).
//!
//! Must not: validate incoming headers (the endpoint does, before a peer is
//! involved), hold timers of other peers, or emit more than one packet per call.

pub(crate) mod recv;
pub(crate) mod rtt;
pub(crate) mod send;

use crate::time::Instant;
use crate::timer::PeerTimers;
use crate::{Config, Stats};
use mw_wire::{Flags, HeaderRepr, PacketType, HEADER_LEN};
use recv::RecvState;
use rtt::RttEstimator;
use send::SendState;

/// Who we are, for building headers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ids {
    pub(crate) job: u64,
    pub(crate) rank: u32,
    pub(crate) epoch: u32,
}

/// Epochs of earlier incarnations of a peer remembered to reject their late packets.
const RETIRED_EPOCHS: usize = 4;

/// What [`Peer::poll_transmit`] wrote: the packet header at the start of the
/// caller's buffer and, for a Data packet, which stream bytes form its
/// payload. The payload is not copied here: the endpoint either copies it
/// behind the header ([`send::SendState::copy_payload`]) or lends it out for
/// a vectored send ([`send::SendState::payload`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Emitted {
    /// Header bytes written (the whole packet for a control packet).
    pub(crate) head_len: usize,
    /// The Data packet whose payload follows the header.
    pub(crate) data: Option<send::DataPacket>,
}

impl Emitted {
    fn control(head_len: usize) -> Emitted {
        Emitted { head_len, data: None }
    }

    /// Header plus payload bytes (no MAC trailer).
    pub(crate) fn len(&self) -> usize {
        self.head_len + self.data.map_or(0, |p| p.len)
    }
}

/// The connection with one remote rank.
#[derive(Debug)]
pub(crate) struct Peer {
    pub(crate) rank: u32,
    /// The peer's epoch; 0 until its first packet arrives.
    pub(crate) epoch: u32,
    retired: [u32; RETIRED_EPOCHS],
    /// Declared dead; stays so until a packet with a new epoch arrives.
    pub(crate) dead: bool,
    pub(crate) send: SendState,
    pub(crate) recv: RecvState,
    pub(crate) rtt: RttEstimator,
    pub(crate) timers: PeerTimers,
    /// Queued in the endpoint's ready list.
    pub(crate) in_ready: bool,
    /// When the last valid packet from the peer arrived.
    pub(crate) last_heard: Option<Instant>,
    /// Since when we have been waiting on the peer (see [`Peer::is_waiting`]).
    pub(crate) busy_since: Option<Instant>,
    /// Answer a stale packet with a Reset addressed to this epoch.
    pub(crate) reset_owed: Option<u32>,
    /// Emit a Probe.
    pub(crate) probe_owed: bool,
    /// An ack-request Probe went out and no ack progress happened since.
    pub(crate) ack_probe_sent: bool,
    /// A keepalive Probe went out at this time and nothing was heard since.
    pub(crate) keepalive_sent: Option<Instant>,
}

impl Peer {
    pub(crate) fn new(config: &Config, rank: u32) -> Peer {
        Peer {
            rank,
            epoch: 0,
            retired: [0; RETIRED_EPOCHS],
            dead: false,
            send: SendState::new(config, 0),
            recv: RecvState::new(config),
            rtt: RttEstimator::new(config),
            timers: PeerTimers::default(),
            in_ready: false,
            last_heard: None,
            busy_since: None,
            reset_owed: None,
            probe_owed: false,
            ack_probe_sent: false,
            keepalive_sent: None,
        }
    }

    /// Whether `epoch` belonged to an earlier incarnation of this peer.
    pub(crate) fn is_retired(&self, epoch: u32) -> bool {
        self.retired.contains(&epoch)
    }

    /// Discards the whole connection (message ids keep counting) and, if
    /// `new_epoch` is given, adopts it and remembers the old one as retired.
    pub(crate) fn reset(&mut self, config: &Config, new_epoch: Option<u32>) {
        if let Some(epoch) = new_epoch {
            if self.epoch != 0 {
                self.retired.rotate_right(1);
                self.retired[0] = self.epoch;
            }
            self.epoch = epoch;
            self.dead = false;
        }
        self.send = SendState::new(config, self.send.next_msg());
        self.recv = RecvState::new(config);
        self.rtt = RttEstimator::new(config);
        self.busy_since = None;
        self.reset_owed = None;
        self.probe_owed = false;
        self.ack_probe_sent = false;
        self.keepalive_sent = None;
    }

    /// We are waiting on the peer: messages not yet reported acked, or an
    /// unanswered keepalive. Silence while waiting leads to a dead verdict.
    pub(crate) fn is_waiting(&self) -> bool {
        !self.dead && (self.send.unreported() > 0 || self.keepalive_sent.is_some())
    }

    /// Nothing queued, unacked, or owed toward this peer.
    pub(crate) fn is_quiescent(&self) -> bool {
        self.dead
            || (self.send.is_quiescent() && !self.recv.ack_owed() && self.reset_owed.is_none() && !self.probe_owed)
    }

    /// Writes the header of the next packet toward this peer into `buf` and
    /// says what payload follows it, or `None` when nothing may be sent now.
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        ids: Ids,
        buf: &mut [u8],
        stats: &mut Stats,
    ) -> Option<Emitted> {
        if self.dead {
            return None;
        }
        let watermark = self.send.watermark();
        if let Some(dst_epoch) = self.reset_owed.take() {
            stats.resets_sent += 1;
            let len = self.control(ids, PacketType::Reset, Flags::empty(), dst_epoch, watermark, buf);
            return Some(Emitted::control(len));
        }
        if self.recv.ack_due() {
            // Piggyback only on a Data packet whose own seq + 1 is the
            // watermark; otherwise the ack goes alone (causal completion).
            let piggyback = self.send.peek_next_seq().is_some_and(|seq| seq.wrapping_add(1) == watermark);
            if self.recv.nack_due() || !piggyback {
                let ptype = if self.recv.nack_due() { PacketType::Nack } else { PacketType::Ack };
                if ptype == PacketType::Nack {
                    stats.nacks_sent += 1;
                } else {
                    stats.acks_sent += 1;
                }
                return Some(Emitted::control(self.control(ids, ptype, Flags::ACK, self.epoch, watermark, buf)));
            }
        }
        if let Some(packet) = self.send.next_packet(now, self.rtt.rto()) {
            let mut flags = packet.flags;
            let (mut ack, mut sack) = (0, 0);
            if packet.seq.wrapping_add(1) == watermark {
                // The packet's own seq + 1 is the watermark the peer infers.
                flags = flags | Flags::ACK;
                (ack, sack) = self.recv.ack_fields();
                self.recv.on_ack_sent();
            }
            let repr = self.header(ids, PacketType::Data, flags, packet.len as u16, packet.seq, ack, sack);
            repr.emit_into(buf);
            match packet.retransmit {
                None => stats.data_sent += 1,
                Some(true) => stats.retransmits_timeout += 1,
                Some(false) => stats.retransmits_fast += 1,
            }
            return Some(Emitted { head_len: HEADER_LEN, data: Some(packet) });
        }
        if self.recv.ack_due() {
            stats.acks_sent += 1;
            return Some(Emitted::control(self.control(ids, PacketType::Ack, Flags::ACK, self.epoch, watermark, buf)));
        }
        if self.probe_owed {
            self.probe_owed = false;
            stats.probes_sent += 1;
            return Some(Emitted::control(self.control(
                ids,
                PacketType::Probe,
                Flags::empty(),
                self.epoch,
                watermark,
                buf,
            )));
        }
        None
    }

    #[allow(clippy::too_many_arguments)] // every header field is a distinct input; a struct would only rename them
    fn header(&self, ids: Ids, ptype: PacketType, flags: Flags, len: u16, seq: u32, ack: u32, sack: u64) -> HeaderRepr {
        HeaderRepr {
            packet_type: ptype,
            flags,
            payload_len: len,
            job_id: ids.job,
            src_rank: ids.rank,
            dst_rank: self.rank,
            src_epoch: ids.epoch,
            dst_epoch: self.epoch,
            seq,
            ack,
            sack,
        }
    }

    /// A payload-less control packet; `seq` carries our watermark.
    fn control(
        &mut self,
        ids: Ids,
        ptype: PacketType,
        flags: Flags,
        dst_epoch: u32,
        watermark: u32,
        buf: &mut [u8],
    ) -> usize {
        let (mut ack, mut sack) = (0, 0);
        if flags.contains(Flags::ACK) {
            (ack, sack) = self.recv.ack_fields();
            self.recv.on_ack_sent();
        }
        let mut repr = self.header(ids, ptype, flags, 0, watermark, ack, sack);
        repr.dst_epoch = dst_epoch;
        repr.emit_into(buf);
        HEADER_LEN
    }
}
