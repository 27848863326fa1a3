//! The run as data: the command line becomes a list of steps (one measured
//! point, or one launch of an MPI program that measures many), built before
//! anything runs, so a bad option fails at once, the progress bar knows its
//! length, and under mwrun every rank runs the same list.
//!
//! Owns: the option vocabulary (benches, ops, defaults for sizes and
//! iteration counts, `--quick`) and what is refused under mwrun. Must not:
//! measure.

use crate::mpi::{self, Launch, Program};
use crate::row::is_baseline_op;
use crate::{coll, nton};

/// Point-to-point benches (two ranks).
pub const PT2PT: &[&str] = &["pingpong", "bandwidth", "bibw", "rate", "overhead"];
/// Every bench, in the order a run measures them.
pub const ALL_BENCHES: &[&str] = &[
    "pingpong",
    "bandwidth",
    "bibw",
    "rate",
    "overhead",
    "nton",
    "barrier",
    "bcast",
    "allgather",
    "alltoall",
    "allreduce",
    "allgatherv",
    "alltoallv",
    "multicast",
    "loss",
    "overlap",
    "shmem",
];

/// put_signal with a packet trailer forced on against forced off: run only
/// when named (`--op`), over UDP only.
const TRAILER_COMPARISONS: [&str; 2] = ["put_signal_auth", "put_signal_crc"];

/// The memwire ops of `bench` (`memwire` for collectives).
pub fn memwire_ops(bench: &str) -> &'static [&'static str] {
    match bench {
        "pingpong" => &[
            "put_signal",
            "get",
            "fetch_add",
            "swap",
            "compare_swap",
            "send_recv",
            "am",
            "put_signal_auth",
            "put_signal_crc",
        ],
        "bandwidth" => &["put", "put_lent", "get", "send_recv"],
        "bibw" => &["put", "send_recv"],
        "rate" => &["put", "fetch_add", "send_recv", "am"],
        "overhead" => &["put", "put_signal", "send_recv"],
        "nton" => &["put", "multicast"],
        "loss" => &["put", "send_recv"],
        "overlap" => &["send_recv", "isend", "put"],
        // Its ops are the OpenSHMEM libraries (`baselines`), memwire's among them.
        "shmem" => &[],
        _ => &["memwire"],
    }
}

/// The baselines of `bench` on `transport`.
pub fn baselines(bench: &str, transport: &str) -> &'static [&'static str] {
    match (bench, transport) {
        ("pingpong", "udp") => &["udp_raw", "udp_gso", "tcp_raw", "mpich", "openmpi"],
        ("pingpong", _) => &["shm_floor", "shm_floor_2lines", "shm_floor_ring", "mpich", "openmpi"],
        ("bandwidth" | "bibw", "udp") => &["udp_raw", "udp_gso", "tcp_raw", "mpich", "openmpi"],
        ("rate", "udp") => &["udp_raw", "tcp_raw", "mpich", "openmpi"],
        ("bandwidth" | "bibw", _) => &["memcpy", "mpich", "openmpi"],
        ("rate", _) => &["mpich", "openmpi"],
        ("overhead", "udp") => &["udp_raw"],
        ("overhead", _) => &["memcpy"],
        ("loss" | "overlap", _) => &[],
        ("shmem", _) => mpi::SHMEM_LABELS,
        _ => &["mpich", "openmpi"],
    }
}

/// Atomics work on one 8-byte word: measured once, at 8 B, whatever the sizes.
const ATOMICS: &[&str] = &["fetch_add", "swap", "compare_swap"];
/// The shared-memory ping-pong floors: measured once, at 8 bytes.
const FLOORS: &[&str] = &["shm_floor", "shm_floor_2lines", "shm_floor_ring"];

/// The ping-pongs whose ratios issue targets compare (send_recv and am
/// against put_signal): measured in one job, in alternating blocks, as one
/// point named by joining them with `+` (see `pingpong::interleaved`).
/// Measured one after the other, seconds apart, each landed wherever the
/// host had placed the two vCPUs at that moment, which moved the ratios by
/// more than the code did (measurements: docs/perf-notes.md, "mwbench's
/// run plan").
const INTERLEAVED: &[&str] = &["put_signal", "send_recv", "am"];
/// The point names of each group of two or more of `INTERLEAVED`.
const INTERLEAVED_GROUPS: &[(&[&str], &str)] = &[
    (&["put_signal", "send_recv", "am"], "put_signal+send_recv+am"),
    (&["put_signal", "send_recv"], "put_signal+send_recv"),
    (&["put_signal", "am"], "put_signal+am"),
    (&["send_recv", "am"], "send_recv+am"),
];

/// The members of interleaved group `op`, if it is one.
pub fn group_members(op: &str) -> Option<&'static [&'static str]> {
    INTERLEAVED_GROUPS.iter().find(|(_, name)| *name == op).map(|(members, _)| *members)
}

/// Benches that only run over UDP (fault injection and the progress thread
/// act on the UDP send path; shared-memory puts never reach it).
fn udp_only(bench: &str) -> bool {
    bench == "loss" || bench == "overlap"
}

