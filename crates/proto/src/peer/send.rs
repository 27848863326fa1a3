//! Send side of one connection: the byte stream of submitted messages, the
//! packets in flight, loss detection, and the congestion window.
//!
//! Owns: sequence-number assignment (seed 004, PM/UDP S1), the retransmission
//! copies (the submitted bytes stay in one stream buffer until cumulatively
//! acked; a packet is just an offset and a length into it, S2), the SACK
//! scoreboard, fast retransmission on Nack or SACK evidence (S3), the RTO
//! deadline (S4), the AIMD window, and which messages are acked and which of
//! those acks may be reported yet (causal completion, see [`SendState::release`]).
//!
//! Must not: write headers, look at the receive side, or read the clock.

use super::rtt::RttEstimator;
use crate::time::{Duration, Instant};
use crate::{seq_lt, Config, MsgId};
use mw_wire::Flags;
use std::collections::VecDeque;

/// Packets later in transmission order that must be acked before an unacked
/// one counts as lost (the "3 duplicate acks" of RFC 5681, as RFC 9002's
/// packet threshold). A Nack lowers it to 1: the receiver says the hole is real.
const PACKET_THRESHOLD: u64 = 3;
/// Causal-completion holds kept before neighbouring ones are merged.
const MAX_HOLDS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PktState {
    /// Sent, no news yet.
    InFlight,
    /// Reported received by the SACK bitmap; waits for the cumulative ack.
    Sacked,
    /// Deemed lost, queued for retransmission.
    Lost { by_timeout: bool },
}

#[derive(Debug, Clone)]
struct SentPacket {
    /// Stream offset of the payload.
    off: u64,
    len: u32,
    /// FIRST/LAST.
    flags: Flags,
    /// Transmission number of the latest transmission (1-based, monotone).
    tx: u64,
    sent_at: Instant,
    /// Ever retransmitted: Karn's rule takes no RTT sample from it.
    retransmitted: bool,
    /// The latest transmission was a timeout retransmission: an ack for it
    /// may well be for an earlier copy that was only late.
    by_timeout: bool,
    state: PktState,
}

/// One Data packet chosen for transmission.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DataPacket {
    pub(crate) seq: u32,
    pub(crate) flags: Flags,
    pub(crate) off: u64,
    pub(crate) len: usize,
    /// `Some(by_timeout)` for a retransmission.
    pub(crate) retransmit: Option<bool>,
}

/// What one ack newly acknowledged (cumulatively or by SACK), for loss
/// detection and RTT sampling.
#[derive(Debug, Default)]
struct NewlyAcked {
    /// The newest (by transmission) of them: (tx, sent_at, ever retransmitted).
    newest: Option<(u64, Instant, bool)>,
    /// The newest of them whose latest transmission was not a timeout
    /// retransmission: (tx, sent_at).
    newest_unambiguous: Option<(u64, Instant)>,
    /// The oldest transmission among them of a packet never retransmitted.
    oldest_original: Option<u64>,
}

impl NewlyAcked {
    fn note(&mut self, p: &SentPacket) {
        if self.newest.is_none_or(|(tx, _, _)| tx < p.tx) {
            self.newest = Some((p.tx, p.sent_at, p.retransmitted));
        }
        if !p.by_timeout && self.newest_unambiguous.is_none_or(|(tx, _)| tx < p.tx) {
            self.newest_unambiguous = Some((p.tx, p.sent_at));
        }
        if !p.retransmitted && self.oldest_original.is_none_or(|tx| p.tx < tx) {
            self.oldest_original = Some(p.tx);
        }
    }

    /// Whether the newest of them is a timeout retransmission whose ack
    /// shows the RTO was spurious (see `SendState::on_ack`).
    fn spurious_timeout(&self) -> bool {
        match (self.newest, self.newest_unambiguous) {
            (Some((tx, _, _)), unambiguous) if unambiguous.is_none_or(|(u, _)| u < tx) => {
                self.oldest_original.is_some_and(|original| original < tx)
            }
            _ => false,
        }
    }
}

/// The send half of a connection.
#[derive(Debug)]
pub(crate) struct SendState {
    /// Submitted bytes from `stream_base` on: first the sent-but-unacked
    /// ones (the retransmission source), then the unsent ones.
    stream: VecDeque<u8>,
    stream_base: u64,
    /// Stream offset of the first byte never sent.
    sent_off: u64,
    /// End offsets of the messages not yet completely sent.
    unsent: VecDeque<u64>,
    /// The first packet of `unsent.front()` has gone out.
    cur_started: bool,
    /// Oldest unacknowledged sequence number.
    snd_una: u32,
    /// Next sequence number not assigned to any submitted message: the
    /// watermark sent in control packets.
    snd_assigned: u32,
    /// Packets `snd_una ..` that have been sent at least once.
    sent: VecDeque<SentPacket>,
    /// (tx, seq) in transmission order; the loss sweep consumes it from the front.
    sent_log: VecDeque<(u64, u32)>,
    /// Sequence numbers deemed lost, to retransmit before new data.
    lost: VecDeque<u32>,
    next_tx: u64,
    largest_acked_tx: u64,
    largest_acked_sent_at: Instant,
    inflight: u32,
    inflight_bytes: usize,
    cwnd: u32,
    ssthresh: u32,
    cwnd_acc: u32,
    /// Losses of packets sent before this transmission number belong to the
    /// congestion event already reacted to.
    recovery_tx: u64,
    /// The current round trip ends when a packet sent at or after this
    /// transmission number is acknowledged.
    round_end_tx: u64,
    /// Losses detected in the current round trip.
    round_losses: u32,
    /// `Config::loss_tolerance_pct`.
    loss_tolerance_pct: u32,
    /// Send the next lost packet even if the window is full (RTO).
    force_one: bool,
    /// (cwnd, ssthresh) before the current series of RTOs, restored if the
    /// ack of the timeout retransmission shows the RTO was spurious.
    before_rto: Option<(u32, u32)>,
    /// Acks that acknowledged nothing new while naming `snd_una` as missing,
    /// counted once that packet's latest transmission has had time to arrive.
    dup_acks: u64,
    rto_deadline: Option<Instant>,
    /// The packet with this sequence number carries `ACK_NOW` (request_ack).
    ack_request: Option<u32>,
    /// Message ids: next to assign, first not yet acked, first not yet reported.
    next_msg: u64,
    acked_msgs: u64,
    reported_msgs: u64,
    /// (peer watermark, acked_msgs) pairs waiting for causal completion.
    holds: VecDeque<(u32, u64)>,
    seg: usize,
    /// The receiver's `Config::ack_every` and `ack_every_bytes`, assumed
    /// to be ours.
    ack_every: u32,
    ack_every_bytes: usize,
    recv_window: u32,
    min_window: u32,
    max_window: u32,
    max_bytes: usize,
}

