//! `mwrun`: starts a memwire job, like `mpiexec`.
//!
//! Owns: parsing the command line, placing ranks on hosts, running the job's
//! rendezvous server (from `mw-bootstrap`), starting the ranks (directly, or
//! through ssh, srun inside a Slurm allocation, or `--launcher-exec`),
//! forwarding their output, and stopping
//! the job when a rank fails or mwrun is told to stop.
//!
//! Must not: know anything of memwire's protocol (ranks may be any program,
//! one that never joins the rendezvous included), or leave ranks running when
//! it exits. `unsafe` is denied except in `sys`, the libc island.
#![deny(unsafe_code)]

mod allocation;
mod cli;
mod cpus;
mod hosts;
mod launch;
mod output;
mod supervise;
mod sys;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use clap::Parser;
use mw_bootstrap::{job_key_to_hex, random_job_key, BootstrapError, RendezvousServer};

use cli::Cli;
use hosts::{HostError, HostSpec};
use launch::{EnvOptionError, JobSpec, RemoteExec};
use supervise::{report, Job, StartError};

/// Why mwrun could not start the job.
#[derive(Debug, thiserror::Error)]
enum MwrunError {
    #[error(transparent)]
    Hosts(#[from] HostError),
    #[error(transparent)]
    EnvOption(#[from] EnvOptionError),
    #[error("rendezvous: {0}")]
    Bootstrap(#[from] BootstrapError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("{option} {value:?}: {reason}")]
    Option { option: &'static str, value: String, reason: &'static str },
    #[error("{context}: {source}")]
    Io { context: &'static str, source: std::io::Error },
}

impl MwrunError {
    fn exit_code(&self) -> u8 {
        match self {
            MwrunError::Start(e) => e.exit_code() as u8,
            _ => 1,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        // Statuses above 255 cannot be expressed; the low byte is what a
        // shell would see anyway.
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            report(&e.to_string());
            ExitCode::from(e.exit_code())
        }
    }
}

fn run(cli: Cli) -> Result<i32, MwrunError> {
    let my_hostname = hosts::my_hostname();
    // Inside a Slurm allocation, with no hosts named, its nodes are the hosts.
    let slurm_nodes = match (&cli.hosts, &cli.hostfile) {
        (None, None) => allocation::from_env(|name| std::env::var(name).ok())?,
        _ => None,
    };
    let in_allocation = slurm_nodes.is_some();
    let host_specs = match (&cli.hosts, &cli.hostfile, slurm_nodes) {
        (Some(list), _, _) => hosts::parse_host_list(list)?,
        (None, Some(path), _) => {
            let shown = path.display().to_string();
            let text =
                std::fs::read_to_string(path).map_err(|source| HostError::Read { path: shown.clone(), source })?;
            hosts::parse_hostfile(&shown, &text)?
        }
        (None, None, Some(nodes)) => nodes,
        (None, None, None) => vec![HostSpec { name: my_hostname.clone(), slots: None }],
    };
    let placements = hosts::place(&host_specs, cli.np, cli.map_by);
    let launcher = match cli.launcher {
        Some(launcher) => launcher,
        None if in_allocation && cli.launcher_exec.is_none() => cli::Launcher::Srun,
        None => cli::Launcher::Ssh,
    };
    // srun starts every rank, so that each is a step Slurm accounts, signals and cleans up.
    let local: Vec<bool> = placements
        .iter()
        .map(|p| launcher != cli::Launcher::Srun && hosts::is_local_host(&p.host, &my_hostname))
        .collect();
    let remote = match &cli.launcher_exec {
        Some(command) => {
            let words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
            if words.is_empty() {
                return Err(MwrunError::Option {
                    option: "--launcher-exec",
                    value: command.clone(),
                    reason: "names no command",
                });
            }
            RemoteExec::Exec(words)
        }
        None => match launcher {
            cli::Launcher::Ssh => RemoteExec::Ssh,
            cli::Launcher::Srun => RemoteExec::Exec(allocation::SRUN_WORDS.map(str::to_owned).to_vec()),
        },
    };
    let user_env = launch::parse_env_options(&cli.env, |name| std::env::var_os(name))?;

    let job_key = random_job_key()?;
    // Ranks srun starts on this very node still reach a loopback rendezvous.
    let all_local = placements.iter().all(|p| hosts::is_local_host(&p.host, &my_hostname));
    let (bind, advertised) = rendezvous_addresses(cli.bind.as_deref(), cli.bootstrap_addr.as_deref(), all_local)?;
    let server = RendezvousServer::bind(&bind.to_string(), cli.np, job_key)?;
    let bootstrap_addr = advertised.with_port(server.local_addr().port(), &my_hostname);
    // Serves in the background for as long as mwrun lives; a job whose ranks
    // never join simply never talks to it.
    let _server = server.spawn().map_err(|source| MwrunError::Io { context: "cannot start the rendezvous", source })?;

    let mut command = cli.command.into_iter();
    let spec = JobSpec {
        program: command.next().expect("clap requires a program"),
        args: command.collect(),
        size: cli.np,
        bootstrap_addr,
        job_key_hex: job_key_to_hex(&job_key),
        user_env,
        passthrough_env: launch::passthrough_env(std::env::vars_os()),
        remote,
    };
    sys::catch_termination_signals()
        .map_err(|source| MwrunError::Io { context: "cannot install signal handlers", source })?;
    let binding = local_binding(cli.cpu_bind, &local, &spec.user_env)?;
    let job = Job::start(&spec, &placements, &local, &binding, !cli.no_prefix, cli.grace)?;
    Ok(job.supervise(cli.timeout))
}

/// Each rank's binding under `policy` (`None`: unbound), dealt out over the
/// ranks started on this host in rank order; ranks elsewhere stay unbound.
/// A bound rank's library threads get every CPU of the job here
/// (`MW_BACKGROUND_CPUS`) unless the caller set that variable itself.
fn local_binding(
    policy: cpus::CpuBind,
    local: &[bool],
    user_env: &[(String, std::ffi::OsString)],
) -> Result<Vec<Option<cpus::Binding>>, MwrunError> {
    let mut binding = vec![None; local.len()];
    if policy == cpus::CpuBind::None {
        return Ok(binding);
    }
    let usable = cpus::usable_in_topology_order()
        .map_err(|source| MwrunError::Io { context: "cannot read mwrun's CPU affinity", source })?;
    let local_ranks: Vec<usize> = (0..local.len()).filter(|&rank| local[rank]).collect();
    let caller_set = std::env::var_os(cpus::BACKGROUND_CPUS).is_some()
        || user_env.iter().any(|(name, _)| name == cpus::BACKGROUND_CPUS);
    let background = (!caller_set).then(|| cpus::cpu_list(&usable));
    if let Some(shares) = cpus::plan(policy, &usable, local_ranks.len()) {
        for (rank, share) in local_ranks.into_iter().zip(shares) {
            binding[rank] = Some(cpus::Binding { share: cpus::cpu_set(&share), background: background.clone() });
        }
    }
    Ok(binding)
}

/// The address ranks dial, less the port until the server is bound.
#[derive(Debug, PartialEq, Eq)]
struct Advertised {
    host: Option<String>,
    port: Option<u16>,
}

impl Advertised {
    fn with_port(&self, bound_port: u16, my_hostname: &str) -> String {
        let host = self.host.as_deref().unwrap_or(my_hostname);
        let port = self.port.unwrap_or(bound_port);
        if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        }
    }
}

/// Works out where the rendezvous listens and what ranks dial. Listens on
/// loopback when every rank is local, else on all interfaces; ranks dial
/// `--bootstrap-addr`, else the bound IP when it is a specific one, else this
/// host's name. A port in either option is used for both.
fn rendezvous_addresses(
    bind: Option<&str>,
    advertise: Option<&str>,
    all_local: bool,
) -> Result<(SocketAddr, Advertised), MwrunError> {
    let (bind_ip, bind_port) = match bind {
        None if all_local => (IpAddr::V4(Ipv4Addr::LOCALHOST), None),
        None => (IpAddr::V4(Ipv4Addr::UNSPECIFIED), None),
        Some(text) => match (text.parse::<SocketAddr>(), text.parse::<IpAddr>()) {
            (Ok(addr), _) => (addr.ip(), Some(addr.port())),
            (_, Ok(ip)) => (ip, None),
            _ => {
                let reason = "expected IP or IP:PORT";
                return Err(MwrunError::Option { option: "--bind", value: text.to_owned(), reason });
            }
        },
    };
    let (host, port) = match advertise {
        None => (None, None),
        Some(text) => {
            let (host, port) = split_host_port(text);
            if host.is_empty() {
                let reason = "expected HOST or HOST:PORT";
                return Err(MwrunError::Option { option: "--bootstrap-addr", value: text.to_owned(), reason });
            }
            (Some(host), port)
        }
    };
    let host = host.or_else(|| (!bind_ip.is_unspecified()).then(|| bind_ip.to_string()));
    let bind = SocketAddr::new(bind_ip, bind_port.or(port).unwrap_or(0));
    Ok((bind, Advertised { host, port: port.or(bind_port) }))
}

/// `host:port`, `[v6]:port`, or a bare host (an IPv6 literal included).
fn split_host_port(text: &str) -> (String, Option<u16>) {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return (addr.ip().to_string(), Some(addr.port()));
    }
    match text.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse() {
            Ok(port) => (host.to_owned(), Some(port)),
            Err(_) => (text.to_owned(), None),
        },
        _ => (text.trim_matches(['[', ']']).to_owned(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(bind: Option<&str>, advertise: Option<&str>, all_local: bool) -> (String, String) {
        let (bind, advertised) = rendezvous_addresses(bind, advertise, all_local).unwrap();
        (bind.to_string(), advertised.with_port(4242, "me"))
    }

    #[test]
    fn local_jobs_use_loopback() {
        assert_eq!(addrs(None, None, true), ("127.0.0.1:0".into(), "127.0.0.1:4242".into()));
    }

    #[test]
    fn multi_host_jobs_listen_everywhere_and_advertise_the_host_name() {
        assert_eq!(addrs(None, None, false), ("0.0.0.0:0".into(), "me:4242".into()));
        assert_eq!(addrs(None, Some("10.0.0.1"), false), ("0.0.0.0:0".into(), "10.0.0.1:4242".into()));
        assert_eq!(addrs(None, Some("head:5000"), false), ("0.0.0.0:5000".into(), "head:5000".into()));
        assert_eq!(addrs(Some("10.0.0.1"), None, false), ("10.0.0.1:0".into(), "10.0.0.1:4242".into()));
        assert_eq!(addrs(Some("0.0.0.0:6000"), None, false), ("0.0.0.0:6000".into(), "me:6000".into()));
        assert_eq!(addrs(None, Some("fe80::1"), false), ("0.0.0.0:0".into(), "[fe80::1]:4242".into()));
    }

    #[test]
    fn bad_addresses_are_refused_by_option_name() {
        let err = rendezvous_addresses(Some("nowhere"), None, true).unwrap_err().to_string();
        assert_eq!(err, "--bind \"nowhere\": expected IP or IP:PORT");
        assert!(rendezvous_addresses(None, Some(":80"), true).is_err());
    }
}
