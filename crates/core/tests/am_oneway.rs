//! One-way active messages from application code (`Endpoint::am_send`)
//! over shared memory, UDP and UDP with injected loss: every message runs
//! its handler exactly once at the target, eager ones in issue order, a
//! large payload arrives whole, one to an unknown handler is counted at the
//! target, and bad arguments are refused at the call.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{lossy, pattern, run_job};
use mw_core::{Config, Error, RESERVED_HANDLER_BASE};

/// Small messages each rank sends its right neighbour.
const SMALL: u64 = 40;
/// A payload above the eager limit (pulled by the target).
const BIG: usize = 200_000;
/// Argument that marks the large message.
const BIG_TAG: u64 = u64::MAX;

/// (source, first argument, payload) of every message a rank's handler ran.
type Seen = Arc<Mutex<Vec<(u32, u64, Vec<u8>)>>>;

#[test]
fn one_way_messages_run_once_in_order() {
    let configs = [
        ("shm", common::shm(Config::default())),
        ("udp", common::udp(Config::default())),
        ("drop5+reorder5", lossy(0.05, 0.0, 0.05, 31)),
    ];
    for (name, cfg) in configs {
        eprintln!("config {name}");
        run_job(3, cfg, move |ep| {
            let seen: Seen = Arc::default();
            let log = seen.clone();
            ep.register_handler(10, move |ctx, m| {
                assert!(!ctx.wants_reply(), "a one-way message waits for no reply");
                log.lock().unwrap().push((m.source, m.args[0], m.payload.to_vec()));
            })
            .unwrap();
            ep.barrier().unwrap();
            let (me, size) = (ep.rank(), ep.size());
            let right = (me + 1) % size;
            let left = (me + size - 1) % size;

            // Refused at the call, nothing sent.
            assert_eq!(ep.am_send(size, 10, &[], b""), Err(Error::BadRank { rank: size, size }));
            assert!(matches!(ep.am_send(right, RESERVED_HANDLER_BASE, &[], b""), Err(Error::InvalidArgument(_))));
            assert!(matches!(ep.am_send(right, 10, &[0; 9], b""), Err(Error::InvalidArgument(_))));

            let big = pattern(me, BIG);
            for i in 0..SMALL {
                if i == SMALL / 2 {
                    ep.am_send(right, 10, &[BIG_TAG], &big).unwrap();
                    // To a handler the target does not have: counted there.
                    ep.am_send(right, 99, &[i], b"lost").unwrap();
                }
                let mut payload = pattern(me + 100, (i as usize) % 50);
                ep.am_send(right, 10, &[i, u64::from(me)], &payload).unwrap();
                payload.fill(0); // reusable as soon as the call returns
            }
            ep.am_send(me, 10, &[7], b"self").unwrap();

            // Everything from the left neighbour and from ourselves arrives.
            let expected = SMALL as usize + 2;
            let start = Instant::now();
            while seen.lock().unwrap().len() < expected {
                assert!(start.elapsed() < Duration::from_secs(30), "{name}: one-way messages missing");
                ep.progress();
            }
            let seen = seen.lock().unwrap().clone();
            assert_eq!(seen.len(), expected, "{name}: a message ran twice");
            let from_left: Vec<_> = seen.iter().filter(|(s, a, _)| *s == left && *a != BIG_TAG).collect();
            let order: Vec<u64> = from_left.iter().map(|(_, a, _)| *a).collect();
            if left != me {
                assert_eq!(order, (0..SMALL).collect::<Vec<_>>(), "{name}: eager messages in issue order");
                for (_, i, payload) in &from_left {
                    assert_eq!(payload, &pattern(left + 100, (*i as usize) % 50));
                }
                assert!(seen.contains(&(me, 7, b"self".to_vec())), "{name}: the message to self");
            }
            let bigs: Vec<_> = seen.iter().filter(|(_, a, _)| *a == BIG_TAG).collect();
            assert_eq!(bigs.len(), 1);
            assert_eq!((bigs[0].0, &bigs[0].2), (left, &pattern(left, BIG)), "{name}: the large payload");
            // The one to handler 99 came before the last small message.
            assert!(ep.msg_stats().am_no_handler >= 1, "{name}: the unknown handler is counted");
            ep.barrier().unwrap();
        });
    }
}
