//! mwrun end to end: real processes, real signals, real output.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const MWRUN: &str = env!("CARGO_BIN_EXE_mwrun");

fn mwrun(args: &[&str]) -> Output {
    Command::new(MWRUN).args(args).stdin(Stdio::null()).output().expect("mwrun runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

/// A fresh directory for one test's files.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mwrun-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A stand-in for `ip netns exec`: notes which host it was asked for (on
/// stderr, so it shows up as the rank's output) and runs the rest here.
fn fake_launcher(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = scratch_dir(name).join("fake-remote");
    std::fs::write(&path, "#!/bin/sh\necho \"launched on $1\" >&2\nshift\nexec \"$@\"\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn exit_status_follows_the_ranks() {
    let ok = mwrun(&["-n", "2", "true"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(ok.stdout.is_empty() && ok.stderr.is_empty());

    let failed = mwrun(&["-n", "2", "false"]);
    assert_eq!(failed.status.code(), Some(1));
    assert!(stderr(&failed).contains("exited with status 1"), "{}", stderr(&failed));

    let three = mwrun(&["-n", "3", "sh", "-c", "if [ $MW_RANK = 2 ]; then exit 3; fi; sleep 30"]);
    assert_eq!(three.status.code(), Some(3));
    let message = stderr(&three);
    assert!(message.starts_with("mwrun: rank 2 (pid ") && message.contains(") exited with status 3"), "{message}");
}

#[test]
fn output_lines_carry_the_rank_prefix() {
    let out = mwrun(&["-n", "3", "sh", "-c", "echo hi; echo oops >&2"]);
    assert!(out.status.success());
    assert_eq!(sorted_lines(&stdout(&out)), ["[0] hi", "[1] hi", "[2] hi"]);
    assert_eq!(sorted_lines(&stderr(&out)), ["[0] oops", "[1] oops", "[2] oops"]);

    let plain = mwrun(&["-n", "2", "-q", "sh", "-c", "echo hi"]);
    assert_eq!(stdout(&plain), "hi\nhi\n");
}

#[test]
fn lines_of_different_ranks_never_mix() {
    let script = "i=0; while [ $i -lt 300 ]; do echo \"rank$MW_RANK line $i xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"; i=$((i+1)); done";
    let out = mwrun(&["-n", "4", "sh", "-c", script]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1200);
    for line in text.lines() {
        let (prefix, rest) = line.split_once(' ').unwrap();
        let rank = prefix.trim_start_matches('[').trim_end_matches(']');
        assert!(rest.starts_with(&format!("rank{rank} line ")), "mixed line: {line:?}");
        assert!(rest.ends_with(" xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"), "mixed line: {line:?}");
    }
}

#[test]
fn ranks_see_their_identity_in_the_environment() {
    let script = "echo $MW_RANK/$MW_SIZE $MW_LOCAL_RANK/$MW_LOCAL_SIZE ${#MW_JOB_KEY} $FOO $MW_STATS $MW_BOOTSTRAP";
    let out = Command::new(MWRUN)
        .args(["-n", "4", "-x", "FOO=bar", "sh", "-c", script])
        .env("MW_STATS", "1")
        .env("MW_RANK", "99") // a caller's stale identity must not leak through
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = sorted_lines(&stdout(&out));
    for (rank, line) in lines.iter().enumerate() {
        let expected = format!("[{rank}] {rank}/4 {rank}/4 32 bar 1 127.0.0.1:");
        assert!(line.starts_with(&expected), "{line:?} should start with {expected:?}");
    }
}

#[test]
fn a_rank_killed_by_a_signal_stops_the_job_quickly() {
    let start = Instant::now();
    let out = mwrun(&["-n", "3", "sh", "-c", "if [ $MW_RANK = 1 ]; then kill -9 $$; else sleep 30; fi"]);
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
    assert_eq!(out.status.code(), Some(128 + 9));
    let message = stderr(&out);
    assert!(message.contains("rank 1 (pid ") && message.contains("killed by signal 9 (SIGKILL)"), "{message}");
}

#[test]
fn a_rank_ignoring_sigterm_is_killed_after_the_grace_period() {
    let start = Instant::now();
    let script = "if [ $MW_RANK = 1 ]; then exit 4; fi; trap '' TERM; sleep 30";
    let out = mwrun(&["-n", "2", "--grace", "0.3", "sh", "-c", script]);
    assert_eq!(out.status.code(), Some(4));
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let out = mwrun(&["-n", "2", "no-such-program-mwrun-test"]);
    assert_eq!(out.status.code(), Some(127));
    let message = stderr(&out);
    assert!(message.contains("\"no-such-program-mwrun-test\"") && message.contains("No such file"), "{message}");

    let data = scratch_dir("noexec").join("data.txt");
    std::fs::write(&data, "not a program\n").unwrap();
    let not_executable = mwrun(&["-n", "1", data.to_str().unwrap()]);
    assert_eq!(not_executable.status.code(), Some(126), "{}", stderr(&not_executable));
    assert!(stderr(&not_executable).contains("Permission denied"));
}

#[test]
fn bad_hosts_are_refused_before_anything_starts() {
    let out = mwrun(&["-n", "1", "--hostfile", "/nonexistent/hosts", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).starts_with("mwrun: cannot read hostfile /nonexistent/hosts"), "{}", stderr(&out));
    let out = mwrun(&["-n", "1", "--hosts", "a:zero", "true"]);
    assert!(stderr(&out).contains("--hosts entry \"a:zero\": slots must be a positive integer"));
}

#[test]
fn the_time_limit_stops_the_job() {
    let start = Instant::now();
    let out = mwrun(&["-n", "2", "--timeout", "0.3", "sleep", "30"]);
    assert_eq!(out.status.code(), Some(124));
    assert!(stderr(&out).contains("time limit"));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn sigterm_to_mwrun_is_forwarded_to_the_ranks() {
    let mut child = Command::new(MWRUN)
        .args(["-n", "2", "sh", "-c", "trap 'echo stopping; exit 7' TERM; echo ready; sleep 30 & wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..2 {
        assert!(lines.next().unwrap().unwrap().ends_with("ready"));
    }
    let start = Instant::now();
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    assert!(start.elapsed() < Duration::from_secs(5));
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert_eq!(rest.iter().filter(|l| l.ends_with("stopping")).count(), 2, "{rest:?}");
}

#[test]
fn launcher_exec_starts_ranks_on_named_hosts() {
    let launcher = fake_launcher("exec");
    let out = mwrun(&[
        "-n",
        "4",
        "--hosts",
        "a,b",
        "--launcher-exec",
        launcher.to_str().unwrap(),
        "--bootstrap-addr",
        "127.0.0.1",
        "sh",
        "-c",
        "echo $MW_RANK@$MW_HOST $MW_LOCAL_RANK/$MW_LOCAL_SIZE",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(sorted_lines(&stdout(&out)), ["[0] 0@a 0/2", "[1] 1@b 0/2", "[2] 2@a 1/2", "[3] 3@b 1/2"]);
    assert_eq!(
        sorted_lines(&stderr(&out)),
        ["[0] launched on a", "[1] launched on b", "[2] launched on a", "[3] launched on b"]
    );
}

#[test]
fn a_file_the_kernel_cannot_run_is_not_executable() {
    use std::os::unix::fs::PermissionsExt;
    let path = scratch_dir("enoexec").join("garbage");
    std::fs::write(&path, [0u8, 1, 2, 3]).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = mwrun(&["-n", "1", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
}

/// A `Cpus_allowed_list` value (`0-3,6`) as CPU numbers.
fn cpu_list(text: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        cpus.extend(lo.parse::<usize>().unwrap()..=hi.parse::<usize>().unwrap());
    }
    cpus
}

/// The CPUs each rank of `mwrun ARGS -n N` may run on, by rank.
fn rank_cpus(args: &[&str], n: usize) -> Vec<Vec<usize>> {
    let n_text = n.to_string();
    let mut all = vec!["-n", n_text.as_str()];
    all.extend_from_slice(args);
    all.extend(["sh", "-c", "grep Cpus_allowed_list /proc/self/status"]);
    let out = mwrun(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut by_rank = vec![Vec::new(); n];
    for line in stdout(&out).lines() {
        let (rank, list) = line.split_once("] Cpus_allowed_list:").unwrap_or_else(|| panic!("{line}"));
        by_rank[rank.trim_start_matches('[').parse::<usize>().unwrap()] = cpu_list(list);
    }
    by_rank
}

#[test]
fn ranks_on_this_host_are_bound_only_when_asked_and_when_they_fit() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let mine = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(cpu_list).unwrap();
    // By default nothing is bound.
    assert_eq!(rank_cpus(&[], 2), [mine.clone(), mine.clone()]);
    let pair = rank_cpus(&["--cpu-bind", "auto"], 2);
    if mine.len() >= 2 {
        // What mwrun may use, split in two halves (one CPU more in the first
        // if odd), one each.
        assert_eq!(pair[0].len() + pair[1].len(), mine.len(), "{pair:?} of {mine:?}");
        assert!(!pair[1].is_empty() && pair[0].len() - pair[1].len() <= 1, "{pair:?}");
        assert!(pair[0].iter().all(|cpu| !pair[1].contains(cpu)), "{pair:?}");
        assert!(pair.concat().iter().all(|cpu| mine.contains(cpu)), "{pair:?} of {mine:?}");
    } else {
        assert_eq!(pair, [mine.clone(), mine.clone()], "one CPU: two ranks cannot each have one");
    }
    // More ranks than CPUs, or a lone rank: auto binds nothing.
    let crowd = rank_cpus(&["--cpu-bind", "auto"], mine.len() + 1);
    assert!(crowd.iter().all(|cpus| *cpus == mine), "{crowd:?}");
    assert_eq!(rank_cpus(&["--cpu-bind", "auto"], 1), std::slice::from_ref(&mine));
    // Forced: every rank bound to one of mwrun's CPUs even when crowded.
    let forced = rank_cpus(&["--cpu-bind", "share"], mine.len() + 1);
    assert!(forced.iter().all(|cpus| cpus.len() == 1 && mine.contains(&cpus[0])), "{forced:?}");
}

#[test]
fn bound_ranks_learn_where_their_library_threads_may_run() {
    let echo = ["sh", "-c", "echo \"$MW_BACKGROUND_CPUS\""];
    let run = |extra: &[&str]| {
        let mut args = vec!["-n", "2", "-q"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&echo);
        let out = mwrun(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        sorted_lines(&stdout(&out))
    };
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let mine = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(cpu_list).unwrap();
    let listed: Vec<String> = mine.iter().map(usize::to_string).collect();
    assert_eq!(run(&["--cpu-bind", "share"]), [listed.join(","), listed.join(",")]);
    assert_eq!(run(&[]), ["", ""], "unbound: not set");
    // The caller's own setting wins.
    assert_eq!(run(&["--cpu-bind", "share", "-x", "MW_BACKGROUND_CPUS=0"]), ["0", "0"]);
}
