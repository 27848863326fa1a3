//! Messaging across 2-8 ranks over shared memory (direct and with the
//! two-copy ring fallback) and over UDP on loopback, lossless and with
//! injected loss, duplication and reordering: tagged matching under every
//! arrival order, eager and rendezvous sizes, truncation, credit-bounded
//! floods, active messages, remote FIFOs, raw datagrams, and overlap with
//! the progress thread.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{lossy, pattern, run_job, run_job_keeping_requests};
use mw_core::{Config, Error, FifoKey, ProgressMode, ANY_SOURCE, ANY_TAG, RESERVED_HANDLER_BASE};

fn configs() -> Vec<(&'static str, Config)> {
    vec![
        ("shm", common::shm(Config::default())),
        ("shm two-copy", common::shm(Config { shm_copy: mw_core::ShmCopy::Rings, ..Config::default() })),
        ("clean", common::udp(Config::default())),
        ("drop5", lossy(0.05, 0.0, 0.0, 21)),
        ("dup5+reorder5", lossy(0.0, 0.05, 0.05, 22)),
        ("mixed", lossy(0.03, 0.03, 0.03, 23)),
    ]
}

/// A small eager limit on both paths, so rendezvous sizes stay cheap under loss.
fn small_eager(mut cfg: Config) -> Config {
    cfg.eager_limit = 1024;
    cfg.shm_eager_limit = Some(1024);
    cfg
}

fn seq_msg(seq: u32, len: usize) -> Vec<u8> {
    let mut m = pattern(seq, len.max(4));
    m[..4].copy_from_slice(&seq.to_le_bytes());
    m.truncate(len.max(4));
    m
}

