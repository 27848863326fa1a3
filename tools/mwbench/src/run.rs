//! Executes a plan: each step measured, its rows emitted as they come, a
//! step that hangs reported and left behind (threads) or ending the run
//! (under mwrun, status 3), and the table at the end.
//!
//! With threads the steps run in plan order (each baseline next to the
//! points it is compared with). Under mwrun every rank runs, in plan order,
//! the memwire steps, the raw socket baselines (`udp_raw`, `udp_gso`,
//! `tcp_raw`: ranks 0 and 1 each run one side, see `rawpair`) and, when
//! the job spans hosts, the MPI launches across those hosts (rank 0
//! launches, the others wait at a barrier, blocked in the kernel); then the
//! endpoint is finalized, and rank 0 alone runs the remaining baselines
//! (memcpy, the shared-memory floors, MPI on one host), so they never
//! compete with a waiting rank for the CPU nor keep a peer waiting past its
//! dead-peer timeout. Every `udp` row gets the job's path (`hosts` or
//! `loopback`) and datagram size. Owns the order and the failure policy;
//! must not know how a point is measured.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::harness::{Job, NetPath};
use crate::plan::{Point, Step};
use crate::row::Row;
use crate::{coll, floor, mpi, nton, out, pingpong, raw, rawpair, stream};

/// When the current step started and its text: under mwrun, where a hung
/// point cannot be abandoned (every rank is in it), the watchdog ends the run.
static CURRENT: Mutex<Option<(Instant, String)>> = Mutex::new(None);
static LIMIT_SECS: AtomicU64 = AtomicU64::new(300);

/// Starts the watchdog: under mwrun, a point running longer than `limit`
/// ends the process with status 3 (the rows already printed stay valid).
fn start_watchdog(limit: Duration) {
    LIMIT_SECS.store(limit.as_secs().max(1), Ordering::Relaxed);
    std::thread::spawn(|| loop {
        std::thread::sleep(Duration::from_millis(500));
        let current = CURRENT.lock().expect("watchdog lock").clone();
        if let Some((since, what)) = current {
            let limit = LIMIT_SECS.load(Ordering::Relaxed);
            if since.elapsed() > Duration::from_secs(limit) {
                out::finish_progress();
                eprintln!("mwbench: {what} has not finished after {limit} s; giving up (--step-timeout)");
                std::process::exit(3);
            }
        }
    });
}

/// Measures one point (memwire op or mwbench's own baseline).
fn measure(job: &Job, p: &Point) -> Result<Vec<Row>, String> {
    let (t, size, n) = (p.transport, p.size, p.count);
    if let (Some((ep, net)), true) = (job.process(), rawpair::is_pair_op(p.op)) {
        return rawpair::measure(ep, net, p);
    }
    let rows = match (p.bench, p.op) {
        ("pingpong", "udp_raw") => vec![raw::udp_pingpong(size, n)?],
        ("pingpong", "tcp_raw") => vec![raw::tcp_pingpong(size, n)],
        ("pingpong", "shm_floor") => vec![floor::pingpong_shm_floor(n, 1)],
        ("pingpong", "shm_floor_2lines") => vec![floor::pingpong_shm_floor(n, 2)],
        ("pingpong", "shm_floor_ring") => vec![floor::pingpong_shm_floor_ring(n)],
        ("pingpong", op) => pingpong::measure(job, op, t, size, n),
        ("bandwidth" | "bibw", "udp_raw") => vec![raw::udp_blast(p.bench, size, n, p.bench == "bibw")],
        ("bandwidth" | "bibw" | "rate", "tcp_raw") => vec![raw::tcp_stream(p.bench, size, n)],
        ("bandwidth" | "bibw", "memcpy") => vec![floor::memcpy_bandwidth(p.bench, size, n)],
        ("bandwidth" | "loss", _) => stream::bandwidth(job, p),
        ("bibw", op) => stream::bibw(job, op, t, size, n, p.window),
        ("rate", "udp_raw") => vec![raw::udp_rate(size, n)?],
        ("rate", op) => stream::rate(job, op, t, size, n, p.window),
        ("overhead", "udp_raw") => vec![raw::udp_overhead(size, n)],
        ("overhead", "memcpy") => vec![floor::memcpy_overhead(size, n)],
        ("overhead", op) => stream::overhead(job, op, t, size, n, p.window.max(8)),
        ("overlap", op) => stream::overlap(job, op, size, n),
        ("nton", _) => nton::measure(job, p.variant.as_deref().unwrap_or("shifted"), t, p.ranks, size, n),
        (bench, _) => coll::measure(job, bench, p.variant.as_deref().unwrap_or("auto"), t, p.ranks, size, n),
    };
    Ok(rows)
}

