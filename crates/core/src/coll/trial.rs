//! Trials: where no fixed rule picks the faster of two algorithms on every
//! host, a team tries both on its first calls of a size class and keeps the
//! one that was faster for its slowest member.
//!
//! The case: allgather and alltoall on a team whose single-copy reads go
//! through a costly kernel copy (`process_vm_readv` costing more than two
//! `memcpy`s, `mw_transport::shm::kernel_copy_is_costly`), from 16 KiB
//! blocks. There a direct algorithm (one kernel copy per block) and the slot
//! algorithms (two `memcpy`s and a synchronized step per block) trade
//! places from host to host. Measured with 4 processes on 2 CPUs at 64 KiB:
//! on the host of 2026-11-25 (kernel copy ~3 `memcpy`s) pairwise 31-37 µs
//! against direct 49-61; on that of 2026-11-26 (~2.2) pairwise 52-54 µs
//! against direct 28-47, and allgather recursive doubling 43-44 against
//! direct 28-36, while at 16 KiB the slot algorithms won on both.
//!
//! The protocol, identical on every member because it depends only on how
//! many calls of the class the team has made (members call collectives in
//! the same order with the same block size): a round runs each candidate
//! for [`WARM_UP`] untimed calls (the first round only: first touches of
//! buffers and page tables), then alternates blocks of [`BLOCK`]
//! consecutive timed calls, each opened by [`BLOCK_OPENING`] untimed one,
//! [`BLOCKS`] per candidate. The next call first gathers
//! every member's score per candidate (the time of its faster block) and
//! takes the candidate whose slowest member was fastest, the fixed rule's
//! own choice on a tie; from then on the class runs it untimed, until the
//! rounds at [`RETRY_AT`] calls check the decision again.
//!
//! Owns: the per-(collective, size class) trial state and the decision.
//! Must not: read a clock, or talk to the team (the caller times its calls
//! and gathers the scores), or be consulted for a call that names its
//! algorithm.

use std::time::Duration;

/// Calls of each candidate run untimed before the first round's timing.
const WARM_UP: u64 = 2;
/// Consecutive calls of one candidate timed together: their sum, not a
/// single call, is what counts, because a member's time for one call is
/// mostly how long it waited for the last member to arrive, which the
/// next call gives back.
const BLOCK: u64 = 4;
/// Untimed calls that open each block: the first call after the other
/// candidate's block pays for the switch (measured: 4 processes on 2 CPUs,
/// 64 KiB alltoall, a direct block's first call 1.5-2.5 times its others),
/// which a job that keeps one algorithm never does.
const BLOCK_OPENING: u64 = 1;
/// Calls of one block, opening included.
const BLOCK_CALLS: u64 = BLOCK_OPENING + BLOCK;
/// Timed blocks of each candidate per round (alternating, `A B A B`); the
/// faster block counts, so one disturbed block (a preemption) does not decide.
const BLOCKS: usize = 2;
/// Calls of a class at which the decision is tried again: the first
/// round's calls are a job's first, in buffers and page tables still cold,
/// and may mislead (measured: 2 processes, 256 KiB alltoall, the direct
/// algorithm at 27-49 µs in its first calls and 14 µs from then on).
const RETRY_AT: [u64; 2] = [256, 4096];

/// The collectives that run trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trialed {
    Allgather,
    Alltoall,
}

/// What the caller does on this call of a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Run candidate `0` (the fixed rule's choice) or `1`; a `timed` call
    /// reports its duration with [`Trials::record`].
    Run { candidate: usize, timed: bool },
    /// A round's trials are done: gather every member's
    /// [`scores`](Trials::scores), hand them to [`decide`](Trials::decide),
    /// and run the candidate it returns.
    Decide,
}

