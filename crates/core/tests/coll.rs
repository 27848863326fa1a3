//! Collectives on teams of 1 to 9 ranks, every algorithm forced in turn,
//! checked against a reference computed locally from every rank's
//! (deterministic) input; lossless and under injected loss, duplication
//! and reordering.
//!
//! The base configuration comes from the `MW_*` environment, so the whole
//! suite reruns over another transport or setting by exporting variables
//! (e.g. `MW_MTU=1472 cargo test -p mw-core --release --test coll`).

mod common;

use common::{pattern, run_job, run_job_on_hosts, shm};
use mw_core::{
    Access, AllgatherAlgo, AllreduceAlgo, AlltoallAlgo, BarrierAlgo, BcastAlgo, CollTrials, Config, DType, Error,
    ReduceAlgo, ReduceOp, Team, VectorAlgo,
};

fn base() -> Config {
    Config::from_env().expect("MW_* settings")
}

fn with_faults(drop: f64, dup: f64, reorder: f64, seed: u64) -> Config {
    Config {
        fault: Some(mw_transport::fault::FaultConfig { drop, dup, reorder, seed }),
        rto_min: std::time::Duration::from_micros(300),
        // Faults are injected into UDP datagrams: same-host ranks would
        // otherwise talk through shared memory.
        transport: mw_core::TransportChoice::Udp,
        ..base()
    }
}

/// Rank r's block for destination j in alltoall (and its allgather block when j = 0).
fn block(r: u32, j: u32, n: usize) -> Vec<u8> {
    pattern(r * 131 + j * 7 + n as u32, n)
}

/// Rank r's i-th reduction input: small integers so float sums and products are exact.
fn val(r: usize, i: usize) -> u64 {
    ((r * 7 + i * 13) % 5 + 1) as u64
}

fn encode(dtype: DType, vals: &[u64]) -> Vec<u8> {
    let mut out = Vec::new();
    for &v in vals {
        match dtype {
            DType::I8 => out.extend_from_slice(&(v as i8).to_ne_bytes()),
            DType::U8 => out.extend_from_slice(&(v as u8).to_ne_bytes()),
            DType::I16 => out.extend_from_slice(&(v as i16).to_ne_bytes()),
            DType::U16 => out.extend_from_slice(&(v as u16).to_ne_bytes()),
            DType::I32 => out.extend_from_slice(&(v as i32).to_ne_bytes()),
            DType::U32 => out.extend_from_slice(&(v as u32).to_ne_bytes()),
            DType::I64 => out.extend_from_slice(&(v as i64).to_ne_bytes()),
            DType::U64 => out.extend_from_slice(&v.to_ne_bytes()),
            DType::F32 => out.extend_from_slice(&(v as f32).to_ne_bytes()),
            DType::F64 => out.extend_from_slice(&(v as f64).to_ne_bytes()),
        }
    }
    out
}

/// The reference: fold over ranks in u64 (wrapping), then encoded like the
/// inputs (the truncation commutes with +, *, &, |, ^; min/max inputs are
/// small positives, so they fit every type).
fn reference(dtype: DType, op: ReduceOp, p: usize, count: usize) -> Vec<u8> {
    let vals: Vec<u64> = (0..count)
        .map(|i| {
            (1..p).fold(val(0, i), |acc, r| {
                let x = val(r, i);
                match op {
                    ReduceOp::Sum => acc.wrapping_add(x),
                    ReduceOp::Prod => acc.wrapping_mul(x),
                    ReduceOp::Min => acc.min(x),
                    ReduceOp::Max => acc.max(x),
                    ReduceOp::BitAnd => acc & x,
                    ReduceOp::BitOr => acc | x,
                    ReduceOp::BitXor => acc ^ x,
                }
            })
        })
        .collect();
    encode(dtype, &vals)
}

fn input(dtype: DType, r: usize, count: usize) -> Vec<u8> {
    encode(dtype, &(0..count).map(|i| val(r, i)).collect::<Vec<_>>())
}

