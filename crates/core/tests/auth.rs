//! Packet authentication end to end: jobs with `auth` (or, instead, the
//! CRC32C `checksum`) forced on (these tests run on loopback, where both are
//! off by default) under injected loss, duplication and reordering, and
//! ranks that disagree on it.

mod common;

use std::time::Duration;

use common::{lossy, pattern, run_job};
use mw_core::{Access, Cmp, Config, Endpoint, Error, Signal, SignalOp};

#[test]
fn every_operation_with_authentication_under_faults() {
    let configs = [
        ("clean", Config { auth: Some(true), ..common::udp(Config::default()) }),
        ("lossy", Config { auth: Some(true), ..lossy(0.05, 0.05, 0.05, 11) }),
        // Between hosts: 1472-byte datagrams, so big puts are many MAC'd
        // packets; without fault injection they leave in batches (GSO).
        ("lan-mtu clean", Config { auth: Some(true), max_datagram: Some(1472), ..common::udp(Config::default()) }),
        (
            "checksum lan-mtu clean",
            Config {
                auth: Some(false),
                checksum: Some(true),
                max_datagram: Some(1472),
                ..common::udp(Config::default())
            },
        ),
        ("lan-mtu", Config { auth: Some(true), max_datagram: Some(1472), ..lossy(0.02, 0.0, 0.02, 12) }),
        // The CRC32C trailer instead of the MAC: bulk payloads leave with a
        // gathered sendmsg, the checksum computed over the parts in place.
        ("checksum", Config { auth: Some(false), checksum: Some(true), ..common::udp(Config::default()) }),
        (
            "checksum lan-mtu lossy",
            Config { auth: Some(false), checksum: Some(true), max_datagram: Some(1472), ..lossy(0.02, 0.02, 0.02, 13) },
        ),
    ];
    for (name, cfg) in configs {
        eprintln!("config {name}");
        run_job(3, cfg, |ep| {
            let n = ep.size();
            let me = ep.rank();
            let region = ep.alloc_symmetric(1 << 18, Access::ALL).unwrap();
            let key = region.key();
            let next = (me + 1) % n;
            // Each rank writes its own slice of its neighbour's region.
            let slice = 1 << 16;
            let data = pattern(me, slice);
            ep.put(next, key, u64::from(me) * slice as u64, &data).unwrap();
            let mut back = vec![0u8; slice];
            ep.get(next, key, u64::from(me) * slice as u64, &mut back).unwrap();
            assert_eq!(back, data);
            // Atomics land exactly once.
            for _ in 0..50 {
                ep.add_u64(0, key, 200_000, 1).unwrap();
            }
            let sig = Signal { key, offset: 200_008 + 8 * u64::from(me), op: SignalOp::Add, value: 1 };
            ep.put_signal(next, key, 210_000 + u64::from(me) * 8, &me.to_le_bytes(), sig).unwrap();
            let prev = (me + n - 1) % n;
            ep.wait_until(&region, 200_008 + 8 * u64::from(prev), Cmp::Eq, 1).unwrap();
            ep.barrier().unwrap();
            if me == 0 {
                assert_eq!(region.load_u64(200_000).unwrap(), 50 * u64::from(n));
            }
            let mut got = vec![0u8; slice];
            region.read(u64::from(prev) * slice as u64, &mut got).unwrap();
            assert_eq!(got, pattern(prev, slice));
            let (_, proto) = ep.stats();
            assert_eq!(proto.drops.bad_mac, 0, "a genuine packet failed its MAC check");
            assert_eq!(proto.drops.bad_checksum, 0, "a genuine packet failed its checksum");
            ep.barrier().unwrap();
        });
    }
}

/// Rank 0 authenticates, rank 1 does not: neither accepts the other's
/// packets (each counts them as bad MACs), and operations between them fail
/// with `PeerUnreachable` instead of hanging or landing.
#[test]
fn ranks_that_disagree_on_authentication_cannot_talk() {
    let key = mw_bootstrap::random_job_key().unwrap();
    let server = mw_bootstrap::RendezvousServer::bind("127.0.0.1:0", 2, key).unwrap();
    let addr = server.local_addr().to_string();
    let _server = server.spawn().unwrap();
    let ranks: Vec<_> = (0..2u32)
        .map(|rank| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let vars = common::rank_vars(rank, 2, &addr, &key, None);
                let config = Config {
                    auth: Some(rank == 0),
                    peer_dead_after: Duration::from_millis(400),
                    transport: mw_core::TransportChoice::Udp, // MACs are a UDP matter
                    ..Config::default()
                };
                let ep = Endpoint::init_from_lookup(config, vars).unwrap();
                let mine = ep.alloc(64, Access::ALL).unwrap();
                // Keys cannot be exchanged (that needs memwire itself); any
                // key will do, the packets never get as far as the key check.
                let result = ep.put(1 - rank, mine.key(), 0, b"must not land");
                assert!(matches!(result, Err(Error::PeerUnreachable { rank: r }) if r == 1 - rank), "{result:?}");
                assert_eq!(mine.to_vec(), vec![0u8; 64]);
                let (_, proto) = ep.stats();
                assert!(proto.drops.bad_mac > 0, "rank {rank} never saw its peer's packets rejected");
                assert_eq!(proto.messages_delivered, 0);
                drop(mine);
                drop(ep); // no finalize: its barrier would need the peer
            })
        })
        .collect();
    for r in ranks {
        r.join().unwrap();
    }
}