#[derive(Debug)]
struct Class {
    op: Trialed,
    /// `ceil(log2(block bytes))`.
    size_class: u32,
    /// Calls of the class so far.
    calls: u64,
    /// Rounds decided so far.
    rounds: usize,
    /// In a round, since this call; `None` between rounds.
    round_from: Option<u64>,
    /// Nanoseconds of each timed block of the current round, per candidate
    /// (`u64::MAX` once a call in it failed).
    blocks: [[u64; BLOCKS]; 2],
    decided: usize,
}

impl Class {
    fn warm_up(&self) -> u64 {
        if self.rounds == 0 {
            2 * WARM_UP
        } else {
            0
        }
    }
}

/// One team's trials.
#[derive(Debug, Default)]
pub(crate) struct Trials {
    classes: Vec<Class>,
}

/// The size class of a block: blocks within a factor of two share a decision.
pub(crate) fn size_class(block: usize) -> u32 {
    usize::BITS - block.saturating_sub(1).leading_zeros()
}

impl Trials {
    fn class(&mut self, op: Trialed, size_class: u32) -> &mut Class {
        let at = match self.classes.iter().position(|c| c.op == op && c.size_class == size_class) {
            Some(at) => at,
            None => {
                self.classes.push(Class {
                    op,
                    size_class,
                    calls: 0,
                    rounds: 0,
                    round_from: Some(0),
                    blocks: [[0; BLOCKS]; 2],
                    decided: 0,
                });
                self.classes.len() - 1
            }
        };
        &mut self.classes[at]
    }

    /// The step of this call of `op` on blocks of `size_class`.
    pub(crate) fn step(&mut self, op: Trialed, size_class: u32) -> Step {
        let class = self.class(op, size_class);
        let from = match class.round_from {
            Some(from) => from,
            None if RETRY_AT.get(class.rounds - 1) == Some(&class.calls) => {
                class.round_from = Some(class.calls);
                class.blocks = [[0; BLOCKS]; 2];
                class.calls
            }
            None => {
                class.calls += 1;
                return Step::Run { candidate: class.decided, timed: false };
            }
        };
        let at = class.calls - from;
        let warm_up = class.warm_up();
        if at < warm_up {
            class.calls += 1;
            return Step::Run { candidate: (at / WARM_UP) as usize, timed: false };
        }
        let blocks_at = at - warm_up;
        if blocks_at == 2 * BLOCKS as u64 * BLOCK_CALLS {
            return Step::Decide;
        }
        class.calls += 1;
        let candidate = ((blocks_at / BLOCK_CALLS) % 2) as usize;
        Step::Run { candidate, timed: blocks_at % BLOCK_CALLS >= BLOCK_OPENING }
    }

