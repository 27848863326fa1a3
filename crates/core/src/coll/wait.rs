//! How a team member waits for a word of its scratch region to reach a
//! value: the one place collectives wait.
//!
//! When every member shares this host, peers write our words by direct
//! stores (crate::shm::direct): nothing needs the endpoint to progress for
//! the word to change. So we first poll the word alone, without the
//! endpoint lock (a load per round, not a lock and a ring scan), with a
//! local progress round now and then for what does come through the rings
//! (an operation queued behind messages, a dead peer's detection). The
//! spin yields the CPU early: a peer that shares our core (oversubscribed,
//! or placed there by the scheduler on a busy machine) runs at once instead
//! of at the end of our time slice. After `MW_SHM_SPIN_US` the endpoint's
//! wait (which blocks in the kernel) takes over. Teams with a member
//! reached over UDP go straight to the endpoint's wait: their words change
//! only when the progress engine executes a datagram.
//!
//! Owns: the spin → yield → block policy of collectives. Must not: decide
//! what the words mean (mod.rs) or progress the endpoint beyond asking it to.

use std::time::{Duration, Instant};

use mw_wire::op::SignalOp;

use super::Team;
use crate::deadline::{Bound, LazyDeadline};
use crate::endpoint::{Endpoint, State};
use crate::rma::Signal;
use crate::{Error, Result};

/// Word polls between clock reads.
const POLLS_PER_ROUND: u32 = 32;
/// How often the spin runs a local progress round (rings, liveness).
const PROGRESS_EVERY: Duration = Duration::from_micros(2);
/// A wait for a peer on another CPU spins this long before it yields too.
const YIELD_AFTER: Duration = Duration::from_micros(20);
/// Oversubscribed, any wait yields after this long even when the peer
/// seems to run elsewhere (its announced CPU may be stale).
const OVERSUBSCRIBED_YIELD_AFTER: Duration = Duration::from_micros(2);

/// How a team waits; decided once, when the team is formed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitPolicy {
    /// Every member shares memory with this rank.
    pub local: bool,
    /// More ranks of the job run on this host than it has CPUs for us.
    pub oversubscribed: bool,
    /// Spin and yield this long before the endpoint's blocking wait.
    pub budget: Duration,
    /// The CPUs (below 64) this thread may run on, one bit each.
    pub allowed: u64,
    /// Members crowded on one CPU move apart (`spread`).
    pub spread: bool,
}

impl WaitPolicy {
    /// `local`: every member reaches every member through shared memory
    /// (agreed when the team formed).
    pub(crate) fn new(ep: &Endpoint, ranks: &[u32], local: bool, may_spread: bool) -> WaitPolicy {
        let me = ep.rank();
        let budget = ep.shared.shm.as_ref().map_or(Duration::ZERO, |shm| shm.spin);
        let on_host = 1 + (0..ep.size()).filter(|&r| r != me && ep.shares_memory_with(r)).count();
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let allowed = mw_transport::wait::allowed_cpus()
            .unwrap_or_default()
            .into_iter()
            .filter(|&c| c < 64)
            .fold(0u64, |mask, c| mask | 1 << c);
        let spread =
            may_spread && spreads(Placement { local, on_host, team: ranks.len(), one_host: ep.shared.one_host });
        WaitPolicy { local, oversubscribed: on_host > cpus, budget, allowed, spread }
    }
}

/// What decides whether a team's members move apart.
#[derive(Debug, Clone, Copy)]
struct Placement {
    /// Every member reaches every member through shared memory.
    local: bool,
    /// Ranks of the job that share memory with this one, itself included.
    on_host: usize,
    /// Team size.
    team: usize,
    /// Every rank of the job runs on this host.
    one_host: bool,
}

/// Whether a team spreads its members over the CPUs: an all-shared-memory
/// team of every rank on the host, or a job all on this host that talks
/// over UDP (shared memory off). The latter crowds onto one CPU just the
/// same: the scheduler wakes a rank where its waker ran, and a rank then
/// waits for a datagram its peer cannot send until it is descheduled.
/// Measured with `mwbench --transport udp --no-mpi`, 3 runs each: 2 ranks,
/// 8-byte allgather 6.5 us (co-located, 4 jobs of 6) instead of 2.9; 4
/// ranks on 2 CPUs, 64 KiB alltoall 194-214 us → 139-145, allgather
/// 116-180 → 119-120, allreduce 73-84 → 57-60.
fn spreads(at: Placement) -> bool {
    (at.local && at.on_host == at.team) || (!at.local && at.one_host)
}

