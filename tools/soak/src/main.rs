//! `mwsoak`: a long-running check of memwire under loss. Run it under
//! `mwrun` (`make soak`: 4 ranks, 10 minutes, `MW_FAULT_DROP=0.05`).
//!
//! Each rank issues random mixed operations (every kind of put, get, atomic,
//! put_signal, strided, vectored, bursts of nonblocking puts) into slices
//! and words of a symmetric region that only it writes, and checks every
//! result against its model of them (gets byte for byte, fetching atomics
//! exactly). Every phase (default 1 s) ends with `quiet`, an exchange of
//! digests of every rank's model, and a check by each rank of its *whole*
//! local region against the others' digests (so every byte any rank wrote
//! is verified where it landed, and counters and signal words prove every
//! atomic and signal executed exactly once), plus a full-region get from one
//! peer. It samples its resident memory (`VmRSS`) at each phase end and fails
//! if it grows by more than a bound after a warm-up. Rank 0 prints operation
//! counts, retransmissions and memory per rank at the end, as a table on
//! stderr and one JSON line on stdout.
//!
//! Exit status: 0 when every check passed; a failed check panics (mwrun
//! then stops the job and names the rank); 1 when memory grew too much.
//!
//! Owns: the command line, the phase loop and its end-of-phase checks; `ops`
//! owns the operation mix and the model. Must not: use anything but memwire's
//! public API (it checks what a user gets), or judge speed: it fails only on a
//! wrong byte, a lost or doubled atomic, or memory growth.

mod ops;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use memwire::{Access, Endpoint};
use ops::{digest, Layout, Model, Worker, KINDS};
use rand::SeedableRng;

/// memwire soak test (run under mwrun).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// Length of a phase (operations between full checks), in milliseconds.
    #[arg(long, default_value_t = 1000)]
    phase_ms: u64,
    /// Bytes of each rank's slice in every region.
    #[arg(long, default_value_t = 32 << 10)]
    slice: usize,
    /// Seed of the operation streams (each rank mixes in its rank).
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Largest allowed growth of resident memory after the warm-up, in KiB.
    #[arg(long, default_value_t = 4096)]
    max_rss_growth_kib: u64,
    /// Warm-up before the memory baseline is taken, in seconds (default: a
    /// fifth of the run, at most 60).
    #[arg(long)]
    warmup: Option<u64>,
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// What one rank publishes at a phase end: per target, the digest of its
/// slice there, its counter word and its signal count; its global adds; and
/// (from rank 0) whether to go on.
fn encode(model: &Model, go_on: bool) -> Vec<u8> {
    let mut blob = vec![u8::from(go_on)];
    blob.extend_from_slice(&model.global_adds.to_le_bytes());
    for t in 0..model.slices.len() {
        blob.extend_from_slice(&digest(&model.slices[t]).to_le_bytes());
        blob.extend_from_slice(&model.counters[t].to_le_bytes());
        blob.extend_from_slice(&model.signals[t].to_le_bytes());
    }
    blob
}

fn word(blob: &[u8], index: usize) -> u64 {
    u64::from_le_bytes(blob[1 + 8 * index..9 + 8 * index].try_into().expect("8 bytes"))
}

/// From `blob` (rank q's), the (digest, counter, signals) q expects at `t`.
fn expected(blob: &[u8], t: u32) -> (u64, u64, u64) {
    let base = 1 + 3 * t as usize;
    (word(blob, base), word(blob, base + 1), word(blob, base + 2))
}

/// Counters for the final report, exchanged once at the end.
#[derive(Debug, Default, Clone, Copy)]
struct Summary {
    ops: u64,
    bytes_checked: u64,
    retransmits: u64,
    packets_sent: u64,
    drops: u64,
    rss_start: u64,
    rss_baseline: u64,
    rss_max_after: u64,
    rss_end: u64,
}

