//! Goodput under random loss: a bulk transfer over a bandwidth-limited link,
//! and the "at least 70% of the lossless goodput at 1% loss" requirement
//! checked for several seeds and for one sender feeding seven receivers.
//!
//! A second table runs the same transfer over a path like the one between
//! two hosts of a LAN or the netns cluster (10 Gb/s, 100 µs round trip: a
//! bandwidth-delay product of ~90 datagrams), with the default loss
//! tolerance and with none (RFC 5681's halving per loss), and a third puts
//! four senders into one receiver's shared port (incast).
//!
//! The tables are kept as a snapshot (`tests/snapshots/goodput.txt`) so that
//! any change in protocol behaviour shows up as a reviewed diff. Regenerate
//! it with `MW_SIM_BLESS=1 cargo test -p mw-sim --test goodput`.

use mw_proto::time::Duration;
use mw_proto::Config;
use mw_sim::{run, LinkConfig, Report, Scenario, Workload};
use std::fmt::Write as _;

const SNAPSHOT: &str = "tests/snapshots/goodput.txt";
const LOSSES: [f64; 6] = [0.0, 0.001, 0.01, 0.02, 0.05, 0.2];

/// Seeds of the 1%-loss check (the table above uses seed 1).
const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];
/// Nodes of the one-to-many check: node 0 sends to each of the others.
const FAN_OUT_NODES: u32 = 8;

fn bulk(loss: f64, seed: u64) -> Scenario {
    Scenario {
        family: "goodput".into(),
        seed,
        nodes: 2,
        link: LinkConfig {
            loss,
            delay: Duration::from_micros(20),
            bandwidth: Some(125_000_000), // 1 Gb/s
            queue_bytes: 128 * 1024,
            ..LinkConfig::default()
        },
        config: Config::default(),
        workload: Workload {
            messages: 128,
            fixed_size: Some(64 * 1024),
            reply_chance: 0.0,
            queue_limit: 1 << 20,
            one_way: true,
            ..Workload::default()
        },
        crash: None,
        garbage: 0.0,
        budget: Duration::from_secs(60),
        trace: false,
    }
}

fn goodput_mbps(r: &Report) -> f64 {
    let secs = r.completed_at.expect("completed").as_nanos() as f64 / 1e9;
    r.delivered_bytes as f64 / secs / 1e6
}

#[test]
fn goodput_vs_loss() {
    let mut table = String::from(
        "bulk 8 MiB, 1 Gb/s link, 20 us one-way delay, 128 KiB queue, default Config\n\
         loss     goodput_MB/s  vs_lossless  data_pkts  fast_rtx  timeout_rtx  acks  nacks\n",
    );
    let mut lossless = 0.0;
    let mut at_one_percent = 0.0;
    for loss in LOSSES {
        let r = run(&bulk(loss, 1));
        assert!(r.ok(), "{}", r.failure_text());
        let g = goodput_mbps(&r);
        if loss == 0.0 {
            lossless = g;
        }
        if loss == 0.01 {
            at_one_percent = g;
        }
        let s = &r.stats[0];
        let rx = &r.stats[1];
        let _ = writeln!(
            table,
            "{:<8} {:>12.1}  {:>10.1}%  {:>9}  {:>8}  {:>11}  {:>4}  {:>5}",
            format!("{}%", loss * 100.0),
            g,
            100.0 * g / lossless,
            s.data_sent,
            s.retransmits_fast,
            s.retransmits_timeout,
            rx.acks_sent,
            rx.nacks_sent
        );
    }
    assert!(
        at_one_percent >= 0.7 * lossless,
        "goodput at 1% loss {at_one_percent:.1} MB/s is below 70% of lossless {lossless:.1} MB/s"
    );
    table.push_str(&one_percent_checks());
    table.push_str(&fast_path_table());
    table.push_str(&incast_table());
    println!("{table}");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT);
    if std::env::var_os("MW_SIM_BLESS").is_some() {
        std::fs::write(&path, &table).expect("write snapshot");
        return;
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == table,
        "goodput table changed; review and bless with MW_SIM_BLESS=1.\n--- kept\n{kept}\n--- now\n{table}"
    );
}

/// The 70% requirement for every seed of [`SEEDS`] with 2 nodes, and for
/// three seeds with [`FAN_OUT_NODES`] nodes (node 0 sends 2 MiB to each
/// other node over its own 1 Gb/s link); returns their table.
fn one_percent_checks() -> String {
    let mut table = String::from(
        "\n1% loss against lossless, same seed (requirement: >= 70%)\n\
         nodes  seed  lossless_MB/s  1%_MB/s  ratio\n",
    );
    let fan_out = |loss: f64, seed: u64| {
        let mut sc = bulk(loss, seed);
        sc.nodes = FAN_OUT_NODES;
        sc.workload.messages = 32;
        sc
    };
    let cases = SEEDS.iter().map(|&s| (2, s)).chain([1, 2, 3].map(|s| (FAN_OUT_NODES, s)));
    for (nodes, seed) in cases {
        let make = |loss| if nodes == 2 { bulk(loss, seed) } else { fan_out(loss, seed) };
        let (clean, lossy) = (run(&make(0.0)), run(&make(0.01)));
        assert!(clean.ok(), "{}", clean.failure_text());
        assert!(lossy.ok(), "{}", lossy.failure_text());
        let (g0, g1) = (goodput_mbps(&clean), goodput_mbps(&lossy));
        let _ = writeln!(table, "{nodes:>5}  {seed:>4}  {g0:>13.1}  {g1:>7.1}  {:>4.0}%", 100.0 * g1 / g0);
        assert!(g1 >= 0.7 * g0, "{nodes} nodes, seed {seed}: goodput at 1% loss {g1:.1} MB/s < 70% of {g0:.1} MB/s");
        assert!(lossy.stats[0].retransmits_fast + lossy.stats[0].retransmits_timeout > 0, "the loss was real");
    }
    table
}