/// Every collective with every algorithm at every size in `sizes` (bytes
/// per block / per vector), checked on every rank.
fn check_everything(team: &mut Team<'_>, sizes: &[usize]) {
    let p = team.size() as usize;
    let me = team.rank();
    for &algo in BarrierAlgo::ALL.iter().chain([BarrierAlgo::Auto].iter()) {
        for _ in 0..3 {
            team.barrier_with(algo).unwrap();
        }
    }
    for &n in sizes {
        let tag = format!("p {p} rank {me} size {n}");
        for &algo in BcastAlgo::ALL.iter().chain([BcastAlgo::Auto].iter()) {
            for root in [0, (p as u32) - 1, (p as u32) / 2] {
                let want = block(root, 99, n);
                let mut buf = if me == root { want.clone() } else { vec![0xEE; n] };
                team.broadcast_with(algo, root, &mut buf).unwrap();
                assert!(buf == want, "{tag}: broadcast {algo:?} root {root}");
            }
        }
        let want: Vec<u8> = (0..p as u32).flat_map(|r| block(r, 0, n)).collect();
        for &algo in AllgatherAlgo::ALL.iter().chain([AllgatherAlgo::Auto].iter()) {
            let mut recv = vec![0xEE; n * p];
            team.allgather_with(algo, &block(me, 0, n), &mut recv).unwrap();
            assert!(recv == want, "{tag}: allgather {algo:?}");
        }
        let send: Vec<u8> = (0..p as u32).flat_map(|j| block(me, j, n)).collect();
        let want: Vec<u8> = (0..p as u32).flat_map(|r| block(r, me, n)).collect();
        for &algo in AlltoallAlgo::ALL.iter().chain([AlltoallAlgo::Auto].iter()) {
            let mut recv = vec![0xEE; n * p];
            team.alltoall_with(algo, &send, &mut recv).unwrap();
            assert!(recv == want, "{tag}: alltoall {algo:?}");
        }
        check_vectors(team, n, &tag);
        let root = (p as u32) - 1;
        let mut gathered = if me == root { vec![0xEE; n * p] } else { Vec::new() };
        team.gather(root, &block(me, 0, n), &mut gathered).unwrap();
        if me == root {
            let want: Vec<u8> = (0..p as u32).flat_map(|r| block(r, 0, n)).collect();
            assert!(gathered == want, "{tag}: gather");
        }
        let send: Vec<u8> = if me == 0 { (0..p as u32).flat_map(|j| block(0, j, n)).collect() } else { Vec::new() };
        let mut recv = vec![0xEE; n];
        team.scatter(0, &send, &mut recv).unwrap();
        assert!(recv == block(0, me, n), "{tag}: scatter");

        let count = n / 4;
        let (dtype, op) = (DType::U32, ReduceOp::Sum);
        let want = reference(dtype, op, p, count);
        let mine = input(dtype, me as usize, count);
        for &algo in AllreduceAlgo::ALL.iter().chain([AllreduceAlgo::Auto].iter()) {
            let mut recv = vec![0xEE; count * 4];
            team.allreduce_with(algo, dtype, op, &mine, &mut recv).unwrap();
            assert!(recv == want, "{tag}: allreduce {algo:?}");
        }
        for &algo in ReduceAlgo::ALL.iter().chain([ReduceAlgo::Auto].iter()) {
            for root in [0, (p as u32) - 1] {
                let mut recv = vec![0xEE; count * 4];
                team.reduce_with(algo, root, dtype, op, &mine, &mut recv).unwrap();
                if me == root {
                    assert!(recv == want, "{tag}: reduce {algo:?} root {root}");
                } else {
                    assert!(recv.iter().all(|&b| b == 0xEE), "{tag}: reduce wrote a non-root buffer");
                }
            }
        }
    }
}

/// Bytes rank `s` sends rank `r` in the vector collectives at size `n`:
/// uneven, and none at all for a third of the pairs.
fn vcount(s: usize, r: usize, n: usize) -> usize {
    if (s + 2 * r) % 3 == 0 {
        0
    } else {
        n * ((s + r) % 4 + 1) / 4
    }
}

/// Places blocks of `counts` in reverse member order with a 16-byte gap
/// before each (what a caller with its own layout passes); returns the
/// displacements and the buffer length.
fn scattered_layout(counts: &[usize]) -> (Vec<usize>, usize) {
    let mut displs = vec![0; counts.len()];
    let mut at = 0;
    for j in (0..counts.len()).rev() {
        at += 16;
        displs[j] = at;
        at += counts[j];
    }
    (displs, at + 16)
}

/// Whether every byte of `buf` (filled with 0xEE before the call) outside
/// the blocks `counts`/`displs` describe is still 0xEE.
fn only_blocks_written(buf: &[u8], counts: &[usize], displs: &[usize]) -> bool {
    let inside = |i: usize| (0..counts.len()).any(|j| (displs[j]..displs[j] + counts[j]).contains(&i));
    buf.iter().enumerate().all(|(i, &b)| b == 0xEE || inside(i))
}

/// One member's side of an alltoallv: member s sends member r `count(s, r)`
/// bytes of `block(s + shift, r)`, both sides in scattered layouts.
struct Alltoallv {
    send: Vec<u8>,
    send_counts: Vec<usize>,
    send_displs: Vec<usize>,
    recv_counts: Vec<usize>,
    recv_displs: Vec<usize>,
    recv_len: usize,
    me: usize,
    shift: usize,
}

