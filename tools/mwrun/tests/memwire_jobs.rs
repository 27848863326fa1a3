//! Real memwire jobs of several processes: this test binary re-runs itself as
//! the ranks (the role is chosen by `MWJOB_ROLE`), under `mwrun` and in the
//! plain environment-variable mode, so every process is a separate address
//! space talking UDP through the kernel, configured only by `MW_*` variables.
//!
//! A custom harness (`harness = false`): without `MWJOB_ROLE` it is the test
//! driver and runs the cases below; with it, it is one rank.
//!
//! The multi-host cases (`netns/`: 4 ranks on 4 network namespaces, real
//! loss, a lossy relay, a killed rank, hostile packets) need root and print
//! SKIPPED otherwise.

#[path = "netns/mod.rs"]
mod netns;
mod support;

use std::process::{Child, Command, ExitCode, Output, Stdio};
use std::time::{Duration, Instant};

use mw_core::{Access, AtomicOp, AtomicWidth, Cmp, Endpoint, Error, Signal, SignalOp};

const MWRUN: &str = env!("CARGO_BIN_EXE_mwrun");
const ROLE: &str = "MWJOB_ROLE";

fn main() -> ExitCode {
    if let Ok(role) = std::env::var(ROLE) {
        return rank_main(&role);
    }
    let cases: &[(&str, fn())] = &[
        ("every_one_sided_op_across_4_processes", every_one_sided_op_across_4_processes),
        ("every_one_sided_op_under_injected_faults", every_one_sided_op_under_injected_faults),
        ("environment_variable_mode_without_mwrun", environment_variable_mode_without_mwrun),
        ("mw_stats_prints_counters_at_finalize", mw_stats_prints_counters_at_finalize),
        ("eager_limits_between_processes", eager_limits_between_processes),
        ("progress_thread_serves_a_computing_process", progress_thread_serves_a_computing_process),
        ("a_killed_peer_fails_operations_instead_of_hanging", a_killed_peer_fails_operations_instead_of_hanging),
        (
            "a_killed_peer_is_reported_within_2_s_at_20_percent_loss",
            a_killed_peer_is_reported_within_2_s_at_20_percent_loss,
        ),
        ("a_rank_that_fails_makes_mwrun_fail_naming_it", a_rank_that_fails_makes_mwrun_fail_naming_it),
        ("a_computing_rank_is_served_and_not_taken_for_dead", a_computing_rank_is_served_and_not_taken_for_dead),
        ("a_peer_dying_during_a_barrier_fails_the_barrier", a_peer_dying_during_a_barrier_fails_the_barrier),
        ("a_peer_dying_before_a_single_copy_alltoall_fails_it", a_peer_dying_before_a_single_copy_alltoall_fails_it),
        ("netns_every_one_sided_op_on_4_hosts_under_loss", netns::every_one_sided_op_on_4_hosts_under_loss),
        ("netns_every_op_on_4_hosts_through_the_lossy_relay", netns::every_op_on_4_hosts_through_the_lossy_relay),
        (
            "netns_a_rank_killed_on_a_lossy_network_is_detected_within_the_deadline",
            netns::a_rank_killed_on_a_lossy_network_is_detected_within_the_deadline,
        ),
        (
            "netns_hostile_packets_and_bad_operations_across_hosts",
            netns::hostile_packets_and_bad_operations_across_hosts,
        ),
    ];
    support::run_cases(cases)
}

// ---------------------------------------------------------------- driver side

/// `mwrun OPTIONS -x MWJOB_ROLE=role <this binary>`.
fn mwrun(options: &[&str], role: &str) -> Output {
    let me = std::env::current_exe().expect("own path");
    Command::new(MWRUN)
        .args(["--timeout", "120"])
        .args(options)
        .args(["-x", &format!("{ROLE}={role}")])
        .arg(me)
        .output()
        .expect("run mwrun")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts success and that every rank printed `"<role> ok"`.
fn assert_all_ok(out: &Output, role: &str, n: u32) {
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "job failed: {:?}\nstdout:\n{stdout}\nstderr:\n{}", out.status, text(&out.stderr));
    for rank in 0..n {
        let line = format!("[{rank}] {role} ok");
        assert!(stdout.lines().any(|l| l.starts_with(&line)), "missing {line:?} in:\n{stdout}");
    }
}

