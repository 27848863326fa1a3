//! Puts fed from the caller's buffer (`put_nb_lent`, `put_signal_nb_lent`,
//! and the blocking `put`/`put_signal`, which use the same path): their
//! bytes are read as the window nears them, not copied at the call. They
//! arrive intact (also under loss), keep issue order with everything issued
//! after them toward the same target, refuse what does not fit, and stop
//! reading the buffer the moment their handle is dropped.

mod common;

use std::time::Duration;

use common::{assert_requests_freed, lossy, pattern, run_job, udp};
use mw_core::{Access, Config, Error, ProgressMode, Signal, SignalOp};

/// UDP at the Ethernet MTU, so a put is many datagrams.
fn ethernet(config: Config) -> Config {
    Config { max_datagram: Some(1472), ..udp(config) }
}

#[test]
fn lent_puts_arrive_intact() {
    let configs = [
        ("ethernet", ethernet(Config::default())),
        ("loopback datagrams", udp(Config::default())),
        ("ethernet, 5% loss", Config { max_datagram: Some(1472), ..lossy(0.05, 0.01, 0.02, 11) }),
    ];
    for (name, cfg) in configs {
        run_job(2, cfg, move |ep| {
            const ROOM: usize = (3 << 20) + 64;
            let region = ep.alloc_symmetric(ROOM + 8, Access::ALL).unwrap();
            let key = region.key();
            for (i, len) in [2 * 1424 + 1, 64 << 10, 1 << 20, (3 << 20) + 17].into_iter().enumerate() {
                for signal in [false, true] {
                    let seed = (i * 2 + usize::from(signal)) as u32;
                    let data = pattern(seed, len);
                    let sig = Signal { key, offset: ROOM as u64, op: SignalOp::Add, value: 1 };
                    if ep.rank() == 0 {
                        // SAFETY: `data` outlives the handle, which is waited on.
                        let h = unsafe {
                            if signal {
                                ep.put_signal_nb_lent(1, key, 0, &data, sig).unwrap()
                            } else {
                                ep.put_nb_lent(1, key, 0, &data).unwrap()
                            }
                        };
                        h.wait().unwrap();
                    }
                    ep.barrier().unwrap();
                    if ep.rank() == 1 {
                        let mut got = vec![0u8; len];
                        region.read(0, &mut got).unwrap();
                        assert!(got == data, "{name}: {len} bytes arrived intact (signal {signal})");
                    }
                    ep.barrier().unwrap();
                }
            }
            if ep.rank() == 1 {
                assert_eq!(region.load_u64(ROOM as u64).unwrap(), 4, "{name}: every signal was added once");
            }
            // The blocking forms take the same path.
            let data = pattern(99, 2 << 20);
            if ep.rank() == 0 {
                ep.put(1, key, 0, &data).unwrap();
                let sig = Signal { key, offset: ROOM as u64, op: SignalOp::Set, value: 77 };
                ep.put_signal(1, key, 8, &data[8..], sig).unwrap();
            }
            ep.barrier().unwrap();
            if ep.rank() == 1 {
                let mut got = vec![0u8; data.len()];
                region.read(0, &mut got).unwrap();
                assert!(got == data, "{name}: blocking put and put_signal");
                assert_eq!(region.load_u64(ROOM as u64).unwrap(), 77);
            }
            assert_requests_freed(ep);
            ep.barrier().unwrap();
        });
    }
}

