//! Shared memory between real processes under mwrun, and clean-up.
//!
//! This binary is both the test driver and the rank program: started by
//! mwrun (MW_RANK set) it runs the role named by its first argument. The
//! driver checks that a 4-rank job uses shared memory between every pair
//! (and, with two fake hosts, shared memory inside a host and UDP across),
//! and that nothing is left in /dev/shm after a normal exit, after a rank
//! is killed by a signal, and after the whole job is killed with SIGKILL.
//! memwire's segments are memory files that peers open through
//! /proc/PID/fd, never named files, so the kernel frees them with the last
//! process that maps them; these tests keep that true.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mw_core::{Access, Cmp, Endpoint, Signal, SignalOp};

const MWRUN: &str = env!("CARGO_BIN_EXE_mwrun");

fn main() {
    if std::env::var_os("MW_RANK").is_some() {
        let role = std::env::args().nth(1).unwrap_or_default();
        rank(&role).expect("rank failed");
        return;
    }
    let tests: [(&str, fn()); 6] = [
        ("four_processes_use_shared_memory_and_leave_nothing", normal_exit),
        ("large_messages_between_processes_arrive_whole_through_staging", large_messages),
        ("large_messages_staged_with_non_temporal_stores_arrive_whole", large_messages_streamed),
        ("two_hosts_mix_shared_memory_and_udp", mixed_hosts),
        ("a_rank_killed_by_a_signal_leaves_nothing", rank_killed),
        ("the_whole_job_killed_leaves_nothing", job_killed),
    ];
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let mut ran = 0;
    for (name, test) in tests {
        if filter.iter().all(|f| !name.contains(f.as_str())) && !filter.is_empty() {
            continue;
        }
        println!("test {name} ...");
        test();
        println!("test {name} ... ok");
        ran += 1;
    }
    println!("test result: ok. {ran} passed");
}

/// The rank program.
fn rank(role: &str) -> mw_core::Result<()> {
    if role == "large" {
        return large_rank();
    }
    let ep = Endpoint::init()?;
    let (me, n) = (ep.rank(), ep.size());
    let shm_peers: Vec<u32> = (0..n).filter(|&p| p != me && ep.shares_memory_with(p)).collect();
    let region = ep.alloc_symmetric(4096, Access::ALL)?;
    let key = region.key();
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    ep.put(right, key, 64 + 8 * u64::from(me), &u64::from(1000 + me).to_le_bytes())?;
    ep.fetch_add_u64(0, key, 0, 1)?;
    let sig = Signal { key, offset: 8, op: SignalOp::Add, value: 1 };
    ep.put_signal(right, key, 1024, &[me as u8; 100], sig)?;
    ep.wait_until(&region, 8, Cmp::Ge, 1)?;
    let mut got = [0u8; 100];
    region.read(1024, &mut got)?;
    assert_eq!(got, [left as u8; 100], "put_signal data");
    ep.barrier()?;
    assert_eq!(ep.get_value(right, key, 64 + 8 * u64::from(me))?, u64::from(1000 + me));
    if me == 0 {
        assert_eq!(region.load_u64(0)?, u64::from(n), "fetch_add exactly once per rank");
    }
    // Registered memory: process_vm_writev from the same-host peers.
    let mut mine = vec![0u8; 4096];
    ep.with_registered(&mut mine, Access::ALL, |reg| -> mw_core::Result<()> {
        let keys = ep.exchange_keys(reg)?;
        ep.put(right, keys[right as usize], 0, &[me as u8 + 1; 32])?;
        ep.barrier()
    })
    .expect("registration")?;
    assert_eq!(&mine[..32], &[left as u8 + 1; 32]);
    let (stats, _) = ep.stats();
    println!("rank {me} ok shm_peers={shm_peers:?} direct={}", stats.shm_direct_ops > 0);
    match role {
        "die" => {
            println!("ready");
            ep.barrier()?;
            if me == 1 {
                let _ = Command::new("kill").args(["-KILL", &std::process::id().to_string()]).status();
                std::thread::sleep(Duration::from_secs(30));
            }
            // The others wait for rank 1 forever; mwrun stops them.
            ep.barrier()?;
            std::thread::sleep(Duration::from_secs(30));
        }
        "hang" => {
            println!("ready pid={}", std::process::id());
            std::thread::sleep(Duration::from_secs(60));
        }
        _ => {}
    }
    drop(region);
    ep.finalize()
}

