//! Shared by the launcher tests: finding the binaries, running a command
//! with a time limit, a netns test cluster that removes itself, and starting
//! ranks with an inherited PMI socket.

#![allow(dead_code)] // each test file uses its own subset

pub mod spawn;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `target/<profile>/`, found from this test binary (`target/<profile>/deps/…`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent().and_then(Path::parent).expect("test binary lives in target/<profile>/deps").to_path_buf()
}

/// The `hello_rma` example, which `cargo test` builds with this package.
pub fn hello_rma() -> PathBuf {
    let path = target_dir().join("examples/hello_rma");
    assert!(path.exists(), "{} is missing: cargo test builds the memwire examples", path.display());
    path
}

/// mwrun, built by `cargo test --workspace` (as `make test` runs it).
pub fn mwrun() -> PathBuf {
    let path = target_dir().join("mwrun");
    assert!(
        path.exists(),
        "{} is missing: build it first (cargo build -p mwrun, with --release for a release test run; \
         make test builds the whole workspace)",
        path.display()
    );
    path
}

/// `scripts/<name>` of this repository.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts").join(name).canonicalize().expect("script exists")
}

/// The first of `names` found on PATH.
pub fn which(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file()))
}

/// Whether this process may create network namespaces.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

/// Waits for `child` at most `limit` (a hung job must fail the test, not
/// hang it), killing its process group on expiry. Output is collected.
pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    let mut out = child.stdout.take().expect("stdout piped");
    let mut err = child.stderr.take().expect("stderr piped");
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf);
        buf
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.kill();
            let _ = child.wait();
            let stderr = err_reader.join().unwrap_or_default();
            panic!("still running after {limit:?}, killed; stderr: {}", String::from_utf8_lossy(&stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: out_reader.join().unwrap_or_default(), stderr: err_reader.join().unwrap_or_default() }
}

/// Runs `command` (in its own process group) with a time limit.
pub fn run(command: &mut Command, limit: Duration) -> Output {
    use std::os::unix::process::CommandExt;
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    wait_output(child, limit)
}

/// Checks hello_rma's output from `n` ranks: every rank's put and get
/// verified, and the counter shows each fetch_add applied exactly once.
pub fn assert_hello_rma_ok(out: &Output, n: u32) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "job failed ({}):\n{stdout}\n{stderr}", out.status);
    for rank in 0..n {
        let line = format!("rank {rank}/{n}: put+get to rank {} ok", (rank + 1) % n);
        assert!(stdout.contains(&line), "missing {line:?} in:\n{stdout}\n{stderr}");
    }
    assert!(stdout.contains(&format!("rank 0: counter = {n} ")), "counter line missing:\n{stdout}\n{stderr}");
}

/// A netns test cluster (scripts/netns-cluster) of `n` hosts, torn down
/// when dropped, including after a failed assertion.
pub struct Cluster {
    pub prefix: String,
    pub subnet: String,
}

impl Cluster {
    /// Creates hosts `PREFIX1..PREFIXn` on `SUBNET.0/24`; each test uses its
    /// own prefix and subnet so tests can run in parallel.
    pub fn up(prefix: &str, subnet: &str, n: u32) -> Cluster {
        let cluster = Cluster { prefix: prefix.to_owned(), subnet: subnet.to_owned() };
        let out = cluster.script(&["up", &n.to_string()]);
        assert!(out.status.success(), "netns-cluster up failed: {}", String::from_utf8_lossy(&out.stderr));
        cluster
    }

    pub fn script(&self, args: &[&str]) -> Output {
        Command::new(script("netns-cluster"))
            .args(args)
            .env("NETNS_PREFIX", &self.prefix)
            .env("NETNS_SUBNET", &self.subnet)
            .output()
            .expect("netns-cluster runs")
    }

    pub fn host(&self, i: u32) -> String {
        format!("{}{i}", self.prefix)
    }

    pub fn addr(&self, i: u32) -> String {
        format!("{}.{i}", self.subnet)
    }

    /// This (root) namespace's address on the cluster's bridge.
    pub fn root_addr(&self) -> String {
        format!("{}.254", self.subnet)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.script(&["down"]);
    }
}
