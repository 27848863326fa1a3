//! Collectives and `quiesce` across real processes. Like `memwire_jobs.rs`
//! this binary re-runs itself as the ranks (role in `MWCOLL_ROLE`), with a
//! custom harness (`harness = false`): without the variable it is the driver.
//!
//! The preemption case is PM/UDP's gang scheduling (seed 004): the job
//! quiesces, the driver stops every process with SIGSTOP for longer than
//! the dead-peer timeout, resumes them with SIGCONT, and the job carries on
//! with nothing lost and no peer declared dead.

mod support;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

use mw_core::{Access, AllgatherAlgo, AllreduceAlgo, AlltoallAlgo, BarrierAlgo, DType, Endpoint, ReduceOp};

const ROLE: &str = "MWCOLL_ROLE";

fn main() -> ExitCode {
    if let Ok(role) = std::env::var(ROLE) {
        return rank_main(&role);
    }
    let cases: &[(&str, fn())] = &[
        ("collectives_across_4_processes", collectives_across_4_processes),
        ("vector_collectives_across_4_processes", vector_collectives_across_4_processes),
        ("trials_across_4_processes", trials_across_4_processes),
        ("quiesce_sigstop_sigcont_loses_nothing", quiesce_sigstop_sigcont_loses_nothing),
        ("ip_multicast_across_4_processes", ip_multicast_across_4_processes),
        ("multicast_across_two_hosts_with_shared_memory", multicast_across_two_hosts_with_shared_memory),
    ];
    support::run_cases(cases)
}

// ---------------------------------------------------------------- driver side

fn spawn_ranks(n: u32, role: &str, extra: &[(&str, &str)]) -> Vec<Child> {
    spawn_ranks_with(n, role, extra, |_| Vec::new())
}

/// [`spawn_ranks`] with variables of its own for each rank.
fn spawn_ranks_with(
    n: u32,
    role: &str,
    extra: &[(&str, &str)],
    per_rank: impl Fn(u32) -> Vec<(&'static str, String)>,
) -> Vec<Child> {
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
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for (k, v) in extra {
                cmd.env(k, v);
            }
            for (k, v) in per_rank(rank) {
                cmd.env(k, v);
            }
            cmd.spawn().expect("spawn rank")
        })
        .collect()
}

