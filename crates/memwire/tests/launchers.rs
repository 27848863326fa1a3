//! memwire programs started by other launchers, unchanged: MPICH's
//! `mpiexec` (Hydra, PMI-1 by default and PMI-2 on request), Open MPI's
//! `mpirun` (PMIx, through the PMIx library), a PMI-2 server that answers
//! like Slurm's `srun --mpi=pmi2` (the real Slurm is in `slurm.rs`), and,
//! across the netns test hosts (root only), both mwrun and Hydra's ssh
//! launcher.
//!
//! Each test runs 4 ranks of the `hello_rma` example, which checks its own
//! data (puts read back, every fetch_add applied exactly once) and exits
//! non-zero otherwise.

mod support;

use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::Duration;

use support::{assert_hello_rma_ok, hello_rma, run, spawn, Cluster};

/// A job's time limit: far above the ~0.1 s these take, there to turn a
/// hang into a failure.
const LIMIT: Duration = Duration::from_secs(60);

/// MPICH's Hydra under its own names: Debian's `mpiexec` may be Open MPI's.
fn hydra() -> Option<std::path::PathBuf> {
    let found = support::which(&["mpiexec.hydra", "mpiexec.mpich"]);
    if found.is_none() {
        eprintln!("SKIPPED: MPICH's mpiexec.hydra/mpiexec.mpich is not installed (make deps installs mpich)");
    }
    found
}

#[test]
fn mpiexec_starts_a_job_over_pmi1() {
    let Some(mpiexec) = hydra() else { return };
    let out = run(Command::new(&mpiexec).args(["-n", "4"]).arg(hello_rma()).env_remove("MW_PMI"), LIMIT);
    assert_hello_rma_ok(&out, 4);
}

#[test]
fn mpiexec_starts_a_job_over_pmi2_when_asked() {
    let Some(mpiexec) = hydra() else { return };
    let out = run(Command::new(&mpiexec).args(["-n", "4", "-genv", "MW_PMI", "2"]).arg(hello_rma()), LIMIT);
    assert_hello_rma_ok(&out, 4);
}

/// Open MPI's `mpirun` serves PMIx to the processes it starts (Debian's
/// Open MPI 4.1 uses the system's libpmix2, which the ranks load too):
/// jobs of 1, 2 and 4 ranks, then one whose rank 1 exits 3 before joining:
/// mpirun ends the job, says a process failed and exits with its status.
#[test]
fn mpirun_starts_jobs_over_pmix() {
    let Some(mpirun) = support::which(&["mpirun.openmpi"]) else {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "Open MPI's mpirun.openmpi is missing under CI=true");
        eprintln!("SKIPPED: Open MPI's mpirun.openmpi is not installed (make deps installs openmpi-bin)");
        return;
    };
    let job = |n: u32| {
        let mut command = Command::new(&mpirun);
        command
            .args(["--oversubscribe", "-n", &n.to_string()])
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env_remove("MW_PMI");
        command
    };
    for n in [1, 2, 4] {
        assert_hello_rma_ok(&run(job(n).arg(hello_rma()), LIMIT), n);
    }
    let wrapped = format!("if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exit 3; fi; exec {}", hello_rma().display());
    let out = run(job(3).args(["sh", "-c", &wrapped]).env("MW_BOOTSTRAP_TIMEOUT", "3"), LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("1 process returned\na non-zero exit code"), "{stderr}");
}

