//! `mwbench report`: turns the JSON lines of one or more runs
//! (`bench/results/*.jsonl`, one file per mwbench invocation) into the
//! generated section of docs/performance.md (between `<!-- bench:begin -->` and
//! `<!-- bench:end -->`) and PNG plots; `mwbench machine` records the
//! machine line a run is read with.
//!
//! Ratios are only ever taken between rows of the same file, i.e. measured
//! in the same run. Owns the section's text and the choice of plots; must
//! not measure.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::plot::{self, size_label, Series};
use crate::row::Row;
use crate::table::{metric, ratio_text, reference, reference_name, same_point};

pub const BEGIN: &str = "<!-- bench:begin -->";
pub const END: &str = "<!-- bench:end -->";

/// One run: the file's stem and its rows.
#[derive(Debug, Clone)]
pub struct Run {
    pub name: String,
    pub rows: Vec<Row>,
}

/// What `mwbench machine` records: the machine line of DESIGN's reports.
pub fn machine_json() -> serde_json::Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU".to_string(), |s| s.trim().to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = format!("{} {}", read("/proc/sys/kernel/ostype").trim(), read("/proc/sys/kernel/osrelease").trim());
    let load: Vec<String> = read("/proc/loadavg").split_whitespace().take(3).map(String::from).collect();
    serde_json::json!({
        "cpu": cpu, "cores": cores, "kernel": kernel, "loadavg": load.join(" "), "utc": utc_now(),
    })
}

/// The current time as `YYYY-MM-DD HH:MM UTC`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

/// Reads every `*.jsonl` of `dir`, in name order. A line that is not a
/// point of the contract is an error naming the file and line.
pub fn load_runs(dir: &Path) -> Result<Vec<Run>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut runs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut rows = Vec::new();
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let v: serde_json::Value =
                serde_json::from_str(line).map_err(|e| format!("{}:{}: not JSON: {e}", file.display(), n + 1))?;
            rows.push(Row::from_json(&v).map_err(|e| format!("{}:{}: {e}", file.display(), n + 1))?);
        }
        let name = file.file_stem().map_or(String::new(), |s| s.to_string_lossy().into_owned());
        runs.push(Run { name, rows: merge_repeated_jobs(rows) });
    }
    if runs.iter().all(|r| r.rows.is_empty()) {
        return Err(format!("no points in {}/*.jsonl", dir.display()));
    }
    // In the order the runs were made, when commands.txt says it.
    let commands = std::fs::read_to_string(dir.join("commands.txt")).unwrap_or_default();
    let position = |name: &str| {
        let target = format!("/{name}.jsonl");
        commands.lines().position(|l| l.trim_end().ends_with(&target)).unwrap_or(usize::MAX)
    };
    runs.sort_by_key(|r| position(&r.name));
    Ok(runs)
}

/// Whether two rows measure the same thing (the same point, op and variant).
fn same_measurement(a: &Row, b: &Row) -> bool {
    same_point(a, b) && a.op == b.op && a.algo == b.algo && a.order == b.order && a.via == b.via && a.launch == b.launch
}

/// Rows of one file that measure the same thing in several jobs (a group
/// `make bench` runs as alternating jobs of memwire and of each MPI, see
/// `scripts/bench.sh`) become one row, in the place of the first: each
/// value the median of the jobs' values, `iters` their sum, and in `extra`
/// `jobs` (how many) and `job_values` (each job's median µs, or its MB/s
/// or operations per second when it has no latency). Rows measured once
/// stay as they are.
pub fn merge_repeated_jobs(rows: Vec<Row>) -> Vec<Row> {
    let mut groups: Vec<Vec<Row>> = Vec::new();
    for row in rows {
        match groups.iter_mut().find(|g| same_measurement(&g[0], &row)) {
            Some(group) => group.push(row),
            None => groups.push(vec![row]),
        }
    }
    groups
        .into_iter()
        .map(|mut group| {
            if group.len() == 1 {
                return group.pop().expect("one row");
            }
            let of = |f: fn(&Row) -> Option<f64>| -> Option<f64> {
                let values: Vec<f64> = group.iter().filter_map(f).collect();
                (!values.is_empty()).then(|| crate::row::median(values))
            };
            let job_values: Vec<f64> = group.iter().filter_map(|r| r.median_us.or(r.mbps).or(r.ops_per_s)).collect();
            let mut merged = group[0].clone();
            merged.median_us = of(|r| r.median_us);
            merged.p99_us = of(|r| r.p99_us);
            merged.mbps = of(|r| r.mbps);
            merged.ops_per_s = of(|r| r.ops_per_s);
            merged.iters = group.iter().map(|r| r.iters).sum();
            merged.extra.insert("jobs".into(), serde_json::json!(group.len()));
            merged.extra.insert("job_values".into(), serde_json::json!(job_values));
            merged
        })
        .collect()
}

