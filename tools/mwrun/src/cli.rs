//! mwrun's command line.
//!
//! Owns: [`Cli`] (clap derive: every option, its default and its help text) and
//! the small value parsers. Must not: act on the options (main, `hosts` and
//! `launch` do) or read the environment.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::cpus::CpuBind;

/// Start a memwire job: N ranks of PROG, on this host or spread over several.
///
/// Each rank gets MW_RANK, MW_SIZE, MW_LOCAL_RANK, MW_LOCAL_SIZE, MW_HOST,
/// MW_BOOTSTRAP (mwrun's rendezvous) and MW_JOB_KEY; the caller's other MW_*
/// variables are passed on. Output is forwarded line by line with a `[rank] `
/// prefix. If a rank fails, the others are stopped (SIGTERM, then SIGKILL
/// after --grace) and mwrun exits with the failed rank's status (128+N for
/// signal N).
#[derive(Debug, Parser)]
#[command(name = "mwrun", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// Number of ranks to start.
    #[arg(short = 'n', long = "np", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub np: u32,

    /// Hosts to spread ranks over, comma-separated, each `host[:slots]`.
    /// Default: inside a Slurm allocation (salloc, sbatch), its nodes and
    /// task slots; else this host.
    #[arg(long, value_name = "H1,H2,...", conflicts_with = "hostfile")]
    pub hosts: Option<String>,

    /// File of hosts: one `host [slots=K]` (or `host:K`) a line; `#` comments.
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,

    /// How ranks fill the hosts' slots: `block` fills each host before the
    /// next, `round-robin` deals one rank per host in turn. Once all slots are
    /// used, placement starts over (oversubscription).
    #[arg(long, value_enum, default_value_t = MapBy::Block, value_name = "POLICY")]
    pub map_by: MapBy,

    /// How ranks on other hosts are started. Default: `srun` inside a
    /// Slurm allocation when the hosts are its nodes (every rank then runs
    /// as a step of the job, on this node too), else `ssh`.
    #[arg(long, value_enum, value_name = "LAUNCHER")]
    pub launcher: Option<Launcher>,

    /// Start ranks on other hosts as `CMD HOST env VAR=VAL... PROG ARGS...`
    /// instead (CMD is split on whitespace), e.g. `ip netns exec`.
    #[arg(long, value_name = "CMD", conflicts_with = "launcher")]
    pub launcher_exec: Option<String>,

    /// Address mwrun's rendezvous server listens on, `IP[:PORT]`.
    /// Default: 127.0.0.1 when every rank is on this host, else 0.0.0.0.
    #[arg(long, value_name = "IP[:PORT]")]
    pub bind: Option<String>,

    /// Address the ranks use to reach mwrun, `HOST[:PORT]` (the port defaults
    /// to the one bound). Default: the bound IP, else this host's name.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub bootstrap_addr: Option<String>,

    /// How ranks started on this host are bound to CPUs: `none` (default)
    /// leaves placement to the scheduler; `share` gives each an equal share
    /// of the CPUs mwrun may use (whole cores together); `auto` does that
    /// when every such rank gets a CPU of its own and there are at least
    /// two, else binds nothing. A bound rank's library threads (its progress
    /// thread) may use all of those CPUs (MW_BACKGROUND_CPUS). Ranks on
    /// other hosts are never bound by mwrun.
    #[arg(long, value_enum, default_value_t = CpuBind::None, value_name = "POLICY")]
    pub cpu_bind: CpuBind,

    /// Set VAR for every rank; a bare VAR passes on mwrun's own value.
    #[arg(short = 'x', long = "env", value_name = "VAR[=VAL]")]
    pub env: Vec<String>,

    /// Forward output as is, without the `[rank] ` prefix.
    #[arg(short = 'q', long = "no-prefix")]
    pub no_prefix: bool,

    /// Stop the job after SECS seconds (exit status 124).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub timeout: Option<Duration>,

    /// Seconds between SIGTERM and SIGKILL when stopping ranks.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, default_value = "3")]
    pub grace: Duration,

    /// The program to run, and its arguments.
    #[arg(value_name = "PROG [ARGS]", required = true, trailing_var_arg = true, num_args = 1..)]
    pub command: Vec<OsString>,
}

const AFTER_HELP: &str = "\
Examples:
  mwrun -n 4 ./app
  mwrun -n 8 --hosts node1:4,node2:4 ./app
  mwrun -n 2 --hosts a,b --launcher-exec 'ip netns exec' --bootstrap-addr 10.0.0.1 ./app
  salloc -N 2 -n 8 mwrun -n 8 ./app      (inside an allocation: its nodes, ranks started by srun)";

/// Rank placement policy over host slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MapBy {
    /// Fill each host's slots before moving to the next host.
    Block,
    /// One rank per host in turn, skipping hosts whose slots are full.
    RoundRobin,
}

/// Remote-execution programs mwrun knows how to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Launcher {
    /// `ssh -o BatchMode=yes HOST env VAR=VAL... PROG ARGS...`, arguments
    /// quoted for the remote shell.
    Ssh,
    /// `srun --nodes=1 --ntasks=1 --overlap --mpi=none ... --nodelist HOST
    /// env VAR=VAL... PROG ARGS...`: a step of the Slurm job mwrun runs in,
    /// for every rank, this host's included.
    Srun,
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if secs.is_nan() || secs < 0.0 {
        return Err(format!("{text:?} is not a non-negative number of seconds"));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("mwrun").chain(args.iter().copied()))
    }

    #[test]
    fn program_arguments_are_not_mwrun_options() {
        let cli = parse(&["-n", "2", "sh", "-c", "echo $MW_RANK", "-n", "--timeout"]).unwrap();
        assert_eq!(cli.np, 2);
        assert_eq!(cli.command, ["sh", "-c", "echo $MW_RANK", "-n", "--timeout"]);
    }

    #[test]
    fn options_parse() {
        let cli = parse(&[
            "-n",
            "4",
            "--hosts",
            "a,b:2",
            "--map-by",
            "round-robin",
            "--launcher-exec",
            "ip netns exec",
            "-x",
            "A=1",
            "--env",
            "B",
            "-q",
            "--timeout",
            "1.5",
            "--grace",
            "0",
            "--cpu-bind",
            "none",
            "prog",
        ])
        .unwrap();
        assert_eq!(cli.cpu_bind, CpuBind::None);
        assert_eq!(cli.map_by, MapBy::RoundRobin);
        assert_eq!(cli.env, ["A=1", "B"]);
        assert!(cli.no_prefix);
        assert_eq!(cli.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(cli.grace, Duration::ZERO);
        assert_eq!(cli.launcher_exec.as_deref(), Some("ip netns exec"));
    }

    #[test]
    fn bad_command_lines_are_refused() {
        assert!(parse(&["-n", "0", "true"]).is_err());
        assert!(parse(&["-n", "2"]).is_err());
        assert!(parse(&["true"]).is_err());
        assert!(parse(&["-n", "2", "--hosts", "a", "--hostfile", "f", "true"]).is_err());
        assert!(parse(&["-n", "2", "--timeout", "soon", "true"]).is_err());
        assert!(parse(&["-n", "2", "--launcher", "ssh", "--launcher-exec", "x", "true"]).is_err());
        assert!(parse(&["-n", "2", "--launcher", "rsh", "true"]).is_err());
        assert_eq!(parse(&["-n", "2", "--launcher", "srun", "true"]).unwrap().launcher, Some(Launcher::Srun));
        assert!(parse(&["-n", "2", "--cpu-bind", "socket", "true"]).is_err());
    }
}
