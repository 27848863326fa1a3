//! Multicast scenarios: one root and 1..=9 members, each a whole
//! `mw_proto::Endpoint` (which builds and checks the `Mcast` packets, MAC
//! included) driving the sans-IO `McastSender` / `McastReceiver`, on the
//! simulated network.
//!
//! Owns: [`McastScenario`], its families, [`run_mcast`] and the replay entry
//! point. A multicast is one network send per member (each link decides the
//! copy's fate on its own, after an optional loss shared by all members at
//! the root); a repair is a send to one member. Feedback travels as encoded
//! `McastFeedback` operations on the reliable path: never lost, in order
//! per member, after the link delay (the reliability protocol that carries
//! it in production is simulated by the other scenario families). Other
//! jobs' packets can be thrown at the group, and the group can fail (send
//! errors) or silently deliver nothing.
//!
//! Checks of every run: every member ends with the transfer byte for byte;
//! the root completes, and only after every member holds everything; no
//! genuine packet is rejected and no foreign one accepted; every segment is
//! sent new exactly once. A failure prints the seed and
//! `MW_SIM_SEED=<seed> MW_SIM_SCENARIO=<family> cargo test -p mw-sim --test mcast -- replay --nocapture`.
//!
//! Must not: contain protocol logic; the state machines are driven only
//! through their public API, in the documented call order.

use crate::net::{LinkConfig, Network};
use crate::rng::{splitmix64, Rng};
use mw_proto::mcast::{Arrival, McastConfig, McastDest, McastReceiver, McastSender, ReceiverStats, SenderStats};
use mw_proto::time::{Duration, Instant};
use mw_proto::{AuthKey, Config, Endpoint};
use mw_wire::mcast::McastData;
use mw_wire::op::{McastFeedback, McastRanges, OpRepr};

const JOB_KEY: [u8; 16] = *b"memwire-sim-mcst";
const FOREIGN_KEY: [u8; 16] = *b"another-job-key!";
const TEAM: u64 = 0x7465_616d;
const TRANSFER: u64 = 42;

/// One seeded multicast run.
#[derive(Debug, Clone, PartialEq)]
pub struct McastScenario {
    /// Family name.
    pub family: String,
    /// Seed.
    pub seed: u64,
    /// Members (receivers), not counting the root.
    pub members: u32,
    /// Transfer length in bytes.
    pub total: u64,
    /// Segment size and window (bytes) of the transfer.
    pub segment_size: usize,
    /// Window in bytes.
    pub window_bytes: usize,
    /// Every link root → member (and member → root for feedback delay).
    pub link: LinkConfig,
    /// Probability that a multicast is lost for every member at once.
    pub shared_loss: f64,
    /// Packets are authenticated.
    pub auth: bool,
    /// Per multicast, probability of also throwing another job's segment at the group.
    pub foreign: f64,
    /// After this many group sends, sending to the group fails with an error.
    pub group_fails_after: Option<u64>,
    /// The group silently delivers nothing (sends succeed, nobody receives).
    pub silent_group: bool,
    /// Virtual-time budget.
    pub budget: Duration,
    /// Print every event.
    pub trace: bool,
}

/// What happened in a multicast run.
#[derive(Debug, Clone)]
pub struct McastReport {
    /// Family.
    pub family: String,
    /// Seed.
    pub seed: u64,
    /// Invariant violations; empty means the run passed.
    pub errors: Vec<String>,
    /// Virtual time when the root completed.
    pub completed_at: Option<Instant>,
    /// Segments in the transfer.
    pub segments: u32,
    /// The root's counters.
    pub sender: SenderStats,
    /// Each member's counters.
    pub receivers: Vec<ReceiverStats>,
    /// Foreign packets rejected by members.
    pub foreign_rejected: u64,
}

impl McastReport {
    /// Whether every check passed.
    pub fn ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// The errors and a one-line replay command.
    pub fn failure_text(&self) -> String {
        format!(
            "multicast scenario {} seed {} failed:\n  {}\nreplay: MW_SIM_SEED={} MW_SIM_SCENARIO={} cargo test -p mw-sim --test mcast -- replay --nocapture",
            self.family,
            self.seed,
            self.errors.join("\n  "),
            self.seed,
            self.family
        )
    }
}