/// How many jobs each cell of `rows` is the median of, when more than one.
fn jobs_of(rows: &[&Row]) -> Option<u64> {
    rows.iter().filter_map(|r| r.extra.get("jobs").and_then(serde_json::Value::as_u64)).max()
}

fn fmt_value(row: &Row) -> String {
    match metric(row) {
        Some((v, true)) if row.ops_per_s.is_some() && row.mbps.is_none() => format!("{:.0}k", v / 1000.0),
        Some((v, true)) => format!("{v:.0}"),
        Some((v, false)) if v >= 100.0 => format!("{v:.0}"),
        Some((v, false)) => format!("{v:.2}"),
        None => "-".into(),
    }
}

/// A cell: the value, and its ratio to the row's reference in the same run.
fn cell(row: &Row, run: &[Row]) -> String {
    match reference(row, run).and_then(|b| ratio_text(row, b).map(|t| (t, reference_name(b)))) {
        Some((t, name)) => format!("{} <sub>{} {}</sub>", fmt_value(row), t.replace('x', "×"), name),
        None => fmt_value(row),
    }
}

/// How a row is named in a table's first column.
fn op_label(row: &Row) -> String {
    let mut label = row.op.clone();
    if let Some(v) = row.order.as_ref().or(row.algo.as_ref()).filter(|v| **v != row.op) {
        label = format!("{label} {v}");
    }
    if let Some(via) = row.via.as_ref().filter(|v| **v != row.transport) {
        label = format!("{label} ({via})");
    }
    if row.is_baseline() {
        label = format!("*{label}*");
    }
    label
}

/// A markdown table: one line per `line_of(row)`, one column per
/// `column_of(row)` (sorted by its number), cells from `cell`.
fn pivot(
    rows: &[&Row],
    run: &[Row],
    first: &str,
    line_of: impl Fn(&Row) -> String,
    column_of: impl Fn(&Row) -> (f64, String),
) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut columns: Vec<(f64, String)> = Vec::new();
    for r in rows {
        let l = line_of(r);
        if !lines.contains(&l) {
            lines.push(l);
        }
        let c = column_of(r);
        if !columns.iter().any(|x| x.1 == c.1) {
            columns.push(c);
        }
    }
    columns.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = format!("| {first} |");
    for c in &columns {
        let _ = write!(out, " {} |", c.1);
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(columns.len()));
    out.push('\n');
    for l in &lines {
        let _ = write!(out, "| {l} |");
        for c in &columns {
            let found = rows.iter().find(|r| &line_of(r) == l && column_of(r).1 == c.1);
            let _ = write!(out, " {} |", found.map_or(String::new(), |r| cell(r, run)));
        }
        out.push('\n');
    }
    out
}

fn by_size(r: &Row) -> (f64, String) {
    (r.size as f64, size_label(r.size as f64))
}

/// The path of `rows` (one transport) as a heading says it: loopback or
/// between hosts with the datagram size, and the network's own loss.
fn path_name(transport: &str, rows: &[&Row]) -> String {
    if transport == "shm" {
        return "shared memory".into();
    }
    let Some(hosts) = rows.iter().find(|r| r.path.as_deref() == Some("hosts")) else {
        return "UDP path (loopback sockets; MPI and tcp_raw over TCP)".into();
    };
    let datagram = rows.iter().find_map(|r| r.datagram).or(hosts.datagram);
    let mut name = match datagram {
        Some(d) => format!("UDP between hosts ({d}-byte datagrams; MPI and tcp_raw over TCP)"),
        None => "UDP between hosts (MPI and tcp_raw over TCP)".into(),
    };
    let network_loss = rows.iter().find(|r| r.extra.get("loss").and_then(|v| v.as_str()) == Some("network"));
    if let Some(l) = network_loss.and_then(|r| r.loss_pct) {
        let _ = write!(name, ", {l}% of all packets arriving at every host dropped");
    }
    name
}