/// What the command line asked for, validated.
#[derive(Debug, Clone)]
pub struct Options {
    pub quick: bool,
    pub benches: Vec<String>,
    pub ops: Vec<String>,
    pub transports: Vec<&'static str>,
    pub sizes: Vec<usize>,
    pub iters: Option<usize>,
    /// Iterations of MPI collective/nton launches (`None`: as memwire's).
    pub mpi_iters: Option<usize>,
    pub ranks: Vec<u32>,
    pub methods: Vec<String>,
    /// `--window`; `None`: [`Options::window_for`]'s default.
    pub window: Option<usize>,
    pub rate_window: usize,
    pub loss: Vec<f64>,
    /// Under mwrun: (job size, transport of the job).
    pub process: Option<(u32, &'static str)>,
    /// Which MPI and OpenSHMEM libraries are installed (`mpi::LABELS`,
    /// `mpi::SHMEM_LABELS`).
    pub mpi_installed: Vec<&'static str>,
    /// Whether `udp_gso` is measured: raw baselines between mwrun ranks
    /// (`rawpair`) on a path whose datagrams are small enough for a GSO
    /// send to carry several, on kernels with UDP GSO.
    pub udp_gso: bool,
    /// The raw baselines' datagram size (65000 on loopback, 1472 between
    /// hosts unless `MW_MTU`): the largest raw message rate point.
    pub datagram: usize,
    /// Under an mwrun job that spans hosts: where MPI launches run.
    pub mpi_hosts: Option<mpi::Hosts>,
}

/// One memwire point or baseline measured by mwbench itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub bench: &'static str,
    pub op: &'static str,
    pub transport: &'static str,
    pub size: usize,
    /// Samples (latency), messages (throughput) or iterations (multi-rank).
    pub count: usize,
    pub ranks: u32,
    /// Algorithm (collectives) or send order (nton).
    pub variant: Option<String>,
    pub loss: Option<f64>,
    pub window: usize,
}

/// One step of the run.
#[derive(Debug, Clone)]
pub enum Step {
    Point(Point),
    Mpi(Launch),
}

impl Step {
    /// Whether memwire's ranks take part (under mwrun: every rank runs it).
    pub fn uses_ranks(&self) -> bool {
        matches!(self, Step::Point(p) if !is_baseline_op(p.op))
    }

    /// A short description for the progress bar and error messages.
    pub fn describe(&self) -> String {
        match self {
            Step::Point(p) => {
                let mut d = format!("{} {} {} {} B", p.bench, p.op, p.transport, p.size);
                if p.ranks > 2 || coll::BENCHES.contains(&p.bench) || p.bench == "nton" {
                    d.push_str(&format!(" {} ranks", p.ranks));
                }
                if let Some(v) = &p.variant {
                    d.push_str(&format!(" {v}"));
                }
                if let Some(l) = p.loss {
                    d.push_str(&format!(" loss {l}%"));
                }
                d
            }
            Step::Mpi(l) => format!("{} over {} ({:?}, {} ranks)", l.label, l.transport, l.program, l.ranks),
        }
    }
}

impl Options {
    /// Outstanding operations of the throughput benches on `transport`:
    /// `--window`, else 8 over UDP (enough to keep the pipe full) and 1 over
    /// shared memory. There a put or get is one CPU's copy that is complete
    /// when the call returns (a send's is the receiver's single pull), so
    /// a window overlaps nothing; its only effect would be `window` distinct
    /// local buffers, whose footprint (8 × 16 MiB) leaves the cache the
    /// memcpy baseline's two warm buffers enjoy.
    pub fn window_for(&self, transport: &str) -> usize {
        self.window.unwrap_or(if transport == "shm" { 1 } else { 8 })
    }

    fn wants(&self, op: &str) -> bool {
        self.ops.is_empty() && !TRAILER_COMPARISONS.contains(&op) || self.ops.iter().any(|o| o == op)
    }

    fn sizes_or(&self, default_full: &[usize], default_quick: &[usize]) -> Vec<usize> {
        if !self.sizes.is_empty() {
            self.sizes.clone()
        } else if self.quick {
            default_quick.to_vec()
        } else {
            default_full.to_vec()
        }
    }

    /// Latency samples at `size`: fewer for large messages.
    fn latency_iters(&self, transport: &str, size: usize) -> usize {
        if let Some(n) = self.iters {
            return n;
        }
        let base = if self.quick { 2_000 } else { 10_000 } * if transport == "shm" { 4 } else { 1 };
        (base * 4096 / size.max(4096)).max(50)
    }

    /// Messages of a throughput point at `size`.
    fn stream_count(&self, transport: &str, size: usize, budget_mib: usize) -> usize {
        if let Some(n) = self.iters {
            return n;
        }
        let budget = (budget_mib << 20) * if transport == "shm" { 4 } else { 1 } / if self.quick { 4 } else { 1 };
        (budget / size.max(1)).clamp(16, 100_000)
    }