impl SendState {
    /// A fresh connection whose first message gets id `first_msg`.
    pub(crate) fn new(config: &Config, first_msg: u64) -> SendState {
        SendState {
            stream: VecDeque::new(),
            stream_base: 0,
            sent_off: 0,
            unsent: VecDeque::new(),
            cur_started: false,
            snd_una: config.initial_seq,
            snd_assigned: config.initial_seq,
            sent: VecDeque::new(),
            sent_log: VecDeque::new(),
            lost: VecDeque::new(),
            next_tx: 1,
            largest_acked_tx: 0,
            largest_acked_sent_at: Instant::ZERO,
            inflight: 0,
            inflight_bytes: 0,
            cwnd: config.initial_window,
            ssthresh: config.max_window,
            cwnd_acc: 0,
            recovery_tx: 0,
            round_end_tx: 0,
            round_losses: 0,
            loss_tolerance_pct: config.loss_tolerance_pct,
            force_one: false,
            before_rto: None,
            dup_acks: 0,
            rto_deadline: None,
            ack_request: None,
            next_msg: first_msg,
            acked_msgs: first_msg,
            reported_msgs: first_msg,
            holds: VecDeque::new(),
            seg: config.segment_size(),
            ack_every: config.ack_every.max(1),
            ack_every_bytes: config.ack_every_bytes.max(1),
            recv_window: config.recv_window,
            min_window: config.min_window,
            max_window: config.max_window,
            max_bytes: config.max_window_bytes,
        }
    }

    fn stream_end(&self) -> u64 {
        self.stream_base + self.stream.len() as u64
    }

    fn snd_nxt(&self) -> u32 {
        self.snd_una.wrapping_add(self.sent.len() as u32)
    }

    /// Queues one message (the concatenation of `parts`); seed 004, PM/UDP S1:
    /// its segments get the next consecutive sequence numbers right away, so
    /// the watermark covers everything submitted.
    pub(crate) fn submit(&mut self, parts: &[&[u8]]) -> MsgId {
        let mut len = 0u64;
        for part in parts {
            self.stream.extend(part.iter());
            len += part.len() as u64;
        }
        self.unsent.push_back(self.stream_end());
        let segments = len.div_ceil(self.seg as u64).max(1);
        self.snd_assigned = self.snd_assigned.wrapping_add(segments as u32);
        self.next_msg += 1;
        MsgId(self.next_msg - 1)
    }

    /// The watermark: next sequence number not assigned.
    pub(crate) fn watermark(&self) -> u32 {
        self.snd_assigned
    }

    /// Bytes submitted but never sent.
    pub(crate) fn queued_bytes(&self) -> usize {
        (self.stream_end() - self.sent_off) as usize
    }

    /// Messages submitted and not yet reported acknowledged.
    pub(crate) fn unreported(&self) -> u64 {
        self.next_msg - self.reported_msgs
    }

    /// Id of the newest message not yet reported, if any: what fails when the
    /// connection is torn down.
    pub(crate) fn failed_upto(&self) -> Option<MsgId> {
        (self.unreported() > 0).then(|| MsgId(self.next_msg - 1))
    }

    /// The id the next submitted message will get.
    pub(crate) fn next_msg(&self) -> u64 {
        self.next_msg
    }

    /// Nothing queued, in flight, or waiting to be reported.
    pub(crate) fn is_quiescent(&self) -> bool {
        self.unsent.is_empty() && self.sent.is_empty() && self.unreported() == 0
    }

    /// Every submitted packet has been sent at least once.
    pub(crate) fn all_sent(&self) -> bool {
        self.unsent.is_empty()
    }

    /// Sent packets await acknowledgement.
    pub(crate) fn outstanding(&self) -> bool {
        !self.sent.is_empty()
    }

    pub(crate) fn rto_deadline(&self) -> Option<Instant> {
        self.rto_deadline
    }

    /// Makes the packet that will carry the last byte queued so far ask for
    /// an immediate ack.
    pub(crate) fn request_ack_on_last(&mut self) {
        if !self.unsent.is_empty() {
            self.ack_request = Some(self.snd_assigned.wrapping_sub(1));
        }
    }

    fn window_open(&self, len: usize) -> bool {
        (self.sent.len() as u32) < self.recv_window
            && self.inflight < self.cwnd
            && (self.inflight_bytes == 0 || self.inflight_bytes + len <= self.max_bytes)
    }

    fn next_new_len(&self) -> Option<usize> {
        let end = *self.unsent.front()?;
        Some((end - self.sent_off).min(self.seg as u64) as usize)
    }

    fn can_send_new(&self) -> bool {
        self.next_new_len().is_some_and(|len| self.window_open(len))
    }

    fn can_retransmit(&self) -> bool {
        !self.lost.is_empty() && (self.force_one || self.inflight < self.cwnd)
    }