fn every_one_sided_op_across_4_processes() {
    let out = mwrun(&["-n", "4"], "rma");
    assert_all_ok(&out, "rma", 4);
    let out = mwrun(&["-n", "2"], "rma");
    assert_all_ok(&out, "rma", 2);
}

/// Between processes of one host the eager limit is 16 KiB, or 64 KiB where
/// the kernel's cross-memory copy is slow (each rank measures it), unless
/// `MW_SHM_EAGER_LIMIT` names one; over UDP it is `MW_EAGER_LIMIT`'s 64 KiB.
/// The sizes at and just past the limit go eagerly and by rendezvous.
fn eager_limits_between_processes() {
    for (options, expect) in [
        (&["-n", "2"][..], "auto"),
        (&["-n", "2", "-x", "MW_SHM_EAGER_LIMIT=5000"][..], "5000"),
        (&["-n", "2", "-x", "MW_TRANSPORT=udp"][..], "65536"),
    ] {
        let mut options = options.to_vec();
        let expect = format!("MWJOB_EAGER={expect}");
        options.extend_from_slice(&["-x", &expect]);
        let out = mwrun(&options, "eager");
        assert_all_ok(&out, "eager", 2);
    }
}

fn every_one_sided_op_under_injected_faults() {
    for faults in [
        &["-x", "MW_FAULT_DROP=0.05", "-x", "MW_FAULT_SEED=7"][..],
        &["-x", "MW_FAULT_DUP=0.05", "-x", "MW_FAULT_REORDER=0.05", "-x", "MW_FAULT_SEED=8"][..],
    ] {
        let mut options = vec!["-n", "3"];
        options.extend_from_slice(faults);
        let out = mwrun(&options, "rma");
        assert_all_ok(&out, "rma", 3);
    }
}

/// Starts `n` ranks directly with `MW_RANK`/`MW_SIZE`/`MW_BOOTSTRAP` (rank 0
/// serves the rendezvous and makes the job key), no mwrun involved.
fn spawn_env_mode(n: u32, role: &str, extra: &[(&str, &str)]) -> Vec<Child> {
    let me = std::env::current_exe().expect("own path");
    let boot = format!("127.0.0.1:{}", support::free_port());
    (0..n)
        .map(|rank| {
            let mut cmd = Command::new(&me);
            cmd.env(ROLE, role)
                .env("MW_RANK", rank.to_string())
                .env("MW_SIZE", n.to_string())
                .env("MW_BOOTSTRAP", &boot)
                .env("MW_BOOTSTRAP_TIMEOUT", "30")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for (k, v) in extra {
                cmd.env(k, v);
            }
            cmd.spawn().expect("spawn rank")
        })
        .collect()
}

fn environment_variable_mode_without_mwrun() {
    let children = spawn_env_mode(3, "rma", &[]);
    for (rank, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("wait");
        assert!(out.status.success(), "rank {rank}: {:?}\n{}", out.status, text(&out.stderr));
        assert!(text(&out.stdout).contains("rma ok"), "rank {rank}: {}", text(&out.stdout));
    }
}

fn mw_stats_prints_counters_at_finalize() {
    let out = mwrun(&["-n", "2", "-x", "MW_STATS=1"], "small");
    assert_all_ok(&out, "small", 2);
    let stderr = text(&out.stderr);
    // A few labelled lines per rank, operation layer, transport and protocol.
    for rank in 0..2 {
        for what in ["operations ", "transport  ", "packets    sent ", "drops      total "] {
            let needle = format!("memwire rank {rank} {what}");
            assert!(stderr.contains(&needle), "no {needle:?} in stderr:\n{stderr}");
        }
    }
    for counter in ["retransmitted on timeout", "oversized datagrams dropped", "initiated"] {
        assert!(stderr.contains(counter), "counter {counter} not printed:\n{stderr}");
    }
    assert!(!stderr.contains("Stats {"), "raw Debug structs printed:\n{stderr}");
    let quiet = mwrun(&["-n", "2"], "small");
    assert_all_ok(&quiet, "small", 2);
    assert!(!text(&quiet.stderr).contains("memwire rank"), "counters printed without MW_STATS");
}

fn progress_thread_serves_a_computing_process() {
    let out = mwrun(&["-n", "2", "-x", "MW_PROGRESS=thread"], "passive");
    assert_all_ok(&out, "passive", 2);
}