/// The multicast families the tests run.
pub const MCAST_FAMILIES: &[&str] = &[
    "mcast_lossless",
    "mcast_loss",
    "mcast_shared_loss",
    "mcast_dup_reorder",
    "mcast_jitter",
    "mcast_bandwidth",
    "mcast_foreign",
    "mcast_group_fails",
    "mcast_silent_group",
];

impl McastScenario {
    /// The scenario of `family` for `seed`: sizes, team size, segment size
    /// and fault rates drawn from the seed within the family's ranges.
    pub fn family(family: &str, seed: u64) -> Option<McastScenario> {
        let mut r = Rng::new(seed ^ 0x006d_6361_7374);
        let segment_size = r.pick(&[64usize, 100, 1000, 1400]);
        let segments = r.pick(&[1u64, 2, 7, 40, 200]);
        let total = if r.chance(0.2) { 0 } else { (segments * segment_size as u64).saturating_sub(r.range(0, 50)) };
        let mut s = McastScenario {
            family: family.to_owned(),
            seed,
            members: r.range(1, 9) as u32,
            total,
            segment_size,
            window_bytes: segment_size * r.range(4, 64) as usize,
            link: LinkConfig { delay: Duration::from_micros(r.range(5, 50)), ..LinkConfig::default() },
            shared_loss: 0.0,
            auth: r.chance(0.5),
            foreign: 0.0,
            group_fails_after: None,
            silent_group: false,
            budget: Duration::from_secs(60),
            trace: false,
        };
        match family {
            "mcast_lossless" => {}
            "mcast_loss" => s.link.loss = r.pick(&[0.01, 0.05, 0.1, 0.2]),
            "mcast_shared_loss" => {
                s.shared_loss = r.pick(&[0.01, 0.05, 0.1]);
                s.link.loss = r.pick(&[0.0, 0.01]);
            }
            "mcast_dup_reorder" => {
                s.link.duplicate = r.pick(&[0.02, 0.1]);
                s.link.reorder = r.pick(&[0.05, 0.2]);
                s.link.reorder_delay = Duration::from_micros(r.range(10, 500));
                s.link.loss = r.pick(&[0.0, 0.02]);
            }
            "mcast_jitter" => {
                s.link.jitter = Duration::from_micros(r.range(10, 2000));
                s.link.loss = r.pick(&[0.0, 0.02]);
            }
            "mcast_bandwidth" => {
                // A slow link with a small queue: a window too large for it
                // overflows the queue and the losses are repaired.
                s.link.bandwidth = Some(r.pick(&[10_000_000, 100_000_000]));
                s.link.queue_bytes = r.pick(&[4_000, 16_000, 64_000]);
            }
            "mcast_foreign" => {
                s.foreign = r.pick(&[0.1, 0.5]);
                s.link.loss = r.pick(&[0.0, 0.05]);
            }
            "mcast_group_fails" => {
                s.group_fails_after = Some(r.range(0, segments + 2));
                s.link.loss = r.pick(&[0.0, 0.05]);
            }
            "mcast_silent_group" => s.silent_group = true,
            _ => return None,
        }
        Some(s)
    }
}

#[derive(Debug)]
enum Lane {
    Segment,
    Feedback,
}

