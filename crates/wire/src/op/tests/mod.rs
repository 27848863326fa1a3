//! Unit tests: fixture bytes that pin the layout, round trips of every
//! variant; the limits each parser enforces are in `bounds`.

use super::*;

static DATA: [u8; 256] = {
    let mut a = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        a[i] = i as u8;
        i += 1;
    }
    a
};
static PAIRS: [(u64, u32); 3] = [(0, 10), (4096, 0), (u64::MAX - 7, 6)];
static RANGES: [(u32, u32); 3] = [(3, 4), (6, 9), (u32::MAX - 1, u32::MAX)];

/// One sample of every variant (some twice, to cover optional parts).
fn samples() -> Vec<OpRepr<'static>> {
    vec![
        OpRepr::Put(Put { req: 7, key: 0x1122, offset: 64, body: &DATA[..8] }),
        OpRepr::Put(Put { req: 0, key: 1, offset: 0, body: &[] }),
        OpRepr::PutInline(PutInline { req: 9, key: 3, offset: 5, body: &DATA[..INLINE_MAX] }),
        OpRepr::GetRequest(GetRequest { req: 1, key: 2, offset: 3, len: 1 << 20 }),
        OpRepr::GetResponse(GetResponse { req: 1, status: Status::Ok, body: &DATA[..100] }),
        OpRepr::GetResponse(GetResponse { req: 1, status: Status::OutOfBounds, body: &[] }),
        OpRepr::AtomicRequest(AtomicRequest {
            req: 4,
            key: 5,
            offset: 8,
            op: AtomicOp::CompareSwap,
            width: AtomicWidth::U64,
            fetch: true,
            operand: u64::MAX,
            compare: 17,
        }),
        OpRepr::AtomicRequest(AtomicRequest {
            req: 4,
            key: 5,
            offset: 4,
            op: AtomicOp::Load,
            width: AtomicWidth::U32,
            fetch: true,
            operand: 0,
            compare: 0,
        }),
        OpRepr::AtomicResponse(AtomicResponse { req: 4, status: Status::Ok, value: 99 }),
        OpRepr::PutSignal(PutSignal {
            req: 2,
            key: 10,
            offset: 16,
            signal_key: 11,
            signal_offset: 24,
            signal_op: SignalOp::Add,
            signal_value: 1,
            body: &DATA[..8],
        }),
        OpRepr::PutStrided(PutStrided {
            req: 3,
            key: 4,
            offset: 0,
            elem_size: 4,
            count: 5,
            stride: 16,
            body: &DATA[..20],
        }),
        OpRepr::GetStridedRequest(GetStridedRequest { req: 3, key: 4, offset: 0, elem_size: 8, count: 9, stride: 64 }),
        OpRepr::PutIov(PutIov { req: 5, key: 6, segments: IovSegments::from_pairs(&PAIRS), body: &DATA[..16] }),
        OpRepr::PutIov(PutIov { req: 5, key: 6, segments: IovSegments::from_pairs(&PAIRS[..2]), body: &DATA[..10] }),
        OpRepr::PutMasked(PutMasked {
            req: 8,
            key: 9,
            offset: 128,
            block: MaskedBlock::B64,
            mask: 0xffff,
            body: &DATA[..64],
        }),
        OpRepr::PutMasked(PutMasked {
            req: 8,
            key: 9,
            offset: 0,
            block: MaskedBlock::B256,
            mask: 1 << 63,
            body: &DATA,
        }),
        OpRepr::RegisterPut(RegisterPut { req: 1, register: 3, body: &DATA[..12] }),
        OpRepr::OpStatus(OpStatus { req: 77, status: Status::WouldBlock }),
        OpRepr::AmRequest(AmRequest {
            req: 6,
            handler: 42,
            want_reply: true,
            rndv: false,
            args: AmArgs::from_slice(&[1, 2, 3]).unwrap(),
            body: &DATA[..5],
        }),
        OpRepr::AmRequest(AmRequest {
            req: 0,
            handler: 1,
            want_reply: false,
            rndv: false,
            args: AmArgs::EMPTY,
            body: &[],
        }),
        OpRepr::AmRequest(AmRequest {
            req: 7,
            handler: 3,
            want_reply: true,
            rndv: true,
            args: AmArgs::EMPTY,
            body: &DATA[..32],
        }),
        OpRepr::AmReply(AmReply {
            req: 6,
            status: Status::Ok,
            rndv: false,
            args: AmArgs::from_slice(&[9; AM_MAX_ARGS]).unwrap(),
            body: &DATA[..3],
        }),
        OpRepr::AmReply(AmReply { req: 7, status: Status::Ok, rndv: true, args: AmArgs::EMPTY, body: &DATA[..32] }),
        OpRepr::Eager(Eager { context: 1, tag: 0xdead, body: &DATA[..40] }),
        OpRepr::RndvRts(RndvRts { context: 1, tag: 2, total_len: 1 << 30, sender_req: 12, key: 13, offset: 14 }),
        OpRepr::RndvDone(RndvDone { sender_req: 12, status: Status::Truncated }),
        OpRepr::FifoPush(FifoPush { req: 3, key: 21, body: &DATA[..31] }),
        OpRepr::Credit(Credit { class: 2, amount: 1000 }),
        OpRepr::McastFeedback(McastFeedback {
            team: 0xfeed,
            transfer: 12,
            contig: 3,
            done: false,
            missing: McastRanges::from_pairs(&RANGES),
        }),
        OpRepr::McastFeedback(McastFeedback {
            team: 1,
            transfer: u64::MAX,
            contig: 40,
            done: true,
            missing: McastRanges::none(),
        }),
    ]
}

