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
//! the same order with the same block size): calls alternate between the
//! two candidates, [`WARM_UP`] of each unmeasured (first touches of the
//! buffers, pinned pages) and then [`MEASURED`] of each timed by the caller;
//! the next call first gathers every member's median per candidate (the
//! caller's allgather) and takes the candidate whose slowest member was
//! fastest, the fixed rule's own choice on a tie. From then on that class
//! runs its winner without timing.
//!
//! Owns: the per-(collective, size class) trial state and the decision.
//! Must not: read a clock, or talk to the team (the caller times its calls
//! and gathers the scores), or be consulted for a call that names its
//! algorithm.

use std::time::Duration;

/// Calls of each candidate that are run but not timed.
pub(crate) const WARM_UP: u32 = 1;
/// Calls of each candidate that are timed.
pub(crate) const MEASURED: usize = 3;
/// Calls of a size class before the decision.
const TRIAL_CALLS: u32 = 2 * (WARM_UP + MEASURED as u32);

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
    /// Every trial is done: gather every member's
    /// [`scores`](Trials::scores), hand them to [`decide`](Trials::decide),
    /// and run the candidate it returns.
    Decide,
}

#[derive(Debug)]
struct Class {
    op: Trialed,
    /// `ceil(log2(block bytes))`.
    size_class: u32,
    calls: u32,
    /// Nanoseconds of the timed calls, per candidate (`u64::MAX`: the call failed).
    times: [[u64; MEASURED]; 2],
    decided: Option<usize>,
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
                let times = [[u64::MAX; MEASURED]; 2];
                self.classes.push(Class { op, size_class, calls: 0, times, decided: None });
                self.classes.len() - 1
            }
        };
        &mut self.classes[at]
    }

    /// The step of this call of `op` on blocks of `size_class`.
    pub(crate) fn step(&mut self, op: Trialed, size_class: u32) -> Step {
        let class = self.class(op, size_class);
        if let Some(candidate) = class.decided {
            return Step::Run { candidate, timed: false };
        }
        if class.calls == TRIAL_CALLS {
            return Step::Decide;
        }
        let call = class.calls;
        class.calls += 1;
        Step::Run { candidate: (call % 2) as usize, timed: call >= 2 * WARM_UP }
    }

    /// The duration of the last timed call of `candidate` (`None`: it failed).
    pub(crate) fn record(&mut self, op: Trialed, size_class: u32, candidate: usize, took: Option<Duration>) {
        let class = self.class(op, size_class);
        let nth = ((class.calls - 1 - 2 * WARM_UP) / 2) as usize;
        if let Some(slot) = class.times[candidate].get_mut(nth) {
            *slot = took.map_or(u64::MAX, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        }
    }

    /// This member's median time per candidate, as the bytes it contributes
    /// to the gather before [`decide`](Trials::decide).
    pub(crate) fn scores(&mut self, op: Trialed, size_class: u32) -> [u8; 16] {
        let class = self.class(op, size_class);
        let mut out = [0u8; 16];
        for (candidate, times) in class.times.iter().enumerate() {
            let mut sorted = *times;
            sorted.sort_unstable();
            out[candidate * 8..][..8].copy_from_slice(&sorted[MEASURED / 2].to_le_bytes());
        }
        out
    }

    /// Decides from every member's [`scores`](Trials::scores) (concatenated,
    /// in team order: the same bytes on every member, so the same answer):
    /// the candidate whose slowest member was fastest, `0` on a tie.
    pub(crate) fn decide(&mut self, op: Trialed, size_class: u32, gathered: &[u8]) -> usize {
        let slowest = |candidate: usize| {
            gathered
                .chunks_exact(16)
                .map(|member| u64::from_le_bytes(member[candidate * 8..][..8].try_into().expect("8 bytes")))
                .max()
                .unwrap_or(u64::MAX)
        };
        let winner = usize::from(slowest(1) < slowest(0));
        self.class(op, size_class).decided = Some(winner);
        winner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plays one member's side: the steps of the first calls, with `took`
    /// as the time of each timed call of a candidate.
    fn run_trials(trials: &mut Trials, took: [u64; 2]) -> Vec<Step> {
        let mut steps = Vec::new();
        loop {
            let step = trials.step(Trialed::Alltoall, 16);
            steps.push(step);
            match step {
                Step::Run { candidate, timed } => {
                    if timed {
                        let d = Duration::from_nanos(took[candidate]);
                        trials.record(Trialed::Alltoall, 16, candidate, Some(d));
                    }
                }
                Step::Decide => return steps,
            }
        }
    }

    #[test]
    fn candidates_alternate_warm_up_untimed_then_decide() {
        let mut trials = Trials::default();
        let steps = run_trials(&mut trials, [100, 50]);
        let expected: Vec<Step> = (0..TRIAL_CALLS)
            .map(|call| Step::Run { candidate: (call % 2) as usize, timed: call >= 2 * WARM_UP })
            .chain([Step::Decide])
            .collect();
        assert_eq!(steps, expected);
        // Still undecided until the scores are in.
        assert_eq!(trials.step(Trialed::Alltoall, 16), Step::Decide);
    }

    #[test]
    fn the_slowest_member_decides_and_a_tie_keeps_the_fixed_choice() {
        // Member A: candidate 1 faster; member B: candidate 1 far slower.
        let (mut a, mut b) = (Trials::default(), Trials::default());
        run_trials(&mut a, [100, 40]);
        run_trials(&mut b, [100, 300]);
        let gathered = [a.scores(Trialed::Alltoall, 16), b.scores(Trialed::Alltoall, 16)].concat();
        assert_eq!(a.decide(Trialed::Alltoall, 16, &gathered), 0);
        assert_eq!(b.decide(Trialed::Alltoall, 16, &gathered), 0);
        assert_eq!(a.step(Trialed::Alltoall, 16), Step::Run { candidate: 0, timed: false });

        let (mut a, mut b) = (Trials::default(), Trials::default());
        run_trials(&mut a, [100, 40]);
        run_trials(&mut b, [90, 60]);
        let gathered = [a.scores(Trialed::Alltoall, 16), b.scores(Trialed::Alltoall, 16)].concat();
        assert_eq!(a.decide(Trialed::Alltoall, 16, &gathered), 1);
        assert_eq!(a.step(Trialed::Alltoall, 16), Step::Run { candidate: 1, timed: false });

        let mut tie = Trials::default();
        run_trials(&mut tie, [70, 70]);
        let gathered = tie.scores(Trialed::Alltoall, 16);
        assert_eq!(tie.decide(Trialed::Alltoall, 16, &gathered), 0);
    }

    #[test]
    fn the_median_ignores_one_outlier_and_a_failed_call_loses() {
        let mut trials = Trials::default();
        let mut timed = [vec![50, 5000, 60].into_iter(), vec![80, 81, 82].into_iter()];
        loop {
            match trials.step(Trialed::Allgather, 20) {
                Step::Run { candidate, timed: true } => {
                    let d = Duration::from_nanos(timed[candidate].next().unwrap());
                    trials.record(Trialed::Allgather, 20, candidate, Some(d));
                }
                Step::Run { .. } => {}
                Step::Decide => break,
            }
        }
        let scores = trials.scores(Trialed::Allgather, 20);
        assert_eq!(u64::from_le_bytes(scores[..8].try_into().unwrap()), 60);
        assert_eq!(u64::from_le_bytes(scores[8..].try_into().unwrap()), 81);
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
        assert_eq!(failing.decide(Trialed::Allgather, 20, &scores), 1);
    }

    #[test]
    fn classes_and_collectives_are_tried_apart() {
        assert_eq!((size_class(16 << 10), size_class((16 << 10) + 1), size_class(32 << 10)), (14, 15, 15));
        assert_eq!(size_class(0), 0);
        let mut trials = Trials::default();
        run_trials(&mut trials, [1, 2]);
        assert_eq!(trials.step(Trialed::Alltoall, 17), Step::Run { candidate: 0, timed: false });
        assert_eq!(trials.step(Trialed::Allgather, 16), Step::Run { candidate: 0, timed: false });
        assert_eq!(trials.step(Trialed::Alltoall, 16), Step::Decide);
    }
}