/// Runs one scenario.
pub fn run_mcast(s: &McastScenario) -> McastReport {
    let mut rng = Rng::new(s.seed);
    let auth = s.auth.then(|| AuthKey::from_job_key(&JOB_KEY));
    let pcfg = Config { max_datagram: 1472, auth: auth.clone(), ..Config::default() };
    let job = mw_proto::job_id_from_key(&JOB_KEY);
    let n = s.members + 1;
    let mut root = Endpoint::new(pcfg.clone(), job, 0, 1, n);
    let mut members: Vec<Endpoint> = (1..n).map(|r| Endpoint::new(pcfg.clone(), job, r, 100 + r, n)).collect();
    let foreign_cfg = Config { auth: s.auth.then(|| AuthKey::from_job_key(&FOREIGN_KEY)), ..pcfg.clone() };
    let mut stranger = Endpoint::new(foreign_cfg, mw_proto::job_id_from_key(&FOREIGN_KEY), 0, 1, n);

    let mut cfg = McastConfig::new(s.segment_size, s.window_bytes);
    cfg.segment_size = s.segment_size.min(root.mcast_segment_size());
    let segments = cfg.segments(s.total).expect("a small transfer");
    let mut seed = s.seed;
    let data: Vec<u8> = (0..s.total).map(|_| splitmix64(&mut seed) as u8).collect();

    let mut net = Network::new(n as usize, s.link.clone());
    let mut sender = McastSender::new(cfg.clone(), segments, s.members);
    let mut receivers: Vec<McastReceiver> =
        (0..s.members).map(|_| McastReceiver::new(cfg.clone(), segments, Instant::ZERO)).collect();
    let mut buffers: Vec<Vec<u8>> = (0..s.members).map(|_| vec![0xEE; s.total as usize]).collect();
    let mut feedback_free: Vec<Instant> = vec![Instant::ZERO; s.members as usize];
    let mut report = McastReport {
        family: s.family.clone(),
        seed: s.seed,
        errors: Vec::new(),
        completed_at: None,
        segments,
        sender: SenderStats::default(),
        receivers: Vec::new(),
        foreign_rejected: 0,
    };
    let mut group_sends = 0u64;
    let mut foreign_sent = 0u64;
    let mut buf = vec![0u8; 2048];
    let trace = |now: Instant, what: String| {
        if s.trace {
            println!("{now:?} {what}");
        }
    };

    'run: loop {
        let now = net.now();
        // The root sends what the window and repair queue allow.
        while let Some(send) = sender.poll_send() {
            let (offset, len) = cfg.segment_range(s.total, send.segment);
            let seg = McastData {
                team: TEAM,
                transfer: TRANSFER,
                total: s.total,
                offset,
                data: &data[offset as usize..offset as usize + len],
            };
            match send.dest {
                McastDest::Group => {
                    if s.group_fails_after.is_some_and(|after| group_sends >= after) {
                        trace(now, format!("group send of {} fails", send.segment));
                        sender.group_failed();
                        continue;
                    }
                    group_sends += 1;
                    let len = root.encode_mcast(None, send.segment, &seg, &mut buf).expect("segment fits");
                    trace(now, format!("multicast segment {}", send.segment));
                    if s.silent_group || rng.chance(s.shared_loss) {
                        continue;
                    }
                    for m in 1..n {
                        net.send(&mut rng, 0, m, &buf[..len]);
                    }
                    if rng.chance(s.foreign) {
                        foreign_sent += 1;
                        let len = stranger.encode_mcast(None, send.segment, &seg, &mut buf).expect("fits");
                        for m in 1..n {
                            net.inject(now + s.link.delay, 0, m, buf[..len].to_vec());
                        }
                    }
                }
                McastDest::Member(m) => {
                    let len = root.encode_mcast(Some(m + 1), send.segment, &seg, &mut buf).expect("segment fits");
                    trace(now, format!("repair segment {} to member {m}", send.segment));
                    net.send(&mut rng, 0, m + 1, &buf[..len]);
                }
            }
        }
        // Members report.
        for (m, rx) in receivers.iter_mut().enumerate() {
            while let Some(fb) = rx.poll_feedback(now) {
                let op = OpRepr::McastFeedback(McastFeedback {
                    team: TEAM,
                    transfer: TRANSFER,
                    contig: fb.contig,
                    done: fb.done,
                    missing: McastRanges::from_pairs(&fb.missing),
                });
                let mut bytes = vec![0u8; op.buffer_len()];
                op.emit(&mut bytes);
                // Reliable and in order per member.
                let at = (now + s.link.delay).max(feedback_free[m] + Duration::from_nanos(1));
                feedback_free[m] = at;
                trace(now, format!("member {m} feedback {op}"));
                net.inject(at, m as u32 + 1, 0, bytes);
            }
        }
        if sender.is_complete() && report.completed_at.is_none() {
            report.completed_at = Some(now);
            for (m, rx) in receivers.iter().enumerate() {
                if !rx.is_complete() {
                    report.errors.push(format!("root completed at {now:?} while member {m} lacks segments"));
                }
            }
        }
        if report.completed_at.is_some() && net.in_flight() == 0 {
            break;
        }
        // Next event: an arrival or a member's timer.
        let next = [net.next_arrival(), receivers.iter().filter_map(McastReceiver::poll_timeout).min()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else {
            report.errors.push(format!("stalled at {now:?}: nothing in flight, no timer, root not complete"));
            break;
        };
        if next > Instant::ZERO + s.budget {
            report.errors.push(format!("did not complete within {:?}", s.budget));
            break;
        }
        net.advance(next);
        let now = net.now();
        while let Some((src, dst, bytes)) = net.pop_arrival() {
            let lane = if dst == 0 { Lane::Feedback } else { Lane::Segment };
            match lane {
                Lane::Feedback => {
                    let Ok(OpRepr::McastFeedback(fb)) = OpRepr::parse(&bytes) else {
                        report.errors.push("feedback did not parse".into());
                        break 'run;
                    };
                    // The reliable path names the sender (member m is rank m + 1).
                    sender.handle_feedback(src - 1, fb.contig, fb.done, fb.missing.iter());
                }
                Lane::Segment => {
                    let m = dst as usize - 1;
                    match members[m].accept_mcast(&bytes) {
                        Err(_) => report.foreign_rejected += 1,
                        Ok(seg) => {
                            let d = seg.data;
                            let (offset, len) = cfg.segment_range(s.total, seg.index.min(segments - 1));
                            if seg.from != 0 || d.team != TEAM || d.transfer != TRANSFER || d.total != s.total {
                                report.errors.push(format!("member {m} accepted a foreign segment {d}"));
                                break 'run;
                            }
                            if d.offset != offset || d.data.len() != len {
                                report
                                    .errors
                                    .push(format!("member {m}: segment {} has the wrong place {d}", seg.index));
                                break 'run;
                            }
                            match receivers[m].handle_segment(now, seg.index, seg.to_group) {
                                Arrival::New => {
                                    buffers[m][offset as usize..offset as usize + len].copy_from_slice(d.data);
                                }
                                Arrival::Duplicate => {
                                    if buffers[m][offset as usize..offset as usize + len] != *d.data {
                                        report.errors.push(format!("member {m}: duplicate {} differs", seg.index));
                                    }
                                }
                                Arrival::Invalid => {
                                    report.errors.push(format!("member {m}: segment {} invalid", seg.index));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    for (m, buffer) in buffers.iter().enumerate() {
        if *buffer != data {
            report.errors.push(format!("member {m} holds different bytes"));
        }
    }
    if report.foreign_rejected > foreign_sent * u64::from(s.members) {
        report.errors.push(format!(
            "{} packets rejected but only {foreign_sent} foreign ones sent to {} members",
            report.foreign_rejected, s.members
        ));
    }
    report.sender = sender.stats();
    if report.ok() && report.sender.new_segments != u64::from(segments) {
        report.errors.push(format!("{} new sends for {segments} segments", report.sender.new_segments));
    }
    report.receivers = receivers.iter().map(McastReceiver::stats).collect();
    report
}

/// Runs `seeds` of `family`; panics with the seed and replay command of the
/// first failure.
pub fn run_mcast_family(family: &str, seeds: std::ops::Range<u64>) -> Vec<McastReport> {
    seeds
        .map(|seed| {
            let s = McastScenario::family(family, seed).unwrap_or_else(|| panic!("unknown family {family}"));
            let report = run_mcast(&s);
            assert!(report.ok(), "{}", report.failure_text());
            report
        })
        .collect()
}

/// Replays `MW_SIM_SCENARIO`/`MW_SIM_SEED` if they name a multicast family,
/// tracing every event.
pub fn replay_mcast_from_env() -> Option<McastReport> {
    let family = std::env::var("MW_SIM_SCENARIO").ok()?;
    let seed = std::env::var("MW_SIM_SEED").ok()?.parse().ok()?;
    let mut s = McastScenario::family(&family, seed)?;
    s.trace = true;
    Some(run_mcast(&s))
}