fn message(repr: &OpRepr<'_>) -> Vec<u8> {
    let mut buf = vec![0xa5; repr.buffer_len()];
    assert_eq!(repr.emit(&mut buf), buf.len());
    buf
}

#[test]
fn samples_cover_every_opcode() {
    let samples = samples();
    for code in OpCode::ALL {
        assert!(samples.iter().any(|s| s.opcode() == code), "{code} has no sample");
    }
}

#[test]
fn every_variant_round_trips() {
    for repr in samples() {
        // Header and body built separately, as the data path does.
        let mut header = [0xffu8; MAX_HEADER_LEN];
        let len = repr.emit_header(&mut header);
        assert_eq!(len, repr.header_len());
        let mut msg = header[..len].to_vec();
        msg.extend_from_slice(repr.body());
        let parsed = OpRepr::parse(&msg).unwrap_or_else(|e| panic!("{repr}: {e}"));
        assert_eq!(parsed, repr);
        assert_eq!(parsed.body(), repr.body());
        assert_eq!(message(&parsed), msg, "{repr}: re-emit differs");
        let view = Message::new_checked(&msg[..]).unwrap();
        assert_eq!(view.opcode().unwrap(), repr.opcode());
        assert_eq!(view.repr().unwrap(), repr);
    }
}

#[test]
fn emit_overwrites_every_header_byte() {
    // The endpoint reuses one header buffer: stale bytes must never leak.
    for repr in samples() {
        let mut clean = [0x00u8; MAX_HEADER_LEN];
        let mut dirty = [0xffu8; MAX_HEADER_LEN];
        let len = repr.emit_header(&mut clean);
        assert_eq!(repr.emit_header(&mut dirty), len);
        assert_eq!(clean[..len], dirty[..len], "{repr}");
    }
}

#[test]
fn header_ignores_body() {
    // The endpoint emits with an empty body and sends the body separately.
    for repr in samples() {
        let with = message(&repr);
        let mut header = vec![0u8; repr.header_len()];
        let empty = match repr {
            OpRepr::Put(op) => OpRepr::Put(Put { body: &[], ..op }),
            OpRepr::PutSignal(op) => OpRepr::PutSignal(PutSignal { body: &[], ..op }),
            OpRepr::PutIov(op) => OpRepr::PutIov(PutIov { body: &[], ..op }),
            OpRepr::AmRequest(op) => OpRepr::AmRequest(AmRequest { body: &[], ..op }),
            other => other,
        };
        empty.emit_header(&mut header);
        assert_eq!(&with[..header.len()], &header[..]);
    }
}

#[test]
fn truncated_header_at_every_length() {
    for repr in samples() {
        let msg = message(&repr);
        for cut in 0..repr.header_len() {
            assert_eq!(OpRepr::parse(&msg[..cut]), Err(Error::Truncated), "{repr} cut at {cut}");
        }
    }
}