impl Alltoallv {
    fn new(p: usize, me: usize, shift: usize, count: impl Fn(usize, usize) -> usize) -> Alltoallv {
        let send_counts: Vec<usize> = (0..p).map(|r| count(me, r)).collect();
        let recv_counts: Vec<usize> = (0..p).map(|s| count(s, me)).collect();
        let (send_displs, send_len) = scattered_layout(&send_counts);
        let (recv_displs, recv_len) = scattered_layout(&recv_counts);
        let mut send = vec![0u8; send_len];
        for r in 0..p {
            let b = block((me + shift) as u32, r as u32, send_counts[r]);
            send[send_displs[r]..send_displs[r] + send_counts[r]].copy_from_slice(&b);
        }
        Alltoallv { send, send_counts, send_displs, recv_counts, recv_displs, recv_len, me, shift }
    }

    /// Runs it with `algo` and checks every received block, and that
    /// nothing outside them was written.
    fn check(&self, team: &mut Team<'_>, algo: VectorAlgo, tag: &str) {
        let a = self;
        let mut recv = vec![0xEE; a.recv_len];
        team.alltoallv_with(algo, &a.send, &a.send_counts, &a.send_displs, &mut recv, &a.recv_counts, &a.recv_displs)
            .unwrap_or_else(|e| panic!("{tag}: alltoallv {algo:?}: {e}"));
        for s in 0..a.recv_counts.len() {
            let got = &recv[a.recv_displs[s]..a.recv_displs[s] + a.recv_counts[s]];
            let want = block((s + a.shift) as u32, a.me as u32, a.recv_counts[s]);
            assert!(got == want, "{tag}: alltoallv {algo:?} block from {s}");
        }
        assert!(
            only_blocks_written(&recv, &a.recv_counts, &a.recv_displs),
            "{tag}: alltoallv {algo:?} wrote outside the blocks"
        );
    }
}

/// allgatherv and alltoallv, every algorithm, uneven and empty blocks in
/// a scattered layout: the blocks land where they belong and nothing
/// outside them is written.
fn check_vectors(team: &mut Team<'_>, n: usize, tag: &str) {
    let (p, me) = (team.size() as usize, team.rank() as usize);
    let counts: Vec<usize> = (0..p).map(|j| vcount(j, 1, n)).collect();
    let (displs, len) = scattered_layout(&counts);
    let mine = block(me as u32, 50, counts[me]);
    for &algo in VectorAlgo::ALL.iter().chain([VectorAlgo::Auto].iter()) {
        let mut recv = vec![0xEE; len];
        team.allgatherv_with(algo, &mine, &mut recv, &counts, &displs).unwrap();
        for j in 0..p {
            assert!(
                recv[displs[j]..displs[j] + counts[j]] == block(j as u32, 50, counts[j]),
                "{tag}: allgatherv {algo:?} block {j}"
            );
        }
        assert!(only_blocks_written(&recv, &counts, &displs), "{tag}: allgatherv {algo:?} wrote outside the blocks");
    }
    let case = Alltoallv::new(p, me, 0, |s, r| vcount(s, r, n));
    for &algo in VectorAlgo::ALL.iter().chain([VectorAlgo::Auto].iter()) {
        case.check(team, algo, tag);
    }
}

const SIZES: &[usize] = &[0, 1, 8, 100, 4099, 70_000];

#[test]
fn every_algorithm_on_team_sizes_1_to_9() {
    for n in 1..=9 {
        eprintln!("{n} ranks");
        run_job(n, base(), |ep| {
            let mut world = ep.team_world().unwrap();
            assert_eq!(world.size(), ep.size());
            check_everything(&mut world, SIZES);
        });
    }
}

/// The same over shared memory (every rank on one host) and over a mix:
/// two fake hosts (`MW_HOST`), shared memory inside each, UDP across, so
/// every collective has both kinds of hops.
#[test]
fn every_algorithm_over_shared_memory_and_a_mix() {
    for n in 1..=9u32 {
        eprintln!("{n} ranks, shared memory");
        run_job(n, shm(base()), |ep| {
            let mut world = ep.team_world().unwrap();
            check_everything(&mut world, SIZES);
        });
        if n >= 2 {
            eprintln!("{n} ranks, two hosts");
            let hosts = (0..n).map(|r| if r < n / 2 { "left" } else { "right" }.to_owned()).collect();
            run_job_on_hosts(n, shm(base()), hosts, |ep| {
                let mut world = ep.team_world().unwrap();
                check_everything(&mut world, SIZES);
            });
        }
    }
}

