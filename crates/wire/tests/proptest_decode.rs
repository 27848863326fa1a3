//! Property tests of the decoders: (a) any bytes never panic the header or op
//! parser, (b) valid packets and messages with random truncations and
//! single-byte mutations never panic and either decode (and then re-emit to
//! the same bytes) or give a typed error, (c) every valid representation of
//! every operation kind round-trips exactly.

#[path = "support/decode_check.rs"]
mod decode_check;

use mw_wire::op::*;
use mw_wire::{Error, Flags, HeaderRepr, PacketType, CHECKSUM_LEN, HEADER_LEN, MAC_LEN};
use proptest::prelude::*;

/// A `'static` byte slice of `len` in `range` (leaked: a test process only).
fn body(range: core::ops::Range<usize>) -> impl Strategy<Value = &'static [u8]> {
    prop::collection::vec(any::<u8>(), range).prop_map(|v| &*Box::leak(v.into_boxed_slice()))
}

fn exact_body(len: usize) -> impl Strategy<Value = &'static [u8]> {
    body(len..len + 1)
}

fn status() -> impl Strategy<Value = Status> {
    (0u8..10).prop_map(|v| Status::from_u8(v).expect("0..10 are statuses"))
}

fn am_args() -> impl Strategy<Value = AmArgs> {
    prop::collection::vec(any::<u64>(), 0..=AM_MAX_ARGS).prop_map(|v| AmArgs::from_slice(&v).expect("at most 8"))
}

fn atomic() -> impl Strategy<Value = AtomicRequest> {
    (any::<u32>(), any::<u64>(), any::<u64>(), 1u8..=8, any::<bool>(), any::<bool>(), any::<u64>(), any::<u64>())
        .prop_map(|(req, key, offset, op, wide, fetch, operand, compare)| {
            let op = AtomicOp::from_u8(op).expect("1..=8 are ops");
            let width = if wide { AtomicWidth::U64 } else { AtomicWidth::U32 };
            let mask = width.max_value();
            let (fetch, operand) = if op == AtomicOp::Load { (true, 0) } else { (fetch, operand & mask) };
            let compare = if op == AtomicOp::CompareSwap { compare & mask } else { 0 };
            AtomicRequest { req, key, offset, op, width, fetch, operand, compare }
        })
}

fn strided() -> impl Strategy<Value = (u32, u64, u64, u32, u32, u64)> {
    (any::<u32>(), any::<u64>(), 0u64..(1 << 56), 0u32..24, 0u32..24, 0u64..(1 << 40))
}

fn iov() -> impl Strategy<Value = PutIov<'static>> {
    (any::<u32>(), any::<u64>(), prop::collection::vec((any::<u64>(), 0u32..24), 0..40)).prop_flat_map(
        |(req, key, pairs)| {
            let total: u32 = pairs.iter().map(|p| p.1).sum();
            let pairs: &'static [(u64, u32)] = Box::leak(pairs.into_boxed_slice());
            exact_body(total as usize).prop_map(move |body| PutIov {
                req,
                key,
                segments: IovSegments::from_pairs(pairs),
                body,
            })
        },
    )
}

fn masked() -> impl Strategy<Value = PutMasked<'static>> {
    (any::<u32>(), any::<u64>(), any::<u64>(), any::<bool>(), any::<u64>()).prop_flat_map(
        |(req, key, offset, big, mask)| {
            let block = if big { MaskedBlock::B256 } else { MaskedBlock::B64 };
            let mask = mask & block.valid_mask();
            exact_body(block.bytes()).prop_map(move |body| PutMasked { req, key, offset, block, mask, body })
        },
    )
}

