//! Receive side of one connection: sequencing, out-of-order buffering,
//! reassembly, and what acknowledgement is owed.
//!
//! Owns: the next expected sequence number, the bounded out-of-order buffer
//! (at most `recv_window` packets), the reassembly buffer of the message in
//! progress (at most `max_message` bytes: a longer message is discarded and
//! counted, never buffered), the cumulative ack + SACK bitmap to report, and
//! the delayed-ack and Nack state (seed 004, PM/UDP R1-R5, with SACK
//! replacing R5's drops).
//!
//! Must not: emit packets or touch the send side; it only records that an
//! ack or Nack is owed and the peer turns that into a packet.

use crate::stats::DropCounts;
use crate::time::Instant;
use crate::{seq_lt, Config, DropReason};
use mw_wire::Flags;

/// Reassembly capacity kept between messages; larger buffers are shrunk back
/// after delivery so one huge message does not pin memory forever.
const REASM_KEEP: usize = 1 << 20;

/// Capacity an out-of-order slot keeps after delivering its packet. Slots are
/// reused (no allocation per out-of-order LAN-sized packet), but a slot that
/// once held a 64 KB loopback datagram would otherwise pin it for good: under
/// steady loss every slot of the window eventually does, `recv_window` x 64 KB
/// per peer (the soak test saw resident memory climb by that).
const SLOT_KEEP: usize = 4096;

#[derive(Debug, Default, Clone)]
struct Slot {
    present: bool,
    flags: Flags,
    data: Vec<u8>,
}

/// What a Data packet did to the receive state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Received {
    /// Whole messages delivered.
    pub(crate) delivered: u32,
    /// The in-order pointer moved.
    pub(crate) advanced: bool,
    /// The packet was taken in sequence but its payload was rejected by
    /// reassembly (it breaks message framing or `max_message`).
    pub(crate) rejected: Option<DropReason>,
}

/// Where reassembly stands between in-order segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reasm {
    /// Between messages: the next segment must be FIRST.
    Idle,
    /// A message is being collected in `RecvState::reasm`.
    Collecting,
    /// The message in progress outgrew `max_message`: its segments are
    /// dropped until its LAST one.
    Discarding,
}

/// The reassembly buffer and its state, with the size limit it enforces.
#[derive(Debug)]
struct Reassembly {
    buf: Vec<u8>,
    state: Reasm,
    max_message: usize,
}

/// What reassembly did with one in-order segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Taken {
    /// A whole message was delivered.
    delivered: bool,
    /// The segment broke framing or `max_message` (counted as a drop).
    rejected: Option<DropReason>,
}

impl Taken {
    const PARTIAL: Taken = Taken { delivered: false, rejected: None };
    const WHOLE: Taken = Taken { delivered: true, rejected: None };
    const fn rejected(reason: DropReason) -> Taken {
        Taken { delivered: false, rejected: Some(reason) }
    }
}

impl Reassembly {
    /// Runs one in-order payload through reassembly. A whole message goes to
    /// `deliver` (a single-packet message straight from `payload`, without a
    /// copy). Memory stays within `max_message` whatever the peer sends.
    fn accept(&mut self, flags: Flags, payload: &[u8], deliver: &mut dyn FnMut(&[u8])) -> Taken {
        let last = flags.contains(Flags::LAST);
        if flags.contains(Flags::FIRST) {
            // A new message before the previous one's LAST breaks framing (no
            // correct sender does it): the partial one is dropped and counted,
            // the new one is taken.
            let abandoned = self.state == Reasm::Collecting;
            self.reset();
            let taken = self.start(last, payload, deliver);
            if abandoned && taken.rejected.is_none() {
                return Taken { rejected: Some(DropReason::Malformed(mw_wire::Error::Malformed)), ..taken };
            }
            return taken;
        }
        match self.state {
            // A continuation without a start: no correct sender produces it.
            Reasm::Idle => Taken::rejected(DropReason::Malformed(mw_wire::Error::Malformed)),
            Reasm::Discarding => {
                if last {
                    self.state = Reasm::Idle;
                }
                Taken::rejected(DropReason::OversizedMessage)
            }
            Reasm::Collecting => {
                if self.buf.len() + payload.len() > self.max_message {
                    self.reset();
                    self.state = if last { Reasm::Idle } else { Reasm::Discarding };
                    return Taken::rejected(DropReason::OversizedMessage);
                }
                self.buf.extend_from_slice(payload);
                if !last {
                    return Taken::PARTIAL;
                }
                deliver(&self.buf);
                self.reset();
                Taken::WHOLE
            }
        }
    }