/// Trials (`MW_COLL_TRIALS=always`): the automatic allgather and alltoall
/// of two size classes, interleaved, on teams of 2 to 5 threads; every
/// call right, through the trial calls, the decision (an allgather of
/// every member's times) and the calls after it. A member that decided
/// alone could take another algorithm than its peers and wait forever or
/// read a block that is not there.
#[test]
fn trials_keep_every_call_right_and_the_members_in_step() {
    let mut config = shm(base());
    config.coll.trials = CollTrials::Always;
    for n in 2..=5u32 {
        run_job(n, config.clone(), |ep| {
            let mut team = ep.team_world().unwrap();
            let (p, me) = (team.size() as usize, team.rank());
            for round in 0..30u32 {
                for size in [16 << 10, (40 << 10) + 8] {
                    let tag = format!("p {p} rank {me} round {round} block {size}");
                    let mut recv = vec![0xEE; size * p];
                    team.allgather(&block(me, round, size), &mut recv).unwrap();
                    let want: Vec<u8> = (0..p as u32).flat_map(|r| block(r, round, size)).collect();
                    assert!(recv == want, "{tag}: allgather");
                    let send: Vec<u8> = (0..p as u32).flat_map(|j| block(me, j + round, size)).collect();
                    team.alltoall(&send, &mut recv).unwrap();
                    let want: Vec<u8> = (0..p as u32).flat_map(|r| block(r, me + round, size)).collect();
                    assert!(recv == want, "{tag}: alltoall");
                }
            }
        });
    }
}

/// 4 MiB over shared memory and over the two-host mix.
#[test]
fn four_mebibytes_over_shared_memory_and_a_mix() {
    const MIB4: usize = 4 << 20;
    let body = |ep: &mw_core::Endpoint| {
        let mut team = ep.team_world().unwrap();
        let me = team.rank();
        let p = team.size();
        for &algo in BcastAlgo::ALL {
            let want = block(1, 5, MIB4);
            let mut buf = if me == 1 { want.clone() } else { vec![0; MIB4] };
            team.broadcast_with(algo, 1, &mut buf).unwrap();
            assert!(buf == want, "broadcast {algo:?}");
        }
        let count = MIB4 / 8;
        let want = reference(DType::F64, ReduceOp::Sum, p as usize, count);
        let mut recv = vec![0; MIB4];
        team.allreduce(DType::F64, ReduceOp::Sum, &input(DType::F64, me as usize, count), &mut recv).unwrap();
        assert!(recv == want, "allreduce");
        let want: Vec<u8> = (0..p).flat_map(|r| block(r, 0, MIB4 / 2)).collect();
        let mut all = vec![0; MIB4 / 2 * p as usize];
        team.allgather(&block(me, 0, MIB4 / 2), &mut all).unwrap();
        assert!(all == want, "allgather");
        // Vector collectives whose blocks add up to more than a scratch
        // phase (the large area), each algorithm.
        let (p, me) = (p as usize, me as usize);
        let counts: Vec<usize> = (0..p).map(|j| MIB4 / 4 + j * 4097).collect();
        let (displs, len) = scattered_layout(&counts);
        let case = Alltoallv::new(p, me, 0, |s, r| MIB4 / 8 + 13 * (s + 2 * r));
        for &algo in VectorAlgo::ALL.iter().chain([VectorAlgo::Auto].iter()) {
            let mut recv = vec![0xEE; len];
            team.allgatherv_with(algo, &block(me as u32, 50, counts[me]), &mut recv, &counts, &displs).unwrap();
            for j in 0..p {
                let got = &recv[displs[j]..displs[j] + counts[j]];
                assert!(got == block(j as u32, 50, counts[j]), "allgatherv {algo:?} block {j}");
            }
            case.check(&mut team, algo, "4 MiB");
        }
    };
    run_job(3, shm(base()), body);
    run_job_on_hosts(4, shm(base()), ["a", "a", "b", "b"].iter().map(|h| h.to_string()).collect(), body);
}

#[test]
fn every_algorithm_under_loss_duplication_and_reordering() {
    for (n, cfg) in [
        (3, with_faults(0.05, 0.0, 0.0, 21)),
        (4, with_faults(0.0, 0.05, 0.05, 22)),
        (7, with_faults(0.03, 0.03, 0.03, 23)),
    ] {
        eprintln!("{n} ranks, faults {:?}", cfg.fault);
        run_job(n, cfg, |ep| {
            let mut world = ep.team_world().unwrap();
            check_everything(&mut world, &[0, 13, 5000, 70_000]);
        });
    }
}

