//! Packet authentication at the protocol level: with a job key configured,
//! every packet carries a MAC, and forged, bit-flipped, replayed and
//! foreign (other job, other epoch) packets are rejected, counted, and never
//! delivered.

use mw_proto::time::{Duration, Instant};
use mw_proto::{AuthKey, Config, DropReason, Endpoint, Event};
use mw_wire::{Flags, HeaderRepr, PacketType, HEADER_LEN, MAC_LEN};

const JOB_KEY: [u8; 16] = *b"memwire-test-key";

fn at(us: u64) -> Instant {
    Instant::ZERO + Duration::from_micros(us)
}

fn authed() -> Config {
    Config { auth: Some(AuthKey::from_job_key(&JOB_KEY)), ..Config::default() }
}

fn job() -> u64 {
    mw_proto::job_id_from_key(&JOB_KEY)
}

fn pair(config: Config) -> (Endpoint, Endpoint) {
    (Endpoint::new(config.clone(), job(), 0, 0xa, 2), Endpoint::new(config, job(), 1, 0xb, 2))
}

fn drain(ep: &mut Endpoint, now: Instant) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; ep.config().max_datagram];
    std::iter::from_fn(|| ep.poll_transmit(now, &mut buf).map(|t| buf[..t.len].to_vec())).collect()
}

fn feed(ep: &mut Endpoint, now: Instant, packets: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for p in packets {
        let _ = ep.handle_datagram(now, p, &mut |_, m| got.push(m.to_vec()));
    }
    got
}

/// Moves packets both ways until both are quiescent; returns what b got.
/// Every packet moved is also appended to `wire` (a capture).
fn settle(a: &mut Endpoint, b: &mut Endpoint, now: &mut Instant, wire: &mut Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut at_b = Vec::new();
    for _ in 0..10_000 {
        let to_b = drain(a, *now);
        let to_a = drain(b, *now);
        at_b.extend(feed(b, *now, &to_b));
        feed(a, *now, &to_a);
        let idle = to_a.is_empty() && to_b.is_empty();
        wire.extend(to_b);
        wire.extend(to_a);
        if idle {
            if a.is_quiescent() && b.is_quiescent() {
                return at_b;
            }
            let next = [a.poll_timeout(), b.poll_timeout()].into_iter().flatten().min().expect("a timer");
            *now = (*now).max(next);
            a.handle_timeout(*now);
            b.handle_timeout(*now);
        }
    }
    panic!("did not settle");
}

fn no_delivery() -> impl FnMut(u32, &[u8]) {
    |_, m| panic!("{} bytes delivered from a packet that must be rejected", m.len())
}

#[test]
fn every_packet_is_sealed_and_messages_of_every_size_arrive() {
    let (mut a, mut b) = pair(authed());
    assert_eq!(a.config().segment_size(), 1472 - HEADER_LEN - MAC_LEN);
    let sizes = [0usize, 1, 8, 1408, 1409, 5000, 100_000];
    let mut now = at(0);
    for (i, &size) in sizes.iter().enumerate() {
        a.submit(now, 1, &[&vec![i as u8; size]]).unwrap();
    }
    let mut wire = Vec::new();
    let got = settle(&mut a, &mut b, &mut now, &mut wire);
    assert_eq!(got.len(), sizes.len());
    for (i, (m, &size)) in got.iter().zip(&sizes).enumerate() {
        assert_eq!(m, &vec![i as u8; size]);
    }
    for packet in &wire {
        assert!(packet.len() <= 1472);
        let (repr, _) = HeaderRepr::parse_packet(packet).unwrap();
        assert!(repr.flags.contains(Flags::MAC), "{repr} went out unsealed");
    }
    assert_eq!(a.stats().drops.total() + b.stats().drops.total(), 0);

    let mut buf = vec![0u8; 1472];
    let len = a.encode_raw(1, b"raw", &mut buf).unwrap();
    assert_eq!(len, HEADER_LEN + 3 + MAC_LEN);
    b.handle_datagram(now, &buf[..len], &mut no_delivery()).unwrap();
    assert_eq!(b.poll_event(), Some(Event::Raw { peer: 0, data: b"raw".to_vec() }));
    buf[HEADER_LEN] ^= 1;
    assert_eq!(b.handle_datagram(now, &buf[..len], &mut no_delivery()), Err(DropReason::BadMac));
}

