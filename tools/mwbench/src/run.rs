//! Executes a plan: each step measured, its rows emitted as they come, a
//! step that hangs reported and left behind (threads) or ending the run
//! (under mwrun, status 3), and the table at the end.
//!
//! With threads the steps run in plan order (each baseline next to the
//! points it is compared with), except that the ping-pong points of one
//! path and size take turns (see [`TURNS`]). Under mwrun every rank runs the memwire
//! steps in order; then the endpoint is finalized, and rank 0 alone runs the
//! baselines, so they never compete with a waiting rank for the CPU nor keep
//! a peer waiting past its dead-peer timeout. Owns the order and the
//! failure policy; must not know how a point is measured.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::harness::Job;
use crate::plan::{Point, Step};
use crate::row::Row;
use crate::{coll, floor, mpi, nton, out, pingpong, raw, stream};

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
    let rows = match (p.bench, p.op) {
        ("pingpong", "udp_raw") => vec![raw::udp_pingpong(size, n)?],
        ("pingpong", "tcp_raw") => vec![raw::tcp_pingpong(size, n)],
        ("pingpong", "shm_floor") => vec![floor::pingpong_shm_floor(n)],
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
        ("overlap", _) => stream::overlap(job, size, n),
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
            let result = measure(job, p);
            *CURRENT.lock().expect("watchdog lock") = None;
            match result {
                Ok(rows) => (rows, None),
                Err(e) => (Vec::new(), Some(format!("{what}: {e}"))),
            }
        }
        Step::Mpi(launch) => mpi::run(launch, limit),
    };
    for row in &rows {
        out::emit(row);
    }
    if let Some(p) = &problem {
        out::note(&format!("mwbench: {p}"));
    }
    out::advance();
    (rows, problem)
}

/// Ping-pong points of one path and size (a baseline and the ops compared
/// with it) are measured in turns: each takes its samples in this many
/// blocks, one block of every point per turn. On this shared VM the load
/// changes within a run; measured one after the other, a baseline and an
/// op could see different loads and their ratio would cross a target on
/// noise alone (put_signal over UDP: 1.25x raw UDP in one `make bench`,
/// 1.15-1.19x in five runs right after). In turns, a change of load weighs
/// on both alike. A point's median is the median of its block medians, its
/// p99 the largest block p99, its sample count the sum.
const TURNS: usize = 5;

/// The (path, size) of a ping-pong point that is measured in turns.
fn turn_group(step: &Step) -> Option<(&'static str, usize)> {
    match step {
        Step::Point(p) if p.bench == "pingpong" && p.count >= TURNS => Some((p.transport, p.size)),
        _ => None,
    }
}

/// Measures `group` (ping-pong points of one path and size) in turns,
/// with threads as ranks; emits and returns each point's rows, in order.
fn run_in_turns(group: &[&Step]) -> Vec<(Vec<Row>, Option<String>)> {
    let limit = Duration::from_secs(LIMIT_SECS.load(Ordering::Relaxed));
    let mut blocks: Vec<Vec<Vec<Row>>> = vec![Vec::new(); group.len()];
    let mut problems: Vec<Option<String>> = vec![None; group.len()];
    for turn in 0..TURNS {
        for (i, step) in group.iter().enumerate() {
            let Step::Point(p) = step else { continue };
            if problems[i].is_some() {
                continue;
            }
            // The last turn takes the remainder, so the counts add up.
            let share = p.count / TURNS + if turn + 1 == TURNS { p.count % TURNS } else { 0 };
            let what = step.describe();
            out::step(format!("{what} (turn {} of {TURNS})", turn + 1));
            match measure_threads(&Point { count: share, ..p.clone() }, limit) {
                Ok(rows) => blocks[i].push(rows),
                Err(e) => problems[i] = Some(format!("{what}: {e}")),
            }
        }
    }
    let mut results = Vec::with_capacity(group.len());
    for (turns, problem) in blocks.into_iter().zip(problems) {
        let rows = if problem.is_some() { Vec::new() } else { merge_turns(turns) };
        for row in &rows {
            out::emit(row);
        }
        if let Some(p) = &problem {
            out::note(&format!("mwbench: {p}"));
        }
        out::advance();
        results.push((rows, problem));
    }
    results
}

/// One point's rows from its turns (each turn's rows in the same order).
fn merge_turns(turns: Vec<Vec<Row>>) -> Vec<Row> {
    let Some(first) = turns.first() else { return Vec::new() };
    (0..first.len())
        .map(|k| {
            let parts: Vec<&Row> = turns.iter().filter_map(|rows| rows.get(k)).collect();
            let mut row = parts[0].clone();
            row.median_us = Some(crate::row::median(parts.iter().filter_map(|r| r.median_us).collect()));
            row.p99_us = parts.iter().filter_map(|r| r.p99_us).reduce(f64::max);
            row.iters = parts.iter().map(|r| r.iters).sum();
            row
        })
        .collect()
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
            let mut i = 0;
            while i < steps.len() {
                let key = turn_group(&steps[i]);
                let len = steps[i..].iter().take_while(|s| key.is_some() && turn_group(s) == key).count();
                if len >= 2 {
                    let group: Vec<&Step> = steps[i..i + len].iter().collect();
                    run_in_turns(&group).into_iter().for_each(&mut collect);
                    i += len;
                } else {
                    collect(run_step(&job, &steps[i]));
                    i += 1;
                }
            }
        }
        Job::Process(_) => {
            for step in steps.iter().filter(|s| s.uses_ranks()) {
                collect(run_step(&job, step));
            }
            let rank = job.rank();
            job.finish()?;
            if rank == 0 {
                for step in steps.iter().filter(|s| !s.uses_ranks()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn latency(op: &str, median: f64, p99: f64, iters: usize) -> Row {
        Row { iters, median_us: Some(median), p99_us: Some(p99), ..Row::new("pingpong", op, "udp", 8) }
    }

    #[test]
    fn turns_merge_into_the_median_of_medians_and_the_worst_p99() {
        let turns: Vec<Vec<Row>> = [(3.0, 5.0), (1.0, 9.0), (2.0, 4.0), (5.0, 6.0), (4.0, 7.0)]
            .iter()
            .map(|&(m, p)| vec![latency("put_signal", m, p, 100), latency("put_signal_auth", m * 2.0, p, 100)])
            .collect();
        let merged = merge_turns(turns);
        assert_eq!(merged.len(), 2, "one row per row of a turn, in order");
        assert_eq!((merged[0].op.as_str(), merged[0].median_us, merged[0].p99_us), ("put_signal", Some(3.0), Some(9.0)));
        assert_eq!(merged[0].iters, 500);
        assert_eq!((merged[1].op.as_str(), merged[1].median_us), ("put_signal_auth", Some(6.0)));
    }

    #[test]
    fn consecutive_pingpong_points_of_one_path_and_size_form_a_group() {
        let point = |bench: &'static str, op: &'static str, size: usize| {
            Step::Point(Point {
                bench,
                op,
                transport: "udp",
                size,
                count: 100,
                ranks: 2,
                variant: None,
                loss: None,
                window: 8,
            })
        };
        assert_eq!(turn_group(&point("pingpong", "udp_raw", 8)), turn_group(&point("pingpong", "put_signal", 8)));
        assert_ne!(turn_group(&point("pingpong", "put_signal", 8)), turn_group(&point("pingpong", "put_signal", 64)));
        assert_eq!(turn_group(&point("bandwidth", "put", 8)), None, "only latency points take turns");
    }
}
