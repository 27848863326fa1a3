//! Scenarios: a seeded description of a run (nodes, links, protocol config,
//! workload, crash/restart, garbage injection) and the driver that runs it
//! on the simulated network and reports.
//!
//! Owns: [`Scenario`], the scenario [`families`](Scenario::family) used by the
//! tests, [`run`], the replay entry point ([`replay_from_env`]) and the
//! [`Report`] with its one-line replay command.
//!
//! Must not: contain protocol logic; endpoints are driven only through the
//! public `mw_proto::Endpoint` API, in the documented call order.

use crate::net::{LinkConfig, NetStats};
use crate::rng::Rng;
use mw_proto::time::{Duration, Instant};
use mw_proto::{Config, Stats};
use std::fmt::Write as _;

/// The job id every simulated endpoint uses.
pub const JOB_ID: u64 = 0x6d77_5f73_696d;

/// What the nodes send each other.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Messages per directed pair that talks.
    pub messages: u32,
    /// Largest message size drawn.
    pub max_size: usize,
    /// Every message has exactly this size (bulk transfers), instead of the size mix.
    pub fixed_size: Option<usize>,
    /// Probability that the receiver answers a message (causal-completion check).
    pub reply_chance: f64,
    /// Probability that a directed pair talks at all (1.0 = all to all).
    pub pair_chance: f64,
    /// Messages are submitted at random instants within this span (zero: at once).
    pub spread: Duration,
    /// A sender stops submitting to a peer while `queued_bytes` is above this.
    pub queue_limit: usize,
    /// Only node 0 sends (to every other node).
    pub one_way: bool,
    /// Every node but 0 sends to node 0 only, and node 0 sends nothing:
    /// many senders into one receiver (with `LinkConfig::port`, into one
    /// shared queue).
    pub incast: bool,
}

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            messages: 10,
            max_size: 64 * 1024,
            fixed_size: None,
            reply_chance: 0.2,
            pair_chance: 1.0,
            spread: Duration::ZERO,
            queue_limit: 256 * 1024,
            one_way: false,
            incast: false,
        }
    }
}

/// A node that stops answering (process crash) and maybe comes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crash {
    /// Which node.
    pub node: u32,
    /// When (virtual time since start).
    pub at: Duration,
    /// Comes back as a new incarnation (new epoch, empty state) after this long.
    pub restart_after: Option<Duration>,
}

/// One seeded run.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Family name (what `MW_SIM_SCENARIO` selects).
    pub family: String,
    /// The seed: with the family it determines everything.
    pub seed: u64,
    /// Number of endpoints.
    pub nodes: u32,
    /// Every directed link.
    pub link: LinkConfig,
    /// Protocol configuration of every endpoint.
    pub config: Config,
    /// Traffic.
    pub workload: Workload,
    /// Optional crash.
    pub crash: Option<Crash>,
    /// Per transmitted datagram, probability of also injecting an invalid one.
    pub garbage: f64,
    /// Virtual-time budget; running past it is a stall.
    pub budget: Duration,
    /// Print every datagram and event.
    pub trace: bool,
}

/// What happened in a run.
#[derive(Debug, Clone)]
pub struct Report {
    /// Family.
    pub family: String,
    /// Seed.
    pub seed: u64,
    /// Invariant violations; empty means the run passed.
    pub errors: Vec<String>,
    /// Virtual time when every message was acked or failed.
    pub completed_at: Option<Instant>,
    /// Virtual time when the run stopped.
    pub ended_at: Instant,
    /// Messages delivered.
    pub delivered: u64,
    /// Bytes delivered.
    pub delivered_bytes: u64,
    /// Messages reported failed (dead or restarted peer).
    pub failed: u64,
    /// Protocol counters per node (last incarnation).
    pub stats: Vec<Stats>,
    /// Network counters.
    pub net: NetStats,
    /// (node, dead peer, when) for each `PeerDead`.
    pub dead_events: Vec<(u32, u32, Instant)>,
    /// State dump when the run failed.
    pub dump: String,
}

impl Report {
    /// No invariant was violated.
    pub fn ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// The command that replays this run with tracing.
    pub fn replay_command(&self) -> String {
        format!(
            "MW_SIM_SEED={} MW_SIM_SCENARIO={} cargo test -p mw-sim --test scenarios -- replay --nocapture",
            self.seed, self.family
        )
    }

    /// A multi-line failure description: errors, state dump, replay command.
    pub fn failure_text(&self) -> String {
        let mut s = format!("scenario {} seed {} FAILED:\n", self.family, self.seed);
        for e in &self.errors {
            let _ = writeln!(s, "  {e}");
        }
        s.push_str(&self.dump);
        let _ = writeln!(s, "replay: {}", self.replay_command());
        s
    }
}

