//! Boundary tests: the limits and field rules each parser enforces.

use super::*;

#[test]
fn inline_limit() {
    let put = |n: usize| PutInline { req: 1, key: 2, offset: 3, body: &DATA[..n] };
    assert!(OpRepr::parse(&message(&OpRepr::PutInline(put(INLINE_MAX)))).is_ok());
    assert_eq!(OpRepr::parse(&message(&OpRepr::PutInline(put(INLINE_MAX + 1)))), Err(Error::BadLength));
    assert!(OpRepr::parse(&message(&OpRepr::PutInline(put(0)))).is_ok());
}

#[test]
fn masked_mask_bits_and_block_size() {
    let masked = |block, mask, n: usize| {
        OpRepr::PutMasked(PutMasked { req: 1, key: 2, offset: 0, block, mask, body: &DATA[..n] })
    };
    assert!(OpRepr::parse(&message(&masked(MaskedBlock::B64, 0xffff, 64))).is_ok());
    assert_eq!(OpRepr::parse(&message(&masked(MaskedBlock::B64, 0x1_0000, 64))), Err(Error::Malformed));
    assert_eq!(OpRepr::parse(&message(&masked(MaskedBlock::B64, 1 << 63, 64))), Err(Error::Malformed));
    assert!(OpRepr::parse(&message(&masked(MaskedBlock::B256, u64::MAX, 256))).is_ok());
    assert_eq!(OpRepr::parse(&message(&masked(MaskedBlock::B64, 1, 63))), Err(Error::BadLength));
    assert_eq!(OpRepr::parse(&message(&masked(MaskedBlock::B256, 1, 64))), Err(Error::BadLength));
    let mut bad = message(&masked(MaskedBlock::B64, 1, 64));
    bad[1] = 3;
    assert_eq!(OpRepr::parse(&bad), Err(Error::UnknownType));
    assert_eq!(MaskedBlock::B256.words(), 64);
}

#[test]
fn strided_lengths_and_overflow() {
    let strided = |elem_size, count, stride, offset, n: usize| {
        OpRepr::PutStrided(PutStrided { req: 1, key: 2, offset, elem_size, count, stride, body: &DATA[..n] })
    };
    assert!(OpRepr::parse(&message(&strided(4, 5, 8, 0, 20))).is_ok());
    assert_eq!(OpRepr::parse(&message(&strided(4, 5, 8, 0, 19))), Err(Error::BadLength));
    assert_eq!(OpRepr::parse(&message(&strided(4, 5, 8, 0, 21))), Err(Error::BadLength));
    assert!(OpRepr::parse(&message(&strided(0, 0, 0, u64::MAX, 0))).is_ok());
    // elem_size × count far beyond the body, and a product that wraps a u32.
    assert_eq!(OpRepr::parse(&message(&strided(u32::MAX, u32::MAX, 1 << 32, 0, 1))), Err(Error::BadLength));
    assert_eq!(OpRepr::parse(&message(&strided(1 << 16, 1 << 16, 1 << 16, 0, 0))), Err(Error::BadLength));
    // The extent overflows a u64, or offset + extent does.
    let get = |count, stride, offset| {
        OpRepr::GetStridedRequest(GetStridedRequest { req: 1, key: 2, offset, elem_size: 8, count, stride })
    };
    assert_eq!(OpRepr::parse(&message(&get(3, u64::MAX / 2, 0))), Err(Error::Malformed));
    assert_eq!(OpRepr::parse(&message(&get(2, u64::MAX - 7, 0))), Err(Error::Malformed));
    assert!(OpRepr::parse(&message(&get(2, u64::MAX - 8, 0))).is_ok());
    assert_eq!(OpRepr::parse(&message(&get(1, 0, u64::MAX - 7))), Err(Error::Malformed));
    assert!(OpRepr::parse(&message(&get(1, 0, u64::MAX - 8))).is_ok());
    assert_eq!(strided_extent(8, 0, 100), Some(0));
    assert_eq!(strided_extent(8, 3, 100), Some(208));
    assert_eq!(strided_extent(u32::MAX, u32::MAX, u64::MAX), None);
    assert_eq!(GetStridedRequest { req: 0, key: 0, offset: 0, elem_size: 3, count: 7, stride: 3 }.packed_len(), 21);
}