fn a_killed_peer_fails_operations_instead_of_hanging() {
    // Env mode: no launcher kills the survivors when rank 2 dies.
    let children = spawn_env_mode(3, "victim", &[("MW_PEER_DEAD_MS", "500")]);
    assert_survivors_ok(children, 2, "victim");
}

/// Four ranks over UDP on loopback with 20% of every rank's datagrams
/// dropped, the default dead-peer deadline: rank 3 kills itself, and each
/// survivor, waiting on it in a fetch_add, must get `PeerUnreachable` less
/// than 2.0 s after the kill (measured from the kill time rank 3 wrote just
/// before dying); then the survivors work with each other, and idle, for
/// longer than the deadline at the same loss, and none may be taken for
/// dead (the netns role `netns-victim`, run here without namespaces).
fn a_killed_peer_is_reported_within_2_s_at_20_percent_loss() {
    let dir = std::env::temp_dir().join(format!("mwjob-victim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let dir_s = dir.display().to_string();
    let env = [("MWJOB_DIR", dir_s.as_str()), ("MW_FAULT_DROP", "0.2"), ("MW_FAULT_SEED", "39")];
    let children = spawn_env_mode(4, "netns-victim", &env);
    let mut detected = Vec::new();
    for (rank, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("wait");
        if rank == 3 {
            assert!(!out.status.success(), "rank 3 should have died");
            continue;
        }
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "rank {rank}: {:?}\n{stdout}\n{}", out.status, text(&out.stderr));
        assert!(stdout.contains("netns-victim ok"), "rank {rank}: {stdout}");
        detected.extend(stdout.lines().filter(|l| l.contains("detected")).map(str::to_owned));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(detected.len(), 3, "{detected:?}");
    for line in detected {
        println!("  {line}");
    }
}

/// Waits for env-mode ranks: `dead` must have died, every other rank must
/// succeed and print `"<role> ok"`.
fn assert_survivors_ok(children: Vec<Child>, dead: usize, role: &str) {
    for (rank, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("wait");
        if rank == dead {
            assert!(!out.status.success(), "rank {rank} should have died");
            continue;
        }
        assert!(out.status.success(), "rank {rank}: {:?}\n{}", out.status, text(&out.stderr));
        assert!(text(&out.stdout).contains(&format!("{role} ok")), "rank {rank}: {}", text(&out.stdout));
    }
}

/// Default progress mode: rank 1 computes for well over the dead-peer
/// deadline without calling memwire; the background watchdog answers rank 0.
fn a_computing_rank_is_served_and_not_taken_for_dead() {
    let out = mwrun(&["-n", "2", "-x", "MW_PEER_DEAD_MS=300"], "busy");
    assert_all_ok(&out, "busy", 2);
}

/// Keepalives: nothing is outstanding toward rank 2 when it dies, yet the
/// others, waiting for it in a barrier, learn it is gone instead of hanging.
fn a_peer_dying_during_a_barrier_fails_the_barrier() {
    let children = spawn_env_mode(3, "dies-in-barrier", &[("MW_PEER_DEAD_MS", "500")]);
    assert_survivors_ok(children, 2, "dies-in-barrier");
}

/// The single-copy alltoall waits for members in the order they expose
/// their buffers: with rank 2 killed before it, each survivor reads the
/// other's block, then gets `PeerUnreachable` instead of waiting forever
/// (and still waits for the other survivor to finish reading its buffer).
fn a_peer_dying_before_a_single_copy_alltoall_fails_it() {
    let children = spawn_env_mode(3, "dies-before-alltoall", &[("MW_PEER_DEAD_MS", "500")]);
    assert_survivors_ok(children, 2, "dies-before-alltoall");
}

fn a_rank_that_fails_makes_mwrun_fail_naming_it() {
    let out = mwrun(&["-n", "3"], "fail-rank-1");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("rank 1"), "mwrun should name rank 1:\n{stderr}");
}

// ------------------------------------------------------------------ rank side

fn rank_main(role: &str) -> ExitCode {
    let ep = match Endpoint::init() {
        Ok(ep) => ep,
        Err(e) => {
            eprintln!("init failed: {e}");
            return ExitCode::from(3);
        }
    };
    if netns::ROLES.contains(&role) {
        return netns::rank_role(ep, role);
    }
    match role {
        "rma" => rma(&ep),
        "small" => small(&ep),
        "eager" => eager(&ep),
        "passive" => passive(&ep),
        "victim" => return victim(ep),
        "busy" => busy(&ep),
        "dies-in-barrier" => {
            ep.barrier().expect("barrier");
            if ep.rank() == 2 {
                let _ = Command::new("kill").args(["-KILL", &std::process::id().to_string()]).status();
                std::thread::sleep(Duration::from_secs(60));
                return ExitCode::from(7);
            }
            // Usually rank 2. But a survivor that saw its barrier fail leaves
            // at once, and over shared memory an exited process is noticed
            // as fast as a killed one: the other survivor may name it first.
            match ep.barrier() {
                Err(Error::PeerUnreachable { rank }) => assert!(rank != ep.rank() && rank <= 2, "named rank {rank}"),
                other => panic!("barrier with a dead rank returned {other:?}"),
            }
            println!("dies-in-barrier ok");
            return ExitCode::SUCCESS;
        }
        "dies-before-alltoall" => {
            let mut team = ep.team_world().expect("team");
            team.barrier().expect("barrier");
            if ep.rank() == 2 {
                let _ = Command::new("kill").args(["-KILL", &std::process::id().to_string()]).status();
                std::thread::sleep(Duration::from_secs(60));
                return ExitCode::from(7);
            }
            let n = 64 << 10;
            let send = vec![ep.rank() as u8 + 1; 3 * n];
            let mut recv = vec![0u8; 3 * n];
            match team.alltoall_with(mw_core::AlltoallAlgo::Direct, &send, &mut recv) {
                Err(Error::PeerUnreachable { rank }) => assert!(rank != ep.rank() && rank <= 2, "named rank {rank}"),
                other => panic!("alltoall with a dead rank returned {other:?}"),
            }
            println!("dies-before-alltoall ok");
            return ExitCode::SUCCESS;
        }
        "fail-rank-1" => {
            ep.barrier().expect("barrier");
            if ep.rank() == 1 {
                eprintln!("rank 1 fails on purpose");
                std::process::exit(5);
            }
            // The others wait for a barrier rank 1 never reaches: mwrun must stop them.
            let _ = ep.barrier();
            return ExitCode::from(6);
        }
        other => panic!("unknown role {other}"),
    }
    println!("{role} ok");
    ep.finalize().expect("finalize");
    ExitCode::SUCCESS
}

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    let mut x = u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Every one-sided operation between neighbours, verified byte by byte;
/// atomics from every rank onto one word, checked exactly once.
fn rma(ep: &Endpoint) {
    let (me, n) = (ep.rank(), ep.size());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    const SLOT: u64 = 2 << 20; // first slot: the put/get sizes below (~1.1 MiB)
    let region = ep.alloc_symmetric((SLOT * 3) as usize, Access::ALL).expect("alloc");
    region.enable_arrival_log(1024);
    let key = region.key();
    ep.barrier().expect("barrier");

    // put / get at odd offsets and sizes, inline to multi-chunk (1 MiB + 3).
    let mut at = 3u64;
    for (i, len) in [0usize, 1, 31, 32, 33, 1471, 1473, 65_537, (1 << 20) + 3].into_iter().enumerate() {
        let data = pattern(me * 100 + i as u32, len);
        ep.put(right, key, at, &data).expect("put");
        let mut back = vec![0u8; len];
        ep.get(right, key, at, &mut back).expect("get");
        assert_eq!(back, data, "get after put, {len} B");
        at += len as u64 + 1;
    }
    // Value forms.
    ep.put_value(right, key, SLOT + 8, 0xDEAD_BEEF_0000 + u64::from(me)).expect("put_value");
    assert_eq!(ep.get_value(right, key, SLOT + 8).expect("get_value"), 0xDEAD_BEEF_0000 + u64::from(me));
    // Nonblocking puts in flight together, completion flag at the initiator.
    let bufs: Vec<Vec<u8>> = (0..8).map(|i| pattern(500 + me * 8 + i, 999)).collect();
    let handles: Vec<_> = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let h = ep.put_nb(right, key, SLOT + 1024 + i as u64 * 1000, b).expect("put_nb");
            h.notify(&region, SLOT + 16).expect("notify");
            h
        })
        .collect();
    mw_core::wait_all(handles).expect("wait_all");
    assert_eq!(region.load_u64(SLOT + 16).expect("flag"), 8, "one completion flag bump per put");

    // Atomics onto rank 0, from everyone: exactly once.
    const M: u64 = 50;
    let mut tickets = Vec::new();
    for _ in 0..M {
        tickets.push(ep.fetch_add_u64(0, key, 2 * SLOT, 1).expect("fetch_add"));
        ep.add_u32(0, key, 2 * SLOT + 8, 2).expect("add_u32");
    }
    assert!(tickets.windows(2).all(|w| w[0] < w[1]), "tickets from one rank increase");
    let word = 2 * SLOT + 64 + 16 * u64::from(me);
    ep.atomic_store(right, key, word, AtomicWidth::U64, 5).expect("store");
    assert_eq!(ep.swap_u64(right, key, word, 9).expect("swap"), 5);
    assert_eq!(ep.compare_swap_u64(right, key, word, 1, 7).expect("cas miss"), 9);
    assert_eq!(ep.compare_swap_u64(right, key, word, 9, 100).expect("cas hit"), 9);
    assert_eq!(ep.fetch_bitwise(right, key, word, AtomicOp::Or, AtomicWidth::U64, 3).expect("or"), 100);
    assert_eq!(ep.fetch_bitwise(right, key, word, AtomicOp::And, AtomicWidth::U64, 6).expect("and"), 103);
    ep.bitwise(right, key, word, AtomicOp::Xor, AtomicWidth::U64, 1).expect("xor");
    assert_eq!(ep.atomic_load(right, key, word, AtomicWidth::U64).expect("load"), 7);
    assert_eq!(ep.swap_u32(right, key, word + 8, 4).expect("swap32"), 0);
    assert_eq!(ep.fetch_add_u32(right, key, word + 8, 1).expect("fadd32"), 4);
    assert_eq!(ep.compare_swap_u32(right, key, word + 8, 5, 6).expect("cas32"), 5);

    // Strided, iov, masked, address register.
    let src = pattern(70 + me, 64);
    let sbase = SLOT + 20_000;
    ep.put_strided(right, key, sbase, &src, 3, 10, 5, 7).expect("put_strided");
    let mut back = vec![0u8; 40];
    ep.get_strided(right, key, sbase, &mut back, 3, 10, 7, 4).expect("get_strided");
    for i in 0..10 {
        assert_eq!(&back[i * 4..i * 4 + 3], &src[i * 5..i * 5 + 3], "strided element {i}");
    }
    let (a, b) = (pattern(80 + me, 17), pattern(90 + me, 3000));
    ep.put_iov(right, key, &[(SLOT + 30_000, &a), (SLOT + 31_000, &b)]).expect("put_iov");
    let mut got = vec![0u8; 3000];
    ep.get(right, key, SLOT + 31_000, &mut got).expect("get iov");
    assert_eq!(got, b);
    ep.put_masked(right, key, SLOT + 40_000, &[0xABu8; 64], 1 | (1 << 15)).expect("put_masked");
    ep.set_register(3, &region, SLOT + 50_000, 64).expect("set_register");
    ep.barrier().expect("barrier");
    ep.put_to_register(right, 3, b"landed via register").expect("put_to_register");

    // put_signal around the ring: data, then the signal word.
    let msg = pattern(300 + me, 5000);
    let sig = Signal { key, offset: SLOT + 24, op: SignalOp::Add, value: 1 };
    ep.put_signal(right, key, SLOT + 60_000, &msg, sig).expect("put_signal");
    ep.wait_until(&region, SLOT + 24, Cmp::Ge, 1).expect("wait_until");
    let mut got = vec![0u8; 5000];
    region.read(SLOT + 60_000, &mut got).expect("read");
    assert_eq!(got, pattern(300 + left, 5000), "data visible with the signal");
    ep.quiet().expect("quiet");
    ep.barrier().expect("barrier");

    // What the left neighbour wrote here, checked locally.
    let mut block = [0u8; 64];
    region.read(SLOT + 40_000, &mut block).expect("read");
    assert_eq!(&block[..4], &[0xAB; 4]);
    assert!(block[4..60].iter().all(|&x| x == 0), "masked-out words untouched");
    assert_eq!(&block[60..], &[0xAB; 4]);
    let mut reg = [0u8; 19];
    region.read(SLOT + 50_000, &mut reg).expect("read");
    assert_eq!(&reg, b"landed via register");
    use mw_core::ArrivalKind;
    let from_left = [ArrivalKind::PutStrided, ArrivalKind::PutIov, ArrivalKind::PutMasked, ArrivalKind::RegisterPut];
    let mut kinds = Vec::new();
    while let Some(arrival) = region.pop_arrival() {
        if from_left.contains(&arrival.kind) {
            assert_eq!(arrival.source, left, "{:?} arrives from the left neighbour", arrival.kind);
        }
        kinds.push(arrival.kind);
    }
    for kind in from_left {
        assert!(kinds.contains(&kind), "arrival log lacks {kind:?}");
    }
    ep.barrier().expect("barrier");
    if me == 0 {
        assert_eq!(region.load_u64(2 * SLOT).expect("counter"), M * u64::from(n), "fetch_add exactly once");
        let mut w = [0u8; 4];
        region.read(2 * SLOT + 8, &mut w).expect("read");
        assert_eq!(u32::from_le_bytes(w), 2 * M as u32 * n, "add_u32 exactly once");
    }
    // Protection: errors at the initiator, nothing written at the target.
    assert_eq!(ep.put(right, mw_core::RegionKey(0x5eed), 0, b"x"), Err(Error::BadKey));
    assert_eq!(ep.put(right, key, 3 * SLOT - 2, b"xyz"), Err(Error::OutOfBounds));
    ep.barrier().expect("barrier");
}

