//! Flow and congestion control and acknowledgement timing, observed through
//! the public `Endpoint` API with packets moved by hand: the window shrinks
//! on a Nack and grows back on acks, unacknowledged bytes are capped, acks
//! are delayed and coalesced (at most `ack_every` packets, at most
//! `max_ack_delay`), and ride on reverse Data when there is some.

use mw_proto::time::{Duration, Instant};
use mw_proto::{Config, Endpoint, Event, MsgId};
use mw_wire::{Flags, HeaderRepr, PacketType};

const JOB: u64 = 7;

fn at(us: u64) -> Instant {
    Instant::ZERO + Duration::from_micros(us)
}

fn pair(config: Config) -> (Endpoint, Endpoint) {
    (Endpoint::new(config.clone(), JOB, 0, 0xa, 2), Endpoint::new(config, JOB, 1, 0xb, 2))
}

fn drain(ep: &mut Endpoint, now: Instant) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; ep.config().max_datagram];
    std::iter::from_fn(|| ep.poll_transmit(now, &mut buf).map(|t| buf[..t.len].to_vec())).collect()
}

fn feed(ep: &mut Endpoint, now: Instant, packets: &[Vec<u8>]) -> usize {
    let mut delivered = 0;
    for p in packets {
        let _ = ep.handle_datagram(now, p, &mut |_, _| delivered += 1);
    }
    delivered
}

fn header(packet: &[u8]) -> HeaderRepr {
    HeaderRepr::parse_packet(packet).unwrap().0
}

fn events(ep: &mut Endpoint) -> Vec<Event> {
    std::iter::from_fn(|| ep.poll_event()).collect()
}

/// One loss in a window of 16, RTT steady: within the default loss
/// tolerance, so the hole is resent at once and the window keeps its size.
#[test]
fn a_single_random_loss_is_resent_without_shrinking_the_window() {
    let config = Config { initial_window: 16, ack_every: 1, ..Config::default() };
    assert!(config.loss_tolerance_pct > 0);
    let (mut a, mut b) = pair(config);
    for _ in 0..400 {
        a.submit(at(0), 1, &[&[3u8; 1000]]).unwrap();
    }
    let mut lost = drain(&mut a, at(0));
    lost.remove(3);
    feed(&mut b, at(10), &lost);
    let answers = drain(&mut b, at(10));
    feed(&mut a, at(20), &answers);
    let s = a.peer_stats(1).unwrap();
    assert!(s.cwnd >= 16, "no decrease for one random loss: cwnd {}", s.cwnd);
    assert_eq!(s.ssthresh, Config::default().max_window, "still in slow start");
    let next = drain(&mut a, at(20));
    assert_eq!(header(&next[0]).seq, 3, "the hole goes first");
    assert_eq!(a.stats().retransmits_fast, 1);
}

/// RFC 5681's reaction (`loss_tolerance_pct: 0`): every loss event halves.
#[test]
fn window_shrinks_on_nack_and_grows_back_on_acks() {
    let config = Config { initial_window: 16, ack_every: 1, loss_tolerance_pct: 0, ..Config::default() };
    let (mut a, mut b) = pair(config);
    for _ in 0..400 {
        a.submit(at(0), 1, &[&[3u8; 1000]]).unwrap();
    }
    let first = drain(&mut a, at(0));
    assert_eq!(first.len(), 16, "the initial window");
    let s = a.peer_stats(1).unwrap();
    assert_eq!((s.cwnd, s.inflight), (16, 16));
    assert_eq!(s.inflight_bytes, 16 * 1000);
    // Packet 3 is lost; the others arrive and b answers (a Nack for the hole).
    let mut lost = first.clone();
    lost.remove(3);
    feed(&mut b, at(10), &lost);
    let answers = drain(&mut b, at(10));
    assert!(answers.iter().any(|p| header(p).packet_type == PacketType::Nack), "the hole is Nacked");
    assert_eq!(b.stats().nacks_sent, 1, "one Nack per hole, however many packets follow it");
    feed(&mut a, at(20), &answers);
    let s = a.peer_stats(1).unwrap();
    assert!(s.cwnd < 16, "multiplicative decrease on the Nack: cwnd {}", s.cwnd);
    assert_eq!(s.ssthresh, s.cwnd);
    let shrunk = s.cwnd;
    // The hole is retransmitted at once, before new data, without waiting for the RTO.
    let next = drain(&mut a, at(20));
    assert_eq!(header(&next[0]).seq, 3);
    assert_eq!(a.stats().retransmits_fast, 1);
    assert_eq!(a.stats().retransmits_timeout, 0);
    // From now on nothing is lost: acks grow the window back, additively.
    let mut now = 20;
    let mut to_b = next;
    let mut grown = shrunk;
    for _ in 0..200 {
        now += 10;
        feed(&mut b, at(now), &to_b);
        let acks = drain(&mut b, at(now));
        feed(&mut a, at(now), &acks);
        let cwnd = a.peer_stats(1).unwrap().cwnd;
        assert!(cwnd >= grown, "no loss, yet the window shrank from {grown} to {cwnd}");
        assert!(cwnd <= grown + 1, "one round grew it from {grown} to {cwnd}: not additive");
        grown = cwnd;
        to_b = drain(&mut a, at(now));
        if to_b.is_empty() {
            break;
        }
    }
    assert!(grown > shrunk + 1, "the window grew back: {shrunk} -> {grown}");
    assert_eq!(a.unacked_messages(1), 0);
    assert_eq!(b.stats().messages_delivered, 400);
}