/// Measures a point with threads as ranks, giving up after `limit`: a
/// point that hangs (e.g. a transport bug) is reported and its threads are
/// left waiting, and the run goes on with the next point.
fn measure_threads(p: &Point, limit: Duration) -> Result<Vec<Row>, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let point = p.clone();
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| measure(&Job::Threads, &point)));
        let _ = tx.send(result);
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err("failed (panicked, see above)".into()),
        Err(_) => Err(format!("did not finish within {} s (hung?); abandoned, the run goes on", limit.as_secs())),
    }
}

/// Whether every rank of an mwrun job takes part in `step`: memwire's
/// points, the raw baselines between ranks, and MPI launches across the
/// job's hosts (rank 0 launches, the others wait).
fn on_ranks(job: &Job, step: &Step) -> bool {
    match step {
        Step::Point(p) => step.uses_ranks() || (rawpair::is_pair_op(p.op) && job.process().is_some()),
        Step::Mpi(launch) => launch.hosts.is_some() && job.process().is_some(),
    }
}

/// `--network-loss`, in thousandths of a percent (`u64::MAX`: none given).
static NETWORK_LOSS: AtomicU64 = AtomicU64::new(u64::MAX);

/// Records `--network-loss` for every row of the run.
pub fn set_network_loss(percent: Option<f64>) {
    NETWORK_LOSS.store(percent.map_or(u64::MAX, |p| (p * 1000.0).round() as u64), Ordering::Relaxed);
}

/// Records the path of `row` (a `udp` point) unless its measurement did,
/// and the network's own loss when the run was told it.
fn mark_path(row: &mut Row, net: &NetPath) {
    let loss = NETWORK_LOSS.load(Ordering::Relaxed);
    if loss != u64::MAX && row.loss_pct.is_none() {
        row.loss_pct = Some(loss as f64 / 1000.0);
        row.extra.insert("loss".into(), serde_json::json!("network"));
    }
    if row.transport != "udp" {
        return;
    }
    row.path.get_or_insert_with(|| net.name().into());
    if row.via.is_none() && row.datagram.is_none() {
        row.datagram = Some(if row.is_baseline() { raw::DATAGRAM } else { net.datagram });
    }
}

/// An MPI launch across the hosts of the job (every rank calls it): rank 0
/// launches it, the others wait for it at a barrier.
fn mpi_across_hosts(job: &Job, launch: &mpi::Launch, limit: Duration) -> (Vec<Row>, Option<String>) {
    let (ep, _) = job.process().expect("an mwrun job");
    let result = if ep.rank() == 0 { mpi::run(launch, limit) } else { (Vec::new(), None) };
    match ep.barrier() {
        Ok(()) => result,
        Err(e) => (result.0, Some(format!("barrier after the MPI launch: {e}"))),
    }
}

/// CPU time (user + system, every thread) this rank's process has used.
fn process_cpu_seconds(job: &Job) -> f64 {
    job.process().map_or(0.0, |(ep, _)| {
        let core = ep.stats().0;
        (core.cpu_user_us + core.cpu_system_us) as f64 / 1e6
    })
}

