//! Ping-pong latency of memwire's operations (`--bench pingpong`): every
//! point reports half the round trip, per iteration, as median and p99.
//!
//! put_signal, send_recv and am bounce a message between the two ranks;
//! get, fetch_add, swap and compare_swap are round trips by nature (rank 0
//! issues them back to back, rank 1 serves). Owns those measurements; must
//! not print (the runner emits the rows).

use std::sync::Arc;
use std::time::Instant;

use mw_core::{Access, Cmp, Endpoint, Signal, SignalOp};

use crate::harness::Job;
use crate::row::Row;

/// Untimed iterations before the timed ones.
pub fn warmup(iters: usize) -> usize {
    (iters / 10).clamp(20, 1000)
}

/// Half round trips of `iters` calls of `op` after a warm-up, timed at rank 0.
fn half_round_trips(iters: usize, mut op: impl FnMut(u64)) -> Vec<f64> {
    let total = iters + warmup(iters);
    let mut samples = Vec::with_capacity(iters);
    for i in 0..total {
        let t0 = Instant::now();
        op(i as u64);
        if i >= total - iters {
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
    }
    samples
}

fn row(job: &Job, op: &str, transport: &str, size: usize, samples: Option<Vec<f64>>) -> Vec<Row> {
    samples.map(|s| Row::latency("pingpong", op, transport, size, s).launched(job.launch())).into_iter().collect()
}

/// Measures memwire op `op` (a pingpong op name) at `size` bytes.
pub fn measure(job: &Job, op: &str, transport: &'static str, size: usize, iters: usize) -> Vec<Row> {
    if let Some(members) = crate::plan::group_members(op) {
        return interleaved(job, members.to_vec(), transport, size, iters);
    }
    match op {
        "put_signal" => row(job, op, transport, size, job.pair(transport, None, move |ep| put_signal(ep, size, iters))),
        "put_signal_auth" => put_signal_pair(job, "put_signal_auth", size, iters, |c, on| c.auth = Some(on)),
        "put_signal_crc" => put_signal_pair(job, "put_signal_crc", size, iters, |c, on| {
            c.auth = Some(false);
            c.checksum = Some(on);
        }),
        "get" => row(job, op, transport, size, job.pair(transport, None, move |ep| get(ep, size, iters))),
        "fetch_add" | "swap" | "compare_swap" => {
            let name: &'static str = match op {
                "fetch_add" => "fetch_add",
                "swap" => "swap",
                _ => "compare_swap",
            };
            row(job, op, transport, 8, job.pair(transport, None, move |ep| atomic(ep, name, iters)))
        }
        "send_recv" => row(job, op, transport, size, job.pair(transport, None, move |ep| send_recv(ep, size, iters))),
        "am" => row(job, op, transport, size, job.pair(transport, None, move |ep| am(ep, size, iters))),
        other => unreachable!("pingpong has no memwire op {other} (checked in the plan)"),
    }
}

/// put_signal ping-pong: each side puts `size` bytes and sets the other's
/// signal word; the other waits on it.
fn put_signal(ep: &Endpoint, size: usize, iters: usize) -> Vec<f64> {
    let region = ep.alloc_symmetric(64 + size.max(8), Access::ALL).expect("alloc");
    let key = region.key();
    let data = vec![3u8; size];
    let total = (iters + warmup(iters)) as u64;
    let mut samples = Vec::with_capacity(iters);
    for round in 1..=total {
        if ep.rank() == 0 {
            let t0 = Instant::now();
            let sig = Signal { key, offset: 0, op: SignalOp::Set, value: round };
            drop(ep.put_signal_nb(1, key, 64, &data, sig).expect("put_signal"));
            ep.wait_until(&region, 8, Cmp::Ge, round).expect("wait");
            if round > total - iters as u64 {
                samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
            }
        } else if ep.rank() == 1 {
            ep.wait_until(&region, 0, Cmp::Ge, round).expect("wait");
            let sig = Signal { key, offset: 8, op: SignalOp::Set, value: round };
            drop(ep.put_signal_nb(0, key, 64, &data, sig).expect("put_signal"));
        }
    }
    ep.quiet().expect("quiet");
    ep.barrier().expect("barrier");
    samples
}

/// put_signal with a packet trailer forced on (`put_signal_auth`: the MAC;
/// `put_signal_crc`: the CRC32C checksum, authentication off) against
/// forced off (`put_signal`), over UDP, in alternating blocks of a quarter
/// of the iterations each, so that load drifting on a shared machine hits
/// both alike. `set(config, on)` forces the trailer on or off.
fn put_signal_pair(
    job: &Job,
    op: &'static str,
    size: usize,
    iters: usize,
    set: fn(&mut mw_core::Config, bool),
) -> Vec<Row> {
    const BLOCKS: usize = 4;
    let per_block = iters.div_ceil(BLOCKS);
    let (mut plain, mut with) = (Vec::new(), Vec::new());
    for _ in 0..BLOCKS {
        for (forced, into) in [(false, &mut plain), (true, &mut with)] {
            let adjust: crate::harness::Adjust = Arc::new(move |c| set(c, forced));
            let samples = job.pair("udp", Some(adjust), move |ep| put_signal(ep, size, per_block));
            into.extend(samples.expect("threads report"));
        }
    }
    let mut rows = row(job, "put_signal", "udp", size, Some(plain));
    rows.extend(row(job, op, "udp", size, Some(with)));
    rows
}

