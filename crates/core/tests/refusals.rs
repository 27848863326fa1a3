//! Every operation either happens or fails loudly: an operation the target
//! refuses, for any reason, fails the initiator's handle; none completes as
//! a success without having happened, and none waits forever.
//!
//! The public API never builds a malformed message (it normalizes what the
//! docs call ignored), so the malformed ones are crafted by hand
//! (`mw_core::fuzzing::send_crafted`): every operation kind an initiator
//! sends, each mutated in every header byte but its request id (to values
//! that make it unparseable), cut short, lengthened, and given unknown
//! opcodes; plus well-formed operations the target refuses (unknown key,
//! out of bounds, no permission, misaligned, bad stride, unset register,
//! unknown FIFO). Each goes over UDP, through a same-host ring, and to the
//! sending rank itself; each must fail its handle, and afterwards the
//! target's memory must be as it was. The same messages unmutated must
//! succeed, so a failure is the target's answer, not the harness's.

mod common;

use std::time::{Duration, Instant};

use common::{run_job, udp};
use mw_core::fuzzing::send_crafted;
use mw_core::{Access, AtomicOp, AtomicWidth, Config, Endpoint, RegionKey};
use mw_wire::op::{self, IovSegments, MaskedBlock, OpCode, OpRepr, SignalOp, Unparsed};

const REGION: usize = 4096;

/// A crafted operation: its bytes for a request id, and whether it
/// completes on delivery (puts, non-fetching atomics) or only on a reply.
struct Crafted {
    name: String,
    bytes: Vec<u8>,
    on_ack: bool,
}

impl Crafted {
    fn with_req(&self, req: u32) -> Vec<u8> {
        let mut bytes = self.bytes.clone();
        if bytes.len() >= 8 {
            let field = if bytes[0] == OpCode::RndvRts as u8 { 24..28 } else { 4..8 };
            if bytes.len() >= field.end {
                bytes[field].copy_from_slice(&req.to_le_bytes());
            }
        }
        bytes
    }
}

fn emit(repr: &OpRepr<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf);
    buf
}

/// One well-formed message of every operation kind an initiator sends
/// that a target with regions `all` (every right) and `read` (read-only)
/// executes; `req` is a placeholder the sender overwrites.
fn valid_ops(all: u64) -> Vec<Crafted> {
    const REQ: u32 = 0x5a5a;
    let data = [0x42u8; 256];
    let mut ops = vec![
        ("put", OpRepr::Put(op::Put { req: REQ, key: all, offset: 64, body: &data[..100] }), true),
        ("put-inline", OpRepr::PutInline(op::PutInline { req: REQ, key: all, offset: 8, body: &data[..8] }), true),
        ("get", OpRepr::GetRequest(op::GetRequest { req: REQ, key: all, offset: 0, len: 64 }), false),
        (
            "put-signal",
            OpRepr::PutSignal(op::PutSignal {
                req: REQ,
                key: all,
                offset: 512,
                signal_key: all,
                signal_offset: 1024,
                signal_op: SignalOp::Add,
                signal_value: 1,
                body: &data[..40],
            }),
            true,
        ),
        (
            "put-strided",
            OpRepr::PutStrided(op::PutStrided {
                req: REQ,
                key: all,
                offset: 2048,
                elem_size: 4,
                count: 4,
                stride: 8,
                body: &data[..16],
            }),
            true,
        ),
        (
            "get-strided",
            OpRepr::GetStridedRequest(op::GetStridedRequest {
                req: REQ,
                key: all,
                offset: 0,
                elem_size: 4,
                count: 4,
                stride: 16,
            }),
            false,
        ),
        (
            "put-iov",
            OpRepr::PutIov(op::PutIov {
                req: REQ,
                key: all,
                segments: IovSegments::from_pairs(&[(3000, 5), (3100, 7)]),
                body: &data[..12],
            }),
            true,
        ),
        (
            "put-masked",
            OpRepr::PutMasked(op::PutMasked {
                req: REQ,
                key: all,
                offset: 3200,
                block: MaskedBlock::B64,
                mask: 0b1010,
                body: &data[..64],
            }),
            true,
        ),
    ];
    let mut atomics = Vec::new();
    for op in [AtomicOp::Add, AtomicOp::CompareSwap, AtomicOp::Swap, AtomicOp::Xor, AtomicOp::Load, AtomicOp::Store] {
        for width in [AtomicWidth::U32, AtomicWidth::U64] {
            for fetch in [false, true] {
                if op == AtomicOp::Load && !fetch {
                    continue;
                }
                let operand = if op == AtomicOp::Load { 0 } else { 3 };
                let compare = if op == AtomicOp::CompareSwap { 5 } else { 0 };
                let repr = OpRepr::AtomicRequest(op::AtomicRequest {
                    req: REQ,
                    key: all,
                    offset: 1536,
                    op,
                    width,
                    fetch,
                    operand,
                    compare,
                });
                atomics.push((format!("atomic {}/u{} fetch={fetch}", op.name(), width.bytes() * 8), repr, !fetch));
            }
        }
    }
    let mut out: Vec<Crafted> = ops
        .drain(..)
        .map(|(name, repr, on_ack)| Crafted { name: name.to_owned(), bytes: emit(&repr), on_ack })
        .collect();
    out.extend(atomics.into_iter().map(|(name, repr, on_ack)| Crafted { name, bytes: emit(&repr), on_ack }));
    out
}

