//! Operations to one target take effect in issue order, gets included: a
//! get issued before a put into its range returns the bytes from before the
//! put, whatever the path (UDP with its per-peer get window, under loss and
//! reordering; a same-host ring and direct access; this rank itself).
//!
//! Rank 0 issues seeded random interleavings of nonblocking gets, puts,
//! atomics and put_signals (with fences sprinkled in, as a user following
//! OpenSHMEM would write them) to one target, keeping them all in flight
//! at once; a sequential model of the target's memory, applied in issue
//! order, says what every get and fetching atomic must return and what the
//! memory must hold at the end. A failure prints the seed.

mod common;

use common::{lossy, run_job, udp};
use mw_core::{Access, AtomicOp, AtomicWidth, Config, Handle, RegionKey, ShmCopy, Signal, SignalOp};

const REGION: usize = 1 << 20;
/// The hot area at the region's start.
const HOT: usize = 4096;
/// Operations per batch (all in flight at once), batches per seed.
const OPS: usize = 48;
const BATCHES: usize = 3;

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug)]
enum Op {
    Put { offset: u64, data: Vec<u8> },
    Get { offset: u64, len: usize, expect: Vec<u8> },
    Add { offset: u64, value: u64, fetch: Option<u64> },
    PutSignal { offset: u64, data: Vec<u8>, signal: u64 },
    Fence,
}

/// A length: mostly small, sometimes one or several datagrams, now and
/// then large enough to wait in the get window.
fn length(rng: &mut Rng) -> usize {
    match rng.below(10) {
        0..=3 => 1 + rng.below(64) as usize,
        4..=6 => 1 + rng.below(8192) as usize,
        7 | 8 => 8192 + rng.below(128 << 10) as usize,
        _ => (256 << 10) + rng.below(768 << 10) as usize,
    }
}

/// Half the ranges fall in a small hot area, so that operations close in
/// issue order overlap (and a lost datagram leaves a get and a later put
/// into its bytes to be delivered together once the gap is filled).
fn range(rng: &mut Rng) -> (u64, usize) {
    if rng.below(2) == 0 {
        let len = 1 + rng.below(HOT as u64 / 2) as usize;
        return (rng.below((HOT - len) as u64 + 1), len);
    }
    let len = length(rng);
    (rng.below((REGION - len) as u64 + 1), len)
}

fn word(model: &[u8], at: u64) -> u64 {
    u64::from_le_bytes(model[at as usize..at as usize + 8].try_into().unwrap())
}

fn set_word(model: &mut [u8], at: u64, value: u64) {
    model[at as usize..at as usize + 8].copy_from_slice(&value.to_le_bytes());
}

/// A batch of operations and their results under the sequential model.
fn plan(rng: &mut Rng, model: &mut [u8]) -> Vec<Op> {
    let mut ops = Vec::with_capacity(OPS);
    while ops.len() < OPS {
        let op = match rng.below(20) {
            0..=6 => {
                let (offset, len) = range(rng);
                let fill = rng.next() as u8;
                let data: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8).wrapping_mul(7) | 1).collect();
                model[offset as usize..offset as usize + len].copy_from_slice(&data);
                Op::Put { offset, data }
            }
            7..=12 => {
                let (offset, len) = range(rng);
                Op::Get { offset, len, expect: model[offset as usize..offset as usize + len].to_vec() }
            }
            13..=15 => {
                let offset = rng.below(HOT as u64 / 8) * 8;
                let value = rng.below(1000) + 1;
                let old = word(model, offset);
                set_word(model, offset, old.wrapping_add(value));
                Op::Add { offset, value, fetch: (rng.below(2) == 0).then_some(old) }
            }
            16 | 17 => {
                let (offset, len) = range(rng);
                let data: Vec<u8> = (0..len).map(|i| (i as u8) ^ 0x5c).collect();
                model[offset as usize..offset as usize + len].copy_from_slice(&data);
                let signal = rng.below(HOT as u64 / 8) * 8;
                let old = word(model, signal);
                set_word(model, signal, old.wrapping_add(1));
                Op::PutSignal { offset, data, signal }
            }
            _ => Op::Fence,
        };
        ops.push(op);
    }
    ops
}