/// The `eager_limits_between_processes` rank: checks its limit toward the
/// other rank against `MWJOB_EAGER` ("auto": 16 or 64 KiB), then rank 0 sends
/// the sizes at and past it and both check what went which way.
fn eager(ep: &Endpoint) {
    let peer = 1 - ep.rank();
    let limit = ep.eager_limit(peer).expect("eager limit");
    match std::env::var("MWJOB_EAGER").expect("MWJOB_EAGER").as_str() {
        "auto" => assert!(limit == 16 << 10 || limit == 64 << 10, "limit {limit}"),
        fixed => assert_eq!(limit, fixed.parse::<usize>().expect("a byte count")),
    }
    // Both ranks must agree for the receiver's sizes below.
    assert_eq!(ep.eager_limit(peer).expect("eager limit"), limit);
    let mut theirs = [0u8; 8];
    let mine = (limit as u64).to_le_bytes();
    if ep.rank() == 0 {
        ep.send(peer, 9, &mine).expect("send limit");
        ep.recv(peer, 9, &mut theirs).expect("recv limit");
    } else {
        ep.recv(peer, 9, &mut theirs).expect("recv limit");
        ep.send(peer, 9, &mine).expect("send limit");
    }
    let sender_limit = if ep.rank() == 0 { limit } else { u64::from_le_bytes(theirs) as usize };
    for (i, len) in [sender_limit, sender_limit + 1].into_iter().enumerate() {
        if ep.rank() == 0 {
            ep.send(peer, i as u64, &pattern(i as u32, len)).expect("send");
        } else {
            let mut buf = vec![0u8; len];
            assert_eq!(ep.recv(peer, i as u64, &mut buf).expect("recv").len, len);
            assert_eq!(buf, pattern(i as u32, len), "size {len}");
        }
    }
    if ep.rank() == 0 {
        let stats = ep.msg_stats();
        // The limit exchange, the message at the limit; the one past it.
        assert_eq!((stats.eager_sent, stats.rndv_sent), (2, 1), "{stats:?}");
    }
    ep.barrier().expect("barrier");
}

