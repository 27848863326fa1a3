//! Deadlines: no wait lasts forever. A wait for what a live peer's library
//! owes (a get's data, an ack, an active message's reply) ends with
//! `Timeout` after the operation timeout (`MW_OP_TIMEOUT_MS`); waits with a
//! caller's timeout (`recv_raw_timeout`, `wait_until_timeout`,
//! `Handle::wait_timeout`) end at it; a push into one's own full FIFO ends
//! instead of waiting for a pop that only the caller could make. And a
//! forged datagram with another source epoch, on one host without
//! authentication, is dropped and counted instead of failing the job.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::run_job;
use mw_core::{Access, Cmp, Config, Endpoint, Error, ProgressMode, TransportChoice};

/// `Config::from_env` as it reads `MW_OP_TIMEOUT_MS=ms`, over UDP, with
/// ranks that serve peers only when they call in (a sleeping rank is then
/// alive but silent) and a dead-peer deadline far beyond the test.
fn short_op_timeout(ms: u64) -> Config {
    let config = Config::from_lookup(|name| (name == "MW_OP_TIMEOUT_MS").then(|| ms.to_string())).unwrap();
    assert_eq!(config.op_timeout, Some(Duration::from_millis(ms)));
    Config {
        progress: ProgressMode::Inline,
        peer_dead_after: Duration::from_secs(30),
        transport: TransportChoice::Udp,
        ..config
    }
}

/// Asserts that `wait` fails with `Timeout` after `at_least`, well before
/// the peer wakes (`before`).
fn assert_times_out<T: std::fmt::Debug>(
    what: &str,
    at_least: Duration,
    before: Duration,
    wait: impl FnOnce() -> mw_core::Result<T>,
) {
    let start = Instant::now();
    let result = wait();
    let took = start.elapsed();
    assert_eq!(result.map(drop), Err(Error::Timeout), "{what}");
    assert!(took >= at_least && took < before, "{what}: ended after {took:?}, want {at_least:?}..{before:?}");
}

/// Rank 1 sleeps without calling memwire (inline progress): alive, but
/// nothing it owes rank 0 comes. Every kind of wait for it ends with
/// `Timeout`; once rank 1 is back, the late replies are discarded and the
/// next operations work.
#[test]
fn waits_for_a_silent_live_peer_end_with_timeout() {
    const TIMEOUT_MS: u64 = 300;
    const NAP: Duration = Duration::from_secs(4);
    run_job(2, short_op_timeout(TIMEOUT_MS), |ep| {
        let region = ep.alloc_symmetric(4096, Access::ALL).unwrap();
        let key = region.key();
        ep.register_handler(3, |ctx, _| ctx.reply(&[7], b"late").unwrap()).unwrap();
        ep.barrier().unwrap();
        if ep.rank() == 1 {
            region.write(0, b"hello").unwrap();
            std::thread::sleep(NAP);
        } else {
            let (short, nap) = (Duration::from_millis(TIMEOUT_MS), NAP);
            let mut buf = [0u8; 5];
            assert_times_out("get", short, nap, || ep.get(1, key, 0, &mut buf));
            assert_eq!(buf, [0; 5], "nothing landed");
            assert_times_out("fetch_add", short, nap, || ep.fetch_add_u64(1, key, 64, 1));
            assert_times_out("am_request", short, nap, || ep.am_request(1, 3, &[], b"?"));
            let handle = ep.put_nb(1, key, 128, b"put").unwrap();
            assert_times_out("Handle::wait_timeout", Duration::from_millis(50), short, || {
                handle.wait_timeout(Duration::from_millis(50))
            });
            assert_times_out("put", short, nap, || ep.put_value(1, key, 136, 9));
            assert_times_out("flush", short, nap, || ep.flush(1));
            assert_times_out("quiet", short, nap, || ep.quiet());
            // Rank 1 is back: everything above completes there, its late
            // replies find no request, and new operations work.
            let mut got = [0u8; 5];
            get_once_back(ep, key, &mut got);
            assert_eq!(&got, b"hello");
            assert_eq!(ep.fetch_add_u64(1, key, 64, 1).unwrap(), 1, "the abandoned fetch_add ran once");
            ep.quiet().unwrap();
        }
        ep.barrier().unwrap();
        if ep.rank() == 1 {
            assert_eq!(region.load_u64(136).unwrap(), 9);
        }
        ep.barrier().unwrap();
    });
}

/// Gets from rank 1 until it is back (each try bounded by the short
/// operation timeout).
fn get_once_back(ep: &Endpoint, key: mw_core::RegionKey, out: &mut [u8]) {
    let start = Instant::now();
    loop {
        match ep.get(1, key, 0, out) {
            Ok(()) => return,
            Err(Error::Timeout) => assert!(start.elapsed() < Duration::from_secs(20), "rank 1 never answered"),
            Err(e) => panic!("get: {e}"),
        }
    }
}

/// `recv_raw_timeout` ends a wait for a datagram that never comes (raw
/// datagrams may be lost), and still receives one that does.
#[test]
fn recv_raw_timeout_ends_the_wait_for_a_lost_datagram() {
    run_job(2, common::udp(Config::default()), |ep| {
        let mut buf = [0u8; 16];
        if ep.rank() == 0 {
            let start = Instant::now();
            assert_eq!(ep.recv_raw_timeout(&mut buf, Duration::from_millis(100)), Err(Error::Timeout));
            assert!(start.elapsed() >= Duration::from_millis(100) && start.elapsed() < Duration::from_secs(5));
        }
        ep.barrier().unwrap();
        if ep.rank() == 1 {
            ep.send_raw(0, b"arrives").unwrap();
        } else {
            let (from, len) = ep.recv_raw_timeout(&mut buf, Duration::from_secs(10)).unwrap();
            assert_eq!((from, &buf[..len]), (1, &b"arrives"[..]));
        }
        ep.barrier().unwrap();
    });
}

