//! Multicast transfers in the simulator: every family, hundreds of seeds
//! each (team sizes 1-9, empty to 200-segment transfers, with and without
//! authentication), plus a reviewed table of repair cost against loss.
//!
//! Replay one run with
//! `MW_SIM_SEED=<seed> MW_SIM_SCENARIO=<family> cargo test -p mw-sim --test mcast -- replay --nocapture`;
//! regenerate the table with `MW_SIM_BLESS=1 cargo test -p mw-sim --test mcast`.

use mw_proto::time::Duration;
use mw_sim::mcast::{replay_mcast_from_env, run_mcast, run_mcast_family, McastScenario};
use mw_sim::LinkConfig;
use std::fmt::Write as _;

fn seeds(standard: u64) -> std::ops::Range<u64> {
    let scale: u64 = std::env::var("MW_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    0..standard * scale
}

#[test]
fn replay() {
    let Some(report) = replay_mcast_from_env() else {
        return;
    };
    println!("completed at {:?}; root {:?}", report.completed_at, report.sender);
    for (m, r) in report.receivers.iter().enumerate() {
        println!("member {m}: {r:?}");
    }
    assert!(report.ok(), "{}", report.failure_text());
}

#[test]
fn lossless() {
    for r in run_mcast_family("mcast_lossless", seeds(300)) {
        assert_eq!(r.sender.group_repairs + r.sender.unicast_sends, 0, "seed {}: repairs without loss", r.seed);
        assert!(r.receivers.iter().all(|m| m.via_unicast == 0 && m.nacks == 0), "seed {}", r.seed);
    }
}

#[test]
fn independent_loss_is_repaired_by_unicast_and_multicast() {
    let reports = run_mcast_family("mcast_loss", seeds(400));
    assert!(reports.iter().any(|r| r.sender.unicast_repairs > 0));
    assert!(reports.iter().any(|r| r.sender.group_repairs > 0));
}

#[test]
fn shared_loss() {
    let reports = run_mcast_family("mcast_shared_loss", seeds(300));
    assert!(reports.iter().any(|r| r.sender.group_repairs > 0));
}

#[test]
fn duplication_and_reordering() {
    let reports = run_mcast_family("mcast_dup_reorder", seeds(300));
    assert!(reports.iter().any(|r| r.receivers.iter().any(|m| m.duplicates > 0)));
}

#[test]
fn jitter() {
    run_mcast_family("mcast_jitter", seeds(200));
}

#[test]
fn slow_links_with_small_queues() {
    run_mcast_family("mcast_bandwidth", seeds(200));
}

#[test]
fn other_jobs_on_the_group_are_rejected() {
    let reports = run_mcast_family("mcast_foreign", seeds(200));
    assert!(reports.iter().any(|r| r.foreign_rejected > 0));
}

#[test]
fn a_group_that_fails_falls_back_to_unicast() {
    let reports = run_mcast_family("mcast_group_fails", seeds(200));
    assert!(reports.iter().any(|r| r.sender.unicast_sends > u64::from(r.segments)));
}

#[test]
fn a_silent_group_still_completes_by_unicast() {
    for r in run_mcast_family("mcast_silent_group", seeds(100)) {
        assert!(r.receivers.iter().all(|m| m.via_group == 0), "seed {}", r.seed);
    }
}

/// Cost of repairs against loss: 8 members, 1000 segments of 1400 bytes.
#[test]
fn repair_cost_vs_loss() {
    const SNAPSHOT: &str = "tests/snapshots/mcast.txt";
    let mut table = String::from(
        "8 members, 1000 segments x 1376 B (1472-byte datagrams with MAC), window 256 KiB, 20 us links; independent loss per member\n\
         loss   done_ms  group_sends  unicast_sends  group_repairs  nacks  sends_per_segment\n",
    );
    for loss in [0.0, 0.001, 0.01, 0.05, 0.2] {
        let s = McastScenario {
            family: "mcast_table".into(),
            seed: 7,
            members: 8,
            total: 1_376_000,
            segment_size: 1376,
            window_bytes: 256 << 10,
            link: LinkConfig { loss, delay: Duration::from_micros(20), ..LinkConfig::default() },
            shared_loss: 0.0,
            auth: true,
            foreign: 0.0,
            group_fails_after: None,
            silent_group: false,
            budget: Duration::from_secs(60),
            trace: false,
        };
        let r = run_mcast(&s);
        assert!(r.ok(), "{}", r.failure_text());
        let done = r.completed_at.expect("completed").as_nanos() as f64 / 1e6;
        let sends = r.sender.group_sends + r.sender.unicast_sends;
        let nacks: u64 = r.receivers.iter().map(|m| m.nacks).sum();
        writeln!(
            table,
            "{loss:<6} {done:>8.2} {:>12} {:>14} {:>14} {nacks:>6} {:>18.3}",
            r.sender.group_sends,
            r.sender.unicast_sends,
            r.sender.group_repairs,
            sends as f64 / 1000.0
        )
        .unwrap();
    }
    if std::env::var_os("MW_SIM_BLESS").is_some() {
        std::fs::write(SNAPSHOT, &table).unwrap();
    }
    let want = std::fs::read_to_string(SNAPSHOT).unwrap_or_default();
    assert_eq!(table, want, "multicast repair table changed; review and bless with MW_SIM_BLESS=1");
}
