//! One-sided operations across 2-4 ranks, over every transport: shared
//! memory (direct access, and the two-copy ring fallback) and UDP on
//! loopback, lossless and with injected loss, duplication and reordering;
//! results checked byte by byte, atomics checked for exactly-once.

mod common;

use common::{lossy, pattern, run_job, transports, udp};
use mw_core::{Access, AtomicOp, AtomicWidth, Cmp, Config, Error, Signal, SignalOp};

/// Shared memory, then UDP clean and under injected faults (faults act on
/// datagrams, so they only make sense for UDP).
fn configs() -> Vec<(&'static str, Config)> {
    vec![
        ("shm", Config::default()),
        ("udp clean", udp(Config::default())),
        ("udp drop5", udp(lossy(0.05, 0.0, 0.0, 11))),
        ("udp dup5+reorder5", udp(lossy(0.0, 0.05, 0.05, 12))),
        ("udp mixed", udp(lossy(0.03, 0.03, 0.03, 13))),
    ]
}

#[test]
fn put_get_any_size_and_alignment() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        run_job(3, cfg, |ep| {
            let n = ep.size();
            let me = ep.rank();
            const SLOT: usize = 600_000;
            let region = ep.alloc_symmetric(SLOT * n as usize + 64, Access::READ_WRITE).unwrap();
            let key = region.key();
            let right = (me + 1) % n;
            // Odd offsets and lengths, including 0, inline, MTU edges and > chunk.
            let sizes = [0usize, 1, 7, 32, 33, 1000, 1472, 4097, 65_537, 300_001];
            let mut offset = 3u64 + SLOT as u64 * u64::from(me);
            for (i, &len) in sizes.iter().enumerate() {
                let data = pattern(me * 100 + i as u32, len);
                ep.put(right, key, offset, &data).unwrap();
                let mut back = vec![0u8; len];
                ep.get(right, key, offset, &mut back).unwrap();
                assert_eq!(back, data, "rank {me} size {len}: get after put differs");
                offset += len as u64 + 5;
            }
            // Nonblocking forms, many in flight at once.
            let bufs: Vec<Vec<u8>> = (0..16).map(|i| pattern(me + 1000 + i, 777)).collect();
            let base = SLOT as u64 * u64::from(me) + 400_000;
            let handles: Vec<_> = bufs
                .iter()
                .enumerate()
                .map(|(i, b)| ep.put_nb(right, key, base + i as u64 * 777, b).unwrap())
                .collect();
            mw_core::wait_all(handles).unwrap();
            ep.barrier().unwrap();
            // Check what the left neighbour wrote into us, locally.
            let left = (me + n - 1) % n;
            let lbase = SLOT as u64 * u64::from(left) + 400_000;
            for i in 0..16u32 {
                let mut got = vec![0u8; 777];
                region.read(lbase + u64::from(i) * 777, &mut got).unwrap();
                assert_eq!(got, pattern(left + 1000 + i, 777));
            }
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn atomics_execute_exactly_once() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        run_job(4, cfg, |ep| {
            let n = u64::from(ep.size());
            let region = ep.alloc_symmetric(64, Access::ALL).unwrap();
            let key = region.key();
            const M: u64 = 200;
            let mut seen = Vec::new();
            for _ in 0..M {
                seen.push(ep.fetch_add_u64(0, key, 0, 1).unwrap());
                ep.add_u32(0, key, 8, 3).unwrap();
                ep.fetch_add_u32(1, key, 12, 2).unwrap();
            }
            // Fetched values are distinct: no add was applied twice or lost.
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len() as u64, M);
            ep.barrier().unwrap();
            if ep.rank() == 0 {
                assert_eq!(region.load_u64(0).unwrap(), n * M);
                let mut w = [0u8; 4];
                region.read(8, &mut w).unwrap();
                assert_eq!(u32::from_le_bytes(w) as u64, 3 * n * M);
            }
            if ep.rank() == 1 {
                let mut w = [0u8; 4];
                region.read(12, &mut w).unwrap();
                assert_eq!(u32::from_le_bytes(w) as u64, 2 * n * M);
            }
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn swap_compare_swap_bitwise_load_store() {
    for (name, cfg) in transports() {
        eprintln!("transport {name}");
        run_job(2, cfg, |ep| {
            let region = ep.alloc_symmetric(64, Access::ALL).unwrap();
            let key = region.key();
            let peer = 1 - ep.rank();
            let off = 16 + 16 * u64::from(ep.rank());
            ep.atomic_store(peer, key, off, AtomicWidth::U64, 5).unwrap();
            assert_eq!(ep.swap_u64(peer, key, off, 9).unwrap(), 5);
            assert_eq!(ep.compare_swap_u64(peer, key, off, 1, 100).unwrap(), 9, "mismatch leaves it");
            assert_eq!(ep.compare_swap_u64(peer, key, off, 9, 100).unwrap(), 9);
            assert_eq!(ep.atomic_load(peer, key, off, AtomicWidth::U64).unwrap(), 100);
            assert_eq!(ep.fetch_bitwise(peer, key, off, AtomicOp::Or, AtomicWidth::U64, 0b11).unwrap(), 100);
            assert_eq!(ep.fetch_bitwise(peer, key, off, AtomicOp::And, AtomicWidth::U64, 0b110).unwrap(), 103);
            ep.bitwise(peer, key, off, AtomicOp::Xor, AtomicWidth::U64, 0b1).unwrap();
            // 100 | 0b11 = 103; 103 & 0b110 = 0b110; 0b110 ^ 1 = 0b111.
            assert_eq!(ep.atomic_load(peer, key, off, AtomicWidth::U64).unwrap(), 0b111);
            let off32 = off + 8;
            assert_eq!(ep.swap_u32(peer, key, off32, 7).unwrap(), 0);
            assert_eq!(ep.compare_swap_u32(peer, key, off32, 7, 8).unwrap(), 7);
            assert_eq!(ep.atomic_load(peer, key, off32, AtomicWidth::U32).unwrap(), 8);
            assert!(matches!(
                ep.atomic_nb(peer, key, off32, AtomicOp::Add, AtomicWidth::U32, 1 << 40, 0, true),
                Err(Error::InvalidArgument(_))
            ));
            assert_eq!(ep.fetch_add_u64(peer, key, off + 1, 1), Err(Error::Misaligned));
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn put_signal_ping_pong_and_completion_flag() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        run_job(2, cfg, |ep| {
            let region = ep.alloc_symmetric(4096, Access::ALL).unwrap();
            let key = region.key();
            let me = ep.rank();
            let peer = 1 - me;
            for round in 1..=50u64 {
                let data = pattern(round as u32, 100 + round as usize);
                if (me == 0) == (round % 2 == 1) {
                    let sig = Signal { key, offset: 0, op: SignalOp::Set, value: round };
                    let handle = ep.put_signal_nb(peer, key, 64, &data, sig).unwrap();
                    handle.notify(&region, 8).unwrap();
                    handle.wait().unwrap();
                } else {
                    assert!(ep.wait_until(&region, 0, Cmp::Ge, round).unwrap() >= round);
                    let mut got = vec![0u8; data.len()];
                    region.read(64, &mut got).unwrap();
                    assert_eq!(got, data, "data visible when the signal is");
                }
            }
            // Each rank sent 25 puts and asked for a completion flag on each.
            assert_eq!(region.load_u64(8).unwrap(), 25);
            // Signal add: both ranks add to rank 0's word 16.
            let sig = Signal { key, offset: 16, op: SignalOp::Add, value: 10 };
            ep.put_signal(0, key, 2048 + 64 * u64::from(me), b"x", sig).unwrap();
            if me == 0 {
                ep.wait_until(&region, 16, Cmp::Eq, 20).unwrap();
            }
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn strided_iov_masked_registers_and_arrival_log() {
    for (name, cfg) in [("shm", Config::default()), ("udp lossy", udp(lossy(0.02, 0.02, 0.02, 5)))] {
        eprintln!("transport {name}");
        run_job(2, cfg, |ep| {
            let region = ep.alloc_symmetric(8192, Access::READ_WRITE).unwrap();
            region.enable_arrival_log(64);
            ep.barrier().unwrap(); // logging is on everywhere before anyone writes
            let key = region.key();
            let me = ep.rank();
            let peer = 1 - me;
            if me == 0 {
                // Strided: 10 elements of 3 bytes, source stride 5, target stride 7.
                let src = pattern(1, 50);
                ep.put_strided(peer, key, 100, &src, 3, 10, 5, 7).unwrap();
                let mut back = vec![0u8; 10 * 4];
                ep.get_strided(peer, key, 100, &mut back, 3, 10, 7, 4).unwrap();
                for i in 0..10 {
                    assert_eq!(&back[i * 4..i * 4 + 3], &src[i * 5..i * 5 + 3]);
                }
                // Vectored.
                let a = pattern(2, 10);
                let b = pattern(3, 300);
                ep.put_iov(peer, key, &[(1000, &a), (2000, &b), (1500, &[])]).unwrap();
                let mut got = vec![0u8; 300];
                ep.get(peer, key, 2000, &mut got).unwrap();
                assert_eq!(got, b);
                // Masked: 64-byte block, words 0 and 15 only.
                let block = [0xABu8; 64];
                ep.put_masked(peer, key, 4096, &block, (1 << 0) | (1 << 15)).unwrap();
                let mut got = [0u8; 64];
                ep.get(peer, key, 4096, &mut got).unwrap();
                assert_eq!(&got[0..4], &[0xAB; 4]);
                assert_eq!(&got[4..60], &[0u8; 56][..]);
                assert_eq!(&got[60..64], &[0xAB; 4]);
                let big = [0x11u8; 256];
                ep.put_masked(peer, key, 5000, &big, 1 << 63).unwrap();
                assert_eq!(
                    ep.put_masked(peer, key, 5000, &block, 1 << 20),
                    Err(Error::InvalidArgument("a 64-byte block has 16 words: mask bits above 15 set"))
                );
                ep.barrier().unwrap(); // register set by rank 1
                ep.put_to_register(peer, 7, b"hello").unwrap();
                assert_eq!(ep.put_to_register(peer, 7, &[0u8; 100]), Err(Error::OutOfBounds));
                assert_eq!(ep.put_to_register(peer, 8, b"x"), Err(Error::Unsupported));
                ep.barrier().unwrap();
            } else {
                ep.set_register(7, &region, 6000, 16).unwrap();
                ep.barrier().unwrap();
                ep.barrier().unwrap();
                let mut got = [0u8; 5];
                region.read(6000, &mut got).unwrap();
                assert_eq!(&got, b"hello");
                let mut got = [0u8; 256];
                region.read(5000, &mut got).unwrap();
                assert_eq!(&got[252..], &[0x11; 4]);
                assert_eq!(&got[..252], &[0u8; 252][..]);
                let mut kinds = Vec::new();
                while let Some(arrival) = region.pop_arrival() {
                    assert_eq!(arrival.source, 0);
                    kinds.push(arrival.kind);
                }
                use mw_core::ArrivalKind::*;
                for kind in [PutStrided, Get, PutIov, PutMasked, RegisterPut] {
                    assert!(kinds.contains(&kind), "arrival log lacks {kind:?}: {kinds:?}");
                }
            }
        });
    }
}

#[test]
fn protection_errors_leave_memory_untouched() {
    for (name, cfg) in transports() {
        eprintln!("transport {name}");
        run_job(2, cfg, move |ep| {
            let ro = ep.alloc_symmetric(128, Access::READ).unwrap();
            let rw = ep.alloc_symmetric(128, Access::READ_WRITE).unwrap();
            // Larger than a datagram and than an operation chunk (MW_CHUNK).
            const BIG: usize = 300_000;
            let big = ep.alloc_symmetric(BIG, Access::READ_WRITE).unwrap();
            let big_ro = ep.alloc_symmetric(BIG, Access::READ).unwrap();
            let me = ep.rank();
            let peer = 1 - me;
            if me == 0 {
                let bogus = mw_core::RegionKey(0x1234_5678);
                assert_eq!(ep.put(peer, bogus, 0, b"x"), Err(Error::BadKey));
                assert_eq!(ep.put(peer, rw.key(), 120, &[1u8; 9]), Err(Error::OutOfBounds));
                assert_eq!(ep.put(peer, rw.key(), u64::MAX - 2, &[1u8; 9]), Err(Error::OutOfBounds));
                assert_eq!(ep.put(peer, ro.key(), 0, b"x"), Err(Error::NoPermission));
                assert_eq!(ep.fetch_add_u64(peer, rw.key(), 0, 1), Err(Error::NoPermission));
                let mut out = [0u8; 16];
                assert_eq!(ep.get(peer, rw.key(), 120, &mut out), Err(Error::OutOfBounds));
                assert_eq!(ep.get(peer, bogus, 0, &mut out), Err(Error::BadKey));
                let sig = Signal { key: ro.key(), offset: 0, op: SignalOp::Set, value: 1 };
                assert_eq!(ep.put_signal(peer, rw.key(), 0, b"data", sig), Err(Error::NoPermission));
                assert!(matches!(ep.put(9, rw.key(), 0, b"x"), Err(Error::BadRank { rank: 9, size: 2 })));
                // Puts of many messages (datagrams, chunks) that overrun the
                // region by one byte at the end: none of them may land.
                assert_eq!(ep.put(peer, big.key(), 1, &vec![7u8; BIG]), Err(Error::OutOfBounds));
                let sig = Signal { key: rw.key(), offset: 64, op: SignalOp::Set, value: 1 };
                assert_eq!(ep.put_signal(peer, big.key(), 1, &vec![7u8; BIG], sig), Err(Error::OutOfBounds));
                assert_eq!(ep.put(peer, big_ro.key(), 0, &vec![7u8; BIG]), Err(Error::NoPermission));
            }
            ep.barrier().unwrap();
            if me == 1 {
                assert!(rw.to_vec().iter().all(|&b| b == 0), "rejected operations wrote memory");
                assert!(ro.to_vec().iter().all(|&b| b == 0));
                assert!(big.to_vec().iter().all(|&b| b == 0), "{name}: a rejected large put wrote part of its data");
                assert!(big_ro.to_vec().iter().all(|&b| b == 0));
                let (stats, _) = ep.stats();
                assert!(
                    stats.rejected_bad_key >= 2
                        && stats.rejected_out_of_bounds >= 3
                        && stats.rejected_no_permission >= 3,
                    "{stats:?}"
                );
            }
            ep.barrier().unwrap();
            // The same region takes puts that fit, also after the refusals
            // (and again, once the fit is known).
            if me == 0 {
                for round in 0..2u8 {
                    ep.put(peer, big.key(), 0, &vec![round + 1; BIG]).unwrap();
                    let sig = Signal { key: rw.key(), offset: 64, op: SignalOp::Set, value: 1 };
                    ep.put_signal(peer, big.key(), 0, &vec![round + 3; BIG - 1], sig).unwrap();
                }
            }
            ep.barrier().unwrap();
            if me == 1 {
                let got = big.to_vec();
                assert!(got[..BIG - 1].iter().all(|&b| b == 4) && got[BIG - 1] == 2, "{name}: fitting large puts");
                assert_eq!(rw.load_u64(64).unwrap(), 1);
            }
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn rejected_operations_on_self_fail_too() {
    // Operations to our own rank never cross the network (no ack); a
    // rejection must still reach the caller (found by the C API test at -n 1).
    run_job(1, Config::default(), |ep| {
        let ro = ep.alloc_symmetric(64, Access::READ).unwrap();
        let rw = ep.alloc_symmetric(64, Access::READ_WRITE).unwrap();
        let bogus = mw_core::RegionKey(0x1234_5678);
        assert_eq!(ep.put(0, bogus, 0, b"x"), Err(Error::BadKey));
        assert_eq!(ep.put(0, rw.key(), 60, &[1u8; 9]), Err(Error::OutOfBounds));
        assert_eq!(ep.put(0, ro.key(), 0, b"x"), Err(Error::NoPermission));
        assert_eq!(ep.put_masked(0, ro.key(), 0, &[1u8; 64], 1), Err(Error::NoPermission));
        assert_eq!(ep.put_iov(0, ro.key(), &[(0, b"ab".as_slice())]), Err(Error::NoPermission));
        assert_eq!(ep.put_strided(0, ro.key(), 0, &[1u8; 8], 4, 2, 4, 8), Err(Error::NoPermission));
        assert_eq!(ep.put(0, rw.key(), 8, b"fine"), Ok(()));
        assert!(ro.to_vec().iter().all(|&b| b == 0), "rejected operations wrote memory");
        assert_eq!(&rw.to_vec()[8..12], b"fine");
    });
}

#[test]
fn scoped_registration_of_user_memory() {
    for (name, cfg) in transports() {
        eprintln!("transport {name}");
        run_job(2, cfg, |ep| {
            let mut mine = vec![0u8; 256];
            let me = ep.rank();
            ep.with_registered(&mut mine, Access::READ_WRITE, |region| {
                let keys = ep.exchange_keys(region).unwrap();
                let peer = 1 - me;
                ep.put(peer, keys[peer as usize], 10, &[me as u8 + 1; 20]).unwrap();
                ep.barrier().unwrap();
            })
            .unwrap();
            assert_eq!(&mine[10..30], &[(1 - me) as u8 + 1; 20]);
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn progress_thread_serves_a_computing_rank() {
    for (name, cfg) in transports() {
        eprintln!("transport {name}");
        let cfg = Config { progress: mw_core::ProgressMode::Thread, ..cfg };
        run_job(2, cfg, |ep| {
            let region = ep.alloc_symmetric(64, Access::ALL).unwrap();
            let key = region.key();
            if ep.rank() == 1 {
                region.store_u64(0, 42).unwrap();
                ep.barrier().unwrap();
                // Compute without calling the library for a while.
                let start = std::time::Instant::now();
                let mut x = 0u64;
                while start.elapsed() < std::time::Duration::from_millis(300) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
                std::hint::black_box(x);
                ep.barrier().unwrap();
                assert_eq!(region.load_u64(8).unwrap(), 10);
            } else {
                ep.barrier().unwrap();
                let start = std::time::Instant::now();
                assert_eq!(ep.get_value(1, key, 0).unwrap(), 42);
                for _ in 0..10 {
                    ep.fetch_add_u64(1, key, 8, 1).unwrap();
                }
                // Served while rank 1 computed (300 ms), not after.
                assert!(
                    start.elapsed() < std::time::Duration::from_millis(250),
                    "passive target not served: {:?}",
                    start.elapsed()
                );
                ep.barrier().unwrap();
            }
        });
    }
}

#[test]
fn large_nonblocking_gets_land_whole_and_a_dropped_one_lands_nowhere() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        run_job(2, cfg, move |ep| {
            const LEN: usize = 150_001;
            let region = ep.alloc_symmetric(LEN * 8, Access::READ_WRITE).unwrap();
            let key = region.key();
            if ep.rank() == 0 {
                region.write(0, &pattern(77, LEN * 8)).unwrap();
            }
            ep.barrier().unwrap();
            if ep.rank() == 1 {
                let source = pattern(77, LEN * 8);
                let mut bufs: Vec<Vec<u8>> = (0..6).map(|_| vec![0u8; LEN - 3]).collect();
                let mut dropped = vec![0xeeu8; LEN];
                // Odd offsets; data may arrive before, during or after each wait.
                let offset = |i: usize| (i * LEN + 5) as u64;
                let served_directly;
                {
                    let (early, late) = bufs.split_at_mut(3);
                    let mut handles: Vec<_> =
                        early.iter_mut().enumerate().map(|(i, b)| ep.get_nb(0, key, offset(i), b).unwrap()).collect();
                    let direct_before = ep.stats().0.shm_direct_ops;
                    drop(ep.get_nb(0, key, 1, &mut dropped).unwrap());
                    served_directly = ep.stats().0.shm_direct_ops > direct_before;
                    // Replies come in order: once this one is back, the early
                    // gets' data has all arrived (staged, nobody waits yet).
                    assert_eq!(ep.get_value(0, key, 0).unwrap(), u64::from_le_bytes(source[..8].try_into().unwrap()));
                    // These arrive while the handles are waited on.
                    handles
                        .extend(late.iter_mut().enumerate().map(|(i, b)| ep.get_nb(0, key, offset(i + 3), b).unwrap()));
                    let last = handles.pop().unwrap();
                    let single = handles.remove(0);
                    single.wait().unwrap();
                    mw_core::wait_all(handles).unwrap();
                    last.wait().unwrap();
                }
                for (i, b) in bufs.iter().enumerate() {
                    let want = &source[offset(i) as usize..offset(i) as usize + LEN - 3];
                    assert!(b[..] == want[..], "{name}: get {i} differs");
                }
                if served_directly {
                    // Same host: the get was a direct copy out of the
                    // target's memory, done before get_nb returned (the
                    // handle was born complete), so the buffer was written
                    // while still borrowed.
                    assert!(ep.shares_memory_with(0), "{name}: direct get without shared memory");
                    assert!(dropped[..] == source[1..1 + LEN], "{name}: direct get differs");
                } else {
                    // The dropped get was answered before the round trip above
                    // completed, and never written into the buffer its handle borrowed.
                    assert!(dropped.iter().all(|&b| b == 0xee), "{name}: a dropped get wrote into its buffer");
                }
            }
            ep.barrier().unwrap();
        });
    }
}

/// The CPUs (`Cpus_allowed_list`) of every thread of this process whose
/// name starts with `name` (the kernel keeps 15 bytes of it).
fn thread_cpus(name: &str) -> Vec<String> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !name.starts_with(comm.trim()) || comm.trim().is_empty() {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        if let Some(list) = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")) {
            found.push(list.trim().to_owned());
        }
    }
    found
}

#[test]
fn the_librarys_threads_run_on_the_background_cpus() {
    let cpu = *mw_transport::wait::allowed_cpus().unwrap().last().unwrap();
    for (mode, name) in
        [(mw_core::ProgressMode::Thread, "memwire-progress"), (mw_core::ProgressMode::Auto, "memwire-watchdog")]
    {
        let cfg = Config { progress: mode, background_cpus: Some(vec![cpu]), ..Config::default() };
        run_job(1, cfg, move |_ep| {
            // Other tests' threads of the same name keep the process's CPUs;
            // this endpoint's must be on `cpu` alone.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while !thread_cpus(name).contains(&cpu.to_string()) {
                assert!(std::time::Instant::now() < deadline, "{name}: {:?}, want {cpu}", thread_cpus(name));
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
    }
}
