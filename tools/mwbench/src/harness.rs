//! Two ranks as two threads, each with its own endpoint, joined through an
//! in-process rendezvous server.

use mw_core::{Config, Endpoint, TransportChoice};

/// Runs `body(ep)` on both ranks of a 2-rank job over `transport` ("udp":
/// UDP only; "shm": shared memory, the two ranks being on one host),
/// configured from the environment; returns rank 0's result.
pub fn two_ranks<R: Send + 'static>(
    transport: &'static str,
    body: impl Fn(&Endpoint) -> R + Send + Sync + 'static,
) -> R {
    two_ranks_with(transport, |_| {}, body)
}

/// [`two_ranks`] with `adjust` applied to both ranks' configuration (after
/// the `MW_*` variables), e.g. to force authentication on or off.
pub fn two_ranks_with<R: Send + 'static>(
    transport: &'static str,
    adjust: fn(&mut Config),
    body: impl Fn(&Endpoint) -> R + Send + Sync + 'static,
) -> R {
    let key = mw_bootstrap::random_job_key().expect("random job key");
    let server = mw_bootstrap::RendezvousServer::bind("127.0.0.1:0", 2, key).expect("rendezvous bind");
    let addr = server.local_addr().to_string();
    let _server = server.spawn().expect("rendezvous thread");
    let body = std::sync::Arc::new(body);
    let mut handles: Vec<_> = (0..2u32)
        .map(|rank| {
            let body = body.clone();
            let addr = addr.clone();
            std::thread::spawn(move || {
                let hex = mw_bootstrap::job_key_to_hex(&key);
                let boot = mw_bootstrap::Bootstrap::from_lookup(|name| match name {
                    "MW_RANK" => Some(rank.to_string()),
                    "MW_SIZE" => Some("2".into()),
                    "MW_BOOTSTRAP" => Some(addr.clone()),
                    "MW_JOB_KEY" => Some(hex.clone()),
                    _ => None,
                })
                .expect("bootstrap");
                let mut config = Config::from_env().expect("MW_* settings");
                config.transport = if transport == "shm" { TransportChoice::Auto } else { TransportChoice::Udp };
                adjust(&mut config);
                let ep = Endpoint::init_with_bootstrap(config, boot).expect("endpoint");
                assert_eq!(ep.shares_memory_with(1 - rank), transport == "shm", "transport not as asked");
                let result = body(&ep);
                ep.finalize().expect("finalize");
                result
            })
        })
        .collect();
    let other = handles.pop().expect("rank 1");
    let first = handles.pop().expect("rank 0").join().expect("rank 0 panicked");
    other.join().expect("rank 1 panicked");
    first
}

/// Runs `body(ep)` on every rank of an `n`-rank job (threads, each with its
/// own endpoint); returns every rank's result in rank order.
pub fn n_ranks<R: Send + 'static>(n: u32, body: impl Fn(&Endpoint) -> R + Send + Sync + 'static) -> Vec<R> {
    let key = mw_bootstrap::random_job_key().expect("random job key");
    let server = mw_bootstrap::RendezvousServer::bind("127.0.0.1:0", n, key).expect("rendezvous bind");
    let addr = server.local_addr().to_string();
    let _server = server.spawn().expect("rendezvous thread");
    let body = std::sync::Arc::new(body);
    let handles: Vec<_> = (0..n)
        .map(|rank| {
            let body = body.clone();
            let addr = addr.clone();
            std::thread::spawn(move || {
                let hex = mw_bootstrap::job_key_to_hex(&key);
                let boot = mw_bootstrap::Bootstrap::from_lookup(|name| match name {
                    "MW_RANK" => Some(rank.to_string()),
                    "MW_SIZE" => Some(n.to_string()),
                    "MW_BOOTSTRAP" => Some(addr.clone()),
                    "MW_JOB_KEY" => Some(hex.clone()),
                    _ => None,
                })
                .expect("bootstrap");
                let config = Config::from_env().expect("MW_* settings");
                let ep = Endpoint::init_with_bootstrap(config, boot).expect("endpoint");
                let result = body(&ep);
                ep.finalize().expect("finalize");
                result
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
}