/// Under mwrun, adds to a throughput point's rows the CPU time both ranks'
/// processes spent on it (`cpu_s`), and per gigabyte moved (`cpu_s_per_gb`),
/// for memwire's ops and the raw baselines alike. Every rank calls it (it
/// gathers); the CPU counts the point's setup too, which long points make
/// negligible.
fn record_cpu(job: &Job, p: &Point, mine: f64, rows: &mut [Row]) {
    let Some((ep, _)) = job.process() else { return };
    if !matches!(p.bench, "bandwidth" | "bibw") {
        return;
    }
    let Ok(all) = ep.allgather_bytes(&mine.to_le_bytes()) else { return };
    let total: f64 = all.iter().filter_map(|b| Some(f64::from_le_bytes(b.as_slice().try_into().ok()?))).sum();
    let directions = if p.bench == "bibw" { 2.0 } else { 1.0 };
    let gigabytes = directions * (p.size * p.count) as f64 / 1e9;
    for row in rows {
        row.extra.insert("cpu_s".into(), serde_json::json!((total * 1000.0).round() / 1000.0));
        if gigabytes > 0.0 {
            row.extra.insert("cpu_s_per_gb".into(), serde_json::json!((total / gigabytes * 100.0).round() / 100.0));
        }
    }
}

/// Runs `step`; emits and returns its rows.
fn run_step(job: &Job, step: &Step) -> (Vec<Row>, Option<String>) {
    let what = step.describe();
    out::step(what.clone());
    let limit = Duration::from_secs(LIMIT_SECS.load(Ordering::Relaxed));
    let (rows, problem) = match step {
        Step::Point(p) if matches!(job, Job::Threads) => match measure_threads(p, limit) {
            Ok(rows) => (rows, None),
            Err(e) => (Vec::new(), Some(format!("{what}: {e}"))),
        },
        // Under mwrun every rank is in the point: a hang ends the run (watchdog).
        Step::Point(p) => {
            *CURRENT.lock().expect("watchdog lock") = Some((Instant::now(), what.clone()));
            let cpu_before = process_cpu_seconds(job);
            let result = measure(job, p);
            let cpu = process_cpu_seconds(job) - cpu_before;
            *CURRENT.lock().expect("watchdog lock") = None;
            match result {
                Ok(mut rows) => {
                    record_cpu(job, p, cpu, &mut rows);
                    (rows, None)
                }
                Err(e) => (Vec::new(), Some(format!("{what}: {e}"))),
            }
        }
        Step::Mpi(launch) if on_ranks(job, step) => mpi_across_hosts(job, launch, limit),
        Step::Mpi(launch) => mpi::run(launch, limit),
    };
    let net = job.net();
    let mut rows = rows;
    for row in &mut rows {
        mark_path(row, &net);
        out::emit(row);
    }
    if let Some(p) = &problem {
        out::note(&format!("mwbench: {p}"));
    }
    out::advance();
    (rows, problem)
}

/// Runs every step; prints the table. Returns the rows and the problems.
pub fn run(job: Job, steps: &[Step], step_limit: Duration) -> Result<(Vec<Row>, Vec<String>), String> {
    start_watchdog(step_limit);
    out::start_progress(steps.len() as u64);
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    let mut collect = |(r, p): (Vec<Row>, Option<String>)| {
        rows.extend(r);
        problems.extend(p);
    };
    match job {
        Job::Threads => {
            for step in steps {
                collect(run_step(&job, step));
            }
        }
        Job::Process(_) => {
            for step in steps.iter().filter(|s| on_ranks(&job, s)) {
                collect(run_step(&job, step));
            }
            let rank = job.rank();
            let rest: Vec<&Step> = steps.iter().filter(|s| !on_ranks(&job, s)).collect();
            job.finish()?;
            if rank == 0 {
                for step in rest {
                    collect(run_step(&Job::Threads, step));
                }
            }
        }
    }
    out::finish_progress();
    if !rows.is_empty() {
        crate::table::print(&rows);
    }
    Ok((rows, problems))
}
