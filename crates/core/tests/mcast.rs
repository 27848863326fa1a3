//! IP multicast for real: ranks as threads of one process, each its own
//! endpoint and sockets, all on loopback (the kernel loops group datagrams
//! back to every member socket), checked byte for byte against the root's
//! pattern; then the same under injected loss, duplication and reordering,
//! with same-host members on shared memory, and with multicast off or
//! unavailable (the tree, same bytes). The base configuration comes from
//! `MW_*`: `MW_MTU=1472` reruns it with Ethernet-sized segments, `MW_AUTH=1`
//! with every segment authenticated.

mod common;

use common::{pattern, run_job, run_job_on_hosts, shm};
use mw_core::{Access, CollTuning, Config, Endpoint, Error, McastAlgo, Team};

/// The base configuration, from `MW_*` (so the suite reruns with, say,
/// `MW_MTU=1472` or `MW_AUTH=1`). IP multicast is a UDP matter: ranks of
/// one process share a host, so UDP is forced unless `MW_TRANSPORT` says
/// otherwise (the shared-memory cases ask for it explicitly).
fn base() -> Config {
    let config = Config::from_env().expect("MW_* settings");
    match std::env::var_os("MW_TRANSPORT") {
        Some(_) => config,
        None => common::udp(config),
    }
}

fn with_mcast(config: Config, mcast: McastAlgo) -> Config {
    Config { coll: CollTuning { mcast, ..config.coll }, ..config }
}

fn lossy(drop: f64, dup: f64, reorder: f64, seed: u64) -> Config {
    let faults = common::lossy(drop, dup, reorder, seed);
    Config { fault: faults.fault, rto_min: faults.rto_min, ..base() }
}

const MIB4: usize = 4 << 20;

/// Every (root, offset, len) of `shapes` multicast with `algo`, checked on
/// every member; region contents outside the range stay as they were.
fn check_shapes<'ep>(ep: &'ep Endpoint, team: &mut Team<'ep>, algo: McastAlgo, shapes: &[(u32, usize, usize)]) {
    let me = team.rank();
    let cap = shapes.iter().map(|s| s.1 + s.2).max().unwrap_or(0) + 64;
    let region = ep.alloc(cap, Access::READ_WRITE).unwrap();
    let group = team.multicast_group(&region).unwrap();
    for (round, &(root, offset, len)) in shapes.iter().enumerate() {
        let root = root % team.size();
        let data = pattern(round as u32 * 7 + root + 1, len);
        let before = pattern(1000 + me, cap);
        region.write(0, &before).unwrap();
        if me == root {
            region.write(offset as u64, &data).unwrap();
        }
        team.multicast_with(algo, &group, root, offset, len).unwrap();
        let mut got = vec![0u8; cap];
        region.read(0, &mut got).unwrap();
        if got[offset..offset + len] != data[..] {
            let first = (0..len).find(|&i| got[offset + i] != data[i]).unwrap_or(len);
            let last = (0..len).rev().find(|&i| got[offset + i] != data[i]).unwrap_or(len);
            let is_before = got[offset + first..offset + first + 16] == before[offset + first..offset + first + 16];
            panic!(
                "rank {me} round {round}: {len} bytes at {offset} from {root} differ in {first}..={last} (still the old bytes: {is_before}); {:?}",
                ep.stats().0.mcast
            );
        }
        if me != root {
            assert!(
                got[..offset] == before[..offset] && got[offset + len..] == before[offset + len..],
                "rank {me}: outside"
            );
        }
        // The next round rewrites the region: everyone is done with this one.
        team.barrier().unwrap();
    }
}

fn shapes(p: u32) -> Vec<(u32, usize, usize)> {
    vec![(0, 0, 0), (p - 1, 3, 1), (p / 2, 0, 1000), (1, 5, 64_920), (0, 0, 64_921), (p - 1, 100, 300_000)]
}

#[test]
fn ip_multicast_on_teams_of_2_to_9_byte_for_byte() {
    for n in 2..=9 {
        eprintln!("{n} ranks");
        run_job(n, with_mcast(base(), McastAlgo::Ip), move |ep| {
            let mut team = ep.team_world().unwrap();
            check_shapes(ep, &mut team, McastAlgo::Ip, &shapes(n));
            assert!(team.uses_ip_multicast());
            let stats = ep.stats().0.mcast;
            assert!(stats.ip_transfers > 0 || team.rank() != 0, "{stats:?}");
            assert!(stats.received_via_group > 0, "rank {}: {stats:?}", team.rank());
            assert_eq!(stats.tree_fallbacks, 0, "{stats:?}");
        });
    }
}

#[test]
fn four_mebibytes_by_ip_multicast() {
    run_job(4, with_mcast(base(), McastAlgo::Ip), |ep| {
        let mut team = ep.team_world().unwrap();
        check_shapes(ep, &mut team, McastAlgo::Ip, &[(1, 0, MIB4), (3, 7, MIB4 - 7)]);
    });
}