/// Titles and units of the point-to-point benches.
const PT2PT_TITLES: &[(&str, &str)] = &[
    ("pingpong", "Ping-pong latency (half round trip, median µs)"),
    ("bandwidth", "Bandwidth (MB/s, one direction, window of outstanding operations)"),
    ("bibw", "Bidirectional bandwidth (MB/s, both directions summed)"),
    ("rate", "Message rate (operations per second)"),
    ("overhead", "Initiator overhead (µs until the nonblocking call returns, median)"),
];

fn transports_of<'a>(rows: impl Iterator<Item = &'a Row>) -> Vec<String> {
    let mut t: Vec<String> = rows.map(|r| r.transport.clone()).collect();
    t.sort();
    t.dedup();
    t.reverse(); // udp first
    t
}

fn launch_note(rows: &[&Row]) -> String {
    let mut note = launch_of(rows).to_owned();
    if let Some(jobs) = jobs_of(rows) {
        let _ = write!(note, "; each cell the median of {jobs} runs");
    }
    note
}

/// How the ranks of `rows` ran, as a heading or target label says it.
fn launch_of(rows: &[&Row]) -> &'static str {
    if rows.iter().any(|r| r.launch.as_deref() == Some("processes")) {
        " — ranks as processes under mwrun"
    } else {
        ""
    }
}

fn pt2pt_sections(run: &Run, out: &mut String) {
    for &(bench, title) in PT2PT_TITLES {
        let rows: Vec<&Row> = run.rows.iter().filter(|r| r.bench == bench).collect();
        for t in transports_of(rows.iter().copied()) {
            let these: Vec<&Row> = rows.iter().copied().filter(|r| r.transport == t).collect();
            let _ =
                writeln!(out, "\n#### {title}: {}{} (`{}`)\n", path_name(&t, &these), launch_note(&these), run.name);
            out.push_str(&pivot(&these, &run.rows, "op", op_label, by_size));
        }
    }
}

fn group_sections(run: &Run, out: &mut String) {
    let nton: Vec<&Row> = run.rows.iter().filter(|r| r.bench == "nton").collect();
    for t in transports_of(nton.iter().copied()) {
        let mut ranks: Vec<u32> = nton.iter().filter_map(|r| r.ranks).collect();
        ranks.sort_unstable();
        ranks.dedup();
        for n in ranks {
            let these: Vec<&Row> = nton.iter().copied().filter(|r| r.transport == t && r.ranks == Some(n)).collect();
            let _ = writeln!(
                out,
                "\n#### N-to-N, {n} ranks, Cenju-4's send orders (MB/s moved, slowest rank; MPI: MPI_Alltoall): {}{} (`{}`)\n",
                path_name(&t, &these),
                launch_note(&these),
                run.name
            );
            out.push_str(&pivot(&these, &run.rows, "order", op_label, by_size));
        }
    }
    let coll: Vec<&Row> = run.rows.iter().filter(|r| crate::coll::BENCHES.contains(&r.bench.as_str())).collect();
    for t in transports_of(coll.iter().copied()) {
        let mut ranks: Vec<u32> = coll.iter().filter_map(|r| r.ranks).collect();
        ranks.sort_unstable();
        ranks.dedup();
        for n in ranks {
            let these: Vec<&Row> = coll.iter().copied().filter(|r| r.transport == t && r.ranks == Some(n)).collect();
            let _ = writeln!(
                out,
                "\n#### Collectives, {n} ranks (median µs of the slowest rank per call): {}{} (`{}`)\n",
                path_name(&t, &these),
                launch_note(&these),
                run.name
            );
            let line = |r: &Row| {
                if r.bench == "barrier" {
                    "barrier".to_string()
                } else {
                    format!("{} {}", r.bench, size_label(r.size as f64))
                }
            };
            let order = |r: &Row| {
                let rank = ["memwire", "mpich", "openmpi"].iter().position(|o| *o == r.op).unwrap_or(3) as f64;
                (rank, op_label(r))
            };
            out.push_str(&pivot(&these, &run.rows, "point", line, order));
        }
    }
    let loss: Vec<&Row> = run.rows.iter().filter(|r| r.bench == "loss").collect();
    if !loss.is_empty() {
        let _ = writeln!(
            out,
            "\n#### Bandwidth under injected loss (MB/s; % of the same op without loss), UDP (`{}`)\n",
            run.name
        );
        let line = |r: &Row| format!("{} {}", r.op, size_label(r.size as f64));
        let col = |r: &Row| {
            let l = r.loss_pct.unwrap_or(0.0);
            (l, format!("{l}% loss"))
        };
        out.push_str(&pivot(&loss, &run.rows, "op", line, col));
    }
    for r in run.rows.iter().filter(|r| r.bench == "overlap") {
        let get = |k: &str| r.extra.get(k).and_then(serde_json::Value::as_f64).unwrap_or(f64::NAN);
        let who = match r.op.as_str() {
            "send_recv" => "a receive (irecv)",
            "isend" => "a send (isend)",
            _ => "a put (put_nb)",
        };
        let progress = r.extra.get("progress").and_then(serde_json::Value::as_str).unwrap_or("thread");
        let _ = writeln!(
            out,
            "\nOverlap of {who} of {} with computation{} (progress `{progress}`): transfer alone {:.0} µs, \
             computation alone {:.0} µs, both {:.0} µs: {:.0}% overlapped (`{}`).",
            size_label(r.size as f64),
            if r.path.as_deref() == Some("hosts") { " between hosts" } else { "" },
            get("comm_us"),
            get("comp_us"),
            get("both_us"),
            get("overlap_pct"),
            run.name
        );
    }
    cpu_section(run, out);
}

