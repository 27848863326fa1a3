//! mwbench end to end, with tiny iteration counts (seconds in all): every
//! bench kind prints only DESIGN §6 JSON points on stdout, the progress bar
//! stays on stderr, MPI baselines appear when installed, and `mwbench
//! report` turns a fixture into the README section and plots.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mwbench");

fn mwbench(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_remove("MW_RANK").env_remove("MW_SIZE").env_remove("MW_BOOTSTRAP");
    cmd
}

/// Runs mwbench and returns its stdout lines parsed, after checking each
/// one is a point of the contract; also its stderr.
fn run_points(args: &[&str]) -> (Vec<Value>, String) {
    let out = mwbench(args).output().expect("run mwbench");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "mwbench {args:?} failed: {stderr}");
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    (check_points(&stdout), stderr)
}

fn check_points(stdout: &str) -> Vec<Value> {
    assert!(!stdout.contains('\r') && !stdout.contains('\u{1b}'), "terminal control on stdout: {stdout:?}");
    stdout
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
            for field in ["bench", "op", "transport"] {
                assert!(v[field].is_string(), "{field} missing in {line}");
            }
            assert!(["udp", "shm"].contains(&v["transport"].as_str().unwrap()), "transport in {line}");
            for field in ["size", "iters"] {
                assert!(v[field].is_u64(), "{field} missing in {line}");
            }
            let measured = ["median_us", "MBps", "ops_per_s"].iter().filter(|f| v[**f].is_number()).count();
            assert!(measured >= 1, "no measurement in {line}");
            if v["median_us"].is_number() {
                assert!(v["p99_us"].as_f64().unwrap() >= v["median_us"].as_f64().unwrap(), "p99 < median in {line}");
            }
            v
        })
        .collect()
}

fn has(points: &[Value], bench: &str, op: &str, transport: &str) -> bool {
    points.iter().any(|p| p["bench"] == bench && p["op"] == op && p["transport"] == transport)
}

#[test]
fn point_to_point_benches_over_udp_print_contract_lines_with_their_baselines() {
    let args = [
        "--bench",
        "pingpong,bandwidth,bibw,rate,overhead",
        "--transport",
        "udp",
        "--sizes",
        "8,70000",
        "--iters",
        "20",
    ];
    let (points, stderr) = run_points(&[&args[..], &["--no-mpi"]].concat());
    for op in ["put_signal", "get", "fetch_add", "swap", "compare_swap", "send_recv", "am", "udp_raw", "tcp_raw"] {
        assert!(has(&points, "pingpong", op, "udp"), "pingpong {op}");
    }
    for (bench, ops) in [
        ("bandwidth", &["put", "get", "send_recv", "udp_raw", "tcp_raw"][..]),
        ("bibw", &["put", "send_recv", "udp_raw", "tcp_raw"]),
        ("rate", &["put", "fetch_add", "send_recv", "am", "udp_raw", "tcp_raw"]),
        ("overhead", &["put", "put_signal", "send_recv", "udp_raw"]),
    ] {
        for op in ops {
            assert!(has(&points, bench, op, "udp"), "{bench} {op}");
        }
    }
    // Atomics once, at 8 B; ping-pong at both sizes, split raw datagrams included.
    assert_eq!(points.iter().filter(|p| p["op"] == "fetch_add" && p["bench"] == "pingpong").count(), 1);
    assert!(points.iter().any(|p| p["op"] == "udp_raw" && p["bench"] == "pingpong" && p["size"] == 70000));
    assert!(points.iter().all(|p| p["op"] != "mpich" && p["op"] != "openmpi"), "--no-mpi");
    // The table names each row's reference.
    assert!(stderr.contains("udp_raw") && stderr.contains("ratio"), "{stderr}");
    assert!(
        stderr.lines().any(|l| l.starts_with("pingpong   put_signal") && l.trim_end().ends_with("udp_raw")),
        "{stderr}"
    );
}

#[test]
fn shared_memory_points_have_their_floors() {
    let args = ["--bench", "pingpong,bandwidth,bibw,overhead", "--transport", "shm", "--sizes", "8", "--iters", "20"];
    let ops = "put_signal,put,shm_floor,shm_floor_ring,memcpy";
    let (points, _) = run_points(&[&args[..], &["--no-mpi", "--op", ops]].concat());
    assert!(has(&points, "pingpong", "shm_floor", "shm") && has(&points, "pingpong", "put_signal", "shm"));
    // The ring floor's partner process exchanged every record (a lost or
    // corrupt one would hang or panic the run) and the result is a time.
    let ring = points.iter().find(|p| p["op"] == "shm_floor_ring").expect("the ring floor ran");
    assert!(ring["median_us"].as_f64().is_some_and(|us| us > 0.0), "{ring}");
    for bench in ["bandwidth", "bibw"] {
        assert!(has(&points, bench, "memcpy", "shm") && has(&points, bench, "put", "shm"), "{bench}");
    }
    assert!(has(&points, "overhead", "memcpy", "shm"));
    assert!(points.iter().all(|p| p["transport"] == "shm"));
}

