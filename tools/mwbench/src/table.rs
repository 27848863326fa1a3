//! What each point is compared with, and the readable table on stderr.
//!
//! Every row has one explicit reference, chosen by a fixed rule, and its
//! ratio to it is printed next to it:
//!
//! | bench                          | udp path    | shm path                                   |
//! |--------------------------------|-------------|--------------------------------------------|
//! | pingpong                       | `udp_raw`   | `shm_floor` (sizes ≤ 64 B)                 |
//! | bandwidth, bibw, overhead      | `udp_raw`   | `memcpy`                                   |
//! | rate                           | `udp_raw`   | the faster MPI                             |
//! | nton, collectives              | the faster MPI of the same path and job size |  |
//! | loss                           | the same op at 0% loss                      |  |
//! | shmem                          | `oshmem`, the same routine (`algo`)          |  |
//!
//! Where the rule's baseline is missing the faster MPI of the group is used.
//! Times compare as `1.51x` (the row takes 1.51 times as long), throughputs
//! as `85%` (of the reference). After the table, every memwire row is set
//! against every baseline of its group. Owns the choice and the text; must
//! not measure.

use crate::row::Row;

/// The number a row is judged by: `(value, higher_is_better)`.
pub fn metric(row: &Row) -> Option<(f64, bool)> {
    if let Some(v) = row.mbps {
        Some((v, true))
    } else if let Some(v) = row.ops_per_s {
        Some((v, true))
    } else {
        row.median_us.map(|v| (v, false))
    }
}

/// Whether two rows are the same point apart from the op (and the same
/// path: a row between hosts is never set against one on loopback).
pub fn same_point(a: &Row, b: &Row) -> bool {
    a.bench == b.bench
        && a.transport == b.transport
        && a.size == b.size
        && a.ranks == b.ranks
        && a.loss_pct == b.loss_pct
        && a.path == b.path
}

fn is_mpi(op: &str) -> bool {
    op == "mpich" || op == "openmpi"
}

/// The faster MPI row of `row`'s point.
fn fastest_mpi<'a>(row: &Row, rows: &'a [Row]) -> Option<&'a Row> {
    let better = |a: &&Row, b: &&Row| {
        let (va, hi) = metric(a).unwrap_or((f64::NAN, false));
        let vb = metric(b).map_or(f64::NAN, |m| m.0);
        let ord = va.total_cmp(&vb);
        if hi {
            ord
        } else {
            ord.reverse()
        }
    };
    rows.iter().filter(|r| is_mpi(&r.op) && same_point(r, row) && metric(r).is_some()).max_by(better)
}

/// The reference `row` is compared with (see the module table); `None`
/// when there is none in `rows`, or `row` is itself the reference.
pub fn reference<'a>(row: &Row, rows: &'a [Row]) -> Option<&'a Row> {
    let found = match (row.bench.as_str(), row.transport.as_str()) {
        ("loss", _) => rows.iter().find(|r| {
            r.bench == "loss"
                && r.op == row.op
                && r.transport == row.transport
                && r.size == row.size
                && r.loss_pct == Some(0.0)
        }),
        ("pingpong", "shm") if row.size <= 64 => {
            rows.iter().find(|r| r.bench == "pingpong" && r.op == "shm_floor" && r.transport == "shm")
        }
        ("pingpong" | "bandwidth" | "bibw" | "rate" | "overhead", "udp") => {
            rows.iter().find(|r| r.op == "udp_raw" && same_point(r, row))
        }
        ("bandwidth" | "bibw" | "overhead", "shm") => rows.iter().find(|r| r.op == "memcpy" && same_point(r, row)),
        // The same routine (`algo`) under Open MPI's OSHMEM.
        ("shmem", _) => rows.iter().find(|r| r.op == "oshmem" && r.algo == row.algo && same_point(r, row)),
        _ => None,
    };
    let found = found.or_else(|| if row.bench == "loss" { None } else { fastest_mpi(row, rows) });
    found.filter(|r| !(r.op == row.op && same_point(r, row)))
}

/// `row` against `base` as text: `1.51x` for times, `85%` for throughputs.
pub fn ratio_text(row: &Row, base: &Row) -> Option<String> {
    let (v, higher) = metric(row)?;
    let (b, _) = metric(base)?;
    if !(v.is_finite() && b.is_finite()) || b <= 0.0 {
        return None;
    }
    Some(if higher { format!("{:.0}%", 100.0 * v / b) } else { format!("{:.2}x", v / b) })
}

/// How a reference is named in the table (`openmpi/tcp`, `put@0%`, …).
pub fn reference_name(base: &Row) -> String {
    match (&base.via, base.loss_pct) {
        (_, Some(l)) => format!("{}@{l}%", base.op),
        (Some(via), _) if is_mpi(&base.op) => format!("{}/{via}", base.op),
        _ => base.op.clone(),
    }
}

/// The variant column: ranks, algorithm or order, loss.
pub fn variant(row: &Row) -> String {
    let mut parts = Vec::new();
    if let Some(n) = row.ranks {
        parts.push(format!("{n}r"));
    }
    if let Some(v) = row.algo.as_ref().or(row.order.as_ref()) {
        parts.push(v.clone());
    }
    if let Some(l) = row.loss_pct {
        parts.push(format!("loss {l}%"));
    }
    parts.join(" ")
}

fn path(row: &Row) -> String {
    let base = match row.path.as_deref() {
        Some("hosts") => "hosts".to_string(),
        _ => row.transport.clone(),
    };
    match &row.via {
        Some(via) if via != &row.transport => format!("{base}/{via}"),
        _ => base,
    }
}