fn small(ep: &Endpoint) {
    let region = ep.alloc_symmetric(64, Access::ALL).expect("alloc");
    let peer = (ep.rank() + 1) % ep.size();
    ep.fetch_add_u64(peer, region.key(), 0, 1).expect("fetch_add");
    ep.put(peer, region.key(), 8, b"stats").expect("put");
    ep.barrier().expect("barrier");
}

/// Rank 1 computes without calling memwire; rank 0's get, fetch_add and put
/// must be served meanwhile by rank 1's progress thread. Rank 1 notices the
/// put by reading its own memory, and gives up (failing) after 20 s.
fn passive(ep: &Endpoint) {
    let region = ep.alloc_symmetric(64, Access::ALL).expect("alloc");
    let key = region.key();
    if ep.rank() == 1 {
        region.store_u64(0, 42).expect("store");
        ep.barrier().expect("barrier");
        let start = Instant::now();
        let mut x = 1u64;
        while region.load_u64(16).expect("load") == 0 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            assert!(start.elapsed() < Duration::from_secs(20), "rank 0's put never landed while computing");
        }
        assert_eq!(region.load_u64(8).expect("load"), 1, "the fetch_add landed too");
        std::hint::black_box(x);
    } else {
        ep.barrier().expect("barrier");
        assert_eq!(ep.get_value(1, key, 0).expect("get"), 42);
        assert_eq!(ep.fetch_add_u64(1, key, 8, 1).expect("fetch_add"), 0);
        ep.put_value(1, key, 16, 1).expect("put");
    }
    ep.barrier().expect("barrier");
}

