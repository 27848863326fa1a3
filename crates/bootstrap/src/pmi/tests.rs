//! PMI sessions against the test server, ranks as threads in one process.

use std::os::unix::net::UnixStream;
use std::thread;
use std::time::Duration;

use super::testing::{serve, ServerReport};
use super::*;

const JOBID: &str = "4242.0";

fn plan(version: u8, rank: u32, size: u32) -> PmiPlan {
    PmiPlan {
        version,
        fd: -1,
        rank,
        size,
        jobid: Some(JOBID.to_owned()),
        host: Some(format!("host{}", rank / 2)),
        job_key: None,
        timeout: Duration::from_secs(20),
    }
}

/// Runs `body` as every rank of a `size`-rank job speaking `version`;
/// returns each rank's result and the server's report.
fn run_job<T: Send + 'static>(
    version: u8,
    size: u32,
    body: impl Fn(PmiSession, JobInfo) -> T + Send + Sync + 'static,
) -> (Vec<Result<T, BootstrapError>>, ServerReport) {
    let (ours, theirs): (Vec<UnixStream>, Vec<UnixStream>) = (0..size).map(|_| UnixStream::pair().unwrap()).unzip();
    let server = serve(theirs, JOBID);
    let body = std::sync::Arc::new(body);
    let ranks: Vec<_> = ours
        .into_iter()
        .enumerate()
        .map(|(rank, stream)| {
            let body = std::sync::Arc::clone(&body);
            thread::spawn(move || {
                let plan = plan(version, rank as u32, size);
                let kvs = connect_stream(&plan, stream)?;
                let (session, info) = PmiSession::join(kvs, &plan.member())?;
                Ok(body(session, info))
            })
        })
        .collect();
    let results = ranks.into_iter().map(|r| r.join().unwrap()).collect();
    (results, server.join().unwrap())
}

fn collectives_work(version: u8) {
    let size = 5;
    let (results, report) = run_job(version, size, move |mut session, info| {
        // Blobs from empty to several values long, different per rank.
        let mine: Vec<u8> = (0..info.rank * 700).map(|i| (i * 7 + info.rank) as u8).collect();
        let all = session.allgather(&mine).unwrap();
        session.barrier().unwrap();
        let again = session.allgather(b"second").unwrap();
        session.finalize();
        (info, all, again)
    });
    let infos: Vec<_> = results.into_iter().map(Result::unwrap).collect();
    for (info, all, again) in &infos {
        assert_eq!(info.size, size);
        assert_eq!(info.job_key, infos[0].0.job_key, "every rank agrees on rank 0's key");
        assert_eq!(info.host, format!("host{}", info.rank / 2));
        assert_eq!((info.local_rank, info.local_size), (info.rank % 2, if info.rank == 4 { 1 } else { 2 }));
        for (r, blob) in all.iter().enumerate() {
            let want: Vec<u8> = (0..r as u32 * 700).map(|i| (i * 7 + r as u32) as u8).collect();
            assert_eq!(blob, &want, "rank {}'s copy of rank {r}'s blob", info.rank);
        }
        assert!(again.iter().all(|b| b == b"second"));
    }
    assert_ne!(infos[0].0.job_key, [0; 16]);
    assert_eq!(report.versions, vec![version; size as usize]);
    assert_eq!(report.finalized, vec![true; size as usize]);
    assert_eq!(report.fences, 4, "join, allgather, barrier, allgather");
    assert!(report.refused.is_empty(), "{:?}", report.refused);
    assert!(report.puts > 1 + 3 * size as usize, "big blobs were cut into several values");
}

#[test]
fn pmi2_collectives_exchange_every_blob() {
    collectives_work(2);
}

#[test]
fn pmi1_collectives_exchange_every_blob() {
    collectives_work(1);
}

#[test]
fn an_abort_fails_the_others_fence() {
    for version in [1, 2] {
        let (results, report) = run_job(version, 3, |mut session, info| {
            if info.rank == 1 {
                session.abort("rank 1 gives up");
                return None;
            }
            Some(session.barrier().unwrap_err().to_string())
        });
        for (rank, result) in results.into_iter().enumerate() {
            let result = result.unwrap();
            if rank != 1 {
                let err = result.unwrap();
                assert!(err.contains(&format!("PMI-{version}")) && err.contains("aborted"), "{err}");
            }
        }
        let (rank, message) = report.aborted.unwrap();
        assert_eq!(rank, 1);
        if version == 2 {
            assert_eq!(message, "rank 1 gives up");
        }
    }
}

#[test]
fn a_rank_that_vanishes_fails_the_fence_instead_of_hanging() {
    let (results, report) = run_job(2, 2, |mut session, info| {
        if info.rank == 0 {
            drop(session);
            return None;
        }
        Some(session.barrier().unwrap_err())
    });
    let err = results.into_iter().nth(1).unwrap().unwrap().unwrap();
    assert!(err.to_string().contains("rank 0 hung up"), "{err}");
    assert_eq!(report.finalized, [false, false]);
}

#[test]
fn the_launchers_rank_and_size_must_match_the_environment() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let server = serve(vec![theirs], JOBID);
    // PMI_SIZE says 2, the server says 1.
    let err = connect_stream(&plan(2, 0, 2), ours).unwrap_err().to_string();
    assert!(err.contains("fullinit says rank 0 of 1"), "{err}");
    server.join().unwrap();
}

#[test]
fn a_mangled_reply_is_an_error_not_a_panic() {
    for garbage in ["cmd=response_to_init rc=-1\n", "hello\n", "cmd=response_to_init pmi_version=1\n"] {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let writer = thread::spawn(move || {
            use std::io::Write;
            theirs.write_all(garbage.as_bytes()).unwrap();
            theirs
        });
        let err = connect_stream(&plan(2, 0, 1), ours).unwrap_err();
        assert!(err.to_string().starts_with("PMI-2 launcher:"), "{err}");
        drop(writer.join());
    }
}

#[test]
fn hex_chunks_round_trip() {
    assert_eq!(from_hex(&to_hex(&[0, 1, 0xfe, 0xff])).unwrap(), [0, 1, 0xfe, 0xff]);
    assert_eq!(from_hex("+f"), None);
    assert_eq!(from_hex("abc"), None);
    assert_eq!(key(3, 17, 2), "mw-3-17-2");
}

/// The whole path from the environment: `Bootstrap::from_lookup` adopts the
/// socket named by `PMI_FD` (once per process, hence one test does it).
#[test]
fn from_env_adopts_pmi_fd_once() {
    use std::os::fd::IntoRawFd;
    let (ours, theirs) = UnixStream::pair().unwrap();
    let server = serve(vec![theirs], JOBID);
    let fd = ours.into_raw_fd().to_string();
    let vars = [("PMI_FD", fd.as_str()), ("PMI_RANK", "0"), ("PMI_SIZE", "1"), ("PMI_JOBID", JOBID)];
    let lookup = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
    let mut boot = crate::Bootstrap::from_lookup(lookup).unwrap();
    assert_eq!((boot.info().rank, boot.info().size), (0, 1));
    assert_eq!(boot.reachable_ip().unwrap(), std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    assert_eq!(boot.allgather(b"x").unwrap(), [b"x".to_vec()]);
    let again = crate::Bootstrap::from_lookup(lookup).unwrap_err().to_string();
    assert!(again.contains("already used"), "{again}");
    drop(boot);
    let report = server.join().unwrap();
    assert_eq!((report.versions.as_slice(), report.finalized.as_slice()), ([2].as_slice(), [true].as_slice()));
}