#[test]
fn matching_under_every_arrival_order() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        run_job(3, small_eager(cfg), |ep| {
            let me = ep.rank();
            // 1. Posted before arrival: rank 1 posts, then the others send.
            if me == 1 {
                let mut bufs = vec![vec![0u8; 4096]; 4];
                let mut handles = Vec::new();
                for (i, buf) in bufs.iter_mut().enumerate() {
                    let source = if i % 2 == 0 { 0 } else { 2 };
                    handles.push(ep.irecv(source, 10 + i as u64, buf).unwrap());
                }
                ep.barrier().unwrap();
                for (i, h) in handles.into_iter().enumerate() {
                    let st = h.wait().unwrap();
                    assert_eq!(st.source, if i % 2 == 0 { 0 } else { 2 });
                    assert_eq!(st.tag, 10 + i as u64);
                    assert_eq!(st.len, 100 * (i + 1) + 900 * (i % 2));
                }
                for (i, buf) in bufs.iter().enumerate() {
                    let len = 100 * (i + 1) + 900 * (i % 2);
                    assert_eq!(&buf[..len], &pattern(i as u32, len)[..]);
                }
            } else {
                ep.barrier().unwrap();
                for i in 0..4usize {
                    if (i % 2 == 0) == (me == 0) {
                        // Sizes straddle the eager limit (1024): 100, 1100, 300, 1300.
                        let len = 100 * (i + 1) + 900 * (i % 2);
                        ep.send(1, 10 + i as u64, &pattern(i as u32, len)).unwrap();
                    }
                }
            }
            ep.barrier().unwrap();
            // 2. Unexpected: everything arrives first, then rank 1 receives
            //    by tag in the reverse order of sending, then by wildcard.
            // Nonblocking sends: a rendezvous send completes only once rank 1
            // pulls it, after the barrier.
            let msgs: Vec<Vec<u8>> =
                (0..6u32).map(|t| seq_msg(me * 100 + t, if t % 3 == 0 { 2000 } else { 50 })).collect();
            let mut sends = Vec::new();
            if me != 1 {
                for (t, data) in msgs.iter().enumerate() {
                    sends.push(ep.isend(1, 20 + t as u64, data).unwrap());
                }
            }
            if me == 1 {
                ep.barrier().unwrap();
                let mut buf = vec![0u8; 4096];
                for t in (3..6u64).rev() {
                    for src in [2u32, 0] {
                        let st = ep.recv(src, 20 + t, &mut buf).unwrap();
                        assert_eq!((st.source, st.tag), (src, 20 + t));
                        assert_eq!(&buf[..st.len], &seq_msg(src * 100 + t as u32, st.len)[..]);
                    }
                }
                // Remaining tags 20..23 from both, with ANY_TAG per source:
                // non-overtaking means they come in send order.
                for src in [0u32, 2] {
                    for t in 0..3u64 {
                        let st = ep.recv(src, ANY_TAG, &mut buf).unwrap();
                        assert_eq!((st.source, st.tag), (src, 20 + t), "per-pair order");
                    }
                }
                // Probe sees nothing left.
                assert_eq!(ep.iprobe(ANY_SOURCE, ANY_TAG).unwrap(), None);
            } else {
                ep.barrier().unwrap();
                mw_core::wait_all(sends).unwrap();
            }
            ep.barrier().unwrap();
            // 3. Wildcard source and tag mixed with posted receives.
            if me == 0 {
                let mut a = vec![0u8; 64];
                let mut b = vec![0u8; 64];
                let h1 = ep.irecv(ANY_SOURCE, 7, &mut a).unwrap();
                let h2 = ep.irecv(ANY_SOURCE, ANY_TAG, &mut b).unwrap();
                ep.barrier().unwrap();
                let s1 = h1.wait().unwrap();
                let s2 = h2.wait().unwrap();
                assert_eq!(s1.tag, 7);
                // h2 took the next arrival not taken by h1: never an earlier
                // message of the same sender than h1's (non-overtaking).
                assert!(s2.source != s1.source || s2.tag == 8);
                let probe = ep.probe(ANY_SOURCE, ANY_TAG).unwrap();
                let mut c = vec![0u8; 64];
                let s3 = ep.recv(probe.source, probe.tag, &mut c).unwrap();
                assert_eq!(s3, probe);
                let mut d = vec![0u8; 64];
                let s4 = ep.recv(ANY_SOURCE, ANY_TAG, &mut d).unwrap();
                let mut got: Vec<(u32, u64)> = [s1, s2, s3, s4].iter().map(|s| (s.source, s.tag)).collect();
                got.sort_unstable();
                assert_eq!(got, vec![(1, 7), (1, 8), (2, 7), (2, 8)]);
                assert_eq!(&a[..s1.len], format!("{}:{}", s1.source, s1.tag).as_bytes());
            } else {
                ep.barrier().unwrap();
                for tag in [7u64, 8] {
                    ep.send(0, tag, format!("{me}:{tag}").as_bytes()).unwrap();
                }
            }
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn non_overtaking_across_eager_and_rendezvous() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        run_job(2, small_eager(cfg), |ep| {
            const N: u32 = 60;
            let len_of = |i: u32| match i % 4 {
                0 => 0,
                1 => 8,
                2 => 1023 + (i as usize % 3), // 1023, 1024, 1025 around the limit
                _ => 5000,
            };
            if ep.rank() == 0 {
                let msgs: Vec<Vec<u8>> = (0..N).map(|i| seq_msg(i, len_of(i))).collect();
                let handles: Vec<_> = msgs.iter().map(|m| ep.isend(1, 5, m).unwrap()).collect();
                mw_core::wait_all(handles).unwrap();
            } else {
                let mut buf = vec![0u8; 8192];
                for i in 0..N {
                    let st = ep.recv(0, 5, &mut buf).unwrap();
                    let want = seq_msg(i, len_of(i));
                    assert_eq!(st.len, want.len());
                    assert_eq!(&buf[..st.len], &want[..], "message {i} overtaken or corrupted");
                }
            }
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn eager_and_rendezvous_sizes() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        let big = if name == "clean" { 5 << 20 } else { 1 << 20 };
        // The default eager limit of the path (64 KiB over UDP; 16 KiB
        // between ranks that are threads of one process, as here): the
        // boundary sizes below go eagerly up to it and by rendezvous above.
        let limit = if cfg.transport == mw_core::TransportChoice::Udp { 64 << 10 } else { 16 << 10 };
        run_job(2, cfg, move |ep| {
            let sizes = [0usize, 1, limit - 1, limit, limit + 1, 100_003, big + 7];
            let peer = 1 - ep.rank();
            assert_eq!(ep.eager_limit(peer).unwrap(), limit);
            for (i, &len) in sizes.iter().enumerate() {
                let data = pattern(i as u32 + 100 * ep.rank(), len);
                let mut buf = vec![0xeeu8; len + 3];
                if ep.rank() == 0 {
                    ep.send(peer, i as u64, &data).unwrap();
                    let st = ep.recv(peer, i as u64, &mut buf).unwrap();
                    assert_eq!(st.len, len);
                } else {
                    // Nonblocking forms on this side, posted before the data comes.
                    let h = ep.irecv(peer, i as u64, &mut buf).unwrap();
                    let st = h.wait().unwrap();
                    assert_eq!(st.len, len);
                    ep.isend(peer, i as u64, &data).unwrap().wait().unwrap();
                }
                assert_eq!(&buf[..len], &pattern(i as u32 + 100 * peer, len)[..], "size {len}");
                assert_eq!(&buf[len..], &[0xee; 3], "bytes past the message untouched");
            }
            let stats = ep.msg_stats();
            // Exactly the sizes up to the path's limit went eagerly.
            assert_eq!((stats.eager_sent, stats.rndv_sent), (4, 3), "{stats:?}");
            ep.barrier().unwrap();
        });
    }
}

/// The eager limit is chosen per peer: `Config::eager_limit` toward other
/// hosts, `Config::shm_eager_limit` toward this host's ranks when given
/// (16 KiB between threads of one process when not), and both take effect
/// at the boundary.
#[test]
fn eager_limits_are_per_path_and_configurable() {
    // Ranks 0 and 1 share a host, rank 2 is on another one (UDP).
    let hosts = vec!["a".to_owned(), "a".to_owned(), "b".to_owned()];
    for (shm_limit, udp_limit) in [(None, 64 << 10), (Some(3000), 5000)] {
        let cfg = Config { shm_eager_limit: shm_limit, eager_limit: udp_limit, ..Config::default() };
        common::run_job_on_hosts(3, cfg, hosts.clone(), move |ep| {
            let configured = shm_limit.is_some();
            let shm_limit = shm_limit.unwrap_or(16 << 10);
            let limit_to = |peer: u32| if (ep.rank() == 2) != (peer == 2) { udp_limit } else { shm_limit };
            for peer in (0..3).filter(|&p| p != ep.rank()) {
                assert_eq!(ep.eager_limit(peer).unwrap(), limit_to(peer), "rank {} to {peer}", ep.rank());
            }
            assert!(matches!(ep.eager_limit(3), Err(mw_core::Error::BadRank { rank: 3, size: 3 })));
            // Rank 0 sends the two sizes around each limit to ranks 1 and 2.
            if ep.rank() == 0 {
                for peer in [1u32, 2] {
                    let limit = limit_to(peer);
                    for (i, len) in [limit, limit + 1].into_iter().enumerate() {
                        ep.send(peer, i as u64, &pattern(i as u32, len)).unwrap();
                    }
                }
                let stats = ep.msg_stats();
                assert_eq!((stats.eager_sent, stats.rndv_sent), (2, 2), "{stats:?}");
            } else {
                let limit = limit_to(0);
                for (i, len) in [limit, limit + 1].into_iter().enumerate() {
                    let mut buf = vec![0u8; len];
                    assert_eq!(ep.recv(0, i as u64, &mut buf).unwrap().len, len);
                    assert_eq!(buf, pattern(i as u32, len));
                }
            }
            ep.barrier().unwrap();
            // Active messages from rank 0 to rank 1: inline up to 64 KiB
            // between ranks of one host when the limit is left to us (a
            // pulled payload costs more than a tagged message's single
            // copy), up to the configured limit otherwise. The target pulls
            // a payload past it.
            ep.register_handler(5, |ctx, m| ctx.reply(&[], m.payload).unwrap()).unwrap();
            let pulled_before = ep.msg_stats().rndv_pulled;
            ep.barrier().unwrap();
            let am_limit = shm_limit.max(if configured { 0 } else { 64 << 10 });
            if ep.rank() == 0 {
                for len in [am_limit, am_limit + 1] {
                    let reply = ep.am_request(1, 5, &[], &pattern(7, len)).unwrap();
                    assert_eq!(reply.payload, pattern(7, len), "am of {len} bytes");
                }
                // The reply past the limit was pulled back.
                assert_eq!(ep.msg_stats().rndv_pulled - pulled_before, 1);
            }
            ep.barrier().unwrap();
            if ep.rank() == 1 {
                let pulled = ep.msg_stats().rndv_pulled - pulled_before;
                assert_eq!(pulled, 1, "only the request past the limit was pulled");
            }
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn truncation_is_a_clear_error() {
    run_job(2, small_eager(Config::default()), |ep| {
        if ep.rank() == 0 {
            ep.send(1, 1, &[1u8; 100]).unwrap(); // eager, too long
            ep.send(1, 2, &[2u8; 5000]).unwrap(); // rendezvous, too long: still completes
            ep.send(1, 3, &[3u8; 10]).unwrap();
            assert!(matches!(ep.send(1, ANY_TAG, b"x"), Err(Error::InvalidArgument(_))));
            assert!(matches!(ep.send(9, 0, b"x"), Err(Error::BadRank { .. })));
        } else {
            let mut small = [0x55u8; 16];
            assert_eq!(ep.recv(0, 1, &mut small), Err(Error::Truncated));
            assert_eq!(small, [0x55; 16], "buffer untouched");
            let mut mid = vec![0x66u8; 4000];
            let h = ep.irecv(0, 2, &mut mid).unwrap();
            assert_eq!(h.wait(), Err(Error::Truncated));
            assert!(mid.iter().all(|&b| b == 0x66));
            let st = ep.recv(0, 3, &mut small).unwrap();
            assert_eq!((st.len, &small[..10]), (10, &[3u8; 10][..]), "later messages unaffected");
        }
        ep.barrier().unwrap();
    });
}

/// A blocking receive takes its message straight from a same-host peer's
/// ring when it is the oldest posted receive and the message is an eager
/// one it accepts; everything else must go the general way. Posted order,
/// tag matching behind a message for another tag, truncation and the
/// credit grants a long stream needs must all come out as they would
/// without that shortcut (a grant withheld would hang the stream).
#[test]
fn receives_taken_from_the_ring_keep_matching_order_and_credit() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        let cfg = Config { unexpected_credit: 16 << 10, ..cfg };
        run_job(2, cfg, |ep| {
            const STREAM: u32 = 3000;
            if ep.rank() == 0 {
                ep.send(1, 7, b"first").unwrap();
                ep.send(1, 7, b"second").unwrap();
                ep.barrier().unwrap();
                // Tag 2 ahead of tag 1, which rank 1 asks for first.
                ep.send(1, 2, b"two").unwrap();
                ep.send(1, 1, b"one").unwrap();
                ep.send(1, 3, &[9u8; 64]).unwrap();
                for i in 0..STREAM {
                    ep.send(1, 4 + u64::from(i % 2), &seq_msg(i, 8 + (i as usize % 5) * 8)).unwrap();
                }
                ep.barrier().unwrap();
                // After rank 1's receives are waiting.
                std::thread::sleep(std::time::Duration::from_millis(30));
                ep.send(1, 8, b"a").unwrap();
                ep.send(1, 8, b"b").unwrap();
                ep.send(1, 9, b"c").unwrap();
                ep.barrier().unwrap();
                return;
            }
            // Posted order: the irecv is older than the blocking receive.
            let mut early = [0u8; 16];
            let mut late = [0u8; 16];
            let handle = ep.irecv(0, 7, &mut early).unwrap();
            let st = ep.recv(0, 7, &mut late).unwrap();
            assert_eq!(&late[..st.len], b"second", "the older posted receive gets the first message");
            let st = handle.wait().unwrap();
            assert_eq!(&early[..st.len], b"first");
            ep.barrier().unwrap();
            let mut buf = [0u8; 64];
            let st = ep.recv(0, 1, &mut buf).unwrap();
            assert_eq!((&buf[..st.len], st.tag), (&b"one"[..], 1));
            let st = ep.recv(0, 2, &mut buf).unwrap();
            assert_eq!((&buf[..st.len], st.tag), (&b"two"[..], 2));
            let mut small = [0u8; 8];
            assert!(matches!(ep.recv(0, 3, &mut small), Err(Error::Truncated)), "a message larger than the buffer");
            for i in 0..STREAM {
                // Blocking receives and nonblocking ones waited on at once
                // (both may take the message from the ring).
                let tag = 4 + u64::from(i % 2);
                let st = if i % 3 == 0 {
                    ep.irecv(0, tag, &mut buf).unwrap().wait().unwrap()
                } else {
                    ep.recv(0, tag, &mut buf).unwrap()
                };
                assert_eq!(&buf[..st.len], &seq_msg(i, 8 + (i as usize % 5) * 8)[..], "message {i}");
            }
            ep.barrier().unwrap();
            // A blocking receive that waits before its message arrives
            // (on shared memory it would take it straight from the ring)
            // still comes after the receives posted before it, wildcards
            // included.
            let (mut any_source, mut any_tag) = ([0u8; 4], [0u8; 4]);
            let first = ep.irecv(ANY_SOURCE, 8, &mut any_source).unwrap();
            let second = ep.irecv(0, ANY_TAG, &mut any_tag).unwrap();
            let st = ep.recv(0, 9, &mut buf).unwrap();
            assert_eq!((&buf[..st.len], st.tag), (&b"c"[..], 9));
            let st = first.wait().unwrap();
            assert_eq!((&any_source[..st.len], st.tag), (&b"a"[..], 8), "the wildcard-source receive was posted first");
            let st = second.wait().unwrap();
            assert_eq!((&any_tag[..st.len], st.tag), (&b"b"[..], 8), "the wildcard-tag receive was posted second");
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn credit_flood_is_bounded_and_lossless() {
    for (name, cfg) in
        [("shm", Config::default()), ("clean", common::udp(Config::default())), ("mixed", lossy(0.03, 0.03, 0.03, 31))]
    {
        eprintln!("config {name}");
        let cfg = Config { unexpected_credit: 16 << 10, ..small_eager(cfg) };
        run_job(3, cfg, |ep| {
            const N: u32 = 600;
            const LEN: usize = 500;
            let credit = 16u64 << 10;
            let me = ep.rank();
            if me != 0 {
                // Rank 1 floods with blocking sends, rank 2 with isends.
                let msgs: Vec<Vec<u8>> = (0..N).map(|i| seq_msg(i + 10_000 * me, LEN)).collect();
                if me == 1 {
                    for m in &msgs {
                        ep.send(0, 9, m).unwrap();
                    }
                } else {
                    let handles: Vec<_> = msgs.iter().map(|m| ep.isend(0, 9, m).unwrap()).collect();
                    mw_core::wait_all(handles).unwrap();
                }
                assert!(ep.msg_stats().credit_stalls > 0, "a flooding sender is slowed");
            } else {
                // Let the floods fill the unexpected buffer, then keep
                // progressing: it must not grow past the credit per sender.
                while ep.msg_stats().unexpected_bytes + 2 * (LEN as u64 + 64) < 2 * credit {
                    ep.progress();
                }
                for _ in 0..2000 {
                    ep.progress();
                }
                let stats = ep.msg_stats();
                assert!(stats.unexpected_bytes_max <= 2 * credit, "unexpected buffer grew: {stats:?}");
                let mut next = [0u32; 3];
                let mut buf = vec![0u8; LEN];
                for _ in 0..2 * N {
                    let st = ep.recv(ANY_SOURCE, 9, &mut buf).unwrap();
                    let src = st.source as usize;
                    assert_eq!(&buf[..], &seq_msg(next[src] + 10_000 * st.source, LEN)[..], "lost or reordered");
                    next[src] += 1;
                }
                assert_eq!(next, [0, N, N]);
                assert!(ep.msg_stats().unexpected_bytes_max <= 2 * credit);
            }
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn active_messages() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        let big = if name == "clean" { 3 << 20 } else { 300_000 };
        run_job(3, cfg, move |ep| {
            let forwarded = Arc::new(AtomicUsize::new(0));
            // 1: echo args+1 and the payload reversed.
            ep.register_handler(1, |ctx, m| {
                let args: Vec<u64> = m.args.iter().map(|a| a + 1).collect();
                let mut payload = m.payload.to_vec();
                payload.reverse();
                ctx.reply(&args, &payload).unwrap();
                assert!(ctx.reply(&[], &[]).is_err(), "second reply refused");
            })
            .unwrap();
            // 2: no explicit reply; forwards a one-way AM to rank 0.
            ep.register_handler(2, |ctx, m| {
                ctx.am_send(0, 3, &[u64::from(ctx.source())], m.payload).unwrap();
            })
            .unwrap();
            let counter = forwarded.clone();
            ep.register_handler(3, move |ctx, m| {
                assert_eq!(m.payload.len(), 1);
                assert!(!ctx.wants_reply());
                // Ignored (nobody waits), and must not leak into the next
                // handler's reply through the reused reply buffer.
                ctx.reply(&[7], b"ignored").unwrap();
                counter.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
            // 4: a large reply.
            ep.register_handler(4, move |ctx, m| {
                ctx.reply(&[m.payload.len() as u64], &pattern(44, big)).unwrap();
            })
            .unwrap();
            ep.register_handler(5, |_ctx, _m| panic!("handler failure")).unwrap();
            // 6: all eight arguments back, reversed, after a refused reply
            // of nine (which must leave no trace in the one that follows).
            ep.register_handler(6, |ctx, m| {
                assert_eq!(
                    ctx.reply(&[u64::MAX; 9], b"nine").unwrap_err(),
                    Error::InvalidArgument("at most 8 active-message arguments")
                );
                let args: Vec<u64> = m.args.iter().rev().copied().collect();
                ctx.reply(&args, m.payload).unwrap();
            })
            .unwrap();
            assert!(ep.register_handler(1, |_, _| {}).is_err(), "taken id");
            assert!(ep.register_handler(RESERVED_HANDLER_BASE, |_, _| {}).is_err(), "reserved id");
            assert!(ep.register_handler(0xFFFF, |_, _| {}).is_err(), "reserved id");
            ep.barrier().unwrap();

            let me = ep.rank();
            let right = (me + 1) % ep.size();
            let r = ep.am_request(right, 1, &[1, 2, 3], b"abc").unwrap();
            assert_eq!(r.args, vec![2, 3, 4]);
            assert_eq!(r.payload, b"cba");
            // Empty reply when the handler gives none, and the forward runs.
            let r = ep.am_request(right, 2, &[], b"z").unwrap();
            assert_eq!(r, mw_core::AmReplyData::default());
            // Large request payload (pulled by the target) and large reply.
            let payload = pattern(me, big + 1);
            let r = ep.am_request(right, 4, &[], &payload).unwrap();
            assert_eq!(r.args, vec![big as u64 + 1]);
            assert_eq!(r.payload, pattern(44, big));
            let r = ep.am_request(right, 1, &[9], &payload).unwrap();
            assert_eq!(r.args, vec![10]);
            assert!(r.payload.iter().rev().eq(payload.iter()), "large echo");
            // A smaller large payload after a larger one: the target lands it
            // in the buffer the last one used, and its handler must see this
            // payload exactly, nothing of the last one's tail.
            let smaller = pattern(me + 7, big / 2 + 5);
            let r = ep.am_request(right, 1, &[], &smaller).unwrap();
            assert!(r.payload.iter().rev().eq(smaller.iter()), "smaller large echo");
            // Into a reused reply (a large one, then small ones): each
            // call's reply exactly, nothing stale, and an error leaves it
            // empty.
            let mut reply = mw_core::AmReplyData::default();
            ep.am_request_into(right, 4, &[], &payload, &mut reply).unwrap();
            assert_eq!((reply.args.as_slice(), reply.payload == pattern(44, big)), (&[big as u64 + 1][..], true));
            ep.am_request_into(right, 1, &[5], b"abc", &mut reply).unwrap();
            assert_eq!(reply, mw_core::AmReplyData { args: vec![6], payload: b"cba".to_vec() });
            for i in 0..20u8 {
                ep.am_request_into(right, 1, &[u64::from(i)], &[i, i + 1], &mut reply).unwrap();
                assert_eq!(reply, mw_core::AmReplyData { args: vec![u64::from(i) + 1], payload: vec![i + 1, i] });
            }
            ep.am_request_into(right, 2, &[], b"z", &mut reply).unwrap();
            assert_eq!(reply, mw_core::AmReplyData::default(), "a handler without reply leaves nothing stale");
            ep.am_request_into(right, 1, &[1], b"q", &mut reply).unwrap();
            assert_eq!(ep.am_request_into(right, 77, &[], b"", &mut reply).unwrap_err(), Error::NoHandler);
            assert_eq!(reply, mw_core::AmReplyData::default(), "an error leaves the reply empty");
            let handle = ep.am_request_nb(right, 1, &[3], b"xy").unwrap();
            handle.wait_into(&mut reply).unwrap();
            assert_eq!(reply, mw_core::AmReplyData { args: vec![4], payload: b"yx".to_vec() });
            // Errors the initiator sees.
            assert_eq!(ep.am_request(right, 77, &[], b"").unwrap_err(), Error::NoHandler);
            assert_eq!(ep.am_request(right, 77, &[], &payload).unwrap_err(), Error::NoHandler);
            assert_eq!(ep.am_request(right, 5, &[], b"").unwrap_err(), Error::Unsupported);
            assert!(ep.am_request(right, RESERVED_HANDLER_BASE, &[], b"").is_err());
            assert!(ep.am_request(right, 1, &[0; 9], b"").is_err());
            // Every argument slot, both ways, then fewer into the same reply.
            let eight: Vec<u64> = (1..=8).map(|i| i * 0x0101_0101_0101_0101).collect();
            ep.am_request_into(right, 6, &eight, b"8", &mut reply).unwrap();
            assert_eq!(reply.args, eight.iter().rev().copied().collect::<Vec<_>>());
            assert_eq!(reply.payload, b"8");
            ep.am_request_into(right, 6, &[3, 4], b"", &mut reply).unwrap();
            assert_eq!(reply, mw_core::AmReplyData { args: vec![4, 3], payload: Vec::new() });
            // To self, and many in flight at once.
            assert_eq!(ep.am_request(me, 1, &[0], b"xy").unwrap().payload, b"yx");
            let handles: Vec<_> = (0..50u64).map(|i| ep.am_request_nb(right, 1, &[i], &[i as u8]).unwrap()).collect();
            for (i, h) in handles.into_iter().enumerate() {
                // Reply buffers are reused: each payload must be its own.
                assert_eq!(
                    h.wait().unwrap(),
                    mw_core::AmReplyData { args: vec![i as u64 + 1], payload: vec![i as u8] }
                );
            }
            ep.barrier().unwrap();
            if me == 0 {
                // Every rank's handler 2 forwarded one message here.
                let n = ep.size() as usize;
                while forwarded.load(Ordering::SeqCst) < n {
                    ep.progress();
                }
            }
            ep.barrier().unwrap();
            // Rank 0's handler 1 now replies after its handler 3 ran.
            let r = ep.am_request(right, 1, &[1], b"ab").unwrap();
            assert_eq!(r, mw_core::AmReplyData { args: vec![2], payload: b"ba".to_vec() });
            ep.barrier().unwrap();
            // Every request is freed: the blocking large requests' in-place
            // exposures were withdrawn with their tokens, the nonblocking
            // ones' copies released when the target's RndvDone came.
            let mut live = ep.stats().0.requests_live;
            let wait_start = std::time::Instant::now();
            while live != 0 && wait_start.elapsed() < std::time::Duration::from_secs(10) {
                ep.progress();
                live = ep.stats().0.requests_live;
            }
            assert_eq!(live, 0, "requests left allocated after the AM exchanges");
            // Same-host requests run straight from the ring (all the small
            // ones here); over UDP none can.
            // And their inline replies are taken from the ring by the waiting
            // requester (some may go through a progress round instead).
            let stats = ep.msg_stats();
            let (in_place, replies_in_place) = (stats.am_in_place, stats.am_replies_in_place);
            if name.starts_with("shm") {
                assert!(in_place >= 25, "same-host requests run from the ring: {in_place} of 50+");
                assert!(replies_in_place > 0, "no reply taken from the ring");
            } else {
                assert_eq!((in_place, replies_in_place), (0, 0), "no ring over UDP");
            }
            assert!(ep.unregister_handler(1));
            assert!(!ep.unregister_handler(1));
            ep.barrier().unwrap();
            assert_eq!(ep.am_request(right, 1, &[], b"").unwrap_err(), Error::NoHandler);
            ep.barrier().unwrap();
        });
    }
}

/// A blocking request to a same-host peer waits for its reply holding the
/// lock, before its request is allocated, and hands over to the general
/// path whenever it cannot take the reply itself: another record from the
/// target in front of the reply, a handler slower than the spin, another
/// thread wanting the lock (two threads requesting at once), an error or a
/// large reply. Every reply must reach its own request, and nothing may
/// stay allocated.
#[test]
fn blocking_requests_to_a_same_host_peer_hand_over_when_they_must() {
    run_job(2, common::shm(Config::default()), |ep| {
        ep.register_handler(1, |ctx, m| {
            ctx.reply(&[m.args[0] + 1], m.payload).unwrap();
        })
        .unwrap();
        ep.register_handler(2, |ctx, m| {
            // Well past the requester's spin (~4 µs).
            std::thread::sleep(std::time::Duration::from_millis(5));
            ctx.reply(&[m.args[0] * 2], &[]).unwrap();
        })
        .unwrap();
        ep.register_handler(3, |ctx, _m| {
            ctx.reply(&[], &pattern(3, 100_000)).unwrap();
        })
        .unwrap();
        ep.barrier().unwrap();
        let mut reply = mw_core::AmReplyData::default();
        if ep.rank() == 1 {
            // Answers each message from rank 0 with one of its own, then
            // waits for the next: the request rank 0 sent after its message
            // runs in that wait, so its reply lands behind our message.
            for _ in 0..20 {
                let mut buf = [0u8; 8];
                ep.recv(0, 8, &mut buf).unwrap();
                ep.send(0, 9, &buf).unwrap();
            }
        } else {
            for i in 0..20u64 {
                ep.send(1, 8, &i.to_le_bytes()).unwrap();
                ep.am_request_into(1, 1, &[i], &[i as u8; 3], &mut reply).unwrap();
                assert_eq!(reply, mw_core::AmReplyData { args: vec![i + 1], payload: vec![i as u8; 3] });
            }
            // The messages that came in front of the replies are all there, in order.
            for i in 0..20u64 {
                let mut buf = [0u8; 8];
                ep.recv(1, 9, &mut buf).unwrap();
                assert_eq!(u64::from_le_bytes(buf), i);
            }
        }
        ep.barrier().unwrap();
        if ep.rank() == 0 {
            ep.am_request_into(1, 2, &[21], b"", &mut reply).unwrap();
            assert_eq!(reply, mw_core::AmReplyData { args: vec![42], payload: vec![] }, "slow handler");
            ep.am_request_into(1, 3, &[], b"", &mut reply).unwrap();
            assert_eq!(reply.payload, pattern(3, 100_000), "large reply");
            assert_eq!(ep.am_request_into(1, 77, &[], b"", &mut reply).unwrap_err(), Error::NoHandler);
            assert_eq!(reply, mw_core::AmReplyData::default(), "an error leaves the reply empty");
            // Two threads at once: each sees its own replies.
            std::thread::scope(|s| {
                for t in 0..2u64 {
                    s.spawn(move || {
                        let mut reply = mw_core::AmReplyData::default();
                        for i in 0..2000u64 {
                            let arg = t << 32 | i;
                            ep.am_request_into(1, 1, &[arg], &arg.to_le_bytes(), &mut reply).unwrap();
                            assert_eq!(reply.args, [arg + 1]);
                            assert_eq!(reply.payload, arg.to_le_bytes());
                        }
                    });
                }
            });
            let stats = ep.msg_stats();
            assert!(stats.am_replies_in_place > 0, "no reply taken from the ring");
        }
        ep.barrier().unwrap();
        assert_eq!(ep.stats().0.requests_live, 0, "requests left allocated");
    });
}

#[test]
fn fifo_backpressure_and_watermark() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        run_job(4, cfg, |ep| {
            const PER: u32 = 40;
            let me = ep.rank();
            let fifo = if me == 0 { Some(ep.create_fifo(64, 8).unwrap()) } else { None };
            let key = match &fifo {
                Some(f) => f.key().0,
                None => 0,
            };
            let keys = ep.allgather_bytes(&key.to_le_bytes()).unwrap();
            let key = FifoKey(u64::from_le_bytes(keys[0][..8].try_into().unwrap()));
            if let Some(fifo) = &fifo {
                let marks = Arc::new(AtomicUsize::new(0));
                let m = marks.clone();
                fifo.set_watermark(move |len| {
                    assert!(len >= 6);
                    m.fetch_add(1, Ordering::SeqCst);
                });
                ep.barrier().unwrap();
                // Let the pushers fill it, then refuse our own push.
                while fifo.len() < 8 {
                    ep.progress();
                }
                assert_eq!(marks.load(Ordering::SeqCst), 1, "watermark at 3/4");
                assert_eq!(ep.try_fifo_push(0, key, b"self"), Err(Error::WouldBlock));
                assert_eq!(ep.try_fifo_push(0, FifoKey(key.0 ^ 1), b"x"), Err(Error::BadKey));
                let mut next = [0u32; 4];
                let mut buf = [0u8; 64];
                let mut tiny = [0u8; 2];
                assert_eq!(fifo.try_pop(&mut tiny), Err(Error::Truncated), "entry stays queued");
                for _ in 0..3 * PER {
                    let len = fifo.pop(&mut buf).unwrap();
                    let (src, seq) = (buf[0] as usize, u32::from_le_bytes(buf[1..5].try_into().unwrap()));
                    assert_eq!(len, 5 + seq as usize % 50);
                    assert_eq!(seq, next[src], "entries from rank {src} lost or reordered");
                    next[src] += 1;
                }
                assert_eq!(next, [0, PER, PER, PER]);
                assert_eq!(fifo.try_pop(&mut buf), Ok(None));
                // Re-armed once below 3/4: filling it again fires again.
                let before = marks.load(Ordering::SeqCst);
                for i in 0..6u8 {
                    ep.try_fifo_push(0, key, &[i]).unwrap();
                }
                assert_eq!(marks.load(Ordering::SeqCst), before + 1);
                for i in 0..6u8 {
                    assert_eq!(fifo.pop(&mut buf).unwrap(), 1);
                    assert_eq!(buf[0], i);
                }
            } else {
                ep.barrier().unwrap();
                for seq in 0..PER {
                    let mut entry = vec![me as u8];
                    entry.extend_from_slice(&seq.to_le_bytes());
                    entry.resize(5 + seq as usize % 50, 7);
                    ep.fifo_push(0, key, &entry).unwrap();
                }
                assert_eq!(ep.try_fifo_push(0, key, &[0u8; 65]), Err(Error::Truncated), "larger than a slot");
                assert_eq!(ep.fifo_push(0, FifoKey(key.0 ^ 1), b"x"), Err(Error::BadKey));
            }
            ep.barrier().unwrap();
            drop(fifo);
            ep.barrier().unwrap();
            if me == 1 {
                assert_eq!(ep.try_fifo_push(0, key, b"gone"), Err(Error::BadKey));
            }
            ep.barrier().unwrap();
        });
    }
}

#[test]
fn raw_datagrams_arrive_unreliably() {
    for (name, cfg) in [("clean", Config::default()), ("drop5", lossy(0.05, 0.0, 0.0, 41))] {
        eprintln!("config {name}");
        run_job(2, cfg, |ep| {
            let max = ep.raw_max_len();
            assert!(max >= 1024);
            assert!(matches!(ep.send_raw(1 - ep.rank(), &vec![0u8; max + 1]), Err(Error::InvalidArgument(_))));
            ep.send_raw(ep.rank(), b"to myself").unwrap();
            let mut buf = vec![0u8; max];
            let (src, len) = ep.recv_raw(&mut buf).unwrap();
            assert_eq!((src, &buf[..len]), (ep.rank(), &b"to myself"[..]));
            ep.barrier().unwrap();
            if ep.rank() == 0 {
                // Unreliable: resend until the peer confirms over a reliable message.
                let data = pattern(5, max);
                loop {
                    ep.send_raw(1, &data).unwrap();
                    if ep.iprobe(1, 99).unwrap().is_some() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                let mut ok = [0u8; 1];
                ep.recv(1, 99, &mut ok).unwrap();
                assert_eq!(ok, [1]);
            } else {
                let (src, len) = ep.recv_raw(&mut buf).unwrap();
                assert_eq!((src, len), (0, max));
                assert_eq!(buf, pattern(5, max));
                ep.send(0, 99, &[1]).unwrap();
            }
            ep.barrier().unwrap();
            // Drain duplicates of the resent datagram; nothing else arrives.
            while let Some((src, _)) = ep.try_recv_raw(&mut buf).unwrap() {
                assert_eq!(src, 0);
            }
        });
    }
}

#[test]
fn irecv_completes_during_compute_with_progress_thread() {
    let cfg = Config { progress: ProgressMode::Thread, ..Config::default() };
    run_job(2, cfg, |ep| {
        const LEN: usize = 16 << 20;
        if ep.rank() == 0 {
            let data = pattern(3, LEN);
            ep.barrier().unwrap();
            ep.send(1, 1, &data).unwrap();
        } else {
            let mut buf = vec![0u8; LEN];
            let h = ep.irecv(0, 1, &mut buf).unwrap();
            ep.barrier().unwrap();
            // Compute without calling into the library: only the progress
            // thread can complete the receive.
            // (The harness fails the test if this never ends.)
            let mut x = 1u64;
            while !h.is_complete() {
                for i in 0..100_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
                }
            }
            assert_eq!(h.wait().unwrap().len, LEN);
            assert!(buf == pattern(3, LEN));
        }
        ep.barrier().unwrap();
    });
}

#[test]
fn eight_ranks_all_to_one_and_ring() {
    for (name, cfg) in [("shm", Config::default()), ("lossy", lossy(0.02, 0.02, 0.02, 51))] {
        eprintln!("config {name}");
        eight_ranks_all_to_one_and_ring_with(cfg);
    }
}

fn eight_ranks_all_to_one_and_ring_with(cfg: Config) {
    run_job(8, small_eager(cfg), |ep| {
        let me = ep.rank();
        let n = ep.size();
        if me != 0 {
            ep.send(0, u64::from(me), &pattern(me, 100 * me as usize)).unwrap();
            ep.send(0, 1000, &pattern(me + 50, 3000)).unwrap();
        } else {
            let mut seen = vec![false; n as usize];
            let mut buf = vec![0u8; 4096];
            for _ in 1..n {
                let st = ep.recv(ANY_SOURCE, ANY_TAG, &mut buf).unwrap();
                // Each rank's small message comes before its large one.
                assert_eq!(st.tag, u64::from(st.source));
                assert_eq!(&buf[..st.len], &pattern(st.source, 100 * st.source as usize)[..]);
                let st2 = ep.recv(st.source, 1000, &mut buf).unwrap();
                assert_eq!(&buf[..st2.len], &pattern(st.source + 50, 3000)[..]);
                seen[st.source as usize] = true;
            }
            assert!(seen[1..].iter().all(|&s| s));
        }
        // Ring with active messages.
        ep.register_handler(7, |ctx, m| ctx.reply(&[m.args[0] * 2], &[]).unwrap()).unwrap();
        ep.barrier().unwrap();
        let r = ep.am_request((me + 1) % n, 7, &[u64::from(me)], &[]).unwrap();
        assert_eq!(r.args, vec![2 * u64::from(me)]);
        ep.barrier().unwrap();
    });
}

#[test]
fn self_sends_contexts_cancel_and_probe() {
    run_job(2, small_eager(Config::default()), |ep| {
        let me = ep.rank();
        // To self: eager and rendezvous (nonblocking send, then receive).
        let small = pattern(1, 100);
        let large = pattern(2, 300_000);
        let h1 = ep.isend(me, 1, &small).unwrap();
        let h2 = ep.isend(me, 2, &large).unwrap();
        let mut buf = vec![0u8; 300_000];
        let st = ep.recv(ANY_SOURCE, 2, &mut buf).unwrap();
        assert_eq!((st.source, st.len), (me, large.len()));
        assert_eq!(buf, large);
        assert_eq!(ep.recv(me, ANY_TAG, &mut buf).unwrap().len, 100);
        assert_eq!(&buf[..100], &small[..]);
        h1.wait().unwrap();
        h2.wait().unwrap();
        ep.barrier().unwrap();
        // Contexts never mix; a dropped receive is cancelled, not fed.
        let peer = 1 - me;
        if me == 0 {
            let mut early = [0u8; 8];
            drop(ep.irecv(peer, 3, &mut early).unwrap());
            ep.barrier().unwrap();
            while ep.iprobe_in(5, peer, 3).unwrap().is_none() {}
            assert_eq!(ep.iprobe(peer, 3).unwrap(), None, "context 5 is not context 0");
            let mut b = [0u8; 8];
            let st = ep.recv_in(5, peer, 3, &mut b).unwrap();
            assert_eq!(&b[..st.len], b"ctx5");
            ep.barrier().unwrap();
            let mut h = ep.irecv(peer, 3, &mut b).unwrap();
            while !h.test() {}
            assert_eq!(h.wait().unwrap().len, 4);
            assert_eq!(&b[..4], b"ctx0");
            assert_eq!(early, [0; 8]);
        } else {
            ep.barrier().unwrap();
            ep.send_in(5, peer, 3, b"ctx5").unwrap();
            ep.barrier().unwrap();
            ep.send(peer, 3, b"ctx0").unwrap();
        }
        ep.barrier().unwrap();
    });
}

/// Over shared memory a large message from user memory is copied by both
/// ranks at once: the receiver reads chunks while the sender, waiting for
/// it, writes others into the receiver's buffer (`mw_transport::shm`'s
/// assist). Every byte must land exactly where it belongs whoever copied it:
/// sizes that are not a multiple of the chunk, receive buffers longer than
/// the message, blocking and owned receives, and both directions at once.
/// The sender must really help (its counter), which needs both ranks on a
/// CPU at the same time: rounds go on until it has, at most 50.
#[test]
fn large_shm_messages_are_copied_by_both_ranks() {
    run_job(2, common::shm(Config::default()), |ep| {
        let peer = 1 - ep.rank();
        let sizes = [(512 << 10) + 1, 3 << 20, (8 << 20) + 4095];
        for round in 0..50u32 {
            for (i, &len) in sizes.iter().enumerate() {
                let (tag, seed) = (u64::from(round) * 8 + i as u64, round * 100 + i as u32);
                if ep.rank() == 0 {
                    ep.send(peer, tag, &pattern(seed, len)).unwrap();
                } else {
                    let mut buf = vec![0xee; len + 9];
                    assert_eq!(ep.recv(peer, tag, &mut buf).unwrap().len, len);
                    assert!(buf[..len] == pattern(seed, len)[..], "round {round}, {len} bytes");
                    assert_eq!(&buf[len..], &[0xee; 9], "bytes past the message untouched");
                }
            }
            // Rank 0 says whether to go on (it knows whether it has helped).
            let mut go_on = [0u8];
            if ep.rank() == 0 {
                go_on[0] = u8::from(ep.stats().0.shm_assist_bytes == 0 && round < 49);
                ep.send(peer, 7777, &go_on).unwrap();
            } else {
                ep.recv(peer, 7777, &mut go_on).unwrap();
            }
            if go_on[0] == 0 {
                break;
            }
        }
        if ep.rank() == 0 {
            assert!(ep.stats().0.shm_assist_bytes > 0, "the waiting sender never helped: {:?}", ep.stats().0);
        }
        // Both directions at once, owned buffers: each rank is sender and receiver.
        let len = (6 << 20) + 13;
        for round in 0..3u32 {
            let mine = pattern(1000 + round * 2 + ep.rank(), len);
            let send = ep.isend_owned(peer, 9000 + u64::from(round), mine.clone()).unwrap();
            let (buf, status) = ep.irecv_owned(peer, 9000 + u64::from(round), vec![0u8; len]).unwrap().wait();
            assert_eq!(status.unwrap().len, len);
            assert!(buf == pattern(1000 + round * 2 + peer, len), "round {round}");
            let (back, result) = send.wait();
            result.unwrap();
            assert!(back == mine, "the send buffer comes back unchanged");
        }
        ep.barrier().unwrap();
    });
}

#[test]
fn owned_buffers_send_and_receive_in_place() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        let big = if name.starts_with("shm") || name == "clean" { 3 << 20 } else { 300_000 };
        // Same-host ranks with cross-memory attach pull large payloads directly.
        let expect_direct = name == "shm";
        // Rank 1 forgets one matched receive's handle on purpose (below).
        run_job_keeping_requests(2, small_eager(cfg), move |ep| {
            let sizes = [0usize, 1, 1023, 1024, 1025, 100_003, big + 7];
            let peer = 1 - ep.rank();
            let direct_before = ep.stats().0.shm_direct_ops;
            for (i, &len) in sizes.iter().enumerate() {
                let tag = i as u64;
                if ep.rank() == 0 {
                    let data = pattern(i as u32, len);
                    let (back, result) = ep.isend_owned(peer, tag, data.clone()).unwrap().wait();
                    result.unwrap();
                    assert_eq!(back, data, "the send buffer comes back unchanged");
                } else {
                    // Posted before arrival for even sizes, after for odd ones.
                    if i % 2 == 1 {
                        ep.probe(peer, tag).unwrap();
                    }
                    let h = ep.irecv_owned(peer, tag, vec![0xee; len + 3]).unwrap();
                    let (buf, status) = h.wait();
                    let status = status.unwrap();
                    assert_eq!((status.source, status.tag, status.len), (peer, tag, len));
                    assert_eq!(buf.len(), len + 3, "the whole buffer comes back");
                    assert_eq!(&buf[..len], &pattern(i as u32, len)[..], "size {len}");
                    assert_eq!(&buf[len..], &[0xee; 3], "bytes past the message untouched");
                }
            }
            if ep.rank() == 1 && expect_direct {
                assert!(ep.stats().0.shm_direct_ops > direct_before, "large messages pulled directly");
            }
            // A too-small buffer: Truncated, buffer back untouched; later messages fine.
            if ep.rank() == 0 {
                ep.send(peer, 50, &[1u8; 5000]).unwrap();
                ep.send(peer, 51, b"after").unwrap();
            } else {
                let (buf, result) = ep.irecv_owned(peer, 50, vec![9u8; 100]).unwrap().wait();
                assert_eq!(result, Err(Error::Truncated));
                assert_eq!(buf, vec![9u8; 100]);
                let (buf, result) = ep.irecv_owned(peer, 51, vec![0u8; 16]).unwrap().wait();
                assert_eq!(result.unwrap().len, 5);
                assert_eq!(&buf[..5], b"after");
            }
            // Dropping an unmatched receive cancels it; leaking a matched one
            // leaks its buffer and nothing else.
            if ep.rank() == 1 {
                drop(ep.irecv_owned(peer, 60, vec![0u8; 8]).unwrap());
                std::mem::forget(ep.irecv_owned(peer, 61, vec![0u8; 2 << 20]).unwrap());
            }
            ep.barrier().unwrap();
            if ep.rank() == 0 {
                ep.send(peer, 61, &pattern(61, 2 << 20)).unwrap();
                ep.send(peer, 60, b"late").unwrap();
            } else {
                let mut buf = [0u8; 8];
                assert_eq!(ep.recv(peer, 60, &mut buf).unwrap().len, 4, "the cancelled receive did not take it");
            }
            ep.barrier().unwrap();
            // The forgotten receive keeps its request, and nothing else is left.
            let leaked = u64::from(ep.rank() == 1);
            assert_eq!(common::settled_requests(ep, leaked), leaked, "rank {}", ep.rank());
        });
    }
}

/// A window of handed-over receives, as a message-rate loop keeps them:
/// each wait takes its message straight from a same-host ring when it is
/// the oldest posted receive, and must still see every message once, in
/// order, with a too-small buffer failing cleanly in the middle of the
/// stream (the message consumed, the buffer given back untouched).
#[test]
fn owned_receive_windows_keep_order_and_fail_truncation_cleanly() {
    for (name, cfg) in configs() {
        eprintln!("config {name}");
        // Credit for a quarter of the stream: grants must flow while it runs.
        let cfg = Config { unexpected_credit: 16 << 10, ..cfg };
        run_job(2, cfg, |ep| {
            const COUNT: u32 = 2000;
            const WINDOW: usize = 16;
            const SHORT_AT: u32 = 1234;
            let len_of = |i: u32| if i == SHORT_AT { 200 } else { 4 + (i as usize % 7) * 12 };
            if ep.rank() == 0 {
                let mut out = std::collections::VecDeque::new();
                for i in 0..COUNT {
                    if out.len() == WINDOW {
                        let h: mw_core::OwnedSend<'_> = out.pop_front().unwrap();
                        h.wait().1.unwrap();
                    }
                    out.push_back(ep.isend_owned(1, 5, seq_msg(i, len_of(i))).unwrap());
                }
                for h in out {
                    h.wait().1.unwrap();
                }
            } else {
                let mut posted = std::collections::VecDeque::new();
                let mut next = 0u32;
                let check = |(buf, result): (Vec<u8>, mw_core::Result<mw_core::RecvStatus>), i: u32| {
                    if i == SHORT_AT {
                        assert_eq!(result, Err(Error::Truncated), "message {i}");
                        assert_eq!(buf, vec![0xab; 100], "a truncated receive leaves its buffer untouched");
                    } else {
                        let st = result.unwrap();
                        assert_eq!(&buf[..st.len], &seq_msg(i, len_of(i))[..], "message {i}");
                    }
                };
                for _ in 0..COUNT {
                    if posted.len() == WINDOW {
                        let h: mw_core::OwnedRecv<'_> = posted.pop_front().unwrap();
                        check(h.wait(), next);
                        next += 1;
                    }
                    posted.push_back(ep.irecv_owned(0, 5, vec![0xab; 100]).unwrap());
                }
                for h in posted {
                    check(h.wait(), next);
                    next += 1;
                }
                assert_eq!(next, COUNT);
            }
            ep.barrier().unwrap();
        });
    }
}