/// Every family name, for documentation and the replay entry point.
pub const FAMILIES: &[&str] = &[
    "lossless",
    "loss",
    "duplicate",
    "reorder",
    "jitter",
    "bandwidth",
    "mixed",
    "all_to_all16",
    "crash",
    "restart",
    "no_false_dead",
    "garbage",
];

fn small_config(rng: &mut Rng) -> Config {
    let mut c = Config {
        max_datagram: rng.pick(&[200, 600, 1472, 1472, 1472, 9000]),
        ack_every: rng.pick(&[1, 2, 8, 8, 16]),
        // A quarter of the runs checksum every packet, as ranks do between
        // hosts when authentication is off.
        checksum: rng.chance(0.25),
        ..Config::default()
    };
    if rng.chance(0.3) {
        // Start near the top of the sequence space so runs wrap around.
        c.initial_seq = u32::MAX - rng.range(0, 300) as u32;
    }
    if rng.chance(0.2) {
        c.recv_window = rng.pick(&[4, 16, 64, 100]);
    }
    if rng.chance(0.2) {
        c.initial_window = rng.pick(&[2, 4, 8]);
        c.min_window = 2;
        c.max_window = c.max_window.max(c.initial_window);
    }
    c
}

fn small_workload(rng: &mut Rng) -> Workload {
    Workload {
        messages: rng.range(1, 20) as u32,
        max_size: rng.pick(&[2_000, 20_000, 100_000, 300_000]),
        reply_chance: rng.pick(&[0.0, 0.2, 0.5, 1.0]),
        pair_chance: rng.pick(&[0.5, 1.0]),
        queue_limit: rng.pick(&[16 * 1024, 256 * 1024]),
        ..Workload::default()
    }
}

/// Most runs have 2 to 4 nodes; one in five has 5 to 16, with the workload
/// thinned so that every node count costs about the same to simulate.
fn draw_nodes(rng: &mut Rng) -> u32 {
    if rng.chance(0.2) {
        rng.range(5, 16) as u32
    } else {
        rng.range(2, 4) as u32
    }
}

/// Scales a workload drawn for a few nodes down to `nodes`: about as many
/// messages in total as 4 nodes would send, no message over 20 kB.
fn thin_for(nodes: u32, w: &mut Workload) {
    if nodes <= 4 {
        return;
    }
    let pairs = u64::from(nodes * (nodes - 1));
    w.messages = ((u64::from(w.messages) * 12).div_ceil(pairs)).max(1) as u32;
    w.max_size = w.max_size.min(20_000);
}

/// One-way propagation delays the links are drawn from: loopback-like to a
/// millisecond (longer than the initial RTO, so the first packets are
/// retransmitted spuriously until an RTT sample arrives).
const DELAYS_US: [u64; 7] = [1, 10, 10, 10, 50, 200, 1000];