#[test]
fn forged_and_bit_flipped_packets_are_rejected_and_counted() {
    let (mut a, mut b) = pair(authed());
    a.submit(at(0), 1, &[b"the real eight bytes"]).unwrap();
    let good = drain(&mut a, at(0)).remove(0);

    // Every single-bit corruption, anywhere in the packet.
    let flips = good.len() * 8;
    for bit in 0..flips {
        let mut bad = good.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(b.handle_datagram(at(1), &bad, &mut no_delivery()).is_err(), "flip of bit {bit} accepted");
    }
    let d = b.stats().drops.clone();
    assert_eq!(d.total(), flips as u64);
    assert_eq!(d.bad_mac + d.not_well_formed() + d.wrong_job, flips as u64);
    assert!(d.bad_mac as usize >= (good.len() - HEADER_LEN) * 8, "payload and MAC flips are MAC failures");

    // A forger who knows the format but not the key: right header, made-up MAC.
    let mut forged = good.clone();
    let payload = HEADER_LEN..good.len() - MAC_LEN;
    forged[payload.clone()].copy_from_slice(&vec![b'!'; payload.len()]);
    assert_eq!(b.handle_datagram(at(1), &forged, &mut no_delivery()), Err(DropReason::BadMac));
    // Same with the MAC stripped (flag cleared, trailer removed).
    let mut stripped = good[..good.len() - MAC_LEN].to_vec();
    let flags = u16::from_le_bytes([stripped[4], stripped[5]]) & !Flags::MAC.bits();
    stripped[4..6].copy_from_slice(&flags.to_le_bytes());
    assert_eq!(b.handle_datagram(at(1), &stripped, &mut no_delivery()), Err(DropReason::BadMac));
    // A peer without authentication (misconfigured, or an attacker's own
    // endpoint with the right job id) is not listened to.
    let mut plain = Endpoint::new(Config::default(), job(), 0, 0xa, 2);
    plain.submit(at(0), 1, &[b"unauthenticated"]).unwrap();
    for p in drain(&mut plain, at(0)) {
        assert_eq!(b.handle_datagram(at(1), &p, &mut no_delivery()), Err(DropReason::BadMac));
    }

    // The genuine packet still gets through, exactly once.
    let got = feed(&mut b, at(2), std::slice::from_ref(&good));
    assert_eq!(got, vec![b"the real eight bytes".to_vec()]);
    assert_eq!(b.stats().drops.bad_mac, d.bad_mac + 3);
}

#[test]
fn replayed_packets_are_never_delivered_twice() {
    let (mut a, mut b) = pair(authed());
    let mut now = at(0);
    let mut wire = Vec::new();
    for i in 0..5u8 {
        a.submit(now, 1, &[&[i; 3000]]).unwrap();
    }
    b.submit(now, 0, &[b"reply"]).unwrap();
    let got = settle(&mut a, &mut b, &mut now, &mut wire);
    assert_eq!(got.len(), 5);
    let delivered_before = b.stats().messages_delivered;

    // Later, more traffic, then an attacker re-sends everything it captured
    // (data, acks, in order and reversed) to both ends.
    now += Duration::from_millis(50);
    a.submit(now, 1, &[b"later"]).unwrap();
    let got = settle(&mut a, &mut b, &mut now, &mut Vec::new());
    assert_eq!(got, vec![b"later".to_vec()]);
    let _ = std::iter::from_fn(|| a.poll_event()).count();
    for replay in [wire.clone(), wire.iter().rev().cloned().collect()] {
        for p in &replay {
            let (repr, _) = HeaderRepr::parse_packet(p).unwrap();
            let to = if repr.dst_rank == 1 { &mut b } else { &mut a };
            let result = to.handle_datagram(now, p, &mut no_delivery());
            if repr.packet_type == PacketType::Data {
                assert_eq!(result, Err(DropReason::Duplicate), "replayed {repr}");
            }
        }
    }
    assert_eq!(b.stats().messages_delivered, delivered_before + 1);
    assert_eq!(a.stats().messages_delivered, 1);
    assert!(b.stats().drops.duplicate > 0);
    // Replayed acks change nothing either: no completion is reported twice.
    assert_eq!(a.poll_event(), None);
    let settled = settle(&mut a, &mut b, &mut now, &mut Vec::new());
    assert!(settled.is_empty());
}

#[test]
fn valid_macs_from_another_job_or_epoch_are_rejected() {
    let (mut a, mut b) = pair(authed());
    let mut now = at(0);
    let mut wire = Vec::new();
    a.submit(now, 1, &[b"first life"]).unwrap();
    settle(&mut a, &mut b, &mut now, &mut wire);

    // Another job: its own key, its own valid MACs. With its own job id the
    // packet is another job's; with ours copied in, the MAC gives it away.
    let other_key = *b"another-job-key!";
    let other = Config { auth: Some(AuthKey::from_job_key(&other_key)), ..Config::default() };
    for job_id in [mw_proto::job_id_from_key(&other_key), job()] {
        let mut c = Endpoint::new(other.clone(), job_id, 0, 0xa, 2);
        c.submit(now, 1, &[b"from another job"]).unwrap();
        let expect = if job_id == job() { DropReason::BadMac } else { DropReason::WrongJob };
        for p in drain(&mut c, now) {
            assert_eq!(b.handle_datagram(now, &p, &mut no_delivery()), Err(expect));
        }
    }

    // Rank 0 restarts (new epoch, same job key) and talks to b again.
    let mut a2 = Endpoint::new(authed(), job(), 0, 0xa2, 2);
    a2.submit(now, 1, &[b"second life"]).unwrap();
    let got = settle(&mut a2, &mut b, &mut now, &mut Vec::new());
    assert_eq!(got, vec![b"second life".to_vec()]);
    // The first incarnation's packets carry valid MACs, yet belong to a
    // retired epoch: nothing of them is delivered.
    for p in &wire {
        let (repr, _) = HeaderRepr::parse_packet(p).unwrap();
        if repr.dst_rank == 1 {
            assert_eq!(b.handle_datagram(now, p, &mut no_delivery()), Err(DropReason::StaleEpoch));
        }
    }
    assert!(b.stats().drops.stale_epoch >= 1);
    assert_eq!(b.stats().peers_restarted, 1);
}