/// Bytes of a message that cannot be mistaken for another's (or a shift).
fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 13 ^ seed.wrapping_mul(97)) as u8).collect()
}

/// The rank program of `large_messages`: two ranks, each a process.
fn large_rank() -> mw_core::Result<()> {
    let ep = Endpoint::init()?;
    let (me, peer) = (ep.rank(), 1 - ep.rank());
    assert!(ep.shares_memory_with(peer), "the two ranks share memory");
    // Around the staging threshold (2 MiB), not multiples of a chunk, and
    // one below it (the kernel's copy by both ranks).
    let sizes = [(1 << 20) + 5, 2 << 20, (3 << 20) + 7, (16 << 20) + 4095];
    // Rounds go on until the sender has staged (it must be on a CPU while
    // it waits in `send`, which a loaded machine may deny a few times).
    for round in 0..20u32 {
        for (i, &len) in sizes.iter().enumerate() {
            let (tag, seed) = (u64::from(round) * 8 + i as u64, round * 100 + i as u32);
            if me == 0 {
                ep.send(peer, tag, &pattern(seed, len))?;
            } else {
                let mut buf = vec![0xee; len + 9];
                assert_eq!(ep.recv(peer, tag, &mut buf)?.len, len);
                assert!(buf[..len] == pattern(seed, len)[..], "round {round}, {len} bytes");
                assert_eq!(&buf[len..], &[0xee; 9], "bytes past the message untouched");
            }
        }
        let mut go_on = [0u8];
        if me == 0 {
            go_on[0] = u8::from(ep.stats().0.shm_staged_bytes == 0 && round < 19);
            ep.send(peer, 7777, &go_on)?;
        } else {
            ep.recv(peer, 7777, &mut go_on)?;
        }
        if go_on[0] == 0 {
            break;
        }
    }
    // Both directions at once, owned buffers: each rank sends and receives.
    let len = (6 << 20) + 13;
    for round in 0..3u32 {
        let mine = pattern(1000 + round * 2 + me, len);
        let send = ep.isend_owned(peer, 9000 + u64::from(round), mine.clone())?;
        let (buf, status) = ep.irecv_owned(peer, 9000 + u64::from(round), vec![0u8; len])?.wait();
        assert_eq!(status?.len, len);
        assert!(buf == pattern(1000 + round * 2 + peer, len), "round {round}");
        let (back, result) = send.wait();
        result?;
        assert!(back == mine, "the send buffer comes back unchanged");
    }
    let stats = ep.stats().0;
    println!("large ok staged={} streamed={}", stats.shm_staged_bytes > 0, stats.shm_streamed_bytes > 0);
    ep.barrier()?;
    ep.finalize()
}

/// A large message from private memory crosses between processes through
/// the receiver's staging area (`mw_transport::shm::stage`) while the
/// sender waits: every byte lands where it belongs, nothing past the
/// message is touched, both directions at once work, and the sender really
/// staged (its counter).
fn large_messages() {
    large_messages_with(None, "[0] large ok staged=true");
}

/// The same with the sender's non-temporal stores (`MW_SHM_STAGE_STORES=
/// streaming`; by default only while the host keeps the two CPUs far
/// apart): the data is as intact, and the sender counted streamed bytes.
fn large_messages_streamed() {
    large_messages_with(Some("streaming"), "[0] large ok staged=true streamed=true");
}

