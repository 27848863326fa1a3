//! memwire programs under a real Slurm: Debian's munged, slurmctld and
//! slurmd on this machine (scripts/slurm-cluster, as root), jobs started by
//! `srun --mpi=pmi2`, `srun --mpi=pmix`, `sbatch`, and mwrun inside an
//! allocation.
//!
//! These start daemons, so they are `#[ignore]`d in a plain `cargo test`
//! and run by `make slurm-test` (`--ignored --test-threads=1`: they share
//! one cluster), which brings the cluster up first and down afterwards.
//! Run alone, the first case brings it up and it stays up. Not root: they
//! print SKIPPED, except under `CI=true`, where they fail.
//!
//! Each job runs the `hello_rma` example, which checks its own data (puts
//! read back, every fetch_add applied exactly once) and exits non-zero
//! otherwise.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use support::{assert_hello_rma_ok, hello_rma, run};

/// A job's time limit: far above the half second these take, there to
/// turn a hang into a failure.
const LIMIT: Duration = Duration::from_secs(90);

/// The netns hosts of the multi-host case: names and /24 of their own, so
/// they never meet the clusters of other suites.
const NETNS_PREFIX: &str = "mwsl";
const NETNS_SUBNET: &str = "10.78.9";
const NETNS_HOSTS: u32 = 4;

/// Which cluster a case needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// One node, this host (`slurm-cluster up`).
    Local,
    /// One node per netns host (`slurm-cluster up-netns 4`).
    Netns,
}

