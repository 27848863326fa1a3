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
    /// Send the next lost packet even if the window is full (RTO).
    force_one: bool,
    /// (cwnd, ssthresh) before the current series of RTOs, restored if the
    /// ack of the timeout retransmission shows the RTO was spurious.
    before_rto: Option<(u32, u32)>,
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
            force_one: false,
            before_rto: None,
            rto_deadline: None,
            ack_request: None,
            next_msg: first_msg,
            acked_msgs: first_msg,
            reported_msgs: first_msg,
            holds: VecDeque::new(),
            seg: config.segment_size(),
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
        if !self.unsent.is_empty() && !self.can_send_new() {
            // This packet fills the window: a delayed ack would only stall us.
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
            return false;
        };
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
        self.sweep_losses(threshold, rtt.loss_delay());
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

    /// Marks as lost every in-flight packet sent at least `threshold`
    /// transmissions, or one loss delay, before the newest acked one. The log
    /// is in transmission order, so only its front is examined: O(1) amortized.
    fn sweep_losses(&mut self, threshold: u64, loss_delay: Duration) {
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
            self.on_congestion(tx);
        }
    }

    /// Multiplicative decrease, at most once per window of data: only a loss
    /// of a packet sent after the previous decrease counts (PM/UDP shrinks
    /// its window on Nack; RFC 5681 halves it).
    fn on_congestion(&mut self, tx: u64) {
        if tx >= self.recovery_tx {
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
        if p.state == PktState::InFlight {
            p.state = PktState::Lost { by_timeout: true };
            self.inflight -= 1;
            self.inflight_bytes -= p.len as usize;
            self.lost.push_front(self.snd_una);
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