fn finish(children: Vec<Child>, role: &str) {
    for (rank, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("wait");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(&format!("{role} ok")),
            "rank {rank}: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn collectives_across_4_processes() {
    finish(spawn_ranks(4, "collectives", &[]), "collectives");
}

/// NAS IS's pattern (allreduce, alltoall of counts, alltoallv of keys) as
/// four processes on this 2-CPU machine, with blocks on both sides of a
/// vector slot (some inline, some in the second round). Before the second
/// round heard from every member, a member could leave it early, start the
/// allreduce and write into an area another member still copied a block
/// out of: IS W at 4 ranks failed verification on every run.
fn vector_collectives_across_4_processes() {
    finish(spawn_ranks(4, "vectors", &[]), "vectors");
}

/// The automatic allgather and alltoall trying both kinds of algorithm
/// (`MW_COLL_TRIALS=always`: whatever the kernel's copy costs on this
/// host) as four processes on 2 CPUs, where the direct algorithms read
/// through `process_vm_readv`: every call right, before, during and after
/// the decision, for two size classes interleaved.
fn trials_across_4_processes() {
    finish(spawn_ranks(4, "trials", &[("MW_COLL_TRIALS", "always")]), "trials");
}

/// Four processes on one host, UDP between all: every multicast goes by IP
/// multicast (required: `MW_MCAST=1`), each process with its own socket on
/// the group port; under send-path faults too.
fn ip_multicast_across_4_processes() {
    finish(spawn_ranks(4, "multicast", &[("MW_MCAST", "1"), ("MW_TRANSPORT", "udp")]), "multicast");
    let faults =
        [("MW_MCAST", "1"), ("MW_FAULT_DROP", "3%"), ("MW_FAULT_REORDER", "3%"), ("MW_FAULT_MCAST_DROP", "3%")];
    finish(spawn_ranks(4, "multicast", &faults), "multicast");
}

/// Two fake hosts of two processes each, shared memory inside a host: the
/// root's host-mate gets a direct put, the other host's ranks the group.
fn multicast_across_two_hosts_with_shared_memory() {
    let hosts = |rank: u32| vec![("MW_HOST", if rank < 2 { "alpha" } else { "beta" }.to_owned())];
    finish(spawn_ranks_with(4, "multicast", &[("MW_TRANSPORT", "auto")], hosts), "multicast");
}

fn signal(children: &[Child], sig: i32) {
    for child in children {
        // SAFETY: plain kill(2) on a child process we spawned and still own.
        let rc = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill({}, {sig}) failed", child.id());
    }
}

fn quiesce_sigstop_sigcont_loses_nothing() {
    // A stop three times longer than the dead-peer timeout.
    let mut children = spawn_ranks(4, "preempt", &[("MW_PEER_DEAD_MS", "1000")]);
    // Each rank prints "quiesced" once quiesce() returned.
    let mut readers: Vec<_> = children.iter_mut().map(|c| BufReader::new(c.stdout.take().expect("stdout"))).collect();
    for (rank, reader) in readers.iter_mut().enumerate() {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(reader.read_line(&mut line).expect("read") > 0, "rank {rank} exited before quiescing");
            if line.trim() == "quiesced" {
                break;
            }
        }
    }
    signal(&children, libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(3));
    signal(&children, libc::SIGCONT);
    // Rank 0 waits for this before joining the others, who wait in a barrier.
    writeln!(children[0].stdin.as_mut().expect("stdin"), "go").expect("write go");
    let mut report = String::new();
    let mut ok = true;
    for (rank, (child, mut reader)) in children.into_iter().zip(readers).enumerate() {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut reader, &mut rest).expect("read");
        let out = child.wait_with_output().expect("wait");
        ok &= out.status.success() && rest.contains("preempt ok");
        report += &format!(
            "rank {rank}: {:?}\nstdout:\n{rest}\nstderr:\n{}\n",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(ok, "{report}");
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
    match role {
        "collectives" => collectives(&ep),
        "preempt" => preempt(&ep),
        "multicast" => multicast(&ep),
        "vectors" => vectors(&ep),
        "trials" => trials(&ep),
        _ => panic!("unknown role {role}"),
    }
    println!("{role} ok");
    ep.finalize().expect("finalize");
    ExitCode::SUCCESS
}

fn collectives(ep: &Endpoint) {
    let mut team = ep.team_world().expect("team");
    let (p, me) = (team.size() as usize, team.rank() as usize);
    for &algo in BarrierAlgo::ALL {
        for _ in 0..20 {
            team.barrier_with(algo).expect("barrier");
        }
    }
    for n in [8usize, 65_536] {
        let mut buf = vec![me as u8; n];
        team.broadcast(2, &mut buf).expect("broadcast");
        assert!(buf.iter().all(|&b| b == 2));
        for &algo in AllgatherAlgo::ALL {
            let mut all = vec![0u8; n * p];
            team.allgather_with(algo, &vec![me as u8; n], &mut all).expect("allgather");
            assert!((0..p).all(|r| all[r * n..(r + 1) * n].iter().all(|&b| b == r as u8)));
        }
        let send: Vec<u8> = (0..p).flat_map(|j| vec![(me * 16 + j) as u8; n]).collect();
        for &algo in AlltoallAlgo::ALL.iter().chain([AlltoallAlgo::Auto].iter()) {
            let mut recv = vec![0u8; n * p];
            team.alltoall_with(algo, &send, &mut recv).expect("alltoall");
            let whole = (0..p).all(|r| recv[r * n..(r + 1) * n].iter().all(|&b| b == (r * 16 + me) as u8));
            assert!(whole, "rank {me}: alltoall {algo:?} of {n} bytes a block");
        }
        for &algo in AllreduceAlgo::ALL {
            let count = n / 8;
            let mine: Vec<u8> = (0..count).flat_map(|i| ((me + i) as f64).to_ne_bytes()).collect();
            let mut out = vec![0u8; n];
            team.allreduce_with(algo, DType::F64, ReduceOp::Sum, &mine, &mut out).expect("allreduce");
            for (i, chunk) in out.chunks_exact(8).enumerate() {
                let want = (0..p).map(|r| (r + i) as f64).sum::<f64>();
                assert_eq!(f64::from_ne_bytes(chunk.try_into().unwrap()), want);
            }
        }
    }
}

fn trials(ep: &Endpoint) {
    let mut team = ep.team_world().expect("team");
    let (p, me) = (team.size() as usize, team.rank() as usize);
    let byte = |from: usize, to: usize, round: usize, i: usize| (from * 31 + to * 7 + round * 3 + i % 251) as u8;
    for round in 0..30 {
        for n in [16 << 10, 64 << 10] {
            let mine: Vec<u8> = (0..n).map(|i| byte(me, 0, round, i)).collect();
            let mut all = vec![0u8; n * p];
            team.allgather(&mine, &mut all).expect("allgather");
            for (r, got) in all.chunks_exact(n).enumerate() {
                let bad = got.iter().enumerate().position(|(i, &b)| b != byte(r, 0, round, i));
                assert!(bad.is_none(), "rank {me} round {round}: allgather {n} from {r} wrong at {bad:?}");
            }
            let send: Vec<u8> = (0..p).flat_map(|to| (0..n).map(move |i| byte(me, to + 1, round, i))).collect();
            team.alltoall(&send, &mut all).expect("alltoall");
            for (r, got) in all.chunks_exact(n).enumerate() {
                let bad = got.iter().enumerate().position(|(i, &b)| b != byte(r, me + 1, round, i));
                assert!(bad.is_none(), "rank {me} round {round}: alltoall {n} from {r} wrong at {bad:?}");
            }
        }
    }
}

fn vectors(ep: &Endpoint) {
    let mut team = ep.team_world().expect("team");
    let (p, me) = (team.size() as usize, team.rank() as usize);
    let byte = |s: usize, r: usize, round: usize, i: usize| (s * 31 + r * 7 + round * 3 + i % 251) as u8;
    for round in 0..30 {
        // The slot of a 4-member team holds ~256 KiB: 200-330 KB blocks.
        let count = |s: usize, r: usize| 200_000 + 43_000 * ((s + 3 * r + round) % 4);
        let mut sums = vec![0u8; 8 << 10];
        let mine: Vec<u8> = (0..1024).flat_map(|i| ((me * 1000 + i + round) as i64).to_ne_bytes()).collect();
        team.allreduce(DType::I64, ReduceOp::Sum, &mine, &mut sums).expect("allreduce");
        for (i, chunk) in sums.chunks_exact(8).enumerate() {
            let want: i64 = (0..p).map(|r| (r * 1000 + i + round) as i64).sum();
            assert_eq!(i64::from_ne_bytes(chunk.try_into().unwrap()), want, "round {round}: allreduce");
        }
        let counts_out: Vec<u8> = (0..p).flat_map(|r| (count(me, r) as u64).to_le_bytes()).collect();
        let mut counts_in = vec![0u8; 8 * p];
        team.alltoall(&counts_out, &mut counts_in).expect("alltoall");
        let recv_counts: Vec<usize> =
            counts_in.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()) as usize).collect();
        let send_counts: Vec<usize> = (0..p).map(|r| count(me, r)).collect();
        let displs = |c: &[usize]| c.iter().scan(0, |at, &x| Some(std::mem::replace(at, *at + x))).collect::<Vec<_>>();
        let (sd, rd) = (displs(&send_counts), displs(&recv_counts));
        let mut send = vec![0u8; send_counts.iter().sum()];
        for r in 0..p {
            for (i, b) in send[sd[r]..sd[r] + send_counts[r]].iter_mut().enumerate() {
                *b = byte(me, r, round, i);
            }
        }
        let mut recv = vec![0u8; recv_counts.iter().sum()];
        team.alltoallv(&send, &send_counts, &sd, &mut recv, &recv_counts, &rd).expect("alltoallv");
        for s in 0..p {
            let got = &recv[rd[s]..rd[s] + recv_counts[s]];
            let bad = got.iter().enumerate().position(|(i, &b)| b != byte(s, me, round, i));
            assert!(bad.is_none(), "rank {me} round {round}: block from {s} wrong at byte {bad:?}");
        }
    }
}

