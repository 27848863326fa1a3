//! Hand-driven tests of the public `Endpoint` API: two or three endpoints,
//! packets moved by the test one at a time, so each protocol rule can be
//! observed in isolation. (Randomized loss, reordering and duplication are
//! the simulator's job: `crates/sim`.)

use mw_proto::time::{Duration, Instant};
use mw_proto::{Config, DropReason, Endpoint, Event, MsgId, SubmitError};
use mw_wire::{HeaderRepr, PacketType, HEADER_LEN};

const JOB: u64 = 42;

fn at(us: u64) -> Instant {
    Instant::ZERO + Duration::from_micros(us)
}

/// Everything `from` wants to send now, as (destination, bytes).
fn drain(ep: &mut Endpoint, now: Instant) -> Vec<(u32, Vec<u8>)> {
    let mut buf = vec![0u8; ep.config().max_datagram];
    let mut out = Vec::new();
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        out.push((t.peer, buf[..t.len].to_vec()));
    }
    out
}

fn events(ep: &mut Endpoint) -> Vec<Event> {
    std::iter::from_fn(|| ep.poll_event()).collect()
}

fn ptype(packet: &[u8]) -> PacketType {
    HeaderRepr::parse_packet(packet).unwrap().0.packet_type
}

/// Feeds `packets` to `ep`, returning the messages delivered.
fn feed(ep: &mut Endpoint, now: Instant, packets: &[(u32, Vec<u8>)]) -> Vec<(u32, Vec<u8>)> {
    let mut got = Vec::new();
    for (_, p) in packets {
        let _ = ep.handle_datagram(now, p, &mut |peer, m| got.push((peer, m.to_vec())));
    }
    got
}

/// Moves packets between two endpoints until neither has anything to send,
/// running timers as virtual time advances. Returns (delivered at a, at b).
fn settle(a: &mut Endpoint, b: &mut Endpoint, now: &mut Instant) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut at_a, mut at_b) = (Vec::new(), Vec::new());
    for _ in 0..10_000 {
        let to_b = drain(a, *now);
        let to_a = drain(b, *now);
        at_b.extend(feed(b, *now, &to_b).into_iter().map(|(_, m)| m));
        at_a.extend(feed(a, *now, &to_a).into_iter().map(|(_, m)| m));
        if to_a.is_empty() && to_b.is_empty() {
            if a.is_quiescent() && b.is_quiescent() {
                return (at_a, at_b);
            }
            let next = [a.poll_timeout(), b.poll_timeout()].into_iter().flatten().min().expect("a timer");
            *now = (*now).max(next);
            a.handle_timeout(*now);
            b.handle_timeout(*now);
        }
    }
    panic!("did not settle");
}

fn pair(config: Config) -> (Endpoint, Endpoint) {
    (Endpoint::new(config.clone(), JOB, 0, 0xa, 2), Endpoint::new(config, JOB, 1, 0xb, 2))
}

#[test]
fn messages_of_every_size_arrive_in_order_and_are_acked() {
    let config = Config { max_datagram: 200, ..Config::default() };
    let seg = config.segment_size();
    let (mut a, mut b) = pair(config);
    let sizes = [0, 1, seg - 1, seg, seg + 1, 3 * seg, 100_000];
    let messages: Vec<Vec<u8>> = sizes.iter().map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect()).collect();
    for (i, m) in messages.iter().enumerate() {
        let (x, y) = m.split_at(m.len() / 3);
        assert_eq!(a.submit(at(0), 1, &[x, y]), Ok(MsgId(i as u64)));
    }
    let mut now = at(0);
    let (_, at_b) = settle(&mut a, &mut b, &mut now);
    assert_eq!(at_b, messages);
    assert_eq!(events(&mut a), vec![Event::Acked { peer: 1, upto: MsgId(6) }]);
    assert_eq!(a.unacked_messages(1), 0);
    assert_eq!(b.stats().messages_delivered, 7);
}

#[test]
fn sequence_numbers_wrap_around() {
    let config = Config { initial_seq: u32::MAX - 5, max_datagram: 100, ..Config::default() };
    let (mut a, mut b) = pair(config);
    let m: Vec<u8> = (0..2_000u32).map(|i| i as u8).collect();
    for _ in 0..5 {
        a.submit(at(0), 1, &[&m]).unwrap();
        b.submit(at(0), 0, &[&m[..10]]).unwrap();
    }
    let mut now = at(0);
    let (at_a, at_b) = settle(&mut a, &mut b, &mut now);
    assert_eq!(at_b, vec![m.clone(); 5]);
    assert_eq!(at_a, vec![m[..10].to_vec(); 5]);
    assert!(b.peer_stats(0).unwrap().rcv_nxt < 1000, "wrapped past zero");
}

