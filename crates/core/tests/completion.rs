//! `flush(rank)`, `quiet()` and `fence()`: what they promise, checked so that
//! a regression fails. The initiator issues many nonblocking puts, drops the
//! handles (so only flush or quiet can know when the puts landed), calls
//! flush or quiet, and then tells the target through a path that cannot be
//! ordered behind the puts: a flag outside memwire (the ranks are threads of
//! one process), or a message relayed by a third rank (another stream, and
//! over shared memory another ring). The target then checks every byte
//! without making progress first. If flush or quiet returned early, the
//! target finds bytes missing: under injected loss over UDP a lost put is
//! only retransmitted after a timeout, and over shared memory puts queued
//! behind a full ring are not even in the ring yet.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use common::{lossy, pattern, run_job, udp};
use mw_core::{Access, Cmp, Config, Endpoint, Region, RegionKey};

/// The puts of one round: `(offset, len)`, disjoint, odd sizes and
/// alignments, inline ones and multi-datagram ones.
fn layout(count: usize) -> Vec<(u64, usize)> {
    let sizes = [1usize, 8, 31, 33, 700, 1472, 3001, 9000];
    let mut at = 5u64;
    (0..count)
        .map(|i| {
            let len = sizes[i % sizes.len()];
            let put = (at, len);
            at += len as u64 + 3;
            put
        })
        .collect()
}

fn region_len(puts: &[(u64, usize)]) -> usize {
    puts.last().map_or(0, |&(at, len)| at as usize + len + 64)
}

/// Issues every put of `puts` to `rank` without waiting; the handles are
/// dropped at once (the operations still complete, nobody is told).
fn issue_puts(ep: &Endpoint, rank: u32, key: RegionKey, puts: &[(u64, usize)], seed: u32) {
    for (i, &(at, len)) in puts.iter().enumerate() {
        let data = pattern(seed + i as u32, len);
        drop(ep.put_nb(rank, key, at, &data).unwrap());
    }
}

/// Checks that every put of `puts` from `seed` is in `region`, and nothing
/// else was written. Reads take the endpoint lock but make no progress.
fn check_landed(region: &Region<'_>, puts: &[(u64, usize)], seed: u32, what: &str) {
    let bytes = region.to_vec();
    let mut expected = vec![0u8; bytes.len()];
    for (i, &(at, len)) in puts.iter().enumerate() {
        expected[at as usize..at as usize + len].copy_from_slice(&pattern(seed + i as u32, len));
    }
    let missing = puts
        .iter()
        .filter(|&&(at, len)| bytes[at as usize..at as usize + len] != expected[at as usize..at as usize + len])
        .count();
    assert_eq!(missing, 0, "{what}: {missing} of {} puts had not landed when the target was told", puts.len());
    assert!(bytes == expected, "{what}: bytes outside the puts changed");
}

/// Makes progress until `flag` is set (the application thread of a target
/// that is doing something else but calls into the library now and then).
fn progress_until(ep: &Endpoint, flag: &AtomicBool) {
    while !flag.load(Ordering::Acquire) {
        ep.progress();
        std::thread::yield_now();
    }
}

