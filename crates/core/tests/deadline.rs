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

/// `Config::from_env` as it reads `MW_OP_TIMEOUT_MS=ms` and
/// `MW_WAIT_TIMEOUT_MS=ms`, over UDP, with ranks that serve peers only when
/// they call in (a sleeping rank is then alive but silent) and a dead-peer
/// deadline far beyond the test.
fn short_op_timeout(ms: u64) -> Config {
    let config =
        Config::from_lookup(|name| matches!(name, "MW_OP_TIMEOUT_MS" | "MW_WAIT_TIMEOUT_MS").then(|| ms.to_string()))
            .unwrap();
    assert_eq!(config.op_timeout, Some(Duration::from_millis(ms)));
    assert_eq!(config.wait_timeout, Some(Duration::from_millis(ms)));
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
    // The wait timeout (none by default) does not apply to one's own FIFO.
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
                let vars = common::rank_vars(rank, 2, &addr, &key, None);
                let config = Config { transport, port_range: (rank == 0).then_some((port, port)), ..Config::default() };
                let ep = Endpoint::init_from_lookup(config, vars).unwrap();
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

/// A tagged receive that nothing matches ends with `Timeout` (plain
/// `recv` after the wait timeout, `recv_timeout`, `probe_timeout`,
/// `RecvHandle::wait_timeout`, `OwnedRecv::wait_timeout`); the receive is
/// gone, so a message sent afterwards goes to the next receive, whole.
#[test]
fn a_receive_nothing_matches_ends_and_leaves_nothing_posted() {
    for (name, config) in common::transports() {
        eprintln!("transport {name}");
        let config = Config { wait_timeout: Some(Duration::from_millis(150)), ..config };
        run_job(2, config, |ep| {
            if ep.rank() == 0 {
                let mut buf = [0xEEu8; 64];
                let (short, long) = (Duration::from_millis(60), Duration::from_secs(10));
                assert_times_out("recv", Duration::from_millis(150), long, || ep.recv(1, 5, &mut buf));
                assert_times_out("recv_timeout", short, long, || ep.recv_timeout(1, 5, &mut buf, short));
                assert_times_out("probe_timeout", short, long, || ep.probe_timeout(1, 5, short));
                assert_times_out("probe", Duration::from_millis(150), long, || ep.probe(1, 5));
                let handle = ep.irecv(1, 5, &mut buf).unwrap();
                assert_times_out("RecvHandle::wait_timeout", short, long, || handle.wait_timeout(short));
                let owned = ep.irecv_owned(1, 5, vec![0xEE; 64]).unwrap();
                let (back, result) = owned.wait_timeout(short);
                assert_eq!((back.len(), result), (64, Err(Error::Timeout)), "the buffer comes back");
                assert_eq!(buf, [0xEE; 64], "nothing landed");
            }
            barrier_patiently(ep, Duration::from_secs(20));
            if ep.rank() == 1 {
                ep.send(0, 5, b"after the timeouts").unwrap();
            } else {
                let mut buf = [0u8; 64];
                let got = ep.recv_timeout(1, 5, &mut buf, Duration::from_secs(10)).unwrap();
                assert_eq!(&buf[..got.len], b"after the timeouts");
            }
            barrier_patiently(ep, Duration::from_secs(20));
        });
    }
}

/// Bytes the sender of a large message has sent over UDP so far.
fn udp_bytes_sent(ep: &Endpoint) -> u64 {
    ep.stats().1.bytes_sent
}

/// A receive that times out while a large message is being pulled into it:
/// the receive has matched the message and asked for its chunks, and the
/// sender naps (inline progress: alive, not serving), over UDP with loss
/// after it has answered the first MiB of the pull (so part of the message
/// has landed when the deadline passes). The receive is cancelled: what
/// arrives afterwards (the sender, back, answers the requests already on
/// their way) lands nowhere (the buffer, kept and watched, stays as it was
/// at the timeout), and the sender's send fails with `Cancelled` instead of
/// reporting a delivery. The next message between the pair goes through
/// whole. Over shared memory the pull is made of chunks through the rings
/// (forced here): the single-copy pull copies the whole message inside
/// one progress step, under the lock a cancel takes, so it cannot be
/// caught half way; and a sender that serves at all drains the rings of
/// the whole pull in one step, so there it naps at once.
#[test]
fn a_receive_that_times_out_mid_transfer_takes_nothing_more_and_fails_the_send() {
    const LEN: usize = 16 << 20;
    let quiet =
        |config: Config| Config { progress: ProgressMode::Inline, peer_dead_after: Duration::from_secs(30), ..config };
    let lossy = quiet(common::lossy(0.1, 0.0, 0.05, 39));
    let rings = quiet(Config { shm_copy: mw_core::ShmCopy::Rings, ..common::shm(Config::default()) });
    for (name, config, serve_first) in [("udp, lossy", lossy, 1u64 << 20), ("shm rings", rings, 0)] {
        eprintln!("transport {name}");
        run_job(2, config, move |ep| {
            let message = common::pattern(7, LEN);
            ep.barrier().unwrap();
            if ep.rank() == 1 {
                let handle = ep.isend(0, 9, &message).unwrap();
                let start = udp_bytes_sent(ep);
                let serving = Instant::now();
                while udp_bytes_sent(ep) - start < serve_first {
                    ep.progress();
                    assert!(serving.elapsed() < Duration::from_secs(20), "the receiver never pulled");
                }
                std::thread::sleep(Duration::from_millis(1500));
                assert_eq!(handle.wait(), Err(Error::Cancelled), "the send of an undelivered message");
            } else {
                let mut buf = vec![0xEEu8; LEN];
                let result = ep.recv_timeout(1, 9, &mut buf, Duration::from_millis(500));
                assert_eq!(result, Err(Error::Timeout));
                let at_timeout = buf.clone();
                if serve_first > 0 {
                    assert!(at_timeout.iter().any(|&b| b != 0xEE), "part of the message had landed");
                }
                assert!(at_timeout != message, "not all of it");
                // Rank 1 wakes within this watch and answers what it was asked.
                let watch = Instant::now();
                while watch.elapsed() < Duration::from_millis(2500) {
                    ep.progress();
                    std::thread::sleep(Duration::from_millis(1));
                }
                assert!(buf == at_timeout, "the buffer changed after the receive timed out");
            }
            ep.barrier().unwrap();
            if ep.rank() == 1 {
                ep.send(0, 9, &message[..LEN / 2]).unwrap();
            } else {
                let mut buf = vec![0u8; LEN];
                let got = ep.recv_timeout(1, 9, &mut buf, Duration::from_secs(20)).unwrap();
                assert_eq!(got.len, LEN / 2);
                assert!(buf[..LEN / 2] == message[..LEN / 2], "the next message, whole");
            }
            ep.barrier().unwrap();
        });
    }
}

/// A receive that the message completes before its deadline is received,
/// whatever the path (the cancel finds it whole).
#[test]
fn a_large_message_that_arrives_in_time_is_received() {
    for (name, config) in common::transports() {
        eprintln!("transport {name}");
        run_job(2, config, |ep| {
            let message = common::pattern(3, 4 << 20);
            if ep.rank() == 1 {
                ep.send(0, 1, &message).unwrap();
            } else {
                let mut buf = vec![0u8; message.len()];
                let got = ep.recv_timeout(1, 1, &mut buf, Duration::from_secs(20)).unwrap();
                assert_eq!(got.len, message.len());
                assert!(buf == message);
            }
            ep.barrier().unwrap();
        });
    }
}

/// A pop from a FIFO nobody pushes to ends with `Timeout` (the plain pop
/// after the wait timeout); an entry pushed later is still there.
#[test]
fn a_pop_from_an_empty_fifo_ends() {
    run_job(1, Config { wait_timeout: Some(Duration::from_millis(150)), ..Config::default() }, |ep| {
        let fifo = ep.create_fifo(8, 2).unwrap();
        let mut out = [0u8; 8];
        let long = Duration::from_secs(10);
        assert_times_out("pop", Duration::from_millis(150), long, || fifo.pop(&mut out));
        let short = Duration::from_millis(50);
        assert_times_out("pop_timeout", short, long, || fifo.pop_timeout(&mut out, short));
        ep.fifo_push(0, fifo.key(), b"later").unwrap();
        assert_eq!(fifo.pop_timeout(&mut out, long), Ok(5));
        assert_eq!(&out[..5], b"later");
    });
}

/// Rank 1 naps (alive, inline progress) instead of joining: rank 0's
/// `barrier` ends with `Timeout`, and its next call continues the same
/// barrier, which completes once rank 1 comes; a team collective that
/// times out leaves the team broken: every later collective on it fails
/// with `TeamBroken`, while the endpoint's own barrier goes on.
#[test]
fn barriers_and_collectives_with_a_member_that_never_comes_end() {
    const TIMEOUT_MS: u64 = 300;
    let nap = Duration::from_millis(1500);
    run_job(2, short_op_timeout(TIMEOUT_MS), move |ep| {
        let mut team = ep.team_world().unwrap();
        ep.barrier().unwrap();
        let (short, long) = (Duration::from_millis(TIMEOUT_MS), Duration::from_secs(20));
        if ep.rank() == 1 {
            std::thread::sleep(nap);
        } else {
            assert_times_out("barrier", short, nap, || ep.barrier());
            assert_times_out("team barrier", short, nap, || team.barrier());
            let mut sum = [0u64];
            assert_eq!(team.allreduce_typed(mw_core::ReduceOp::Sum, &[1u64], &mut sum), Err(Error::TeamBroken));
            assert_eq!(team.barrier(), Err(Error::TeamBroken));
            assert!(team.is_broken());
        }
        // Rank 1 enters the barrier rank 0 is still in: rank 0's retry
        // (more than one, if rank 1 is slow to come) completes it.
        barrier_patiently(ep, long);
        if ep.rank() == 1 {
            // Rank 0 left the team: rank 1's collective on it ends too.
            let outcome = team.barrier();
            assert!(matches!(outcome, Ok(()) | Err(Error::Timeout)), "{outcome:?}");
        }
        drop(team);
        barrier_patiently(ep, long);
        let fresh = ep.team_world().unwrap();
        drop(fresh);
        barrier_patiently(ep, long);
    });
}

/// `barrier`, called again while it times out (each call continues the
/// same barrier), for up to `patience`.
fn barrier_patiently(ep: &Endpoint, patience: Duration) {
    let start = Instant::now();
    loop {
        match ep.barrier() {
            Ok(()) => return,
            Err(Error::Timeout) if start.elapsed() < patience => {}
            other => panic!("rank {}: barrier: {other:?}", ep.rank()),
        }
    }
}

/// By default a receive and a barrier wait for a peer that computes for
/// longer than the operation timeout: they are paced by its application
/// (`Config::wait_timeout` is none), not bounded by the timeout for what
/// its library owes.
#[test]
fn by_default_a_receive_and_a_barrier_outwait_the_operation_timeout() {
    let config = Config { op_timeout: Some(Duration::from_millis(100)), ..common::udp(Config::default()) };
    assert_eq!(config.wait_timeout, None);
    run_job(2, config, |ep| {
        if ep.rank() == 1 {
            std::thread::sleep(Duration::from_millis(600));
            ep.send(0, 9, b"computed").unwrap();
            std::thread::sleep(Duration::from_millis(600));
        } else {
            let mut buf = [0u8; 16];
            let got = ep.recv(1, 9, &mut buf).unwrap();
            assert_eq!(&buf[..got.len], b"computed");
        }
        ep.barrier().unwrap();
    });
}