fn multicast(ep: &Endpoint) {
    let mut team = ep.team_world().expect("team");
    let (p, me) = (team.size(), team.rank());
    const MIB4: usize = 4 << 20;
    let region = ep.alloc(MIB4 + 64, Access::READ_WRITE).expect("alloc");
    let group = team.multicast_group(&region).expect("multicast group");
    assert!(team.uses_ip_multicast(), "rank {me}: IP multicast between processes on loopback");
    for (round, (root, offset, len)) in
        [(0u32, 0usize, 0usize), (1, 5, 1000), (2, 0, 64_921), (3, 64, 1 << 20), (0, 1, MIB4)].into_iter().enumerate()
    {
        let root = root % p;
        let data: Vec<u8> =
            (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(round as u32) as u8).collect();
        if me == root {
            region.write(offset as u64, &data).expect("write");
        }
        team.multicast(&group, root, offset, len).expect("multicast");
        let mut got = vec![0u8; len];
        region.read(offset as u64, &mut got).expect("read");
        assert!(got == data, "rank {me} round {round}: {len} bytes from {root}");
        team.barrier().expect("barrier");
    }
    let (core, _) = ep.stats();
    eprintln!("rank {me}: {:?}", core.mcast);
    let shm_with_all_roots = (0..p).filter(|&r| r != me).all(|r| ep.shares_memory_with(r));
    assert!(core.mcast.received_via_group > 0 || shm_with_all_roots, "rank {me}: {:?}", core.mcast);
}

