//! The endpoint's own small collectives: an allgather of short byte strings
//! through rank 0 (for `allgather_bytes`, `alloc_symmetric` and key
//! exchange), and the dissemination barrier behind `Endpoint::barrier`.
//!
//! Both run over memwire's reliable messages (reserved active-message ids),
//! so a rank waiting in them keeps making progress and keeps serving its
//! peers; a blocking out-of-band exchange here could deadlock against a peer
//! that is waiting for this rank's acknowledgement. Must not: carry bulk data
//! (the collectives layer does that) or be used concurrently from two threads
//! in different orders (collective calls are made in the same order
//! everywhere).
//!
//! # The barrier
//!
//! Dissemination (Hensgen, Finkel and Manber, 1988): in round `k` rank `r`
//! signals rank `r + 2^k` and waits for the signal of rank `r - 2^k` (mod
//! N), for `k = 0 .. ceil(log2 N)`. After round `k` a rank has heard,
//! directly or through the chain, from the `2^(k+1) - 1` ranks before it,
//! so after the last round from all N - 1 others: nobody leaves before
//! everyone entered. Cost: `ceil(log2 N)` message rounds (each a one-way
//! message, not a round trip), one message per rank per round, no root that
//! handles N messages, for any N (not only powers of two). The gather it
//! replaced took a round trip through rank 0, which received N - 1
//! messages and sent N - 1 answers one after the other.
//!
//! A signal carries only the barrier's number; its round follows from the
//! distance to its sender (`r - 2^k`, a different rank for each `k`), so a
//! signal from any other rank is refused (counted as unsupported). Barrier
//! numbers keep back-to-back barriers apart: a rank that left barrier `s`
//! may signal its part of `s + 1` to a rank still waiting in `s`, but
//! nobody can reach `s + 2` before every rank left `s` (leaving `s + 1`
//! takes everyone's entry into it), so signals arrive only for the barrier
//! a rank is in or the next one.

use crate::deadline::{Bound, LazyDeadline};
use crate::endpoint::{internal_am, Endpoint};
use crate::region::KeyMap;
use crate::Error;

/// Reserved active-message id: a contribution to internal gather `seq`.
pub(crate) const HANDLER_GATHER: u16 = 0xFF00;
/// Reserved active-message id: rank 0's answer to internal gather `seq`.
pub(crate) const HANDLER_RESULT: u16 = 0xFF01;
/// Reserved active-message id: a dissemination barrier's signal (argument:
/// the barrier's number).
pub(crate) const HANDLER_BARRIER: u16 = 0xFF02;
/// Lowest reserved handler id; user handlers must be below it.
pub const RESERVED_HANDLER_BASE: u16 = 0xFF00;

/// The internal gather state of one endpoint.
#[derive(Debug)]
pub(crate) struct Internal {
    rank: u32,
    size: u32,
    pub next_seq: u64,
    /// Root only: contributions per sequence number, by rank.
    /// Sequence numbers are this job's own (counted by the members, never
    /// chosen by an outsider), so the one-multiply hasher is enough: a rank
    /// waiting in a barrier looks its result up on every round of the wait,
    /// also just before it executes an arriving active message (the
    /// default SipHash was 2.7% of an 8-byte am ping-pong's `perf` profile).
    contributions: KeyMap<u64, Vec<Option<Vec<u8>>>>,
    /// Completed results per sequence number.
    results: KeyMap<u64, Vec<Vec<u8>>>,
    /// Root only: results ready to be sent to the others.
    pub outgoing: Vec<(u64, Vec<u8>)>,
    /// A peer failed: every pending and future gather or barrier fails.
    pub failed_peer: Option<u32>,
    /// Barriers this rank has entered (the next one's number).
    barriers_entered: u64,
    /// Barriers this rank has left: signals for earlier ones are stale.
    barriers_left: u64,
    /// Signals received per barrier number, bit `k` for round `k`. An
    /// entry may start before this rank enters that barrier (a faster
    /// peer's first rounds of the next one) and ends when it leaves it.
    barrier_signals: KeyMap<u64, u64>,
    /// A barrier whose wait timed out (its number, and the round whose
    /// signal this rank has sent and waits for): the next `barrier` call
    /// continues it there.
    pub barrier_paused: Option<(u64, u32)>,
    /// A gather whose wait timed out: the others may still be in it, so
    /// later gathers fail (`Error::TeamBroken`) rather than mix with it.
    pub gather_broken: bool,
}