/// The layer above answers a message with an error reply right after it is
/// delivered. The sender must see the reply before the message completes,
/// even when the ack overtakes the reply on the wire.
#[test]
fn causal_completion_reply_arrives_before_ack() {
    let (mut a, mut b) = pair(Config::default());
    // B has a long message queued toward A, so a reply it submits later
    // waits behind it while B's ack of A's put can go out at once.
    let bulk = vec![7u8; 300_000];
    b.submit(at(0), 0, &[&bulk]).unwrap();
    let put = a.submit(at(0), 1, &[b"put"]).unwrap();
    a.request_ack(at(0), 1);
    let to_b = drain(&mut a, at(0));
    let first_b = drain(&mut b, at(0)); // the window's worth of bulk
    let delivered = feed(&mut b, at(1), &to_b);
    assert_eq!(delivered, vec![(0, b"put".to_vec())]);
    b.submit(at(1), 0, &[b"error: out of bounds"]).unwrap();
    let to_a = drain(&mut b, at(1));
    assert_eq!(ptype(&to_a[0].1), PacketType::Ack, "standalone ack: the next data packet is not the reply");
    // The ack arrives first: the put is acknowledged but must not complete yet.
    let _ = feed(&mut a, at(2), &to_a[..1]);
    assert_eq!(a.unacked_messages(1), 1);
    assert!(events(&mut a).is_empty(), "Acked before the reply was delivered");
    // The rest of the bulk and the reply arrive; only then the put completes.
    let mut now = at(2);
    let mut got = feed(&mut a, now, &first_b);
    got.extend(feed(&mut a, now, &to_a[1..]));
    let (rest, _) = settle(&mut a, &mut b, &mut now);
    got.extend(rest.into_iter().map(|m| (1, m)));
    assert_eq!(got.last(), Some(&(1, b"error: out of bounds".to_vec())));
    assert!(events(&mut a).contains(&Event::Acked { peer: 1, upto: put }));
}

#[test]
fn invalid_packets_are_dropped_and_counted() {
    let (mut a, mut b) = pair(Config::default());
    let mut c = Endpoint::new(Config::default(), JOB + 1, 0, 0xc, 2);
    c.submit(at(0), 1, &[b"x"]).unwrap();
    let foreign = drain(&mut c, at(0));
    let mut none = |_: u32, _: &[u8]| panic!("nothing may be delivered");
    assert_eq!(b.handle_datagram(at(0), &foreign[0].1, &mut none), Err(DropReason::WrongJob));

    a.submit(at(0), 1, &[b"hello"]).unwrap();
    let good = drain(&mut a, at(0)).remove(0).1;
    let mut bad = good.clone();
    bad[20] = 0; // dst rank 0: not b
    assert_eq!(b.handle_datagram(at(0), &bad, &mut none), Err(DropReason::WrongTarget));
    let mut bad = good.clone();
    bad[16] = 9; // src rank 9 of a 2-rank job
    assert_eq!(b.handle_datagram(at(0), &bad, &mut none), Err(DropReason::UnknownPeer));
    let mut bad = good.clone();
    bad[16] = 1; // claims to be b itself
    assert_eq!(b.handle_datagram(at(0), &bad, &mut none), Err(DropReason::UnknownPeer));
    let truncated = Err(DropReason::Malformed(mw_wire::Error::Truncated));
    assert_eq!(b.handle_datagram(at(0), &good[..30], &mut none), truncated);
    assert_eq!(b.handle_datagram(at(0), b"garbage", &mut none), truncated);
    let mut bad = good.clone();
    bad[28..32].copy_from_slice(&0x99u32.to_le_bytes()); // for an earlier incarnation of b
    assert_eq!(b.handle_datagram(at(0), &bad, &mut none), Err(DropReason::StaleEpoch));
    let reset = drain(&mut b, at(0));
    assert_eq!(reset.len(), 1);
    assert_eq!(ptype(&reset[0].1), PacketType::Reset);

    let mut got = Vec::new();
    b.handle_datagram(at(0), &good, &mut |_, m| got.push(m.to_vec())).unwrap();
    assert_eq!(b.handle_datagram(at(0), &good, &mut none), Err(DropReason::Duplicate));
    assert_eq!(got, vec![b"hello".to_vec()]);
    let d = &b.stats().drops;
    assert_eq!(
        (d.wrong_job, d.wrong_target, d.unknown_peer, d.truncated, d.stale_epoch, d.duplicate),
        (1, 1, 2, 2, 1, 1)
    );
    assert_eq!(d.total(), 8);
}

