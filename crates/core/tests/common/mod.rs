//! Runs a job of N ranks as N threads of one process, each with its own
//! endpoint and UDP socket, joined through an in-process rendezvous server.
//! Threads of one process share a host, so ranks use shared memory with
//! each other unless the config says UDP or they are given different
//! `MW_HOST` names ([`run_job_on_hosts`]); the harness checks that the
//! transport chosen for every pair is the expected one.
#![allow(dead_code)]

use std::time::Duration;

use mw_core::{Config, Endpoint, TransportChoice};

/// Runs `body(ep)` on every rank of an `n`-rank job with `config`; panics
/// (failing the test) if any rank panics or does not finish within a minute,
/// or if a rank still has requests allocated after `body` (a leak; see
/// [`assert_requests_freed`]).
pub fn run_job<F>(n: u32, config: Config, body: F)
where
    F: Fn(&Endpoint) + Send + Sync + 'static,
{
    run_job_on_hosts(n, config, vec!["testhost".to_owned(); n as usize], body)
}

/// [`run_job`] with rank `r` claiming to run on host `hosts[r]` (`MW_HOST`).
pub fn run_job_on_hosts<F>(n: u32, config: Config, hosts: Vec<String>, body: F)
where
    F: Fn(&Endpoint) + Send + Sync + 'static,
{
    run(n, config, hosts, true, body)
}

/// [`run_job`] without the check that every request is freed: for a test
/// that leaks one on purpose (a forgotten handle) and counts it itself.
pub fn run_job_keeping_requests<F>(n: u32, config: Config, body: F)
where
    F: Fn(&Endpoint) + Send + Sync + 'static,
{
    run(n, config, vec!["testhost".to_owned(); n as usize], false, body)
}

fn run<F>(n: u32, config: Config, hosts: Vec<String>, check_freed: bool, body: F)
where
    F: Fn(&Endpoint) + Send + Sync + 'static,
{
    let key = mw_bootstrap::random_job_key().unwrap();
    let server = mw_bootstrap::RendezvousServer::bind("127.0.0.1:0", n, key).unwrap();
    let addr = server.local_addr().to_string();
    let _server = server.spawn().unwrap();
    let body = std::sync::Arc::new(body);
    let hosts = std::sync::Arc::new(hosts);
    let handles: Vec<_> = (0..n)
        .map(|rank| {
            let body = body.clone();
            let addr = addr.clone();
            let config = config.clone();
            let hosts = hosts.clone();
            std::thread::Builder::new()
                .name(format!("rank{rank}"))
                .spawn(move || {
                    let vars = rank_vars(rank, n, &addr, &key, Some(&hosts[rank as usize]));
                    let shm_allowed = config.transport == TransportChoice::Auto;
                    let ep = Endpoint::init_from_lookup(config, vars).unwrap();
                    for peer in (0..n).filter(|&p| p != rank) {
                        let expect = shm_allowed && hosts[peer as usize] == hosts[rank as usize];
                        assert_eq!(ep.shares_memory_with(peer), expect, "rank {rank} to {peer}: wrong transport");
                    }
                    body(&ep);
                    if check_freed {
                        assert_requests_freed(&ep);
                    }
                    ep.finalize().unwrap();
                })
                .unwrap()
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    for handle in handles {
        while !handle.is_finished() {
            assert!(std::time::Instant::now() < deadline, "job did not finish within 60 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Err(panic) = handle.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

/// The variables `mwrun` would hand rank `rank` of a job of `size` whose
/// rendezvous server listens on `addr` under `key` (and, with `host`, the
/// host name it claims, so ranks of one process can pose as several
/// hosts), for `Endpoint::init_from_lookup`.
#[allow(dead_code)] // not every test file that includes this module uses it directly
pub fn rank_vars(
    rank: u32,
    size: u32,
    addr: &str,
    key: &[u8; 16],
    host: Option<&str>,
) -> impl Fn(&str) -> Option<String> {
    let hex = mw_bootstrap::job_key_to_hex(key);
    let (addr, host) = (addr.to_owned(), host.map(str::to_owned));
    move |name| match name {
        "MW_RANK" => Some(rank.to_string()),
        "MW_SIZE" => Some(size.to_string()),
        "MW_BOOTSTRAP" => Some(addr.clone()),
        "MW_JOB_KEY" => Some(hex.clone()),
        "MW_HOST" => host.clone(),
        _ => None,
    }
}

/// Forces UDP between all ranks.
pub fn udp(config: Config) -> Config {
    Config { transport: TransportChoice::Udp, ..config }
}

/// A config with faults injected on every rank's send path. Faults are
/// injected into UDP datagrams, so it forces UDP (same-host ranks would
/// otherwise talk through shared memory, which loses nothing).
pub fn lossy(drop: f64, dup: f64, reorder: f64, seed: u64) -> Config {
    Config {
        fault: Some(mw_transport::fault::FaultConfig { drop, dup, reorder, seed }),
        rto_min: Duration::from_micros(300),
        ..udp(Config::default())
    }
}

/// Every transport the one-sided suite runs over: shared memory (direct
/// access to mapped regions, `process_vm_*` to registered memory), shared
/// memory with the two-copy ring fallback forced, and UDP.
pub fn transports() -> Vec<(&'static str, Config)> {
    vec![
        ("shm", shm(Config::default())),
        ("shm two-copy", shm(Config { shm_copy: mw_core::ShmCopy::Rings, ..Config::default() })),
        ("udp", udp(Config::default())),
    ]
}

/// Deterministic test bytes for (rank, len).
pub fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed * 97) as u8).collect()
}

/// `config` with shared memory between same-host ranks (the default, made explicit).
#[allow(dead_code)]
pub fn shm(config: Config) -> Config {
    Config { transport: TransportChoice::Auto, ..config }
}

/// Fails unless every request of `ep` is freed within a few seconds of the
/// test body's end (progressing meanwhile, so acknowledgements and peers'
/// last messages come in): a request still allocated then is a leak.
pub fn assert_requests_freed(ep: &Endpoint) {
    assert_eq!(settled_requests(ep, 0), 0, "rank {}: requests still allocated after the test body", ep.rank());
}

/// The number of requests `ep` has allocated once it is down to `expect`,
/// or after a few seconds of progress if it never gets there.
pub fn settled_requests(ep: &Endpoint, expect: u64) -> u64 {
    let start = std::time::Instant::now();
    let mut live = ep.stats().0.requests_live;
    while live != expect && start.elapsed() < Duration::from_secs(10) {
        ep.progress();
        std::thread::yield_now();
        live = ep.stats().0.requests_live;
    }
    live
}