impl Internal {
    pub fn new(rank: u32, size: u32) -> Internal {
        Internal {
            rank,
            size,
            next_seq: 0,
            contributions: KeyMap::default(),
            results: KeyMap::default(),
            outgoing: Vec::new(),
            failed_peer: None,
            barriers_entered: 0,
            barriers_left: 0,
            barrier_signals: KeyMap::default(),
            barrier_paused: None,
            gather_broken: false,
        }
    }

    /// Records `blob` from `rank` for gather `seq` (root only).
    pub fn contribute(&mut self, seq: u64, rank: u32, blob: &[u8]) {
        let size = self.size as usize;
        let slots = self.contributions.entry(seq).or_insert_with(|| vec![None; size]);
        if let Some(slot) = slots.get_mut(rank as usize) {
            *slot = Some(blob.to_vec());
        }
        if slots.iter().all(Option::is_some) {
            let all: Vec<Vec<u8>> = self
                .contributions
                .remove(&seq)
                .unwrap_or_default()
                .into_iter()
                .map(Option::unwrap_or_default)
                .collect();
            self.outgoing.push((seq, encode(&all)));
            self.results.insert(seq, all);
        }
    }

    /// Handles a reserved active message from `peer`.
    pub fn on_message(&mut self, peer: u32, handler: u16, seq: u64, body: &[u8]) -> bool {
        match handler {
            HANDLER_GATHER if self.rank == 0 => {
                self.contribute(seq, peer, body);
                true
            }
            HANDLER_RESULT if peer == 0 => {
                if let Some(all) = decode(body, self.size as usize) {
                    self.results.insert(seq, all);
                }
                true
            }
            HANDLER_BARRIER => self.on_barrier_signal(peer, seq),
            _ => false,
        }
    }

    /// Records `peer`'s signal for barrier `seq`; false when it cannot be
    /// one (a rank at no power-of-two distance behind this one, a barrier
    /// already left or more than one ahead, a round signalled twice).
    fn on_barrier_signal(&mut self, peer: u32, seq: u64) -> bool {
        let Some(round) = barrier_round(self.rank, peer, self.size) else {
            return false;
        };
        if seq < self.barriers_left || seq > self.barriers_left + 1 {
            return false;
        }
        let bits = self.barrier_signals.entry(seq).or_insert(0);
        let bit = 1u64 << round;
        if *bits & bit != 0 {
            return false;
        }
        *bits |= bit;
        true
    }

    /// Enters the next barrier; returns its number.
    pub fn barrier_enter(&mut self) -> u64 {
        let seq = self.barriers_entered;
        self.barriers_entered += 1;
        seq
    }

    /// How round `round` of barrier `seq` stands: `Ok` once its signal
    /// arrived (also after a peer failed: one that signalled and left is
    /// gone by the time a slower rank looks), `Err(peer)` when it has not
    /// and a peer failed, `None` while it may still come.
    pub fn barrier_round(&self, seq: u64, round: u32) -> Option<Result<(), u32>> {
        let bits = self.barrier_signals.get(&seq).copied().unwrap_or(0);
        if bits & (1u64 << round) != 0 {
            return Some(Ok(()));
        }
        self.failed_peer.map(Err)
    }

    /// Leaves barrier `seq` (done or failed): its signals are forgotten and
    /// any later one for it is refused.
    pub fn barrier_leave(&mut self, seq: u64) {
        self.barrier_signals.remove(&seq);
        self.barriers_left = self.barriers_left.max(seq + 1);
    }

    /// Takes the result of gather `seq` if it is complete.
    pub fn take_result(&mut self, seq: u64) -> Option<Vec<Vec<u8>>> {
        // A waiter asks on every round of its wait, almost always in vain:
        // an empty map answers without the (out-of-line) probe.
        if self.results.is_empty() {
            return None;
        }
        self.results.remove(&seq)
    }

    /// Whether gather `seq` has a result.
    #[cfg(test)]
    pub fn has_result(&self, seq: u64) -> bool {
        self.results.contains_key(&seq)
    }

    pub fn peer_failed(&mut self, peer: u32) {
        self.failed_peer.get_or_insert(peer);
    }