/// Slurm's `srun --mpi=pmi2`, played by the test PMI server: each rank gets
/// a socket at PMI_FD and PMI_RANK, PMI_SIZE and PMI_JOBID, as slurmstepd
/// sets them; PMI_JOBID makes the ranks pick PMI-2 on their own.
#[test]
fn a_slurm_style_pmi2_launch_starts_a_job() {
    let size = 4u32;
    let jobid = "77.0";
    let (ours, theirs): (Vec<UnixStream>, Vec<UnixStream>) = (0..size).map(|_| UnixStream::pair().unwrap()).unzip();
    let server = mw_bootstrap::pmi_testing::serve(theirs, jobid);
    let children: Vec<_> = ours
        .iter()
        .enumerate()
        .map(|(rank, socket)| {
            let mut command = Command::new(hello_rma());
            command
                .env_remove("MW_PMI")
                .env("PMI_FD", spawn::CHILD_PMI_FD.to_string())
                .env("PMI_RANK", rank.to_string())
                .env("PMI_SIZE", size.to_string())
                .env("PMI_JOBID", jobid)
                .env("SLURMD_NODENAME", "node0")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            spawn::inherit_as_pmi_fd(&mut command, socket);
            command.spawn().expect("start a rank")
        })
        .collect();
    // The server must see a rank hang up when it exits, so our ends go.
    drop(ours);
    let outputs: Vec<_> = children.into_iter().map(|c| support::wait_output(c, LIMIT)).collect();
    let mut combined = outputs[0].clone();
    for out in &outputs[1..] {
        combined.stdout.extend_from_slice(&out.stdout);
        combined.stderr.extend_from_slice(&out.stderr);
        if !out.status.success() {
            combined.status = out.status;
        }
    }
    assert_hello_rma_ok(&combined, size);
    let report = server.join().unwrap();
    assert_eq!(report.versions, vec![2; size as usize], "every rank spoke PMI-2");
    assert_eq!(report.finalized, vec![true; size as usize], "every rank finalized");
    assert!(report.refused.is_empty(), "the server refused: {:?}", report.refused);
    // Join (key + hosts), the endpoint's three allgathers (addresses and host
    // identity, shared-memory segments, their mapping results), its barrier.
    assert_eq!(report.fences, 5);
    assert!(report.aborted.is_none());
}

/// Root only: namespaces need CAP_NET_ADMIN.
fn netns_allowed(test: &str) -> bool {
    if !support::is_root() {
        eprintln!("SKIPPED {test}: not root (network namespaces need CAP_NET_ADMIN); CI runs make test as root");
        return false;
    }
    true
}

/// `mwrun --hosts` over 4 netns hosts through the netns-exec wrapper; the
/// ranks reach mwrun's rendezvous at this namespace's bridge address. Then
/// again with 10% loss on every host (nftables), which the ranks survive.
#[test]
fn mwrun_runs_a_job_across_four_netns_hosts() {
    if !netns_allowed("mwrun_runs_a_job_across_four_netns_hosts") {
        return;
    }
    let cluster = Cluster::up("mwtr", "10.78.1", 4);
    let hosts: Vec<String> = (1..=4).map(|i| cluster.host(i)).collect();
    let job = || {
        let mut command = Command::new(support::mwrun());
        command
            .args(["-n", "4", "--hosts", &hosts.join(",")])
            .arg("--launcher-exec")
            .arg(support::script("netns-exec"))
            .args(["--bootstrap-addr", &cluster.root_addr(), "-q"])
            .arg(hello_rma());
        run(&mut command, LIMIT)
    };
    assert_hello_rma_ok(&job(), 4);

    for host in &hosts {
        let out = cluster.script(&["loss", host, "10"]);
        assert!(out.status.success(), "loss: {}", String::from_utf8_lossy(&out.stderr));
    }
    let rule = Command::new("ip").args(["netns", "exec", &hosts[2], "nft", "list", "ruleset"]).output().unwrap();
    let rule = String::from_utf8_lossy(&rule.stdout);
    assert!(rule.contains("numgen random mod 100 < 10") && rule.contains("drop"), "{rule}");
    assert_hello_rma_ok(&job(), 4);
}