    /// Takes the FIRST segment of a message, in state `Idle`.
    fn start(&mut self, last: bool, payload: &[u8], deliver: &mut dyn FnMut(&[u8])) -> Taken {
        if payload.len() > self.max_message {
            self.state = if last { Reasm::Idle } else { Reasm::Discarding };
            return Taken::rejected(DropReason::OversizedMessage);
        }
        if last {
            deliver(payload);
            return Taken::WHOLE;
        }
        self.buf.extend_from_slice(payload);
        self.state = Reasm::Collecting;
        Taken::PARTIAL
    }

    /// Forgets the message in progress; a huge buffer is given back so one
    /// large message does not pin memory forever.
    fn reset(&mut self) {
        self.buf.clear();
        self.buf.shrink_to(REASM_KEEP);
        self.state = Reasm::Idle;
    }
}

/// The receive half of a connection.
#[derive(Debug)]
pub(crate) struct RecvState {
    /// Next sequence number expected in order; everything before it has been
    /// received and passed through reassembly.
    rcv_nxt: u32,
    window: u32,
    /// Out-of-order packets, indexed by `seq & (len - 1)`; empty until the
    /// first out-of-order arrival, then a power of two ≥ `window`.
    slots: Vec<Slot>,
    /// Occupied slots.
    ooo: u32,
    /// Holes below this sequence number have already been Nacked.
    nack_hi: u32,
    reasm: Reassembly,
    /// In-order Data packets received since the last ack went out.
    unacked: u32,
    /// Their payload bytes.
    unacked_bytes: usize,
    /// When the delayed ack must go out at the latest.
    ack_deadline: Option<Instant>,
    /// An ack must go out at once.
    ack_now: bool,
    /// A new hole was found: the next ack goes out as a Nack.
    nack_now: bool,
}

impl RecvState {
    pub(crate) fn new(config: &Config) -> RecvState {
        RecvState {
            rcv_nxt: config.initial_seq,
            window: config.recv_window,
            slots: Vec::new(),
            ooo: 0,
            nack_hi: config.initial_seq,
            reasm: Reassembly { buf: Vec::new(), state: Reasm::Idle, max_message: config.max_message },
            unacked: 0,
            unacked_bytes: 0,
            ack_deadline: None,
            ack_now: false,
            nack_now: false,
        }
    }

    /// Next sequence number expected in order.
    pub(crate) fn rcv_nxt(&self) -> u32 {
        self.rcv_nxt
    }

    /// Out-of-order packets buffered.
    pub(crate) fn out_of_order(&self) -> u32 {
        self.ooo
    }

    /// Bytes of the message in progress held for reassembly.
    pub(crate) fn reassembly_bytes(&self) -> usize {
        self.reasm.buf.len()
    }

    fn slot_index(&self, seq: u32) -> usize {
        seq as usize & (self.slots.len() - 1)
    }

    fn has(&self, seq: u32) -> bool {
        !self.slots.is_empty() && self.slots[self.slot_index(seq)].present
    }

    /// Handles one Data packet. `deliver` receives each whole message that
    /// becomes deliverable, in order. A rejection of this packet's payload by
    /// reassembly comes back in [`Received::rejected`]; rejections of
    /// buffered packets it releases are counted in `drops` directly.
    #[allow(clippy::too_many_arguments)] // the packet's fields, plus where results go
    pub(crate) fn on_data(
        &mut self,
        now: Instant,
        config: &Config,
        seq: u32,
        flags: Flags,
        payload: &[u8],
        drops: &mut DropCounts,
        deliver: &mut dyn FnMut(&[u8]),
    ) -> Result<Received, DropReason> {
        let offset = seq.wrapping_sub(self.rcv_nxt);
        if seq_lt(seq, self.rcv_nxt) {
            // seed 004, PM/UDP R3: an old sequence number is dropped and acked
            // (our ack was probably lost, so say it again at once).
            self.ack_now = true;
            return Err(DropReason::Duplicate);
        }
        if offset >= self.window {
            // seed 004, PM/UDP R2: no room to buffer it: drop and (N)ack so the
            // sender learns where we are. A correct sender never runs this far
            // ahead (it limits itself to `recv_window` past its oldest unacked).
            self.ack_now = true;
            return Err(DropReason::OutOfWindow);
        }
        if offset > 0 {
            return self.on_out_of_order(seq, flags, payload);
        }
        // seed 004, PM/UDP R1: the expected packet is taken (here: reassembled
        // and delivered) and acknowledged, with the ack delayed and coalesced.
        let taken = self.reasm.accept(flags, payload, deliver);
        let (mut delivered, rejected) = (u32::from(taken.delivered), taken.rejected);
        self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
        let filled = self.ooo > 0;
        while self.ooo > 0 && self.has(self.rcv_nxt) {
            let index = self.slot_index(self.rcv_nxt);
            let slot = &mut self.slots[index];
            slot.present = false;
            let taken = self.reasm.accept(slot.flags, &slot.data, deliver);
            delivered += u32::from(taken.delivered);
            if let Some(reason) = taken.rejected {
                drops.count(&reason);
            }
            if slot.data.capacity() > SLOT_KEEP {
                slot.data = Vec::new();
            }
            self.ooo -= 1;
            self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
        }
        if seq_lt(self.nack_hi, self.rcv_nxt) {
            self.nack_hi = self.rcv_nxt;
        }
        self.unacked += 1;
        self.unacked_bytes += payload.len();
        if filled
            || flags.contains(Flags::ACK_NOW)
            || self.unacked >= config.ack_every
            || self.unacked_bytes >= config.ack_every_bytes
        {
            // A packet that fills (part of) a hole is acked at once (RFC 5681
            // §4.2) so the sender's recovery ends quickly.
            self.ack_now = true;
        } else if self.ack_deadline.is_none() {
            self.ack_deadline = Some(now + config.max_ack_delay);
        }
        Ok(Received { delivered, advanced: true, rejected })
    }