/// Messages no correct sender produces, derived from the valid ones: every
/// header byte but the request id set to values the parser refuses, cuts
/// and extensions it refuses, unknown opcodes. Only those that still carry
/// a request id (8 bytes or more): the others name nobody to answer.
fn malformed_ops(valid: &[Crafted]) -> Vec<Crafted> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut keep = |name: String, bytes: Vec<u8>, on_ack: bool, out: &mut Vec<Crafted>| {
        if bytes.len() >= 8 && OpRepr::parse(&bytes).is_err() && seen.insert(bytes.clone()) {
            out.push(Crafted { name, bytes, on_ack });
        }
    };
    // Messages of other kinds sent by the public API reach the target
    // malformed too: an active-message request, a FIFO push, a register put.
    let mut bases: Vec<(String, Vec<u8>, bool)> =
        valid.iter().map(|c| (c.name.clone(), c.bytes.clone(), c.on_ack)).collect();
    let am = OpRepr::AmRequest(op::AmRequest {
        req: 0x5a5a,
        handler: 3,
        want_reply: true,
        rndv: false,
        args: op::AmArgs::from_slice(&[1, 2]).expect("two args fit"),
        body: b"am",
    });
    bases.push(("am-request".to_owned(), emit(&am), false));
    bases.push((
        "fifo-push".to_owned(),
        emit(&OpRepr::FifoPush(op::FifoPush { req: 0x5a5a, key: 9, body: b"entry" })),
        true,
    ));
    bases.push((
        "register-put".to_owned(),
        emit(&OpRepr::RegisterPut(op::RegisterPut { req: 0x5a5a, register: 2, body: b"reg" })),
        true,
    ));
    for (name, bytes, on_ack) in &bases {
        let header = OpRepr::parse(bytes).expect("bases are valid").header_len();
        for at in (1..header).filter(|at| !(4..8).contains(at)) {
            for value in [0x00, 0x01, 0x02, 0x03, 0x07, 0x09, 0x10, 0x40, 0x80, 0xff, bytes[at] ^ 1] {
                let mut m = bytes.clone();
                m[at] = value;
                keep(format!("{name} byte {at}={value:#x}"), m, *on_ack, &mut out);
            }
        }
        for len in 8..bytes.len() {
            keep(format!("{name} cut to {len}"), bytes[..len].to_vec(), *on_ack, &mut out);
        }
        for extra in [1, 8] {
            let mut m = bytes.clone();
            m.extend(std::iter::repeat_n(0u8, extra));
            keep(format!("{name} + {extra} bytes"), m, *on_ack, &mut out);
        }
        for opcode in [0u8, 22, 0x7f, 0xff] {
            let mut m = bytes.clone();
            m[0] = opcode;
            keep(format!("{name} opcode {opcode:#x}"), m, *on_ack, &mut out);
        }
    }
    for c in &out {
        assert!(
            !matches!(Unparsed::of(&c.bytes), Unparsed::Anonymous | Unparsed::Reply { .. }),
            "{}: every crafted request names its request",
            c.name
        );
    }
    out
}