fn large_messages_with(stores: Option<&str>, rank0_line: &str) {
    let before = dev_shm();
    let mut run = Command::new(MWRUN);
    run.args(["-n", "2", "--timeout", "120", &me(), "large"]).stdin(Stdio::null());
    if let Some(stores) = stores {
        run.env("MW_SHM_STAGE_STORES", stores);
    }
    let out = run.output().expect("mwrun runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(rank0_line), "rank 0 never staged so ({rank0_line:?}):\n{stdout}");
    assert!(stdout.contains("[1] large ok"), "rank 1 did not finish:\n{stdout}");
    assert_nothing_new(&before);
}

fn dev_shm() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|dir| dir.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

fn assert_nothing_new(before: &BTreeSet<String>) {
    let after = dev_shm();
    let new: Vec<_> = after.difference(before).filter(|n| n.contains("memwire") || n.contains("mw")).collect();
    assert!(new.is_empty(), "left in /dev/shm: {new:?}");
}

fn me() -> String {
    std::env::current_exe().unwrap().to_string_lossy().into_owned()
}

fn mwrun(args: &[&str]) -> std::process::Output {
    Command::new(MWRUN).args(args).stdin(Stdio::null()).output().expect("mwrun runs")
}

fn normal_exit() {
    let before = dev_shm();
    let out = mwrun(&["-n", "4", "--timeout", "60", &me(), "work"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for r in 0..4 {
        let peers: Vec<String> = (0..4).filter(|&p| p != r).map(|p| p.to_string()).collect();
        let line = format!("[{r}] rank {r} ok shm_peers=[{}] direct=true", peers.join(", "));
        assert!(stdout.contains(&line), "missing {line:?} in\n{stdout}");
    }
    assert_nothing_new(&before);
}

fn fake_launcher() -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::temp_dir().join(format!("mw-shm-fake-remote-{}", std::process::id()));
    std::fs::write(&path, "#!/bin/sh\nshift\nexec \"$@\"\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

fn mixed_hosts() {
    // Ranks 0, 2 on "a" and 1, 3 on "b" (MW_HOST), all really on this
    // machine: shared memory inside each fake host, UDP across.
    let launcher = fake_launcher();
    let out = mwrun(&[
        "-n",
        "4",
        "--hosts",
        "a,b",
        "--launcher-exec",
        &launcher,
        "--bootstrap-addr",
        "127.0.0.1",
        "--timeout",
        "60",
        &me(),
        "work",
    ]);
    let _ = std::fs::remove_file(&launcher);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for (r, peer) in [(0, 2), (1, 3), (2, 0), (3, 1)] {
        let line = format!("[{r}] rank {r} ok shm_peers=[{peer}]");
        assert!(stdout.contains(&line), "missing {line:?} in\n{stdout}");
    }
}

fn rank_killed() {
    let before = dev_shm();
    let out = mwrun(&["-n", "4", "--grace", "1", "--timeout", "60", &me(), "die"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(stderr.contains("rank 1") && stderr.contains("killed by signal 9"), "{stderr}");
    assert_nothing_new(&before);
}

fn job_killed() {
    let before = dev_shm();
    let mut job = Command::new(MWRUN)
        .env("MW_TRANSPORT", "auto")
        .args(["-n", "4", "--timeout", "60", &me(), "hang"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut pids = Vec::new();
    for line in BufReader::new(job.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(pid) = line.split("ready pid=").nth(1) {
            pids.push(pid.trim().to_owned());
            if pids.len() == 4 {
                break;
            }
        }
    }
    assert_eq!(pids.len(), 4, "ranks did not get ready");
    // Kill everything at once, mwrun included: nobody gets to clean up.
    let mut all = pids.clone();
    all.push(job.id().to_string());
    Command::new("kill").arg("-KILL").args(&all).status().unwrap();
    job.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| std::path::Path::new(&format!("/proc/{p}")).exists()) {
        assert!(Instant::now() < deadline, "ranks still alive");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_nothing_new(&before);
}