/// `wait_until_timeout` on a word nobody writes ends with `Timeout`; on a
/// word that holds, returns at once.
#[test]
fn wait_until_timeout_ends_on_a_word_nobody_writes() {
    for (name, config) in common::transports() {
        eprintln!("transport {name}");
        run_job(2, config, |ep| {
            let region = ep.alloc_symmetric(64, Access::ALL).unwrap();
            let start = Instant::now();
            let result = ep.wait_until_timeout(&region, 8, Cmp::Eq, 1, Duration::from_millis(80));
            assert_eq!(result, Err(Error::Timeout));
            assert!(start.elapsed() >= Duration::from_millis(80) && start.elapsed() < Duration::from_secs(5));
            assert_eq!(ep.wait_until_timeout(&region, 8, Cmp::Eq, 0, Duration::ZERO), Ok(0));
            ep.barrier().unwrap();
        });
    }
}

/// A push into this rank's own full FIFO, from its only thread, could only
/// end by a pop this thread would make: it ends with `Timeout` after the
/// operation timeout instead of never; the FIFO is intact.
#[test]
fn a_push_into_ones_own_full_fifo_ends() {
    run_job(1, Config { op_timeout: Some(Duration::from_millis(200)), ..Config::default() }, |ep| {
        let fifo = ep.create_fifo(8, 1).unwrap();
        ep.fifo_push(0, fifo.key(), b"first").unwrap();
        assert_eq!(ep.try_fifo_push(0, fifo.key(), b"second"), Err(Error::WouldBlock));
        let start = Instant::now();
        assert_eq!(ep.fifo_push(0, fifo.key(), b"second"), Err(Error::Timeout));
        assert!(start.elapsed() >= Duration::from_millis(200) && start.elapsed() < Duration::from_secs(5));
        let mut out = [0u8; 8];
        assert_eq!(fifo.pop(&mut out).unwrap(), 5);
        assert_eq!(&out[..5], b"first");
        assert!(fifo.is_empty());
        ep.fifo_push(0, fifo.key(), b"third").unwrap();
    });
}

/// A forged datagram that claims to come from rank 1 in a new life (another
/// source epoch, no proof), sent to rank 0's socket on a one-host job
/// without authentication (the default there), is dropped and counted; the
/// peer is not taken for restarted and the job goes on. Over UDP between
/// the ranks, and with shared memory between them (where the socket has
/// never heard from rank 1 and two forgeries with different epochs once
/// made it look restarted).
#[test]
fn a_forged_epoch_change_is_dropped_and_counted() {
    for transport in [TransportChoice::Udp, TransportChoice::Auto] {
        forged_epoch_job(transport);
    }
}

fn forged_epoch_job(transport: TransportChoice) {
    let key = mw_bootstrap::random_job_key().unwrap();
    let job_id = mw_proto::job_id_from_key(&key);
    let server = mw_bootstrap::RendezvousServer::bind("127.0.0.1:0", 2, key).unwrap();
    let addr = server.local_addr().to_string();
    let _server = server.spawn().unwrap();
    // Rank 0's port: one the kernel just handed out, pinned with MW_PORT_RANGE.
    let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ranks: Vec<_> = (0..2u32)
        .map(|rank| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let boot = common::rank_bootstrap(rank, 2, &addr, &key, None);
                let config = Config { transport, port_range: (rank == 0).then_some((port, port)), ..Config::default() };
                let ep = Endpoint::init_with_bootstrap(config, boot).unwrap();
                forged_epoch_rank(&ep, job_id, port);
                ep.finalize().unwrap();
            })
        })
        .collect();
    for r in ranks {
        r.join().unwrap();
    }
}

fn forged_epoch_rank(ep: &Endpoint, job_id: u64, port: u16) {
    let region = ep.alloc_symmetric(64, Access::ALL).unwrap();
    let key = region.key();
    ep.barrier().unwrap();
    ep.put_value(1 - ep.rank(), key, 0, 1).unwrap();
    ep.barrier().unwrap();
    if ep.rank() == 1 {
        let forger = UdpSocket::bind("127.0.0.1:0").unwrap();
        for (src_epoch, flags) in [(0x5eed_0001, mw_wire::Flags::empty()), (0x5eed_0002, mw_wire::Flags::empty())] {
            let repr = mw_wire::HeaderRepr {
                packet_type: mw_wire::PacketType::Probe,
                flags,
                payload_len: 0,
                job_id,
                src_rank: 1,
                dst_rank: 0,
                src_epoch,
                dst_epoch: 0,
                seq: 0,
                ack: 0,
                sack: 0,
            };
            let mut datagram = vec![0u8; repr.buffer_len()];
            repr.emit_into(&mut datagram);
            forger.send_to(&datagram, ("127.0.0.1", port)).unwrap();
        }
    } else {
        let start = Instant::now();
        while ep.stats().1.drops.unproven_epoch < 2 {
            ep.progress();
            assert!(start.elapsed() < Duration::from_secs(10), "forged datagrams not seen: {:?}", ep.stats().1.drops);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(ep.stats().1.peers_restarted, 0, "a forgery made rank 1 look restarted");
        assert_eq!(ep.poll_peer_event(), None);
    }
    // The job goes on.
    ep.barrier().unwrap();
    let peer = 1 - ep.rank();
    assert_eq!(ep.fetch_add_u64(peer, key, 8, 1).unwrap(), 0);
    assert_eq!(ep.get_value(peer, key, 0).unwrap(), 1);
    ep.barrier().unwrap();
}
