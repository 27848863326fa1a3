//! Whole-rendezvous tests: N ranks as threads of this process, meeting at an
//! in-process server over loopback TCP.

use std::collections::HashMap;
use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use crate::client::RendezvousClient;
use crate::env;
use crate::{job_key_to_hex, Bootstrap, BootstrapError, RendezvousServer, Step};

const KEY: [u8; 16] = [0x5a; 16];
const SHORT: Duration = Duration::from_millis(300);
const LONG: Duration = Duration::from_secs(10);

fn vars(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    move |name| map.get(name).cloned()
}

/// The environment mwrun gives rank `rank` of `size`.
fn mwrun_env(addr: &str, rank: u32, size: u32) -> impl Fn(&str) -> Option<String> {
    vars(&[
        (env::RANK, rank.to_string()),
        (env::SIZE, size.to_string()),
        (env::BOOTSTRAP, addr.to_owned()),
        (env::JOB_KEY, job_key_to_hex(&KEY)),
        (env::HOST, format!("host{}", rank % 2)),
        (env::TIMEOUT, "10".into()),
    ])
}

fn server(size: u32) -> (String, crate::RendezvousHandle) {
    let server = RendezvousServer::bind("127.0.0.1:0", size, KEY).unwrap();
    let addr = server.local_addr().to_string();
    (addr, server.spawn().unwrap())
}

fn join(addr: &str, rank: u32, size: u32, timeout: Duration) -> Result<RendezvousClient, BootstrapError> {
    RendezvousClient::join(addr, rank, size, Some(KEY), timeout).map(|(client, _)| client)
}

/// A port nothing listens on (just released; racy only in theory).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn ranks_allgather_and_barrier_in_rank_order() {
    let (addr, mut handle) = server(4);
    let ranks: Vec<_> = (0..4u32)
        .map(|rank| {
            let addr = addr.clone();
            thread::spawn(move || {
                let mut boot = Bootstrap::from_lookup(mwrun_env(&addr, rank, 4)).unwrap();
                let info = boot.info().clone();
                assert_eq!((info.rank, info.size, info.job_key), (rank, 4, KEY));
                // MW_HOST puts even ranks on host0 and odd ones on host1.
                assert_eq!((info.local_rank, info.local_size), (rank / 2, 2));
                let blobs = boot.allgather(&vec![rank as u8; rank as usize]).unwrap();
                assert_eq!(blobs, (0..4u8).map(|r| vec![r; r as usize]).collect::<Vec<_>>());
                boot.barrier().unwrap();
                let again = boot.allgather(format!("addr-{rank}").as_bytes()).unwrap();
                assert_eq!(again[3], b"addr-3");
            })
        })
        .collect();
    for r in ranks {
        r.join().unwrap();
    }
    let summary = handle.wait_timeout(LONG).expect("the server ends when every rank has left");
    // Join's host exchange, two allgathers and a barrier.
    assert_eq!(summary.rounds_completed, 4);
    assert!(summary.failure.is_none(), "{:?}", summary.failure);
}

#[test]
fn plain_env_mode_rank_zero_serves_and_hands_out_the_key() {
    let addr = format!("127.0.0.1:{}", free_port());
    // Later ranks start first: they must retry until rank 0 listens.
    let ranks: Vec<_> = (0..3u32)
        .rev()
        .map(|rank| {
            let lookup =
                vars(&[(env::RANK, rank.to_string()), (env::SIZE, "3".into()), (env::BOOTSTRAP, addr.clone())]);
            let handle = thread::spawn(move || {
                let mut boot = Bootstrap::from_lookup(lookup).unwrap();
                assert_eq!(boot.info().local_size, 3, "same kernel host name for all");
                let keys = boot.allgather(&boot.info().job_key.clone()).unwrap();
                boot.barrier().unwrap();
                keys
            });
            thread::sleep(Duration::from_millis(30));
            handle
        })
        .collect();
    for r in ranks {
        let keys = r.join().unwrap();
        assert!(keys.iter().all(|k| *k == keys[0]), "every rank got the same key");
    }
}

#[test]
fn a_job_of_one_needs_no_server() {
    let mut boot = Bootstrap::from_lookup(vars(&[])).unwrap();
    assert_eq!((boot.info().rank, boot.info().size, boot.info().local_size), (0, 1, 1));
    assert_eq!(boot.allgather(b"me").unwrap(), vec![b"me".to_vec()]);
    boot.barrier().unwrap();
    let fixed = Bootstrap::from_lookup(vars(&[(env::JOB_KEY, job_key_to_hex(&KEY))])).unwrap();
    assert_eq!(fixed.info().job_key, KEY);
}

#[test]
fn env_errors_surface_from_from_lookup() {
    let err = Bootstrap::from_lookup(vars(&[(env::RANK, "0".into()), (env::SIZE, "two".into())])).unwrap_err();
    assert_eq!(err.to_string(), "MW_SIZE=\"two\": must be a non-negative integer");
}