/// Rank 1 computes for 1.5 s (5 × the dead-peer deadline) without calling
/// memwire while rank 0 reads and updates its memory.
fn busy(ep: &Endpoint) {
    let region = ep.alloc_symmetric(64, Access::ALL).expect("alloc");
    let key = region.key();
    if ep.rank() == 1 {
        region.store_u64(0, 7).expect("store");
        ep.barrier().expect("barrier");
        let start = Instant::now();
        let mut x = 1u64;
        while start.elapsed() < Duration::from_millis(1500) {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert_eq!(region.load_u64(8).expect("load"), 3, "rank 0's atomics landed while computing");
    } else {
        ep.barrier().expect("barrier");
        for _ in 0..3 {
            assert_eq!(ep.get_value(1, key, 0).expect("get from a computing rank"), 7);
            ep.fetch_add_u64(1, key, 8, 1).expect("fetch_add on a computing rank");
            std::thread::sleep(Duration::from_millis(400));
        }
    }
    ep.barrier().expect("barrier after computing");
}

/// Rank 2 dies (SIGKILL) after the barrier; ranks 0 and 1 keep issuing
/// operations toward it and must get `PeerUnreachable`, not hang.
fn victim(ep: Endpoint) -> ExitCode {
    let region = ep.alloc_symmetric(64, Access::ALL).expect("alloc");
    let key = region.key();
    ep.barrier().expect("barrier");
    if ep.rank() == 2 {
        // The process ends here without a word, as if its machine were lost.
        let _ = Command::new("kill").args(["-KILL", &std::process::id().to_string()]).status();
        std::thread::sleep(Duration::from_secs(60));
        return ExitCode::from(7);
    }
    let start = Instant::now();
    let error = loop {
        match ep.put_value(2, key, 0, 1) {
            Ok(()) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => break e,
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no error 30 s after the peer died");
    };
    assert_eq!(error, Error::PeerUnreachable { rank: 2 });
    assert_eq!(ep.poll_peer_event(), Some(mw_core::PeerEvent::Down { rank: 2 }));
    assert!(ep.is_peer_down(2) && !ep.is_peer_down(1 - ep.rank()));
    assert_eq!(ep.fetch_add_u64(2, key, 0, 1), Err(Error::PeerUnreachable { rank: 2 }));
    let mut buf = [0u8; 8];
    assert_eq!(ep.get(2, key, 0, &mut buf), Err(Error::PeerUnreachable { rank: 2 }));
    // A blocking receive from the dead rank fails too (over shared memory it
    // waits at the rank's ring without posting itself).
    assert_eq!(ep.recv(2, 9, &mut buf), Err(Error::PeerUnreachable { rank: 2 }));
    // The survivors still work with each other. Each then raises a flag at
    // the other and waits for the other's: neither leaves while the other
    // still has operations toward it in flight.
    let other = 1 - ep.rank();
    ep.put_value(other, key, 8 + 8 * u64::from(ep.rank()), 77).expect("put to a live peer");
    assert_eq!(ep.get_value(other, key, 8 + 8 * u64::from(ep.rank())).expect("get"), 77);
    ep.put_value(other, key, 32 + 8 * u64::from(ep.rank()), 1).expect("done flag");
    ep.wait_until(&region, 32 + 8 * u64::from(other), Cmp::Eq, 1).expect("peer's done flag");
    println!("victim ok");
    // No collective finalize with a dead rank: dropping the endpoint leaves
    // without a barrier.
    ExitCode::SUCCESS
}