    fn on_out_of_order(&mut self, seq: u32, flags: Flags, payload: &[u8]) -> Result<Received, DropReason> {
        if self.slots.is_empty() {
            self.slots = vec![Slot::default(); self.window.next_power_of_two() as usize];
        }
        let index = self.slot_index(seq);
        // Out-of-order and duplicate arrivals are acked at once: the SACK
        // tells the sender exactly what is missing.
        self.ack_now = true;
        if self.slots[index].present {
            return Err(DropReason::Duplicate);
        }
        // seed 004, PM/UDP R4/R5, improved: the packet after a hole is kept
        // (not dropped as R4/R5 say) and reported in the SACK bitmap; only the
        // hole is retransmitted.
        let slot = &mut self.slots[index];
        slot.present = true;
        slot.flags = flags;
        slot.data.clear();
        slot.data.extend_from_slice(payload);
        self.ooo += 1;
        // seed 004, PM/UDP R4: a gap is Nacked, once per hole: only holes at or
        // above `nack_hi` are new. Each sequence number is scanned at most
        // once as `nack_hi` moves forward, so this is O(1) amortized.
        let mut probe = if seq_lt(self.nack_hi, self.rcv_nxt) { self.rcv_nxt } else { self.nack_hi };
        let mut hole = false;
        while seq_lt(probe, seq) {
            if !self.has(probe) {
                hole = true;
                break;
            }
            probe = probe.wrapping_add(1);
        }
        if seq_lt(self.nack_hi, seq.wrapping_add(1)) {
            self.nack_hi = seq.wrapping_add(1);
        }
        if hole {
            self.nack_now = true;
        }
        Ok(Received { delivered: 0, advanced: false, rejected: None })
    }

    /// A Probe (or an `ACK_NOW` control packet) asks for an immediate ack.
    pub(crate) fn request_ack_now(&mut self) {
        self.ack_now = true;
    }

    /// The delayed-ack timer fired.
    pub(crate) fn on_ack_timer(&mut self) {
        self.ack_deadline = None;
        if self.unacked > 0 {
            self.ack_now = true;
        }
    }

    /// An ack (or Nack) must go out now.
    pub(crate) fn ack_due(&self) -> bool {
        self.ack_now || self.nack_now
    }

    /// The due ack should be a Nack (a new hole was seen).
    pub(crate) fn nack_due(&self) -> bool {
        self.nack_now
    }

    /// Some ack is owed, now or after the delay.
    pub(crate) fn ack_owed(&self) -> bool {
        self.unacked > 0 || self.ack_due()
    }

    /// Deadline of the delayed ack, if one is pending and not already due.
    pub(crate) fn ack_deadline(&self) -> Option<Instant> {
        if self.ack_due() {
            None
        } else {
            self.ack_deadline
        }
    }

    /// The acknowledgement fields to send: cumulative ack and SACK bitmap
    /// (bit i: `ack + 1 + i` was received).
    pub(crate) fn ack_fields(&self) -> (u32, u64) {
        let mut sack = 0u64;
        if self.ooo > 0 {
            let span = (self.window - 1).min(64);
            for i in 0..span {
                if self.has(self.rcv_nxt.wrapping_add(1 + i)) {
                    sack |= 1 << i;
                }
            }
        }
        (self.rcv_nxt, sack)
    }