/// Without authentication but with an epoch key (a job on one host): the
/// packets that announce an epoch carry a MAC, the rest none; a forged
/// packet with another source epoch (with or without a made-up MAC, or a
/// corrupted genuine one) is dropped and counted instead of making the
/// peer look restarted, while a real restart is still recognised.
#[test]
fn without_authentication_only_a_proven_packet_changes_an_epoch() {
    for checksum in [false, true] {
        let config =
            Config { epoch_key: Some(AuthKey::epoch_proof_from_job_key(&JOB_KEY)), checksum, ..Config::default() };
        let (mut a, mut b) = pair(config.clone());
        assert_eq!(a.config().segment_size(), 1472 - HEADER_LEN - MAC_LEN, "room for the proof is reserved");
        let mut now = at(0);
        let mut wire = Vec::new();
        a.submit(now, 1, &[b"first life"]).unwrap();
        b.submit(now, 0, &[b"hello"]).unwrap();
        assert_eq!(settle(&mut a, &mut b, &mut now, &mut wire), vec![b"first life".to_vec()]);
        // Only the packets sent before the peer's epoch was known are proofs.
        for p in &wire {
            let (repr, _) = HeaderRepr::parse_packet(p).unwrap();
            assert_eq!(repr.flags.contains(Flags::MAC), repr.dst_epoch == 0, "{repr:?}");
            assert_eq!(repr.flags.contains(Flags::CHECKSUM), checksum && repr.dst_epoch != 0, "{repr:?}");
        }
        assert!(wire.iter().any(|p| !HeaderRepr::parse_packet(p).unwrap().0.flags.contains(Flags::MAC)));

        // Forgeries claiming to be rank 0 in a new life: no MAC, a made-up
        // MAC, and a genuine proof with one bit of its epoch flipped.
        let forged = |flags: Flags, src_epoch: u32| {
            let repr = HeaderRepr {
                packet_type: PacketType::Probe,
                flags,
                payload_len: 0,
                job_id: job(),
                src_rank: 0,
                dst_rank: 1,
                src_epoch,
                dst_epoch: 0,
                seq: 0,
                ack: 0,
                sack: 0,
            };
            let mut p = vec![0u8; repr.buffer_len()];
            repr.emit_into(&mut p);
            if checksum && !flags.contains(Flags::MAC) {
                let end = p.len() - mw_wire::CHECKSUM_LEN;
                let crc = mw_wire::packet_checksum(&p[..end]);
                p[end..].copy_from_slice(&crc.to_le_bytes());
            }
            p
        };
        let no_mac = forged(if checksum { Flags::CHECKSUM } else { Flags::empty() }, 0xbad);
        assert_eq!(b.handle_datagram(now, &no_mac, &mut no_delivery()), Err(DropReason::UnprovenEpoch));
        let made_up = forged(Flags::MAC, 0xbad);
        assert_eq!(b.handle_datagram(now, &made_up, &mut no_delivery()), Err(DropReason::BadMac));
        let proof = wire.iter().find(|p| {
            let (repr, _) = HeaderRepr::parse_packet(p).unwrap();
            repr.dst_rank == 1 && repr.flags.contains(Flags::MAC)
        });
        let mut flipped = proof.expect("a packet to b").clone();
        flipped[HEADER_LEN - 1] ^= 1; // a header byte the MAC covers
        assert!(b.handle_datagram(now, &flipped, &mut no_delivery()).is_err());
        assert_eq!(b.stats().drops.unproven_epoch, 1);
        assert_eq!(b.stats().peers_restarted, 0, "a forgery made the peer look restarted");
        let events: Vec<Event> = std::iter::from_fn(|| b.poll_event()).collect();
        assert!(
            !events.iter().any(|e| matches!(e, Event::PeerRestarted { .. } | Event::PeerDead { .. })),
            "{events:?}"
        );

        // The connection goes on, and a real restart is still recognised.
        a.submit(now, 1, &[b"still here"]).unwrap();
        assert_eq!(settle(&mut a, &mut b, &mut now, &mut Vec::new()), vec![b"still here".to_vec()]);
        let mut a2 = Endpoint::new(config, job(), 0, 0xa2, 2);
        a2.submit(now, 1, &[b"second life"]).unwrap();
        assert_eq!(settle(&mut a2, &mut b, &mut now, &mut Vec::new()), vec![b"second life".to_vec()]);
        assert_eq!(b.stats().peers_restarted, 1);
    }
}