    /// Calls per MPI collective launch: `--mpi-iters`, else as many as
    /// memwire's points (`memwire`).
    fn mpi_iters_or(&self, memwire: usize) -> usize {
        self.mpi_iters.unwrap_or(memwire)
    }

    fn group_iters(&self, full: usize, quick: usize) -> usize {
        self.iters.unwrap_or(if self.quick { quick } else { full })
    }

    fn mpi_labels(&self, bench: &str, transport: &str) -> Vec<&'static str> {
        mpi::LABELS
            .iter()
            .copied()
            .filter(|l| self.mpi_installed.contains(l) && self.wants(l) && baselines(bench, transport).contains(l))
            .collect()
    }
}

fn point(bench: &'static str, op: &'static str, transport: &'static str, size: usize, count: usize) -> Point {
    Point { bench, op, transport, size, count, ranks: 2, variant: None, loss: None, window: 0 }
}

fn bench_name(b: &str) -> Result<&'static str, String> {
    ALL_BENCHES
        .iter()
        .copied()
        .find(|&x| x == b)
        .ok_or_else(|| format!("unknown bench {b:?} (have {})", ALL_BENCHES.join(", ")))
}

/// Checks the options against each other and against mwrun's limits.
fn validate(o: &Options, benches: &[&'static str]) -> Result<(), String> {
    for op in &o.ops {
        let known = benches.iter().any(|b| {
            memwire_ops(b).contains(&op.as_str()) || o.transports.iter().any(|t| baselines(b, t).contains(&op.as_str()))
        });
        if !known {
            let mut all: Vec<&str> = benches
                .iter()
                .flat_map(|b| memwire_ops(b).iter().chain(o.transports.iter().flat_map(|t| baselines(b, t))))
                .copied()
                .collect();
            all.sort_unstable();
            all.dedup();
            return Err(format!("no selected bench has op {op:?} (ops of these benches: {})", all.join(", ")));
        }
    }
    if o.sizes.contains(&0) && benches.iter().any(|b| ["bandwidth", "bibw", "loss", "nton"].contains(b)) {
        return Err("throughput benches need sizes of at least 1 byte".into());
    }
    if o.window == Some(0) || o.rate_window == 0 {
        return Err("--window and --rate-window must be at least 1".into());
    }
    if o.iters == Some(0) {
        return Err("--iters must be at least 1".into());
    }
    if o.loss.iter().any(|l| !(0.0..100.0).contains(l)) {
        return Err("--loss percentages must lie in [0, 100)".into());
    }
    if !o.udp_gso && o.ops.iter().any(|op| op == "udp_gso") {
        return Err("udp_gso runs only between the two processes of an mwrun job (e.g. across hosts), on a \
                    path whose datagrams a GSO send can carry several of, with a kernel that has UDP GSO"
            .into());
    }
    if o.ranks.iter().any(|&n| n < 2) {
        return Err("--ranks must be at least 2".into());
    }
    if let Some((size, _)) = o.process {
        // overlap runs with the job's progress mode (MW_PROGRESS), which its rows record.
        if benches.contains(&"loss") || o.ops.iter().any(|op| TRAILER_COMPARISONS.contains(&op.as_str())) {
            return Err("under mwrun each rank has one endpoint for the whole run, so loss, \
                        put_signal_auth and put_signal_crc (which change the configuration per point) cannot \
                        run; set MW_FAULT_DROP, MW_AUTH or MW_CHECKSUM for the whole job instead, or run \
                        mwbench without mwrun"
                .into());
        }
        if size != 2 && benches.iter().any(|b| PT2PT.contains(b)) {
            return Err(format!("{} need exactly 2 ranks under mwrun (this job has {size})", PT2PT.join(", ")));
        }
        if benches.contains(&"shmem") {
            return Err("shmem launches its own jobs with oshrun: run mwbench --bench shmem without mwrun".into());
        }
        if o.ranks.iter().any(|&n| n != size) {
            return Err(format!("under mwrun --ranks can only be the job size ({size})"));
        }
    }
    Ok(())
}

/// Builds the run from `o`.
pub fn build(o: &Options) -> Result<Vec<Step>, String> {
    let benches: Vec<&'static str> = if o.benches.is_empty() {
        if o.quick {
            vec!["pingpong", "bandwidth"]
        } else {
            ALL_BENCHES.to_vec()
        }
    } else {
        o.benches.iter().map(|b| bench_name(b)).collect::<Result<_, _>>()?
    };
    validate(o, &benches)?;
    let mut steps = Vec::new();
    for &transport in &o.transports {
        for &bench in benches.iter().filter(|b| PT2PT.contains(b)) {
            pt2pt_steps(o, bench, transport, &mut steps);
        }
        mpi_pt2pt_steps(o, &benches, transport, &mut steps);
        if benches.contains(&"nton") {
            nton_steps(o, transport, &mut steps)?;
        }
        let colls: Vec<&'static str> = benches.iter().copied().filter(|b| coll::BENCHES.contains(b)).collect();
        if !colls.is_empty() {
            coll_steps(o, &colls, transport, &mut steps)?;
        }
        if benches.contains(&"shmem") {
            shmem_steps(o, transport, &mut steps);
        }
        for &bench in benches.iter().filter(|b| udp_only(b)) {
            if transport == "udp" {
                udp_only_steps(o, bench, &mut steps);
            }
        }
    }
    if steps.is_empty() {
        return Err("nothing to measure with these options (loss and overlap run over udp only)".into());
    }
    Ok(steps)
}

