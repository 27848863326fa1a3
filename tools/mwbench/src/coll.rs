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
    VectorAlgo,
};

use crate::harness::Job;
use crate::row::{median_p99, Row};

/// Collective benchmark names (DESIGN §6).
pub const BENCHES: &[&str] =
    &["barrier", "bcast", "allgather", "alltoall", "allreduce", "allgatherv", "alltoallv", "multicast"];

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
        "allgatherv" | "alltoallv" => names(VectorAlgo::ALL, VectorAlgo::name),
        "multicast" => names(McastAlgo::ALL, McastAlgo::name),
        _ => Vec::new(),
    }
}

/// One collective with its algorithm, parsed before the timed loop (so
/// the timed region is the library call alone, as on the MPI side).
#[derive(Clone, Copy)]
enum Call {
    Barrier(BarrierAlgo),
    Bcast(BcastAlgo),
    Allgather(AllgatherAlgo),
    Alltoall(AlltoallAlgo),
    Allreduce(AllreduceAlgo),
    Allgatherv(VectorAlgo),
    Alltoallv(VectorAlgo),
}

/// Equal blocks of `size` bytes, packed in member order, described as a
/// vector collective's counts and displacements (the same bytes as
/// allgather and alltoall move, through the v path).
struct EqualBlocks {
    counts: Vec<usize>,
    displs: Vec<usize>,
}

impl EqualBlocks {
    fn new(p: usize, size: usize) -> EqualBlocks {
        EqualBlocks { counts: vec![size; p], displs: (0..p).map(|j| j * size).collect() }
    }
}

impl Call {
    fn parse(bench: &str, algo: &str) -> Call {
        match bench {
            "barrier" => Call::Barrier(BarrierAlgo::parse(algo).expect("barrier method")),
            "bcast" => Call::Bcast(BcastAlgo::parse(algo).expect("bcast algorithm")),
            "allgather" => Call::Allgather(AllgatherAlgo::parse(algo).expect("allgather algorithm")),
            "alltoall" => Call::Alltoall(AlltoallAlgo::parse(algo).expect("alltoall algorithm")),
            "allreduce" => Call::Allreduce(AllreduceAlgo::parse(algo).expect("allreduce algorithm")),
            "allgatherv" => Call::Allgatherv(VectorAlgo::parse(algo).expect("vector algorithm")),
            "alltoallv" => Call::Alltoallv(VectorAlgo::parse(algo).expect("vector algorithm")),
            _ => unreachable!("unknown collective bench {bench}"),
        }
    }

    /// Runs the collective once on `team` (buffers prepared by the caller).
    fn run(self, team: &mut Team<'_>, send: &[u8], recv: &mut [u8], blocks: &EqualBlocks) {
        let (counts, displs) = (&blocks.counts, &blocks.displs);
        let result = match self {
            Call::Barrier(algo) => team.barrier_with(algo),
            Call::Bcast(algo) => team.broadcast_with(algo, 0, recv),
            Call::Allgather(algo) => team.allgather_with(algo, send, recv),
            Call::Alltoall(algo) => team.alltoall_with(algo, send, recv),
            Call::Allreduce(algo) => team.allreduce_with(algo, DType::F64, ReduceOp::Sum, send, recv),
            Call::Allgatherv(algo) => team.allgatherv_with(algo, send, recv, counts, displs),
            Call::Alltoallv(algo) => team.alltoallv_with(algo, send, counts, displs, recv, counts, displs),
        };
        result.expect("collective");
    }
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
            "allgather" | "allgatherv" => (size, size * p),
            "alltoall" | "alltoallv" => (size * p, size * p),
            _ => (size / 8 * 8, size / 8 * 8),
        };
        let blocks = EqualBlocks::new(p, size);
        let send = vec![1u8; send_len];
        let mut recv = vec![0u8; recv_len];
        let region = (b == "multicast").then(|| ep.alloc(size.max(1), Access::READ_WRITE).expect("region"));
        let group = region.as_ref().map(|r| team.multicast_group(r).expect("multicast group"));
        let mcast = McastAlgo::parse(&a).unwrap_or_default();
        let call = (group.is_none()).then(|| Call::parse(&b, &a));
        let mut samples = Vec::with_capacity(iters);
        for i in 0..warmup + iters {
            if b != "barrier" {
                team.barrier().expect("barrier");
            }
            let t0 = Instant::now();
            match &group {
                Some(group) => team.multicast_with(mcast, group, 0, 0, size).expect("multicast"),
                None => call.expect("parsed above").run(&mut team, &send, &mut recv, &blocks),
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