/// Every operation kind, with valid field combinations.
fn op() -> impl Strategy<Value = OpRepr<'static>> {
    prop_oneof![
        (any::<u32>(), any::<u64>(), any::<u64>(), body(0..200))
            .prop_map(|(req, key, offset, body)| OpRepr::Put(Put { req, key, offset, body })),
        (any::<u32>(), any::<u64>(), any::<u64>(), body(0..INLINE_MAX + 1))
            .prop_map(|(req, key, offset, body)| OpRepr::PutInline(PutInline { req, key, offset, body })),
        (any::<u32>(), any::<u64>(), any::<u64>(), any::<u64>())
            .prop_map(|(req, key, offset, len)| OpRepr::GetRequest(GetRequest { req, key, offset, len })),
        (any::<u32>(), status(), body(0..200)).prop_map(|(req, status, body)| {
            let body = if status.is_ok() { body } else { &[] };
            OpRepr::GetResponse(GetResponse { req, status, body })
        }),
        atomic().prop_map(OpRepr::AtomicRequest),
        (any::<u32>(), status(), any::<u64>())
            .prop_map(|(req, status, value)| { OpRepr::AtomicResponse(AtomicResponse { req, status, value }) }),
        (any::<u32>(), any::<[u64; 5]>(), any::<bool>(), body(0..100)).prop_map(|(req, v, add, body)| {
            let signal_op = if add { SignalOp::Add } else { SignalOp::Set };
            OpRepr::PutSignal(PutSignal {
                req,
                key: v[0],
                offset: v[1],
                signal_key: v[2],
                signal_offset: v[3],
                signal_op,
                signal_value: v[4],
                body,
            })
        }),
        strided().prop_flat_map(|(req, key, offset, elem_size, count, stride)| {
            exact_body((elem_size * count) as usize).prop_map(move |body| {
                OpRepr::PutStrided(PutStrided { req, key, offset, elem_size, count, stride, body })
            })
        }),
        (any::<u32>(), any::<u64>(), 0u64..(1 << 56), any::<u32>(), 0u32..1000, 0u64..(1 << 40)).prop_map(
            |(req, key, offset, elem_size, count, stride)| {
                OpRepr::GetStridedRequest(GetStridedRequest { req, key, offset, elem_size, count, stride })
            }
        ),
        iov().prop_map(OpRepr::PutIov),
        masked().prop_map(OpRepr::PutMasked),
        (any::<u32>(), any::<u16>(), body(0..100))
            .prop_map(|(req, register, body)| { OpRepr::RegisterPut(RegisterPut { req, register, body }) }),
        (any::<u32>(), status()).prop_map(|(req, status)| OpRepr::OpStatus(OpStatus { req, status })),
        (any::<u32>(), any::<u16>(), any::<bool>(), any::<bool>(), am_args(), body(0..100)).prop_map(
            |(req, handler, want_reply, rndv, args, body)| OpRepr::AmRequest(AmRequest {
                req,
                handler,
                want_reply,
                rndv,
                args,
                body
            })
        ),
        (any::<u32>(), status(), any::<bool>(), am_args(), body(0..100))
            .prop_map(|(req, status, rndv, args, body)| { OpRepr::AmReply(AmReply { req, status, rndv, args, body }) }),
        (any::<u32>(), any::<u64>(), body(0..200)).prop_map(|(context, tag, body)| OpRepr::Eager(Eager {
            context,
            tag,
            body
        })),
        (any::<u32>(), any::<u64>(), any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(
            |(context, tag, total_len, sender_req, key, offset)| {
                OpRepr::RndvRts(RndvRts { context, tag, total_len, sender_req, key, offset })
            }
        ),
        (any::<u32>(), status()).prop_map(|(sender_req, status)| OpRepr::RndvDone(RndvDone { sender_req, status })),
        (any::<u32>(), any::<u64>(), body(0..100)).prop_map(|(req, key, body)| OpRepr::FifoPush(FifoPush {
            req,
            key,
            body
        })),
        (any::<u8>(), any::<u32>()).prop_map(|(class, amount)| OpRepr::Credit(Credit { class, amount })),
        mcast_feedback().prop_map(OpRepr::McastFeedback),
    ]
}