/// Well-formed operations the target refuses: unknown key, out of bounds,
/// no permission, misaligned, bad stride, unset register, unknown FIFO.
fn refused_ops(all: u64, read: u64) -> Vec<Crafted> {
    const REQ: u32 = 0x5a5a;
    let data = [7u8; 64];
    let bad = all ^ 0x5555_0000_0000_0001;
    let end = REGION as u64;
    let atomic = |key, offset, fetch| {
        OpRepr::AtomicRequest(op::AtomicRequest {
            req: REQ,
            key,
            offset,
            op: AtomicOp::Add,
            width: AtomicWidth::U64,
            fetch,
            operand: 1,
            compare: 0,
        })
    };
    let cases = [
        ("put bad key", OpRepr::Put(op::Put { req: REQ, key: bad, offset: 0, body: &data }), true),
        ("put out of bounds", OpRepr::Put(op::Put { req: REQ, key: all, offset: end - 8, body: &data }), true),
        ("put no permission", OpRepr::Put(op::Put { req: REQ, key: read, offset: 0, body: &data[..8] }), true),
        ("get bad key", OpRepr::GetRequest(op::GetRequest { req: REQ, key: bad, offset: 0, len: 8 }), false),
        ("get out of bounds", OpRepr::GetRequest(op::GetRequest { req: REQ, key: all, offset: end, len: 1 }), false),
        ("atomic bad key", atomic(bad, 0, false), true),
        ("atomic misaligned", atomic(all, 4, false), true),
        ("atomic misaligned fetch", atomic(all, 4, true), false),
        ("atomic no permission", atomic(read, 0, true), false),
        ("atomic out of bounds", atomic(all, end, false), true),
        (
            "put-signal misaligned signal",
            OpRepr::PutSignal(op::PutSignal {
                req: REQ,
                key: all,
                offset: 0,
                signal_key: all,
                signal_offset: 3,
                signal_op: SignalOp::Set,
                signal_value: 1,
                body: &data[..8],
            }),
            true,
        ),
        (
            "put-strided overlapping stride",
            OpRepr::PutStrided(op::PutStrided {
                req: REQ,
                key: all,
                offset: 0,
                elem_size: 8,
                count: 2,
                stride: 4,
                body: &data[..16],
            }),
            true,
        ),
        (
            "get-strided out of bounds",
            OpRepr::GetStridedRequest(op::GetStridedRequest {
                req: REQ,
                key: all,
                offset: 0,
                elem_size: 8,
                count: 2,
                stride: end,
            }),
            false,
        ),
        ("register-put unset", OpRepr::RegisterPut(op::RegisterPut { req: REQ, register: 2, body: b"x" }), true),
        ("fifo-push unknown", OpRepr::FifoPush(op::FifoPush { req: REQ, key: 9, body: b"x" }), true),
    ];
    cases
        .into_iter()
        .map(|(name, repr, on_ack)| Crafted { name: name.to_owned(), bytes: emit(&repr), on_ack })
        .collect()
}