    /// The sequence number [`SendState::next_packet`] would pick, if any
    /// (approximate when stale entries sit in the lost queue).
    pub(crate) fn peek_next_seq(&self) -> Option<u32> {
        if self.can_retransmit() {
            return self.lost.front().copied();
        }
        self.can_send_new().then(|| self.snd_nxt())
    }

    /// Picks the next Data packet to send, if the windows allow one: lost
    /// packets first (seed 004, PM/UDP S3/S4), then new data. Updates the
    /// scoreboard as if it was sent at `now`.
    pub(crate) fn next_packet(&mut self, now: Instant, rto: Duration) -> Option<DataPacket> {
        let packet = self.next_retransmit(now).or_else(|| self.next_new(now))?;
        if self.rto_deadline.is_none() {
            // RFC 6298 §5.1: start the timer when a packet goes out and it is not running.
            self.rto_deadline = Some(now + rto);
        }
        Some(packet)
    }

    fn next_retransmit(&mut self, now: Instant) -> Option<DataPacket> {
        while let Some(&seq) = self.lost.front() {
            if seq_lt(seq, self.snd_una) {
                self.lost.pop_front();
                continue;
            }
            let index = seq.wrapping_sub(self.snd_una) as usize;
            let PktState::Lost { by_timeout } = self.sent[index].state else {
                self.lost.pop_front(); // SACKed meanwhile
                continue;
            };
            if !self.force_one && self.inflight >= self.cwnd {
                return None;
            }
            self.lost.pop_front();
            self.force_one = false;
            if seq == self.snd_una {
                self.dup_acks = 0;
            }
            let tx = self.next_tx;
            self.next_tx += 1;
            let p = &mut self.sent[index];
            p.tx = tx;
            p.sent_at = now;
            p.retransmitted = true;
            p.by_timeout = by_timeout;
            p.state = PktState::InFlight;
            self.inflight += 1;
            self.inflight_bytes += p.len as usize;
            self.sent_log.push_back((tx, seq));
            // A retransmission asks for an immediate ack: we are recovering.
            let flags = p.flags | Flags::ACK_NOW;
            return Some(DataPacket { seq, flags, off: p.off, len: p.len as usize, retransmit: Some(by_timeout) });
        }
        None
    }

    fn next_new(&mut self, now: Instant) -> Option<DataPacket> {
        let len = self.next_new_len()?;
        if !self.window_open(len) {
            return None;
        }
        let off = self.sent_off;
        let end = *self.unsent.front()?;
        let mut flags = Flags::empty();
        if !self.cur_started {
            flags = flags | Flags::FIRST;
        }
        if off + len as u64 == end {
            flags = flags | Flags::LAST;
            self.unsent.pop_front();
            self.cur_started = false;
        } else {
            self.cur_started = true;
        }
        self.sent_off += len as u64;
        let seq = self.snd_nxt();
        let tx = self.next_tx;
        self.next_tx += 1;
        self.sent.push_back(SentPacket {
            off,
            len: len as u32,
            flags,
            tx,
            sent_at: now,
            retransmitted: false,
            by_timeout: false,
            state: PktState::InFlight,
        });
        self.sent_log.push_back((tx, seq));
        self.inflight += 1;
        self.inflight_bytes += len;
        let mut wire_flags = flags;
        if self.ack_request == Some(seq) {
            self.ack_request = None;
            wire_flags = wire_flags | Flags::ACK_NOW;
        }
        if !self.unsent.is_empty()
            && !self.can_send_new()
            && self.inflight < 2 * self.ack_every
            && self.inflight_bytes < 2 * self.ack_every_bytes
        {
            // This packet fills a window too small for the receiver's
            // periodic acks (every `ack_every` packets or `ack_every_bytes`
            // bytes, whichever comes first) to keep it moving:
            // a delayed ack would stall us. A larger window is kept moving
            // by those acks; asking for one per burst here would clock the
            // sender in bursts of one receive batch each (a few datagrams
            // per GSO send and GRO buffer between hosts).
            wire_flags = wire_flags | Flags::ACK_NOW;
        }
        Some(DataPacket { seq, flags: wire_flags, off, len, retransmit: None })
    }

    /// The payload of a packet chosen by [`SendState::next_packet`], in place
    /// in the stream: one slice, or two when it wraps around the ring (the
    /// second is then non-empty). Valid until the next `&mut self` call.
    pub(crate) fn payload(&self, packet: &DataPacket) -> [&[u8]; 2] {
        let start = (packet.off - self.stream_base) as usize;
        let (a, b) = self.stream.as_slices();
        let len = packet.len;
        if start + len <= a.len() {
            [&a[start..start + len], &[]]
        } else if start >= a.len() {
            let s = start - a.len();
            [&b[s..s + len], &[]]
        } else {
            [&a[start..], &b[..len - (a.len() - start)]]
        }
    }

    /// Copies the payload of a packet chosen by [`SendState::next_packet`] into `out`.
    pub(crate) fn copy_payload(&self, packet: &DataPacket, out: &mut [u8]) {
        let [a, b] = self.payload(packet);
        out[..a.len()].copy_from_slice(a);
        out[a.len()..a.len() + b.len()].copy_from_slice(b);
    }