fn pt2pt_steps(o: &Options, bench: &'static str, transport: &'static str, steps: &mut Vec<Step>) {
    let window = if bench == "rate" { o.rate_window } else { o.window_for(transport) };
    let sizes = match bench {
        "pingpong" => o.sizes_or(&[8, 64, 1024, 16 << 10, 64 << 10, 1 << 20], &[8, 1 << 20]),
        "bandwidth" => o.sizes_or(&[4 << 10, 64 << 10, 1 << 20, 16 << 20], &[1 << 20]),
        "bibw" => o.sizes_or(&[64 << 10, 1 << 20], &[1 << 20]),
        "rate" => o.sizes_or(&[8], &[8]),
        _ => o.sizes_or(&[8, 1024, 64 << 10], &[8]),
    };
    let mut push = |op: &'static str, size: usize| {
        if !o.wants(op) {
            return;
        }
        let count = match bench {
            "pingpong" | "overhead" => o.latency_iters(transport, size),
            "rate" => o.iters.unwrap_or(if o.quick { 20_000 } else { 100_000 }),
            _ => o.stream_count(transport, size, 512),
        };
        steps.push(Step::Point(Point { window, ..point(bench, op, transport, size, count) }));
    };
    // Size-independent points once: the cache-line floor and the atomics.
    if bench == "pingpong" && transport == "shm" {
        for floor in FLOORS {
            push(floor, 8);
        }
    }
    for &op in memwire_ops(bench).iter().filter(|op| ATOMICS.contains(op)) {
        push(op, 8);
    }
    for &size in &sizes {
        for &op in baselines(bench, transport).iter().filter(|b| !mpi::LABELS.contains(b) && !FLOORS.contains(b)) {
            // A raw datagram carries at most the path's datagram: no raw message rate above.
            let too_big = bench == "rate" && op == "udp_raw" && size > o.datagram;
            if !too_big && (op != "udp_gso" || o.udp_gso) {
                push(op, size);
            }
        }
        for &op in memwire_ops(bench).iter().filter(|op| !ATOMICS.contains(op)) {
            if TRAILER_COMPARISONS.contains(&op) && transport != "udp" {
                continue;
            }
            push(op, size);
        }
    }
    if bench == "pingpong" {
        for &size in &sizes {
            interleave(steps, transport, size);
        }
    }
}

/// Replaces the ping-pong points of `INTERLEAVED` at `transport` and
/// `size` by one point of their group, where there are two or more; it
/// takes the place of the first of them.
fn interleave(steps: &mut Vec<Step>, transport: &str, size: usize) {
    let member = |s: &Step| {
        matches!(s, Step::Point(p) if p.bench == "pingpong" && p.transport == transport && p.size == size
            && INTERLEAVED.contains(&p.op))
    };
    let chosen: Vec<&str> = steps
        .iter()
        .filter(|s| member(s))
        .filter_map(|s| match s {
            Step::Point(p) => Some(p.op),
            Step::Mpi(_) => None,
        })
        .collect();
    let Some((_, name)) = INTERLEAVED_GROUPS.iter().find(|(members, _)| *members == chosen.as_slice()) else {
        return;
    };
    let Some(at) = steps.iter().position(member) else { return };
    let Step::Point(mut group) = steps[at].clone() else { unreachable!("a member is a point") };
    group.op = name;
    steps.retain(|s| !member(s));
    steps.insert(at, Step::Point(group));
}