#[test]
fn bad_introductions_are_rejected_by_name() {
    let (addr, _handle) = server(2);
    let _rank0 = join(&addr, 0, 2, LONG).unwrap();
    let reason = |result: Result<RendezvousClient, BootstrapError>| match result {
        Err(BootstrapError::Rejected { reason, .. }) => reason,
        other => panic!("expected a rejection, got {other:?}"),
    };
    assert!(reason(join(&addr, 0, 2, LONG)).contains("rank 0 already joined"));
    assert!(reason(join(&addr, 5, 2, LONG)).contains("rank 5 is out of range for a job of 2 ranks"));
    assert!(reason(join(&addr, 1, 3, LONG)).contains("the job has 3 ranks, but this rendezvous serves 2"));
    let stranger = RendezvousClient::join(&addr, 1, 2, Some([0; 16]), LONG).map(|_| ());
    assert!(matches!(stranger, Err(BootstrapError::Rejected { reason, .. }) if reason.contains("job key")));
    let keyless = RendezvousClient::join(&addr, 1, 2, None, LONG).map(|_| ());
    assert!(matches!(keyless, Err(BootstrapError::Rejected { reason, .. }) if reason.contains("no job key")));
    // The rejections did not hurt the job: rank 1 can still join and meet rank 0.
    let mut rank1 = join(&addr, 1, 2, LONG).unwrap();
    let mut rank0 = _rank0;
    let t = thread::spawn(move || rank0.barrier());
    rank1.barrier().unwrap();
    t.join().unwrap().unwrap();
}

#[test]
fn a_missing_rank_times_out_with_a_clear_error() {
    let (addr, _handle) = server(2);
    let mut rank0 = join(&addr, 0, 2, SHORT).unwrap();
    let start = Instant::now();
    let err = rank0.barrier().unwrap_err();
    assert!(matches!(err, BootstrapError::Timeout { step: Step::Barrier { round: 0 }, .. }), "{err:?}");
    assert!(start.elapsed() < SHORT * 5);
    assert!(err.to_string().contains("MW_BOOTSTRAP_TIMEOUT"), "{err}");
    assert!(matches!(rank0.barrier(), Err(BootstrapError::Poisoned)));
}

#[test]
fn no_server_is_a_connect_error_after_the_timeout() {
    let addr = format!("127.0.0.1:{}", free_port());
    let start = Instant::now();
    let err = join(&addr, 1, 2, SHORT).map(|_| ()).unwrap_err();
    assert!(matches!(err, BootstrapError::Connect { .. }), "{err:?}");
    assert!(start.elapsed() >= SHORT && start.elapsed() < SHORT * 5);
    assert!(err.to_string().starts_with(&format!("cannot reach the rendezvous server at {addr}")));
}

#[test]
fn a_rank_that_vanishes_fails_the_others_at_once() {
    let (addr, _handle) = server(3);
    let mut rank0 = join(&addr, 0, 3, LONG).unwrap();
    let rank1 = join(&addr, 1, 3, LONG).unwrap();
    let _rank2 = join(&addr, 2, 3, LONG).unwrap();
    let waiter = thread::spawn(move || (Instant::now(), rank0.barrier()));
    thread::sleep(Duration::from_millis(50));
    drop(rank1); // no goodbye: like a process killed by a signal
    let (start, result) = waiter.join().unwrap();
    assert!(matches!(result, Err(BootstrapError::RankLost { rank: 1 })), "{result:?}");
    assert!(start.elapsed() < LONG / 2);
}

#[test]
fn abort_reaches_ranks_waiting_in_a_collective() {
    let (addr, _handle) = server(2);
    let mut rank0 = join(&addr, 0, 2, LONG).unwrap();
    let mut rank1 = join(&addr, 1, 2, LONG).unwrap();
    let waiter = thread::spawn(move || rank0.allgather(b"x"));
    thread::sleep(Duration::from_millis(50));
    rank1.abort("out of cheese");
    let err = waiter.join().unwrap().unwrap_err();
    assert_eq!(err.to_string(), "rank 1 aborted the job: out of cheese");
}

#[test]
fn mismatched_collectives_fail_every_rank() {
    let (addr, _handle) = server(2);
    let mut rank0 = join(&addr, 0, 2, LONG).unwrap();
    let mut rank1 = join(&addr, 1, 2, LONG).unwrap();
    let t = thread::spawn(move || rank0.barrier());
    thread::sleep(Duration::from_millis(50));
    let err1 = rank1.allgather(b"x").unwrap_err();
    let err0 = t.join().unwrap().unwrap_err();
    for err in [err0, err1] {
        let text = err.to_string();
        assert!(matches!(err, BootstrapError::Mismatch(_)), "{err:?}");
        assert!(text.contains("rank 0 called barrier but rank 1 called allgather"), "{text}");
    }
}

#[test]
fn a_collective_after_a_rank_left_fails() {
    let (addr, mut handle) = server(2);
    let mut rank0 = join(&addr, 0, 2, LONG).unwrap();
    let mut rank1 = join(&addr, 1, 2, LONG).unwrap();
    rank1.leave();
    let err = rank0.barrier().unwrap_err();
    assert!(matches!(err, BootstrapError::RankLeft { rank: 1 }), "{err:?}");
    rank0.leave();
    let summary = handle.wait_timeout(LONG).unwrap();
    assert!(matches!(summary.failure, Some(BootstrapError::RankLeft { rank: 1 })));
}

#[test]
fn a_stray_peer_speaking_another_protocol_is_refused() {
    use std::io::{Read, Write};
    let (addr, _handle) = server(1);
    let mut stray = std::net::TcpStream::connect(&addr).unwrap();
    stray.write_all(b"\x05\x00\x00\x00GET /").unwrap();
    stray.set_read_timeout(Some(LONG)).unwrap();
    let mut answer = Vec::new();
    let _ = stray.read_to_end(&mut answer);
    assert!(String::from_utf8_lossy(&answer).contains("unknown client message tag"));
    // The job itself is unaffected.
    let mut rank0 = join(&addr, 0, 1, LONG).unwrap();
    rank0.barrier().unwrap();
}