/// CPU seconds per gigabyte moved, both ranks' processes, for the
/// throughput points that recorded it (runs under mwrun).
fn cpu_section(run: &Run, out: &mut String) {
    let rows: Vec<&Row> = run.rows.iter().filter(|r| r.extra.contains_key("cpu_s_per_gb")).collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n#### CPU seconds per GB moved (user + system, both ranks' processes; `{}`)\n\n\
         | bench | op | size | MB/s | CPU s/GB |\n|---|---|---|---|---|",
        run.name
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.2} |",
            r.bench,
            op_label(r),
            size_label(r.size as f64),
            r.mbps.unwrap_or(f64::NAN),
            r.extra["cpu_s_per_gb"].as_f64().unwrap_or(f64::NAN)
        );
    }
}

/// A point of a target: bench, op, path, size, and the variant if any.
type Sel = (&'static str, &'static str, &'static str, usize, Option<&'static str>);

fn find(run: &[Row], (bench, op, transport, size, variant): Sel) -> Option<&Row> {
    // The targets were set on one host: rows between hosts are not read against them.
    run.iter().find(|r| {
        r.path.as_deref() != Some("hosts")
            && r.bench == bench
            && r.op == op
            && r.transport == transport
            && r.size == size
            && variant.is_none_or(|v| r.algo.as_deref() == Some(v) || r.order.as_deref() == Some(v))
    })
}