/// One MPI launch per library for all point-to-point points of `transport`.
fn mpi_pt2pt_steps(o: &Options, benches: &[&'static str], transport: &'static str, steps: &mut Vec<Step>) {
    for label in mpi::LABELS {
        let mut points = Vec::new();
        for &bench in benches.iter().filter(|b| ["pingpong", "bandwidth", "bibw", "rate"].contains(b)) {
            if !o.mpi_labels(bench, transport).contains(label) {
                continue;
            }
            // The same sizes and counts as memwire's points of this bench.
            let mut probe = Vec::new();
            pt2pt_steps(
                &Options { ops: vec!["put".into(), "put_signal".into()], ..o.clone() },
                bench,
                transport,
                &mut probe,
            );
            for step in probe {
                if let Step::Point(p) = step {
                    points.push(format!("{bench}:{}:{}", p.size, p.count));
                }
            }
        }
        if !points.is_empty() {
            steps.push(Step::Mpi(Launch {
                label,
                transport,
                program: Program::Pt2pt,
                ranks: 2,
                args: vec![
                    "--points".into(),
                    points.join(","),
                    "--window".into(),
                    o.window_for(transport).to_string(),
                    "--rate-window".into(),
                    o.rate_window.to_string(),
                ],
                as_nton: false,
                expect: points.len(),
                hosts: o.mpi_hosts.clone(),
            }));
        }
    }
}

/// One launch of `bench/shmem_bench.c` per OpenSHMEM library on 2 PEs:
/// put, get and put_signal latency by size, fetch_add at 8 B, put/get
/// bandwidth, barrier, broadcast and sum_reduce, with memwire's sizes and
/// counts for the same kinds of points.
fn shmem_steps(o: &Options, transport: &'static str, steps: &mut Vec<Step>) {
    let mut points = Vec::new();
    let mut push = |routine: &str, size: usize, count: usize| points.push(format!("{routine}:{size}:{count}"));
    for size in o.sizes_or(&[8, 1024, 64 << 10, 1 << 20], &[8, 1 << 20]) {
        for routine in ["put", "get", "put_signal"] {
            push(routine, size, o.latency_iters(transport, size));
        }
    }
    push("fetch_add", 8, o.latency_iters(transport, 8));
    for size in o.sizes_or(&[64 << 10, 1 << 20, 16 << 20], &[1 << 20]).into_iter().filter(|&s| s > 0) {
        for routine in ["put_bw", "get_bw"] {
            push(routine, size, o.stream_count(transport, size, 512));
        }
    }
    let iters = o.group_iters(2_000, 300);
    push("barrier", 0, iters);
    // 1.4 libraries broadcast and reduce 8-byte words.
    for size in o.sizes_or(&[8, 64 << 10], &[8, 64 << 10]).into_iter().filter(|&s| s >= 8) {
        push("broadcast", size / 8 * 8, iters);
        push("sum_reduce", size / 8 * 8, iters);
    }
    for &label in mpi::SHMEM_LABELS {
        if o.mpi_installed.contains(&label) && o.wants(label) {
            steps.push(Step::Mpi(Launch {
                label,
                transport,
                program: Program::Shmem,
                ranks: 2,
                args: vec!["--points".into(), points.join(",")],
                as_nton: false,
                expect: points.len(),
                hosts: None,
            }));
        }
    }
}

fn job_sizes(o: &Options, default: &[u32]) -> Vec<u32> {
    match o.process {
        Some((size, _)) => vec![size],
        None if !o.ranks.is_empty() => o.ranks.clone(),
        None => default.to_vec(),
    }
}

fn nton_steps(o: &Options, transport: &'static str, steps: &mut Vec<Step>) -> Result<(), String> {
    let orders: Vec<&'static str> = if o.methods.is_empty() {
        nton::ORDERS.to_vec()
    } else {
        o.methods
            .iter()
            .map(|m| {
                nton::ORDERS
                    .iter()
                    .copied()
                    .find(|x| x == m)
                    .ok_or_else(|| format!("nton has no send order {m:?} (have {})", nton::ORDERS.join(", ")))
            })
            .collect::<Result<_, _>>()?
    };
    let sizes = o.sizes_or(&[1024, 64 << 10], &[64 << 10]);
    let iters = o.group_iters(300, 50);
    for n in job_sizes(o, &[4]) {
        for &size in &sizes {
            for &order in &orders {
                let op = if order == "multicast" { "multicast" } else { "put" };
                if o.wants(op) {
                    let p =
                        Point { ranks: n, variant: Some(order.into()), ..point("nton", op, transport, size, iters) };
                    steps.push(Step::Point(p));
                }
            }
        }
        for label in o.mpi_labels("nton", transport) {
            steps.push(Step::Mpi(on_hosts(
                o,
                coll_launch(label, transport, n, "alltoall", &sizes, o.mpi_iters_or(iters), true),
            )));
        }
    }
    Ok(())
}