    /// The duration of the last (timed) call of `candidate` (`None`: it failed).
    pub(crate) fn record(&mut self, op: Trialed, size_class: u32, candidate: usize, took: Option<Duration>) {
        let class = self.class(op, size_class);
        let Some(from) = class.round_from else { return };
        let blocks_at = (class.calls - 1 - from).saturating_sub(class.warm_up());
        let block = (blocks_at / (2 * BLOCK_CALLS)) as usize;
        if let Some(sum) = class.blocks[candidate].get_mut(block) {
            let nanos = took.map_or(u64::MAX, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
            *sum = sum.saturating_add(nanos);
        }
    }

    /// This member's score per candidate (its faster block's time), as the
    /// bytes it contributes to the gather before [`decide`](Trials::decide).
    pub(crate) fn scores(&mut self, op: Trialed, size_class: u32) -> [u8; 16] {
        let class = self.class(op, size_class);
        let mut out = [0u8; 16];
        for (candidate, blocks) in class.blocks.iter().enumerate() {
            let best = blocks.iter().copied().min().unwrap_or(u64::MAX);
            out[candidate * 8..][..8].copy_from_slice(&best.to_le_bytes());
        }
        out
    }

    /// Decides from every member's [`scores`](Trials::scores) (concatenated,
    /// in team order: the same bytes on every member, so the same answer):
    /// the candidate whose slowest member was fastest, `0` on a tie. The
    /// call that runs the answer is this class's next.
    pub(crate) fn decide(&mut self, op: Trialed, size_class: u32, gathered: &[u8]) -> usize {
        let slowest = |candidate: usize| {
            gathered
                .chunks_exact(16)
                .map(|member| u64::from_le_bytes(member[candidate * 8..][..8].try_into().expect("8 bytes")))
                .max()
                .unwrap_or(u64::MAX)
        };
        let winner = usize::from(slowest(1) < slowest(0));
        let class = self.class(op, size_class);
        class.decided = winner;
        class.rounds += 1;
        class.round_from = None;
        class.calls += 1;
        winner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plays one member's side of a round: its steps, with `took[c]` the
    /// time of every timed call of candidate `c`; stops at the decision.
    fn play_round(trials: &mut Trials, op: Trialed, class: u32, took: [u64; 2]) -> Vec<Step> {
        let mut steps = Vec::new();
        loop {
            let step = trials.step(op, class);
            steps.push(step);
            match step {
                Step::Run { candidate, timed: true } => {
                    trials.record(op, class, candidate, Some(Duration::from_nanos(took[candidate])));
                }
                Step::Run { .. } => {}
                Step::Decide => return steps,
            }
        }
    }

    fn run(candidate: usize, timed: bool) -> Step {
        Step::Run { candidate, timed }
    }

    fn score(scores: &[u8; 16], candidate: usize) -> u64 {
        u64::from_le_bytes(scores[candidate * 8..][..8].try_into().unwrap())
    }

    #[test]
    fn a_round_warms_up_then_alternates_timed_blocks_and_retries_later() {
        let mut trials = Trials::default();
        let steps = play_round(&mut trials, Trialed::Alltoall, 16, [100, 50]);
        let mut expected = vec![run(0, false), run(0, false), run(1, false), run(1, false)];
        for _ in 0..BLOCKS {
            for candidate in [0, 1] {
                expected.extend([run(candidate, false); BLOCK_OPENING as usize]);
                expected.extend([run(candidate, true); BLOCK as usize]);
            }
        }
        expected.push(Step::Decide);
        assert_eq!(steps, expected);
        // Still undecided until the scores are in.
        assert_eq!(trials.step(Trialed::Alltoall, 16), Step::Decide);
        let scores = trials.scores(Trialed::Alltoall, 16);
        assert_eq!((score(&scores, 0), score(&scores, 1)), (400, 200), "a block's sum");
        assert_eq!(trials.decide(Trialed::Alltoall, 16, &scores), 1);
        // Decided: untimed calls of the winner up to the first retry, then a
        // round without warm-up, whose decision may differ.
        let decided_calls = RETRY_AT[0] - (steps.len() as u64);
        for _ in 0..decided_calls {
            assert_eq!(trials.step(Trialed::Alltoall, 16), run(1, false));
        }
        let retry = play_round(&mut trials, Trialed::Alltoall, 16, [30, 50]);
        assert_eq!(retry.len(), 2 * BLOCKS * BLOCK_CALLS as usize + 1);
        assert_eq!((retry[0], retry[BLOCK_OPENING as usize]), (run(0, false), run(0, true)));
        let scores = trials.scores(Trialed::Alltoall, 16);
        assert_eq!(trials.decide(Trialed::Alltoall, 16, &scores), 0);
        let decided_calls = RETRY_AT[1] - RETRY_AT[0] - retry.len() as u64;
        for _ in 0..decided_calls {
            assert_eq!(trials.step(Trialed::Alltoall, 16), run(0, false));
        }
        play_round(&mut trials, Trialed::Alltoall, 16, [90, 50]);
        let scores = trials.scores(Trialed::Alltoall, 16);
        assert_eq!(trials.decide(Trialed::Alltoall, 16, &scores), 1);
        // No rounds after the last retry.
        for _ in 0..100_000 {
            assert_eq!(trials.step(Trialed::Alltoall, 16), run(1, false));
        }
    }

    #[test]
    fn the_slowest_member_decides_and_a_tie_keeps_the_fixed_choice() {
        // Member A: candidate 1 faster; member B: candidate 1 far slower.
        let (mut a, mut b) = (Trials::default(), Trials::default());
        play_round(&mut a, Trialed::Alltoall, 16, [100, 40]);
        play_round(&mut b, Trialed::Alltoall, 16, [100, 300]);
        let gathered = [a.scores(Trialed::Alltoall, 16), b.scores(Trialed::Alltoall, 16)].concat();
        assert_eq!(a.decide(Trialed::Alltoall, 16, &gathered), 0);
        assert_eq!(b.decide(Trialed::Alltoall, 16, &gathered), 0);
        assert_eq!(a.step(Trialed::Alltoall, 16), run(0, false));

        let (mut a, mut b) = (Trials::default(), Trials::default());
        play_round(&mut a, Trialed::Alltoall, 16, [100, 40]);
        play_round(&mut b, Trialed::Alltoall, 16, [90, 60]);
        let gathered = [a.scores(Trialed::Alltoall, 16), b.scores(Trialed::Alltoall, 16)].concat();
        assert_eq!(a.decide(Trialed::Alltoall, 16, &gathered), 1);
        assert_eq!(a.step(Trialed::Alltoall, 16), run(1, false));

        let mut tie = Trials::default();
        play_round(&mut tie, Trialed::Alltoall, 16, [70, 70]);
        let gathered = tie.scores(Trialed::Alltoall, 16);
        assert_eq!(tie.decide(Trialed::Alltoall, 16, &gathered), 0);
    }

    #[test]
    fn the_faster_block_counts_and_a_failed_call_spoils_its_block() {
        let mut trials = Trials::default();
        // Candidate 0: one call of its first block preempted.
        let mut times = [vec![10, 5000, 10, 10, 12, 12, 12, 12], vec![20; 8]];
        loop {
            match trials.step(Trialed::Allgather, 20) {
                Step::Run { candidate, timed: true } => {
                    let d = Duration::from_nanos(times[candidate].remove(0));
                    trials.record(Trialed::Allgather, 20, candidate, Some(d));
                }
                Step::Run { .. } => {}
                Step::Decide => break,
            }
        }
        let scores = trials.scores(Trialed::Allgather, 20);
        assert_eq!((score(&scores, 0), score(&scores, 1)), (48, 80));
        assert_eq!(trials.decide(Trialed::Allgather, 20, &scores), 0);

        let mut failing = Trials::default();
        loop {
            match failing.step(Trialed::Allgather, 20) {
                Step::Run { candidate: 0, timed: true } => failing.record(Trialed::Allgather, 20, 0, None),
                Step::Run { candidate: 1, timed: true } => {
                    failing.record(Trialed::Allgather, 20, 1, Some(Duration::from_millis(5)))
                }
                Step::Run { .. } => {}
                Step::Decide => break,
            }
        }
        let scores = failing.scores(Trialed::Allgather, 20);
        assert_eq!(score(&scores, 0), u64::MAX);
        assert_eq!(failing.decide(Trialed::Allgather, 20, &scores), 1);
    }

    #[test]
    fn classes_and_collectives_are_tried_apart() {
        assert_eq!((size_class(16 << 10), size_class((16 << 10) + 1), size_class(32 << 10)), (14, 15, 15));
        assert_eq!(size_class(0), 0);
        let mut trials = Trials::default();
        play_round(&mut trials, Trialed::Alltoall, 16, [1, 2]);
        assert_eq!(trials.step(Trialed::Alltoall, 17), run(0, false));
        assert_eq!(trials.step(Trialed::Allgather, 16), run(0, false));
        assert_eq!(trials.step(Trialed::Alltoall, 16), Step::Decide);
    }
}