enum Pending<'a> {
    Done(Handle<'a>),
    Value(Handle<'a>, u64),
}

fn run_batch(ep: &mw_core::Endpoint, rank: u32, key: RegionKey, ops: &[Op], seed: u64, what: &str) {
    let mut outs: Vec<Vec<u8>> = ops
        .iter()
        .map(|op| match op {
            Op::Get { len, .. } => vec![0u8; *len],
            _ => Vec::new(),
        })
        .collect();
    let mut pending = Vec::new();
    for (op, out) in ops.iter().zip(outs.iter_mut()) {
        let issued = match op {
            Op::Put { offset, data } => Pending::Done(ep.put_nb(rank, key, *offset, data).unwrap()),
            Op::Get { offset, .. } => Pending::Done(ep.get_nb(rank, key, *offset, out).unwrap()),
            Op::Add { offset, value, fetch } => {
                let h = ep.atomic_nb(rank, key, *offset, AtomicOp::Add, AtomicWidth::U64, *value, 0, fetch.is_some());
                match fetch {
                    Some(old) => Pending::Value(h.unwrap(), *old),
                    None => Pending::Done(h.unwrap()),
                }
            }
            Op::PutSignal { offset, data, signal } => {
                let signal = Signal { key, offset: *signal, op: SignalOp::Add, value: 1 };
                Pending::Done(ep.put_signal_nb(rank, key, *offset, data, signal).unwrap())
            }
            Op::Fence => {
                ep.fence();
                continue;
            }
        };
        pending.push(issued);
    }
    for (i, p) in pending.into_iter().enumerate() {
        match p {
            Pending::Done(h) => h.wait().unwrap_or_else(|e| panic!("{what} seed {seed}: operation {i} failed: {e}")),
            Pending::Value(h, old) => {
                let got = h.wait_value().unwrap();
                assert_eq!(got, old, "{what} seed {seed}: a fetching add saw another order");
            }
        }
    }
    for (i, (op, out)) in ops.iter().zip(&outs).enumerate() {
        if let Op::Get { offset, len, expect } = op {
            let first = out.iter().zip(expect).position(|(a, b)| a != b);
            assert!(
                first.is_none(),
                "{what} seed {seed}: get {i} of {len} bytes at {offset} differs from the issue-order model at byte {:?} \
                 (it saw an operation issued after it, or missed one before it)",
                first
            );
        }
    }
}

fn check_order(what: &'static str, config: Config, seeds: &'static [u64]) {
    run_job(2, config, move |ep| {
        let region = ep.alloc_symmetric(REGION, Access::ALL).unwrap();
        let key = region.key();
        ep.barrier().unwrap();
        if ep.rank() == 0 {
            for &seed in seeds {
                for rank in [1, 0] {
                    let what = if rank == 0 { format!("{what}, to self") } else { format!("{what}, to rank 1") };
                    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
                    let mut model = vec![0u8; REGION];
                    ep.put(rank, key, 0, &model).unwrap();
                    for _ in 0..BATCHES {
                        let ops = plan(&mut rng, &mut model);
                        run_batch(ep, rank, key, &ops, seed, &what);
                    }
                    let mut now = vec![0u8; REGION];
                    ep.get(rank, key, 0, &mut now).unwrap();
                    let first = now.iter().zip(&model).position(|(a, b)| a != b);
                    assert!(first.is_none(), "{what} seed {seed}: final memory differs from the model at {first:?}");
                }
            }
        }
        ep.barrier().unwrap();
    });
}

#[test]
fn operations_take_effect_in_issue_order_over_udp() {
    check_order("udp", udp(Config::default()), &[1, 2, 3]);
}

#[test]
fn operations_take_effect_in_issue_order_over_udp_under_loss() {
    check_order("udp lossy", lossy(0.2, 0.05, 0.2, 39), &[4, 5, 8, 9, 10]);
}

#[test]
fn operations_take_effect_in_issue_order_over_shared_memory() {
    check_order("shm", Config::default(), &[6, 7]);
    check_order("shm two-copy", Config { shm_copy: ShmCopy::Rings, ..Config::default() }, &[11]);
}

/// The issue's reproduction: a 1 MiB get, a fence, a put into its range;
/// the get must return the bytes from before the put, every time.
#[test]
fn a_get_fenced_before_a_put_does_not_see_it() {
    for (what, config) in [("udp", udp(Config::default())), ("udp lossy", lossy(0.2, 0.05, 0.2, 40))] {
        run_job(2, config, move |ep| {
            let region = ep.alloc_symmetric(REGION, Access::ALL).unwrap();
            let key = region.key();
            region.write(0, &vec![1u8; REGION]).unwrap();
            ep.barrier().unwrap();
            if ep.rank() == 0 {
                for round in 0..10u8 {
                    let mut out = vec![0u8; REGION];
                    let before = vec![round.wrapping_add(1); REGION];
                    let after = vec![round.wrapping_add(2); REGION];
                    let get = ep.get_nb(1, key, 0, &mut out).unwrap();
                    ep.fence();
                    let put = ep.put_nb(1, key, 0, &after).unwrap();
                    get.wait().unwrap();
                    put.wait().unwrap();
                    assert!(out == before, "{what} round {round}: the get saw the put fenced after it");
                }
            }
            ep.barrier().unwrap();
        });
    }
}