/// The big end of the size range, on a few shapes (memory: each rank keeps
/// a large area of the biggest collective's size).
#[test]
fn four_mebibytes() {
    const MIB4: usize = 4 << 20;
    run_job(3, base(), |ep| {
        let mut team = ep.team_world().unwrap();
        let me = team.rank();
        for algo in [BcastAlgo::Binomial, BcastAlgo::ScatterAllgather] {
            let want = block(1, 5, MIB4);
            let mut buf = if me == 1 { want.clone() } else { vec![0; MIB4] };
            team.broadcast_with(algo, 1, &mut buf).unwrap();
            assert!(buf == want, "broadcast {algo:?}");
        }
        let count = MIB4 / 8;
        let want = reference(DType::F64, ReduceOp::Sum, 3, count);
        for algo in AllreduceAlgo::ALL {
            let mut recv = vec![0; MIB4];
            team.allreduce_with(*algo, DType::F64, ReduceOp::Sum, &input(DType::F64, me as usize, count), &mut recv)
                .unwrap();
            assert!(recv == want, "allreduce {algo:?}");
        }
        let mut recv = vec![0; MIB4];
        team.reduce(0, DType::F64, ReduceOp::Sum, &input(DType::F64, me as usize, count), &mut recv).unwrap();
        if me == 0 {
            assert!(recv == want);
        }
    });
    run_job(2, base(), |ep| {
        let mut team = ep.team_world().unwrap();
        let me = team.rank();
        let want: Vec<u8> = (0..2).flat_map(|r| block(r, 0, MIB4)).collect();
        for algo in AllgatherAlgo::ALL {
            let mut recv = vec![0; 2 * MIB4];
            team.allgather_with(*algo, &block(me, 0, MIB4), &mut recv).unwrap();
            assert!(recv == want, "allgather {algo:?}");
        }
        let half = MIB4 / 2;
        let send: Vec<u8> = (0..2).flat_map(|j| block(me, j, half)).collect();
        let want: Vec<u8> = (0..2).flat_map(|r| block(r, me, half)).collect();
        let mut recv = vec![0; MIB4];
        team.alltoall(&send, &mut recv).unwrap();
        assert!(recv == want);
        let mut gathered = if me == 0 { vec![0; 2 * MIB4] } else { Vec::new() };
        team.gather(0, &block(me, 0, MIB4), &mut gathered).unwrap();
        if me == 0 {
            assert!(gathered == (0..2).flat_map(|r| block(r, 0, MIB4)).collect::<Vec<u8>>());
        }
    });
}

#[test]
fn every_type_and_operation() {
    use DType::*;
    use ReduceOp::*;
    run_job(5, base(), |ep| {
        let mut team = ep.team_world().unwrap();
        let me = team.rank() as usize;
        for dtype in [I8, U8, I16, U16, I32, U32, I64, U64, F32, F64] {
            for op in [Sum, Prod, Min, Max, BitAnd, BitOr, BitXor] {
                let mine = input(dtype, me, 37);
                let mut recv = vec![0; mine.len()];
                let result = team.allreduce(dtype, op, &mine, &mut recv);
                if dtype.is_float() && op.is_bitwise() {
                    assert!(matches!(result, Err(Error::InvalidArgument(_))), "{dtype:?} {op:?}");
                    continue;
                }
                result.unwrap();
                assert!(recv == reference(dtype, op, 5, 37), "{dtype:?} {op:?}");
            }
        }
        // Typed form.
        let mine: Vec<f32> = (0..10).map(|i| (me + i) as f32).collect();
        let mut out = vec![0f32; 10];
        team.allreduce_typed(Max, &mine, &mut out).unwrap();
        assert_eq!(out, (0..10).map(|i| (4 + i) as f32).collect::<Vec<_>>());
        // A ragged buffer is refused before anything moves.
        assert!(matches!(team.allreduce(U32, Sum, &[1, 2, 3], &mut [0; 3]), Err(Error::InvalidArgument(_))));
    });
}