    /// How gather `seq` ended, if it did: its result when there is one,
    /// even after a peer failed (a peer that got its own result and left,
    /// as after `finalize`'s barrier, is gone by the time a slower member
    /// reads the root's answer, and that member's gather succeeded all the
    /// same); otherwise the failed peer.
    pub fn outcome(&mut self, seq: u64) -> Option<Result<Vec<Vec<u8>>, u32>> {
        if let Some(result) = self.take_result(seq) {
            return Some(Ok(result));
        }
        self.failed_peer.map(Err)
    }
}

/// The dissemination round in which `peer` signals `rank` in a job of
/// `size`: `k` when `peer = rank - 2^k (mod size)` with `2^k < size`.
fn barrier_round(rank: u32, peer: u32, size: u32) -> Option<u32> {
    if rank >= size || peer >= size {
        return None;
    }
    let dist = (u64::from(rank) + u64::from(size) - u64::from(peer)) % u64::from(size);
    (dist != 0 && dist.is_power_of_two()).then(|| dist.trailing_zeros())
}

/// Rounds of a dissemination barrier of `size` ranks: `ceil(log2 size)`.
fn barrier_rounds(size: u32) -> u32 {
    size.next_power_of_two().trailing_zeros()
}

impl Endpoint {
    /// [`Endpoint::barrier`]: the dissemination barrier described in the
    /// module docs. Each round's wait is bounded by the operation timeout;
    /// a barrier that times out stays entered, and the next call continues
    /// it from the round it waited in (its signal is not sent again), so
    /// barrier numbers stay in step with the other ranks.
    pub(crate) fn barrier_dissemination(&self) -> crate::Result<()> {
        let (rank, size) = (self.rank(), self.size());
        let (seq, first_round, resumed) = {
            let mut state = self.lock();
            match state.internal.barrier_paused.take() {
                Some((seq, round)) => (seq, round, true),
                None => (state.internal.barrier_enter(), 0, false),
            }
        };
        let result = self.barrier_signal_rounds(seq, first_round, resumed, rank, size);
        let mut state = self.lock();
        match result {
            Err(crate::Error::Timeout) if state.internal.barrier_paused.is_some() => {}
            _ => state.internal.barrier_leave(seq),
        }
        result
    }

    /// Rounds `first_round..` of barrier `seq`; `resumed`: the first
    /// round's signal went out before the barrier paused.
    fn barrier_signal_rounds(
        &self,
        seq: u64,
        first_round: u32,
        resumed: bool,
        rank: u32,
        size: u32,
    ) -> crate::Result<()> {
        let mut signalled = resumed;
        for round in first_round..barrier_rounds(size) {
            let to = ((u64::from(rank) + (1u64 << round)) % u64::from(size)) as u32;
            if !std::mem::take(&mut signalled) {
                let mut state = self.lock();
                let now = self.shared.now();
                state.send_op(now, to, &internal_am(HANDLER_BARRIER, seq), &[], None)?;
            }
            let mut outcome = None;
            let in_time = self.wait_for_bounded(
                |state| {
                    outcome = state.internal.barrier_round(seq, round);
                    outcome.is_some()
                },
                &mut LazyDeadline::new(Bound::Paced),
            );
            if !in_time {
                self.lock().internal.barrier_paused = Some((seq, round));
                return Err(Error::Timeout);
            }
            match outcome {
                Some(Ok(())) => {}
                Some(Err(rank)) => return Err(Error::PeerUnreachable { rank }),
                None => return Err(Error::InvalidArgument("barrier round ended without an outcome")),
            }
        }
        Ok(())
    }
}

/// Length-prefixed concatenation.
fn encode(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
    for part in parts {
        out.extend_from_slice(&(part.len() as u32).to_le_bytes());
        out.extend_from_slice(part);
    }
    out
}