/// The performance targets of the other issues, as (what, row, base, limit):
/// times must stay at or under `limit`× the base, throughputs at or over it.
fn targets() -> Vec<(&'static str, Sel, Sel, f64)> {
    const MIB: usize = 1 << 20;
    vec![
        (
            "put_signal ping-pong 8 B ≤ 1.25× udp_raw",
            ("pingpong", "put_signal", "udp", 8, None),
            ("pingpong", "udp_raw", "udp", 8, None),
            1.25,
        ),
        (
            "fetch_add 8 B ≤ 1.3× udp_raw",
            ("pingpong", "fetch_add", "udp", 8, None),
            ("pingpong", "udp_raw", "udp", 8, None),
            1.3,
        ),
        (
            "put bandwidth 1 MiB ≥ 80% of udp_raw blast",
            ("bandwidth", "put", "udp", MIB, None),
            ("bandwidth", "udp_raw", "udp", MIB, None),
            0.8,
        ),
        (
            "shm put_signal 8 B ≤ 2× shm_floor",
            ("pingpong", "put_signal", "shm", 8, None),
            ("pingpong", "shm_floor", "shm", 8, None),
            2.0,
        ),
        (
            "shm put_signal 8 B ≤ 0.5× MPICH",
            ("pingpong", "put_signal", "shm", 8, None),
            ("pingpong", "mpich", "shm", 8, None),
            0.5,
        ),
        (
            "shm put_signal 8 B ≤ 0.5× Open MPI",
            ("pingpong", "put_signal", "shm", 8, None),
            ("pingpong", "openmpi", "shm", 8, None),
            0.5,
        ),
        (
            "shm put bandwidth 1 MiB ≥ 80% of memcpy",
            ("bandwidth", "put", "shm", MIB, None),
            ("bandwidth", "memcpy", "shm", MIB, None),
            0.8,
        ),
        (
            "shm get bandwidth 1 MiB ≥ 80% of memcpy",
            ("bandwidth", "get", "shm", MIB, None),
            ("bandwidth", "memcpy", "shm", MIB, None),
            0.8,
        ),
        (
            "shm put bandwidth 16 MiB ≥ 80% of memcpy",
            ("bandwidth", "put", "shm", 16 * MIB, None),
            ("bandwidth", "memcpy", "shm", 16 * MIB, None),
            0.8,
        ),
        (
            "shm get bandwidth 16 MiB ≥ 80% of memcpy",
            ("bandwidth", "get", "shm", 16 * MIB, None),
            ("bandwidth", "memcpy", "shm", 16 * MIB, None),
            0.8,
        ),
        (
            "send_recv 8 B ≤ 1.15× put_signal (udp)",
            ("pingpong", "send_recv", "udp", 8, None),
            ("pingpong", "put_signal", "udp", 8, None),
            1.15,
        ),
        (
            "send_recv 8 B ≤ 1.15× put_signal (shm)",
            ("pingpong", "send_recv", "shm", 8, None),
            ("pingpong", "put_signal", "shm", 8, None),
            1.15,
        ),
        (
            "send_recv bandwidth 16 MiB ≥ 90% of get (udp)",
            ("bandwidth", "send_recv", "udp", 16 * MIB, None),
            ("bandwidth", "get", "udp", 16 * MIB, None),
            0.9,
        ),
        (
            "send_recv bandwidth 16 MiB ≥ 90% of get (shm)",
            ("bandwidth", "send_recv", "shm", 16 * MIB, None),
            ("bandwidth", "get", "shm", 16 * MIB, None),
            0.9,
        ),
        (
            "am 8 B ≤ 1.2× put_signal (udp)",
            ("pingpong", "am", "udp", 8, None),
            ("pingpong", "put_signal", "udp", 8, None),
            1.2,
        ),
        (
            "am 8 B ≤ 1.2× put_signal (shm)",
            ("pingpong", "am", "shm", 8, None),
            ("pingpong", "put_signal", "shm", 8, None),
            1.2,
        ),
        (
            "put_signal with MAC ≤ 1.1× without",
            ("pingpong", "put_signal_auth", "udp", 8, None),
            ("pingpong", "put_signal", "udp", 8, None),
            1.1,
        ),
    ]
}

fn target_sections(runs: &[Run], out: &mut String) {
    let mut table = String::new();
    target_lines(runs, &mut table);
    if table.is_empty() {
        return;
    }
    out.push_str("\n### Targets (from the issues), read off the runs above\n\n");
    out.push_str("| target | run | measured | baseline | ratio | met |\n|---|---|---|---|---|---|\n");
    out.push_str(&table);
}