#[test]
fn iov_sum_and_count() {
    let iov = |pairs: &'static [(u64, u32)], n: usize| {
        OpRepr::PutIov(PutIov { req: 1, key: 2, segments: IovSegments::from_pairs(pairs), body: &DATA[..n] })
    };
    assert!(OpRepr::parse(&message(&iov(&PAIRS, 16))).is_ok());
    assert_eq!(OpRepr::parse(&message(&iov(&PAIRS, 15))), Err(Error::BadLength));
    assert_eq!(OpRepr::parse(&message(&iov(&PAIRS, 17))), Err(Error::BadLength));
    assert!(OpRepr::parse(&message(&iov(&[], 0))).is_ok());
    // Lengths whose sum would wrap a u32 do not match a small body.
    static HUGE: [(u64, u32); 2] = [(0, u32::MAX), (0, 2)];
    assert_eq!(OpRepr::parse(&message(&iov(&HUGE, 1))), Err(Error::BadLength));
    // The most segments allowed, and one more.
    let pairs: Vec<(u64, u32)> = (0..=IOV_MAX as u64).map(|i| (i * 8, 0)).collect();
    let max =
        OpRepr::PutIov(PutIov { req: 1, key: 2, segments: IovSegments::from_pairs(&pairs[..IOV_MAX]), body: &[] });
    assert_eq!(max.header_len(), MAX_HEADER_LEN);
    assert!(OpRepr::parse(&message(&max)).is_ok());
    let mut over = message(&max);
    over[2..4].copy_from_slice(&(IOV_MAX as u16 + 1).to_le_bytes());
    assert_eq!(OpRepr::parse(&over), Err(Error::BadLength));
}

#[test]
fn atomic_field_rules() {
    let at = |op, width, fetch, operand, compare| {
        OpRepr::AtomicRequest(AtomicRequest { req: 1, key: 2, offset: 0, op, width, fetch, operand, compare })
    };
    let parse = |r: OpRepr<'_>| OpRepr::parse(&message(&r)).map(|_| ());
    assert_eq!(parse(at(AtomicOp::Add, AtomicWidth::U32, false, u64::from(u32::MAX), 0)), Ok(()));
    assert_eq!(parse(at(AtomicOp::Add, AtomicWidth::U32, false, 1 << 32, 0)), Err(Error::Malformed));
    assert_eq!(parse(at(AtomicOp::CompareSwap, AtomicWidth::U32, true, 1, 1 << 32)), Err(Error::Malformed));
    assert_eq!(parse(at(AtomicOp::Swap, AtomicWidth::U64, true, u64::MAX, 1)), Err(Error::Malformed));
    assert_eq!(parse(at(AtomicOp::Load, AtomicWidth::U64, false, 0, 0)), Err(Error::Malformed));
    assert_eq!(parse(at(AtomicOp::Load, AtomicWidth::U64, true, 1, 0)), Err(Error::Malformed));
    let mut msg = message(&at(AtomicOp::Xor, AtomicWidth::U64, false, 5, 0));
    for (byte, value, want) in
        [(1, 0, Error::UnknownType), (1, 9, Error::UnknownType), (2, 2, Error::UnknownType), (3, 2, Error::Malformed)]
    {
        let saved = msg[byte];
        msg[byte] = value;
        assert_eq!(OpRepr::parse(&msg), Err(want), "byte {byte} = {value}");
        msg[byte] = saved;
    }
    assert_eq!(AtomicWidth::U32.bytes(), 4);
}

#[test]
fn unknown_values_and_reserved_bytes() {
    assert_eq!(OpRepr::parse(&[]), Err(Error::Truncated));
    assert_eq!(OpRepr::parse(&[0; 64]), Err(Error::UnknownType));
    assert_eq!(OpRepr::parse(&[22; 64]), Err(Error::UnknownType));
    let status = message(&OpRepr::OpStatus(OpStatus { req: 1, status: Status::Ok }));
    let mut bad = status.clone();
    bad[1] = 11; // the first status byte past `Cancelled`
    assert_eq!(OpRepr::parse(&bad), Err(Error::UnknownType));
    let mut bad = status.clone();
    bad[3] = 1;
    assert_eq!(OpRepr::parse(&bad), Err(Error::Malformed));
    let put = message(&OpRepr::Put(Put { req: 1, key: 2, offset: 3, body: &[] }));
    for at in 1..4 {
        let mut bad = put.clone();
        bad[at] = 0x80;
        assert_eq!(OpRepr::parse(&bad), Err(Error::Malformed), "reserved byte {at}");
    }
    let mut signal = message(&samples()[9]);
    signal[1] = 0;
    assert_eq!(OpRepr::parse(&signal), Err(Error::UnknownType));
    let mut rts =
        message(&OpRepr::RndvRts(RndvRts { context: 0, tag: 0, total_len: 0, sender_req: 0, key: 0, offset: 0 }));
    rts[30] = 1;
    assert_eq!(OpRepr::parse(&rts), Err(Error::Malformed));
    let err = message(&OpRepr::GetResponse(GetResponse { req: 1, status: Status::BadKey, body: &[] }));
    let mut with_body = err.clone();
    with_body.push(0);
    assert_eq!(OpRepr::parse(&with_body), Err(Error::Malformed));
    assert_eq!(Message::new_checked(&put[..10]).unwrap_err(), Error::Truncated);
}