#[test]
fn short_or_long_body_rejected_where_length_is_known() {
    for repr in samples() {
        let msg = message(&repr);
        let mut long = msg.clone();
        long.push(0);
        let fixed_body = matches!(
            repr.opcode(),
            OpCode::GetRequest
                | OpCode::GetStridedRequest
                | OpCode::AtomicRequest
                | OpCode::AtomicResponse
                | OpCode::OpStatus
                | OpCode::RndvRts
                | OpCode::RndvDone
                | OpCode::Credit
                | OpCode::PutStrided
                | OpCode::PutIov
                | OpCode::PutMasked
                | OpCode::McastFeedback
        ) || (repr.opcode() == OpCode::PutInline && repr.body().len() == INLINE_MAX);
        let error_response = matches!(repr, OpRepr::GetResponse(r) if !r.status.is_ok());
        if fixed_body {
            assert_eq!(OpRepr::parse(&long), Err(Error::BadLength), "{repr} + 1 byte");
        } else if error_response {
            assert_eq!(OpRepr::parse(&long), Err(Error::Malformed), "{repr} + 1 byte");
        } else {
            assert!(OpRepr::parse(&long).is_ok(), "{repr} + 1 byte");
        }
    }
}

#[test]
fn fixture_mcast_feedback() {
    let repr = OpRepr::McastFeedback(McastFeedback {
        team: 0x0102,
        transfer: 7,
        contig: 2,
        done: false,
        missing: McastRanges::from_pairs(&[(2, 5)]),
    });
    assert_eq!(repr.header_len(), 40);
    #[rustfmt::skip]
    let want: [u8; 40] = [
        21, 0, 1, 0, 0, 0, 0, 0,
        0x02, 0x01, 0, 0, 0, 0, 0, 0,
        7, 0, 0, 0, 0, 0, 0, 0,
        2, 0, 0, 0, 0, 0, 0, 0,
        2, 0, 0, 0, 5, 0, 0, 0,
    ];
    assert_eq!(message(&repr), want);
    assert_eq!(OpRepr::parse(&want), Ok(repr));
    assert_eq!(repr.to_string(), "mcast-feedback team=0x102 transfer=7 contig=2 missing=[(2, 5)]");
}

#[test]
fn fixture_put() {
    let repr = OpRepr::Put(Put { req: 0x0102_0304, key: 0x1122_3344_5566_7788, offset: 0x40, body: b"abcdefgh" });
    assert_eq!(repr.header_len(), 24);
    #[rustfmt::skip]
    let want: [u8; 32] = [
        1, 0, 0, 0, 0x04, 0x03, 0x02, 0x01,
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        0x40, 0, 0, 0, 0, 0, 0, 0,
        b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h',
    ];
    assert_eq!(message(&repr), want);
    assert_eq!(OpRepr::parse(&want), Ok(repr));
    assert_eq!(repr.to_string(), "put req=16909060 key=0x1122334455667788 off=64 len=8");
}

#[test]
fn fixture_put_signal() {
    let repr = OpRepr::PutSignal(PutSignal {
        req: 5,
        key: 0x10,
        offset: 0x20,
        signal_key: 0x30,
        signal_offset: 0x40,
        signal_op: SignalOp::Add,
        signal_value: 0x0102,
        body: &[0xee],
    });
    #[rustfmt::skip]
    let want: [u8; 49] = [
        7, 2, 0, 0, 5, 0, 0, 0,
        0x10, 0, 0, 0, 0, 0, 0, 0,
        0x20, 0, 0, 0, 0, 0, 0, 0,
        0x30, 0, 0, 0, 0, 0, 0, 0,
        0x40, 0, 0, 0, 0, 0, 0, 0,
        0x02, 0x01, 0, 0, 0, 0, 0, 0,
        0xee,
    ];
    assert_eq!(message(&repr), want);
    assert_eq!(OpRepr::parse(&want), Ok(repr));
    assert_eq!(repr.to_string(), "put-signal req=5 key=0x10 off=32 len=1 signal=0x30:64 add 258");
}