fn target_lines(runs: &[Run], out: &mut String) {
    for (what, sel, base, limit) in targets() {
        for run in runs {
            let (Some(row), Some(b)) = (find(&run.rows, sel), find(&run.rows, base)) else { continue };
            let (Some((v, higher)), Some((bv, _))) = (metric(row), metric(b)) else { continue };
            let ratio = v / bv;
            let met = if higher { ratio >= limit } else { ratio <= limit };
            // Rounded toward "not met", so a target missed by a hair does not
            // read as met.
            let shown = if higher {
                format!("{:.1}%", (1000.0 * ratio).floor() / 10.0)
            } else {
                format!("{:.3}×", (1000.0 * ratio).ceil() / 1000.0)
            };
            let _ = writeln!(
                out,
                "| {what}{} | `{}` | {} | {} | {shown} | {} |",
                launch_of(&[row]),
                run.name,
                fmt_value(row),
                fmt_value(b),
                if met { "yes" } else { "**no**" }
            );
        }
    }
    // Collectives: no slower than either MPI at 8 B and 64 KiB on 2 and 4 ranks.
    for run in runs {
        for t in ["udp", "shm"] {
            let mine: Vec<&Row> = run
                .rows
                .iter()
                .filter(|r| {
                    crate::coll::BENCHES.contains(&r.bench.as_str())
                        && r.op == "memwire"
                        && r.algo.as_deref() == Some("auto")
                        && r.transport == t
                        && r.path.as_deref() != Some("hosts")
                })
                .collect();
            let mut compared = 0;
            let mut met = 0;
            let mut worst: Option<(f64, String)> = None;
            for r in &mine {
                for b in run.rows.iter().filter(|b| (b.op == "mpich" || b.op == "openmpi") && same_point(b, r)) {
                    let (Some(v), Some(bv)) = (r.median_us, b.median_us) else { continue };
                    compared += 1;
                    if v <= bv {
                        met += 1;
                    }
                    let what =
                        format!("{} {} {}r vs {}", r.bench, size_label(r.size as f64), r.ranks.unwrap_or(0), b.op);
                    if worst.as_ref().is_none_or(|w| v / bv > w.0) {
                        worst = Some((v / bv, what));
                    }
                }
            }
            if let Some((ratio, what)) = worst {
                let _ = writeln!(
                    out,
                    "| collectives (auto) no slower than MPICH and Open MPI, {t} path | `{}` | {met} of {compared} comparisons | | worst {ratio:.2}× ({what}) | {} |",
                    run.name,
                    if met == compared { "yes" } else { "**no**" }
                );
            }
        }
    }
}

/// Plots of the point-to-point benches of `run` into `dir`; returns
/// (alt text, file) of each PNG written.
fn plots(run: &Run, dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let mut written = Vec::new();
    for (bench, y_desc, what) in
        [("pingpong", "half round trip, µs (median)", "latency"), ("bandwidth", "MB/s", "bandwidth")]
    {
        for t in transports_of(run.rows.iter().filter(|r| r.bench == bench)) {
            let rows: Vec<&Row> = run.rows.iter().filter(|r| r.bench == bench && r.transport == t).collect();
            let mut labels: Vec<String> = Vec::new();
            for r in &rows {
                let l = op_label(r).replace('*', "");
                if !labels.contains(&l) {
                    labels.push(l);
                }
            }
            let series: Vec<Series> = labels
                .iter()
                .map(|l| {
                    let mut pts: Vec<(f64, f64)> = rows
                        .iter()
                        .filter(|r| &op_label(r).replace('*', "") == l)
                        .filter_map(|r| metric(r).map(|m| (r.size as f64, m.0)))
                        .collect();
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let baseline = rows.iter().any(|r| &op_label(r).replace('*', "") == l && r.is_baseline());
                    Series { label: l.clone(), points: pts, baseline }
                })
                .collect();
            let file = dir.join(format!("{what}_{t}_{}.png", run.name));
            let title = format!(
                "{what}, {} ({}, {})",
                if t == "shm" { "shared memory" } else { "UDP path" },
                run.name,
                "same run"
            );
            plot::draw(&file, &title, y_desc, &series)?;
            written.push((format!("{what} {t} {}", run.name), file));
        }
    }
    Ok(written)
}

/// `path` relative to `base` when it lies under it.
fn relative(path: &Path, base: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (p, b) = (abs(path), abs(base));
    p.strip_prefix(&b).map_or_else(|_| p.display().to_string(), |r| r.display().to_string())
}