#[test]
fn am_args() {
    let mut args = AmArgs::EMPTY;
    for i in 0..AM_MAX_ARGS as u64 {
        args.push(i).unwrap();
    }
    assert_eq!(args.push(99), Err(99));
    assert_eq!(args.len(), AM_MAX_ARGS);
    assert!(AmArgs::from_slice(&[0; AM_MAX_ARGS + 1]).is_none());
    assert_eq!(AmArgs::from_slice(&[]).unwrap(), AmArgs::default());
    let req = OpRepr::AmRequest(AmRequest { req: 1, handler: 2, want_reply: true, rndv: false, args, body: b"x" });
    assert_eq!(req.header_len(), 8 + 8 * AM_MAX_ARGS);
    let msg = message(&req);
    assert_eq!(msg[1], 0x88);
    let mut bad = msg.clone();
    bad[1] = 0x89;
    assert_eq!(OpRepr::parse(&bad), Err(Error::BadLength), "nine args");
    bad[1] = 0x28;
    assert_eq!(OpRepr::parse(&bad), Err(Error::Malformed), "unknown flag");
    bad[1] = 0x48;
    assert!(matches!(OpRepr::parse(&bad), Ok(OpRepr::AmRequest(AmRequest { rndv: true, want_reply: false, .. }))));
    let reply = message(&OpRepr::AmReply(AmReply {
        req: 1,
        status: Status::NoHandler,
        rndv: false,
        args: AmArgs::EMPTY,
        body: &[],
    }));
    let mut bad = reply.clone();
    bad[1] = 9;
    assert_eq!(OpRepr::parse(&bad), Err(Error::BadLength));
    let mut bad = reply.clone();
    bad[3] = 2;
    assert_eq!(OpRepr::parse(&bad), Err(Error::Malformed), "unknown reply flag");
    bad[3] = 1;
    assert!(matches!(OpRepr::parse(&bad), Ok(OpRepr::AmReply(AmReply { rndv: true, .. }))));
    assert_eq!(req.to_string(), "am req=1 handler=2 want-reply args=[0x0,0x1,0x2,0x3,0x4,0x5,0x6,0x7] len=1");
}

#[test]
fn rndv_descriptor_round_trips_and_rejects_bad_lengths() {
    let desc = RndvDesc { total_len: 16 << 20, key: 0xdead_beef_0123_4567, offset: 4096, token: 77 };
    let bytes = desc.to_bytes();
    assert_eq!(bytes.len(), RndvDesc::LEN);
    assert_eq!(RndvDesc::parse(&bytes), Ok(desc));
    assert_eq!(RndvDesc::parse(&bytes[..31]), Err(Error::Truncated));
    let mut bad = bytes;
    bad[30] = 1;
    assert_eq!(RndvDesc::parse(&bad), Err(Error::Malformed), "reserved bytes");
    let mut long = bytes.to_vec();
    long.push(0);
    assert_eq!(RndvDesc::parse(&long), Err(Error::BadLength));
    // Carried as the body of an AM request and reply.
    let req = OpRepr::AmRequest(AmRequest {
        req: 5,
        handler: 9,
        want_reply: true,
        rndv: true,
        args: AmArgs::from_slice(&[1]).unwrap(),
        body: &bytes,
    });
    let msg = message(&req);
    assert_eq!(OpRepr::parse(&msg), Ok(req));
    assert!(req.to_string().contains("rndv"));
    let OpRepr::AmRequest(back) = OpRepr::parse(&msg).unwrap() else { unreachable!() };
    assert_eq!(RndvDesc::parse(back.body), Ok(desc));
}

#[test]
fn mcast_feedback_ranges_are_ordered_and_bounded() {
    let ok = |contig, done, pairs: &'static [(u32, u32)]| {
        message(&OpRepr::McastFeedback(McastFeedback {
            team: 1,
            transfer: 2,
            contig,
            done,
            missing: McastRanges::from_pairs(pairs),
        }))
    };
    assert!(OpRepr::parse(&ok(0, false, &[(0, 1), (2, 3)])).is_ok());
    for (contig, done, pairs) in [
        (0u32, false, &[(1u32, 1u32)][..]), // empty range
        (0, false, &[(2, 1)][..]),          // backwards
        (0, false, &[(0, 2), (2, 3)][..]),  // touching: would have been one range
        (0, false, &[(4, 5), (1, 2)][..]),  // not ascending
        (5, false, &[(4, 6)][..]),          // below contig
        (0, true, &[(0, 1)][..]),           // done, yet missing something
    ] {
        assert_eq!(OpRepr::parse(&ok(contig, done, pairs)), Err(Error::Malformed), "{contig} {done} {pairs:?}");
    }
    let mut flags = ok(0, false, &[]);
    flags[1] = 2;
    assert_eq!(OpRepr::parse(&flags), Err(Error::Malformed), "unknown flag");
    for at in [4, 7, 28, 31] {
        let mut bad = ok(0, false, &[]);
        bad[at] = 1;
        assert_eq!(OpRepr::parse(&bad), Err(Error::Malformed), "reserved byte {at}");
    }
    let mut count = ok(0, false, &[(0, 1)]);
    count[2] = 2;
    assert_eq!(OpRepr::parse(&count), Err(Error::Truncated), "count beyond the message");
    let mut many = ok(0, false, &[]);
    many[2] = (MCAST_RANGES_MAX + 1) as u8;
    many.resize(mcast_feedback_len(MCAST_RANGES_MAX + 1), 0);
    assert_eq!(OpRepr::parse(&many), Err(Error::BadLength));
}
