//! Counts the instructions of one same-host 8-byte round trip, reproducibly
//! (the wall clock on a shared VM is not): two endpoints in one process,
//! driven in lockstep by one thread, so nothing spins or waits and
//! `valgrind --tool=callgrind` sees exactly the software path. Run it at two
//! iteration counts and subtract, which cancels the setup:
//!
//! ```sh
//! cargo build --release --example cost_probe -p mw-core
//! for n in 1000 2000; do
//!     valgrind --tool=callgrind --callgrind-out-file=cg.$n target/release/examples/cost_probe $n am
//! done
//! # instructions per round trip = (total of cg.2000 - total of cg.1000) / 1000
//! ```
//!
//! Operations: `send_recv` (send, recv back), `am` (request, handler,
//! reply), `put_signal` (put_signal each way, wait_until on the signal).
//! Lockstep means the nonblocking `am_request_nb` plus an explicit
//! `progress` of the target, where a real job uses `am_request`.

mod common;

use common::LocalJob;
use mw_core::{Access, Cmp, Config, Endpoint, Signal, SignalOp};

/// Starts a 2-rank job in this process; returns rank 0's and rank 1's endpoints.
fn start_pair() -> (Endpoint, Endpoint) {
    let job = LocalJob::new(2);
    // Both ranks must join the rendezvous at once: one thread each.
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(|| job.endpoint(0, Config::default()));
        let b = scope.spawn(|| job.endpoint(1, Config::default()));
        (a.join().expect("rank 0"), b.join().expect("rank 1"))
    });
    (a, b)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let iters: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let op = args.next().unwrap_or_else(|| "send_recv".to_owned());
    if !["send_recv", "am", "put_signal"].contains(&op.as_str()) {
        eprintln!("usage: cost_probe [ITERATIONS] [send_recv|am|put_signal]");
        std::process::exit(2);
    }
    let (a, b) = start_pair();
    let data = [3u8; 8];
    let mut started = std::time::Instant::now();
    let mut buf = [0u8; 8];
    match op.as_str() {
        "send_recv" => {
            for _ in 0..iters {
                a.send(1, 5, &data).expect("send");
                b.recv(0, 5, &mut buf).expect("recv");
                b.send(0, 5, &data).expect("send");
                a.recv(1, 5, &mut buf).expect("recv");
            }
        }
        "am" => {
            b.register_handler(1, |ctx, _m| {
                let _ = ctx.reply(&[], &[4u8; 8]);
            })
            .expect("register");
            let mut reply = mw_core::AmReplyData::default();
            for _ in 0..iters {
                let handle = a.am_request_nb(1, 1, &[], &data).expect("am_request");
                b.progress();
                handle.wait_into(&mut reply).expect("reply");
                assert_eq!(reply.payload.len(), 8);
            }
        }
        _ => {
            let (ra, rb) =
                (a.alloc_shared(128, Access::ALL).expect("alloc"), b.alloc_shared(128, Access::ALL).expect("alloc"));
            // Let each side's directory entry reach the other.
            std::thread::sleep(std::time::Duration::from_millis(50));
            let (ka, kb) = (ra.key(), rb.key());
            started = std::time::Instant::now(); // after the setup's sleep
            for round in 1..=iters as u64 {
                let to_b = Signal { key: kb, offset: 0, op: SignalOp::Set, value: round };
                a.put_signal_nb(1, kb, 64, &data, to_b).expect("put_signal").wait().expect("put_signal");
                b.wait_until(&rb, 0, Cmp::Ge, round).expect("wait_until");
                let to_a = Signal { key: ka, offset: 8, op: SignalOp::Set, value: round };
                b.put_signal_nb(0, ka, 64, &data, to_a).expect("put_signal").wait().expect("put_signal");
                a.wait_until(&ra, 8, Cmp::Ge, round).expect("wait_until");
            }
        }
    }
    // The wall clock too: lockstep, so this is the software alone (no
    // cache line crosses cores), a steadier A/B measure than a ping-pong.
    let per_trip = started.elapsed().as_secs_f64() * 1e9 / iters as f64;
    println!("cost_probe: {iters} round trips of {op}, {per_trip:.1} ns each (wall clock)");
    // Skips the orderly finalize (a barrier between two endpoints that this
    // one thread would have to drive in turn): the counts are what matter.
    std::process::exit(0);
}