/// PMI-1 across hosts: Hydra starts its proxies through the netns wrapper
/// as if it were ssh; hosts are named by address, so each rank binds the
/// address its launcher-given host name denotes.
#[test]
fn mpiexec_runs_a_job_across_four_netns_hosts() {
    if !netns_allowed("mpiexec_runs_a_job_across_four_netns_hosts") {
        return;
    }
    let Some(mpiexec) = hydra() else { return };
    let cluster = Cluster::up("mwth", "10.78.2", 4);
    let hosts: Vec<String> = (1..=4).map(|i| cluster.addr(i)).collect();
    let mut command = Command::new(mpiexec);
    command
        .args(["-launcher", "ssh", "-launcher-exec"])
        .arg(support::script("netns-exec"))
        .args(["-localhost", &cluster.root_addr(), "-hosts", &hosts.join(","), "-n", "4"])
        .arg(hello_rma())
        .env_remove("MW_PMI");
    assert_hello_rma_ok(&run(&mut command, LIMIT), 4);
}

/// `MW_PORT_RANGE` (for firewalls) holds the ranks' UDP ports: two ranks on
/// one host fit in two ports; with one, the rank left without a port fails
/// the job and says why.
#[test]
fn mw_port_range_bounds_the_data_path_ports() {
    let job = |range: &str| {
        let mut command = Command::new(support::mwrun());
        command.args(["-n", "2", "-q"]).arg(hello_rma()).env("MW_PORT_RANGE", range);
        run(&mut command, LIMIT)
    };
    assert_hello_rma_ok(&job("47211-47212"), 2);
    let short = job("47213-47213");
    let stderr = String::from_utf8_lossy(&short.stderr);
    assert!(!short.status.success(), "{stderr}");
    assert!(stderr.contains("every UDP port of MW_PORT_RANGE=47213-47213"), "{stderr}");
}

/// IP multicast between real hosts: the `multicast` example over 4 netns
/// hosts on the bridge, which forwards the group (`MW_MCAST=1`: IP multicast
/// required); again with 10% loss on every host (repairs); then with one
/// host's firewall dropping multicast, where the team falls back to the
/// tree (`auto`), or fails clearly when IP multicast is required.
#[test]
fn ip_multicast_across_four_netns_hosts() {
    if !netns_allowed("ip_multicast_across_four_netns_hosts") {
        return;
    }
    let cluster = Cluster::up("mwmt", "10.78.4", 4);
    let hosts: Vec<String> = (1..=4).map(|i| cluster.host(i)).collect();
    let example = hello_rma().with_file_name("multicast");
    let job = |mcast: &str| {
        let mut command = Command::new(support::mwrun());
        command
            .args(["-n", "4", "--hosts", &hosts.join(",")])
            .arg("--launcher-exec")
            .arg(support::script("netns-exec"))
            .args(["--bootstrap-addr", &cluster.root_addr(), "-q"])
            .arg(&example)
            .env("MW_MCAST", mcast);
        run(&mut command, LIMIT)
    };
    let assert_by = |out: &std::process::Output, how: &str| {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "job failed ({}):\n{stdout}\n{stderr}", out.status);
        for rank in 0..4 {
            let line = format!("rank {rank}/4: multicast ok by {how}");
            assert!(stdout.contains(&line), "missing {line:?} in:\n{stdout}\n{stderr}");
        }
    };
    assert_by(&job("1"), "IP multicast");
    for host in &hosts {
        let out = cluster.script(&["loss", host, "10"]);
        assert!(out.status.success(), "loss: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert_by(&job("1"), "IP multicast");
    for host in &hosts {
        cluster.script(&["loss", host, "0"]);
    }
    for rule in [
        "add table inet mw_no_multicast",
        "add chain inet mw_no_multicast input { type filter hook input priority 0; policy accept; }",
        "add rule inet mw_no_multicast input ip daddr 224.0.0.0/4 drop",
    ] {
        let out = Command::new("ip").args(["netns", "exec", &hosts[2], "nft", rule]).output().unwrap();
        assert!(out.status.success(), "nft {rule}: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert_by(&job("auto"), "the tree");
    let required = job("1");
    let stderr = String::from_utf8_lossy(&required.stderr);
    assert!(!required.status.success(), "IP multicast required but blocked, yet the job passed");
    assert!(stderr.contains("IP multicast unavailable"), "{stderr}");
}
