//! `mwbench`: memwire's benchmark suite (DESIGN §6 output contract).
//!
//! Every measured point is one JSON object per line on stdout; notes, a
//! progress bar (on a terminal) and a readable table with ratios go to
//! stderr. Baselines are ops of their own measured in the same run on the
//! same path (`udp_raw`, `tcp_raw`, `shm_floor`, `memcpy`, `mpich`,
//! `openmpi`), so ratios hold on a noisy machine.
//!
//! memwire's ranks run as threads of this process, each with its own
//! endpoint (over UDP the same syscalls as separate processes; over shared
//! memory the same mappings, each endpoint mapping the other's memory files
//! through `/proc`), or as real processes when mwbench runs under mwrun
//! (`mwrun -n 2 -q target/release/mwbench --bench pingpong,bandwidth`).
//! `mwbench report` turns result files into docs/performance.md's generated
//! section and PNG plots; `mwbench machine` records the machine line.
//!
//! Owns: the command line (one option vocabulary for every bench, STYLE habit
//! 12) and dispatching to the bench modules, `report` and `machine`. Must not:
//! measure or format rows itself (the bench modules and `out` do), or print
//! anything on stdout but JSON lines (result rows, the machine line).

#![deny(unsafe_code)]

mod coll;
mod floor;
mod harness;
mod mpi;
mod nton;
mod out;
mod pingpong;
mod plan;
mod plot;
mod raw;
mod rawpair;
mod report;
mod row;
mod run;
mod stream;
mod table;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// memwire benchmarks: JSON points on stdout, table and progress on stderr.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    measure: Args,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write the generated section of docs/performance.md and PNG plots from result files.
    Report {
        /// Directory of *.jsonl results (one file per run), machine-start.json,
        /// machine-end.json and commands.txt.
        #[arg(long, default_value = "bench/results")]
        results: PathBuf,
        /// The Markdown page whose section between <!-- bench:begin --> and <!-- bench:end --> is replaced.
        #[arg(long, default_value = "docs/performance.md")]
        readme: PathBuf,
        /// Where the PNG plots go.
        #[arg(long, default_value = "bench/plots")]
        plots: PathBuf,
        /// The command the section says produced the results.
        #[arg(long, default_value = "make bench")]
        command: String,
    },
    /// Print the machine line (CPU, cores, kernel, load average, time) as JSON.
    Machine,
}

/// What to measure.
#[derive(Debug, clap::Args)]
struct Args {
    /// Short standard set, under a minute: ping-pong at 8 B and 1 MiB and
    /// bandwidth at 1 MiB, every op and baseline, both transports.
    #[arg(long)]
    quick: bool,
    /// Comma-separated benches: pingpong, bandwidth, bibw, rate, overhead,
    /// nton, barrier, bcast, allgather, alltoall, allreduce, multicast, loss, overlap,
    /// shmem (default: all; with --quick pingpong,bandwidth).
    #[arg(long, value_delimiter = ',')]
    bench: Vec<String>,
    /// Comma-separated ops, memwire's and baselines' (e.g. put_signal,udp_raw;
    /// default: all of the selected benches). put_signal_auth (put_signal with
    /// packet authentication forced on, against it forced off, alternating)
    /// and put_signal_crc (the same with the CRC32C checksum, authentication
    /// off) run only when named. `cacheline` is an old name of shm_floor.
    #[arg(long, value_delimiter = ',')]
    op: Vec<String>,
    /// Transport: udp or shm (default: both; under mwrun the job's, from MW_TRANSPORT).
    #[arg(long)]
    transport: Option<String>,
    /// Comma-separated message sizes in bytes; K and M suffixes mean KiB and MiB.
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sizes: Vec<usize>,
    /// Iterations (latency samples, messages of a throughput point, or
    /// collective calls) for every point, instead of the size-scaled defaults.
    #[arg(long)]
    iters: Option<usize>,
    /// Iterations of the MPI baselines' collective and nton runs (default:
    /// `--iters`, else the group's default). memwire's points may then take
    /// many more samples than an oversubscribed MPICH, at its cost per
    /// call, can afford: a small memwire point of a few hundred calls is
    /// over so soon that one scheduling hiccup moves its median.
    #[arg(long)]
    mpi_iters: Option<usize>,
    /// Comma-separated job sizes for nton (default 4) and collectives (default 2,4).
    #[arg(long, value_delimiter = ',')]
    ranks: Vec<u32>,
    /// Comma-separated collective algorithms (e.g. a,b,c,d,e for barrier) or
    /// nton send orders (in_order, shifted, multicast).
    #[arg(long, value_delimiter = ',')]
    method: Vec<String>,
    /// Outstanding operations in bandwidth, bibw and loss (default 8 over
    /// udp, 1 over shm: there every operation is one CPU's copy, complete
    /// when the call returns, so more in flight only add buffers that push
    /// the data out of the cache).
    #[arg(long)]
    window: Option<usize>,
    /// Outstanding operations in rate.
    #[arg(long, default_value_t = 64)]
    rate_window: usize,
    /// Comma-separated injected loss percentages of the loss bench (default 0,0.1,1,5).
    #[arg(long, value_delimiter = ',')]
    loss: Vec<f64>,
    /// Skip the MPI baselines (mpich, openmpi, and Open MPI's OSHMEM, op
    /// oshmem) even when installed.
    #[arg(long)]
    no_mpi: bool,
    /// Under mwrun across hosts: the remote-exec command MPI's launchers
    /// start their daemons with instead of ssh, called as ssh is (`CMD -x
    /// HOST WORDS`; default: the netns cluster's scripts/netns-exec when
    /// the hosts are its namespaces, else ssh).
    #[arg(long, value_name = "CMD")]
    mpi_launcher_exec: Option<String>,
    /// Percent of packets the network itself drops during this run (e.g.
    /// `scripts/netns-cluster loss`): recorded as every row's loss_pct so
    /// such rows are never compared with loss-free ones. mwbench injects
    /// nothing.
    #[arg(long, value_name = "PERCENT")]
    network_loss: Option<f64>,
    /// Seconds a step may take (default 300, 20 with --quick): a point that
    /// takes longer is reported and abandoned (under mwrun it ends the run
    /// with status 3); an MPI launch is stopped.
    #[arg(long)]
    step_timeout: Option<u64>,
    /// Internal: the second process of the shared-memory cache-line ping-pong.
    #[arg(long, num_args = 4, hide = true, value_names = ["PID", "FD", "ITERS", "LINES"])]
    shm_floor_child: Vec<u64>,
}