impl Summary {
    fn to_bytes(self) -> Vec<u8> {
        [
            self.ops,
            self.bytes_checked,
            self.retransmits,
            self.packets_sent,
            self.drops,
            self.rss_start,
            self.rss_baseline,
            self.rss_max_after,
            self.rss_end,
        ]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
    }
    fn from_bytes(b: &[u8]) -> Summary {
        let w = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        Summary {
            ops: w(0),
            bytes_checked: w(1),
            retransmits: w(2),
            packets_sent: w(3),
            drops: w(4),
            rss_start: w(5),
            rss_baseline: w(6),
            rss_max_after: w(7),
            rss_end: w(8),
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let ep = Endpoint::init().expect("joining the job (run under mwrun)");
    let ok = soak(&ep, &args).expect("a memwire operation failed");
    ep.finalize().expect("finalize");
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The whole run; `Ok(false)` when memory grew beyond the bound.
fn soak(ep: &Endpoint, args: &Args) -> memwire::Result<bool> {
    let (me, n) = (ep.rank(), ep.size());
    let layout = Layout { n, slice: args.slice };
    let region = ep.alloc_symmetric(layout.region_len(), Access::ALL)?;
    let mut w = Worker {
        ep,
        key: region.key(),
        layout,
        me,
        rng: rand::rngs::SmallRng::seed_from_u64(args.seed ^ u64::from(me).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        model: Model::new(layout),
        counts: [0; KINDS.len()],
        bytes_checked: 0,
    };
    let duration = Duration::from_secs(args.seconds);
    let warmup = Duration::from_secs(args.warmup.unwrap_or((args.seconds / 5).min(60)));
    let phase = Duration::from_millis(args.phase_ms.max(10));
    let start = Instant::now();
    let mut summary = Summary { rss_start: rss_kib(), ..Summary::default() };
    let mut full = vec![0u8; layout.data_len()];
    let mut local = vec![0u8; layout.region_len()];
    let mut last_report = Instant::now();
    let mut phases = 0u64;
    loop {
        let phase_start = Instant::now();
        while phase_start.elapsed() < phase {
            w.step()?;
        }
        ep.quiet()?;
        let go_on = start.elapsed() + phase < duration;
        let all = ep.allgather_bytes(&encode(&w.model, go_on))?;
        // Everything every rank wrote here, checked where it landed.
        region.read(0, &mut local)?;
        let mut global = 0;
        for (q, blob) in all.iter().enumerate() {
            let q = q as u32;
            let (want_digest, want_counter, want_signals) = expected(blob, me);
            let s = layout.slice(q) as usize;
            assert_eq!(
                digest(&local[s..s + layout.slice]),
                want_digest,
                "rank {q}'s slice here differs from its model"
            );
            assert_eq!(region.load_u64(layout.counter(q))?, want_counter, "rank {q}'s counter here");
            assert_eq!(region.load_u64(layout.signal(q))?, want_signals, "rank {q}'s put_signal count here");
            global += word(blob, 0);
        }
        if me == 0 {
            assert_eq!(region.load_u64(layout.global())?, global, "global counter: adds lost or doubled");
        }
        // And one peer's whole data area, through a large get.
        let t = ((u64::from(me) + phases) % u64::from(n)) as u32;
        ep.get(t, region.key(), 0, &mut full)?;
        for (q, blob) in all.iter().enumerate() {
            let s = layout.slice(q as u32) as usize;
            let (want_digest, _, _) = expected(blob, t);
            assert_eq!(digest(&full[s..s + layout.slice]), want_digest, "rank {q}'s slice on rank {t}, read by a get");
        }
        w.bytes_checked += full.len() as u64;
        phases += 1;
        let rss = rss_kib();
        if start.elapsed() < warmup || summary.rss_baseline == 0 {
            summary.rss_baseline = rss;
        } else {
            summary.rss_max_after = summary.rss_max_after.max(rss);
        }
        if me == 0 && last_report.elapsed() >= Duration::from_secs(30) {
            last_report = Instant::now();
            let ops: u64 = w.counts.iter().sum();
            eprintln!("soak: {:>4} s, {phases} phases, rank 0: {ops} ops, RSS {rss} KiB", start.elapsed().as_secs());
        }
        // Nobody writes into a region while its owner is still checking it.
        ep.barrier()?;
        if all[0][0] == 0 {
            break;
        }
    }
    let (_, proto) = ep.stats();
    summary.ops = w.counts.iter().sum();
    summary.bytes_checked = w.bytes_checked;
    summary.retransmits = proto.retransmits_timeout + proto.retransmits_fast;
    summary.packets_sent = proto.packets_sent;
    summary.drops = proto.drops.total();
    summary.rss_end = rss_kib();
    summary.rss_max_after = summary.rss_max_after.max(summary.rss_baseline);
    let all = ep.allgather_bytes(&summary.to_bytes())?;
    let kinds = ep.allgather_bytes(&w.counts.iter().flat_map(|c| c.to_le_bytes()).collect::<Vec<_>>())?;
    let growth = summary.rss_max_after.saturating_sub(summary.rss_baseline);
    if me == 0 {
        report(&all, &kinds, start.elapsed(), phases, args);
    }
    if growth > args.max_rss_growth_kib {
        eprintln!(
            "soak: rank {me}: resident memory grew {growth} KiB after the warm-up ({} -> {} KiB), bound {} KiB",
            summary.rss_baseline, summary.rss_max_after, args.max_rss_growth_kib
        );
        return Ok(false);
    }
    Ok(true)
}

fn report(all: &[Vec<u8>], kinds: &[Vec<u8>], elapsed: Duration, phases: u64, args: &Args) {
    let sums: Vec<Summary> = all.iter().map(|b| Summary::from_bytes(b)).collect();
    let per_kind: Vec<u64> = (0..KINDS.len())
        .map(|k| kinds.iter().map(|b| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes"))).sum())
        .collect();
    let total_ops: u64 = sums.iter().map(|s| s.ops).sum();
    let retransmits: u64 = sums.iter().map(|s| s.retransmits).sum();
    let packets: u64 = sums.iter().map(|s| s.packets_sent).sum();
    eprintln!("\nsoak: {} ranks, {:.0} s, {phases} phases, every check passed", all.len(), elapsed.as_secs_f64());
    eprintln!(
        "soak: {total_ops} operations ({:.0}/s), {packets} packets sent, {retransmits} retransmitted ({:.2}%)",
        total_ops as f64 / elapsed.as_secs_f64(),
        100.0 * retransmits as f64 / packets.max(1) as f64
    );
    for (k, name) in KINDS.iter().enumerate() {
        eprintln!("soak:   {name:<18} {:>10}", per_kind[k]);
    }
    eprintln!("soak: rank  ops        checked_MB  retrans  drops   RSS start  warm  max-after  end (KiB)  growth");
    for (r, s) in sums.iter().enumerate() {
        eprintln!(
            "soak: {r:<4}  {:<9}  {:>10.1}  {:>7}  {:>5}  {:>9}  {:>5}  {:>9}  {:>8}  {:>6}",
            s.ops,
            s.bytes_checked as f64 / 1e6,
            s.retransmits,
            s.drops,
            s.rss_start,
            s.rss_baseline,
            s.rss_max_after,
            s.rss_end,
            s.rss_max_after.saturating_sub(s.rss_baseline)
        );
    }
    let growth: Vec<String> = sums.iter().map(|s| s.rss_max_after.saturating_sub(s.rss_baseline).to_string()).collect();
    println!(
        "{{\"bench\":\"soak\",\"ranks\":{},\"seconds\":{:.1},\"phases\":{phases},\"ops\":{total_ops},\"packets\":{packets},\"retransmits\":{retransmits},\"rss_growth_kib\":[{}],\"rss_bound_kib\":{}}}",
        all.len(),
        elapsed.as_secs_f64(),
        growth.join(","),
        args.max_rss_growth_kib
    );
}