#[test]
fn ip_multicast_under_loss_duplication_and_reordering() {
    for (n, cfg) in [(3, lossy(0.05, 0.0, 0.0, 41)), (5, lossy(0.0, 0.05, 0.05, 42)), (7, lossy(0.03, 0.03, 0.03, 43))]
    {
        eprintln!("{n} ranks, faults {:?}", cfg.fault);
        run_job(n, with_mcast(cfg, McastAlgo::Ip), move |ep| {
            let mut team = ep.team_world().unwrap();
            let mut shapes = shapes(n);
            shapes.push((2, 0, 1 << 20));
            check_shapes(ep, &mut team, McastAlgo::Ip, &shapes);
        });
    }
}

/// Losses independent per member on the multicast path (on top of the send
/// path's): repairs go by unicast to the one member that lacks a segment.
#[test]
fn independent_member_losses_are_repaired_by_unicast() {
    let unicast = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = unicast.clone();
    let cfg = Config { mcast_drop: 0.1, ..lossy(0.02, 0.0, 0.02, 44) };
    run_job(5, with_mcast(cfg, McastAlgo::Ip), move |ep| {
        let mut team = ep.team_world().unwrap();
        let mut shapes = shapes(5);
        shapes.extend([(0, 0, 1 << 20), (4, 1, 1 << 20)]);
        check_shapes(ep, &mut team, McastAlgo::Ip, &shapes);
        let stats = ep.stats().0.mcast;
        seen.fetch_add(stats.unicast_sends, std::sync::atomic::Ordering::Relaxed);
    });
    assert!(unicast.load(std::sync::atomic::Ordering::Relaxed) > 0, "no unicast repair at 10% member loss");
}

/// The group joins but delivers nothing (the probe, team rank 0's first
/// multicast, never arrives): Auto takes the tree, forcing IP is an error.
#[test]
fn a_group_that_delivers_nothing_at_setup_means_the_tree() {
    let cfg = Config { mcast_drop: 1.0, ..base() };
    run_job(4, cfg.clone(), |ep| {
        let mut team = ep.team_world().unwrap();
        check_shapes(ep, &mut team, McastAlgo::Auto, &shapes(4));
        assert!(!team.uses_ip_multicast());
    });
    run_job(3, with_mcast(cfg, McastAlgo::Ip), |ep| {
        let mut team = ep.team_world().unwrap();
        let region = ep.alloc(64, Access::READ_WRITE).unwrap();
        let result = team.multicast_group(&region);
        assert!(matches!(&result, Err(Error::Io(why)) if why.contains("probe")), "{result:?}");
    });
}

/// A group that worked goes silent: calls still complete (by unicast
/// repair), and after a few such calls the members ask the root for the
/// tree, which it then uses; forcing IP still goes over IP (and completes).
#[test]
fn a_group_that_goes_silent_falls_back_to_the_tree() {
    run_job(4, base(), |ep| {
        let mut team = ep.team_world().unwrap();
        let region = ep.alloc(200_000, Access::READ_WRITE).unwrap();
        let group = team.multicast_group(&region).unwrap();
        assert!(team.uses_ip_multicast());
        ep.set_mcast_receive_drop(1.0);
        let me = team.rank();
        for round in 0..6u32 {
            let data = pattern(round, 150_000);
            if me == 0 {
                region.write(0, &data).unwrap();
            }
            let algo = if round == 5 { McastAlgo::Ip } else { McastAlgo::Auto };
            team.multicast_with(algo, &group, 0, 0, 150_000).unwrap();
            let mut got = vec![0u8; 150_000];
            region.read(0, &mut got).unwrap();
            assert!(got == data, "rank {me} round {round}");
            team.barrier().unwrap();
        }
        let stats = ep.stats().0.mcast;
        if me == 0 {
            assert_eq!(stats.tree_fallbacks, 2, "rounds 3 and 4 by the tree: {stats:?}");
            assert_eq!(stats.ip_transfers, 4, "rounds 0-2 and the forced 5: {stats:?}");
            assert!(stats.unicast_sends > 0, "{stats:?}");
        } else {
            assert_eq!(stats.received_via_group, 1, "the probe only: {stats:?}");
            assert!(stats.received_via_unicast > 0 && stats.nacks_sent > 0, "{stats:?}");
        }
    });
}

#[test]
fn auto_uses_ip_multicast_and_tree_is_forced_on_request() {
    run_job(4, base(), |ep| {
        let mut team = ep.team_world().unwrap();
        check_shapes(ep, &mut team, McastAlgo::Auto, &shapes(4));
        assert!(team.uses_ip_multicast(), "loopback allows IP multicast");
        let ip = ep.stats().0.mcast;
        check_shapes(ep, &mut team, McastAlgo::Tree, &shapes(4));
        let after = ep.stats().0.mcast;
        assert_eq!((after.ip_transfers, after.received_via_group), (ip.ip_transfers, ip.received_via_group));
    });
}

