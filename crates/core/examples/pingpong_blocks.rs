//! Compares the 8-byte same-host ping-pongs of put_signal, send_recv and am
//! in one job, in interleaved blocks, so that the host's drift (where the
//! hypervisor puts the two vCPUs this minute) hits every operation alike.
//! `mwbench` runs each operation once for all its iterations, and on a
//! shared VM a run's ratios move by more than the changes being measured;
//! here every round runs a block of each operation, and the ratios are
//! taken within a round.
//!
//! ```sh
//! cargo run --release --example pingpong_blocks -p mw-core -- [ROUNDS] [BLOCK]
//! ```
//!
//! Operations: `put_signal`, `line` (one cache line bounced between the
//! threads: the floor), `ring` (8-byte records through two bare
//! `mw_transport` rings: no endpoint, lock, matching or credit),
//! `send_recv` and `am` (the target waits in a barrier, as in `mwbench`).
//! `PB_OPS=put_signal,am` runs only those (the others print `NaN`).
//!
//! Prints, per operation, the median over rounds of the block's mean half
//! round trip, and the median of the per-round ratios against put_signal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

mod common;

use common::LocalJob;
use mw_core::{Access, Cmp, Config, Endpoint, Signal, SignalOp};
use mw_transport::shm::ring::ring_len;
use mw_transport::shm::{Consumer, Producer, RingView, Segment};

const OPS: [&str; 5] = ["put_signal", "line", "ring", "send_recv", "am"];
/// Data bytes of each raw ring (what an endpoint gives an inbound ring).
const RING_CAP: usize = 1 << 20;

/// Starts a 2-rank job as two threads of this process; each runs `body`.
fn run_pair<R: Send>(body: impl Fn(&Endpoint) -> R + Sync) -> Vec<R> {
    let job = LocalJob::new(2);
    std::thread::scope(|scope| {
        let (job, body) = (&job, &body);
        let threads: Vec<_> = (0..2u32)
            .map(|rank| {
                scope.spawn(move || {
                    let ep = job.endpoint(rank, Config::from_env().expect("MW_* settings"));
                    let result = body(&ep);
                    ep.finalize().expect("finalize");
                    result
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("rank thread")).collect()
    })
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200);
    let block: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let start = Barrier::new(2);
    // Two raw rings (`ring`: no endpoint, lock, matching or credit) and a
    // word bounced between the threads (`line`: the cache-line floor).
    let seg = Arc::new(Segment::create("pingpong-blocks", 2 * ring_len(RING_CAP)).expect("memory file"));
    let views: Vec<RingView> =
        (0..2).map(|i| RingView::new(Arc::clone(&seg), i * ring_len(RING_CAP), RING_CAP).expect("ring")).collect();
    for view in &views {
        view.init_salt();
    }
    let ends: Vec<Mutex<Option<(Producer, Consumer)>>> = vec![
        Mutex::new(Some(Producer::paired(views[0].clone(), views[1].clone()))),
        Mutex::new(Some(Producer::paired(views[1].clone(), views[0].clone()))),
    ];
    let line = AtomicU64::new(0);
    let results = run_pair(|ep| {
        let rank = ep.rank();
        let peer = 1 - rank;
        let region = ep.alloc_symmetric(128, Access::ALL).expect("alloc");
        let key = region.key();
        ep.register_handler(1, |ctx, _m| {
            let _ = ctx.reply(&[], &[4u8; 8]);
        })
        .expect("register");
        ep.barrier().expect("barrier");
        start.wait();
        let data = [3u8; 8];
        let mut buf = [0u8; 8];
        let mut reply = mw_core::AmReplyData::default();
        let mut signal = 0u64;
        let (mut outbox, mut inbox) = ends[rank as usize].lock().expect("ring ends").take().expect("once");
        let mut bounce = 0u64;
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); OPS.len()];
        for _ in 0..rounds {
            for (i, op) in OPS.iter().enumerate() {
                if std::env::var("PB_OPS").is_ok_and(|o| !o.split(',').any(|x| x == *op)) {
                    times[i].push(f64::NAN);
                    continue;
                }
                let t0 = Instant::now();
                match *op {
                    "put_signal" => {
                        for _ in 0..block {
                            signal += 1;
                            let (mine, theirs) = if rank == 0 { (8, 0) } else { (0, 8) };
                            if rank == 1 {
                                ep.wait_until(&region, mine, Cmp::Ge, signal).expect("wait");
                            }
                            let sig = Signal { key, offset: theirs, op: SignalOp::Set, value: signal };
                            drop(ep.put_signal_nb(peer, key, 64, &data, sig).expect("put_signal"));
                            if rank == 0 {
                                ep.wait_until(&region, mine, Cmp::Ge, signal).expect("wait");
                            }
                        }
                    }
                    "line" => {
                        for _ in 0..block {
                            bounce += 2;
                            if rank == 0 {
                                line.store(bounce + 1, Ordering::Release);
                            }
                            let wait = if rank == 0 { bounce + 2 } else { bounce + 1 };
                            while line.load(Ordering::Acquire) < wait {
                                std::hint::spin_loop();
                            }
                            if rank == 1 {
                                line.store(bounce + 2, Ordering::Release);
                            }
                        }
                    }
                    "ring" => {
                        for _ in 0..block {
                            if rank == 0 {
                                while outbox.push(&[&data]).is_err() {}
                            }
                            while !inbox.pop(|m| buf.copy_from_slice(m)).expect("intact ring") {
                                std::hint::spin_loop();
                            }
                            if rank == 1 {
                                while outbox.push(&[&buf]).is_err() {}
                            }
                        }
                    }
                    "send_recv" => {
                        for _ in 0..block {
                            if rank == 0 {
                                ep.send(1, 1, &data).expect("send");
                                ep.recv(1, 1, &mut buf).expect("recv");
                            } else {
                                ep.recv(0, 1, &mut buf).expect("recv");
                                ep.send(0, 1, &data).expect("send");
                            }
                        }
                    }
                    _ => {
                        if rank == 0 {
                            for _ in 0..block {
                                ep.am_request_into(1, 1, &[], &data, &mut reply).expect("am");
                            }
                        }
                        // The target serves requests while it waits here.
                        ep.barrier().expect("barrier");
                    }
                }
                times[i].push(t0.elapsed().as_secs_f64() * 1e6 / (2 * block) as f64);
            }
        }
        ep.quiet().expect("quiet");
        ep.barrier().expect("barrier");
        times
    });
    let mut times = results.into_iter().next().expect("rank 0");
    let ratios: Vec<Vec<f64>> =
        (1..OPS.len()).map(|i| times[i].iter().zip(&times[0]).map(|(t, base)| t / base).collect()).collect();
    for (i, op) in OPS.iter().enumerate() {
        let mut line = format!("{op:>10}: {:.4} us", median(&mut times[i]));
        if i > 0 {
            line += &format!("  ratio {:.3}", median(&mut ratios[i - 1].clone()));
        }
        println!("{line}");
    }
}
