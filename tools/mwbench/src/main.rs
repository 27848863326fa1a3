//! `mwbench`: memwire's benchmark suite (DESIGN §6 output contract).
//!
//! Every point is one JSON object per line on stdout; a readable table and
//! progress go to stderr. Baselines are ops of their own measured in the
//! same run on the same path (`udp_raw`), so ratios hold on a noisy machine.
//! This first version runs its two ranks as two threads of one process, each
//! with its own endpoint and socket (the same syscalls as two processes).

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
    /// Comma-separated ops (put_signal, put_signal_auth, fetch_add, get, put,
    /// udp_raw). put_signal_auth measures put_signal with packet
    /// authentication forced on against it forced off, in alternating blocks.
    #[arg(long, value_delimiter = ',')]
    op: Vec<String>,
    /// Comma-separated sizes in bytes.
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Transport (only udp so far).
    #[arg(long, default_value = "udp")]
    transport: String,
    /// Iterations per latency point (default 20000, 5000 with --quick).
    #[arg(long)]
    iters: Option<usize>,
}

fn main() {
    let args = Args::parse();
    if args.transport != "udp" {
        eprintln!("mwbench: transport {:?} is not implemented yet (only udp)", args.transport);
        std::process::exit(2);
    }
    let iters = args.iters.unwrap_or(if args.quick { 5_000 } else { 20_000 });
    let wants = |op: &str| args.op.is_empty() || args.op.iter().any(|o| o == op);
    let bench_on = |b: &str| args.bench.as_deref().is_none_or(|x| x == b);
    let mut rows = Vec::new();
    if bench_on("pingpong") {
        let sizes = if args.sizes.is_empty() { vec![8] } else { args.sizes.clone() };
        for &size in &sizes {
            if wants("udp_raw") {
                rows.push(points::pingpong_udp_raw(size, iters));
            }
            if wants("put_signal_auth") {
                rows.extend(points::pingpong_put_signal_auth_pair(size, iters));
            } else if wants("put_signal") {
                rows.push(points::pingpong_put_signal(size, iters));
            }
            if wants("fetch_add") && size == 8 {
                rows.push(points::pingpong_fetch_add(iters));
            }
            if wants("get") {
                rows.push(points::pingpong_get(size, iters));
            }
        }
    }
    if bench_on("bandwidth") {
        let sizes = if args.sizes.is_empty() { vec![1 << 20] } else { args.sizes.clone() };
        let total = if args.quick { 256 << 20 } else { 1 << 30 };
        for &size in &sizes {
            if wants("udp_raw") {
                rows.push(points::bandwidth_udp_raw(size, total));
            }
            if wants("put") {
                rows.push(points::bandwidth_put(size, total));
            }
        }
    }
    points::print_table(&rows);
}