/// Valid feedback: ascending, non-touching ranges at or above `contig`.
fn mcast_feedback() -> impl Strategy<Value = McastFeedback<'static>> {
    (any::<u64>(), any::<u64>(), 0u32..1000, any::<bool>(), prop::collection::vec((1u32..50, 1u32..50), 0..20))
        .prop_map(|(team, transfer, contig, done, gaps)| {
            let mut pairs = Vec::new();
            if !done {
                let mut at = contig;
                for (skip, len) in gaps.into_iter().take(MCAST_RANGES_MAX) {
                    let start = at + skip;
                    pairs.push((start, start + len));
                    at = start + len;
                }
            }
            let pairs: &'static [(u32, u32)] = Box::leak(pairs.into_boxed_slice());
            McastFeedback { team, transfer, contig, done, missing: McastRanges::from_pairs(pairs) }
        })
}

/// Valid headers of every packet type (payload_len is set by `packet`).
fn header() -> impl Strategy<Value = HeaderRepr> {
    (
        1u8..=7,
        0u16..0x40,
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        1u32..,
        any::<u32>(),
        any::<[u32; 2]>(),
        any::<u64>(),
    )
        .prop_map(|(ptype, bits, job_id, src_rank, dst_rank, src_epoch, dst_epoch, [seq, ack], sack)| {
            let packet_type = PacketType::from_u8(ptype).expect("1..=7 are packet types");
            // One trailer at most: a MAC wins over a checksum.
            let bits = if bits & Flags::MAC.bits() != 0 { bits & !Flags::CHECKSUM.bits() } else { bits };
            let mut flags = Flags::from_bits(bits).expect("known bits");
            if packet_type != PacketType::Data {
                flags.set(Flags::FIRST | Flags::LAST, false);
            }
            if matches!(packet_type, PacketType::Ack | PacketType::Nack) {
                flags.set(Flags::ACK, true);
            }
            let (ack, sack) = if packet_type == PacketType::Mcast {
                flags.set(Flags::ACK | Flags::ACK_NOW, false);
                (0, 0)
            } else {
                (ack, sack)
            };
            HeaderRepr {
                packet_type,
                flags,
                payload_len: 0,
                job_id,
                src_rank,
                dst_rank,
                src_epoch,
                dst_epoch,
                seq,
                ack,
                sack,
            }
        })
}

fn message(op: &OpRepr<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; op.buffer_len()];
    assert_eq!(op.emit(&mut buf), buf.len());
    buf
}

/// A whole packet: `header` carrying `op` (no payload for Ack/Nack).
fn packet(mut header: HeaderRepr, op: &OpRepr<'_>) -> Vec<u8> {
    let payload =
        if matches!(header.packet_type, PacketType::Ack | PacketType::Nack) { Vec::new() } else { message(op) };
    header.payload_len = payload.len() as u16;
    let mut buf = vec![0u8; header.buffer_len()];
    header.emit_into(&mut buf);
    buf[HEADER_LEN..HEADER_LEN + payload.len()].copy_from_slice(&payload);
    if header.flags.contains(Flags::MAC) || header.flags.contains(Flags::CHECKSUM) {
        buf[HEADER_LEN + payload.len()..].fill(0xa5);
    }
    buf
}

