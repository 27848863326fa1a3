//! `mwbench`: memwire's benchmark suite (DESIGN §6 output contract).
//!
//! Every point is one JSON object per line on stdout; a readable table and
//! progress go to stderr. Baselines are ops of their own measured in the
//! same run on the same path (`udp_raw` for UDP; `cacheline`, a two-process
//! cache-line ping-pong, and `memcpy` for shared memory), so ratios hold on
//! a noisy machine. memwire's two ranks run as two threads of one process,
//! each with its own endpoint: over UDP the same syscalls as two processes,
//! over shared memory the same mappings (each endpoint maps the other's
//! memory files through `/proc`, as separate processes do).

mod coll;
mod floor;
mod harness;
mod points;

use clap::Parser;

/// memwire benchmarks.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Short standard set (under a minute).
    #[arg(long)]
    quick: bool,
    /// Which benchmarks, comma-separated: pingpong, bandwidth, overlap, barrier,
    /// bcast, allgather, alltoall, allreduce (default: all).
    #[arg(long)]
    bench: Option<String>,
    /// Comma-separated ops (put_signal, put_signal_auth, fetch_add, get, put,
    /// send_recv, am, udp_raw, cacheline, memcpy). put_signal_auth measures
    /// put_signal with packet authentication forced on against it forced off,
    /// in alternating blocks (UDP).
    #[arg(long, value_delimiter = ',')]
    op: Vec<String>,
    /// Comma-separated sizes in bytes.
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Transport: udp or shm (default: both).
    #[arg(long)]
    transport: Option<String>,
    /// Operations kept outstanding by the put and get bandwidth benchmarks
    /// (default 8; get keeps between half of it and all of it in flight).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    window: u32,
    /// Iterations per latency point (default 20000, 5000 with --quick;
    /// collectives 2000, 300 with --quick).
    #[arg(long)]
    iters: Option<usize>,
    /// Internal: the second process of the cache-line ping-pong.
    #[arg(long, num_args = 3, hide = true, value_names = ["PID", "FD", "ITERS"])]
    cacheline_child: Vec<u64>,
    /// Comma-separated job sizes for the collective benchmarks (default 2,4).
    #[arg(long, value_delimiter = ',')]
    ranks: Vec<u32>,
    /// Comma-separated algorithms of a collective benchmark (e.g. a,b,c,d,e
    /// for barrier; default: auto and every algorithm, auto only with --quick).
    #[arg(long, value_delimiter = ',')]
    method: Vec<String>,
    /// Also run the MPI baselines (mpi/coll_bench.c with mpicc.mpich and
    /// mpicc.openmpi, over shared memory and over TCP) for the collective points.
    #[arg(long)]
    mpi: bool,
}

fn main() {
    let args = Args::parse();
    if let [pid, fd, iters] = args.cacheline_child[..] {
        floor::cacheline_child(pid as u32, fd as i32, iters);
        return;
    }
    let transports: Vec<&'static str> = match args.transport.as_deref() {
        None => vec!["udp", "shm"],
        Some("udp") => vec!["udp"],
        Some("shm") => vec!["shm"],
        Some(other) => {
            eprintln!("mwbench: unknown transport {other:?} (udp or shm)");
            std::process::exit(2);
        }
    };
    let iters = args.iters.unwrap_or(if args.quick { 5_000 } else { 20_000 });
    let wants = |op: &str| args.op.is_empty() || args.op.iter().any(|o| o == op);
    let bench_on = |b: &str| args.bench.as_deref().is_none_or(|x| x.split(',').any(|x| x == b));
    let mut rows = Vec::new();
    for &transport in &transports {
        if bench_on("pingpong") {
            let sizes = if args.sizes.is_empty() { vec![8] } else { args.sizes.clone() };
            if transport == "shm" && wants("cacheline") {
                rows.push(floor::pingpong_cacheline(iters * 4));
            }
            for &size in &sizes {
                if transport == "udp" && wants("udp_raw") {
                    rows.push(points::pingpong_udp_raw(size, iters));
                }
                let iters = if transport == "shm" { iters * 4 } else { iters };
                if transport == "udp" && wants("put_signal_auth") {
                    rows.extend(points::pingpong_put_signal_auth_pair(size, iters));
                } else if wants("put_signal") {
                    rows.push(points::pingpong_put_signal(transport, size, iters));
                }
                if wants("fetch_add") && size == 8 {
                    rows.push(points::pingpong_fetch_add(transport, iters));
                }
                if wants("get") {
                    rows.push(points::pingpong_get(transport, size, iters));
                }
                if wants("send_recv") {
                    rows.push(points::pingpong_send_recv(transport, size, iters));
                }
                if wants("am") {
                    rows.push(points::pingpong_am(transport, size, iters));
                }
            }
        }
        if bench_on("bandwidth") {
            let sizes = if args.sizes.is_empty() {
                if transport == "shm" {
                    vec![1 << 20, 16 << 20]
                } else {
                    vec![1 << 20]
                }
            } else {
                args.sizes.clone()
            };
            let total = if args.quick { 256 << 20 } else { 1 << 30 };
            let total = if transport == "shm" { total * 4 } else { total };
            for &size in &sizes {
                if transport == "udp" && wants("udp_raw") {
                    rows.push(points::bandwidth_udp_raw(size, total));
                }
                if transport == "shm" && wants("memcpy") {
                    rows.push(floor::bandwidth_memcpy(size, total));
                }
                if wants("put") {
                    rows.push(points::bandwidth_put(transport, size, total, args.window as usize));
                }
                if wants("get") {
                    rows.push(points::bandwidth_get(transport, size, total, args.window as usize));
                }
                if wants("send_recv") {
                    rows.push(points::bandwidth_send_recv(transport, size, total));
                }
            }
        }
    }
    if bench_on("overlap") {
        let sizes = if args.sizes.is_empty() { vec![16 << 20] } else { args.sizes.clone() };
        for &size in &sizes {
            rows.push(points::overlap_recv(size, if args.quick { 5 } else { 15 }));
        }
    }
    if !rows.is_empty() {
        points::print_table(&rows);
    }
    let benches: Vec<&str> = coll::BENCHES.iter().copied().filter(|b| bench_on(b)).collect();
    if !benches.is_empty() {
        let ranks = if args.ranks.is_empty() { vec![2, 4] } else { args.ranks.clone() };
        let sizes = if args.sizes.is_empty() { vec![8, 65_536] } else { args.sizes.clone() };
        let iters = args.iters.unwrap_or(if args.quick { 300 } else { 2_000 });
        let mut crows = Vec::new();
        for &n in &ranks {
            for &bench in &benches {
                let algos: Vec<String> = if !args.method.is_empty() {
                    args.method.clone()
                } else if args.quick {
                    vec!["auto".into()]
                } else {
                    coll::algos(bench).into_iter().map(String::from).collect()
                };
                let bench_sizes = if bench == "barrier" { vec![0] } else { sizes.clone() };
                for algo in &algos {
                    if !coll::algos(bench).contains(&algo.as_str()) {
                        eprintln!("mwbench: {bench} has no algorithm {algo:?} (have {:?})", coll::algos(bench));
                        std::process::exit(2);
                    }
                    for &size in &bench_sizes {
                        crows.push(coll::measure(bench, algo, n, size, iters));
                    }
                }
            }
            if args.mpi {
                crows.extend(coll::measure_mpi(&benches, n, &sizes, iters));
            }
        }
        coll::print_table(&crows);
    }
}