/// Feeds `datagram` to `ep` and checks that it was rejected with `want` and
/// counted under `counter` alone.
fn rejected_and_counted(ep: &mut Endpoint, datagram: &[u8], want: DropReason, counter: &str) {
    let before = ep.stats().drops.clone();
    let got = ep.handle_datagram(at(0), datagram, &mut |_, _| panic!("nothing may be delivered"));
    assert_eq!(got, Err(want), "{counter}");
    let after = ep.stats().drops.clone();
    for ((name, old), (_, new)) in before.by_reason().into_iter().zip(after.by_reason()) {
        let step = if name == counter { 1 } else { 0 };
        assert_eq!(new, old + step, "counter {name} after a {counter} datagram");
    }
}

#[test]
fn each_kind_of_bad_datagram_has_its_own_counter() {
    use mw_wire::Error;
    let (mut a, mut b) = pair(Config::default());
    a.submit(at(0), 1, &[b"hello"]).unwrap();
    let good = drain(&mut a, at(0)).remove(0).1;
    let malformed = DropReason::Malformed;

    let mut bad = good.clone();
    bad[2] = mw_wire::VERSION + 1;
    rejected_and_counted(&mut b, &bad, malformed(Error::BadVersion), "bad_version");
    let mut bad = good.clone();
    bad[0] ^= 0xff;
    rejected_and_counted(&mut b, &bad, malformed(Error::BadMagic), "bad_magic");
    rejected_and_counted(&mut b, &good[..HEADER_LEN - 1], malformed(Error::Truncated), "truncated");
    rejected_and_counted(&mut b, &good[..good.len() - 1], malformed(Error::Truncated), "truncated");
    let mut bad = good.clone();
    bad.push(0);
    rejected_and_counted(&mut b, &bad, malformed(Error::BadLength), "bad_length");
    let mut bad = good.clone();
    bad[3] = 0x42;
    rejected_and_counted(&mut b, &bad, malformed(Error::UnknownType), "unknown_type");
    let mut bad = good.clone();
    bad[5] = 0x80; // a reserved flag bit
    rejected_and_counted(&mut b, &bad, malformed(Error::Malformed), "malformed");
    let mut bad = good.clone();
    bad[8] ^= 1;
    rejected_and_counted(&mut b, &bad, DropReason::WrongJob, "wrong_job");
    // Longer than max_datagram, whatever its header says: no rank built it.
    let mut big = good.clone();
    big.resize(b.config().max_datagram + 1, 0);
    rejected_and_counted(&mut b, &big, DropReason::Oversized, "oversized");
    let mut bad = good.clone();
    bad[4] |= mw_wire::Flags::CHECKSUM.bits() as u8;
    bad.extend_from_slice(&[0; mw_wire::CHECKSUM_LEN]);
    rejected_and_counted(&mut b, &bad, DropReason::BadChecksum, "bad_checksum");

    // None of it disturbed the connection.
    let mut got = Vec::new();
    b.handle_datagram(at(0), &good, &mut |_, m| got.push(m.to_vec())).unwrap();
    assert_eq!(got, vec![b"hello".to_vec()]);
}

