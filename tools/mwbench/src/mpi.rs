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
//! --oversubscribe --bind-to none`. The C sources are built into this
//! binary and compiled on first use into a cache directory under the
//! temporary directory, keyed by their content. A launch that does not end
//! within its time limit is stopped (its whole process group) and reported.
//!
//! Owns: compiling, launching and reading back the programs. Must not:
//! print points (the runner emits the rows).
// `unsafe` only to signal the process group of a launch that overran.
#![allow(unsafe_code)]

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::row::Row;

/// The two MPI libraries, as ops.
pub const LABELS: &[&str] = &["mpich", "openmpi"];

/// Which program a launch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    Pt2pt,
    Coll,
}

impl Program {
    fn source(self) -> (&'static str, &'static str) {
        match self {
            Program::Pt2pt => ("pt2pt_bench", include_str!("../mpi/pt2pt_bench.c")),
            Program::Coll => ("coll_bench", include_str!("../mpi/coll_bench.c")),
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
}

fn compiler(label: &str) -> &'static str {
    if label == "mpich" {
        "mpicc.mpich"
    } else {
        "mpicc.openmpi"
    }
}

fn launcher(label: &str) -> &'static str {
    if label == "mpich" {
        "mpiexec.mpich"
    } else {
        "mpirun.openmpi"
    }
}

/// Whether `label`'s compiler and launcher are on the PATH.
pub fn installed(label: &str) -> bool {
    let on_path = |name: &str| {
        std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
    };
    on_path(compiler(label)) && on_path(launcher(label))
}

/// Compiles `program` with `label`'s mpicc into the cache (once per content).
fn executable(label: &str, program: Program) -> Result<PathBuf, String> {
    let (name, source) = program.source();
    let mut hasher = DefaultHasher::new();
    (label, source).hash(&mut hasher);
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
    if launch.label == "openmpi" {
        cmd.args(["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]);
        if launch.transport == "udp" {
            cmd.args(["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]);
        }
    } else if launch.transport == "udp" {
        cmd.envs([("MPIR_CVAR_NOLOCAL", "1"), ("UCX_TLS", "tcp,self")]);
    }
    cmd.args(["-n", &launch.ranks.to_string()]).arg(exe).args(&launch.args);
    cmd
}

/// Stops the launch's whole process group (the launcher and the ranks it
/// started): SIGTERM, then SIGKILL after two seconds.
fn stop_group(child: &mut std::process::Child) {
    let group = child.id() as libc::pid_t;
    // SAFETY: kill(2) with a negative pid signals the process group our own
    // child leads (it was started with `process_group(0)`); no memory is involved.
    unsafe { libc::kill(-group, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: as above.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.wait();
}

/// Runs one launch; its rows, or why there are none. Rows already printed
/// by a launch that then fails are kept.
pub fn run(launch: &Launch, limit: Duration) -> (Vec<Row>, Option<String>) {
    let exe = match executable(launch.label, launch.program) {
        Ok(exe) => exe,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut cmd = command(launch, &exe);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null()).process_group(0);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return (Vec::new(), Some(format!("{}: {e}", launcher(launch.label)))),
    };
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() > limit => {
                stop_group(&mut child);
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    let text = out_reader.join().unwrap_or_default();
    let errors = err_reader.join().unwrap_or_default();
    let rows: Vec<Row> = text.lines().filter_map(|line| parse_line(launch, line)).collect();
    let problem = match status {
        Some(s) if s.success() => None,
        Some(s) => Some(format!("exited with {s}: {}", errors.trim())),
        None => Some(format!("stopped after {} s without finishing", limit.as_secs())),
    };
    (rows, problem.map(|p| format!("{} over {} ({}): {p}", launch.label, launch.transport, launcher(launch.label))))
}

/// One line of the program's output as a row of this launch.
pub fn parse_line(launch: &Launch, line: &str) -> Option<Row> {
    let mut v: serde_json::Value = serde_json::from_str(line).ok()?;
    let o = v.as_object_mut()?;
    o.insert("op".into(), launch.label.into());
    o.insert("transport".into(), launch.transport.into());
    o.insert("via".into(), if launch.transport == "udp" { "tcp" } else { "shm" }.into());
    o.remove("algo");
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
        Launch { label: "openmpi", transport: "udp", program, ranks: 4, args: Vec::new(), as_nton }
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
}
