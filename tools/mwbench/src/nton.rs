//! N-to-N throughput (`--bench nton`) with Cenju-4's three send orders
//! (seed 000): every rank sends `size` bytes to every other rank,
//!
//! - `in_order`: each rank sends to ranks 0, 1, …, N−1 in that order, so
//!   all senders hit the same target at once (the hot spot);
//! - `shifted`: rank i sends to i+1, i+2, … (mod N), one target per sender;
//! - `multicast`: each rank in turn multicasts its block to all others with
//!   the team multicast (`Team::multicast`, a pipelined binomial tree).
//!
//! Timing, as for collectives: an untimed team barrier, then every rank
//! times its part (puts issued and complete at their targets; or the N
//! multicasts); per iteration the slowest rank counts. Throughput is the
//! bytes moved, N·(N−1)·size, over the median of those times. Owns these
//! measurements; must not print.

use std::time::Instant;

use mw_core::{Access, Endpoint};

use crate::harness::Job;
use crate::row::{median_p99, Row};

/// The send orders, as `--method` names them.
pub const ORDERS: &[&str] = &["in_order", "shifted", "multicast"];

/// The targets of `me` in `order` (never itself).
pub fn targets(order: &str, me: u32, n: u32) -> Vec<u32> {
    match order {
        "in_order" => (0..n).filter(|&t| t != me).collect(),
        _ => (1..n).map(|k| (me + k) % n).collect(),
    }
}

fn exchange(ep: &Endpoint, order: &str, size: usize, iters: usize) -> Vec<f64> {
    let n = ep.size();
    let me = ep.rank();
    let region = ep.alloc_symmetric((n as usize * size).max(8), Access::ALL).expect("alloc");
    let key = region.key();
    let mut team = ep.team_world().expect("team");
    let group = (order == "multicast").then(|| team.multicast_group(&region).expect("multicast group"));
    let data = vec![me as u8; size];
    region.write(me as u64 * size as u64, &data).expect("own block");
    let to = targets(order, me, n);
    let warm = (iters / 10).max(5);
    let mut samples = Vec::with_capacity(iters);
    for i in 0..warm + iters {
        team.barrier().expect("barrier");
        let t0 = Instant::now();
        match &group {
            Some(group) => {
                for root in 0..n {
                    team.multicast(group, root, root as usize * size, size).expect("multicast");
                }
            }
            None => {
                let handles: Vec<_> =
                    to.iter().map(|&t| ep.put_nb(t, key, me as u64 * size as u64, &data).expect("put_nb")).collect();
                mw_core::wait_all(handles).expect("put");
            }
        }
        if i >= warm {
            samples.push(t0.elapsed().as_secs_f64() * 1e6);
        }
    }
    team.barrier().expect("barrier");
    samples
}

/// One N-to-N point: `ranks` ranks, `size` bytes per pair, `order`.
pub fn measure(job: &Job, order: &str, transport: &'static str, ranks: u32, size: usize, iters: usize) -> Vec<Row> {
    let o = order.to_string();
    let Some(per_rank) = job.group(ranks, transport, move |ep| exchange(ep, &o, size, iters)) else {
        return Vec::new();
    };
    let worst: Vec<f64> = (0..iters).map(|i| per_rank.iter().map(|s| s[i]).fold(0.0, f64::max)).collect();
    let (med, p99) = median_p99(worst);
    let op = if order == "multicast" { "multicast" } else { "put" };
    let mut row = Row::new("nton", op, transport, size);
    row.iters = iters;
    row.median_us = Some(med);
    row.p99_us = Some(p99);
    row.mbps = Some((ranks as usize * (ranks as usize - 1) * size) as f64 / med.max(1e-9));
    row.ranks = Some(ranks);
    row.order = Some(order.into());
    vec![row.launched(job.launch())]
}

#[cfg(test)]
mod tests {
    use super::targets;

    #[test]
    fn send_orders_cover_every_other_rank_once() {
        assert_eq!(targets("in_order", 2, 4), vec![0, 1, 3]);
        assert_eq!(targets("shifted", 2, 4), vec![3, 0, 1]);
        for order in ["in_order", "shifted"] {
            for me in 0..5 {
                let mut t = targets(order, me, 5);
                t.sort_unstable();
                assert_eq!(t, (0..5).filter(|&r| r != me).collect::<Vec<_>>());
            }
        }
    }
}