/// Prints the table (every row with its ratio to its reference) and the
/// comparison of each memwire row with every baseline of its point.
pub fn print(rows: &[Row]) {
    let mut text = format!(
        "\n{:<10} {:<15} {:<9} {:>9} {:<16} {:>10} {:>10} {:>9} {:>10} {:>7}  vs\n",
        "bench", "op", "path", "size", "variant", "median_us", "p99_us", "MB/s", "ops/s", "ratio"
    );
    let fmt = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
    for row in rows {
        let base = reference(row, rows);
        let ratio = base.and_then(|b| ratio_text(row, b)).unwrap_or_else(|| "-".into());
        let vs = base.map_or(String::new(), reference_name);
        text.push_str(&format!(
            "{:<10} {:<15} {:<9} {:>9} {:<16} {:>10} {:>10} {:>9} {:>10} {:>7}  {}\n",
            row.bench,
            row.op,
            path(row),
            row.size,
            variant(row),
            fmt(row.median_us, 2),
            fmt(row.p99_us, 2),
            fmt(row.mbps, 0),
            fmt(row.ops_per_s, 0),
            ratio,
            vs
        ));
    }
    let comparisons = comparisons(rows);
    if !comparisons.is_empty() {
        text.push_str("\nmemwire against every baseline of the same point (time: x as long; throughput: % of):\n");
        for line in comparisons {
            text.push_str(&line);
            text.push('\n');
        }
    }
    for (op, what, target) in
        [("put_signal_auth", "authenticated", " (target <= 1.1x)"), ("put_signal_crc", "checksummed", "")]
    {
        for with in rows.iter().filter(|r| r.op == op) {
            let plain = rows.iter().find(|r| r.op == "put_signal" && same_point(r, with));
            if let Some(text_ratio) = plain.and_then(|p| ratio_text(with, p)) {
                text.push_str(&format!("put_signal {} B: {what} / plain median = {text_ratio}{target}\n", with.size));
            }
        }
    }
    crate::out::note(&text);
}

/// One line per memwire row that has baselines at its point.
pub fn comparisons(rows: &[Row]) -> Vec<String> {
    let mut lines = Vec::new();
    for row in rows.iter().filter(|r| !r.is_baseline() && r.bench != "loss") {
        let against: Vec<String> = rows
            .iter()
            .filter(|b| b.is_baseline() && same_point(b, row))
            .filter_map(|b| ratio_text(row, b).map(|t| format!("{t} {}", reference_name(b))))
            .collect();
        if !against.is_empty() {
            let v = variant(row);
            let v = if v.is_empty() { String::new() } else { format!(" {v}") };
            lines.push(format!(
                "  {} {} {} B{v} {}: {}",
                row.bench,
                row.transport,
                row.size,
                row.op,
                against.join(", ")
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lat(bench: &str, op: &str, transport: &str, size: usize, us: f64) -> Row {
        Row { median_us: Some(us), ..Row::new(bench, op, transport, size) }
    }

    fn bw(bench: &str, op: &str, transport: &str, size: usize, mbps: f64) -> Row {
        Row { mbps: Some(mbps), ..Row::new(bench, op, transport, size) }
    }

    #[test]
    fn each_row_has_its_rule_reference() {
        let mut rows = vec![
            lat("pingpong", "udp_raw", "udp", 8, 3.0),
            lat("pingpong", "put_signal", "udp", 8, 4.5),
            lat("pingpong", "shm_floor", "shm", 8, 0.2),
            lat("pingpong", "put_signal", "shm", 8, 0.4),
            lat("pingpong", "put_signal", "shm", 1 << 20, 90.0),
            lat("pingpong", "mpich", "shm", 1 << 20, 100.0).via("shm"),
            lat("pingpong", "openmpi", "shm", 1 << 20, 80.0).via("shm"),
            bw("bandwidth", "memcpy", "shm", 1 << 20, 10_000.0),
            bw("bandwidth", "put", "shm", 1 << 20, 8_000.0),
        ];
        let mut lossy = bw("loss", "put", "udp", 1 << 20, 500.0);
        lossy.loss_pct = Some(5.0);
        let mut clean = bw("loss", "put", "udp", 1 << 20, 1000.0);
        clean.loss_pct = Some(0.0);
        rows.push(lossy);
        rows.push(clean);
        let name = |i: usize| reference(&rows[i], &rows).map(reference_name);
        assert_eq!(name(0), None, "a baseline is its own reference");
        assert_eq!(name(1).as_deref(), Some("udp_raw"));
        assert_eq!(ratio_text(&rows[1], &rows[0]).as_deref(), Some("1.50x"));
        assert_eq!(name(3).as_deref(), Some("shm_floor"));
        assert_eq!(name(4).as_deref(), Some("openmpi/shm"), "no floor at 1 MiB: the faster MPI");
        assert_eq!(name(8).as_deref(), Some("memcpy"));
        assert_eq!(ratio_text(&rows[8], &rows[7]).as_deref(), Some("80%"));
        assert_eq!(name(9).as_deref(), Some("put@0%"));
        assert_eq!(name(10), None);
        let lines = comparisons(&rows);
        assert!(lines.iter().any(|l| l.contains("put_signal: 1.50x udp_raw")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("1.12x openmpi/shm") && l.contains("0.90x mpich/shm")), "{lines:?}");
    }
}