/// Ping-pongs of `ops` (of put_signal, send_recv and am) in one job, in
/// `BLOCKS` alternating blocks of an `iters / BLOCKS` share each (the
/// order rotated block by block, each with its own warm-up), so that where
/// the host places the two vCPUs, which a hypervisor may change during a
/// run, weighs on each op alike (plan: `INTERLEAVED`). One row per
/// op, of all its blocks' samples.
fn interleaved(job: &Job, ops: Vec<&'static str>, transport: &'static str, size: usize, iters: usize) -> Vec<Row> {
    const BLOCKS: usize = 8;
    let per_block = iters.div_ceil(BLOCKS);
    let names = ops.clone();
    let samples = job.pair(transport, None, move |ep| {
        let mut all = vec![Vec::with_capacity(per_block * BLOCKS); ops.len()];
        for block in 0..BLOCKS {
            for k in 0..ops.len() {
                let i = (block + k) % ops.len();
                let block_samples = match ops[i] {
                    "put_signal" => put_signal(ep, size, per_block),
                    "send_recv" => send_recv(ep, size, per_block),
                    "am" => am(ep, size, per_block),
                    other => unreachable!("{other} is not interleaved (plan: INTERLEAVED)"),
                };
                all[i].extend(block_samples);
            }
        }
        all
    });
    match samples {
        Some(all) => names.iter().zip(all).flat_map(|(op, s)| row(job, op, transport, size, Some(s))).collect(),
        None => Vec::new(),
    }
}

/// Round trip of a fetching 64-bit atomic (reported as half).
fn atomic(ep: &Endpoint, op: &str, iters: usize) -> Vec<f64> {
    let region = ep.alloc_symmetric(64, Access::ALL).expect("alloc");
    let key = region.key();
    let mut samples = Vec::new();
    if ep.rank() == 0 {
        samples = half_round_trips(iters, |i| {
            let _ = match op {
                "fetch_add" => ep.fetch_add_u64(1, key, 0, 1),
                "swap" => ep.swap_u64(1, key, 0, i),
                // Always succeeds: the word holds the previous `i`.
                _ => ep.compare_swap_u64(1, key, 8, i, i + 1),
            }
            .expect("atomic");
        });
    }
    ep.barrier().expect("barrier");
    samples
}

/// Round trip of a get of `size` bytes (reported as half).
fn get(ep: &Endpoint, size: usize, iters: usize) -> Vec<f64> {
    let region = ep.alloc_symmetric(size.max(8), Access::ALL).expect("alloc");
    let key = region.key();
    let mut out = vec![0u8; size];
    let mut samples = Vec::new();
    if ep.rank() == 0 {
        samples = half_round_trips(iters, |_| ep.get(1, key, 0, &mut out).expect("get"));
    }
    ep.barrier().expect("barrier");
    samples
}

/// Tagged send/recv ping-pong: blocking `send`, blocking `recv` back.
fn send_recv(ep: &Endpoint, size: usize, iters: usize) -> Vec<f64> {
    let data = vec![3u8; size];
    let mut buf = vec![0u8; size];
    let mut samples = Vec::new();
    if ep.rank() == 0 {
        samples = half_round_trips(iters, |_| {
            ep.send(1, 1, &data).expect("send");
            ep.recv(1, 1, &mut buf).expect("recv");
        });
    } else if ep.rank() == 1 {
        for _ in 0..iters + warmup(iters) {
            ep.recv(0, 1, &mut buf).expect("recv");
            ep.send(0, 1, &data).expect("send");
        }
    }
    ep.barrier().expect("barrier");
    samples
}

/// Active-message round trip: the handler at rank 1 replies with a payload
/// of the same size.
fn am(ep: &Endpoint, size: usize, iters: usize) -> Vec<f64> {
    let reply = vec![4u8; size];
    ep.register_handler(1, move |ctx, _m| {
        let _ = ctx.reply(&[], &reply);
    })
    .expect("register");
    ep.barrier().expect("barrier");
    let data = vec![3u8; size];
    let mut samples = Vec::new();
    if ep.rank() == 0 {
        // The reply's buffers are reused, as a loop of requests would.
        let mut r = mw_core::AmReplyData::default();
        samples = half_round_trips(iters, |_| {
            ep.am_request_into(1, 1, &[], &data, &mut r).expect("am_request");
            assert_eq!(r.payload.len(), size, "reply payload");
        });
    }
    ep.barrier().expect("barrier");
    ep.unregister_handler(1);
    samples
}
