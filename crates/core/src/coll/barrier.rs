//! Barrier by the five methods of Cenju-4 §6.3 (seed 000), plus the default.
//! Barriers move no data: only signal words (and, for C, an atomic counter).
//!
//! What each costs, for N members (a round: one one-way message latency on
//! the critical path; messages: in all, per barrier):
//!
//! | method | rounds | messages |
//! |---|---|---|
//! | A all-to-all | 1 | N(N-1) |
//! | B binary tree | 2·floor(log2 N) | 2(N-1) |
//! | C counters (atomic adds) | 1 | N(N-1) |
//! | D multicast (binomial tree per origin) | ceil(log2 N) | N(N-1) |
//! | E dissemination | ceil(log2 N) | N·ceil(log2 N) |
//! | binomial tree | 2·ceil(log2 N) | 2(N-1) |
//!
//! A and C take one round but load every member with N - 1 arrivals; the
//! trees send fewest messages but take two passes; E takes one pass with
//! one message per member per round. `Auto` (`tuning::pick_barrier`) picks
//! by measurement: the binomial tree from 3 members all on one host
//! (what costs there is handing a CPU to another member, and its subtrees
//! share one), otherwise B at 3-4 members and E elsewhere.
//! `Endpoint::barrier` (not a team's) is also a dissemination barrier, over
//! the endpoint's reserved messages instead of signal words
//! (`crate::internal`). `tests/barrier.rs` checks every method as a
//! barrier: additions completed before it are all visible after it, over
//! shared memory, UDP and loss.
//!
//! Owns: one function per method (all-to-all signals, tree, counters,
//! multicast, dissemination). Must not: move user data, or leave a signal word
//! or counter in a state the next collective of the team could misread (every
//! word only grows within a team).

use mw_wire::op::{AtomicOp, AtomicWidth};

use super::tree::{binary_children, binary_parent, binomial_children, binomial_parent};
use super::tuning::{pick_barrier, BarrierAlgo};
use super::Team;
use crate::Result;

impl Team<'_> {
    /// Collective: returns when every member has called it.
    pub fn barrier(&mut self) -> Result<()> {
        self.barrier_with(self.tuning.barrier)
    }

    /// Barrier by a named method.
    pub fn barrier_with(&mut self, algo: BarrierAlgo) -> Result<()> {
        self.begin()?;
        let p = self.p();
        if p == 1 {
            return Ok(());
        }
        match if algo == BarrierAlgo::Auto { pick_barrier(p, self.wait.local) } else { algo } {
            BarrierAlgo::AllToAll | BarrierAlgo::Auto => self.barrier_all_to_all(),
            BarrierAlgo::Tree => self.barrier_tree(),
            BarrierAlgo::Counters => self.barrier_counters(),
            BarrierAlgo::Multicast => self.barrier_multicast(),
            BarrierAlgo::Dissemination => self.barrier_dissemination(),
            BarrierAlgo::Binomial => self.barrier_binomial(),
        }
    }

    /// Seed 000, §6.3 A: N nodes each send a packet to the N nodes.
    fn barrier_all_to_all(&mut self) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        self.notify_each((1..p).map(|k| (me + k) % p), 1)?;
        for k in 1..p {
            self.wait_from((me + p - k) % p, 1)?;
        }
        Ok(())
    }

    /// Seed 000, §6.3 B: requests gathered up a binary tree, completion
    /// sent back down.
    fn barrier_tree(&mut self) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        for c in binary_children(me, p) {
            self.wait_from(c, 1)?;
        }
        if let Some(parent) = binary_parent(me) {
            self.notify(parent, 1)?;
            self.wait_from(parent, 2)?;
        }
        self.notify_each(binary_children(me, p), 2)?;
        Ok(())
    }

    /// Seed 000, §6.3 C: every node sends a "+1" atomic add to every node;
    /// a node is through when its counter reaches N (cumulative: N per round).
    fn barrier_counters(&mut self) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        self.counter_rounds += 1;
        let offset = self.lay.counter();
        for k in 1..p {
            let to = (me + k) % p;
            let handle = self.ep.atomic_nb(
                self.ranks[to],
                self.keys[to],
                offset,
                AtomicOp::Add,
                AtomicWidth::U64,
                1,
                0,
                false,
            )?;
            drop(handle);
        }
        self.mem.atomic_u64(offset as usize).fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let want = self.counter_rounds * p as u64;
        // Anonymous adds: the rank to blame if it never completes is unknown;
        // any dead member fails the wait.
        self.wait_any_dead(|team| team.mem.load_u64(offset as usize) >= want)
    }

    /// Seed 000, §6.3 D: every node multicasts one arrival to all nodes. The
    /// multicast is a binomial tree rooted at the sender, forwarded by the
    /// library in each member; `arrival[o]` at a member is written only by
    /// its parent in `o`'s tree, so it grows monotonically.
    fn barrier_multicast(&mut self) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let value = self.sig(0);
        let mut seen = vec![false; p];
        seen[me] = true;
        let mut pending = vec![me];
        let mut left = p - 1;
        loop {
            for origin in pending.drain(..) {
                for &child in &binomial_children(me, origin, p) {
                    self.put_arrival(child, origin, value)?;
                }
            }
            if left == 0 {
                return Ok(());
            }
            let lay = self.lay;
            let mem = self.mem;
            let mut newly = Vec::new();
            self.wait_any_dead(|_| {
                for (o, s) in seen.iter().enumerate() {
                    if !s && mem.load_u64(lay.arrival(o) as usize) >= value {
                        newly.push(o);
                    }
                }
                !newly.is_empty()
            })?;
            for o in newly {
                seen[o] = true;
                left -= 1;
                pending.push(o);
            }
        }
    }

    fn put_arrival(&self, to: usize, origin: usize, value: u64) -> Result<()> {
        let signal = crate::rma::Signal {
            key: self.keys[to],
            offset: self.lay.arrival(origin),
            op: mw_wire::op::SignalOp::Set,
            value,
        };
        drop(self.ep.put_signal_nb(self.ranks[to], self.keys[to], 0, &[], signal)?);
        Ok(())
    }

    /// Binomial tree rooted at team rank 0: arrivals gathered up, the
    /// release sent back down. Its subtrees are blocks of consecutive
    /// ranks, which `spread` places on one CPU each, so on an oversubscribed
    /// host only the few links between blocks cross CPUs.
    fn barrier_binomial(&mut self) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let children = binomial_children(me, 0, p);
        for &c in children.iter().rev() {
            self.wait_from(c, 1)?;
        }
        if let Some(parent) = binomial_parent(me, 0, p) {
            self.notify(parent, 1)?;
            self.wait_from(parent, 2)?;
        }
        self.notify_each(children.iter().copied(), 2)?;
        Ok(())
    }

    /// E: dissemination, ceil(log2 N) rounds; in round k rank r signals
    /// r + 2^k and waits for r - 2^k.
    fn barrier_dissemination(&mut self) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let mut dist = 1;
        let mut round = 1;
        while dist < p {
            self.notify((me + dist) % p, round)?;
            self.wait_from((me + p - dist) % p, round)?;
            dist <<= 1;
            round += 1;
        }
        Ok(())
    }
}