#[test]
fn flush_returns_only_when_every_put_to_the_rank_has_landed_udp_under_loss() {
    for seed in [21u64, 22] {
        let flushed = Arc::new(AtomicBool::new(false));
        run_job(2, lossy(0.1, 0.05, 0.1, seed), move |ep| {
            let puts = layout(120);
            let region = ep.alloc_symmetric(region_len(&puts), Access::ALL).unwrap();
            if ep.rank() == 0 {
                issue_puts(ep, 1, region.key(), &puts, 7);
                ep.flush(1).unwrap();
                flushed.store(true, Ordering::Release);
            } else {
                progress_until(ep, &flushed);
                check_landed(&region, &puts, 7, "flush(1) over lossy UDP");
            }
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn quiet_returns_only_when_every_put_has_landed_everywhere_udp_under_loss() {
    run_job(3, lossy(0.1, 0.05, 0.1, 23), |ep| {
        let puts = layout(80);
        let region = ep.alloc_symmetric(region_len(&puts), Access::ALL).unwrap();
        let key = region.key();
        let mut done = [0u8; 1];
        match ep.rank() {
            0 => {
                // To both peers and to itself (the loopback path).
                for rank in 0..3 {
                    issue_puts(ep, rank, key, &puts, 100 * rank);
                }
                ep.quiet().unwrap();
                // Tell rank 2, which tells rank 1: neither message shares a
                // stream with the puts to rank 1.
                ep.send(2, 1, b"q").unwrap();
                check_landed(&region, &puts, 0, "quiet() at the initiator itself");
            }
            2 => {
                ep.recv(0, 1, &mut done).unwrap();
                check_landed(&region, &puts, 200, "quiet() seen by rank 2");
                ep.send(1, 1, b"q").unwrap();
            }
            _ => {
                ep.recv(2, 1, &mut done).unwrap();
                check_landed(&region, &puts, 100, "quiet() seen by rank 1 through rank 2");
            }
        }
        ep.barrier().unwrap();
    });
}

/// Gets that fill the inbound ring of a same-host target that is not
/// making progress: a 64 KiB ring (with `chunk_bytes` 4 KiB) holds at most
/// 1024 records of 64 bytes, so 2048 get requests overflow it and the puts
/// issued after them wait in the initiator's overflow queue. Get requests
/// complete by their reply, not by the ring's acknowledgement, so at that
/// moment no put is acknowledged-pending either: only the overflow queue
/// knows about them.
const RING_FILLING_GETS: u32 = 2048;

/// A same-host job where the target's region has an arrival log, so every
/// operation on it goes through the rings (the owner executes and logs it)
/// instead of a direct store that completes at once.
fn puts_queued_behind_a_full_ring(use_quiet: bool) {
    let config = Config { chunk_bytes: 4096, ..Config::default() };
    let go = Arc::new(Barrier::new(2));
    let flushed = Arc::new(AtomicBool::new(false));
    run_job(2, config, move |ep| {
        assert!(ep.shares_memory_with(1 - ep.rank()));
        let puts = layout(40);
        let region = ep.alloc_symmetric(region_len(&puts), Access::ALL).unwrap();
        let key = region.key();
        if ep.rank() == 1 {
            region.enable_arrival_log(16);
        }
        ep.barrier().unwrap();
        if ep.rank() == 0 {
            let mut sink = [0u8; 8];
            for _ in 0..RING_FILLING_GETS {
                drop(ep.get_nb(1, key, 0, &mut sink).unwrap());
            }
            issue_puts(ep, 1, key, &puts, 9);
            go.wait(); // the target starts making progress
            if use_quiet {
                ep.quiet().unwrap();
            } else {
                ep.flush(1).unwrap();
            }
            flushed.store(true, Ordering::Release);
        } else {
            go.wait(); // nothing consumed the ring until now
            progress_until(ep, &flushed);
            let what = if use_quiet { "quiet()" } else { "flush(1)" };
            check_landed(&region, &puts, 9, &format!("{what} with puts queued behind a full ring"));
        }
        ep.barrier().unwrap();
    });
}

#[test]
fn flush_covers_puts_waiting_in_the_shared_memory_overflow_queue() {
    puts_queued_behind_a_full_ring(false);
}

#[test]
fn quiet_covers_puts_waiting_in_the_shared_memory_overflow_queue() {
    puts_queued_behind_a_full_ring(true);
}

/// `fence()` promises that puts issued before it reach the target before
/// puts issued after it. It costs nothing because every path delivers one
/// initiator's operations to one target in issue order; this checks that
/// promise where it is hardest to keep: data larger than one chunk, then a
/// fence, then a one-word flag put, with the target watching only the flag.
#[test]
fn fence_orders_puts_to_one_target() {
    let configs =
        [("shm", Config::default()), ("udp", udp(Config::default())), ("udp lossy", lossy(0.1, 0.05, 0.2, 24))];
    for (name, config) in configs {
        eprintln!("config {name}");
        run_job(2, config, move |ep| {
            const ROUNDS: u64 = 6;
            const DATA: usize = 300_001; // more than one chunk and one datagram
            let region = ep.alloc_symmetric(DATA + 64, Access::ALL).unwrap();
            let key = region.key();
            let flag_at = (DATA as u64 + 7) & !7;
            for round in 1..=ROUNDS {
                let data = pattern(round as u32, DATA);
                if ep.rank() == 0 {
                    let data_put = ep.put_nb(1, key, 0, &data).unwrap();
                    ep.fence();
                    let flag = round.to_le_bytes();
                    let flag_put = ep.put_nb(1, key, flag_at, &flag).unwrap();
                    mw_core::wait_all([data_put, flag_put]).unwrap();
                } else {
                    ep.wait_until(&region, flag_at, Cmp::Eq, round).unwrap();
                    let mut got = vec![0u8; DATA];
                    region.read(0, &mut got).unwrap();
                    assert!(got == data, "{name} round {round}: the flag landed before the data fenced ahead of it");
                }
                ep.barrier().unwrap();
            }
        });
    }
}