fn typed(error: Error) -> bool {
    matches!(
        error,
        Error::Truncated
            | Error::BadMagic
            | Error::BadVersion
            | Error::UnknownType
            | Error::BadLength
            | Error::Malformed
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    // (a) Arbitrary bytes never panic either decoder.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        decode_check::check(&bytes);
    }

    // (a) Arbitrary bytes behind a plausible first byte reach deep into each op parser.
    #[test]
    fn arbitrary_op_bodies_never_panic(code in 0u8..=21, rest in prop::collection::vec(any::<u8>(), 0..400)) {
        let mut bytes = vec![code];
        bytes.extend_from_slice(&rest);
        decode_check::check(&bytes);
        if let Err(e) = OpRepr::parse(&bytes) {
            prop_assert!(typed(e));
        }
    }

    // (b) Valid packets, mutated or cut short: a value or a typed error, never a panic.
    #[test]
    fn mutated_packets_decode_or_fail_typed(
        header in header(),
        op in op(),
        at in any::<prop::sample::Index>(),
        value in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let valid = packet(header, &op);
        prop_assert!(HeaderRepr::parse_packet(&valid).is_ok());
        let mut mutated = valid.clone();
        let i = at.index(mutated.len());
        mutated[i] ^= value | 1;
        for bytes in [&mutated[..], &valid[..cut.index(valid.len())]] {
            decode_check::check(bytes);
            match HeaderRepr::parse_packet(bytes) {
                Ok((_, payload)) => {
                    if let Err(e) = OpRepr::parse(payload) {
                        prop_assert!(typed(e));
                    }
                }
                Err(e) => prop_assert!(typed(e)),
            }
        }
    }

    // (b) Valid messages, mutated or cut short.
    #[test]
    fn mutated_ops_decode_or_fail_typed(
        op in op(),
        at in any::<prop::sample::Index>(),
        value in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let valid = message(&op);
        let mut mutated = valid.clone();
        let i = at.index(mutated.len());
        mutated[i] ^= value | 1;
        let cut = cut.index(valid.len());
        // The in-place forms (AmRequestView, AmReplyView) accept exactly
        // what the full parsers accept, with the same error, and read the
        // same fields.
        check_am_views(&valid)?;
        for bytes in [&mutated[..], &valid[..cut]] {
            check_am_views(bytes)?;
            decode_check::check(bytes);
            if let Err(e) = OpRepr::parse(bytes) {
                prop_assert!(typed(e));
            }
        }
        if cut < op.header_len() {
            prop_assert_eq!(OpRepr::parse(&valid[..cut]), Err(Error::Truncated));
        }
    }

    // (c) Every valid repr round-trips exactly, with the header and body emitted separately.
    #[test]
    fn valid_ops_round_trip(op in op()) {
        let mut header = vec![0xeeu8; MAX_HEADER_LEN];
        let len = op.emit_header(&mut header);
        prop_assert_eq!(len, op.header_len());
        let mut msg = header[..len].to_vec();
        msg.extend_from_slice(op.body());
        let parsed = OpRepr::parse(&msg);
        prop_assert_eq!(parsed, Ok(op));
        prop_assert_eq!(message(&op), msg);
        prop_assert!(op.to_string().starts_with(op.opcode().name()));
        if let OpRepr::Eager(eager) = op {
            // The same-host path sizes the record from the constant.
            prop_assert_eq!(Eager::HEADER_LEN, len);
            let mut again = vec![0x55u8; len];
            prop_assert_eq!(eager.emit_header(&mut again), len);
            prop_assert_eq!(again, header[..len].to_vec());
        }
    }

    // (c) Every valid header round-trips, with and without a MAC or checksum trailer.
    #[test]
    fn valid_packets_round_trip(header in header(), op in op()) {
        let bytes = packet(header, &op);
        let (parsed, payload) = HeaderRepr::parse_packet(&bytes).expect("valid packet");
        prop_assert_eq!(parsed.packet_type, header.packet_type);
        prop_assert_eq!(parsed.flags, header.flags);
        prop_assert_eq!(parsed.seq, header.seq);
        prop_assert_eq!(usize::from(parsed.payload_len), payload.len());
        let trailer = if parsed.flags.contains(Flags::MAC) {
            MAC_LEN
        } else if parsed.flags.contains(Flags::CHECKSUM) {
            CHECKSUM_LEN
        } else {
            0
        };
        prop_assert_eq!(bytes.len(), HEADER_LEN + payload.len() + trailer);
        if !payload.is_empty() {
            prop_assert_eq!(OpRepr::parse(payload), Ok(op));
        }
        decode_check::check(&bytes);
    }
}