fn machine_line(dir: &Path) -> String {
    let read = |name: &str| -> Option<serde_json::Value> {
        serde_json::from_str(&std::fs::read_to_string(dir.join(name)).ok()?).ok()
    };
    let Some(start) = read("machine-start.json") else {
        return "Machine: not recorded (no machine-start.json beside the results).".into();
    };
    let s = |v: &serde_json::Value, k: &str| {
        v.get(k).map_or(String::new(), |x| x.as_str().map_or(x.to_string(), String::from))
    };
    let mut line = format!(
        "Machine: {}, {} cores, {}; load average {} at the start ({})",
        s(&start, "cpu"),
        s(&start, "cores"),
        s(&start, "kernel"),
        s(&start, "loadavg"),
        s(&start, "utc")
    );
    if let Some(end) = read("machine-end.json") {
        let _ = write!(line, ", {} at the end ({})", s(&end, "loadavg"), s(&end, "utc"));
    }
    line.push('.');
    line
}

/// What went wrong during the runs, from their logs (`NAME.log`, the
/// `mwbench: ` lines): steps that hung, baselines that failed.
fn problems(runs: &[Run], results: &Path, out: &mut String) {
    let mut lines = Vec::new();
    for run in runs {
        let log = std::fs::read_to_string(results.join(format!("{}.log", run.name))).unwrap_or_default();
        for line in log.lines().filter_map(|l| l.strip_prefix("mwbench: ")) {
            if !line.contains("step(s) had problems") {
                lines.push(format!("- `{}`: {line}", run.name));
            }
        }
    }
    if !lines.is_empty() {
        let _ = write!(
            out,
            "\nDuring the runs (from `{}/*.log`; their points are missing or partial):\n\n",
            results.display()
        );
        out.push_str(&lines.join("\n"));
        out.push('\n');
    }
}

/// The whole generated section (without the markers).
pub fn section(
    runs: &[Run],
    results: &Path,
    plot_dir: &Path,
    readme_dir: &Path,
    command: &str,
) -> Result<String, String> {
    let mut out = String::new();
    let _ = write!(out, "\n<!-- generated by `mwbench report` from {}; do not edit by hand -->\n\n", results.display());
    out.push_str(&machine_line(results));
    out.push('\n');
    if let Ok(commands) = std::fs::read_to_string(results.join("commands.txt")) {
        // Every fence names its language: Markdown pages may be compiled
        // as doctests (crates/memwire), where a bare fence is Rust.
        let _ = write!(out, "\nCommand: `{command}`, which ran:\n\n```sh\n");
        out.push_str(commands.trim_end());
        out.push_str("\n```\n");
    }
    out.push_str(
        "\nEach cell is a median, with its ratio to the same-run reference of its row in small type \
         (times: × as long; throughputs: % of). Baselines in *italics*. `udp` is the loopback-socket \
         path: memwire over UDP, raw UDP, and raw TCP and MPI over TCP (`(tcp)`); `shm` is shared \
         memory, where MPI uses its own shared-memory transport. Unless a title says otherwise, \
         memwire's ranks are threads of one process, each with its own endpoint. The udp_raw blast \
         counts only the bytes that arrived (its JSON lines give `received_pct`).\n",
    );
    if runs.iter().any(|r| r.rows.iter().any(|row| row.path.as_deref() == Some("hosts"))) {
        out.push_str(
            "\nBetween hosts (titles say so) memwire's ranks are processes on different hosts under mwrun, \
             and every baseline runs between the same hosts: udp_raw (one datagram per send, of the \
             path's datagram size), udp_gso (UDP GSO sends of up to 64 datagrams, GRO receives) and \
             tcp_raw between ranks 0 and 1, each side in its rank's process; MPICH and Open MPI \
             launched across the job's hosts over TCP. Rows of different paths are never compared. \
             The blasts' rates count from the first receive call to the last.\n",
        );
    }
    problems(runs, results, &mut out);
    target_sections(runs, &mut out);
    std::fs::create_dir_all(plot_dir).map_err(|e| format!("{}: {e}", plot_dir.display()))?;
    for run in runs {
        let images = plots(run, plot_dir)?;
        if !images.is_empty() {
            out.push('\n');
            for (alt, file) in &images {
                let _ = writeln!(out, "![{alt}]({})", relative(file, readme_dir));
            }
        }
        pt2pt_sections(run, &mut out);
        group_sections(run, &mut out);
    }
    out.push('\n');
    Ok(out)
}