#[test]
fn multi_rank_loss_and_overlap_benches_print_contract_lines() {
    let (points, _) = run_points(&[
        "--quick",
        "--bench",
        "nton,barrier,bcast,allgather,alltoall,allreduce",
        "--transport",
        "udp",
        "--ranks",
        "3",
        "--sizes",
        "64",
        "--iters",
        "5",
        "--no-mpi",
    ]);
    for order in ["in_order", "shifted", "multicast"] {
        assert!(points.iter().any(|p| p["bench"] == "nton" && p["order"] == order && p["ranks"] == 3), "{order}");
    }
    for bench in ["barrier", "bcast", "allgather", "alltoall", "allreduce"] {
        assert!(points.iter().any(|p| p["bench"] == bench && p["algo"] == "auto" && p["ranks"] == 3), "{bench}");
    }
    let (points, _) =
        run_points(&["--bench", "loss,overlap", "--sizes", "65536", "--iters", "5", "--loss", "0,5", "--no-mpi"]);
    for (op, loss) in [("put", 0.0), ("put", 5.0), ("send_recv", 0.0), ("send_recv", 5.0)] {
        assert!(points.iter().any(|p| p["bench"] == "loss" && p["op"] == op && p["loss_pct"] == loss), "{op} {loss}");
    }
    let overlap = points.iter().find(|p| p["bench"] == "overlap").expect("overlap point");
    assert!(overlap["overlap_pct"].is_number());
}

#[test]
fn mpi_baselines_are_measured_when_installed() {
    let on_path = |name: &str| {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
    };
    let args = ["--bench", "pingpong", "--transport", "udp", "--sizes", "8", "--iters", "20", "--op", "mpich,openmpi"];
    let (points, stderr) = run_points(&args);
    for (label, cc) in [("mpich", "mpicc.mpich"), ("openmpi", "mpicc.openmpi")] {
        if on_path(cc) {
            let p = points.iter().find(|p| p["op"] == label).unwrap_or_else(|| panic!("no {label} point: {stderr}"));
            assert_eq!(
                (p["bench"].as_str(), p["via"].as_str(), p["size"].as_u64()),
                (Some("pingpong"), Some("tcp"), Some(8))
            );
        } else {
            assert!(stderr.contains(&format!("{label} is not installed")), "{stderr}");
        }
    }
}

#[test]
fn bad_options_fail_with_a_message_and_no_points() {
    for args in [
        &["--bench", "latency"][..],
        &["--transport", "ib"],
        &["--bench", "pingpong", "--op", "put"],
        &["--sizes", "1G"],
    ] {
        let out = mwbench(args).output().expect("run mwbench");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?} printed points");
        assert!(!out.stderr.is_empty());
    }
}

/// A pseudo-terminal pair: (controller, terminal) file descriptors.
fn open_pty() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let (mut controller, mut terminal) = (0, 0);
    // SAFETY: openpty writes two new descriptors into the two ints; the name,
    // termios and window-size arguments may be null.
    let rc = unsafe {
        libc::openpty(&mut controller, &mut terminal, std::ptr::null_mut(), std::ptr::null(), std::ptr::null())
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned by nobody else.
    unsafe { (std::fs::File::from_raw_fd(controller), std::fs::File::from_raw_fd(terminal)) }
}

#[test]
fn progress_bar_draws_on_a_terminal_stderr_and_never_on_stdout() {
    let (mut controller, terminal) = open_pty();
    let mut child =
        mwbench(&["--bench", "pingpong", "--transport", "udp", "--sizes", "8", "--iters", "3000", "--no-mpi"])
            .stdout(Stdio::piped())
            .stderr(Stdio::from(terminal))
            .spawn()
            .expect("run mwbench");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).unwrap();
        text
    });
    let status = child.wait().expect("mwbench");
    let points = check_points(&reader.join().unwrap());
    assert!(status.success());
    assert!(points.len() >= 9, "{points:?}");
    // Our copy of the terminal end went to the child; read what it drew.
    let mut screen = Vec::new();
    let mut buf = [0u8; 65536];
    // SAFETY: fcntl on a descriptor we own, to stop reading when it is drained.
    unsafe {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&controller);
        libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
    }
    while let Ok(n) = controller.read(&mut buf) {
        if n == 0 {
            break;
        }
        screen.extend_from_slice(&buf[..n]);
    }
    let screen = String::from_utf8_lossy(&screen);
    // Nine rows from seven steps: put_signal, send_recv and am are one
    // interleaved step.
    assert!(screen.contains("] ") && screen.contains("/7"), "no progress bar on the terminal: {screen:?}");
    assert!(screen.contains("measured pingpong"), "notes go to stderr too: {screen:?}");
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mwbench-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results")
}