/// Split, explicit subsets and the world used at the same time from
/// different threads of each rank: no team sees another's data.
#[test]
fn several_teams_at_once() {
    run_job(6, base(), |ep| {
        let mut world = ep.team_world().unwrap();
        let me = world.rank();
        // Reverse order inside each color.
        let mut half = world.split(Some(me % 2), 100 - me).unwrap().expect("every rank has a color");
        assert_eq!(half.size(), 3);
        assert_eq!(half.world_rank(0), Some(if me % 2 == 0 { 4 } else { 5 }));
        let mut trio = world.subset(&[5, 0, 3]).unwrap();
        assert_eq!(trio.is_some(), [0, 3, 5].contains(&me));
        if let Some(t) = &trio {
            assert_eq!(t.world_rank(0), Some(5));
        }
        let none = world.split(None, 0).unwrap();
        assert!(none.is_none());
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..150u64 {
                    let mut sum = [0u64];
                    half.allreduce_typed(ReduceOp::Sum, &[u64::from(me) + i], &mut sum).unwrap();
                    let members: u64 = if me % 2 == 0 { 6 } else { 9 };
                    assert_eq!(sum[0], members + 3 * i);
                    let mut b = [0u8; 300];
                    if half.rank() == 1 {
                        b = [i as u8; 300];
                    }
                    half.broadcast(1, &mut b).unwrap();
                    assert_eq!(b, [i as u8; 300]);
                }
            });
            s.spawn(|| {
                for i in 0..150u64 {
                    let mut all = vec![0u8; 6 * 9];
                    world.allgather(&[me as u8 ^ i as u8; 9], &mut all).unwrap();
                    for r in 0..6u8 {
                        assert!(all[r as usize * 9..][..9].iter().all(|&b| b == r ^ i as u8));
                    }
                }
            });
            s.spawn(|| {
                if let Some(t) = trio.as_mut() {
                    for i in 0..150u32 {
                        let mut max = [0u32];
                        t.allreduce_typed(ReduceOp::Max, &[me * 1000 + i], &mut max).unwrap();
                        assert_eq!(max[0], 5000 + i);
                        t.barrier_with(BarrierAlgo::Counters).unwrap();
                    }
                }
            });
        });
    });
}

#[test]
fn multicast_into_every_members_region() {
    run_job(5, base(), |ep| {
        let mut team = ep.team_world().unwrap();
        let me = team.rank() as usize;
        // Different lengths and keys per rank: the group takes the smallest.
        let region = ep.alloc(300_000 + 1000 * me, Access::READ_WRITE).unwrap();
        let group = team.multicast_group(&region).unwrap();
        assert_eq!(group.len(), 300_000);
        for (round, (root, offset, len)) in
            [(0u32, 0usize, 0usize), (2, 10, 1), (4, 7, 200_001), (1, 0, 300_000), (4, 99, 5000)]
                .into_iter()
                .enumerate()
        {
            let data = pattern(round as u32 + 1, len);
            if me == root as usize {
                region.write(offset as u64, &data).unwrap();
            }
            team.multicast(&group, root, offset, len).unwrap();
            let mut got = vec![0u8; len];
            region.read(offset as u64, &mut got).unwrap();
            assert!(got == data, "rank {me} round {round}");
        }
        assert!(matches!(team.multicast(&group, 0, 299_999, 2), Err(Error::OutOfBounds)));
        let read_only = ep.alloc(64, Access::READ).unwrap();
        assert!(matches!(team.multicast_group(&read_only), Err(Error::NoPermission)));
    });
}

/// After `quiesce` every put issued before it is in place at its target,
/// with no other synchronization; collectives go on afterwards.
#[test]
fn quiesce_completes_everything_in_flight() {
    run_job(4, with_faults(0.05, 0.02, 0.02, 31), |ep| {
        let region = ep.alloc_symmetric(4 * 100_000, Access::READ_WRITE).unwrap();
        let me = ep.rank();
        let n = ep.size();
        let data = pattern(me, 100_000);
        let handles: Vec<_> = (0..n)
            .filter(|&r| r != me)
            .map(|r| ep.put_nb(r, region.key(), u64::from(me) * 100_000, &data).unwrap())
            .collect();
        drop(handles);
        ep.quiesce().unwrap();
        for r in (0..n).filter(|&r| r != me) {
            let mut got = vec![0u8; 100_000];
            region.read(u64::from(r) * 100_000, &mut got).unwrap();
            assert!(got == pattern(r, 100_000), "rank {me}: data from {r} not in place after quiesce");
        }
        let mut team = ep.team_world().unwrap();
        team.barrier().unwrap();
        ep.quiesce().unwrap();
    });
}

/// Large collectives agree on sizes first: a mismatch is an error on every
/// rank instead of a hang.
#[test]
fn mismatched_large_sizes_are_refused() {
    run_job(2, base(), |ep| {
        let mut team = ep.team_world().unwrap();
        let n = if team.rank() == 0 { 2 << 20 } else { 3 << 20 };
        let mut buf = vec![0u8; n];
        let result = team.broadcast_with(BcastAlgo::Binomial, 0, &mut buf);
        assert!(matches!(result, Err(Error::InvalidArgument(_))), "{result:?}");
        team.barrier().unwrap();
    });
}

