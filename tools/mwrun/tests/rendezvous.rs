//! mw-bootstrap's rendezvous under mwrun: this test binary re-runs itself as
//! the ranks (`rank_body`, selected by `MWRUN_TEST_ROLE`), so the ranks are
//! real processes using the real environment mwrun hands them.

use std::process::{Command, Output};

use mw_bootstrap::Bootstrap;

const MWRUN: &str = env!("CARGO_BIN_EXE_mwrun");
const ROLE: &str = "MWRUN_TEST_ROLE";

/// Not a test on its own: what each rank does when mwrun starts this binary
/// with `MWRUN_TEST_ROLE` set. Without it (a normal test run) it does nothing.
#[test]
fn rank_body() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    match role.as_str() {
        "allgather" => {
            let mut boot = Bootstrap::from_env().expect("join the job");
            let info = boot.info().clone();
            let blobs = boot.allgather(&info.rank.to_le_bytes()).expect("allgather");
            let ranks: Vec<u32> = blobs.iter().map(|b| u32::from_le_bytes(b[..].try_into().unwrap())).collect();
            assert_eq!(ranks, (0..info.size).collect::<Vec<_>>());
            boot.barrier().expect("barrier");
            println!(
                "allgather ok: rank {} of {}, local {} of {}",
                info.rank, info.size, info.local_rank, info.local_size
            );
        }
        "one-never-joins" => {
            if std::env::var("MW_RANK").unwrap() == "1" {
                return; // exits 0 without ever joining
            }
            let err = Bootstrap::from_env().expect_err("rank 1 never joins");
            eprintln!("join failed: {err}");
            std::process::exit(9);
        }
        other => panic!("unknown role {other}"),
    }
}

/// Runs `mwrun OPTIONS... <this binary> rank_body` with `role`.
fn run_ranks(options: &[&str], role: &str) -> Output {
    let me = std::env::current_exe().unwrap();
    Command::new(MWRUN)
        .args(options)
        .args(["-x", &format!("{ROLE}={role}")])
        .arg(me)
        .args(["--exact", "rank_body", "--nocapture", "--test-threads=1", "-q"])
        .output()
        .unwrap()
}

fn ok_lines(out: &Output) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("allgather ok"))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[test]
fn four_ranks_allgather_through_mwrun() {
    let out = run_ranks(&["-n", "4"], "allgather");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected: Vec<String> = (0..4).map(|r| format!("[{r}] allgather ok: rank {r} of 4, local {r} of 4")).collect();
    assert_eq!(ok_lines(&out), expected);
}

#[test]
fn ranks_on_other_hosts_reach_mwrun_through_the_bootstrap_address() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("mwrun-rendezvous-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let launcher = dir.join("fake-remote");
    std::fs::write(&launcher, "#!/bin/sh\nshift\nexec \"$@\"\n").unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    let options = [
        "-n",
        "4",
        "--hosts",
        "a:2,b:2",
        "--launcher-exec",
        launcher.to_str().unwrap(),
        "--bootstrap-addr",
        "127.0.0.1",
    ];
    let out = run_ranks(&options, "allgather");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected: Vec<String> =
        (0..4).map(|r| format!("[{r}] allgather ok: rank {r} of 4, local {} of 2", r % 2)).collect();
    assert_eq!(ok_lines(&out), expected);
}

#[test]
fn a_rank_that_never_joins_makes_the_others_time_out_clearly() {
    let out = Command::new(MWRUN)
        .env("MW_BOOTSTRAP_TIMEOUT", "0.5")
        .args(["-n", "2", "-x", &format!("{ROLE}=one-never-joins")])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "rank_body", "--nocapture", "--test-threads=1", "-q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(9));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[0] join failed: ") && stderr.contains("MW_BOOTSTRAP_TIMEOUT"), "{stderr}");
    assert!(stderr.contains("mwrun: rank 0 (pid "), "{stderr}");
}