/// Whether the cluster of `shape` is up (bringing it up, or switching to
/// it); false (after saying so) when this process may not start daemons,
/// which fails under CI.
fn slurm(test: &str, shape: Shape) -> bool {
    if !support::is_root() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{test}: needs root to start Slurm, and CI=true");
        eprintln!("SKIPPED {test}: not root (the Slurm daemons run as root); CI runs make test as root");
        return false;
    }
    static CURRENT: Mutex<Option<Shape>> = Mutex::new(None);
    let mut current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    if *current == Some(shape) {
        return true;
    }
    // What sinfo shows when the cluster of that shape is up and idle.
    let want = match shape {
        Shape::Local => {
            let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            format!("{} idle", name.trim().split('.').next().unwrap_or_default())
        }
        Shape::Netns => format!("{NETNS_PREFIX}[1-{NETNS_HOSTS}] idle"),
    };
    let nodes = Command::new("sinfo").args(["-h", "-o", "%N %t"]).output();
    let nodes = nodes.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default();
    if nodes != want {
        let mut command = Command::new(support::script("slurm-cluster"));
        match shape {
            Shape::Local => command.arg("up"),
            Shape::Netns => command
                .args(["up-netns", &NETNS_HOSTS.to_string()])
                .env("NETNS_PREFIX", NETNS_PREFIX)
                .env("NETNS_SUBNET", NETNS_SUBNET),
        };
        let out = command.output().expect("slurm-cluster runs");
        assert!(
            out.status.success(),
            "slurm-cluster {shape:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    *current = Some(shape);
    true
}

/// `srun --mpi=MPI -n N [OPTIONS] hello_rma`, with the job's environment
/// cleaned of what a surrounding launcher may have set.
fn srun(mpi: &str, n: u32, options: &[&str]) -> Command {
    let mut command = Command::new("srun");
    command.args([&format!("--mpi={mpi}"), "-n", &n.to_string()]).args(options).arg(hello_rma());
    clean(&mut command);
    command
}

fn clean(command: &mut Command) -> &mut Command {
    for var in ["MW_PMI", "MW_RANK", "MW_SIZE", "MW_BOOTSTRAP", "MW_JOB_KEY", "SLURM_JOB_ID", "SLURM_JOBID"] {
        command.env_remove(var);
    }
    command
}

/// The MPI plugins this Slurm offers (`srun --mpi=list`).
fn mpi_plugins() -> String {
    let out = Command::new("srun").arg("--mpi=list").output().expect("srun --mpi=list");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
#[ignore = "starts real Slurm daemons: make slurm-test runs it"]
fn srun_pmi2_runs_jobs_of_1_2_and_4_tasks() {
    if !slurm("srun_pmi2_runs_jobs_of_1_2_and_4_tasks", Shape::Local) {
        return;
    }
    for n in [1, 2, 4] {
        assert_hello_rma_ok(&run(&mut srun("pmi2", n, &[]), LIMIT), n);
    }
}

/// Debian's Slurm 22.05 has the `mpi/pmix` plugin (pmix_v4), built against
/// the same libpmix2 the ranks load; a Slurm without it fails this test.
#[test]
#[ignore = "starts real Slurm daemons: make slurm-test runs it"]
fn srun_pmix_runs_jobs_of_1_2_and_4_tasks() {
    if !slurm("srun_pmix_runs_jobs_of_1_2_and_4_tasks", Shape::Local) {
        return;
    }
    let plugins = mpi_plugins();
    assert!(plugins.lines().any(|l| l.trim() == "pmix"), "this Slurm has no mpi/pmix plugin:\n{plugins}");
    for n in [1, 2, 4] {
        assert_hello_rma_ok(&run(&mut srun("pmix", n, &[]), LIMIT), n);
    }
}

/// A scratch directory under the target directory (the batch job writes
/// its output there).
fn scratch(name: &str) -> PathBuf {
    let dir = support::target_dir().join("slurm-test").join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `sbatch --wait` of a script that runs 4 tasks with srun; the job's
/// output file holds every rank's checked line, and sbatch exits 0.
#[test]
#[ignore = "starts real Slurm daemons: make slurm-test runs it"]
fn sbatch_runs_a_batch_job_whose_output_is_checked() {
    if !slurm("sbatch_runs_a_batch_job_whose_output_is_checked", Shape::Local) {
        return;
    }
    let dir = scratch("sbatch");
    let script = dir.join("job.sh");
    let output = dir.join("job.out");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n#SBATCH --ntasks=4\n#SBATCH --time=5\n#SBATCH --output={}\nsrun --mpi=pmi2 {}\n",
            output.display(),
            hello_rma().display()
        ),
    )
    .unwrap();
    let mut command = Command::new("sbatch");
    command.args(["--wait", "--parsable"]).arg(&script);
    let out = run(clean(&mut command), LIMIT);
    let job_output = std::fs::read(&output).unwrap_or_default();
    let combined = Output { status: out.status, stdout: job_output, stderr: out.stderr };
    assert_hello_rma_ok(&combined, 4);
    let job_id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(job_id.parse::<u64>().is_ok(), "sbatch --parsable printed {job_id:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One task of four exits 3 before joining: srun reports that task's
/// status, and the other three, left waiting for it in the join, fail
/// within the bootstrap deadline, each naming its rank and the step.
#[test]
#[ignore = "starts real Slurm daemons: make slurm-test runs it"]
fn a_failing_task_fails_the_job_and_slurm_reports_it() {
    if !slurm("a_failing_task_fails_the_job_and_slurm_reports_it", Shape::Local) {
        return;
    }
    let deadline = Duration::from_secs(5);
    for mpi in ["pmi2", "pmix"] {
        let mut command = Command::new("srun");
        command
            .args([&format!("--mpi={mpi}"), "-n", "4", "sh", "-c"])
            .arg(format!("if [ \"$SLURM_PROCID\" = 2 ]; then exit 3; fi; exec {}", hello_rma().display()))
            .env("MW_BOOTSTRAP_TIMEOUT", deadline.as_secs().to_string());
        let start = Instant::now();
        let out = run(clean(&mut command), LIMIT);
        let took = start.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{mpi}: the job succeeded:\n{stderr}");
        assert!(stderr.contains("task 2: Exited with exit code 3"), "{mpi}: srun did not report task 2:\n{stderr}");
        for rank in [0, 1, 3] {
            let named = format!("rank {rank}: ");
            assert!(
                stderr.contains(&named) && stderr.contains("join"),
                "{mpi}: rank {rank} did not say why:\n{stderr}"
            );
        }
        assert!(stderr.contains(&format!("{deadline:?}")), "{mpi}: the deadline is not named:\n{stderr}");
        assert!(took < deadline + Duration::from_secs(20), "{mpi}: the job took {took:?}");
    }
}

/// `salloc -n 4 mwrun -n 4 hello_rma`: mwrun takes the allocation's nodes
/// (SLURM_JOB_NODELIST) and starts every rank as a step of the job with
/// srun (each sees a SLURM_STEP_ID of its own); a rank that exits 3 ends
/// the job with status 3 and mwrun names it.
#[test]
#[ignore = "starts real Slurm daemons: make slurm-test runs it"]
fn mwrun_inside_an_allocation_starts_the_ranks_with_srun() {
    if !slurm("mwrun_inside_an_allocation_starts_the_ranks_with_srun", Shape::Local) {
        return;
    }
    let salloc = |n: &str| {
        let mut command = Command::new("salloc");
        command.args(["-n", n]).arg(support::mwrun()).args(["-n", n]);
        clean(&mut command);
        command
    };
    assert_hello_rma_ok(&run(salloc("4").arg("-q").arg(hello_rma()), LIMIT), 4);

    let out = run(salloc("2").args(["-q", "sh", "-c", "echo step=$SLURM_STEP_ID rank=$MW_RANK"]), LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let mut steps: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("step=")?.split(' ').next()).collect();
    steps.sort_unstable();
    steps.dedup();
    assert!(steps.len() == 2 && steps.iter().all(|s| s.parse::<u32>().is_ok()), "not one step per rank:\n{stdout}");

    let out = run(salloc("3").args(["sh", "-c", "[ $MW_RANK = 1 ] && exit 3; exec sleep 60"]), LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("mwrun: rank 1 ") && stderr.contains("exited with status 3"), "{stderr}");
}

/// Four hosts (network namespaces, one slurmd each, NodeName/NodeAddr per
/// host) with 10% of every IP packet arriving at each dropped (nftables;
/// Slurm's and PMI's TCP too): srun --mpi=pmi2 with 8 tasks (two a host:
/// shared memory within, UDP between), srun --mpi=pmix with 4, and mwrun
/// inside `salloc -N 4` reaching its rendezvous by this host's name (the
/// hosts' /etc/hosts give it). The rules must have dropped packets.
#[test]
#[ignore = "starts real Slurm daemons: make slurm-test runs it"]
fn jobs_across_four_netns_hosts_under_loss() {
    if !slurm("jobs_across_four_netns_hosts_under_loss", Shape::Netns) {
        return;
    }
    let hosts: Vec<String> = (1..=NETNS_HOSTS).map(|i| format!("{NETNS_PREFIX}{i}")).collect();
    for host in &hosts {
        let out = Command::new(support::script("netns-cluster"))
            .args(["loss", host, "10"])
            .env("NETNS_PREFIX", NETNS_PREFIX)
            .env("NETNS_SUBNET", NETNS_SUBNET)
            .output()
            .unwrap();
        assert!(out.status.success(), "loss: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert_hello_rma_ok(&run(&mut srun("pmi2", 8, &["-N", "4"]), LIMIT), 8);
    assert_hello_rma_ok(&run(&mut srun("pmix", 4, &["-N", "4"]), LIMIT), 4);
    let mut salloc = Command::new("salloc");
    salloc.args(["-N", "4", "-n", "4"]).arg(support::mwrun()).args(["-n", "4", "-q"]).arg(hello_rma());
    assert_hello_rma_ok(&run(clean(&mut salloc), LIMIT), 4);
    for host in &hosts {
        let rules = Command::new("ip").args(["netns", "exec", host, "nft", "list", "ruleset"]).output().unwrap();
        let rules = String::from_utf8_lossy(&rules.stdout);
        let dropped: u64 = rules
            .split("counter packets ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(dropped > 0, "{host} dropped nothing:\n{rules}");
    }
}
