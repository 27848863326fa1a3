//! Seeded scenario families: thousands of small simulated runs per `cargo test`,
//! 2 to 16 nodes (see `Scenario::family`); the seed counts keep the whole
//! suite at a few seconds.
//!
//! A failure prints its seed and a replay command; replay a single run with
//! `MW_SIM_SEED=<seed> MW_SIM_SCENARIO=<family> cargo test -p mw-sim --test scenarios -- replay --nocapture`.
//! `MW_SIM_SEEDS=<n>` scales every family's seed count (default 1 = the
//! standard counts below).

use mw_sim::{replay_from_env, run_family};

fn seeds(standard: u64) -> std::ops::Range<u64> {
    let scale: u64 = std::env::var("MW_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    0..standard * scale
}

/// Replays one scenario from `MW_SIM_SCENARIO` and `MW_SIM_SEED`, tracing
/// every datagram; passes trivially when they are not set.
#[test]
fn replay() {
    let Some(report) = replay_from_env() else {
        return;
    };
    println!(
        "completed at {:?}, ended at {:?}, delivered {} messages ({} bytes), {} failed",
        report.completed_at, report.ended_at, report.delivered, report.delivered_bytes, report.failed
    );
    for (rank, stats) in report.stats.iter().enumerate() {
        println!("node {rank}: {stats:?}");
    }
    assert!(report.ok(), "{}", report.failure_text());
}

#[test]
fn lossless() {
    run_family("lossless", seeds(350));
}

#[test]
fn loss() {
    let reports = run_family("loss", seeds(900));
    assert!(reports.iter().any(|r| r.stats.iter().any(|s| s.retransmits_fast > 0)));
    assert!(reports.iter().any(|r| r.stats.iter().any(|s| s.retransmits_timeout > 0)));
    assert!(reports.iter().any(|r| r.stats.iter().any(|s| s.nacks_sent > 0)));
}

#[test]
fn duplicate() {
    let reports = run_family("duplicate", seeds(300));
    assert!(reports.iter().any(|r| r.stats.iter().any(|s| s.drops.duplicate > 0)));
}

#[test]
fn reorder() {
    run_family("reorder", seeds(300));
}

#[test]
fn jitter() {
    run_family("jitter", seeds(300));
}

#[test]
fn bandwidth() {
    let reports = run_family("bandwidth", seeds(300));
    assert!(reports.iter().any(|r| r.net.queue_drops > 0), "some run should overflow a link queue");
}

#[test]
fn mixed() {
    run_family("mixed", seeds(500));
}

#[test]
fn all_to_all16() {
    run_family("all_to_all16", seeds(30));
}

#[test]
fn crash() {
    let reports = run_family("crash", seeds(200));
    assert!(reports.iter().filter(|r| !r.dead_events.is_empty()).count() > 100, "most crashes are noticed");
}

#[test]
fn restart() {
    let reports = run_family("restart", seeds(200));
    let noticed = reports.iter().filter(|r| r.stats.iter().any(|s| s.peers_restarted > 0)).count();
    assert!(noticed > 100, "restarts noticed in only {noticed} runs");
}

#[test]
fn no_false_dead() {
    let reports = run_family("no_false_dead", seeds(30));
    assert!(reports.iter().all(|r| r.dead_events.is_empty()));
}

#[test]
fn garbage() {
    let reports = run_family("garbage", seeds(300));
    // Each kind of garbage was injected somewhere and landed in its own
    // counter (the driver checks the exact counts of every run).
    let seen =
        |count: fn(&mw_proto::DropCounts) -> u64| reports.iter().any(|r| r.stats.iter().any(|s| count(&s.drops) > 0));
    assert!(seen(|d| d.wrong_job));
    assert!(seen(|d| d.bad_version));
    assert!(seen(|d| d.truncated));
    assert!(seen(|d| d.bad_magic));
    assert!(seen(|d| d.bad_length));
    assert!(seen(|d| d.oversized));
    assert!(seen(|d| d.bad_checksum), "corrupted packets of checksumming runs");
}