fn decode(mut bytes: &[u8], count: usize) -> Option<Vec<Vec<u8>>> {
    let mut parts = Vec::with_capacity(count);
    for _ in 0..count {
        let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        parts.push(bytes.get(4..4 + len)?.to_vec());
        bytes = &bytes[4 + len..];
    }
    bytes.is_empty().then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        let parts = vec![b"a".to_vec(), vec![], b"xyz".to_vec()];
        assert_eq!(decode(&encode(&parts), 3), Some(parts));
        assert_eq!(decode(&[1, 0, 0], 1), None);
        assert_eq!(decode(&encode(&[b"a".to_vec()]), 2), None);
    }

    #[test]
    fn a_result_that_arrived_wins_over_a_peer_that_left_since() {
        let mut member = Internal::new(1, 3);
        assert_eq!(member.outcome(0), None, "nothing yet");
        // The root's answer is in; then rank 2, done with its own copy, exits.
        let all = encode(&[b"r0".to_vec(), b"r1".to_vec(), b"r2".to_vec()]);
        assert!(member.on_message(0, HANDLER_RESULT, 0, &all));
        member.peer_failed(2);
        assert_eq!(member.outcome(0), Some(Ok(vec![b"r0".to_vec(), b"r1".to_vec(), b"r2".to_vec()])));
        // A gather whose answer never came fails with the peer.
        assert_eq!(member.outcome(1), Some(Err(2)));
    }

    #[test]
    fn root_completes_when_all_arrive() {
        let mut root = Internal::new(0, 3);
        root.contribute(0, 0, b"r0");
        assert!(root.on_message(2, HANDLER_GATHER, 0, b"r2"));
        assert!(!root.has_result(0));
        assert!(root.on_message(1, HANDLER_GATHER, 0, b"r1"));
        assert_eq!(root.take_result(0).unwrap(), vec![b"r0".to_vec(), b"r1".to_vec(), b"r2".to_vec()]);
        assert_eq!(root.outgoing.len(), 1);
    }

    #[test]
    fn dissemination_rounds_and_senders() {
        let rounds: Vec<u32> = [1, 2, 3, 4, 5, 8, 9].iter().map(|&n| barrier_rounds(n)).collect();
        assert_eq!(rounds, [0, 1, 2, 2, 3, 3, 4]);
        // Rank 0 of 5 hears from 4 (round 0), 3 (round 1) and 1 (round 2:
        // 0 - 4 = 1 mod 5); rank 2 is at distance 3, itself at 0.
        let from: Vec<Option<u32>> = (0..5).map(|peer| barrier_round(0, peer, 5)).collect();
        assert_eq!(from, [None, Some(2), None, Some(1), Some(0)]);
        assert_eq!(barrier_round(0, 7, 5), None, "no such rank");
    }

    #[test]
    fn barrier_signals_are_kept_apart_by_barrier_number() {
        let mut rank = Internal::new(0, 5);
        let seq = rank.barrier_enter();
        assert_eq!(rank.barrier_round(seq, 0), None);
        // A faster peer's part of the next barrier comes first.
        assert!(rank.on_message(4, HANDLER_BARRIER, seq + 1, &[]));
        assert_eq!(rank.barrier_round(seq, 0), None, "the next barrier's signal is not this one's");
        assert!(rank.on_message(4, HANDLER_BARRIER, seq, &[]));
        assert!(!rank.on_message(4, HANDLER_BARRIER, seq, &[]), "a round signalled twice");
        assert!(!rank.on_message(2, HANDLER_BARRIER, seq, &[]), "rank 2 never signals rank 0");
        assert!(!rank.on_message(3, HANDLER_BARRIER, seq + 2, &[]), "nobody is two barriers ahead");
        assert_eq!(rank.barrier_round(seq, 0), Some(Ok(())));
        assert_eq!(rank.barrier_round(seq, 1), None);
        rank.barrier_leave(seq);
        assert!(!rank.on_message(3, HANDLER_BARRIER, seq, &[]), "a barrier already left");
        let next = rank.barrier_enter();
        assert_eq!(rank.barrier_round(next, 0), Some(Ok(())), "kept from before this rank entered");
    }

    #[test]
    fn a_barrier_signal_that_arrived_wins_over_a_peer_that_left_since() {
        let mut rank = Internal::new(1, 2);
        let seq = rank.barrier_enter();
        assert!(rank.on_message(0, HANDLER_BARRIER, seq, &[]));
        rank.peer_failed(0);
        assert_eq!(rank.barrier_round(seq, 0), Some(Ok(())));
        rank.barrier_leave(seq);
        let next = rank.barrier_enter();
        assert_eq!(rank.barrier_round(next, 0), Some(Err(0)));
    }
}
