//! What is particular to the shared-memory transport: jobs that mix shared
//! memory and UDP (ranks told they run on different hosts), atomics on one
//! word from both at once, registered memory by `process_vm_*` and by the
//! forced two-copy fallback, messages larger than a ring record, ordering
//! between ring and direct operations, and waking a rank that sleeps.

mod common;

use common::{pattern, run_job, run_job_on_hosts, shm, transports};
use mw_core::{Access, AtomicOp, AtomicWidth, Cmp, Config, ShmCopy, Signal, SignalOp};

fn hosts(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn mixed_hosts_share_atomic_words_between_shm_and_udp() {
    // Ranks 0,1 on host a and 2,3 on host b: 0-1 and 2-3 use shared memory,
    // every other pair UDP. Rank 0's and rank 1's words are each hit by a
    // same-host peer (CPU atomics on its mapping) and by the two remote
    // ranks (served by the owner's progress engine) at the same time.
    run_job_on_hosts(4, shm(Config::default()), hosts(&["a", "a", "b", "b"]), |ep| {
        let me = ep.rank();
        let region = ep.alloc_symmetric(8192, Access::ALL).unwrap();
        let key = region.key();
        const M: u64 = 300;
        let mut tickets = Vec::new();
        for i in 0..M {
            tickets.push(ep.fetch_add_u64(0, key, 0, 1).unwrap());
            ep.add_u32(1, key, 8, 1).unwrap();
            if i % 10 == 0 {
                ep.fetch_bitwise(1, key, 16, AtomicOp::Or, AtomicWidth::U64, 1 << me).unwrap();
            }
        }
        tickets.sort_unstable();
        tickets.dedup();
        assert_eq!(tickets.len() as u64, M, "a fetch_add was lost or applied twice");
        ep.barrier().unwrap();
        if me == 0 {
            assert_eq!(region.load_u64(0).unwrap(), 4 * M);
        }
        if me == 1 {
            let mut w = [0u8; 4];
            region.read(8, &mut w).unwrap();
            assert_eq!(u64::from(u32::from_le_bytes(w)), 4 * M);
            assert_eq!(region.load_u64(16).unwrap(), 0b1111);
        }
        // put_signal ring across the host boundary: 0 -> 1 (shm) -> 2 (udp) -> 3 (shm) -> 0 (udp).
        let next = (me + 1) % 4;
        let prev = (me + 3) % 4;
        let data = pattern(me, 5000);
        let sig = Signal { key, offset: 64, op: SignalOp::Add, value: 1 };
        ep.put_signal(next, key, 128, &data, sig).unwrap();
        ep.wait_until(&region, 64, Cmp::Ge, 1).unwrap();
        let mut got = vec![0u8; 5000];
        region.read(128, &mut got).unwrap();
        assert_eq!(got, pattern(prev, 5000));
        // Ranks 0-2 addressed a same-host peer (0 and 1 each other's words,
        // 2 its put_signal to 3); rank 3 only ever addressed the other host.
        let (stats, _) = ep.stats();
        assert_eq!(stats.shm_direct_ops > 0, me != 3, "{stats:?}");
        ep.barrier().unwrap();
    });
}

#[test]
fn registered_memory_by_cross_memory_attach_and_by_the_ring_fallback() {
    for (name, cfg) in transports().into_iter().filter(|(n, _)| n.starts_with("shm")) {
        eprintln!("transport {name}");
        let two_copy = cfg.shm_copy == ShmCopy::Rings;
        run_job(2, cfg, move |ep| {
            let me = ep.rank();
            let peer = 1 - me;
            let mut mine = vec![0u8; 1 << 20];
            ep.with_registered(&mut mine, Access::ALL, |region| {
                let keys = ep.exchange_keys(region).unwrap();
                let theirs = keys[peer as usize];
                let before = ep.stats().0;
                let mut offset = 8u64;
                // Up to more than one chunk (256 KiB), so big messages go
                // through the ring in parts.
                for (i, len) in [1usize, 1000, 70_000, 300_001].into_iter().enumerate() {
                    let data = pattern(me * 10 + i as u32, len);
                    ep.put(peer, theirs, offset, &data).unwrap();
                    let mut back = vec![0u8; len];
                    ep.get(peer, theirs, offset, &mut back).unwrap();
                    assert_eq!(back, data, "{len} bytes");
                    offset += len as u64 + 3;
                }
                // Atomics on user memory are executed by the owner, with the
                // same CPU instruction a mapped word would get.
                for _ in 0..50 {
                    ep.fetch_add_u64(peer, theirs, 0, 1).unwrap();
                }
                let after = ep.stats().0;
                if two_copy {
                    assert_eq!(after.shm_direct_ops, before.shm_direct_ops, "two-copy forced, yet direct copies");
                    assert!(after.shm_ring_sent >= before.shm_ring_sent + 58, "{after:?}");
                } else {
                    assert!(after.shm_direct_ops >= before.shm_direct_ops + 8, "{after:?}");
                }
                ep.barrier().unwrap();
            })
            .unwrap();
            assert_eq!(u64::from_le_bytes(mine[..8].try_into().unwrap()), 50);
            let len = 300_001;
            let at = 8 + 1 + 1000 + 70_000 + 9;
            assert_eq!(&mine[at..at + len], &pattern(peer * 10 + 3, len)[..]);
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn ring_operations_stay_ordered_before_direct_ones() {
    // In two-copy mode a put to registered memory goes through the ring;
    // the put_signal that follows must not overtake it by going direct.
    let cfg = shm(Config { shm_copy: ShmCopy::Rings, ..Config::default() });
    run_job(2, cfg, |ep| {
        let me = ep.rank();
        let flags = ep.alloc_symmetric(64, Access::ALL).unwrap();
        let mut mine = vec![0u8; 200_000];
        ep.with_registered(&mut mine, Access::ALL, |region| {
            let keys = ep.exchange_keys(region).unwrap();
            for round in 1..=20u64 {
                if me == 0 {
                    let data = pattern(round as u32, 150_000);
                    drop(ep.put_nb(1, keys[1], 0, &data).unwrap());
                    let sig = Signal { key: flags.key(), offset: 0, op: SignalOp::Set, value: round };
                    ep.put_signal(1, flags.key(), 8, b"x", sig).unwrap();
                    ep.wait_until(&flags, 16, Cmp::Ge, round).unwrap();
                } else {
                    ep.wait_until(&flags, 0, Cmp::Ge, round).unwrap();
                    let mut got = vec![0u8; 150_000];
                    region.read(0, &mut got).unwrap();
                    assert_eq!(got, pattern(round as u32, 150_000), "signal overtook the data, round {round}");
                    ep.atomic_store(0, flags.key(), 16, AtomicWidth::U64, round).unwrap();
                }
            }
            ep.barrier().unwrap();
        })
        .unwrap();
    });
}

#[test]
fn messages_larger_than_a_ring_record_arrive_whole() {
    run_job(3, shm(Config::default()), |ep| {
        let blob = pattern(ep.rank(), 400_000);
        let all = ep.allgather_bytes(&blob).unwrap();
        for (rank, got) in all.iter().enumerate() {
            assert_eq!(got, &pattern(rank as u32, 400_000));
        }
    });
}

#[test]
fn a_sleeping_rank_is_woken_by_a_direct_store_and_by_a_ring_message() {
    // No spinning and no yielding: the waiter blocks in the kernel at once,
    // and only the doorbell can wake it (there is no UDP traffic, so no
    // protocol timer either).
    let cfg = Config {
        shm_spin: std::time::Duration::ZERO,
        spin: std::time::Duration::ZERO,
        yield_for: std::time::Duration::ZERO,
        ..shm(Config::default())
    };
    run_job(2, cfg, |ep| {
        let region = ep.alloc_symmetric(64, Access::ALL).unwrap();
        let key = region.key();
        for round in 1..=20u64 {
            if ep.rank() == 1 {
                std::thread::sleep(std::time::Duration::from_millis(2));
                let sig = Signal { key, offset: 0, op: SignalOp::Set, value: round };
                ep.put_signal(0, key, 8, &round.to_le_bytes(), sig).unwrap();
            } else {
                assert_eq!(ep.wait_until(&region, 0, Cmp::Eq, round).unwrap(), round);
            }
            if round % 5 == 0 {
                // Rank 0 usually sleeps in the barrier until rank 1's ring message.
                ep.barrier().unwrap();
            }
        }
    });
}

#[test]
fn a_sender_sleeping_until_its_operation_is_consumed_is_woken() {
    // A put into a region with an arrival log goes through the ring (the
    // owner logs what it executes) and completes when the owner has
    // consumed the record: the ring's head is the acknowledgement. The
    // sender blocks in the kernel at once; the owner is busy elsewhere and
    // its watchdog takes the record a few ms later, and nothing else
    // travels toward the sender: only a doorbell on consumption wakes it.
    let cfg = Config {
        shm_spin: std::time::Duration::ZERO,
        spin: std::time::Duration::ZERO,
        yield_for: std::time::Duration::ZERO,
        ..shm(Config::default())
    };
    run_job(2, cfg, |ep| {
        let region = ep.alloc_symmetric(64, Access::ALL).unwrap();
        region.enable_arrival_log(64);
        let key = region.key();
        ep.barrier().unwrap();
        for round in 0..20u64 {
            if ep.rank() == 0 {
                ep.put(1, key, 8, &round.to_le_bytes()).unwrap();
            } else {
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
        }
        ep.barrier().unwrap();
        if ep.rank() == 1 {
            assert_eq!(region.load_u64(8).unwrap(), 19);
        }
    });
}

#[test]
fn two_application_threads_waiting_on_one_endpoint_both_wake() {
    // Two threads of rank 0 wait at once on different messages; whichever
    // thread's poll takes the doorbell, the other must still see its message.
    let cfg = Config {
        shm_spin: std::time::Duration::ZERO,
        spin: std::time::Duration::ZERO,
        yield_for: std::time::Duration::ZERO,
        ..shm(Config::default())
    };
    run_job(2, cfg, |ep| {
        for round in 0..10u64 {
            if ep.rank() == 0 {
                std::thread::scope(|s| {
                    for tag in [2 * round, 2 * round + 1] {
                        s.spawn(move || {
                            let mut buf = [0u8; 8];
                            ep.recv(1, tag, &mut buf).unwrap();
                            assert_eq!(u64::from_le_bytes(buf), tag);
                        });
                    }
                });
            } else {
                for tag in [2 * round + 1, 2 * round] {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    ep.send(0, tag, &tag.to_le_bytes()).unwrap();
                }
            }
        }
        ep.barrier().unwrap();
    });
}

/// Sends `count` messages numbered from 0 to rank 0 with tag 7, pausing
/// every `every` messages so that its receivers catch up and spin.
fn send_numbered(ep: &mw_core::Endpoint, count: u64, every: u64) {
    for seq in 0..count {
        ep.send(0, 7, &seq.to_le_bytes()).unwrap();
        if seq % every == 0 {
            std::thread::sleep(std::time::Duration::from_micros(150));
        }
    }
}

#[test]
fn receives_of_one_tag_from_two_threads_take_every_message_once_and_in_order() {
    // Rank 0's two threads receive the same source and tag at once: one
    // with blocking receives (the spinning shortcut, which keeps the lock
    // while it waits and takes the record in place), the other through
    // posted `irecv`s, which make the spinner let go and look again from
    // scratch. Every message must be taken exactly once, and each thread
    // must see its messages in the order they were sent (messages between
    // a pair never overtake one another, and a thread's receives follow
    // one another).
    const PER_THREAD: u64 = 2000;
    run_job(2, shm(Config::default()), |ep| {
        if ep.rank() == 0 {
            let seen: Vec<Vec<u64>> = std::thread::scope(|s| {
                let blocking = s.spawn(|| {
                    let mut buf = [0u8; 8];
                    (0..PER_THREAD)
                        .map(|_| {
                            ep.recv(1, 7, &mut buf).unwrap();
                            u64::from_le_bytes(buf)
                        })
                        .collect()
                });
                let posted = s.spawn(|| {
                    let mut buf = [0u8; 8];
                    (0..PER_THREAD)
                        .map(|_| {
                            ep.irecv(1, 7, &mut buf).unwrap().wait().unwrap();
                            u64::from_le_bytes(buf)
                        })
                        .collect()
                });
                vec![blocking.join().unwrap(), posted.join().unwrap()]
            });
            for taken in &seen {
                assert!(taken.windows(2).all(|w| w[0] < w[1]), "a thread saw messages out of order");
            }
            let mut all: Vec<u64> = seen.concat();
            all.sort_unstable();
            assert_eq!(all, (0..2 * PER_THREAD).collect::<Vec<_>>(), "each message taken exactly once");
        } else {
            send_numbered(ep, 2 * PER_THREAD, 256);
        }
        ep.barrier().unwrap();
    });
}

#[test]
fn a_spinning_receive_that_let_go_of_the_lock_never_overtakes_what_progress_queued() {
    // Rank 0 receives a numbered stream with blocking receives (the
    // spinning shortcut keeps the lock while it waits) while its second
    // thread keeps progressing the endpoint, which makes the spinner let go
    // of the lock and lets progress move arrivals into the unexpected
    // queue meanwhile. The spinner must then look again from scratch (and
    // take the queued message first), never take the next record from the
    // ring in place: each receive gets the next number. (The window in
    // which a stale in-place take would overtake is narrow: this test
    // guards the fallback's ordering under lock handoffs, it does not
    // reliably provoke that window.)
    const MESSAGES: u64 = 2000;
    run_job(2, shm(Config::default()), |ep| {
        if ep.rank() == 0 {
            let done = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|s| {
                s.spawn(|| {
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        ep.progress();
                    }
                });
                let mut buf = [0u8; 8];
                for expected in 0..MESSAGES {
                    ep.recv(1, 7, &mut buf).unwrap();
                    assert_eq!(u64::from_le_bytes(buf), expected, "a receive overtook an earlier message");
                }
                done.store(true, std::sync::atomic::Ordering::Relaxed);
            });
        } else {
            send_numbered(ep, MESSAGES, 64);
        }
        ep.barrier().unwrap();
    });
}

#[test]
fn a_freed_region_is_never_reached_through_a_cached_window() {
    // Rank 1 direct-accesses many of rank 0's regions (more than a thread
    // caches at once), rank 0 frees them; every later access must fail with
    // BadKey (the owner decides, through the ring), never land in memory
    // that no longer belongs to the region, and a new region works at once.
    run_job(2, shm(Config::default()), |ep| {
        const REGIONS: usize = 20;
        let regions: Vec<_> = if ep.rank() == 0 {
            (0..REGIONS).map(|_| Some(ep.alloc(4096, Access::ALL).unwrap())).collect()
        } else {
            Vec::new()
        };
        let mine: Vec<u64> = regions.iter().flatten().map(|r| r.key().0).collect();
        let blob: Vec<u8> = mine.iter().flat_map(|k| k.to_le_bytes()).collect();
        let keys: Vec<mw_core::RegionKey> = ep.allgather_bytes(&blob).unwrap()[0]
            .chunks(8)
            .map(|c| mw_core::RegionKey(u64::from_le_bytes(c.try_into().unwrap())))
            .collect();
        if ep.rank() == 1 {
            for (i, &key) in keys.iter().enumerate() {
                ep.put(0, key, 8, &(i as u64).to_le_bytes()).unwrap();
                let mut back = [0u8; 8];
                ep.get(0, key, 8, &mut back).unwrap();
                assert_eq!(u64::from_le_bytes(back), i as u64);
            }
        }
        ep.barrier().unwrap();
        let mut regions = regions;
        if ep.rank() == 0 {
            for (i, region) in regions.iter().enumerate() {
                assert_eq!(region.as_ref().unwrap().load_u64(8).unwrap(), i as u64);
            }
            regions.clear(); // frees every region
        }
        ep.barrier().unwrap();
        if ep.rank() == 1 {
            for &key in &keys {
                assert_eq!(ep.put(0, key, 8, b"too late"), Err(mw_core::Error::BadKey));
                let mut back = [0u8; 8];
                assert_eq!(ep.get(0, key, 8, &mut back), Err(mw_core::Error::BadKey));
                assert_eq!(ep.fetch_add_u64(0, key, 8, 1), Err(mw_core::Error::BadKey));
            }
        }
        ep.barrier().unwrap();
        let fresh = ep.alloc_symmetric(64, Access::ALL).unwrap();
        ep.put(1 - ep.rank(), fresh.key(), 0, &[7u8; 8]).unwrap();
        ep.barrier().unwrap();
        assert_eq!(fresh.load_u64(0).unwrap(), u64::from_le_bytes([7u8; 8]));
        let (core, _) = ep.stats();
        if ep.rank() == 1 {
            assert!(core.shm_direct_ops > 0, "the accesses before the free went direct: {core:?}");
        }
    });
}

#[test]
fn failures_reach_the_initiator_even_when_replies_back_up() {
    // A put completes as a success when the target has consumed its ring
    // record, unless an error status came back first. Here the target's
    // ring back to the initiator fills up with error statuses (the initiator
    // sleeps without taking them), so later statuses wait in the target's
    // overflow queue while it goes on consuming: none of those failures may
    // turn into a success, and the good puts among them still land.
    run_job(2, shm(Config::default()), |ep| {
        let me = ep.rank();
        let region = ep.alloc_symmetric(8 * 1024, Access::ALL).unwrap();
        let good = region.key();
        let bad = mw_core::RegionKey(good.0 ^ 0x5a5a_5a5a);
        ep.barrier().unwrap();
        if me == 0 {
            const OPS: usize = 40_000;
            let values: Vec<[u8; 8]> = (0..OPS as u64).map(|i| i.to_le_bytes()).collect();
            let mut handles = Vec::with_capacity(OPS);
            for (i, value) in values.iter().enumerate() {
                let is_good = i % 97 == 0;
                let key = if is_good { good } else { bad };
                let offset = if is_good { (i / 97 % 1024) as u64 * 8 } else { 0 };
                handles.push((is_good, ep.put_nb(1, key, offset, value).unwrap()));
            }
            // Rank 1 executes what reached its ring and answers into a ring
            // nobody empties meanwhile.
            std::thread::sleep(std::time::Duration::from_millis(300));
            let (mut wrong, mut good_failed) = (0, 0);
            for (is_good, handle) in handles {
                match (is_good, handle.wait()) {
                    (true, Ok(())) | (false, Err(mw_core::Error::BadKey)) => {}
                    (true, Err(e)) => {
                        good_failed += 1;
                        eprintln!("good put failed: {e}");
                    }
                    (false, other) => {
                        wrong += 1;
                        if wrong < 5 {
                            eprintln!("bad-key put reported {other:?}");
                        }
                    }
                }
            }
            assert_eq!((wrong, good_failed), (0, 0), "bad-key puts not failed, good puts failed");
        }
        ep.barrier().unwrap();
        if me == 1 {
            // The last good put to each word wins (they were issued in order).
            for word in 0..1024u64 {
                let last = (0..40_000u64).filter(|i| i % 97 == 0 && i / 97 % 1024 == word).max();
                if let Some(last) = last {
                    assert_eq!(region.load_u64(word * 8).unwrap(), last, "word {word}");
                }
            }
        }
        ep.barrier().unwrap();
    });
}

#[test]
fn peer_region_ptr_reaches_same_host_memory_and_nothing_else() {
    // Ranks 0,1 on host a, rank 2 on host b: 0 and 1 map each other's
    // memory files, 2 reaches them only over UDP.
    run_job_on_hosts(3, shm(Config::default()), hosts(&["a", "a", "b"]), |ep| {
        let me = ep.rank();
        let region = ep.alloc_symmetric(4096, Access::ALL).unwrap();
        let key = region.key();
        let own = ep.peer_region_ptr(me, key).unwrap().expect("a rank reaches its own region");
        assert_eq!(own.as_ptr(), region.as_ptr());
        let mut registered = vec![0u8; 64];
        ep.with_registered(&mut registered, Access::ALL, |user| {
            let user_keys = ep.exchange_keys(user).unwrap();
            // Registered memory is reached with process_vm_*, not mapped.
            let peer = if me == 0 { 1 } else { 0 };
            assert!(ep.peer_region_ptr(peer, user_keys[peer as usize]).unwrap().is_none());
            ep.barrier().unwrap();
        })
        .unwrap();
        if me < 2 {
            let peer = 1 - me;
            let ptr = ep.peer_region_ptr(peer, key).unwrap().expect("a same-host peer's region is mapped");
            // SAFETY: the peer keeps its 4096-byte region until the barrier
            // below; each rank writes only bytes 8*me.. of the other's.
            unsafe { ptr.as_ptr().add(8 * me as usize).cast::<u64>().write_volatile(0x1000 + u64::from(me)) };
            assert!(ep.peer_region_ptr(2, key).unwrap().is_none(), "another host's memory is not mapped");
            assert!(ep.peer_region_ptr(peer, mw_core::RegionKey(12345)).unwrap().is_none());
        } else {
            assert!(ep.peer_region_ptr(0, key).unwrap().is_none());
        }
        assert!(matches!(ep.peer_region_ptr(3, key), Err(mw_core::Error::BadRank { .. })));
        ep.barrier().unwrap();
        if me < 2 {
            let peer = 1 - me;
            assert_eq!(region.load_u64(8 * u64::from(peer)).unwrap(), 0x1000 + u64::from(peer));
        }
        ep.barrier().unwrap();
    });
    // Over UDP nothing but a rank's own memory is reachable.
    run_job(2, common::udp(Config::default()), |ep| {
        let region = ep.alloc_symmetric(64, Access::ALL).unwrap();
        assert!(ep.peer_region_ptr(1 - ep.rank(), region.key()).unwrap().is_none());
        assert!(ep.peer_region_ptr(ep.rank(), region.key()).unwrap().is_some());
        ep.barrier().unwrap();
    });
}