/// The bulk transfer over a 10 Gb/s path with a 100 µs round trip.
fn fast_path(loss: f64, tolerance_pct: u32) -> Scenario {
    let mut sc = bulk(loss, 1);
    sc.link.delay = Duration::from_micros(50);
    sc.link.bandwidth = Some(1_250_000_000);
    sc.link.queue_bytes = 1 << 20;
    sc.config.loss_tolerance_pct = tolerance_pct;
    sc.workload.messages = 256; // 16 MiB
    sc
}

/// Goodput on the fast path at 0, 1 and 5% random loss, with the default
/// loss tolerance and with none. Requires the tolerance to at least double
/// the goodput at 1% loss and not to lose at 5%. Issue 38's targets (80% of
/// lossless at 1%, 50% at 5%) are not met here yet: with one hole
/// outstanding, SACK reports only the 64 datagrams after it, so the sender
/// stalls until the retransmission arrives (see docs/perf-notes.md).
fn fast_path_table() -> String {
    let default = mw_proto::Config::default().loss_tolerance_pct;
    let mut table = format!(
        "\nbulk 16 MiB, 10 Gb/s link, 50 us one-way delay, 1 MiB queue; loss tolerance {default}% (default) and 0%\n\
         loss   tolerance  goodput_MB/s  vs_lossless  fast_rtx  timeout_rtx\n"
    );
    let mut goodput = std::collections::HashMap::new();
    for tolerance in [default, 0] {
        let mut lossless = 0.0;
        for (i, loss) in [0.0, 0.01, 0.05].into_iter().enumerate() {
            let r = run(&fast_path(loss, tolerance));
            assert!(r.ok(), "{}", r.failure_text());
            let g = goodput_mbps(&r);
            if loss == 0.0 {
                lossless = g;
            }
            goodput.insert((tolerance, i), g);
            let s = &r.stats[0];
            let _ = writeln!(
                table,
                "{:<6} {:>8}%  {:>12.1}  {:>10.1}%  {:>8}  {:>11}",
                format!("{}%", loss * 100.0),
                tolerance,
                g,
                100.0 * g / lossless,
                s.retransmits_fast,
                s.retransmits_timeout
            );
        }
    }
    let (tolerant, strict) = (goodput[&(default, 1)], goodput[&(0, 1)]);
    assert!(tolerant >= 2.0 * strict, "1% loss: {tolerant:.1} MB/s with tolerance, {strict:.1} without");
    let (tolerant, strict) = (goodput[&(default, 2)], goodput[&(0, 2)]);
    assert!(tolerant >= strict, "5% loss: {tolerant:.1} MB/s with tolerance, {strict:.1} without");
    table
}

/// Four senders, 4 MiB each, into node 0 through its shared 10 Gb/s port
/// with a 256 KiB queue, no random loss: the aggregate must keep at least
/// 80% of the port busy, and retransmissions (the queue's tail drops) stay
/// under 10% of the data, with the default loss tolerance and with none.
fn incast_table() -> String {
    let default = mw_proto::Config::default().loss_tolerance_pct;
    let mut table = String::from(
        "\nincast: 4 senders x 4 MiB into one 10 Gb/s port with a 256 KiB queue, 50 us one-way delay\n\
         tolerance  goodput_MB/s  port_busy  data_pkts  retransmits  queue_drops\n",
    );
    for tolerance in [default, 0] {
        let mut sc = fast_path(0.0, tolerance);
        sc.nodes = 5;
        sc.link.bandwidth = Some(1_250_000_000);
        sc.link.port = Some((1_250_000_000, 256 << 10));
        sc.workload.one_way = false;
        sc.workload.incast = true;
        sc.workload.messages = 64;
        let r = run(&sc);
        assert!(r.ok(), "{}", r.failure_text());
        let g = goodput_mbps(&r);
        let (data, rtx) = r.stats[1..]
            .iter()
            .fold((0, 0), |(d, x), s| (d + s.data_sent, x + s.retransmits_fast + s.retransmits_timeout));
        let busy = g / 1250.0;
        let _ = writeln!(
            table,
            "{:>8}%  {:>12.1}  {:>8.0}%  {:>9}  {:>11}  {:>11}",
            tolerance,
            g,
            100.0 * busy,
            data,
            rtx,
            r.net.queue_drops
        );
        assert!(busy >= 0.8, "incast, tolerance {tolerance}%: the port is only {:.0}% busy", busy * 100.0);
        assert!(rtx * 10 <= data, "incast, tolerance {tolerance}%: {rtx} retransmissions of {data} packets");
    }
    table
}
