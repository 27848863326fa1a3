//! The MPI baselines (ops `mpich` and `openmpi`): the project's own small C
//! programs (`mpi/pt2pt_bench.c` for ping-pong, bandwidth, bibw and rate;
//! `mpi/coll_bench.c` for the collectives and N-to-N's MPI_Alltoall),
//! compiled with each MPI's `mpicc` when it is installed and launched with
//! its own launcher, over two paths:
//!
//! | path (`transport`) | MPICH 4 (ch4:ucx)                               | Open MPI 4.1                       |
//! |--------------------|-------------------------------------------------|------------------------------------|
//! | `shm`              | its default on one host (shared memory)         | its default (shared memory)        |
//! | `udp`              | `MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self` (TCP)     | `--mca pml ob1 --mca btl tcp,self` |
//!
//! `udp` names the path, loopback sockets, that memwire's UDP takes; the
//! rows say `"via":"tcp"`. Open MPI runs with `--allow-run-as-root
//! --oversubscribe --bind-to none`.
//!
//! The OpenSHMEM points (ops `mwshmem` and `oshmem`, bench `shmem`) run
//! `bench/shmem_bench.c` the same way: built with memwire's own `oshcc`
//! (`target/shmem/bin/oshcc` beside this binary's `target/`, from `make
//! shmem`) and launched with its `oshrun` (`udp`: `MW_TRANSPORT=udp`), and
//! built with Open MPI's `oshcc` and launched with `mpirun.openmpi` (its
//! `oshrun`; `udp`: `UCX_TLS=tcp,self`, UCX over TCP). Open MPI 4.1's OSHMEM
//! crashes in `shmem_finalize` on the test machine: the launch then ends
//! with a problem noted, and the points it printed are kept. They always
//! run on this host.
//!
//! Under an mwrun job that spans hosts a launch carries [`Hosts`]: the
//! ranks' data addresses, and it runs across the same hosts, rank 0's host
//! first (the launch is started there, by rank 0):
//!
//! - MPICH: `mpiexec.mpich -launcher ssh [-launcher-exec AGENT] -localhost
//!   ADDR0 -hosts ADDR0:K,ADDR1:K …` with `MPIR_CVAR_NOLOCAL=1
//!   UCX_TLS=tcp,self` (hosts that share one kernel, as network namespaces
//!   do, would otherwise meet through UCX's shared memory);
//! - Open MPI: `mpirun.openmpi --host ADDR0:K,… [--mca plm_rsh_agent AGENT]
//!   --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include ADDR0/31,…
//!   --mca oob_tcp_if_include ADDR0/31,…` (each host's interface is the one
//!   holding its own address).
//!
//! AGENT is `--mpi-launcher-exec`, else `scripts/netns-exec` of this
//! repository when the addresses are hosts of `scripts/netns-cluster`
//! (`/run/netns-cluster/*.hosts`), else ssh. Both launchers call it as they
//! call ssh (`AGENT -x HOST WORDS…`, the words one command for a shell). The compiled programs live
//! under the temporary directory, so on a real cluster that directory must
//! be shared (or the programs copied) like any MPI program. The C sources are built into this
//! binary and compiled on first use into a cache directory under the
//! temporary directory, keyed by their content. A launch that does not end
//! within its time limit, or does not exit soon after printing its last
//! point, is stopped (the launcher, then its descendants) and reported; the
//! points it printed are kept.
//!
//! Owns: compiling, launching and reading back the programs. Must not:
//! print points (the runner emits the rows).
// `unsafe` only to signal the processes of a launch that overran.
#![allow(unsafe_code)]

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::row::Row;

/// Where a launch across hosts runs its ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hosts {
    /// The mwrun ranks' data addresses, in rank order (rank 0's host is
    /// where the launcher runs).
    pub addrs: Vec<std::net::IpAddr>,
    /// The remote-exec command replacing ssh (`None`: ssh).
    pub agent: Option<String>,
}