/// Sends `c` to `rank` and returns its outcome, failing the test if no
/// answer comes within a few seconds.
fn outcome(ep: &Endpoint, rank: u32, c: &Crafted, path: &str) -> mw_core::Result<()> {
    let mut handle = send_crafted(ep, rank, c.on_ack, |req| c.with_req(req)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !handle.test() {
        assert!(Instant::now() < deadline, "{path}: {} was never answered", c.name);
        std::thread::yield_now();
    }
    handle.wait()
}

fn check_refusals(name: &'static str, config: Config) {
    run_job(2, config, move |ep| {
        let all = ep.alloc_symmetric(REGION, Access::ALL).unwrap();
        let read = ep.alloc_symmetric(64, Access::READ).unwrap();
        let initial: Vec<u8> = (0..REGION).map(|i| (i as u8).wrapping_mul(13)).collect();
        all.write(0, &initial).unwrap();
        ep.barrier().unwrap();
        if ep.rank() == 0 {
            let valid = valid_ops(all.key().0);
            let mut bad = malformed_ops(&valid);
            let malformed = bad.len();
            bad.extend(refused_ops(all.key().0, read.key().0));
            for rank in [1, 0] {
                let path = if rank == 0 { format!("{name}, to self") } else { format!("{name}, to rank 1") };
                for c in &bad {
                    let result = outcome(ep, rank, c, &path);
                    assert!(result.is_err(), "{path}: {} completed as a success without happening", c.name);
                }
                let mut now = vec![0u8; REGION];
                ep.get(rank, all.key(), 0, &mut now).unwrap();
                assert!(now == initial, "{path}: a refused operation changed the target's memory");
                for c in &valid {
                    outcome(ep, rank, c, &path).unwrap_or_else(|e| panic!("{path}: valid {} failed: {e}", c.name));
                }
                eprintln!("{path}: {malformed} malformed and {} refused operations all failed", bad.len() - malformed);
            }
        }
        ep.barrier().unwrap();
    });
}

#[test]
fn every_refused_operation_fails_its_handle_over_udp() {
    check_refusals("udp", udp(Config::default()));
}

#[test]
fn every_refused_operation_fails_its_handle_over_shared_memory() {
    check_refusals("shm", Config::default());
}

/// The reproduction through the public API: arguments the docs call
/// ignored (`compare` outside compare-and-swap, `operand` of a load) are
/// ignored on every path; the atomic happens.
#[test]
fn ignored_atomic_arguments_are_ignored_on_every_path() {
    for (name, config) in [("udp", udp(Config::default())), ("shm", Config::default())] {
        run_job(2, config, move |ep| {
            let region = ep.alloc_symmetric(64, Access::ALL).unwrap();
            let key: RegionKey = region.key();
            ep.barrier().unwrap();
            if ep.rank() == 0 {
                for rank in [1, 0] {
                    let at = 8 * u64::from(rank);
                    ep.atomic_nb(rank, key, at, AtomicOp::Add, AtomicWidth::U64, 1, 7, false).unwrap().wait().unwrap();
                    let old = ep
                        .atomic_nb(rank, key, at, AtomicOp::Add, AtomicWidth::U64, 1, 7, true)
                        .unwrap()
                        .wait_value()
                        .unwrap();
                    assert_eq!(old, 1, "{name} rank {rank}: the add with an ignored compare did not happen");
                    let loaded = ep
                        .atomic_nb(rank, key, at, AtomicOp::Load, AtomicWidth::U64, 99, 7, false)
                        .unwrap()
                        .wait_value()
                        .unwrap();
                    assert_eq!(loaded, 2, "{name} rank {rank}: the load with an ignored operand");
                    let old32 = ep
                        .atomic_nb(rank, key, at + 32, AtomicOp::Or, AtomicWidth::U32, 6, u64::MAX, true)
                        .unwrap()
                        .wait_value()
                        .unwrap();
                    assert_eq!(old32, 0, "{name} rank {rank}: an ignored compare need not fit the width");
                    assert_eq!(ep.get_value(rank, key, at + 32).unwrap() as u32, 6);
                }
            }
            ep.barrier().unwrap();
        });
    }
}