#[test]
fn report_writes_the_readme_section_and_plots_from_results() {
    let dir = scratch("report");
    let readme = dir.join("README.md");
    std::fs::write(&readme, "# x\n\nbefore\n\n<!-- bench:begin -->\nold text\n<!-- bench:end -->\n\nafter\n").unwrap();
    let plots = dir.join("plots");
    let out = mwbench(&["report", "--results", fixture().to_str().unwrap(), "--readme", readme.to_str().unwrap()])
        .args(["--plots", plots.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty());
    let text = std::fs::read_to_string(&readme).unwrap();
    assert!(
        text.starts_with("# x\n\nbefore\n\n<!-- bench:begin -->") && text.ends_with("<!-- bench:end -->\n\nafter\n")
    );
    assert!(!text.contains("old text"));
    for expected in [
        "Machine: Test CPU, 2 cores, Linux 6.1.0-test; load average 0.10 0.20 0.30 at the start",
        "1.10 1.20 1.30 at the end",
        "target/release/mwbench --bench pingpong,bandwidth,rate",
        // Ratios against the same-run reference of each row.
        "| put_signal | 4.50 <sub>1.50× udp_raw</sub> |",
        "| *mpich (tcp)* | 9.00 <sub>3.00× udp_raw</sub> |",
        "0.30 <sub>1.50× shm_floor</sub>",
        "7000 <sub>70% memcpy</sub>",
        "400k <sub>20% udp_raw</sub>",
        "800 <sub>50% put@0%</sub>",
        // Targets, met or not.
        "| put_signal ping-pong 8 B ≤ 1.25× udp_raw | `pt2pt` | 4.50 | 3.00 | 1.500× | **no** |",
        "| fetch_add 8 B ≤ 1.3× udp_raw | `pt2pt` | 3.60 | 3.00 | 1.200× | yes |",
        "| put bandwidth 1 MiB ≥ 80% of udp_raw blast | `pt2pt` | 1700 | 2000 | 85.0% | yes |",
        "| shm put_signal 8 B ≤ 0.5× Open MPI | `pt2pt` | 0.30 | 0.50 | 0.600× | **no** |",
        "| send_recv 8 B ≤ 1.15× put_signal (udp) | `pt2pt` | 4.95 | 4.50 | 1.100× | yes |",
        "collectives (auto) no slower than MPICH and Open MPI, udp path | `coll` | 1 of 2 comparisons",
        "#### N-to-N, 4 ranks",
        "- `pt2pt`: pingpong am shm 1048576 B: did not finish within 300 s (hung?); abandoned, the run goes on",
        "1966 <sub>125% openmpi/tcp</sub>",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    for name in ["latency_udp_pt2pt.png", "latency_shm_pt2pt.png", "bandwidth_udp_pt2pt.png", "bandwidth_shm_pt2pt.png"]
    {
        let png = std::fs::read(plots.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{name} is not a drawn PNG");
        assert!(text.contains(&format!("(plots/{name})")), "{name} not linked");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_names_the_file_and_line_of_a_bad_result() {
    let dir = scratch("bad");
    let results = dir.join("results");
    std::fs::create_dir_all(&results).unwrap();
    std::fs::write(results.join("x.jsonl"), "{\"bench\":\"pingpong\",\"op\":\"get\",\"transport\":\"udp\",\"size\":8,\"iters\":1,\"median_us\":1.0}\nprogress 3/5\n").unwrap();
    let readme = dir.join("README.md");
    std::fs::write(&readme, "<!-- bench:begin --><!-- bench:end -->").unwrap();
    let out = mwbench(&["report", "--results", results.to_str().unwrap(), "--readme", readme.to_str().unwrap()])
        .args(["--plots", dir.join("plots").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("x.jsonl:2: not JSON"), "{err}");
    assert_eq!(std::fs::read_to_string(&readme).unwrap(), "<!-- bench:begin --><!-- bench:end -->", "README untouched");
    std::fs::remove_dir_all(&dir).unwrap();
}