impl Scenario {
    /// The scenario `seed` of family `family` (see [`FAMILIES`]); `None` for an unknown family.
    pub fn family(family: &str, seed: u64) -> Option<Scenario> {
        let mut salt = 0xcbf2_9ce4_8422_2325u64;
        for b in family.bytes() {
            salt = (salt ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        let mut rng = Rng::new(seed ^ salt);
        let mut sc = Scenario {
            family: family.to_string(),
            seed,
            nodes: draw_nodes(&mut rng),
            link: LinkConfig { delay: Duration::from_micros(rng.pick(&DELAYS_US)), ..LinkConfig::default() },
            config: small_config(&mut rng),
            workload: small_workload(&mut rng),
            crash: None,
            garbage: 0.0,
            budget: Duration::from_secs(30),
            trace: false,
        };
        match family {
            "lossless" => {}
            "loss" => {
                sc.link.loss = rng.pick(&[0.001, 0.01, 0.05, 0.2, 0.5]);
                if sc.link.loss >= 0.5 {
                    // Silence of seconds is plausible at 50% loss: not a dead peer.
                    sc.config.peer_dead_after = Duration::from_secs(60);
                    sc.workload.max_size = sc.workload.max_size.min(20_000);
                    sc.budget = Duration::from_secs(600);
                }
            }
            "duplicate" => sc.link.duplicate = rng.pick(&[0.05, 0.1, 0.3]),
            "reorder" => {
                sc.link.reorder = rng.pick(&[0.05, 0.1, 0.3]);
                sc.link.reorder_delay = Duration::from_micros(rng.range(10, 300));
            }
            "jitter" => sc.link.jitter = Duration::from_micros(rng.range(1, 200)),
            "bandwidth" => {
                sc.link.bandwidth = Some(rng.pick(&[10_000_000, 125_000_000, 1_250_000_000]));
                sc.link.queue_bytes = rng.pick(&[16 * 1024, 64 * 1024, 512 * 1024]);
            }
            "mixed" => {
                sc.link.loss = rng.unit() * 0.1;
                sc.link.duplicate = rng.unit() * 0.1;
                sc.link.reorder = rng.unit() * 0.2;
                sc.link.jitter = Duration::from_micros(rng.range(0, 50));
                if rng.chance(0.5) {
                    sc.link.bandwidth = Some(125_000_000);
                    sc.link.queue_bytes = 128 * 1024;
                }
            }
            "all_to_all16" => {
                sc.nodes = 16;
                sc.workload.messages = rng.range(1, 4) as u32;
                sc.workload.max_size = 20_000;
                sc.workload.pair_chance = 1.0;
                sc.link.loss = rng.pick(&[0.0, 0.01, 0.05]);
                sc.link.duplicate = rng.pick(&[0.0, 0.0, 0.02, 0.1]);
                sc.link.reorder = rng.pick(&[0.0, 0.0, 0.05, 0.2]);
                sc.link.reorder_delay = Duration::from_micros(rng.range(10, 200));
                sc.link.jitter = Duration::from_micros(rng.range(0, 20));
            }
            "crash" | "restart" => {
                sc.nodes = rng.range(2, 5) as u32;
                sc.link.loss = rng.pick(&[0.0, 0.0, 0.01, 0.05]);
                sc.config.peer_dead_after = Duration::from_millis(rng.pick(&[50, 200, 2000]));
                sc.workload.messages = rng.range(20, 60) as u32;
                sc.workload.max_size = 20_000;
                sc.workload.spread = Duration::from_millis(20);
                let restart_after = (family == "restart").then(|| {
                    let dead = sc.config.peer_dead_after;
                    rng.pick(&[dead / 10, dead / 2, dead * 2])
                });
                sc.crash = Some(Crash {
                    node: rng.range(0, u64::from(sc.nodes) - 1) as u32,
                    at: Duration::from_micros(rng.range(2_000, 15_000)),
                    restart_after,
                });
            }
            "no_false_dead" => {
                sc.nodes = rng.range(2, 4) as u32; // seconds of keepalives: kept small
                sc.link.loss = 0.2;
                sc.config.keepalive = Some(Duration::from_millis(100));
                sc.config.peer_dead_after = Duration::from_secs(2);
                sc.workload.messages = rng.range(20, 60) as u32;
                sc.workload.max_size = 4_000;
                sc.workload.spread = Duration::from_secs(10);
                sc.budget = Duration::from_secs(120);
            }
            "garbage" => {
                sc.garbage = rng.pick(&[0.01, 0.1, 0.5]);
                sc.link.loss = rng.pick(&[0.0, 0.01]);
            }
            _ => return None,
        }
        if family != "all_to_all16" {
            thin_for(sc.nodes, &mut sc.workload);
        }
        Some(sc)
    }
}

/// Runs the scenario named by `MW_SIM_SCENARIO` with seed `MW_SIM_SEED`,
/// tracing every datagram; `None` when the variables are not set.
pub fn replay_from_env() -> Option<Report> {
    let family = std::env::var("MW_SIM_SCENARIO").ok()?;
    let seed: u64 = std::env::var("MW_SIM_SEED").ok()?.parse().expect("MW_SIM_SEED must be an integer");
    let mut sc = Scenario::family(&family, seed)
        .unwrap_or_else(|| panic!("unknown MW_SIM_SCENARIO {family:?}; families: {FAMILIES:?}"));
    sc.trace = std::env::var("MW_SIM_TRACE").map_or(true, |v| v != "0");
    println!("{sc:#?}");
    Some(run(&sc))
}

/// Runs every seed in `seeds` of `family`; panics with every failure's
/// replay command if any fails. Returns the reports.
pub fn run_family(family: &str, seeds: std::ops::Range<u64>) -> Vec<Report> {
    let mut failures = String::new();
    let mut reports = Vec::new();
    for seed in seeds {
        let sc = Scenario::family(family, seed).expect("known family");
        let report = run(&sc);
        if !report.ok() && failures.len() < 20_000 {
            failures.push_str(&report.failure_text());
        }
        reports.push(report);
    }
    let failed = reports.iter().filter(|r| !r.ok()).count();
    assert!(failed == 0, "{failed} of {} {family} scenarios failed:\n{failures}", reports.len());
    reports
}

pub use crate::driver::run;
