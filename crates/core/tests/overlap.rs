//! Nonblocking operations over UDP really are nonblocking: `put_nb` and
//! `put_signal_nb` return before the protocol's window lets their data out,
//! and with the progress thread the whole transfer happens while the
//! application computes without calling memwire (issue 38, item 7).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{pattern, run_job, udp};
use mw_core::{Access, Config, ProgressMode, Signal, SignalOp};

const LEN: usize = 16 << 20;

/// Dependent integer work that the optimizer cannot remove.
fn compute_a_little(x: &mut u64) {
    for i in 0..10_000u64 {
        *x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
}

/// Rank 1 makes no progress at all (no progress thread, no call) until rank
/// 0's `put_nb` has returned, so no acknowledgement can open the window
/// meanwhile: a call that waited for window room would never return, and
/// rank 1 would give up waiting for the flag.
#[test]
fn put_nb_returns_before_the_window_opens() {
    for signal in [false, true] {
        let returned = Arc::new(AtomicBool::new(false));
        let flag = returned.clone();
        let cfg = udp(Config { progress: ProgressMode::Inline, ..Config::default() });
        run_job(2, cfg, move |ep| {
            let region = ep.alloc_symmetric(LEN + 8, Access::ALL).unwrap();
            let key = region.key();
            let data = pattern(7, LEN);
            // A first put proves the range fits (that proof is a round trip).
            if ep.rank() == 0 {
                ep.put(1, key, 0, &[0u8; 8]).unwrap();
                ep.put(1, key, 0, &vec![0u8; LEN]).unwrap();
            }
            ep.barrier().unwrap();
            if ep.rank() == 0 {
                let sig = Signal { key, offset: LEN as u64, op: SignalOp::Set, value: 1 };
                let h = if signal {
                    ep.put_signal_nb(1, key, 0, &data, sig).unwrap()
                } else {
                    ep.put_nb(1, key, 0, &data).unwrap()
                };
                flag.store(true, Ordering::Release);
                h.wait().unwrap();
            } else {
                let deadline = Instant::now() + Duration::from_secs(30);
                while !flag.load(Ordering::Acquire) {
                    assert!(Instant::now() < deadline, "put_nb waited for the window (signal: {signal})");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            ep.barrier().unwrap();
            if ep.rank() == 1 {
                let mut got = vec![0u8; LEN];
                region.read(0, &mut got).unwrap();
                assert!(got == data, "the put's data arrived intact (signal: {signal})");
                if signal {
                    assert_eq!(region.load_u64(LEN as u64).unwrap(), 1);
                }
            }
            ep.barrier().unwrap();
        });
        returned.store(false, Ordering::Release);
    }
}

/// With the progress thread, and in the default mode (whose watchdog takes
/// over a transfer the application left running), a 16 MiB put completes
/// while its initiator computes without a single call into memwire: all of
/// the transfer is hidden behind the computation.
#[test]
fn put_nb_completes_during_compute_with_background_progress() {
    for progress in [ProgressMode::Thread, ProgressMode::Auto] {
        eprintln!("progress {progress:?}");
        put_nb_completes_during_compute(progress);
    }
}

fn put_nb_completes_during_compute(progress: ProgressMode) {
    let cfg = udp(Config { progress, max_datagram: Some(1472), loopback_datagram: 1472, ..Config::default() });
    run_job(2, cfg, |ep| {
        let region = ep.alloc_symmetric(LEN, Access::ALL).unwrap();
        let key = region.key();
        let data = pattern(9, LEN);
        if ep.rank() == 0 {
            ep.put(1, key, 0, &[0u8; 8]).unwrap();
            ep.put(1, key, LEN as u64 - 8, &[0u8; 8]).unwrap();
        }
        ep.barrier().unwrap();
        if ep.rank() == 0 {
            let h = ep.put_nb(1, key, 0, &data).unwrap();
            // The harness fails the test if this never ends.
            let mut x = 1u64;
            while !h.is_complete() {
                compute_a_little(&mut x);
            }
            h.wait().unwrap();
        }
        ep.barrier().unwrap();
        if ep.rank() == 1 {
            let mut got = vec![0u8; LEN];
            region.read(0, &mut got).unwrap();
            assert!(got == data);
        }
        ep.barrier().unwrap();
    });
}
