//! The endpoint's own small collective: an allgather of short byte strings
//! through rank 0, used for `barrier`, `alloc_symmetric` and key exchange.
//!
//! It runs over memwire's reliable messages (reserved active-message ids), so
//! a rank waiting in it keeps making progress and keeps serving its peers;
//! a blocking out-of-band exchange here could deadlock against a peer that is
//! waiting for this rank's acknowledgement. Must not: carry bulk data (the
//! collectives layer does that) or be used concurrently from two threads in
//! different orders (collective calls are made in the same order everywhere).

use crate::region::KeyMap;

/// Reserved active-message id: a contribution to internal gather `seq`.
pub(crate) const HANDLER_GATHER: u16 = 0xFF00;
/// Reserved active-message id: rank 0's answer to internal gather `seq`.
pub(crate) const HANDLER_RESULT: u16 = 0xFF01;
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
    /// A peer failed: every pending and future gather fails.
    pub failed_peer: Option<u32>,
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
            _ => false,
        }
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
}
