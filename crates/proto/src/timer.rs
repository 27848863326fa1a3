//! Timers: an enum-indexed deadline table per peer and one endpoint-wide queue.
//!
//! Owns: [`TimerKind`], [`PeerTimers`] (the deadline each kind should fire at,
//! written by the peer logic) and [`TimerQueue`] (a min-heap over all peers
//! that finds the earliest deadline in O(log n)).
//!
//! Must not: decide what a timer means; firing is the endpoint's job.
//!
//! The heap is lazy. A peer's deadline may move any number of times; an entry
//! is pushed only when the new deadline is *earlier* than the entry already
//! queued for that (peer, kind). When an entry pops and the real deadline
//! turned out later, it is re-queued at the real one. Deadlines that move
//! later on every packet (RTO restart, dead timer) therefore cost no heap work
//! per packet, and the heap holds at most a few entries per peer.

use crate::time::Instant;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What a timer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TimerKind {
    /// Send the delayed acknowledgement.
    AckDelay = 0,
    /// Retransmission timeout (seed 004, PM/UDP S4).
    Rto = 1,
    /// Declare the peer dead after `peer_dead_after` of silence while waiting on it.
    Dead = 2,
    /// Probe an idle peer (`Config::keepalive`), or re-probe an unanswered probe.
    Keepalive = 3,
}

impl TimerKind {
    const COUNT: usize = 4;
    const ALL: [TimerKind; TimerKind::COUNT] =
        [TimerKind::AckDelay, TimerKind::Rto, TimerKind::Dead, TimerKind::Keepalive];
}

/// One peer's deadlines, indexed by [`TimerKind`].
#[derive(Debug, Default, Clone)]
pub(crate) struct PeerTimers {
    /// When each timer should fire; `None` = not armed.
    due: [Option<Instant>; TimerKind::COUNT],
    /// The instant of the live heap entry for each kind, if any.
    queued: [Option<Instant>; TimerKind::COUNT],
}

/// The earliest-deadline queue over all peers.
#[derive(Debug, Default)]
pub(crate) struct TimerQueue {
    heap: BinaryHeap<Reverse<(Instant, u32, TimerKind)>>,
}

impl TimerQueue {
    /// Arms (or disarms, with `None`) `kind` of `peer` at `at`.
    pub(crate) fn set(&mut self, timers: &mut PeerTimers, peer: u32, kind: TimerKind, at: Option<Instant>) {
        let k = kind as usize;
        timers.due[k] = at;
        if let Some(at) = at {
            if !matches!(timers.queued[k], Some(queued) if queued <= at) {
                timers.queued[k] = Some(at);
                self.heap.push(Reverse((at, peer, kind)));
            }
        }
    }

    /// Sets every kind of `peer` at once from `due` (indexed like [`TimerKind`]).
    pub(crate) fn set_all(&mut self, timers: &mut PeerTimers, peer: u32, due: [Option<Instant>; 4]) {
        for kind in TimerKind::ALL {
            self.set(timers, peer, kind, due[kind as usize]);
        }
    }

    /// Makes the top of the heap exact: drops superseded or disarmed entries
    /// and moves entries whose deadline went later. Afterwards [`next`](Self::next)
    /// is the true earliest deadline. O(log n) per entry removed.
    pub(crate) fn tidy<T>(&mut self, peers: &mut [T], timers_of: fn(&mut T) -> &mut PeerTimers) {
        while let Some(&Reverse((at, peer, kind))) = self.heap.peek() {
            let timers = timers_of(&mut peers[peer as usize]);
            let k = kind as usize;
            if timers.queued[k] == Some(at) && timers.due[k] == Some(at) {
                return;
            }
            self.heap.pop();
            if timers.queued[k] != Some(at) {
                continue;
            }
            timers.queued[k] = None;
            if let Some(due) = timers.due[k] {
                timers.queued[k] = Some(due);
                self.heap.push(Reverse((due, peer, kind)));
            }
        }
    }

    /// The earliest queued instant; exact after [`tidy`](Self::tidy).
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Pops the next timer that is really due at `now`: stale entries are
    /// discarded and entries whose deadline moved later are re-queued.
    /// `timers_of` maps an element of `peers` (indexed by rank) to its table.
    pub(crate) fn pop_due<T>(
        &mut self,
        now: Instant,
        peers: &mut [T],
        timers_of: fn(&mut T) -> &mut PeerTimers,
    ) -> Option<(u32, TimerKind)> {
        while let Some(&Reverse((at, peer, kind))) = self.heap.peek() {
            if at > now {
                return None;
            }
            self.heap.pop();
            let timers = timers_of(&mut peers[peer as usize]);
            let k = kind as usize;
            if timers.queued[k] != Some(at) {
                continue; // superseded by an earlier entry
            }
            timers.queued[k] = None;
            match timers.due[k] {
                None => {}
                Some(due) if due > now => {
                    timers.queued[k] = Some(due);
                    self.heap.push(Reverse((due, peer, kind)));
                }
                Some(_) => {
                    timers.due[k] = None;
                    return Some((peer, kind));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn t(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    #[test]
    fn lazy_queue_fires_at_real_deadlines() {
        let mut q = TimerQueue::default();
        let mut peers = vec![PeerTimers::default(), PeerTimers::default()];
        q.set(&mut peers[0], 0, TimerKind::Rto, Some(t(10)));
        // Moving later pushes nothing.
        q.set(&mut peers[0], 0, TimerKind::Rto, Some(t(30)));
        assert_eq!(q.heap.len(), 1);
        // Moving earlier pushes.
        q.set(&mut peers[1], 1, TimerKind::AckDelay, Some(t(20)));
        q.set(&mut peers[1], 1, TimerKind::AckDelay, Some(t(5)));
        assert_eq!(q.next(), Some(t(5)));
        fn id(p: &mut PeerTimers) -> &mut PeerTimers {
            p
        }
        assert_eq!(q.pop_due(t(9), &mut peers, id), Some((1, TimerKind::AckDelay)));
        // The stale 20 µs entry and the moved RTO entry fire nothing early.
        assert_eq!(q.pop_due(t(25), &mut peers, id), None);
        assert_eq!(q.next(), Some(t(30)));
        assert_eq!(q.pop_due(t(30), &mut peers, id), Some((0, TimerKind::Rto)));
        assert_eq!(q.pop_due(t(100), &mut peers, id), None);
        assert_eq!(q.next(), None);
        // Disarmed timers never fire.
        q.set(&mut peers[0], 0, TimerKind::Dead, Some(t(200)));
        q.set(&mut peers[0], 0, TimerKind::Dead, None);
        assert_eq!(q.pop_due(t(300), &mut peers, id), None);
    }
}
