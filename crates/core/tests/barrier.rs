//! Barriers tested as barriers: a barrier that returned at once would fail
//! here, not only one that never returns.
//!
//! Every barrier method (the endpoint's `barrier()`, which `mw_barrier`
//! calls, and each team method, which `mw_team_barrier` reaches through
//! `Auto`) runs several rounds back to back. In each round every rank
//! sleeps a random while, then completes a blocking `fetch_add` of 1 to
//! this round's counter on the round's owner rank (a different owner each
//! round, so the owner is sometimes a tree's root, sometimes a leaf), and
//! enters the barrier; after leaving, every rank reads the counter with a
//! `get` and must see all N additions. Each round has its own counter, so a
//! fast rank's next round cannot disturb a slow rank's read. Over shared
//! memory, over UDP (also with a progress thread) and under injected loss,
//! duplication and reordering, for 2, 3, 5 and 9 ranks.

mod common;

use std::time::Duration;

use common::{lossy, run_job, shm, udp};
use mw_core::{Access, BarrierAlgo, Config, Endpoint, ProgressMode, Team};

/// Rounds of each method, back to back.
const ROUNDS: usize = 4;
/// Job sizes: 2 (a pair), a non-power of two on each side of 4, and 9
/// (one more than a power of two: dissemination's and the trees' last,
/// lone round).
const SIZES: &[u32] = &[2, 3, 5, 9];
/// The longest random delay before a rank's addition.
const MAX_DELAY_US: u64 = 2_000;

/// A barrier method under test.
#[derive(Debug, Clone, Copy)]
enum Method {
    /// `Endpoint::barrier` (and so `mw_barrier`).
    Endpoint,
    /// `Team::barrier_with` on the world team.
    Team(BarrierAlgo),
}

const METHODS: &[Method] = &[
    Method::Endpoint,
    Method::Team(BarrierAlgo::AllToAll),
    Method::Team(BarrierAlgo::Tree),
    Method::Team(BarrierAlgo::Counters),
    Method::Team(BarrierAlgo::Multicast),
    Method::Team(BarrierAlgo::Dissemination),
    Method::Team(BarrierAlgo::Binomial),
    Method::Team(BarrierAlgo::Auto),
];

/// splitmix64: a rank's private sequence of delays, different per rank and
/// per test.
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn barrier(ep: &Endpoint, world: &mut Team<'_>, method: Method) {
    match method {
        Method::Endpoint => ep.barrier().unwrap(),
        Method::Team(algo) => world.barrier_with(algo).unwrap(),
    }
}

/// Every method, [`ROUNDS`] rounds each, on every rank of `ep`'s job.
fn adds_land_before_anyone_leaves(ep: &Endpoint, seed: u64) {
    let (me, n) = (ep.rank(), ep.size());
    let counters = ep.alloc_symmetric(8 * METHODS.len() * ROUNDS, Access::ALL).unwrap();
    let key = counters.key();
    let mut world = ep.team_world().unwrap();
    let mut random = seed ^ (u64::from(me) << 32);
    for (m, &method) in METHODS.iter().enumerate() {
        for round in 0..ROUNDS {
            let offset = (8 * (m * ROUNDS + round)) as u64;
            let owner = (round as u32 + m as u32) % n;
            std::thread::sleep(Duration::from_micros(next_random(&mut random) % MAX_DELAY_US));
            ep.fetch_add_u64(owner, key, offset, 1).unwrap();
            barrier(ep, &mut world, method);
            let seen = ep.get_value(owner, key, offset).unwrap();
            assert_eq!(
                seen,
                u64::from(n),
                "{method:?}, round {round}: rank {me} left the barrier before every rank's addition to rank {owner} \
                 ({seen} of {n})"
            );
        }
    }
    // The counters are freed when this returns: not while another rank
    // may still read the last round's.
    ep.barrier().unwrap();
}

fn every_size(config: Config, seed: u64) {
    for &n in SIZES {
        eprintln!("{n} ranks");
        run_job(n, config.clone(), move |ep| adds_land_before_anyone_leaves(ep, seed + u64::from(n)));
    }
}

#[test]
fn every_barrier_holds_over_shared_memory() {
    every_size(shm(Config::default()), 0x5417);
}

#[test]
fn every_barrier_holds_over_udp() {
    every_size(udp(Config::default()), 0x0d9);
}

/// The progress thread executes the signals and additions while the
/// application thread waits for them.
#[test]
fn every_barrier_holds_with_a_progress_thread() {
    every_size(udp(Config { progress: ProgressMode::Thread, ..Config::default() }), 0x7d);
}

#[test]
fn every_barrier_holds_under_loss_duplication_and_reordering() {
    every_size(lossy(0.05, 0.02, 0.05, 39), 0x1055);
}