/// `4096`, `4K`, `1M`.
fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1 << 10),
        Some((i, 'M' | 'm')) => (&t[..i], 1 << 20),
        _ => (t, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{text:?} is not a size (bytes, or with a K or M suffix)"))
}

fn fail(message: &str) -> ! {
    eprintln!("mwbench: {message}");
    std::process::exit(2);
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Report { results, readme, plots, command }) => {
            if let Err(e) = report::report(&results, &readme, &plots, &command) {
                fail(&e);
            }
            return;
        }
        Some(Command::Machine) => {
            println!("{}", report::machine_json());
            return;
        }
        None => {}
    }
    let args = cli.measure;
    if let [pid, fd, iters, lines] = args.shm_floor_child[..] {
        floor::shm_floor_child(pid as u32, fd as i32, iters, lines);
        return;
    }
    let transport = |t: &str| -> &'static str {
        match t {
            "udp" => "udp",
            "shm" => "shm",
            other => fail(&format!("unknown transport {other:?} (udp or shm)")),
        }
    };
    let (job, transports) = if harness::under_launcher() {
        let t = match args.transport.as_deref() {
            Some(t) => transport(t),
            None if std::env::var("MW_TRANSPORT").is_ok_and(|v| v == "auto") => "shm",
            None => "udp",
        };
        match harness::Job::join_process(t) {
            Ok(job) => (job, vec![t]),
            Err(e) => fail(&e),
        }
    } else {
        let ts = args.transport.as_deref().map_or(vec!["udp", "shm"], |t| vec![transport(t)]);
        (harness::Job::Threads, ts)
    };
    if job.rank() != 0 {
        out::set_silent();
    }
    let ops = args.op.iter().map(|o| if o == "cacheline" { "shm_floor".to_string() } else { o.clone() }).collect();
    let options = plan::Options {
        quick: args.quick,
        benches: args.bench,
        ops,
        transports,
        sizes: args.sizes,
        iters: args.iters,
        mpi_iters: args.mpi_iters,
        ranks: args.ranks,
        methods: args.method,
        window: args.window,
        rate_window: args.rate_window,
        loss: args.loss,
        process: job.process_size().zip(job.process_transport()),
        mpi_installed: mpi::LABELS
            .iter()
            .chain(mpi::SHMEM_LABELS)
            .copied()
            .filter(|&l| (l == "mwshmem" || !args.no_mpi) && mpi::installed(l))
            .collect(),
        udp_gso: job.process().is_some_and(|(_, net)| net.gso_useful()),
        datagram: job.process().map_or(raw::DATAGRAM, |(_, net)| net.datagram),
        mpi_hosts: job
            .process()
            .filter(|(_, net)| net.spans_hosts())
            .map(|(_, net)| mpi::Hosts::new(net.ips.clone(), args.mpi_launcher_exec.clone())),
    };
    if args.network_loss.is_some_and(|l| !(0.0..100.0).contains(&l)) {
        fail("--network-loss must lie in [0, 100)");
    }
    run::set_network_loss(args.network_loss);
    if options.benches.iter().any(|b| b == "shmem") {
        for label in mpi::SHMEM_LABELS.iter().filter(|l| !options.mpi_installed.contains(l)) {
            let why = match *label {
                "mwshmem" => "target/shmem not built (make shmem)",
                _ if args.no_mpi => "--no-mpi",
                _ => "no Open MPI oshcc (openmpi-bin) on the PATH",
            };
            out::note(&format!("mwbench: {label} is not available ({why}): no {label} points"));
        }
    }
    for label in mpi::LABELS.iter().filter(|l| !args.no_mpi && !options.mpi_installed.contains(l)) {
        out::note(&format!("mwbench: {label} is not installed (no mpicc/launcher on PATH): no {label} baseline"));
    }
    let steps = match plan::build(&options) {
        Ok(steps) => steps,
        Err(e) => fail(&e),
    };
    match run::run(job, &steps, Duration::from_secs(args.step_timeout.unwrap_or(if args.quick { 20 } else { 300 }))) {
        Ok((_, problems)) if !problems.is_empty() => {
            out::note(&format!(
                "mwbench: {} step(s) had problems (points they did not print are missing):",
                problems.len()
            ));
            for p in problems {
                out::note(&format!("  {p}"));
            }
        }
        Ok(_) => {}
        Err(e) => fail(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("64K"), Ok(65_536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert!(parse_size("1G").is_err());
        assert!(parse_size("").is_err());
    }
}