impl Hosts {
    /// The hosts of a job whose ranks are at `addrs`, started with `agent`
    /// (else the netns cluster's `scripts/netns-exec` when these are its
    /// hosts, else ssh).
    pub fn new(addrs: Vec<std::net::IpAddr>, agent: Option<String>) -> Hosts {
        let agent = agent.or_else(|| netns_agent(&addrs));
        Hosts { addrs, agent }
    }

    /// The first `ranks` ranks' hosts with how many of them each runs, in
    /// order of first appearance.
    pub fn slots(&self, ranks: u32) -> Vec<(std::net::IpAddr, u32)> {
        let mut out: Vec<(std::net::IpAddr, u32)> = Vec::new();
        for ip in self.addrs.iter().cycle().take(ranks as usize) {
            match out.iter_mut().find(|(a, _)| a == ip) {
                Some((_, k)) => *k += 1,
                None => out.push((*ip, 1)),
            }
        }
        out
    }
}

/// `scripts/netns-exec` of the repository this binary was built in
/// (`target/*/mwbench`), when every address is a host of a netns cluster.
fn netns_agent(addrs: &[std::net::IpAddr]) -> Option<String> {
    let mut known = String::new();
    for entry in std::fs::read_dir("/run/netns-cluster").ok()?.flatten() {
        if entry.path().extension().is_some_and(|e| e == "hosts") {
            known.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    let listed = |ip: &std::net::IpAddr| known.lines().any(|l| l.split_whitespace().next() == Some(&ip.to_string()));
    if !addrs.iter().all(listed) {
        return None;
    }
    let exe = std::env::current_exe().ok()?;
    let script = exe.parent()?.parent()?.parent()?.join("scripts/netns-exec");
    script.is_file().then(|| script.display().to_string())
}

/// The two MPI libraries, as ops.
pub const LABELS: &[&str] = &["mpich", "openmpi"];
/// The two OpenSHMEM libraries, as ops: memwire's face and Open MPI's OSHMEM.
pub const SHMEM_LABELS: &[&str] = &["mwshmem", "oshmem"];

/// `target/shmem/bin/NAME` of the repository this binary was built in
/// (`target/*/mwbench`): memwire's OpenSHMEM tools.
fn face_tool(name: &str) -> String {
    let exe = std::env::current_exe().unwrap_or_default();
    let target = exe.parent().and_then(Path::parent).unwrap_or(Path::new("target"));
    target.join("shmem/bin").join(name).display().to_string()
}

/// Which program a launch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    Pt2pt,
    Coll,
    /// `bench/shmem_bench.c`, for the OpenSHMEM labels.
    Shmem,
}

impl Program {
    fn source(self) -> (&'static str, &'static str) {
        match self {
            Program::Pt2pt => ("pt2pt_bench", include_str!("../mpi/pt2pt_bench.c")),
            Program::Coll => ("coll_bench", include_str!("../mpi/coll_bench.c")),
            Program::Shmem => ("shmem_bench", include_str!("../../../bench/shmem_bench.c")),
        }
    }
}

/// One launch of an MPI program.
#[derive(Debug, Clone)]
pub struct Launch {
    /// `mpich` or `openmpi`.
    pub label: &'static str,
    /// `shm` or `udp` (TCP).
    pub transport: &'static str,
    pub program: Program,
    pub ranks: u32,
    /// The program's own arguments.
    pub args: Vec<String>,
    /// Rewrite collective alltoall rows as N-to-N rows (`order: alltoall`).
    pub as_nton: bool,
    /// How many points the launch prints when all goes well.
    pub expect: usize,
    /// Across the hosts of an mwrun job (`None`: on this host).
    pub hosts: Option<Hosts>,
}

fn compiler(label: &str) -> String {
    match label {
        "mpich" => "mpicc.mpich".into(),
        "mwshmem" => face_tool("oshcc"),
        "oshmem" => "oshcc".into(),
        _ => "mpicc.openmpi".into(),
    }
}

fn launcher(label: &str) -> String {
    match label {
        "mpich" => "mpiexec.mpich".into(),
        "mwshmem" => face_tool("oshrun"),
        _ => "mpirun.openmpi".into(),
    }
}

/// Whether `label`'s compiler and launcher are there (on the PATH; for
/// `mwshmem`, built; for `oshmem`, an `oshcc` that links Open MPI's
/// liboshmem, not memwire's should that be on the PATH too).
pub fn installed(label: &str) -> bool {
    let on_path = |name: &str| {
        std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
    };
    match label {
        "mwshmem" => Path::new(&compiler(label)).is_file() && Path::new(&launcher(label)).is_file(),
        "oshmem" => {
            on_path(&launcher(label))
                && Command::new(compiler(label))
                    .arg("-showme:link")
                    .output()
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("-loshmem"))
        }
        _ => on_path(&compiler(label)) && on_path(&launcher(label)),
    }
}