/// Operations issued after a lent put toward the same target wait behind
/// it: a put into its first and last words, an atomic on a word inside it,
/// a get of a word it writes, a second lent put and a put_signal, all
/// issued while most of the lent put is still in the caller's buffer.
#[test]
fn operations_after_a_lent_put_keep_issue_order() {
    run_job(2, ethernet(Config { progress: ProgressMode::Inline, ..Config::default() }), |ep| {
        const LEN: usize = 4 << 20;
        let region = ep.alloc_symmetric(LEN + 64, Access::ALL).unwrap();
        let key = region.key();
        let first = vec![0x11u8; LEN];
        let second = vec![0x22u8; 1 << 20];
        if ep.rank() == 0 {
            // Prove the range first, so the puts below do not wait for it.
            ep.put(1, key, 0, &vec![0u8; LEN]).unwrap();
            // SAFETY: the buffers outlive the handles, which are waited on.
            let big = unsafe { ep.put_nb_lent(1, key, 0, &first).unwrap() };
            let head = ep.put_nb(1, key, 0, &[0xAA; 8]).unwrap();
            let tail = ep.put_nb(1, key, LEN as u64 - 8, &[0xBB; 8]).unwrap();
            let old = ep.fetch_add_u64(1, key, 1024, 5).unwrap();
            assert_eq!(old, 0x1111_1111_1111_1111, "the atomic ran after the lent put's bytes landed");
            let mut word = [0u8; 8];
            ep.get(1, key, 2048, &mut word).unwrap();
            assert_eq!(word, [0x11; 8], "a get sees the lent put");
            // SAFETY: as above.
            let next = unsafe { ep.put_nb_lent(1, key, 4096, &second).unwrap() };
            let sig = Signal { key, offset: LEN as u64, op: SignalOp::Set, value: 1 };
            let flag = ep.put_signal_nb(1, key, 8, &[0xCC; 8], sig).unwrap();
            for h in [big, head, tail, next, flag] {
                h.wait().unwrap();
            }
        } else {
            ep.wait_until(&region, LEN as u64, mw_core::Cmp::Eq, 1).unwrap();
        }
        ep.barrier().unwrap();
        if ep.rank() == 1 {
            let mut got = vec![0u8; LEN];
            region.read(0, &mut got).unwrap();
            let mut want = first.clone();
            want[..8].fill(0xAA);
            want[LEN - 8..].fill(0xBB);
            want[1024..1032].copy_from_slice(&(0x1111_1111_1111_1111u64 + 5).to_le_bytes());
            want[4096..4096 + second.len()].copy_from_slice(&second);
            want[8..16].fill(0xCC);
            assert!(got == want, "every operation took effect in issue order");
        }
        assert_requests_freed(ep);
        ep.barrier().unwrap();
    });
}

/// Dropping the handle of an unfinished lent put lets go of the buffer:
/// the put still completes (as any dropped operation does) with the bytes
/// the buffer held at the drop, and bytes written into the buffer after the
/// drop never reach the target.
#[test]
fn dropping_a_lent_handle_keeps_the_rest_and_completes() {
    run_job(2, ethernet(Config { progress: ProgressMode::Inline, ..Config::default() }), |ep| {
        const LEN: usize = 16 << 20;
        let region = ep.alloc_symmetric(LEN, Access::ALL).unwrap();
        let key = region.key();
        if ep.rank() == 0 {
            ep.put(1, key, 0, &[0u8; 16]).unwrap();
            ep.put(1, key, LEN as u64 - 16, &[0u8; 16]).unwrap();
            let mut buf = vec![0x11u8; LEN];
            ep.put(1, key, 0, &buf).unwrap(); // proves the range
            buf.fill(0x33);
            // SAFETY: the handle is dropped below, before `buf` changes.
            let h = unsafe { ep.put_nb_lent(1, key, 0, &buf).unwrap() };
            drop(h);
            buf.fill(0xEE);
            ep.put(1, key, 0, &[0x44; 8]).unwrap();
            ep.quiet().unwrap();
        }
        ep.barrier().unwrap();
        if ep.rank() == 1 {
            let mut got = vec![0u8; LEN];
            region.read(0, &mut got).unwrap();
            assert_eq!(&got[..8], &[0x44; 8], "the put after the drop went out, in issue order");
            let late = got.iter().filter(|&&b| b == 0xEE).count();
            assert_eq!(late, 0, "no byte written after the drop reached the target");
            assert!(got[8..].iter().all(|&b| b == 0x33), "the dropped put completed");
        }
        assert_requests_freed(ep);
        ep.barrier().unwrap();
    });
}