fn coll_steps(
    o: &Options,
    benches: &[&'static str],
    transport: &'static str,
    steps: &mut Vec<Step>,
) -> Result<(), String> {
    let sizes = o.sizes_or(&[8, 64 << 10], &[8, 64 << 10]);
    let iters = o.group_iters(2_000, 300);
    for n in job_sizes(o, &[2, 4]) {
        for &bench in benches {
            let algos: Vec<String> = if !o.methods.is_empty() {
                o.methods.clone()
            } else if o.quick {
                vec!["auto".into()]
            } else {
                coll::algos(bench).into_iter().map(String::from).collect()
            };
            for algo in &algos {
                if !coll::algos(bench).contains(&algo.as_str()) {
                    return Err(format!("{bench} has no algorithm {algo:?} (have {})", coll::algos(bench).join(", ")));
                }
                if !o.wants("memwire") {
                    continue;
                }
                let bench_sizes = if bench == "barrier" { vec![0] } else { sizes.clone() };
                for &size in &bench_sizes {
                    let p = Point {
                        ranks: n,
                        variant: Some(algo.clone()),
                        ..point(bench, "memwire", transport, size, iters)
                    };
                    steps.push(Step::Point(p));
                }
            }
            // Each MPI's run of the same collective right after memwire's
            // (MPI has no one-to-many put; its analogue, bcast, is
            // measured): on a host whose speed drifts for minutes at a
            // time, points compared side by side are measured minutes
            // apart at most, not a whole group apart.
            if bench == "multicast" {
                continue;
            }
            for label in o.mpi_labels("barrier", transport) {
                steps.push(Step::Mpi(on_hosts(
                    o,
                    coll_launch(label, transport, n, bench, &sizes, o.mpi_iters_or(iters), false),
                )));
            }
        }
    }
    Ok(())
}

/// `launch` across the hosts of the mwrun job, when it spans hosts.
fn on_hosts(o: &Options, launch: Launch) -> Launch {
    Launch { hosts: o.mpi_hosts.clone(), ..launch }
}

/// An MPI run of `coll_bench.c` for one collective `bench` at `sizes` (a
/// barrier has one point whatever the sizes), its rows as `nton` points when
/// `as_nton`.
fn coll_launch(
    label: &'static str,
    transport: &'static str,
    ranks: u32,
    bench: &str,
    sizes: &[usize],
    iters: usize,
    as_nton: bool,
) -> Launch {
    let sizes_arg = sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    Launch {
        label,
        transport,
        program: Program::Coll,
        ranks,
        args: vec!["--bench".into(), bench.into(), "--sizes".into(), sizes_arg, "--iters".into(), iters.to_string()],
        as_nton,
        expect: if bench == "barrier" { 1 } else { sizes.len() },
        hosts: None,
    }
}

fn udp_only_steps(o: &Options, bench: &'static str, steps: &mut Vec<Step>) {
    if bench == "overlap" {
        let reps = o.iters.unwrap_or(if o.quick { 5 } else { 15 });
        for size in o.sizes_or(&[16 << 20], &[16 << 20]) {
            for &op in memwire_ops("overlap") {
                if o.wants(op) {
                    steps.push(Step::Point(point("overlap", op, "udp", size, reps)));
                }
            }
        }
        return;
    }
    let levels = if o.loss.is_empty() { vec![0.0, 0.1, 1.0, 5.0] } else { o.loss.clone() };
    for size in o.sizes_or(&[1 << 20], &[1 << 20]) {
        for &op in memwire_ops("loss") {
            if !o.wants(op) {
                continue;
            }
            for &loss in &levels {
                let count = o.stream_count("udp", size, 512);
                steps.push(Step::Point(Point {
                    loss: Some(loss),
                    window: o.window_for("udp"),
                    ..point("loss", op, "udp", size, count)
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            quick: true,
            benches: Vec::new(),
            ops: Vec::new(),
            transports: vec!["udp", "shm"],
            sizes: Vec::new(),
            iters: None,
            mpi_iters: None,
            ranks: Vec::new(),
            methods: Vec::new(),
            window: None,
            rate_window: 64,
            loss: Vec::new(),
            process: None,
            mpi_installed: vec!["mpich", "openmpi"],
            udp_gso: false,
            datagram: 65_000,
            mpi_hosts: None,
        }
    }

    /// The ops a point measures: its op, or the members of its group.
    fn point_ops(op: &'static str) -> Vec<&'static str> {
        group_members(op).map_or_else(|| vec![op], <[_]>::to_vec)
    }

    fn points(steps: &[Step]) -> Vec<(String, String, String, usize)> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Point(p) => Some(
                    point_ops(p.op)
                        .into_iter()
                        .map(|op| (p.bench.to_string(), op.to_string(), p.transport.to_string(), p.size))
                        .collect::<Vec<_>>(),
                ),
                Step::Mpi(_) => None,
            })
            .flatten()
            .collect()
    }

    #[test]
    fn the_compared_ping_pongs_are_one_interleaved_point_per_size_and_transport() {
        let steps = build(&options()).unwrap();
        let ops: Vec<(&str, &str, usize)> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Point(p) if p.bench == "pingpong" => Some((p.op, p.transport, p.size)),
                _ => None,
            })
            .collect();
        for t in ["udp", "shm"] {
            for size in [8, 1 << 20] {
                assert!(ops.contains(&("put_signal+send_recv+am", t, size)), "{t} {size}: {ops:?}");
                for op in INTERLEAVED {
                    assert!(!ops.contains(&(op, t, size)), "{op} {t} {size} measured on its own too");
                }
            }
        }
        // Two of the three: their own group; one alone: its own point.
        let two = Options {
            benches: vec!["pingpong".into()],
            ops: vec!["send_recv".into(), "put_signal".into()],
            ..options()
        };
        let pts: Vec<&str> = build(&two)
            .unwrap()
            .into_iter()
            .filter_map(|s| if let Step::Point(p) = s { Some(p.op) } else { None })
            .collect();
        assert!(pts.contains(&"put_signal+send_recv") && !pts.contains(&"send_recv"), "{pts:?}");
        let one = Options { benches: vec!["pingpong".into()], ops: vec!["am".into()], ..options() };
        let pts: Vec<&str> = build(&one)
            .unwrap()
            .into_iter()
            .filter_map(|s| if let Step::Point(p) = s { Some(p.op) } else { None })
            .collect();
        assert!(pts.iter().all(|&op| op == "am") && !pts.is_empty(), "{pts:?}");
        assert_eq!(point_ops("put_signal+am"), ["put_signal", "am"]);
        assert_eq!(point_ops("get"), ["get"]);
    }

    #[test]
    fn quick_covers_every_op_and_baseline_at_8_bytes_and_1_mib_on_both_transports() {
        let steps = build(&options()).unwrap();
        let pts = points(&steps);
        let has =
            |b: &str, op: &str, t: &str, size: usize| pts.iter().any(|p| p == &(b.into(), op.into(), t.into(), size));
        for t in ["udp", "shm"] {
            for op in ["put_signal", "get", "fetch_add", "swap", "compare_swap", "send_recv", "am"] {
                assert!(has("pingpong", op, t, 8), "pingpong {op} {t}");
            }
            for op in ["put_signal", "get", "send_recv", "am"] {
                assert!(has("pingpong", op, t, 1 << 20), "pingpong {op} {t} 1 MiB");
            }
            for op in ["put", "get", "send_recv"] {
                assert!(has("bandwidth", op, t, 1 << 20), "bandwidth {op} {t}");
            }
        }
        assert!(has("pingpong", "udp_raw", "udp", 8) && has("pingpong", "tcp_raw", "udp", 8));
        assert!(has("pingpong", "shm_floor", "shm", 8) && has("bandwidth", "memcpy", "shm", 1 << 20));
        for floor in FLOORS {
            let times = pts.iter().filter(|p| p.1 == *floor).count();
            assert!(times == 1 && has("pingpong", floor, "shm", 8), "{floor} once, at 8 B ({times}x)");
        }
        assert!(has("bandwidth", "udp_raw", "udp", 1 << 20) && has("bandwidth", "tcp_raw", "udp", 1 << 20));
        assert!(!pts.iter().any(|p| p.1 == "put_signal_auth"), "auth comparison only when asked");
        assert!(!pts.iter().any(|p| p.1 == "put_signal_crc"), "checksum comparison only when asked");
        let launches: Vec<_> = steps
            .iter()
            .filter_map(|s| if let Step::Mpi(l) = s { Some((l.label, l.transport)) } else { None })
            .collect();
        for l in ["mpich", "openmpi"] {
            for t in ["udp", "shm"] {
                assert!(launches.contains(&(l, t)), "{l} over {t}");
            }
        }
    }

    #[test]
    fn throughput_window_defaults_to_8_over_udp_and_1_over_shm_unless_given() {
        let window_of = |o: &Options, t: &str| {
            build(o)
                .unwrap()
                .iter()
                .find_map(|s| match s {
                    Step::Point(p) if p.bench == "bandwidth" && p.op == "get" && p.transport == t => Some(p.window),
                    _ => None,
                })
                .unwrap()
        };
        let o = Options { benches: vec!["bandwidth".into()], ..options() };
        assert_eq!((window_of(&o, "udp"), window_of(&o, "shm")), (8, 1));
        let o = Options { window: Some(4), ..o };
        assert_eq!((window_of(&o, "udp"), window_of(&o, "shm")), (4, 4));
        let args = |o: &Options, t: &str| {
            build(o)
                .unwrap()
                .iter()
                .find_map(|s| match s {
                    Step::Mpi(l) if l.transport == t => Some(l.args.clone()),
                    _ => None,
                })
                .unwrap()
        };
        let o = Options { window: None, ..o };
        let shm = args(&o, "shm");
        assert_eq!(shm[shm.iter().position(|a| a == "--window").unwrap() + 1], "1", "MPI gets the same window");
    }

    #[test]
    fn mpi_points_use_memwire_sizes_and_counts() {
        let o = Options { benches: vec!["pingpong".into()], sizes: vec![8, 1024], iters: Some(77), ..options() };
        let steps = build(&o).unwrap();
        let args = steps.iter().find_map(|s| if let Step::Mpi(l) = s { Some(l.args.clone()) } else { None }).unwrap();
        assert_eq!(args[1], "pingpong:8:77,pingpong:1024:77");
    }

    #[test]
    fn mpi_collectives_take_their_own_iteration_count() {
        let o = Options { benches: vec!["allgather".into()], iters: Some(2000), mpi_iters: Some(300), ..options() };
        let steps = build(&o).unwrap();
        let counts: Vec<usize> =
            steps.iter().filter_map(|s| if let Step::Point(p) = s { Some(p.count) } else { None }).collect();
        assert!(!counts.is_empty() && counts.iter().all(|&c| c == 2000), "{counts:?}");
        let mpi: Vec<Vec<String>> =
            steps.iter().filter_map(|s| if let Step::Mpi(l) = s { Some(l.args.clone()) } else { None }).collect();
        assert!(!mpi.is_empty());
        for args in &mpi {
            assert_eq!(args[args.iter().position(|a| a == "--iters").unwrap() + 1], "300", "{args:?}");
        }
        // Without it, MPI runs as many as memwire.
        let steps = build(&Options { mpi_iters: None, ..o }).unwrap();
        let args = steps.iter().find_map(|s| if let Step::Mpi(l) = s { Some(l.args.clone()) } else { None }).unwrap();
        assert_eq!(args[args.iter().position(|a| a == "--iters").unwrap() + 1], "2000");
    }

    #[test]
    fn bad_options_are_refused_with_the_valid_choices() {
        let bad = |o: Options| build(&o).unwrap_err();
        assert!(bad(Options { benches: vec!["latency".into()], ..options() }).contains("pingpong"));
        let e = bad(Options { benches: vec!["pingpong".into()], ops: vec!["put".into()], ..options() });
        assert!(e.contains("put_signal"), "{e}");
        let e = bad(Options { benches: vec!["barrier".into()], methods: vec!["z".into()], ..options() });
        assert!(e.contains("dissemination") || e.contains("auto"), "{e}");
        let e = bad(Options { benches: vec!["loss".into()], process: Some((2, "udp")), ..options() });
        assert!(e.contains("MW_FAULT_DROP"), "{e}");
        let e = bad(Options { benches: vec!["pingpong".into()], process: Some((4, "udp")), ..options() });
        assert!(e.contains("exactly 2"), "{e}");
        assert!(bad(Options { loss: vec![100.0], ..options() }).contains("loss"));
    }

    #[test]
    fn udp_gso_is_measured_only_where_offered() {
        let o = Options { benches: vec!["pingpong".into(), "bandwidth".into(), "rate".into()], ..options() };
        assert!(!points(&build(&o).unwrap()).iter().any(|p| p.1 == "udp_gso"), "not on loopback threads");
        let e = build(&Options { ops: vec!["udp_gso".into()], ..o.clone() }).unwrap_err();
        assert!(e.contains("mwrun"), "{e}");
        let hosts = Options { udp_gso: true, datagram: 1472, process: Some((2, "udp")), ..o };
        let pts = points(&build(&hosts).unwrap());
        for bench in ["pingpong", "bandwidth"] {
            assert!(pts.iter().any(|p| p.0 == bench && p.1 == "udp_gso"), "{bench}: {pts:?}");
        }
        assert!(!pts.iter().any(|p| p.0 == "rate" && p.1 == "udp_gso"));
    }

    #[test]
    fn op_filter_and_aliases_select_points() {
        let o = Options { benches: vec!["pingpong".into()], ops: vec!["get".into(), "udp_raw".into()], ..options() };
        let pts = points(&build(&o).unwrap());
        assert!(pts.iter().all(|p| p.1 == "get" || p.1 == "udp_raw"), "{pts:?}");
        assert!(pts.iter().any(|p| p.1 == "udp_raw") && !pts.iter().any(|p| p.2 == "shm" && p.1 == "udp_raw"));
    }

    #[test]
    fn shmem_runs_one_launch_per_installed_library_with_every_routine() {
        let installed = vec!["mwshmem", "oshmem"];
        let o = Options { benches: vec!["shmem".into()], mpi_installed: installed.clone(), ..options() };
        let steps = build(&o).unwrap();
        let launches: Vec<&Launch> =
            steps.iter().filter_map(|s| if let Step::Mpi(l) = s { Some(l) } else { None }).collect();
        let labels: Vec<(&str, &str)> = launches.iter().map(|l| (l.label, l.transport)).collect();
        assert_eq!(labels, [("mwshmem", "udp"), ("oshmem", "udp"), ("mwshmem", "shm"), ("oshmem", "shm")]);
        assert_eq!(steps.len(), 4, "no memwire points of their own");
        let points = &launches[0].args[1];
        for routine in ["put:8:", "get:8:", "put_signal:8:", "fetch_add:8:", "put_bw:", "get_bw:", "barrier:0:"] {
            assert!(points.contains(routine), "{routine} missing from {points}");
        }
        assert!(points.contains("broadcast:8:") && points.contains("sum_reduce:65536:"), "{points}");
        assert_eq!(launches[0].expect, points.split(',').count());
        assert_eq!(launches[0].args, launches[1].args, "both libraries measure the same points");
        // Only what is asked for and installed.
        let o = Options { ops: vec!["oshmem".into()], ..o };
        assert!(build(&o).unwrap().iter().all(|s| matches!(s, Step::Mpi(l) if l.label == "oshmem")));
        let o = Options { ops: Vec::new(), mpi_installed: vec!["mpich"], ..o };
        assert!(build(&o).is_err(), "nothing to measure");
        let e = build(&Options { mpi_installed: installed, process: Some((2, "udp")), ..o }).unwrap_err();
        assert!(e.contains("without mwrun"), "{e}");
    }
}