/// A Data packet from rank 0 (epoch 0xa) to rank 1, built by hand.
fn data_packet(seq: u32, flags: mw_wire::Flags, payload: &[u8]) -> Vec<u8> {
    let repr = HeaderRepr {
        packet_type: PacketType::Data,
        flags,
        payload_len: payload.len() as u16,
        job_id: JOB,
        src_rank: 0,
        dst_rank: 1,
        src_epoch: 0xa,
        dst_epoch: 0,
        seq,
        ack: 0,
        sack: 0,
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit_into(&mut buf);
    buf[HEADER_LEN..].copy_from_slice(payload);
    buf
}

#[test]
fn endless_continuation_segments_cannot_grow_reassembly_memory() {
    use mw_wire::Flags;
    let config = Config { max_message: 64 << 10, ..Config::default() };
    let (mut a, mut b) = pair(config.clone());
    assert_eq!(a.submit(at(0), 1, &[&vec![0u8; (64 << 10) + 1]]), Err(SubmitError::TooLarge));
    let segment = vec![0x5au8; config.segment_size()];
    let mut none = |_: u32, _: &[u8]| panic!("nothing may be delivered");
    b.handle_datagram(at(0), &data_packet(0, Flags::FIRST, &segment), &mut none).unwrap();
    let fit = (64 << 10) / segment.len(); // segments that still fit, FIRST included
    let endless = 5_000u32; // ~7 MB if it were all kept
    for seq in 1..=endless {
        let result = b.handle_datagram(at(0), &data_packet(seq, Flags::empty(), &segment), &mut none);
        if (seq as usize) < fit {
            assert_eq!(result, Ok(()));
        } else {
            assert_eq!(result, Err(DropReason::OversizedMessage), "seq {seq}");
        }
        let held = b.peer_stats(0).unwrap().reassembly_bytes;
        assert!(held <= config.max_message, "{held} bytes held at seq {seq}");
    }
    let stats = b.peer_stats(0).unwrap();
    assert_eq!(stats.rcv_nxt, endless + 1, "every segment is consumed, so the peer is acked, not stuck");
    assert_eq!(b.stats().drops.oversized_message, u64::from(endless) + 1 - fit as u64);
    // The stream recovers at the next message.
    let end = data_packet(endless + 1, Flags::LAST, &segment);
    assert_eq!(b.handle_datagram(at(0), &end, &mut none), Err(DropReason::OversizedMessage));
    let mut got = Vec::new();
    let next = data_packet(endless + 2, Flags::FIRST | Flags::LAST, b"after");
    b.handle_datagram(at(0), &next, &mut |_, m| got.push(m.to_vec())).unwrap();
    assert_eq!(got, vec![b"after".to_vec()]);
    assert_eq!(b.peer_stats(0).unwrap().reassembly_bytes, 0);
}

#[test]
fn checksummed_packets_corrupted_anywhere_are_rejected_and_counted() {
    let config = Config { checksum: true, ..Config::default() };
    let (mut a, mut b) = pair(config);
    a.submit(at(0), 1, &[b"8 bytes!"]).unwrap();
    let good = drain(&mut a, at(0)).remove(0).1;
    assert_eq!(good.len(), HEADER_LEN + 8 + mw_wire::CHECKSUM_LEN);
    let mut rejected = 0;
    for position in 0..good.len() {
        for mask in 1..=255u8 {
            let mut bad = good.clone();
            bad[position] ^= mask;
            let counter = match position {
                0 | 1 => "bad_magic",
                2 => "bad_version",
                _ => "bad_checksum",
            };
            let want = match counter {
                "bad_magic" => DropReason::Malformed(mw_wire::Error::BadMagic),
                "bad_version" => DropReason::Malformed(mw_wire::Error::BadVersion),
                _ => DropReason::BadChecksum,
            };
            rejected_and_counted(&mut b, &bad, want, counter);
            rejected += 1;
        }
    }
    // Every truncation, too.
    for len in 0..good.len() {
        let got = b.handle_datagram(at(0), &good[..len], &mut |_, _| panic!("nothing may be delivered"));
        assert!(got.is_err(), "a packet cut to {len} bytes was accepted");
        rejected += 1;
    }
    assert_eq!(b.stats().drops.total(), rejected);
    assert_eq!(b.stats().drops.bad_checksum, (good.len() as u64 - 3) * 255 + good.len() as u64 - HEADER_LEN as u64);
    let mut got = Vec::new();
    b.handle_datagram(at(0), &good, &mut |_, m| got.push(m.to_vec())).unwrap();
    assert_eq!(got, vec![b"8 bytes!".to_vec()]);
}

#[test]
fn ranks_that_disagree_on_checksums_do_not_talk() {
    let (mut plain, _) = pair(Config::default());
    let (_, mut checked) = pair(Config { checksum: true, ..Config::default() });
    plain.submit(at(0), 1, &[b"x"]).unwrap();
    let packet = drain(&mut plain, at(0)).remove(0).1;
    rejected_and_counted(&mut checked, &packet, DropReason::BadChecksum, "bad_checksum");
    let (mut crc, _) = pair(Config { checksum: true, ..Config::default() });
    let (_, mut plain_b) = pair(Config::default());
    crc.submit(at(0), 1, &[b"x"]).unwrap();
    let packet = drain(&mut crc, at(0)).remove(0).1;
    rejected_and_counted(&mut plain_b, &packet, DropReason::BadChecksum, "bad_checksum");
}

#[test]
fn checksummed_traffic_of_every_kind_flows() {
    let config = Config { checksum: true, max_datagram: 300, ..Config::default() };
    let (mut a, mut b) = pair(config);
    let big: Vec<u8> = (0..5_000u32).map(|i| i as u8).collect();
    a.submit(at(0), 1, &[&big]).unwrap();
    b.submit(at(0), 0, &[b"reply"]).unwrap();
    let mut now = at(0);
    let (at_a, at_b) = settle(&mut a, &mut b, &mut now);
    assert_eq!((at_a, at_b), (vec![b"reply".to_vec()], vec![big]));
    let mut buf = vec![0u8; 300];
    let len = a.encode_raw(1, b"raw", &mut buf).unwrap();
    assert_eq!(len, HEADER_LEN + 3 + mw_wire::CHECKSUM_LEN);
    b.handle_datagram(now, &buf[..len], &mut |_, _| panic!("raw is not a message")).unwrap();
    assert_eq!(a.stats().drops.total() + b.stats().drops.total(), 0);
}

#[test]
fn submit_and_raw_errors() {
    let (mut a, mut b) = pair(Config::default());
    assert_eq!(a.submit(at(0), 0, &[b"me"]), Err(SubmitError::BadRank));
    assert_eq!(a.submit(at(0), 2, &[b"nobody"]), Err(SubmitError::BadRank));
    let mut buf = vec![0u8; 1472];
    let big = vec![0u8; a.config().segment_size() + 1];
    assert_eq!(a.encode_raw(1, &big, &mut buf), Err(SubmitError::TooLarge));
    assert_eq!(a.encode_raw(5, b"x", &mut buf), Err(SubmitError::BadRank));
    assert_eq!(a.encode_raw(1, b"x", &mut buf[..HEADER_LEN]), Err(SubmitError::BufferTooSmall));
    let len = a.encode_raw(1, b"unreliable", &mut buf).unwrap();
    b.handle_datagram(at(0), &buf[..len], &mut |_, _| panic!("raw is not a message")).unwrap();
    assert_eq!(events(&mut b), vec![Event::Raw { peer: 0, data: b"unreliable".to_vec() }]);
}

#[test]
fn silent_peer_is_declared_dead_and_everything_fails() {
    let config = Config::default();
    let dead_after = config.peer_dead_after;
    let (mut a, _b) = pair(config);
    a.submit(at(0), 1, &[b"one"]).unwrap();
    a.submit(at(0), 1, &[&[0u8; 10_000]]).unwrap();
    let mut now = at(0);
    let mut sent = drain(&mut a, now).len();
    while a.peer_stats(1).is_some_and(|s| !s.dead) {
        now = a.poll_timeout().expect("a timer while waiting");
        a.handle_timeout(now);
        sent += drain(&mut a, now).len();
    }
    assert_eq!(now, at(0) + dead_after, "dead exactly after peer_dead_after of silence");
    assert!(sent > 15, "retransmitted with backoff meanwhile ({sent} packets)");
    assert_eq!(events(&mut a), vec![Event::PeerDead { peer: 1 }]);
    assert_eq!(a.unacked_messages(1), 0);
    assert_eq!(a.queued_bytes(1), 0);
    assert!(a.is_quiescent());
    assert_eq!(a.submit(now, 1, &[b"late"]), Err(SubmitError::PeerDead));
    assert_eq!(a.poll_timeout(), None, "no timers toward a dead peer");
}

#[test]
fn restarted_peer_is_noticed_and_talked_to_anew() {
    let (mut a, mut b) = pair(Config::default());
    let mut now = at(0);
    a.submit(now, 1, &[b"before"]).unwrap();
    settle(&mut a, &mut b, &mut now);
    assert_eq!(events(&mut a), vec![Event::Acked { peer: 1, upto: MsgId(0) }]);
    // b restarts with a new epoch while a has a message in flight to it.
    let mut b = Endpoint::new(Config::default(), JOB, 1, 0xbb, 2);
    a.submit(now, 1, &[b"lost with the old b"]).unwrap();
    let to_b = drain(&mut a, now);
    let mut none = |_: u32, _: &[u8]| panic!("old-connection data must not reach the new b");
    for (_, p) in &to_b {
        assert_eq!(b.handle_datagram(now, p, &mut none), Err(DropReason::StaleEpoch));
    }
    let reset = drain(&mut b, now);
    let _ = feed(&mut a, now, &reset);
    assert_eq!(events(&mut a), vec![Event::PeerRestarted { peer: 1, failed_upto: Some(MsgId(1)) }]);
    assert_eq!(a.unacked_messages(1), 0);
    // Ids keep counting; the new connection delivers from the start.
    assert_eq!(a.submit(now, 1, &[b"after"]), Ok(MsgId(2)));
    let (_, at_b) = settle(&mut a, &mut b, &mut now);
    assert_eq!(at_b, vec![b"after".to_vec()]);
    assert_eq!(events(&mut a), vec![Event::Acked { peer: 1, upto: MsgId(2) }]);
}

#[test]
fn request_ack_gets_a_prompt_ack() {
    let (mut a, mut b) = pair(Config::default());
    a.submit(at(0), 1, &[b"put"]).unwrap();
    let to_b = drain(&mut a, at(0));
    let _ = feed(&mut b, at(1), &to_b);
    assert!(drain(&mut b, at(1)).is_empty(), "the ack is delayed by default");
    // The caller starts waiting: a probe asks for the ack now.
    a.request_ack(at(2), 1);
    let probe = drain(&mut a, at(2));
    assert_eq!(probe.len(), 1);
    assert_eq!(ptype(&probe[0].1), PacketType::Probe);
    a.request_ack(at(2), 1);
    assert!(drain(&mut a, at(2)).is_empty(), "one probe until progress");
    let _ = feed(&mut b, at(3), &probe);
    let ack = drain(&mut b, at(3));
    assert_eq!(ptype(&ack[0].1), PacketType::Ack);
    let _ = feed(&mut a, at(4), &ack);
    assert_eq!(events(&mut a), vec![Event::Acked { peer: 1, upto: MsgId(0) }]);
    assert!(a.peer_stats(1).unwrap().srtt.is_some());
}

#[test]
fn loss_is_repaired_by_nack_without_waiting_for_the_timeout() {
    let (mut a, mut b) = pair(Config::default());
    for i in 0..10u8 {
        a.submit(at(0), 1, &[&[i; 100]]).unwrap();
    }
    let mut packets = drain(&mut a, at(0));
    packets.remove(3); // lost
    let got = feed(&mut b, at(10), &packets);
    assert_eq!(got.len(), 3, "delivery stops at the hole");
    let answer = drain(&mut b, at(10));
    assert!(answer.iter().any(|(_, p)| ptype(p) == PacketType::Nack));
    assert_eq!(b.stats().nacks_sent, 1, "one Nack per hole, not one per packet after it");
    let _ = feed(&mut a, at(20), &answer);
    let repair = drain(&mut a, at(20));
    assert_eq!(repair.len(), 1);
    assert_eq!(a.stats().retransmits_fast, 1);
    let got = feed(&mut b, at(30), &repair);
    assert_eq!(got.len(), 7, "the hole and everything buffered after it");
    assert_eq!(a.stats().retransmits_timeout, 0);
}

#[test]
fn keepalive_notices_an_idle_peer_dying() {
    let config = Config { keepalive: Some(Duration::from_millis(10)), ..Config::default() };
    let dead_after = config.peer_dead_after;
    let (mut a, mut b) = pair(config);
    let mut now = at(0);
    a.submit(now, 1, &[b"hello"]).unwrap();
    settle_until_idle(&mut a, &mut b, &mut now, at(50_000));
    assert_eq!(events(&mut a), vec![Event::Acked { peer: 1, upto: MsgId(0) }]);
    assert!(a.stats().probes_sent > 0, "idle peers are probed and answer");
    // b dies; a has nothing to send but keeps probing and gives up.
    let died = now;
    while a.peer_stats(1).is_some_and(|s| !s.dead) {
        now = a.poll_timeout().expect("keepalive timers while b is silent");
        a.handle_timeout(now);
        drain(&mut a, now);
    }
    assert!(now <= died + Duration::from_millis(10) + dead_after, "dead at {now:?}");
    assert_eq!(events(&mut a), vec![Event::PeerDead { peer: 1 }]);
}

/// Like `settle`, but keeps running timers (keepalives) until `end`.
fn settle_until_idle(a: &mut Endpoint, b: &mut Endpoint, now: &mut Instant, end: Instant) {
    while *now < end {
        let to_b = drain(a, *now);
        let to_a = drain(b, *now);
        feed(b, *now, &to_b);
        feed(a, *now, &to_a);
        if to_a.is_empty() && to_b.is_empty() {
            let next = [a.poll_timeout(), b.poll_timeout()].into_iter().flatten().min().unwrap_or(end);
            *now = next.min(end);
            a.handle_timeout(*now);
            b.handle_timeout(*now);
        }
    }
}

/// The whole job is stopped (SIGSTOP for gang scheduling) far longer than
/// `peer_dead_after`, then resumed: nobody is declared dead, because each
/// endpoint sees that it was itself not running when its timers were due.
#[test]
fn a_job_stopped_and_resumed_declares_nobody_dead() {
    let config = Config { keepalive: Some(Duration::from_millis(10)), ..Config::default() };
    let dead_after = config.peer_dead_after;
    let (mut a, mut b) = pair(config);
    let mut now = at(0);
    a.submit(now, 1, &[b"before"]).unwrap();
    settle_until_idle(&mut a, &mut b, &mut now, at(30_000));
    // Data in flight when the job stops: a sent it, b has not read it yet.
    a.submit(now, 1, &[b"in flight"]).unwrap();
    let in_flight = drain(&mut a, now);
    now += dead_after * 5;
    // On resume a's timers fire first (the worst order): late, so forgiven.
    a.handle_timeout(now);
    b.handle_timeout(now);
    let got = feed(&mut b, now, &in_flight);
    assert_eq!(got, vec![(0, b"in flight".to_vec())]);
    let end = now + Duration::from_millis(300);
    settle_until_idle(&mut a, &mut b, &mut now, end);
    assert!(a.peer_stats(1).is_some_and(|s| !s.dead) && b.peer_stats(0).is_some_and(|s| !s.dead));
    assert!(!events(&mut a).iter().any(|e| matches!(e, Event::PeerDead { .. })));
    assert!(!events(&mut b).iter().any(|e| matches!(e, Event::PeerDead { .. })));
    assert!(a.stats().stalls_forgiven >= 1 && b.stats().stalls_forgiven >= 1);
}

/// Only one side stops: the other keeps running its timers on time, so it
/// does declare the silent one dead within the deadline.
#[test]
fn a_peer_that_alone_stops_is_declared_dead() {
    let config = Config { keepalive: Some(Duration::from_millis(10)), ..Config::default() };
    let dead_after = config.peer_dead_after;
    let (mut a, mut b) = pair(config);
    let mut now = at(0);
    a.submit(now, 1, &[b"hello"]).unwrap();
    settle_until_idle(&mut a, &mut b, &mut now, at(30_000));
    let stopped = now;
    while a.peer_stats(1).is_some_and(|s| !s.dead) {
        now = a.poll_timeout().expect("a keeps probing");
        a.handle_timeout(now);
        drain(&mut a, now);
    }
    assert!(now <= stopped + Duration::from_millis(10) + dead_after, "dead at {now:?}");
    assert_eq!(a.stats().stalls_forgiven, 0, "a ran on time");
}

#[test]
fn a_spurious_timeout_does_not_make_the_packets_behind_it_look_lost() {
    // The peer is only slow (descheduled), not losing anything: the RTO
    // retransmits the oldest packet, then the peer's ack for the originals
    // arrives. That ack covers the retransmitted sequence number; it must not
    // make the packets sent between the original and the retransmission
    // count as lost (they are merely in flight behind it).
    let (mut a, mut b) = pair(Config::default());
    for i in 0..10u8 {
        a.submit(at(0), 1, &[&[i; 100]]).unwrap();
    }
    let packets = drain(&mut a, at(0));
    assert_eq!(packets.len(), 10);
    assert_eq!(feed(&mut b, at(10), &packets[..5]).len(), 5);
    let rto = a.poll_timeout().expect("the RTO is armed");
    a.handle_timeout(rto);
    let again = drain(&mut a, rto);
    assert_eq!(again.len(), 1, "the RTO retransmits the oldest packet");
    assert_eq!(a.stats().retransmits_timeout, 1);
    // The peer's delayed ack for the first five, sent before the retransmission arrived.
    let late = at(10) + a.config().max_ack_delay;
    b.handle_timeout(late);
    let ack = drain(&mut b, late);
    assert_eq!(ack.len(), 1);
    let _ = feed(&mut a, rto + Duration::from_micros(1), &ack);
    assert!(drain(&mut a, rto + Duration::from_micros(1)).is_empty(), "nothing is deemed lost");
    assert_eq!(a.stats().retransmits_fast, 0);
    let window = a.peer_stats(1).unwrap().cwnd;
    assert_eq!(window, Config::default().initial_window, "the RTO's window collapse is undone");
    // The rest arrives; the retransmission is the only duplicate.
    assert_eq!(feed(&mut b, rto, &packets[5..]).len(), 5);
    assert_eq!(feed(&mut b, rto, &again).len(), 0);
    let mut now = rto;
    settle(&mut a, &mut b, &mut now);
    assert_eq!(b.stats().drops.duplicate, 1);
    assert_eq!(a.stats().retransmits_fast + a.stats().retransmits_timeout, 1);
}

/// Everything `ep` wants to send now, built with `poll_transmit_parts`.
fn drain_parts(ep: &mut Endpoint, now: Instant) -> Vec<(u32, Vec<u8>)> {
    let mut head = [0u8; HEADER_LEN + mw_proto::TRAILER_RESERVE];
    let mut out = Vec::new();
    while let Some(t) = ep.poll_transmit_parts(now, &mut head) {
        let bytes = t.slices().concat();
        let mut copied = vec![0u8; t.len()];
        assert_eq!(t.copy_to(&mut copied), bytes.len());
        assert_eq!(copied, bytes);
        out.push((t.peer, bytes));
    }
    out
}

#[test]
fn vectored_transmit_sends_the_same_bytes_as_copied_transmit() {
    // Two identical senders driven identically, one emitting with
    // poll_transmit, the other with poll_transmit_parts: every datagram must
    // be byte-identical, also when payloads wrap around the stream ring and
    // with authentication (the MAC over the parts) or checksums (the CRC32C
    // over the parts).
    let auth = Some(mw_proto::AuthKey::from_job_key(&[7; 16]));
    for (auth, checksum) in [(None, false), (auth, false), (None, true)] {
        let config = Config { max_datagram: 300, auth, checksum, ..Config::default() };
        let (mut copied, mut copied_peer) = pair(config.clone());
        let (mut vectored, mut vectored_peer) = pair(config);
        let mut now = at(0);
        for round in 0..40u32 {
            let size = (round as usize * 97) % 700;
            let body: Vec<u8> = (0..size).map(|i| (i as u32 * 31 + round) as u8).collect();
            for ep in [&mut copied, &mut vectored] {
                ep.submit(now, 1, &[&body[..size / 2], &body[size / 2..]]).unwrap();
            }
            now += Duration::from_micros(5);
            let sent_copied = drain(&mut copied, now);
            let sent_vectored = drain_parts(&mut vectored, now);
            assert_eq!(sent_copied, sent_vectored, "round {round}");
            // Deliver all but every third packet, so retransmissions happen too.
            let keep: Vec<_> =
                sent_copied.iter().enumerate().filter(|(i, _)| i % 3 != 2).map(|(_, p)| p.clone()).collect();
            let got = feed(&mut copied_peer, now, &keep);
            assert_eq!(got, feed(&mut vectored_peer, now, &keep));
            let acks = drain(&mut copied_peer, now);
            assert_eq!(acks, drain(&mut vectored_peer, now));
            let _ = feed(&mut copied, now, &acks);
            let _ = feed(&mut vectored, now, &acks);
            if round % 5 == 4 {
                now += Duration::from_millis(2);
                copied.handle_timeout(now);
                vectored.handle_timeout(now);
            }
        }
        assert!(copied.stats().retransmits_fast + copied.stats().retransmits_timeout > 0);
        assert_eq!(copied.stats(), vectored.stats());
    }
}

#[test]
fn a_genuine_timeout_repairs_the_whole_lost_tail() {
    // The last five packets are all lost. The RTO resends the oldest of them;
    // its ack (covering nothing older) shows the path works, so the packets
    // sent before that retransmission and still unacked count as lost and
    // are resent at once, not one RTO each.
    let (mut a, mut b) = pair(Config::default());
    for i in 0..10u8 {
        a.submit(at(0), 1, &[&[i; 100]]).unwrap();
    }
    let packets = drain(&mut a, at(0));
    assert_eq!(feed(&mut b, at(10), &packets[..5]).len(), 5);
    let late = at(10) + a.config().max_ack_delay;
    b.handle_timeout(late);
    let _ = feed(&mut a, late, &drain(&mut b, late));
    let rto = a.poll_timeout().expect("the RTO is armed");
    a.handle_timeout(rto);
    let again = drain(&mut a, rto);
    assert_eq!(again.len(), 1);
    assert_eq!(feed(&mut b, rto, &again).len(), 1);
    let ack = drain(&mut b, rto);
    let _ = feed(&mut a, rto, &ack);
    let repair = drain(&mut a, rto);
    assert!(repair.len() >= 2, "the rest of the tail is resent without waiting (as the window allows)");
    let mut now = rto;
    let _ = feed(&mut b, now, &repair);
    let (_, delivered) = settle(&mut a, &mut b, &mut now);
    assert_eq!(delivered.len() + repair.len(), 4, "each lost packet delivered once");
    assert_eq!(a.stats().retransmits_timeout, 1, "one RTO for the whole tail");
    assert_eq!(a.stats().retransmits_fast, 4);
}