/// `MW_MCAST=0`: no socket, no group, the tree; same bytes.
#[test]
fn multicast_off_is_the_tree() {
    for n in [1, 3, 6] {
        run_job(n, with_mcast(base(), McastAlgo::Tree), move |ep| {
            let mut team = ep.team_world().unwrap();
            check_shapes(ep, &mut team, McastAlgo::Auto, &shapes(n));
            assert!(!team.uses_ip_multicast());
            assert_eq!(ep.stats().0.mcast, mw_core::McastStats::default());
            let region = ep.alloc(8, Access::READ_WRITE).unwrap();
            let group = team.multicast_group(&region).unwrap();
            if n > 1 {
                let forced = team.multicast_with(McastAlgo::Ip, &group, 0, 0, 8);
                assert!(matches!(forced, Err(Error::InvalidArgument(_))), "{forced:?}");
            }
        });
    }
}

/// Multicast unavailable: the group port is held by a socket that does not
/// share it, so no rank can bind it. Auto falls back to the tree (same
/// bytes); forcing IP is an error on every rank, not a hang.
#[test]
fn unavailable_multicast_falls_back_to_the_tree() {
    let blocker = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    let port = blocker.local_addr().unwrap().port();
    let cfg = Config { mcast_port: Some(port), ..base() };
    run_job(3, cfg.clone(), |ep| {
        let mut team = ep.team_world().unwrap();
        check_shapes(ep, &mut team, McastAlgo::Auto, &shapes(3));
        assert!(!team.uses_ip_multicast());
        assert!(ep.stats().0.mcast.setup_failures > 0);
    });
    run_job(3, with_mcast(cfg, McastAlgo::Ip), |ep| {
        let mut team = ep.team_world().unwrap();
        let region = ep.alloc(64, Access::READ_WRITE).unwrap();
        let result = team.multicast_group(&region);
        assert!(matches!(result, Err(Error::Io(_))), "{result:?}");
        team.barrier().unwrap();
    });
    drop(blocker);
}

/// Two fake hosts (two ranks each) with shared memory inside a host: the
/// root's host-mate gets a direct put, the other host's ranks IP multicast;
/// and a job of one host with shared memory everywhere has no UDP member
/// and uses the tree.
#[test]
fn mixed_shared_memory_and_multicast() {
    let hosts: Vec<String> = ["a", "a", "b", "b", "b"].iter().map(|h| h.to_string()).collect();
    run_job_on_hosts(5, shm(base()), hosts, |ep| {
        let mut team = ep.team_world().unwrap();
        check_shapes(ep, &mut team, McastAlgo::Auto, &shapes(5));
        assert!(team.uses_ip_multicast());
        let stats = ep.stats().0.mcast;
        assert!(stats.received_via_group > 0 || team.rank() == 0, "rank {}: {stats:?}", team.rank());
    });
    run_job(3, shm(base()), |ep| {
        let mut team = ep.team_world().unwrap();
        check_shapes(ep, &mut team, McastAlgo::Auto, &shapes(3));
        assert!(!team.uses_ip_multicast(), "every member shares memory");
    });
}

/// Several teams multicasting at once from different threads of each rank,
/// each on its own group: nobody sees another team's data.
#[test]
fn concurrent_teams_keep_their_groups_apart() {
    run_job(4, base(), |ep| {
        let mut world = ep.team_world().unwrap();
        let me = world.rank();
        let mut half = world.split(Some(me % 2), me).unwrap().unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                let a = ep.alloc(100_000, Access::READ_WRITE).unwrap();
                let ga = world.multicast_group(&a).unwrap();
                assert!(world.uses_ip_multicast());
                for i in 0..20u32 {
                    let data = pattern(i, 100_000);
                    if world.rank() == i % 4 {
                        a.write(0, &data).unwrap();
                    }
                    world.multicast(&ga, i % 4, 0, 100_000).unwrap();
                    let mut got = vec![0u8; 100_000];
                    a.read(0, &mut got).unwrap();
                    assert!(got == data, "world round {i}");
                    world.barrier().unwrap();
                }
            });
            s.spawn(|| {
                let b = ep.alloc(100_000, Access::READ_WRITE).unwrap();
                let gb = half.multicast_group(&b).unwrap();
                assert!(half.uses_ip_multicast());
                for i in 0..20u32 {
                    let data = pattern(500 + i + me % 2, 100_000);
                    if half.rank() == i % 2 {
                        b.write(0, &data).unwrap();
                    }
                    half.multicast(&gb, i % 2, 0, 100_000).unwrap();
                    let mut got = vec![0u8; 100_000];
                    b.read(0, &mut got).unwrap();
                    assert!(got == data, "half round {i}");
                    half.barrier().unwrap();
                }
            });
        });
    });
}