/// A lent put that does not fit its region fails and writes nothing; one
/// into a region without the write right likewise.
#[test]
fn a_lent_put_that_does_not_fit_writes_nothing() {
    run_job(2, ethernet(Config::default()), |ep| {
        let region = ep.alloc_symmetric(64 << 10, Access::ALL).unwrap();
        let read_only = ep.alloc_symmetric(64 << 10, Access::READ).unwrap();
        let data = vec![0x5Au8; 64 << 10];
        if ep.rank() == 0 {
            // SAFETY: `data` outlives the handles, which are waited on.
            let over = unsafe { ep.put_nb_lent(1, region.key(), 8, &data).unwrap() };
            assert_eq!(over.wait_timeout(Duration::from_secs(30)), Err(Error::OutOfBounds));
            // SAFETY: as above.
            let denied = unsafe { ep.put_nb_lent(1, read_only.key(), 0, &data).unwrap() };
            assert_eq!(denied.wait(), Err(Error::NoPermission), "no write right");
        }
        ep.barrier().unwrap();
        if ep.rank() == 1 {
            let mut got = vec![0u8; 64 << 10];
            region.read(0, &mut got).unwrap();
            assert!(got.iter().all(|&b| b == 0), "the refused put wrote nothing");
            read_only.read(0, &mut got).unwrap();
            assert!(got.iter().all(|&b| b == 0));
        }
        assert_requests_freed(ep);
        ep.barrier().unwrap();
    });
}

/// Implicit puts (`put_nbi_lent`, `put_signal_nbi_lent`: no handle) are
/// complete when a later `quiet` or `flush` returns, on every path; a
/// failure found only at the target is reported by that call, once.
#[test]
fn implicit_puts_complete_at_quiet_and_report_failures_there() {
    for (name, cfg) in common::transports().into_iter().chain([("ethernet", ethernet(Config::default()))]) {
        run_job(2, cfg, move |ep| {
            const LEN: usize = 1 << 20;
            let region = ep.alloc_symmetric(LEN + 8, Access::ALL).unwrap();
            let key = region.key();
            let data = pattern(3, LEN);
            let small: Vec<[u8; 8]> = (0..64u64).map(|i| (i * 7).to_le_bytes()).collect();
            if ep.rank() == 0 {
                for (i, word) in small.iter().enumerate() {
                    // SAFETY: `small` outlives the quiet below.
                    unsafe { ep.put_nbi_lent(1, key, (LEN - 1024 + 8 * i) as u64, word).unwrap() };
                }
                // SAFETY: `data` outlives the quiet below.
                unsafe { ep.put_nbi_lent(1, key, 0, &data[..LEN - 1024]).unwrap() };
                let sig = Signal { key, offset: LEN as u64, op: SignalOp::Add, value: 1 };
                // SAFETY: as above.
                unsafe { ep.put_signal_nbi_lent(1, key, 0, &data[..64], sig).unwrap() };
                ep.quiet().unwrap();
                // A put that fits no region fails at the target: reported by
                // the next flush toward it, once.
                // SAFETY: `data` outlives the flush below.
                let issued = unsafe { ep.put_nbi_lent(1, key, LEN as u64 - 4, &data[..64]) };
                let flushed = ep.flush(1);
                // Found at issue on the direct same-host path, else at the target.
                let once = matches!(
                    (&issued, &flushed),
                    (Err(Error::OutOfBounds), Ok(())) | (Ok(()), Err(Error::OutOfBounds))
                );
                assert!(once, "{name}: the failure is reported exactly once: {issued:?}, {flushed:?}");
                ep.flush(1).unwrap();
                ep.quiet().unwrap();
            }
            ep.barrier().unwrap();
            if ep.rank() == 1 {
                let mut got = vec![0u8; LEN];
                region.read(0, &mut got).unwrap();
                let mut want = data.clone();
                want[LEN - 512..].fill(0); // nothing is put there
                for (i, word) in small.iter().enumerate() {
                    want[LEN - 1024 + 8 * i..LEN - 1024 + 8 * i + 8].copy_from_slice(word);
                }
                let bad = got.iter().zip(&want).position(|(a, b)| a != b);
                assert!(bad.is_none(), "{name}: implicit puts landed; first difference at {bad:?} of {LEN}");
                assert_eq!(region.load_u64(LEN as u64).unwrap(), 1, "{name}: one signal");
            }
            assert_requests_freed(ep);
            ep.barrier().unwrap();
        });
    }
}