fn preempt(ep: &Endpoint) {
    let mut team = ep.team_world().expect("team");
    let (p, me) = (team.size(), team.rank());
    let region = ep.alloc_symmetric(p as usize * 200_000, Access::READ_WRITE).expect("alloc");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + me) as u8).collect();
    // Traffic in flight when quiesce is called: puts to everyone, not waited for.
    let handles: Vec<_> = (0..p)
        .filter(|&r| r != me)
        .map(|r| ep.put_nb(r, region.key(), u64::from(me) * 200_000, &data).expect("put"))
        .collect();
    drop(handles);
    let mut sum = [0u64];
    team.allreduce_typed(ReduceOp::Sum, &[u64::from(me)], &mut sum).expect("allreduce");
    ep.quiesce().expect("quiesce");
    println!("quiesced");
    std::io::stdout().flush().expect("flush");
    if me == 0 {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).expect("stdin");
    }
    // The others wait here through the stop, inside the library.
    team.barrier().expect("barrier after the stop");
    for r in (0..p).filter(|&r| r != me) {
        let mut got = vec![0u8; 200_000];
        region.read(u64::from(r) * 200_000, &mut got).expect("read");
        assert!(got.iter().enumerate().all(|(i, &b)| b == (i as u32 * 7 + r) as u8), "data from {r} lost");
    }
    for _ in 0..50 {
        team.allreduce_typed(ReduceOp::Sum, &[1u64], &mut sum).expect("allreduce after the stop");
        assert_eq!(sum[0], u64::from(p));
    }
    let (_, proto) = ep.stats();
    eprintln!("rank {me}: {proto:?}");
    for peer in 0..p {
        if let Err(e) = ep.put(peer, region.key(), 0, &[1]) {
            panic!("put to {peer} after the stop: {e:?}");
        }
    }
    // Nobody deregisters the region while another rank still puts into it.
    team.barrier().expect("final barrier");
}