/// Compiles `program` with `label`'s mpicc into the cache (once per content).
fn executable(label: &str, program: Program) -> Result<PathBuf, String> {
    let (name, source) = program.source();
    let mut hasher = DefaultHasher::new();
    // The compiler's path too: memwire's oshcc links the library of its own tree.
    (label, compiler(label), source).hash(&mut hasher);
    let dir = std::env::temp_dir().join("mwbench-mpi");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let exe = dir.join(format!("{name}_{label}_{:016x}", hasher.finish()));
    if exe.is_file() {
        return Ok(exe);
    }
    let tag = format!("{}_{}", std::process::id(), name);
    let src = dir.join(format!("{tag}.c"));
    std::fs::write(&src, source).map_err(|e| format!("{}: {e}", src.display()))?;
    let tmp = dir.join(format!("{tag}_{label}.tmp"));
    let out = Command::new(compiler(label))
        .args(["-O2", "-o"])
        .arg(&tmp)
        .arg(&src)
        .output()
        .map_err(|e| format!("{}: {e}", compiler(label)))?;
    let _ = std::fs::remove_file(&src);
    if !out.status.success() {
        return Err(format!("{} failed: {}", compiler(label), String::from_utf8_lossy(&out.stderr)));
    }
    // Rename is atomic: a concurrent mwbench sees the old name or the whole file.
    std::fs::rename(&tmp, &exe).map_err(|e| format!("{}: {e}", exe.display()))?;
    Ok(exe)
}