    /// Processes acknowledgement fields from the peer. `watermark` is the
    /// peer's next unassigned sequence number when it generated the ack;
    /// `nack` marks a Nack. Returns whether any packet was newly acknowledged.
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        ack: u32,
        sack: u64,
        nack: bool,
        watermark: u32,
        rtt: &mut RttEstimator,
    ) -> bool {
        if seq_lt(self.snd_nxt(), ack) {
            return false; // acks what we never sent: ignore
        }
        let mut newly = NewlyAcked::default();
        let mut freed_to = None;
        let before = self.acked_msgs;
        // seed 004, PM/UDP S2: everything below the cumulative ack is released.
        while seq_lt(self.snd_una, ack) {
            let Some(p) = self.sent.pop_front() else {
                break;
            };
            self.snd_una = self.snd_una.wrapping_add(1);
            if p.state != PktState::Sacked {
                newly.note(&p);
                if p.state == PktState::InFlight {
                    self.inflight -= 1;
                    self.inflight_bytes -= p.len as usize;
                }
                self.grow(p.tx);
            }
            if p.flags.contains(Flags::LAST) {
                self.acked_msgs += 1;
            }
            freed_to = Some(p.off + u64::from(p.len));
        }
        if let Some(end) = freed_to {
            self.stream.drain(..(end - self.stream_base) as usize);
            self.stream_base = end;
        }
        // SACK: bit i reports `ack + 1 + i`.
        let mut bits = sack;
        while bits != 0 {
            let i = bits.trailing_zeros();
            bits &= bits - 1;
            let seq = ack.wrapping_add(1 + i);
            if seq_lt(seq, self.snd_una) {
                continue;
            }
            let index = seq.wrapping_sub(self.snd_una) as usize;
            let Some(p) = self.sent.get_mut(index) else {
                break;
            };
            match p.state {
                PktState::Sacked => continue,
                PktState::InFlight => {
                    self.inflight -= 1;
                    self.inflight_bytes -= p.len as usize;
                }
                PktState::Lost { .. } => {} // its lost-queue entry is skipped later
            }
            p.state = PktState::Sacked;
            let p = &self.sent[index];
            newly.note(p);
            let tx = p.tx;
            self.grow(tx);
        }
        let Some((newest_tx, newest_sent_at, newest_retransmitted)) = newly.newest else {
            self.on_duplicate_ack(now, ack, rtt);
            return false;
        };
        self.dup_acks = 0;
        if newest_tx > self.largest_acked_tx {
            // The loss reference is the newest packet known to have arrived.
            // An ack for a packet the RTO resent is ambiguous: the RTO fires
            // as readily when the peer is merely slow (descheduled) as when
            // the packet was lost. If this ack also newly covers a packet
            // sent before that retransmission and never resent, the originals
            // were only late: the RTO was spurious. Then the retransmission's
            // new, high transmission number must not become the reference
            // (every packet still in flight behind the original would look
            // lost: a burst of spurious retransmissions), and the window
            // collapse is undone (the Eifel response, RFC 4015). Otherwise
            // the retransmission is taken to have arrived, and the packets
            // sent before it and still unacked are lost too: that repairs a
            // tail of losses without one RTO per packet. (RFC 9002 has no
            // such ambiguity: it never reuses packet numbers.)
            let reference = if newly.spurious_timeout() {
                if let Some((cwnd, ssthresh)) = self.before_rto.take() {
                    self.cwnd = self.cwnd.max(cwnd);
                    self.ssthresh = ssthresh;
                }
                newly.newest_unambiguous.filter(|&(tx, _)| tx > self.largest_acked_tx)
            } else {
                Some((newest_tx, newest_sent_at))
            };
            if let Some((tx, sent_at)) = reference {
                self.largest_acked_tx = tx;
                self.largest_acked_sent_at = sent_at;
                if tx >= self.round_end_tx {
                    self.round_end_tx = self.next_tx;
                    self.round_losses = 0;
                }
            }
            if !newest_retransmitted {
                // Karn's rule: only never-retransmitted packets give samples,
                // and only the newest acked one (RFC 9002 §5.1): an older one
                // may have waited behind a hole for its cumulative ack.
                rtt.on_sample(now - newest_sent_at);
            }
        }
        if !self.awaiting_rto_verdict() {
            self.before_rto = None;
        }
        rtt.on_progress();
        let threshold = if nack { 1 } else { PACKET_THRESHOLD };
        self.sweep_losses(threshold, rtt.loss_delay(), rtt.queue_building());
        // RFC 6298 §5.2/5.3: stop the timer when nothing is outstanding, else
        // restart it because the peer made progress.
        self.rto_deadline = self.outstanding().then(|| now + rtt.rto());
        if self.acked_msgs != before {
            self.hold(watermark);
        }
        true
    }

    /// The oldest unacked packet is an RTO's retransmission (sent, or about
    /// to be) whose ack has not come yet: whether the RTO was spurious is
    /// still open.
    fn awaiting_rto_verdict(&self) -> bool {
        self.sent.front().is_some_and(|p| p.by_timeout || p.state == PktState::Lost { by_timeout: true })
    }

    /// An ack that acknowledged nothing new. SACK reports only the 64
    /// packets after the cumulative ack, so when the packet at `snd_una` is
    /// lost again after its retransmission and everything SACK can report is
    /// already reported, later arrivals at the receiver show up only as such
    /// acks (each packet arriving out of order is acked at once). After
    /// [`PACKET_THRESHOLD`] of them, counted only once the retransmission has
    /// had a loss delay to arrive (so acks of packets still in flight before
    /// it do not trigger a second copy), the packet is deemed lost again and
    /// resent even if the window is full — RFC 5681's duplicate-ack rule,
    /// instead of waiting for a backed-off RTO.
    fn on_duplicate_ack(&mut self, now: Instant, ack: u32, rtt: &RttEstimator) {
        if ack != self.snd_una {
            return;
        }
        let Some(p) = self.sent.front_mut() else {
            return;
        };
        if p.state != PktState::InFlight || now < p.sent_at + rtt.loss_delay() {
            return;
        }
        self.dup_acks += 1;
        if self.dup_acks < PACKET_THRESHOLD {
            return;
        }
        self.dup_acks = 0;
        p.state = PktState::Lost { by_timeout: false };
        let (tx, len) = (p.tx, p.len as usize);
        self.inflight -= 1;
        self.inflight_bytes -= len;
        self.lost.push_front(self.snd_una);
        self.on_congestion(tx, true);
        // Both copies of an RTO's retransmission lost: the RTO was not
        // spurious, its window collapse stays.
        self.before_rto = None;
        // The packets still counted in flight are exactly the ones stuck
        // behind this hole: they cannot make room in the window, so it goes
        // out regardless, as after an RTO.
        self.force_one = true;
    }

    /// Marks as lost every in-flight packet sent at least `threshold`
    /// transmissions, or one loss delay, before the newest acked one. The log
    /// is in transmission order, so only its front is examined: O(1) amortized.
    fn sweep_losses(&mut self, threshold: u64, loss_delay: Duration, queue_building: bool) {
        while let Some(&(tx, seq)) = self.sent_log.front() {
            if seq_lt(seq, self.snd_una) {
                self.sent_log.pop_front();
                continue;
            }
            let index = seq.wrapping_sub(self.snd_una) as usize;
            let p = &mut self.sent[index];
            if p.tx != tx || p.state != PktState::InFlight {
                self.sent_log.pop_front(); // superseded, SACKed or already lost
                continue;
            }
            let by_count = tx + threshold <= self.largest_acked_tx;
            let by_time = tx < self.largest_acked_tx && p.sent_at + loss_delay <= self.largest_acked_sent_at;
            if !by_count && !by_time {
                break;
            }
            // seed 004, PM/UDP S3, generalised: a Nack, or SACK showing later
            // packets arrived, triggers retransmission without waiting for the RTO.
            p.state = PktState::Lost { by_timeout: false };
            self.inflight -= 1;
            self.inflight_bytes -= p.len as usize;
            self.lost.push_back(seq);
            self.sent_log.pop_front();
            self.on_congestion(tx, queue_building);
        }
    }

    /// Multiplicative decrease, at most once per window of data: only a loss
    /// of a packet sent after the previous decrease counts (PM/UDP shrinks
    /// its window on Nack; RFC 5681 halves it). A loss is congestion when
    /// `certain` (a retransmission lost again, or the RTT shows a queue
    /// building) or when the round trip's losses exceed
    /// `loss_tolerance_pct` of the window (and are more than one);
    /// otherwise it is taken for random loss and only retransmitted.
    fn on_congestion(&mut self, tx: u64, certain: bool) {
        self.round_losses = self.round_losses.saturating_add(1);
        // A window of a few packets tolerates one loss per round trip:
        // otherwise a window shrunk below 100 / loss_tolerance_pct could
        // never grow back under random loss.
        let tolerated = self.loss_tolerance_pct > 0
            && (self.round_losses == 1
                || u64::from(self.round_losses) * 100 <= u64::from(self.loss_tolerance_pct) * u64::from(self.cwnd));
        if tx >= self.recovery_tx && (certain || !tolerated) {
            self.ssthresh = (self.cwnd / 2).max(self.min_window);
            self.cwnd = self.ssthresh;
            self.cwnd_acc = 0;
            self.recovery_tx = self.next_tx;
        }
    }

    /// Window growth per newly acked packet: +1 per packet below ssthresh
    /// (slow start), else +1 per window's worth of acks (additive increase).
    /// Packets sent before the last decrease do not grow it.
    fn grow(&mut self, tx: u64) {
        if tx < self.recovery_tx || self.cwnd >= self.max_window {
            return;
        }
        if self.cwnd < self.ssthresh {
            self.cwnd += 1;
        } else {
            self.cwnd_acc += 1;
            if self.cwnd_acc >= self.cwnd {
                self.cwnd_acc = 0;
                self.cwnd += 1;
            }
        }
    }

    /// The RTO expired. seed 004, PM/UDP S4: the oldest unacked packet is
    /// retransmitted (once, even if the window is full); the timeout doubles,
    /// and the window collapses to `min_window` (slow start regrows it).
    /// Returns whether a retransmission was scheduled.
    pub(crate) fn on_rto(&mut self, now: Instant, rtt: &mut RttEstimator) -> bool {
        if self.sent.is_empty() {
            self.rto_deadline = None;
            return false;
        }
        rtt.on_timeout();
        let p = &mut self.sent[0];
        match p.state {
            PktState::InFlight => {
                p.state = PktState::Lost { by_timeout: true };
                self.inflight -= 1;
                self.inflight_bytes -= p.len as usize;
                self.lost.push_front(self.snd_una);
            }
            // Already deemed lost but queued behind later losses: the RTO
            // is about the oldest hole, so it goes first (its older queue
            // entry is skipped once it is in flight again).
            PktState::Lost { .. } => self.lost.push_front(self.snd_una),
            PktState::Sacked => {}
        }
        self.force_one = true;
        self.before_rto.get_or_insert((self.cwnd, self.ssthresh));
        self.ssthresh = (self.cwnd / 2).max(self.min_window);
        self.cwnd = self.min_window;
        self.cwnd_acc = 0;
        self.recovery_tx = self.next_tx;
        self.rto_deadline = Some(now + rtt.rto());
        true
    }

    /// Records that messages up to `acked_msgs` are acknowledged, to be
    /// reported once our receive pointer from the peer reaches `watermark`.
    fn hold(&mut self, watermark: u32) {
        if self.holds.len() >= MAX_HOLDS {
            // Merge into the newest hold: reporting later is always safe.
            self.holds.pop_back();
        }
        self.holds.push_back((watermark, self.acked_msgs));
    }

    /// Causal completion: reports acks whose watermark our in-order receive
    /// pointer from the peer (`rcv_nxt`) has reached, i.e. every message the
    /// peer submitted before it generated the ack has been delivered here.
    /// Returns the new "acked up to" id when it moved.
    pub(crate) fn release(&mut self, rcv_nxt: u32) -> Option<MsgId> {
        let before = self.reported_msgs;
        while let Some(&(watermark, msgs)) = self.holds.front() {
            if seq_lt(rcv_nxt, watermark) {
                break;
            }
            self.reported_msgs = msgs;
            self.holds.pop_front();
        }
        (self.reported_msgs != before).then(|| MsgId(self.reported_msgs - 1))
    }

    /// Snapshot values for [`PeerStats`](crate::PeerStats).
    pub(crate) fn window_stats(&self) -> (u32, u32, u32, usize) {
        (self.cwnd, self.ssthresh, self.inflight, self.inflight_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Instant = Instant::ZERO;

    fn at(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    /// Reacts to every loss (RFC 5681), as the window tests below assume.
    fn config(initial_window: u32) -> Config {
        Config { initial_window, min_window: 2, max_window: 64, loss_tolerance_pct: 0, ..Config::default() }
    }

    /// A sender with `messages` one-segment messages queued.
    fn sender(config: &Config, messages: usize) -> (SendState, RttEstimator) {
        let mut s = SendState::new(config, 0);
        for _ in 0..messages {
            s.submit(&[&[0xab; 100]]);
        }
        (s, RttEstimator::new(config))
    }

    /// Sends everything the windows allow at `now`; returns the packets.
    fn send_all(s: &mut SendState, now: Instant, rtt: &RttEstimator) -> Vec<DataPacket> {
        std::iter::from_fn(|| s.next_packet(now, rtt.rto())).collect()
    }

    fn cwnd(s: &SendState) -> u32 {
        s.window_stats().0
    }

    fn ssthresh(s: &SendState) -> u32 {
        s.window_stats().1
    }

    fn inflight(s: &SendState) -> u32 {
        s.window_stats().2
    }

    /// A packet that fills the window asks for an immediate ack only while
    /// the window is too small for the receiver's periodic acks (every
    /// `ack_every` packets or `ack_every_bytes` bytes) to keep it moving.
    #[test]
    fn a_window_filling_packet_asks_for_an_ack_only_when_the_window_is_small() {
        let filling_asks = |cfg: &Config, messages: usize| {
            let (mut s, rtt) = sender(cfg, messages);
            let sent = send_all(&mut s, at(0), &rtt);
            let last = sent.last().expect("something was sent");
            (sent.len(), last.flags.contains(Flags::ACK_NOW))
        };
        // 32 packets in flight, acks every 8: the window keeps moving.
        let big = Config { ack_every: 8, ..config(32) };
        assert_eq!(filling_asks(&big, 64), (32, false));
        // 8 in flight, acks every 8: a delayed ack would stall the sender.
        let small = Config { ack_every: 8, ..config(8) };
        assert_eq!(filling_asks(&small, 64), (8, true));
        // 8 packets in flight, but as many bytes as four byte-driven acks
        // (large datagrams: jumbo frames): the receiver's acks keep it moving.
        let bytes = Config { ack_every: 8, ack_every_bytes: 200, ..config(8) };
        assert_eq!(filling_asks(&bytes, 64), (8, false));
    }

    #[test]
    fn the_congestion_window_limits_packets_in_flight_and_slow_start_grows_it() {
        let cfg = config(4);
        let (mut s, mut rtt) = sender(&cfg, 100);
        let first = send_all(&mut s, T0, &rtt);
        assert_eq!(first.len(), 4);
        assert_eq!((cwnd(&s), inflight(&s)), (4, 4));
        assert!(first[3].flags.contains(Flags::ACK_NOW), "the packet that fills the window asks for an ack");
        assert!(!first[2].flags.contains(Flags::ACK_NOW));
        // One ack for all four: +1 per acked packet below ssthresh.
        assert!(s.on_ack(at(50), 4, 0, false, 0, &mut rtt));
        assert_eq!((cwnd(&s), inflight(&s)), (8, 0));
        assert_eq!(send_all(&mut s, at(50), &rtt).len(), 8);
        assert!(s.on_ack(at(100), 12, 0, false, 0, &mut rtt));
        assert_eq!(cwnd(&s), 16);
    }

    #[test]
    fn a_nack_halves_the_window_once_per_window_and_acks_grow_it_back_additively() {
        let cfg = config(16);
        let (mut s, mut rtt) = sender(&cfg, 1000);
        assert_eq!(send_all(&mut s, T0, &rtt).len(), 16);
        // The receiver lost seq 0 and says so: a Nack with SACK for 1..=15.
        let sack = (1u64 << 15) - 1;
        assert!(s.on_ack(at(50), 0, sack, true, 0, &mut rtt));
        // SACKs grew the window in slow start (16 + 15), then the loss halved it.
        assert_eq!(cwnd(&s), 31 / 2);
        assert_eq!(ssthresh(&s), cwnd(&s));
        assert_eq!(inflight(&s), 0);
        // The hole goes out first, as a fast retransmission asking for an ack.
        let rtx = s.next_packet(at(50), rtt.rto()).unwrap();
        assert_eq!((rtx.seq, rtx.retransmit), (0, Some(false)));
        assert!(rtx.flags.contains(Flags::ACK_NOW));
        let after_loss = cwnd(&s);
        // A second loss from the same window (seq 16 is new, so send some):
        // no second decrease for one congestion event.
        let more = send_all(&mut s, at(50), &rtt);
        assert_eq!(more.len() as u32, after_loss - 1, "the retransmission takes one slot");
        assert!(s.on_ack(at(100), 16, 0, false, 0, &mut rtt), "the retransmission filled the hole");
        let grown_by_acks = cwnd(&s);
        assert!(grown_by_acks >= after_loss, "acks of post-loss packets never shrink it");
        // Congestion avoidance: it takes a whole window of acks (less the
        // one the retransmission already counted) to add one packet.
        let start = cwnd(&s);
        let (mut now, mut acked) = (100, 0);
        while cwnd(&s) == start {
            assert!(!send_all(&mut s, at(now), &rtt).is_empty() || inflight(&s) > 0);
            now += 50;
            let upto = s.snd_nxt();
            acked += upto.wrapping_sub(s.snd_una);
            assert!(s.on_ack(at(now), upto, 0, false, 0, &mut rtt));
        }
        assert_eq!(cwnd(&s), start + 1, "additive increase: +1 per window");
        assert!(acked >= start - 1, "grew after only {acked} acks with a window of {start}");
        assert!(acked <= 2 * start, "took {acked} acks with a window of {start}");
    }

    #[test]
    fn losses_within_the_tolerance_are_resent_without_shrinking_the_window() {
        let cfg = Config { loss_tolerance_pct: 10, ..config(32) };
        let (mut s, mut rtt) = sender(&cfg, 1000);
        assert_eq!(send_all(&mut s, T0, &rtt).len(), 32);
        // Seq 0 lost, 1..=31 arrived: 1 loss in a window of 32+ is random loss.
        let sack = (1u64 << 31) - 1;
        assert!(s.on_ack(at(50), 0, sack, true, 0, &mut rtt));
        assert_eq!(s.lost.front(), Some(&0), "still retransmitted");
        assert_eq!(ssthresh(&s), cfg.max_window, "no decrease");
        let window = cwnd(&s);
        assert!(window >= 32, "{window}");
        // In the next round trip, losses beyond 10% of the window are congestion.
        let rtx = s.next_packet(at(50), rtt.rto()).unwrap();
        assert_eq!(rtx.seq, 0);
        let round = send_all(&mut s, at(50), &rtt);
        assert!(s.on_ack(at(100), 32, 0, false, 0, &mut rtt), "the hole is filled");
        let lost = (window / 10 + 1) as usize;
        let first = round[0].seq;
        assert!(round.len() <= 64 && round.len() > lost + 3, "{} packets", round.len());
        // `first .. first + lost` missing, the rest of the round arrived
        // (SACK bit i reports `first + 1 + i`).
        let arrived = (1u64 << (round.len() - 1)) - 1;
        let sack = arrived & !((1u64 << (lost - 1)) - 1);
        let _ = s.on_ack(at(150), first, sack, true, 0, &mut rtt);
        assert!(s.lost.len() >= lost, "{:?}", s.lost);
        assert!(ssthresh(&s) < cfg.max_window, "{lost} losses of {window} shrink the window");
        // A timeout is congestion whatever the share.
        let cfg = Config { loss_tolerance_pct: 100, ..config(8) };
        let (mut s, mut rtt) = sender(&cfg, 100);
        assert_eq!(send_all(&mut s, T0, &rtt).len(), 8);
        assert!(s.on_ack(at(50), 0, 0b111_1111, true, 0, &mut rtt));
        assert_eq!(ssthresh(&s), cfg.max_window, "tolerated");
        assert!(s.on_rto(at(5_000), &mut rtt));
        assert!(ssthresh(&s) < cfg.max_window, "a timeout always shrinks the window");
    }

    #[test]
    fn sack_evidence_without_a_nack_needs_three_later_packets() {
        let cfg = config(8);
        let (mut s, mut rtt) = sender(&cfg, 100);
        assert_eq!(send_all(&mut s, T0, &rtt).len(), 8);
        // Only seq 1 and 2 arrived after the hole at 0: not yet a loss.
        assert!(s.on_ack(at(50), 0, 0b11, false, 0, &mut rtt));
        assert_eq!(ssthresh(&s), cfg.max_window, "no decrease yet");
        assert!(s.lost.is_empty());
        // A third later packet: seq 0 is lost, the window halves.
        let before = cwnd(&s);
        assert!(s.on_ack(at(60), 0, 0b111, false, 0, &mut rtt));
        assert_eq!(s.lost.front(), Some(&0));
        let grown = before + 1; // the SACK of seq 3 still counted in slow start
        assert_eq!(cwnd(&s), grown / 2);
    }

    #[test]
    fn a_timeout_collapses_the_window_and_still_retransmits_the_oldest_packet() {
        let cfg = config(8);
        let (mut s, mut rtt) = sender(&cfg, 100);
        assert_eq!(send_all(&mut s, T0, &rtt).len(), 8);
        let deadline = s.rto_deadline().expect("armed when the first packet left");
        assert!(s.on_rto(deadline, &mut rtt));
        assert_eq!((cwnd(&s), ssthresh(&s)), (cfg.min_window, 4));
        // 7 packets still count as in flight, above the collapsed window, yet
        // the oldest goes out once (seed 004, PM/UDP S4)…
        let rtx = s.next_packet(deadline, rtt.rto()).unwrap();
        assert_eq!((rtx.seq, rtx.retransmit), (0, Some(true)));
        // …and nothing more until acks make room.
        assert!(s.next_packet(deadline, rtt.rto()).is_none());
        assert!(s.rto_deadline().unwrap() > deadline, "backed off");
        // Acks of everything: slow start again from min_window.
        assert!(s.on_ack(deadline + Duration::from_micros(10), 8, 0, false, 0, &mut rtt));
        assert_eq!(inflight(&s), 0);
        assert!(cwnd(&s) > cfg.min_window);
        assert!(s.rto_deadline().is_none(), "nothing outstanding, no timer");
    }

    #[test]
    fn unacknowledged_bytes_are_capped_whatever_the_packet_window() {
        let cfg = Config { max_datagram: 9000, max_window_bytes: 20_000, ..config(32) };
        let seg = cfg.segment_size();
        let mut s = SendState::new(&cfg, 0);
        s.submit(&[&vec![1u8; 10 * seg]]);
        let rtt = RttEstimator::new(&cfg);
        let sent = send_all(&mut s, T0, &rtt);
        assert_eq!(sent.len(), 20_000 / seg, "bytes, not the 32-packet window, limit");
        let (cwnd, _, inflight, bytes) = s.window_stats();
        assert_eq!((cwnd, inflight), (32, 2));
        assert!(bytes <= cfg.max_window_bytes);
        assert!(sent.last().unwrap().flags.contains(Flags::ACK_NOW), "the window is full: ask for an ack");
        // A datagram larger than the byte window still goes out alone.
        let tiny = Config { max_window_bytes: 100, ..cfg.clone() };
        let mut s = SendState::new(&tiny, 0);
        s.submit(&[&vec![1u8; 3 * seg]]);
        assert_eq!(send_all(&mut s, T0, &rtt).len(), 1);
    }

    #[test]
    fn the_receive_window_bounds_how_far_past_the_oldest_unacked_packet_we_run() {
        let cfg = Config { recv_window: 4, ..config(32) };
        let (mut s, mut rtt) = sender(&cfg, 100);
        assert_eq!(send_all(&mut s, T0, &rtt).len(), 4);
        // Seq 0 missing, 1..=3 SACKed: still no room past 0 + recv_window.
        s.on_ack(at(50), 0, 0b111, false, 0, &mut rtt);
        let next: Vec<u32> = send_all(&mut s, at(50), &rtt).iter().map(|p| p.seq).collect();
        assert_eq!(next, vec![0], "only the retransmission of the hole");
    }

    #[test]
    fn acks_complete_messages_only_once_causally_released() {
        let cfg = config(8);
        let mut s = SendState::new(&cfg, 0);
        let mut rtt = RttEstimator::new(&cfg);
        let seg = cfg.segment_size();
        s.submit(&[&vec![0u8; 2 * seg]]); // seq 0, 1
        s.submit(&[b"x"]); // seq 2
        assert_eq!(send_all(&mut s, T0, &rtt).len(), 3);
        // Seq 0 alone completes no message.
        s.on_ack(at(10), 1, 0, false, 7, &mut rtt);
        assert_eq!(s.release(100), None);
        // Both messages acked, generated when the peer's watermark was 7:
        // reported once we have received everything before it.
        s.on_ack(at(20), 3, 0, false, 7, &mut rtt);
        assert_eq!(s.release(6), None);
        assert_eq!(s.release(7), Some(MsgId(1)));
        assert!(s.is_quiescent());
    }

    /// The case the 64-bit SACK cannot describe: the retransmission of the
    /// oldest hole is lost too, and every later packet the receiver gets lies
    /// beyond what SACK reports, so acks arrive that acknowledge nothing new.
    /// (The goodput simulation, seed 4 at 1% loss, stalled on this for many
    /// times the transfer's length before duplicate acks counted;
    /// docs/perf-notes.md, "duplicate acks".)
    #[test]
    fn duplicate_acks_recover_a_lost_retransmission_beyond_sack_reach() {
        let cfg = config(64);
        let (mut s, mut rtt) = sender(&cfg, 1000);
        assert_eq!(send_all(&mut s, T0, &rtt).len(), 64);
        let all_sacked = u64::MAX >> 1; // seq 1..=63 arrived, 0 did not
        s.on_ack(at(100), 0, all_sacked, true, 0, &mut rtt);
        let rtx = s.next_packet(at(100), rtt.rto()).unwrap();
        assert_eq!((rtx.seq, rtx.retransmit), (0, Some(false)));
        let more = send_all(&mut s, at(100), &rtt).len() as u32;
        assert!(more > 0);
        // The retransmission is lost. Acks of packets still in flight before
        // it acknowledge nothing new: too early to call it lost again.
        for us in [110, 120, 130] {
            assert!(!s.on_ack(at(us), 0, all_sacked, false, 0, &mut rtt));
        }
        assert!(s.lost.is_empty(), "no second copy while the first may still arrive");
        // A loss delay later, three more such acks: retransmit it again.
        let later = 100 + rtt.loss_delay().as_micros() as u64 + 1;
        for us in [later, later + 1] {
            s.on_ack(at(us), 0, all_sacked, false, 0, &mut rtt);
            assert!(s.lost.is_empty());
        }
        s.on_ack(at(later + 2), 0, all_sacked, false, 0, &mut rtt);
        let again = s.next_packet(at(later + 2), rtt.rto()).unwrap();
        assert_eq!((again.seq, again.retransmit), (0, Some(false)));
        assert!(s.rto_deadline().unwrap() > at(later + 2));
        // Once the hole is filled everything is acked at once.
        assert!(s.on_ack(at(later + 100), 64 + more, 0, false, 0, &mut rtt));
        assert_eq!(inflight(&s), 0);
    }

    #[test]
    fn a_timeout_retransmits_the_oldest_hole_before_later_losses() {
        let cfg = config(16);
        let (mut s, mut rtt) = sender(&cfg, 100);
        assert_eq!(send_all(&mut s, T0, &rtt).len(), 16);
        // 0 is lost and retransmitted, 1..=15 arrive.
        s.on_ack(at(50), 0, (1 << 15) - 1, true, 0, &mut rtt);
        assert_eq!(s.next_packet(at(50), rtt.rto()).unwrap().seq, 0);
        let late: Vec<u32> = send_all(&mut s, at(50), &rtt).iter().map(|p| p.seq).collect();
        assert!(!late.is_empty());
        // The retransmission of 0 and then the later packets are deemed lost
        // by time; the queue holds them in that order, 0 last.
        let p = &mut s.sent[0];
        p.state = PktState::Lost { by_timeout: false };
        s.inflight -= 1;
        s.inflight_bytes -= p.len as usize;
        for &seq in &late {
            let index = seq.wrapping_sub(s.snd_una) as usize;
            let q = &mut s.sent[index];
            q.state = PktState::Lost { by_timeout: false };
            s.inflight -= 1;
            s.inflight_bytes -= q.len as usize;
            s.lost.push_back(seq);
        }
        s.lost.push_back(0);
        s.cwnd = 0; // nothing but the forced RTO retransmission may go
        let deadline = s.rto_deadline().unwrap();
        s.on_rto(deadline, &mut rtt);
        s.cwnd = 0;
        let first = s.next_packet(deadline, rtt.rto()).unwrap();
        assert_eq!((first.seq, first.retransmit), (0, Some(false)), "the RTO goes to the oldest hole");
        assert!(s.next_packet(deadline, rtt.rto()).is_none());
    }
}
