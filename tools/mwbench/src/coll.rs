//! Collective benchmarks (`--bench barrier|bcast|allgather|alltoall|allreduce|multicast`)
//! and their MPI baselines (ops `mpich`, `openmpi`: `mpi/coll_bench.c`
//! compiled with each MPI's `mpicc` and run in the same invocation).
//!
//! Timing, identical on both sides: every rank times each call (a barrier,
//! untimed, precedes each data collective; barriers run back to back); per
//! iteration the slowest rank's time counts; the median and p99 of those
//! are reported. Sizes: bcast bytes broadcast, allgather bytes per rank,
//! alltoall bytes per destination, allreduce bytes of f64 summed, multicast
//! bytes put by rank 0 into every member's registered group region
//! (methods `tree` and `ip`; no MPI baseline, whose analogue is bcast).

use std::process::Command;
use std::time::Instant;

use mw_core::{
    Access, AllgatherAlgo, AllreduceAlgo, AlltoallAlgo, BarrierAlgo, BcastAlgo, DType, McastAlgo, ReduceOp, Team,
};

use crate::harness::n_ranks;

/// Collective benchmark names (DESIGN §6).
pub const BENCHES: &[&str] = &["barrier", "bcast", "allgather", "alltoall", "allreduce", "multicast"];

/// One measured collective point.
#[derive(Debug, Clone)]
pub struct CollRow {
    pub bench: String,
    pub op: String,
    pub algo: String,
    pub transport: String,
    pub ranks: u32,
    pub size: usize,
    pub iters: usize,
    pub median_us: f64,
    pub p99_us: f64,
}

impl CollRow {
    fn emit(self) -> CollRow {
        let obj = serde_json::json!({
            "bench": self.bench, "op": self.op, "algo": self.algo, "transport": self.transport,
            "ranks": self.ranks, "size": self.size, "iters": self.iters,
            "median_us": (self.median_us * 1000.0).round() / 1000.0,
            "p99_us": (self.p99_us * 1000.0).round() / 1000.0,
        });
        println!("{obj}");
        eprintln!("  measured {} {} {} {} ranks {} B", self.bench, self.op, self.algo, self.ranks, self.size);
        self
    }
}

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

/// Measures one memwire collective point.
pub fn measure(bench: &str, algo: &str, ranks: u32, size: usize, iters: usize) -> CollRow {
    let warmup = (iters / 10).max(50);
    let (b, a) = (bench.to_string(), algo.to_string());
    let per_rank = n_ranks(ranks, move |ep| {
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
    });
    let mut worst: Vec<f64> = (0..iters).map(|i| per_rank.iter().map(|s| s[i]).fold(0.0, f64::max)).collect();
    worst.sort_by(f64::total_cmp);
    CollRow {
        bench: bench.into(),
        op: "memwire".into(),
        algo: algo.into(),
        transport: "udp".into(),
        ranks,
        size: if bench == "barrier" { 0 } else { size },
        iters,
        median_us: worst[iters / 2],
        p99_us: worst[(iters * 99 / 100).min(iters - 1)],
    }
    .emit()
}

/// One MPI baseline configuration.
struct MpiVariant {
    label: &'static str,
    cc: &'static str,
    launcher_opts: Vec<&'static str>,
    transport: &'static str,
    env: Vec<(&'static str, &'static str)>,
}

/// MPICH and Open MPI, each over shared memory (its default on one host)
/// and over TCP loopback (the path memwire's UDP takes).
fn mpi_variants() -> Vec<MpiVariant> {
    let ompi = vec!["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"];
    let mut ompi_tcp = ompi.clone();
    ompi_tcp.extend(["--mca", "btl", "tcp,self", "--mca", "pml", "ob1"]);
    let v = |label, cc, launcher_opts, transport, env| MpiVariant { label, cc, launcher_opts, transport, env };
    vec![
        v("mpich", "mpicc.mpich", vec![], "shm", vec![]),
        v("mpich", "mpicc.mpich", vec![], "tcp", vec![("MPIR_CVAR_NOLOCAL", "1"), ("UCX_TLS", "tcp,self")]),
        v("openmpi", "mpicc.openmpi", ompi, "shm", vec![]),
        v("openmpi", "mpicc.openmpi", ompi_tcp, "tcp", vec![]),
    ]
}

