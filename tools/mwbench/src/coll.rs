//! Collective benchmarks (`--bench barrier|bcast|allgather|alltoall|allreduce|multicast`);
//! their MPI baselines (ops `mpich`, `openmpi`: `mpi/coll_bench.c`) are
//! run by `mpi` (multicast has none: its MPI analogue is bcast).
//!
//! Timing, identical on both sides: every rank times each call (a barrier,
//! untimed, precedes each data collective; barriers run back to back); per
//! iteration the slowest rank's time counts; the median and p99 of those
//! are reported. Sizes: bcast bytes broadcast, allgather bytes per rank,
//! alltoall bytes per destination, allreduce bytes of f64 summed, multicast
//! bytes put by rank 0 into every member's group region (methods `tree` and
//! `ip`). Owns these measurements; must not print.

use std::time::Instant;

use mw_core::{
    Access, AllgatherAlgo, AllreduceAlgo, AlltoallAlgo, BarrierAlgo, BcastAlgo, DType, McastAlgo, ReduceOp, Team,
};

use crate::harness::Job;
use crate::row::{median_p99, Row};

/// Collective benchmark names (DESIGN §6).
pub const BENCHES: &[&str] = &["barrier", "bcast", "allgather", "alltoall", "allreduce", "multicast"];

/// Every algorithm name of a collective benchmark, `auto` first.
pub fn algos(bench: &str) -> Vec<&'static str> {
    fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Vec<&'static str> {
        std::iter::once("auto").chain(all.iter().map(|&a| name(a))).collect()
    }
    match bench {
        "barrier" => names(BarrierAlgo::ALL, BarrierAlgo::name),
        "bcast" => names(BcastAlgo::ALL, BcastAlgo::name),
        "allgather" => names(AllgatherAlgo::ALL, AllgatherAlgo::name),
        "alltoall" => names(AlltoallAlgo::ALL, AlltoallAlgo::name),
        "allreduce" => names(AllreduceAlgo::ALL, AllreduceAlgo::name),
        "multicast" => names(McastAlgo::ALL, McastAlgo::name),
        _ => Vec::new(),
    }
}

/// Runs one collective once on `team` (buffers prepared by the caller).
fn run_once(team: &mut Team<'_>, bench: &str, algo: &str, send: &[u8], recv: &mut [u8]) {
    let result = match bench {
        "barrier" => team.barrier_with(BarrierAlgo::parse(algo).expect("barrier method")),
        "bcast" => team.broadcast_with(BcastAlgo::parse(algo).expect("bcast algorithm"), 0, recv),
        "allgather" => team.allgather_with(AllgatherAlgo::parse(algo).expect("allgather algorithm"), send, recv),
        "alltoall" => team.alltoall_with(AlltoallAlgo::parse(algo).expect("alltoall algorithm"), send, recv),
        "allreduce" => team.allreduce_with(
            AllreduceAlgo::parse(algo).expect("allreduce algorithm"),
            DType::F64,
            ReduceOp::Sum,
            send,
            recv,
        ),
        _ => unreachable!("unknown collective bench {bench}"),
    };
    result.expect("collective");
}

/// Measures one memwire collective point over `transport`.
pub fn measure(
    job: &Job,
    bench: &str,
    algo: &str,
    transport: &'static str,
    ranks: u32,
    size: usize,
    iters: usize,
) -> Vec<Row> {
    let warmup = (iters / 10).max(50);
    let (b, a) = (bench.to_string(), algo.to_string());
    let Some(per_rank) = job.group(ranks, transport, move |ep| {
        let mut team = ep.team_world().expect("team");
        let p = team.size() as usize;
        let (send_len, recv_len) = match b.as_str() {
            "barrier" => (0, 0),
            "bcast" => (0, size),
            "allgather" => (size, size * p),
            "alltoall" => (size * p, size * p),
            _ => (size / 8 * 8, size / 8 * 8),
        };
        let send = vec![1u8; send_len];
        let mut recv = vec![0u8; recv_len];
        let region = (b == "multicast").then(|| ep.alloc(size.max(1), Access::READ_WRITE).expect("region"));
        let group = region.as_ref().map(|r| team.multicast_group(r).expect("multicast group"));
        let mcast = McastAlgo::parse(&a).unwrap_or_default();
        let mut samples = Vec::with_capacity(iters);
        for i in 0..warmup + iters {
            if b != "barrier" {
                team.barrier().expect("barrier");
            }
            let t0 = Instant::now();
            match &group {
                Some(group) => team.multicast_with(mcast, group, 0, 0, size).expect("multicast"),
                None => run_once(&mut team, &b, &a, &send, &mut recv),
            }
            if i >= warmup {
                samples.push(t0.elapsed().as_secs_f64() * 1e6);
            }
        }
        team.barrier().expect("barrier");
        samples
    }) else {
        return Vec::new();
    };
    let worst: Vec<f64> = (0..iters).map(|i| per_rank.iter().map(|s| s[i]).fold(0.0, f64::max)).collect();
    let (median, p99) = median_p99(worst);
    let mut row = Row::new(bench, "memwire", transport, if bench == "barrier" { 0 } else { size });
    row.iters = iters;
    row.median_us = Some(median);
    row.p99_us = Some(p99);
    row.ranks = Some(ranks);
    row.algo = Some(algo.into());
    vec![row.launched(job.launch())]
}
