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
    /// Which benchmark: pingpong or bandwidth (default: both).
    #[arg(long)]
    bench: Option<String>,
    /// Comma-separated ops (put_signal, fetch_add, get, put, udp_raw, cacheline, memcpy).
    #[arg(long, value_delimiter = ',')]
    op: Vec<String>,
    /// Comma-separated sizes in bytes.
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Transport: udp or shm (default: both).
    #[arg(long)]
    transport: Option<String>,
    /// Iterations per latency point (default 20000, 5000 with --quick).
    #[arg(long)]
    iters: Option<usize>,
    /// Internal: the second process of the cache-line ping-pong.
    #[arg(long, num_args = 3, hide = true, value_names = ["PID", "FD", "ITERS"])]
    cacheline_child: Vec<u64>,
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
    let bench_on = |b: &str| args.bench.as_deref().is_none_or(|x| x == b);
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
                if wants("put_signal") {
                    rows.push(points::pingpong_put_signal(transport, size, iters));
                }
                if wants("fetch_add") && size == 8 {
                    rows.push(points::pingpong_fetch_add(transport, iters));
                }
                if wants("get") {
                    rows.push(points::pingpong_get(transport, size, iters));
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
                    rows.push(points::bandwidth_put(transport, size, total));
                }
                if wants("get") && transport == "shm" {
                    rows.push(points::bandwidth_get(transport, size, total));
                }
            }
        }
    }
    points::print_table(&rows);
}