/// Checks the in-place active-message forms against the full parsers on
/// `bytes` (a message whose first byte may or may not be an AM opcode).
fn check_am_views(bytes: &[u8]) -> Result<(), TestCaseError> {
    match bytes.first().copied() {
        Some(code) if code == OpCode::AmRequest as u8 => match (AmRequest::parse(bytes), AmRequestView::parse(bytes)) {
            (Ok(full), Ok(view)) => {
                prop_assert_eq!(
                    (view.req, view.handler, view.want_reply, view.rndv),
                    (full.req, full.handler, full.want_reply, full.rndv)
                );
                let mut args = [0u64; AM_MAX_ARGS];
                prop_assert_eq!(view.args_into(&mut args), full.args.as_slice());
                prop_assert_eq!(view.body(), full.body);
            }
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (full, view) => prop_assert!(false, "parse {:?} but view {:?}", full, view),
        },
        Some(code) if code == OpCode::AmReply as u8 => match (AmReply::parse(bytes), AmReplyView::parse(bytes)) {
            (Ok(full), Ok(view)) => {
                prop_assert_eq!((view.req, view.status, view.rndv), (full.req, full.status, full.rndv));
                let args: Vec<u64> = (0..view.args_len()).map(|i| view.arg(i)).collect();
                prop_assert_eq!(&args[..], full.args.as_slice());
                prop_assert_eq!(view.body(), full.body);
            }
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (full, view) => prop_assert!(false, "parse {:?} but view {:?}", full, view),
        },
        _ => {}
    }
    Ok(())
}

proptest! {
    // The in-place emitters write what the reprs write, and
    // AmArgs::assign gives what from_slice gives (over any earlier value).
    #[test]
    fn am_in_place_emitters_match_the_reprs(
        req in any::<u32>(),
        handler in any::<u16>(),
        want_reply in any::<bool>(),
        args in am_args(),
        earlier in am_args(),
    ) {
        let mut expected = [0xeeu8; AM_MAX_HEADER_LEN];
        let mut written = [0x55u8; AM_MAX_HEADER_LEN];
        let request = AmRequest { req, handler, want_reply, rndv: false, args, body: &[] };
        let len = request.emit_header(&mut expected);
        prop_assert_eq!(AmRequest::emit_plain_header(req, handler, want_reply, args.as_slice(), &mut written), Some(len));
        prop_assert_eq!(AmRequest::plain_header_len(args.len()), len, "the size told before writing");
        prop_assert_eq!(&written[..len], &expected[..len]);
        let reply = AmReply { req, status: Status::Ok, rndv: false, args, body: &[] };
        let len = reply.emit_header(&mut expected);
        prop_assert_eq!(AmReply::emit_ok_header(req, &args, &mut written), len);
        prop_assert_eq!(AmReply::ok_header_len(&args), len, "the size told before writing");
        prop_assert_eq!(&written[..len], &expected[..len]);
        let mut assigned = earlier;
        prop_assert!(assigned.assign(args.as_slice()));
        prop_assert_eq!(assigned, args);
    }
}

#[test]
fn in_place_forms_refuse_more_than_eight_arguments() {
    let nine = [7u64; AM_MAX_ARGS + 1];
    let mut buf = [0u8; AM_MAX_HEADER_LEN + 8];
    assert_eq!(AmRequest::emit_plain_header(1, 2, true, &nine, &mut buf), None);
    assert_eq!(buf, [0u8; AM_MAX_HEADER_LEN + 8], "nothing written");
    let mut args = AmArgs::from_slice(&[1, 2]).expect("two");
    assert!(!args.assign(&nine));
    assert_eq!(args.as_slice(), &[1, 2], "unchanged");
    // A count of nine in the flags byte is refused by both parsers alike.
    let mut msg = vec![OpCode::AmRequest as u8, 9, 0, 0, 0, 0, 0, 0];
    msg.extend_from_slice(&[0u8; 80]);
    assert_eq!(AmRequestView::parse(&msg).map(|_| ()), AmRequest::parse(&msg).map(|_| ()));
    assert!(AmRequestView::parse(&msg).is_err());
}