    /// An ack carrying [`RecvState::ack_fields`] went out.
    pub(crate) fn on_ack_sent(&mut self) {
        self.unacked = 0;
        self.unacked_bytes = 0;
        self.ack_deadline = None;
        self.ack_now = false;
        self.nack_now = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(
        rs: &mut RecvState,
        cfg: &Config,
        seq: u32,
        flags: Flags,
        payload: &[u8],
        out: &mut Vec<Vec<u8>>,
    ) -> Result<Received, DropReason> {
        let mut drops = DropCounts::default();
        let got = rs.on_data(Instant::ZERO, cfg, seq, flags, payload, &mut drops, &mut |m| out.push(m.to_vec()));
        assert_eq!(drops.total(), 0, "no buffered packet is rejected here");
        got
    }

    #[test]
    fn reorders_reassembles_and_nacks_once_per_hole() {
        let cfg = Config { initial_seq: u32::MAX - 1, ..Config::default() };
        let mut rs = RecvState::new(&cfg);
        let mut out = Vec::new();
        let s0 = cfg.initial_seq;
        let f = Flags::FIRST;
        let l = Flags::LAST;
        // seq s0+1 and s0+3 arrive before s0: one Nack for the first hole run.
        data(&mut rs, &cfg, s0.wrapping_add(1), Flags::empty(), b"b", &mut out).unwrap();
        assert!(rs.nack_due());
        assert_eq!(rs.ack_fields(), (s0, 0b1));
        rs.on_ack_sent();
        data(&mut rs, &cfg, s0.wrapping_add(3), l, b"d", &mut out).unwrap();
        assert!(rs.nack_due(), "s0+2 is a new hole");
        rs.on_ack_sent();
        assert_eq!(data(&mut rs, &cfg, s0.wrapping_add(3), l, b"d", &mut out), Err(DropReason::Duplicate));
        assert!(!rs.nack_due(), "no new hole, no Nack storm");
        assert!(rs.ack_due());
        rs.on_ack_sent();
        data(&mut rs, &cfg, s0, f, b"a", &mut out).unwrap();
        assert!(out.is_empty());
        let r = data(&mut rs, &cfg, s0.wrapping_add(2), Flags::empty(), b"c", &mut out).unwrap();
        assert_eq!(r.delivered, 1);
        assert_eq!(out, vec![b"abcd".to_vec()]);
        assert_eq!(rs.ack_fields(), (s0.wrapping_add(4), 0));
        assert_eq!(data(&mut rs, &cfg, s0, f, b"a", &mut out), Err(DropReason::Duplicate));
        assert_eq!(
            data(&mut rs, &cfg, s0.wrapping_add(4 + cfg.recv_window), f | l, b"z", &mut out),
            Err(DropReason::OutOfWindow)
        );
    }

    #[test]
    fn large_packets_are_acked_every_ack_every_bytes() {
        let cfg = Config { ack_every: 8, ack_every_bytes: 100, ..Config::default() };
        let mut rs = RecvState::new(&cfg);
        let mut out = Vec::new();
        let fl = Flags::FIRST | Flags::LAST;
        data(&mut rs, &cfg, 0, fl, &[1; 60], &mut out).unwrap();
        assert!(!rs.ack_due(), "60 bytes: the ack may wait");
        data(&mut rs, &cfg, 1, fl, &[2; 60], &mut out).unwrap();
        assert!(rs.ack_due(), "120 bytes since the last ack");
        rs.on_ack_sent();
        data(&mut rs, &cfg, 2, fl, &[3; 60], &mut out).unwrap();
        assert!(!rs.ack_due(), "the byte count restarts with each ack");
    }

    #[test]
    fn delayed_ack_until_ack_every() {
        let cfg = Config { ack_every: 3, ..Config::default() };
        let mut rs = RecvState::new(&cfg);
        let mut out = Vec::new();
        let fl = Flags::FIRST | Flags::LAST;
        data(&mut rs, &cfg, 0, fl, b"", &mut out).unwrap();
        assert!(!rs.ack_due());
        assert_eq!(rs.ack_deadline(), Some(Instant::ZERO + cfg.max_ack_delay));
        data(&mut rs, &cfg, 1, fl, b"x", &mut out).unwrap();
        assert!(!rs.ack_due());
        data(&mut rs, &cfg, 2, fl, b"y", &mut out).unwrap();
        assert!(rs.ack_due());
        assert_eq!(out, vec![b"".to_vec(), b"x".to_vec(), b"y".to_vec()]);
    }

    #[test]
    fn reassembly_never_grows_past_max_message() {
        let cfg = Config { max_message: 1000, ..Config::default() };
        let mut rs = RecvState::new(&cfg);
        let mut out = Vec::new();
        let mut drops = DropCounts::default();
        let mut seq = 0u32;
        let mut send = |rs: &mut RecvState, flags: Flags, payload: &[u8], out: &mut Vec<Vec<u8>>| {
            let got = rs.on_data(Instant::ZERO, &cfg, seq, flags, payload, &mut drops, &mut |m| out.push(m.to_vec()));
            seq += 1;
            got.expect("in order, in window")
        };
        let chunk = [7u8; 300];
        assert_eq!(send(&mut rs, Flags::FIRST, &chunk, &mut out).rejected, None);
        assert_eq!(send(&mut rs, Flags::empty(), &chunk, &mut out).rejected, None);
        assert_eq!(send(&mut rs, Flags::empty(), &chunk, &mut out).rejected, None);
        assert_eq!(rs.reassembly_bytes(), 900);
        // The segment that would pass 1000 bytes: the message is discarded,
        // and so is every further segment of it, however many come.
        for _ in 0..10_000 {
            let r = send(&mut rs, Flags::empty(), &chunk, &mut out);
            assert_eq!(r.rejected, Some(DropReason::OversizedMessage));
            assert!(r.advanced, "the sequence number is consumed (and acked), or the sender would retry forever");
            assert_eq!(rs.reassembly_bytes(), 0);
        }
        assert_eq!(send(&mut rs, Flags::LAST, &chunk, &mut out).rejected, Some(DropReason::OversizedMessage));
        assert!(out.is_empty());
        // Vec growth may round the allocation up, never past twice the limit.
        assert!(rs.reasm.buf.capacity() <= 2 * 1000, "capacity {}", rs.reasm.buf.capacity());
        // Framing recovers at the next message; a message of exactly the limit passes.
        assert_eq!(send(&mut rs, Flags::FIRST, &[1; 500], &mut out).rejected, None);
        assert_eq!(send(&mut rs, Flags::LAST, &[2; 500], &mut out).delivered, 1);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), 1000);
        // A single packet over the limit, a continuation without a start, and
        // a new message cutting one short are rejected and counted.
        let big = [3u8; 1001];
        assert_eq!(
            send(&mut rs, Flags::FIRST | Flags::LAST, &big, &mut out).rejected,
            Some(DropReason::OversizedMessage)
        );
        let malformed = Some(DropReason::Malformed(mw_wire::Error::Malformed));
        assert_eq!(send(&mut rs, Flags::empty(), b"x", &mut out).rejected, malformed);
        assert_eq!(send(&mut rs, Flags::FIRST, b"cut", &mut out).rejected, None);
        let r = send(&mut rs, Flags::FIRST | Flags::LAST, b"next", &mut out);
        assert_eq!((r.delivered, r.rejected), (1, malformed), "the new message is still delivered");
        assert_eq!(out.last().unwrap(), b"next");
        assert_eq!(drops.total(), 0, "all of these were the arriving packet's own rejections");
    }

    #[test]
    fn oversized_messages_released_from_the_out_of_order_buffer_are_counted() {
        let cfg = Config { max_message: 10, ..Config::default() };
        let mut rs = RecvState::new(&cfg);
        let mut out = Vec::new();
        let mut drops = DropCounts::default();
        let mut on = |rs: &mut RecvState, seq: u32, flags: Flags, payload: &[u8], drops: &mut DropCounts| {
            rs.on_data(Instant::ZERO, &cfg, seq, flags, payload, drops, &mut |m| out.push(m.to_vec())).unwrap()
        };
        // Segments 1..=3 arrive before 0: 6 + 6 bytes pass the limit once 0 arrives.
        on(&mut rs, 1, Flags::empty(), &[1; 6], &mut drops);
        on(&mut rs, 2, Flags::LAST, &[2; 1], &mut drops);
        on(&mut rs, 3, Flags::FIRST | Flags::LAST, b"ok", &mut drops);
        let r = on(&mut rs, 0, Flags::FIRST, &[0; 6], &mut drops);
        assert_eq!(r.rejected, None);
        assert_eq!(r.delivered, 1, "only the message after the oversized one");
        assert_eq!(drops.oversized_message, 2, "segments 1 and 2");
        assert_eq!(out, vec![b"ok".to_vec()]);
        assert_eq!(rs.ack_fields(), (4, 0));
    }
}