#[test]
fn fixture_atomic_request() {
    let repr = OpRepr::AtomicRequest(AtomicRequest {
        req: 0x99,
        key: 0xab,
        offset: 0x18,
        op: AtomicOp::CompareSwap,
        width: AtomicWidth::U32,
        fetch: true,
        operand: 0xdead_beef,
        compare: 0x0bad_f00d,
    });
    #[rustfmt::skip]
    let want: [u8; 40] = [
        5, 3, 4, 1, 0x99, 0, 0, 0,
        0xab, 0, 0, 0, 0, 0, 0, 0,
        0x18, 0, 0, 0, 0, 0, 0, 0,
        0xef, 0xbe, 0xad, 0xde, 0, 0, 0, 0,
        0x0d, 0xf0, 0xad, 0x0b, 0, 0, 0, 0,
    ];
    assert_eq!(message(&repr), want);
    assert_eq!(OpRepr::parse(&want), Ok(repr));
    assert_eq!(repr.to_string(), "atomic req=153 key=0xab off=24 cswap/u32 fetch operand=0xdeadbeef compare=0xbadf00d");
}

#[test]
fn fixture_put_iov_layout() {
    let pairs = [(0x10u64, 3u32), (0x20, 1), (0x30, 0)];
    let repr = OpRepr::PutIov(PutIov { req: 1, key: 2, segments: IovSegments::from_pairs(&pairs), body: b"abcd" });
    // 16 + 3 × 8 offsets + 3 × 4 lens = 52, padded to 56.
    assert_eq!(repr.header_len(), 56);
    let msg = message(&repr);
    assert_eq!(&msg[..4], &[10, 0, 3, 0]);
    assert_eq!(&msg[16..24], &0x10u64.to_le_bytes());
    assert_eq!(&msg[40..44], &3u32.to_le_bytes());
    assert_eq!(&msg[52..56], &[0, 0, 0, 0]);
    let OpRepr::PutIov(parsed) = OpRepr::parse(&msg).unwrap() else { panic!("not an iov") };
    assert_eq!(parsed.segments.iter().collect::<Vec<_>>(), pairs);
    assert_eq!(parsed.segments.iter().len(), 3);
    let mut bad = msg.clone();
    bad[53] = 1;
    assert_eq!(OpRepr::parse(&bad), Err(Error::Malformed), "non-zero padding");
}

mod bounds;

#[test]
fn display_names_every_op() {
    for repr in samples() {
        let text = repr.to_string();
        assert!(text.starts_with(repr.opcode().name()), "{text}");
    }
    assert_eq!(samples()[5].to_string(), "get-resp req=1 out-of-bounds len=0");
}

#[test]
fn req_accessor() {
    for repr in samples() {
        let none = matches!(repr, OpRepr::Eager(_) | OpRepr::Credit(_) | OpRepr::McastFeedback(_));
        assert_eq!(repr.req().is_none(), none, "{repr}");
    }
}

#[test]
fn enum_codes_round_trip() {
    for v in 0..=255u8 {
        if let Ok(s) = Status::from_u8(v) {
            assert_eq!(s as u8, v);
        }
        if let Ok(op) = AtomicOp::from_u8(v) {
            assert_eq!(op as u8, v);
        }
        if let Ok(code) = OpCode::from_u8(v) {
            assert_eq!(code as u8, v);
        }
    }
}

#[test]
fn direct_emit_and_parse_match_the_generic_ones() {
    // The same-host fast paths emit and parse these three without `OpRepr`:
    // same bytes (over a dirty buffer, too), same values back.
    let mut checked = 0;
    for repr in samples() {
        let mut generic = [0xffu8; MAX_HEADER_LEN];
        let len = repr.emit_header(&mut generic);
        let mut direct = [0x5au8; MAX_HEADER_LEN];
        let mut msg = generic[..len].to_vec();
        msg.extend_from_slice(repr.body());
        match repr {
            OpRepr::AmRequest(op) => {
                assert_eq!(op.emit_header(&mut direct), len);
                assert_eq!(AmRequest::parse(&msg).unwrap(), op);
            }
            OpRepr::AmReply(op) => {
                assert_eq!(op.emit_header(&mut direct), len);
                assert_eq!(AmReply::parse(&msg).unwrap(), op);
            }
            OpRepr::Eager(op) => {
                assert_eq!(op.emit_header(&mut direct), len);
                assert_eq!(Eager::parse(&msg).unwrap(), op);
            }
            _ => continue,
        }
        assert_eq!(direct[..len], generic[..len], "{repr}");
        checked += 1;
    }
    assert!(checked >= 3, "samples of all three");
}