fn launcher(label: &str) -> &'static str {
    if label == "mpich" {
        "mpiexec.mpich"
    } else {
        "mpirun.openmpi"
    }
}

/// Compiles `mpi/coll_bench.c` with each installed MPI and runs it for the
/// same points; returns its rows (nothing for an MPI that is not installed).
pub fn measure_mpi(benches: &[&str], ranks: u32, sizes: &[usize], iters: usize) -> Vec<CollRow> {
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/mpi/coll_bench.c");
    let dir = std::env::temp_dir().join("mwbench-mpi");
    let _ = std::fs::create_dir_all(&dir);
    let mut rows = Vec::new();
    let benches: Vec<&str> = benches.iter().copied().filter(|&b| b != "multicast").collect();
    if benches.is_empty() {
        return rows;
    }
    for MpiVariant { label, cc, launcher_opts: opts, transport, env } in mpi_variants() {
        let exe = dir.join(format!("coll_bench_{label}"));
        if !exe.exists() {
            let built = Command::new(cc).args(["-O2", "-o"]).arg(&exe).arg(source).status();
            if !built.is_ok_and(|s| s.success()) {
                eprintln!("mwbench: {cc} not usable, no {label} baseline");
                continue;
            }
        }
        let sizes_arg = sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        let out = Command::new(launcher(label))
            .args(&opts)
            .args(["-n", &ranks.to_string()])
            .arg(&exe)
            .args(["--label", label, "--transport", transport, "--iters", &iters.to_string()])
            .args(["--bench", &benches.join(","), "--sizes", &sizes_arg])
            .envs(env)
            .output();
        let Ok(out) = out else {
            eprintln!("mwbench: could not run {label}");
            continue;
        };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let row = CollRow {
                bench: v["bench"].as_str().unwrap_or("").into(),
                op: label.into(),
                algo: label.into(),
                transport: transport.into(),
                ranks,
                size: v["size"].as_u64().unwrap_or(0) as usize,
                iters: v["iters"].as_u64().unwrap_or(0) as usize,
                median_us: v["median_us"].as_f64().unwrap_or(f64::NAN),
                p99_us: v["p99_us"].as_f64().unwrap_or(f64::NAN),
            };
            rows.push(row.emit());
        }
        if !out.status.success() {
            eprintln!("mwbench: {label} ({transport}) failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    rows
}

/// The readable table: each point with the fastest MPI over TCP of the same
/// point for comparison.
pub fn print_table(rows: &[CollRow]) {
    eprintln!(
        "\n{:<10} {:<8} {:<19} {:<5} {:>5} {:>7} {:>10} {:>10} {:>9}",
        "bench", "op", "algo", "path", "ranks", "size", "median_us", "p99_us", "vs MPI/tcp"
    );
    for row in rows {
        let best_tcp = rows
            .iter()
            .filter(|r| r.transport == "tcp" && r.bench == row.bench && r.ranks == row.ranks && r.size == row.size)
            .map(|r| r.median_us)
            .fold(f64::INFINITY, f64::min);
        let ratio = if best_tcp.is_finite() { format!("{:.2}x", row.median_us / best_tcp) } else { "-".into() };
        eprintln!(
            "{:<10} {:<8} {:<19} {:<5} {:>5} {:>7} {:>10.2} {:>10.2} {:>9}",
            row.bench, row.op, row.algo, row.transport, row.ranks, row.size, row.median_us, row.p99_us, ratio
        );
    }
}