fn command(launch: &Launch, exe: &PathBuf) -> Command {
    let mut cmd = Command::new(launcher(launch.label));
    if launch.label == "mwshmem" {
        if launch.transport == "udp" {
            cmd.env("MW_TRANSPORT", "udp");
        } else {
            cmd.env_remove("MW_TRANSPORT");
        }
        // mwrun's `[rank] ` prefix would hide the JSON lines.
        cmd.args(["-np", &launch.ranks.to_string(), "--no-prefix"]).arg(exe).args(&launch.args);
        return cmd;
    }
    if let Some(hosts) = &launch.hosts {
        cmd.args(across_hosts_args(launch, hosts));
        if launch.label == "mpich" {
            cmd.envs([("MPIR_CVAR_NOLOCAL", "1"), ("UCX_TLS", "tcp,self")]);
        }
        cmd.args(["-n", &launch.ranks.to_string()]).arg(exe).args(&launch.args);
        return cmd;
    }
    if launch.label == "openmpi" || launch.label == "oshmem" {
        cmd.args(["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]);
        if launch.transport == "udp" && launch.label == "oshmem" {
            cmd.args(["-x", "UCX_TLS=tcp,self"]);
        } else if launch.transport == "udp" {
            cmd.args(["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]);
        }
    } else if launch.transport == "udp" {
        cmd.envs([("MPIR_CVAR_NOLOCAL", "1"), ("UCX_TLS", "tcp,self")]);
    }
    cmd.args(["-n", &launch.ranks.to_string()]).arg(exe).args(&launch.args);
    cmd
}

/// The launcher's options (before `-n`) of a launch across `hosts`.
fn across_hosts_args(launch: &Launch, hosts: &Hosts) -> Vec<String> {
    let slots = hosts.slots(launch.ranks);
    let host_list = slots.iter().map(|(ip, k)| format!("{ip}:{k}")).collect::<Vec<_>>().join(",");
    let mut args: Vec<String> = Vec::new();
    let mut push = |words: &[&str]| args.extend(words.iter().map(|w| w.to_string()));
    if launch.label == "mpich" {
        push(&["-launcher", "ssh"]);
        if let Some(agent) = &hosts.agent {
            push(&["-launcher-exec", agent]);
        }
        // Hydra's control port, as the other hosts reach this one.
        push(&["-localhost", &slots[0].0.to_string(), "-hosts", &host_list]);
    } else {
        // Each host's own address as a network, so each picks the interface
        // holding it. Not /32: Open MPI 4.1 matches every interface against
        // a /32 (lo and eth0 alike here, and its ranks then never met).
        let nets = slots
            .iter()
            .map(|(ip, _)| format!("{ip}/{}", if ip.is_ipv4() { 31 } else { 127 }))
            .collect::<Vec<_>>()
            .join(",");
        push(&["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--host", &host_list]);
        if let Some(agent) = &hosts.agent {
            // Open MPI hands the agent one command for a remote shell (its
            // words quoted for it), as to ssh; `-x` (no X11, as Hydra's ssh
            // launcher passes too) makes scripts/netns-exec run it that way.
            push(&["--mca", "plm_rsh_agent", &format!("{agent} -x")]);
        }
        push(&["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]);
        push(&["--mca", "btl_tcp_if_include", &nets, "--mca", "oob_tcp_if_include", &nets]);
    }
    args
}

/// Every descendant of `root`, from the parent links in `/proc` (Hydra
/// starts its proxies and ranks in sessions of their own, so a process
/// group does not reach them).
fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // The fields after the parenthesized command name: state, ppid, …
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a process this launch started (the launcher or one
    // of its descendants, listed just before); no memory is involved.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Stops a launch: SIGTERM to the launcher (Hydra and ORTE then end their
/// ranks), and after five seconds SIGKILL to whatever of it is left.
fn stop(child: &mut Child) {
    let family = descendants(child.id());
    signal(child.id(), libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) && family.iter().all(|&p| !Path::new(&format!("/proc/{p}")).exists())
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for &pid in family.iter().chain(std::iter::once(&child.id())) {
        signal(pid, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// How long a launch that has printed every point it was asked for may
/// take to exit (MPICH over TCP with 4 ranks was seen to hang in
/// `MPI_Finalize` after its last point).
const EXIT_GRACE: Duration = Duration::from_secs(10);

/// Longest silence (no new point) before a launch is taken for hung; one
/// that hung before its first point is started once more (MPICH over TCP
/// was seen to hang at start-up now and then on a loaded machine).
const SILENCE: Duration = Duration::from_secs(90);

/// Runs one launch; its rows, or why there are none. `limit` is the step
/// limit of one point: the launch may be silent that long (at most
/// [`SILENCE`]) and take ten times that in all. Rows a launch printed
/// before it failed or had to be stopped are kept.
pub fn run(launch: &Launch, limit: Duration) -> (Vec<Row>, Option<String>) {
    let (rows, problem) = run_once(launch, limit);
    let first = match problem {
        Some(p) if rows.is_empty() && p.contains("no point within") => p,
        other => return (rows, other),
    };
    let (rows, again) = run_once(launch, limit);
    let note = match again {
        Some(p) => format!("{p} (second try; the first printed nothing either)"),
        None => format!("{first}; started again, the second try worked"),
    };
    (rows, Some(note))
}

fn run_once(launch: &Launch, limit: Duration) -> (Vec<Row>, Option<String>) {
    let exe = match executable(launch.label, launch.program) {
        Ok(exe) => exe,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut cmd = command(launch, &exe);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return (Vec::new(), Some(format!("{}: {e}", launcher(launch.label)))),
    };
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let (lines_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let start = Instant::now();
    let mut rows = Vec::new();
    let mut all_since: Option<Instant> = None;
    let mut last_point = Instant::now();
    let status = loop {
        while let Ok(line) = lines.try_recv() {
            if let Some(row) = parse_line(launch, &line) {
                rows.push(row);
                last_point = Instant::now();
            }
        }
        if rows.len() >= launch.expect && all_since.is_none() {
            all_since = Some(Instant::now());
        }
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if all_since.is_some_and(|t| t.elapsed() > EXIT_GRACE) => {
                stop(&mut child);
                break Err(format!("printed every point but did not exit within {} s; stopped", EXIT_GRACE.as_secs()));
            }
            Ok(None) if all_since.is_none() && last_point.elapsed() > SILENCE.min(limit) => {
                stop(&mut child);
                let what = if rows.is_empty() { "no point" } else { "no further point" };
                break Err(format!("{what} within {} s; stopped", SILENCE.min(limit).as_secs()));
            }
            Ok(None) if start.elapsed() > limit * 10 => {
                stop(&mut child);
                break Err(format!("stopped after {} s without finishing", (limit * 10).as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break Err(format!("waiting for the launcher: {e}")),
        }
    };
    // The reader ends with the pipe; take what it still had.
    let deadline = Instant::now() + Duration::from_secs(1);
    while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        rows.extend(parse_line(launch, &line));
    }
    let errors = if err_reader.is_finished() { err_reader.join().unwrap_or_default() } else { String::new() };
    let problem = match status {
        Ok(s) if s.success() && rows.len() < launch.expect => {
            Some(format!("exited with {s} after {} of {} points: {}", rows.len(), launch.expect, errors.trim()))
        }
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!("exited with {s}: {}", errors.trim())),
        Err(e) => Some(e),
    };
    let problem =
        problem.map(|p| format!("{} over {} ({}): {p}", launch.label, launch.transport, launcher(launch.label)));
    (rows, problem)
}

/// One line of the program's output as a row of this launch.
pub fn parse_line(launch: &Launch, line: &str) -> Option<Row> {
    let mut v: serde_json::Value = serde_json::from_str(line).ok()?;
    let o = v.as_object_mut()?;
    o.insert("op".into(), launch.label.into());
    o.insert("transport".into(), launch.transport.into());
    let via = match (launch.label, launch.transport) {
        ("mwshmem", t) => t,
        (_, "udp") => "tcp",
        _ => "shm",
    };
    o.insert("via".into(), via.into());
    if launch.hosts.is_some() {
        o.insert("path".into(), "hosts".into());
    }
    if launch.program != Program::Shmem {
        o.remove("algo");
    }
    if launch.program == Program::Coll {
        o.insert("ranks".into(), launch.ranks.into());
    }
    let mut row = Row::from_json(&v).ok()?;
    if launch.program == Program::Coll && !launch.as_nton {
        row.algo = Some(launch.label.into());
    }
    if launch.as_nton {
        let n = launch.ranks as f64;
        row.bench = "nton".into();
        row.order = Some("alltoall".into());
        row.mbps = row.median_us.map(|m| n * (n - 1.0) * row.size as f64 / m.max(1e-9));
    }
    Some(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(program: Program, as_nton: bool) -> Launch {
        Launch {
            label: "openmpi",
            transport: "udp",
            program,
            ranks: 4,
            args: Vec::new(),
            as_nton,
            expect: 1,
            hosts: None,
        }
    }

    #[test]
    fn launches_across_hosts_name_every_host_with_its_slots() {
        let ips: Vec<std::net::IpAddr> = vec!["10.77.0.1".parse().unwrap(), "10.77.0.2".parse().unwrap()];
        let hosts = Hosts { addrs: ips, agent: Some("/repo/scripts/netns-exec".into()) };
        assert_eq!(hosts.slots(2).len(), 2);
        assert_eq!(hosts.slots(4)[1].1, 2, "4 ranks on 2 hosts: 2 each");
        let mut l = Launch { ranks: 2, hosts: Some(hosts.clone()), ..launch(Program::Pt2pt, false) };
        let args = across_hosts_args(&l, &hosts).join(" ");
        assert!(args.contains("--host 10.77.0.1:1,10.77.0.2:1"), "{args}");
        assert!(args.contains("--mca plm_rsh_agent /repo/scripts/netns-exec -x"), "{args}");
        assert!(args.contains("btl_tcp_if_include 10.77.0.1/31,10.77.0.2/31"), "{args}");
        l.label = "mpich";
        let args = across_hosts_args(&l, &hosts).join(" ");
        assert!(args.contains("-launcher-exec /repo/scripts/netns-exec -localhost 10.77.0.1"), "{args}");
        assert!(args.contains("-hosts 10.77.0.1:1,10.77.0.2:1"), "{args}");
        let row = parse_line(&l, r#"{"bench":"pingpong","size":8,"iters":100,"median_us":2.5,"p99_us":4.0}"#).unwrap();
        assert_eq!(row.path.as_deref(), Some("hosts"));
    }

    #[test]
    fn program_lines_become_rows_of_their_launch() {
        let l = launch(Program::Pt2pt, false);
        let row = parse_line(&l, r#"{"bench":"pingpong","size":8,"iters":100,"median_us":2.5,"p99_us":4.0}"#).unwrap();
        assert_eq!((row.op.as_str(), row.transport.as_str(), row.via.as_deref()), ("openmpi", "udp", Some("tcp")));
        assert_eq!(row.median_us, Some(2.5));
        assert!(parse_line(&l, "some launcher chatter").is_none());
        let coll = r#"{"bench":"alltoall","op":"x","algo":"x","transport":"tcp","ranks":4,"size":1000,"iters":10,"median_us":100.0,"p99_us":200.0}"#;
        let row = parse_line(&launch(Program::Coll, false), coll).unwrap();
        assert_eq!((row.bench.as_str(), row.algo.as_deref(), row.ranks), ("alltoall", Some("openmpi"), Some(4)));
        let row = parse_line(&launch(Program::Coll, true), coll).unwrap();
        assert_eq!((row.bench.as_str(), row.order.as_deref()), ("nton", Some("alltoall")));
        // 4 ranks × 3 peers × 1000 B in 100 µs = 120 MB/s.
        assert_eq!(row.mbps, Some(120.0));
    }

    #[test]
    fn shmem_lines_keep_their_routine_and_say_which_path_carried_them() {
        let line =
            r#"{"bench":"shmem","algo":"put_signal","ranks":2,"size":8,"iters":100,"median_us":0.4,"p99_us":0.5}"#;
        let mw = Launch { label: "mwshmem", program: Program::Shmem, ranks: 2, ..launch(Program::Shmem, false) };
        let row = parse_line(&mw, line).unwrap();
        assert_eq!(
            (row.op.as_str(), row.algo.as_deref(), row.via.as_deref()),
            ("mwshmem", Some("put_signal"), Some("udp"))
        );
        let ompi = Launch { label: "oshmem", ..mw.clone() };
        let row = parse_line(&ompi, &line.replace('}', r#","form":"1.4"}"#)).unwrap();
        assert_eq!((row.op.as_str(), row.via.as_deref()), ("oshmem", Some("tcp")));
        assert_eq!(row.extra.get("form").and_then(|v| v.as_str()), Some("1.4"));
        let args: Vec<String> =
            command(&mw, &PathBuf::from("/x")).get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args[..3], ["-np", "2", "--no-prefix"]);
        assert!(compiler("mwshmem").ends_with("shmem/bin/oshcc") && launcher("mwshmem").ends_with("shmem/bin/oshrun"));
    }
}