#[test]
fn unacknowledged_bytes_stay_under_max_window_bytes() {
    let config = Config { max_datagram: 9000, max_window_bytes: 40_000, ..Config::default() };
    let seg = config.segment_size();
    let (mut a, mut b) = pair(config.clone());
    a.submit(at(0), 1, &[&vec![9u8; 50 * seg]]).unwrap();
    let mut now = 0;
    let mut delivered = 0;
    while delivered == 0 {
        let burst = drain(&mut a, at(now));
        let s = a.peer_stats(1).unwrap();
        assert!(s.inflight_bytes <= config.max_window_bytes, "{} bytes in flight", s.inflight_bytes);
        assert!(s.inflight < s.cwnd, "the byte cap, not the packet window, is what limits");
        assert!(!burst.is_empty() || s.inflight > 0);
        assert!(burst.len() <= config.max_window_bytes / seg);
        now += 10;
        delivered += feed(&mut b, at(now), &burst);
        let acks = drain(&mut b, at(now));
        feed(&mut a, at(now), &acks);
    }
    assert_eq!(delivered, 1);
}

#[test]
fn acks_are_delayed_and_coalesced_up_to_ack_every_packets() {
    let config = Config { ack_every: 4, max_ack_delay: Duration::from_micros(100), ..Config::default() };
    let (mut a, mut b) = pair(config);
    for i in 0..3 {
        a.submit(at(i), 1, &[b"small"]).unwrap();
        let packets = drain(&mut a, at(i));
        assert_eq!(packets.len(), 1);
        assert!(!header(&packets[0]).flags.contains(Flags::ACK_NOW));
        assert_eq!(feed(&mut b, at(i), &packets), 1);
        assert!(drain(&mut b, at(i)).is_empty(), "ack {i} is delayed");
    }
    // The delayed ack is due max_ack_delay after the first unacked packet.
    assert_eq!(b.poll_timeout(), Some(at(0) + Duration::from_micros(100)));
    // The fourth packet reaches ack_every: one ack at once, covering all four.
    a.submit(at(3), 1, &[b"small"]).unwrap();
    feed(&mut b, at(3), &drain(&mut a, at(3)));
    let acks = drain(&mut b, at(3));
    assert_eq!(acks.len(), 1);
    let ack = header(&acks[0]);
    assert_eq!((ack.packet_type, ack.ack), (PacketType::Ack, 4));
    assert_eq!(b.stats().acks_sent, 1);
    assert_eq!(b.poll_timeout(), None, "nothing owed, no timer");
    feed(&mut a, at(4), &acks);
    assert_eq!(events(&mut a), vec![Event::Acked { peer: 1, upto: MsgId(3) }]);
}

#[test]
fn a_lone_packet_is_acked_after_max_ack_delay() {
    let config = Config { ack_every: 8, max_ack_delay: Duration::from_micros(250), ..Config::default() };
    let (mut a, mut b) = pair(config);
    a.submit(at(0), 1, &[b"one"]).unwrap();
    feed(&mut b, at(5), &drain(&mut a, at(0)));
    assert!(drain(&mut b, at(5)).is_empty());
    let due = b.poll_timeout().expect("the delayed-ack timer");
    assert_eq!(due, at(5) + Duration::from_micros(250));
    b.handle_timeout(at(100));
    assert!(drain(&mut b, at(100)).is_empty(), "not before the deadline");
    b.handle_timeout(due);
    let acks = drain(&mut b, due);
    assert_eq!(acks.len(), 1);
    assert_eq!(header(&acks[0]).packet_type, PacketType::Ack);
    assert_eq!(b.stats().acks_sent, 1);
}

#[test]
fn an_owed_ack_rides_on_reverse_data() {
    let config = Config { ack_every: 8, ..Config::default() };
    let (mut a, mut b) = pair(config);
    a.submit(at(0), 1, &[b"request"]).unwrap();
    feed(&mut b, at(1), &drain(&mut a, at(0)));
    // b answers before its delayed ack is due: the ack goes in the reply's header.
    b.submit(at(2), 0, &[b"reply"]).unwrap();
    let out = drain(&mut b, at(2));
    assert_eq!(out.len(), 1, "no separate Ack packet");
    let reply = header(&out[0]);
    assert_eq!(reply.packet_type, PacketType::Data);
    assert!(reply.flags.contains(Flags::ACK));
    assert_eq!(reply.ack, 1);
    assert_eq!(b.stats().acks_sent, 0);
    assert_eq!(b.poll_timeout().map(|t| t > at(2) + Duration::from_micros(100)), Some(true), "only the RTO is left");
    assert_eq!(feed(&mut a, at(3), &out), 1);
    assert_eq!(events(&mut a), vec![Event::Acked { peer: 1, upto: MsgId(0) }]);
    // Several messages queued: only the one carrying the watermark may carry
    // the ack (causal completion), so the earlier ones go without.
    a.submit(at(4), 1, &[b"r2"]).unwrap();
    feed(&mut b, at(5), &drain(&mut a, at(4)));
    for m in [&b"x"[..], b"y", b"z"] {
        b.submit(at(6), 0, &[m]).unwrap();
    }
    let out: Vec<HeaderRepr> = drain(&mut b, at(6)).iter().map(|p| header(p)).collect();
    assert_eq!(out.len(), 3);
    let with_ack: Vec<bool> = out.iter().map(|h| h.flags.contains(Flags::ACK)).collect();
    assert_eq!(with_ack, vec![false, false, true]);
    assert_eq!(b.stats().acks_sent, 0);
}