/// The single-copy algorithms (teams all in shared memory) read the owner's
/// buffer in place: a reader whose buffer is longer than the owner's gets
/// an error instead of bytes from beyond it, and the team goes on.
#[test]
fn single_copy_refuses_mismatched_sizes() {
    run_job(2, shm(base()), |ep| {
        let mut team = ep.team_world().unwrap();
        let me = team.rank();
        let n = if me == 0 { 32 << 10 } else { 48 << 10 };
        let mut buf = vec![7u8; n];
        let result = team.broadcast_with(BcastAlgo::Direct, 0, &mut buf);
        if me == 1 {
            assert!(matches!(result, Err(Error::InvalidArgument(_))), "{result:?}");
        }
        let mut all = vec![0u8; 2 * n];
        let result = team.allgather_with(AllgatherAlgo::Direct, &buf, &mut all);
        if me == 1 {
            assert!(matches!(result, Err(Error::InvalidArgument(_))), "{result:?}");
        }
        team.barrier().unwrap();
        // Same sizes again: the team still works, single copy included.
        let mut buf = vec![me as u8; 40 << 10];
        team.broadcast_with(BcastAlgo::Direct, 0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
    });
}

/// With more members than CPUs (4 ranks on this 2-CPU machine) the
/// single-copy broadcast pushes the data to the members that share a CPU
/// with its block's leader (`bcast_by_cpu_blocks`); a pushed copy of
/// another size is refused too, and a leader that could not read tells its
/// block instead of leaving it waiting. Where every rank has a CPU of its
/// own, this is the flat single-copy broadcast and rank 3 succeeds.
#[test]
fn single_copy_refuses_mismatched_sizes_when_oversubscribed() {
    run_job(4, shm(base()), |ep| {
        let mut team = ep.team_world().unwrap();
        let me = team.rank();
        let n = if me == 1 || me == 2 { 48 << 10 } else { 32 << 10 };
        let mut buf = vec![me as u8 + 10; n];
        let result = team.broadcast_with(BcastAlgo::Direct, 0, &mut buf);
        match me {
            0 => result.unwrap(),
            1 | 2 => assert!(matches!(result, Err(Error::InvalidArgument(_))), "rank {me}: {result:?}"),
            _ => {
                if result.is_ok() {
                    assert!(buf.iter().all(|&b| b == 10), "rank 3 took wrong data");
                }
            }
        }
        team.barrier().unwrap();
        for root in 0..4 {
            let mut buf = vec![me as u8; 64 << 10];
            team.broadcast_with(BcastAlgo::Direct, root, &mut buf).unwrap();
            assert!(buf.iter().all(|&b| b == root as u8), "rank {me}, root {root}");
        }
    });
}

/// The vector collectives check counts before moving data. allgatherv:
/// counts that differ between members fail the call on every member.
/// alltoallv: a pair whose counts differ moves nothing and both its members
/// get the error, the other pairs complete. One member's invalid arguments
/// fail the call on every member. Nobody waits for data that never comes,
/// and the team goes on working. Over UDP and shared memory, every
/// algorithm, with blocks inside the headers and beyond them.
#[test]
fn vector_collectives_refuse_counts_that_do_not_fit() {
    for cfg in [base(), shm(base())] {
        run_job(3, cfg, |ep| {
            let mut team = ep.team_world().unwrap();
            let me = team.rank() as usize;
            let packed =
                |c: &[usize]| c.iter().scan(0, |at, &x| Some(std::mem::replace(at, *at + x))).collect::<Vec<_>>();
            for &algo in VectorAlgo::ALL {
                for unit in [4, 1000] {
                    // Rank 0 sends rank 1 2.5 units; rank 1 expects 3.
                    let mut send_counts = vec![unit; 3];
                    let mut recv_counts = vec![unit; 3];
                    if me == 0 {
                        send_counts[1] = unit * 5 / 2;
                    }
                    if me == 1 {
                        recv_counts[0] = unit * 3;
                    }
                    let (sd, rd) = (packed(&send_counts), packed(&recv_counts));
                    let mut send = vec![0u8; send_counts.iter().sum()];
                    for j in 0..3 {
                        send[sd[j]..sd[j] + send_counts[j]].fill((10 * me + j) as u8);
                    }
                    let mut recv = vec![0xEE; recv_counts.iter().sum()];
                    let result = team.alltoallv_with(algo, &send, &send_counts, &sd, &mut recv, &recv_counts, &rd);
                    let tag = format!("rank {me} {algo:?} unit {unit}");
                    if me == 2 {
                        result.unwrap_or_else(|e| panic!("{tag}: {e}"));
                    } else {
                        assert!(matches!(result, Err(Error::InvalidArgument(_))), "{tag}: {result:?}");
                    }
                    for s in 0..3 {
                        let got = &recv[rd[s]..rd[s] + recv_counts[s]];
                        if me == 1 && s == 0 {
                            assert!(got.iter().all(|&b| b == 0xEE), "{tag}: the refused block was written");
                        } else {
                            assert!(got.iter().all(|&b| b == (10 * s + me) as u8), "{tag}: block from {s}");
                        }
                    }
                }

                // Members disagree on the allgatherv counts.
                let counts = if me == 2 { vec![3, 3, 5] } else { vec![3, 3, 3] };
                let mut recv = vec![0xEE; counts.iter().sum()];
                let result = team.allgatherv_with(algo, &vec![7u8; counts[me]], &mut recv, &counts, &packed(&counts));
                assert!(matches!(result, Err(Error::InvalidArgument(_))), "rank {me} {algo:?}: {result:?}");

                // One member's receive blocks overlap: it reports that, the
                // others that another member's arguments were invalid.
                let counts = vec![3, 3, 3];
                let bad_displs = if me == 1 { vec![0, 2, 6] } else { vec![0, 3, 6] };
                let mut recv = vec![0xEE; 9];
                let result = team.allgatherv_with(algo, &[9u8; 3], &mut recv, &counts, &bad_displs);
                let result2 =
                    team.alltoallv_with(algo, &[9u8; 9], &counts, &[0, 3, 6], &mut recv, &counts, &bad_displs);
                for result in [result, result2] {
                    match result {
                        Err(Error::InvalidArgument(why)) if me == 1 => assert!(why.contains("overlap"), "{why}"),
                        Err(Error::InvalidArgument(why)) => assert!(why.contains("another team member"), "{why}"),
                        other => panic!("rank {me} {algo:?}: {other:?}"),
                    }
                }
                assert!(recv.iter().all(|&b| b == 0xEE), "rank {me} {algo:?}: a refused call wrote data");

                // The team still works.
                team.barrier().unwrap();
                let mut recv = vec![0u8; 9];
                team.allgatherv_with(algo, &[me as u8; 3], &mut recv, &counts, &[0, 3, 6]).unwrap();
                assert_eq!(recv, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
            }
        });
    }
}

/// Vector collectives whose blocks straddle the slot (some inline, some in
/// the second round), back to back with all-dependent collectives that
/// write over the first slots, on more ranks than CPUs; every block checked
/// on every call. (The race this guards against, a member leaving the
/// second round early and writing into an area another still copied out of,
/// showed only between processes: `tools/mwrun/tests/coll_jobs.rs`,
/// `vector_collectives_across_4_processes`, reproduces it.)
#[test]
fn vector_collectives_back_to_back_with_second_rounds() {
    for cfg in [shm(base()), base()] {
        run_job(6, cfg, |ep| {
            let mut team = ep.team_world().unwrap();
            let (p, me) = (team.size() as usize, team.rank() as usize);
            // The slot of a 6-member team holds ~170 KiB: blocks from
            // 100 KiB to 300 KiB are on both sides of it.
            let count = |s: usize, r: usize, round: usize| 100_000 + 40_000 * ((s + 2 * r + round) % 6);
            for round in 0..12 {
                Alltoallv::new(p, me, round, |s, r| count(s, r, round)).check(
                    &mut team,
                    VectorAlgo::Auto,
                    &format!("round {round}"),
                );
                // All-dependent collectives right after, in both phases,
                // writing over the first slots of the areas.
                for extra in 0..2 {
                    const N: usize = 32 << 10;
                    let mut all = vec![0u8; N * p];
                    let tag = (round * 2 + extra) as u32;
                    team.allgather_with(AllgatherAlgo::Ring, &block(me as u32, tag, N), &mut all).unwrap();
                    for (j, got) in all.chunks_exact(N).enumerate() {
                        assert!(got == block(j as u32, tag, N), "round {round}: allgather block {j}");
                    }
                }
                let counts: Vec<usize> = (0..p).map(|j| count(j, 0, round)).collect();
                let (displs, len) = scattered_layout(&counts);
                let mut all = vec![0xEE; len];
                team.allgatherv(&block((me + round) as u32, 7, counts[me]), &mut all, &counts, &displs).unwrap();
                for j in 0..p {
                    let want = block((j + round) as u32, 7, counts[j]);
                    assert!(all[displs[j]..displs[j] + counts[j]] == want, "round {round}: allgatherv block {j}");
                }
            }
        });
    }
}
