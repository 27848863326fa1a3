//! Thread safety of the public surface, pinned: every public type's `Send`
//! and `Sync` are asserted here at compile time (a change that loses one
//! fails to build this test, and one that should lose one must edit this
//! list and the table in the crate docs, "Threads"), and a two-rank job
//! uses one `Region`, one `Team` and the `Endpoint` from scoped threads at
//! once.

use std::time::Duration;

use memwire::*;

const fn send_sync<T: Send + Sync + ?Sized>() {}

// Every public type, in the order of memwire's re-export list. All of them
// are both `Send` and `Sync` (the crate docs, "Threads", say why for the
// ones that borrow the endpoint or a buffer).
const _: () = {
    send_sync::<Config>();
    send_sync::<Endpoint>();
    send_sync::<PeerEvent>();
    send_sync::<ProgressMode>();
    send_sync::<ShmCopy>();
    send_sync::<StageStores>();
    send_sync::<TransportChoice>();
    send_sync::<Error>();
    send_sync::<Result<()>>();
    send_sync::<Access>();
    send_sync::<Arrival>();
    send_sync::<ArrivalKind>();
    send_sync::<AtomicOp>();
    send_sync::<AtomicWidth>();
    send_sync::<Cmp>();
    send_sync::<Handle<'static>>();
    send_sync::<Region<'static>>();
    send_sync::<RegionKey>();
    send_sync::<Signal>();
    send_sync::<SignalOp>();
    send_sync::<AmContext>();
    send_sync::<AmHandle<'static>>();
    send_sync::<AmMessage<'static>>();
    send_sync::<AmReplyData>();
    send_sync::<Fifo<'static>>();
    send_sync::<FifoKey>();
    send_sync::<OwnedRecv<'static>>();
    send_sync::<OwnedSend<'static>>();
    send_sync::<RecvHandle<'static>>();
    send_sync::<RecvStatus>();
    send_sync::<AllgatherAlgo>();
    send_sync::<AllreduceAlgo>();
    send_sync::<AlltoallAlgo>();
    send_sync::<BarrierAlgo>();
    send_sync::<BcastAlgo>();
    send_sync::<CollTrials>();
    send_sync::<CollTuning>();
    send_sync::<DType>();
    send_sync::<McastAlgo>();
    send_sync::<McastGroup<'static>>();
    send_sync::<ReduceAlgo>();
    send_sync::<ReduceOp>();
    send_sync::<Team<'static>>();
    send_sync::<VectorAlgo>();
    send_sync::<CoreStats>();
    send_sync::<DropCounts>();
    send_sync::<FaultConfig>();
    send_sync::<FaultConfigError>();
    send_sync::<FaultStats>();
    send_sync::<IoCounts>();
    send_sync::<McastStats>();
    send_sync::<MsgStats>();
    send_sync::<ProtoStats>();
};

/// Runs `body(ep)` on each rank of a two-rank job, each rank a thread of
/// this process with its own endpoint (so the ranks share memory).
fn two_ranks(body: fn(&Endpoint)) {
    let key = mw_bootstrap::random_job_key().unwrap();
    let server = mw_bootstrap::RendezvousServer::bind("127.0.0.1:0", 2, key).unwrap();
    let addr = server.local_addr().to_string();
    let _server = server.spawn().unwrap();
    let ranks: Vec<_> = (0..2u32)
        .map(|rank| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let hex = mw_bootstrap::job_key_to_hex(&key);
                let vars = |name: &str| match name {
                    "MW_RANK" => Some(rank.to_string()),
                    "MW_SIZE" => Some("2".to_owned()),
                    "MW_BOOTSTRAP" => Some(addr.clone()),
                    "MW_JOB_KEY" => Some(hex.clone()),
                    "MW_HOST" => Some("testhost".to_owned()),
                    _ => None,
                };
                let ep = Endpoint::init_from_lookup(Config::default(), vars).unwrap();
                body(&ep);
                ep.finalize().unwrap();
            })
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    for rank in ranks {
        while !rank.is_finished() {
            assert!(std::time::Instant::now() < deadline, "job did not finish within 60 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Err(panic) = rank.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

/// Offsets in the test region: the peer's data lands at `DATA`, this
/// rank's own thread writes `LOCAL`, the peer signals at `SIGNAL`.
const DATA: u64 = 0;
const LOCAL: u64 = 64;
const SIGNAL: u64 = 128;

#[test]
fn region_team_and_endpoint_from_scoped_threads() {
    two_ranks(|ep| {
        let me = ep.rank();
        let peer = 1 - me;
        let region = ep.alloc_symmetric(256, Access::ALL).unwrap();
        let mut team = ep.team_world().unwrap();
        let key = region.key();
        let sum = std::thread::scope(|s| {
            // The team moves to a thread of its own and runs collectives
            // there while other threads use the endpoint and the region.
            let collectives = s.spawn(move || {
                let mut sum = [0u64];
                for _ in 0..20 {
                    team.allreduce_typed(ReduceOp::Sum, &[u64::from(me) + 1], &mut sum).unwrap();
                    team.barrier().unwrap();
                }
                sum[0]
            });
            // Two threads share `&region`: one writes its own bytes
            // locally, one sends this rank's data to the peer with a signal.
            let region = &region;
            s.spawn(move || {
                for round in 0..50u8 {
                    region.write(LOCAL, &[round; 64]).unwrap();
                }
            });
            s.spawn(move || {
                let signal = Signal { key, offset: SIGNAL, op: SignalOp::Add, value: 1 };
                ep.put_signal(peer, key, DATA, &[me as u8 + 1; 64], signal).unwrap();
            });
            // This thread waits on the same region for the peer's signal.
            assert_eq!(ep.wait_until(region, SIGNAL, Cmp::Ge, 1).unwrap(), 1);
            let mut got = [0u8; 64];
            region.read(DATA, &mut got).unwrap();
            assert_eq!(got, [peer as u8 + 1; 64], "the peer's put, seen after its signal");
            collectives.join().unwrap()
        });
        assert_eq!(sum, 3, "1 + 2 over the two ranks");
        let mut local = [0u8; 64];
        region.read(LOCAL, &mut local).unwrap();
        assert_eq!(local, [49u8; 64], "the local writer's last round");
        ep.barrier().unwrap();
    });
}