/// Replaces the text between the markers of `readme` with `body`.
pub fn splice(readme: &str, body: &str) -> Result<String, String> {
    let begin = readme.find(BEGIN).ok_or(format!("the page has no {BEGIN} marker"))?;
    let end = readme.find(END).ok_or(format!("the page has no {END} marker"))?;
    if end < begin {
        return Err(format!("{END} comes before {BEGIN} in the page"));
    }
    Ok(format!("{}{BEGIN}{body}{}", &readme[..begin], &readme[end..]))
}

/// `mwbench report`: reads `results`, writes plots into `plot_dir` and the
/// section into `readme`.
pub fn report(results: &Path, readme: &Path, plot_dir: &Path, command: &str) -> Result<(), String> {
    let runs = load_runs(results)?;
    let readme_dir = readme.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let body = section(&runs, results, plot_dir, readme_dir, command)?;
    let text = std::fs::read_to_string(readme).map_err(|e| format!("{}: {e}", readme.display()))?;
    let spliced = splice(&text, &body)?;
    std::fs::write(readme, spliced).map_err(|e| format!("{}: {e}", readme.display()))?;
    eprintln!(
        "mwbench report: {} runs, {} points -> {} and {}",
        runs.len(),
        runs.iter().map(|r| r.rows.len()).sum::<usize>(),
        readme.display(),
        plot_dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_only_between_the_markers() {
        let readme = format!("# t\nbefore\n{BEGIN}\nold\n{END}\nafter\n");
        let out = splice(&readme, "\nnew\n").unwrap();
        assert_eq!(out, format!("# t\nbefore\n{BEGIN}\nnew\n{END}\nafter\n"));
        assert!(splice("no markers", "x").is_err());
        assert!(splice(&format!("{END} {BEGIN}"), "x").is_err());
    }

    #[test]
    fn repeated_jobs_merge_into_their_median_and_single_rows_stay() {
        let coll = |op: &str, size: usize, median: f64| Row {
            ranks: Some(4),
            median_us: Some(median),
            p99_us: Some(median * 2.0),
            iters: 300,
            algo: (op == "memwire").then(|| "auto".to_string()),
            ..Row::new("allgather", op, "shm", size)
        };
        let rows = vec![
            coll("memwire", 8, 5.0),
            coll("memwire", 65536, 40.0),
            coll("openmpi", 8, 4.0),
            coll("memwire", 8, 3.0),
            coll("openmpi", 8, 9.0),
            coll("memwire", 8, 4.0),
            coll("openmpi", 8, 8.0),
            Row { ranks: Some(2), ..coll("memwire", 8, 1.0) },
        ];
        let merged = merge_repeated_jobs(rows);
        let summary: Vec<(&str, usize, Option<u32>, f64, usize)> =
            merged.iter().map(|r| (r.op.as_str(), r.size, r.ranks, r.median_us.unwrap(), r.iters)).collect();
        assert_eq!(
            summary,
            vec![
                ("memwire", 8, Some(4), 4.0, 900),
                ("memwire", 65536, Some(4), 40.0, 300),
                ("openmpi", 8, Some(4), 8.0, 900),
                ("memwire", 8, Some(2), 1.0, 300),
            ]
        );
        assert_eq!(merged[0].p99_us, Some(8.0));
        assert_eq!(merged[0].extra["jobs"], serde_json::json!(3));
        assert_eq!(merged[0].extra["job_values"], serde_json::json!([5.0, 3.0, 4.0]));
        assert!(merged[1].extra.get("jobs").is_none(), "a row measured once is not marked");
        let refs: Vec<&Row> = merged.iter().collect();
        assert_eq!(launch_note(&refs), "; each cell the median of 3 runs");
        assert_eq!(launch_note(&refs[1..2]), "");
        let as_processes: Vec<Row> =
            merged.iter().map(|r| Row { launch: Some("processes".into()), ..r.clone() }).collect();
        let refs: Vec<&Row> = as_processes.iter().collect();
        assert_eq!(launch_note(&refs), " — ranks as processes under mwrun; each cell the median of 3 runs");
        assert_eq!(launch_of(&refs), " — ranks as processes under mwrun", "target labels leave the runs out");
    }

    #[test]
    fn utc_dates_are_civil() {
        let now = utc_now();
        assert_eq!(now.len(), "2026-11-23 18:30 UTC".len(), "{now}");
        assert!(now.starts_with("20"), "{now}");
    }
}