/// The CPU team rank `me` of `p` belongs on (see `Team::spread`), given
/// the CPUs it may use (`allowed`, one bit each) and where each member
/// runs (`cpu_of`, `None` while unannounced). `None`: no plan (fewer than
/// two CPUs, or a block's first member has not announced yet).
fn home_cpu(me: usize, p: usize, allowed: u64, cpu_of: impl Fn(usize) -> Option<u32>) -> Option<u32> {
    let ncpus = allowed.count_ones() as usize;
    if ncpus < 2 || cpu_of(me)? >= 64 {
        return None;
    }
    let block = p.div_ceil(ncpus);
    let groups = p.div_ceil(block);
    let mut claimed = 0u64;
    let mut home = [None::<u32>; 64];
    for (g, slot) in home.iter_mut().enumerate().take(groups) {
        let c = cpu_of(g * block)?;
        if c < 64 && allowed & (1 << c) != 0 && claimed & (1 << c) == 0 {
            claimed |= 1 << c;
            *slot = Some(c);
        }
    }
    for slot in home.iter_mut().take(groups) {
        if slot.is_none() {
            let c = (allowed & !claimed).trailing_zeros();
            claimed |= 1 << c;
            *slot = Some(c);
        }
    }
    home[me / block]
}

impl Team<'_> {
    /// Tells the other members which CPU this rank runs on when that
    /// changed since it last did (rarely: the scheduler keeps a busy thread
    /// where it is). On all-shared-memory teams (their waits read it), and
    /// on teams that spread (whose plan is made from it).
    pub(super) fn announce_cpu(&mut self) -> Result<()> {
        if !self.wait.local && !self.wait.spread {
            return Ok(());
        }
        let seq = self.seq + 1;
        if (seq & (seq - 1) == 0 || seq % 256 == 0) && self.wait.spread {
            self.spread();
        }
        let cpu = mw_transport::wait::current_cpu();
        if cpu == self.announced_cpu {
            return Ok(());
        }
        self.announced_cpu = cpu;
        let value = cpu.map_or(0, |c| u64::from(c) + 1);
        for to in (0..self.p()).filter(|&to| to != self.me) {
            let signal = Signal { key: self.keys[to], offset: self.lay.cpu(self.me), op: SignalOp::Set, value };
            drop(self.ep.put_signal_nb(self.ranks[to], self.keys[to], 0, &[], signal)?);
        }
        Ok(())
    }

    /// Moves this rank to its block's CPU if it is elsewhere. Team ranks
    /// are cut into blocks of consecutive ranks, one per CPU the thread may
    /// use (as `mpirun --map-by core` would place processes): ranks that
    /// cannot run at the same time anyway then share a CPU, and the tree
    /// algorithms (whose subtrees are such blocks) cross CPUs only between
    /// blocks. A block's CPU is where its first rank runs, unless an
    /// earlier block has that CPU, then the lowest one no block has. Every
    /// member computes the same plan from the CPUs the members announced;
    /// nothing moves until all have announced one.
    fn spread(&mut self) {
        let Some(mine) = mw_transport::wait::current_cpu() else { return };
        let cpu_of = |w: usize| -> Option<u32> {
            if w == self.me {
                return Some(mine);
            }
            let v = self.mem.load_u64(self.lay.cpu(w) as usize);
            (v != 0 && v <= 64).then(|| (v - 1) as u32)
        };
        if let Some(target) = home_cpu(self.me, self.p(), self.wait.allowed, cpu_of) {
            if target != mine {
                let _ = mw_transport::wait::nudge_to_cpu(target);
            }
        }
    }

    /// Waits until the word at `offset` of the scratch region is at least
    /// `want`, failing if team rank `peer` (who would write it) is dead.
    pub(crate) fn wait_word(&self, offset: u64, want: u64, peer: usize) -> Result<()> {
        let mem = self.mem;
        let at = offset as usize;
        if mem.load_u64(at) >= want {
            return Ok(());
        }
        let world = self.ranks[peer] as usize;
        if self.wait.local {
            let mut dead = false;
            let done = self.spin_local(
                Some(peer),
                || mem.load_u64(at) >= want,
                |state| {
                    dead = state.dead[world];
                    dead
                },
            );
            if done {
                return Ok(());
            }
            if dead {
                return Err(Error::PeerUnreachable { rank: world as u32 });
            }
        }
        let mut dead = false;
        self.wait_bounded(|state| {
            if mem.load_u64(at) >= want {
                return true;
            }
            dead = state.dead[world];
            dead
        })?;
        if dead && mem.load_u64(at) < want {
            return Err(Error::PeerUnreachable { rank: world as u32 });
        }
        Ok(())
    }

    /// Waits until `done` holds; fails if any member is dead meanwhile.
    pub(crate) fn wait_any_dead(&self, mut done: impl FnMut(&Team<'_>) -> bool) -> Result<()> {
        if done(self) {
            return Ok(());
        }
        let mut dead = None;
        let ranks = &self.ranks;
        if self.wait.local {
            let finished = self.spin_local(
                None,
                || done(self),
                |state| {
                    dead = ranks.iter().copied().find(|&r| state.dead[r as usize]);
                    dead.is_some()
                },
            );
            if finished {
                return Ok(());
            }
        }
        if dead.is_none() {
            self.wait_bounded(|state| {
                if done(self) {
                    return true;
                }
                dead = ranks.iter().copied().find(|&r| state.dead[r as usize]);
                dead.is_some()
            })?;
        }
        match dead {
            Some(rank) if !done(self) => Err(Error::PeerUnreachable { rank }),
            _ => Ok(()),
        }
    }

    /// The endpoint's wait for `done`, bounded by the operation timeout
    /// (from when it starts: after the spin, which is microseconds). One
    /// that times out leaves the team broken (see [`Team`]'s docs).
    pub(super) fn wait_bounded(&self, done: impl FnMut(&mut State) -> bool) -> Result<()> {
        if self.ep.wait_for_bounded(done, &mut LazyDeadline::new(Bound::Paced)) {
            return Ok(());
        }
        self.broken.store(true, std::sync::atomic::Ordering::Relaxed);
        Err(Error::Timeout)
    }

    /// Whether an earlier collective on this team timed out on this rank.
    pub fn is_broken(&self) -> bool {
        self.broken.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether spinning for team rank `peer` is pointless now: it last ran
    /// on the CPU we are running on, so it cannot be running.
    pub(super) fn shares_my_cpu(&self, peer: usize) -> bool {
        let theirs = self.mem.load_u64(self.lay.cpu(peer) as usize);
        theirs != 0 && mw_transport::wait::current_cpu().is_some_and(|mine| u64::from(mine) + 1 == theirs)
    }

    /// The lock-free phase of a wait on an all-shared-memory team: polls
    /// `done`, runs a local progress round every `PROGRESS_EVERY` (stopping
    /// if `failed` says so under the lock), and yields the CPU each round
    /// when the job is oversubscribed, when `peer` (the rank that will end
    /// the wait, if one) last ran on our CPU, or after `YIELD_AFTER`.
    /// Returns whether `done` held; `false` after the budget or a failure.
    fn spin_local(
        &self,
        peer: Option<usize>,
        mut done: impl FnMut() -> bool,
        mut failed: impl FnMut(&mut crate::endpoint::State) -> bool,
    ) -> bool {
        let start = Instant::now();
        let mut last_progress = start;
        // Oversubscribed, the peer most likely waits for our CPU: hand it
        // over after a few polls rather than a whole round.
        let polls = if self.wait.oversubscribed { 4 } else { POLLS_PER_ROUND };
        loop {
            for _ in 0..polls {
                if done() {
                    return true;
                }
                std::hint::spin_loop();
            }
            let now = Instant::now();
            let waited = now - start;
            if now - last_progress >= PROGRESS_EVERY {
                last_progress = now;
                let mut state = self.ep.lock();
                state.progress_local(self.ep.shared.now());
                if done() {
                    return true;
                }
                if failed(&mut state) {
                    return false;
                }
            }
            if waited >= self.wait.budget {
                return false;
            }
            let yield_now = match peer {
                _ if waited >= YIELD_AFTER => true,
                _ if self.wait.oversubscribed && waited >= OVERSUBSCRIBED_YIELD_AFTER => true,
                Some(p) => self.shares_my_cpu(p),
                _ => self.wait.oversubscribed,
            };
            if yield_now {
                mw_transport::wait::yield_cpu();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{home_cpu, spreads, Placement};

    #[test]
    fn crowded_members_get_a_cpu_each() {
        let both_on_0 = |_: usize| Some(0);
        assert_eq!((home_cpu(0, 2, 0b11, both_on_0), home_cpu(1, 2, 0b11, both_on_0)), (Some(0), Some(1)));
        // Already apart: everyone stays.
        let apart = |w: usize| Some(w as u32 ^ 1);
        assert_eq!((home_cpu(0, 2, 0b11, apart), home_cpu(1, 2, 0b11, apart)), (Some(1), Some(0)));
        // 4 ranks, CPUs 2 and 5 allowed, ranks 0 and 2 (first of their
        // blocks {0, 1} and {2, 3}) both on 5: the first block keeps it, the
        // second gets the free CPU.
        let on = |w: usize| Some([5, 2, 5, 5][w]);
        let plan: Vec<_> = (0..4).map(|me| home_cpu(me, 4, 1 << 2 | 1 << 5, on)).collect();
        assert_eq!(plan, [Some(5), Some(5), Some(2), Some(2)]);
        // No plan before a block's first member announced, or with one CPU.
        assert_eq!(home_cpu(0, 2, 0b11, |w| (w == 0).then_some(0)), None);
        assert_eq!(home_cpu(0, 2, 0b1, both_on_0), None);
    }

    #[test]
    fn which_teams_spread() {
        let udp = Placement { local: false, on_host: 1, team: 2, one_host: true };
        assert!(spreads(udp), "a UDP job on one host that fits its CPUs");
        assert!(spreads(Placement { team: 4, ..udp }), "oversubscribed over UDP too (4 ranks, 2 CPUs)");
        assert!(!spreads(Placement { one_host: false, ..udp }), "ranks on other hosts");
        let shm = Placement { local: true, on_host: 4, team: 4, one_host: true };
        assert!(spreads(shm), "all of the host's ranks, in shared memory (oversubscribed too)");
        assert!(!spreads(Placement { team: 2, ..shm }), "a part of the host's ranks");
    }
}
