//! Where memwire's ranks run: threads of this process (mwbench starts an
//! in-process rendezvous and one endpoint per thread), or real processes
//! when mwbench itself runs under mwrun (`MW_RANK`/`MW_SIZE` set).
//!
//! Owns: starting endpoints with the transport a point asks for
//! (`TransportChoice::Udp` for `udp`, `TransportChoice::Auto` for `shm`,
//! never the library default), and bringing rank results to rank 0. Must
//! not: measure or print.
//!
//! Under mwrun a process has one endpoint for the whole run (the launcher's
//! rendezvous is joined once), so its transport is fixed at start and a
//! point cannot change the configuration (authentication, fault injection,
//! progress thread): such points are refused when the plan is made.

use std::sync::Arc;

use mw_core::{Config, Endpoint, TransportChoice};

/// A configuration change applied to every rank of a point (after `MW_*`).
pub type Adjust = Arc<dyn Fn(&mut Config) + Send + Sync>;

/// How ranks are run.
#[derive(Debug)]
pub enum Job {
    /// Each point starts its ranks as threads with fresh endpoints.
    Threads,
    /// This process is one rank of an mwrun job.
    Process(ProcessRank),
}

/// This process's endpoint under mwrun, and the transport it was started with.
#[derive(Debug)]
pub struct ProcessRank {
    ep: Endpoint,
    transport: &'static str,
}

fn choice(transport: &str) -> TransportChoice {
    if transport == "shm" {
        TransportChoice::Auto
    } else {
        TransportChoice::Udp
    }
}

/// Whether this process was started by mwrun (or another MW launcher).
pub fn under_launcher() -> bool {
    std::env::var_os("MW_RANK").is_some() || std::env::var_os("MW_SIZE").is_some()
}

impl Job {
    /// Joins the mwrun job over `transport`; checks that every peer is
    /// reached the way asked (all shared memory for `shm`, all UDP for `udp`).
    pub fn join_process(transport: &'static str) -> Result<Job, String> {
        let mut config = Config::from_env().map_err(|e| format!("MW_* settings: {e}"))?;
        config.transport = choice(transport);
        let ep = Endpoint::init_with(config).map_err(|e| format!("joining the mwrun job: {e}"))?;
        for peer in (0..ep.size()).filter(|&r| r != ep.rank()) {
            if ep.shares_memory_with(peer) != (transport == "shm") {
                return Err(format!(
                    "rank {} reaches rank {peer} by {}, not {transport} as asked (ranks on different hosts?)",
                    ep.rank(),
                    if ep.shares_memory_with(peer) { "shared memory" } else { "UDP" }
                ));
            }
        }
        Ok(Job::Process(ProcessRank { ep, transport }))
    }

    /// `threads` or `processes`, as rows record it.
    pub fn launch(&self) -> &'static str {
        match self {
            Job::Threads => "threads",
            Job::Process(_) => "processes",
        }
    }

    /// The job size under mwrun.
    pub fn process_size(&self) -> Option<u32> {
        match self {
            Job::Threads => None,
            Job::Process(p) => Some(p.ep.size()),
        }
    }

    /// This rank under mwrun (0 with threads).
    pub fn rank(&self) -> u32 {
        match self {
            Job::Threads => 0,
            Job::Process(p) => p.ep.rank(),
        }
    }

    /// The transport of the mwrun job.
    pub fn process_transport(&self) -> Option<&'static str> {
        match self {
            Job::Threads => None,
            Job::Process(p) => Some(p.transport),
        }
    }

    /// Leaves the mwrun job (nothing with threads).
    pub fn finish(self) -> Result<(), String> {
        match self {
            Job::Threads => Ok(()),
            Job::Process(p) => p.ep.finalize().map_err(|e| format!("finalize: {e}")),
        }
    }

    /// Runs `body(ep)` on both ranks of a 2-rank job over `transport`;
    /// returns rank 0's result (`None` on the other rank under mwrun).
    pub fn pair<R: Send + 'static>(
        &self,
        transport: &'static str,
        adjust: Option<Adjust>,
        body: impl Fn(&Endpoint) -> R + Send + Sync + 'static,
    ) -> Option<R> {
        match self {
            Job::Threads => Some(threads(2, transport, adjust, body).swap_remove(0)),
            Job::Process(p) => {
                assert!(adjust.is_none(), "a per-point configuration cannot apply under mwrun (refused in the plan)");
                assert_eq!(
                    p.transport, transport,
                    "point on another transport than the mwrun job (refused in the plan)"
                );
                let r = body(&p.ep);
                (p.ep.rank() == 0).then_some(r)
            }
        }
    }

    /// Runs `body(ep)` on every rank of an `n`-rank job over `transport`;
    /// returns every rank's samples in rank order, at rank 0 (`None` on the
    /// other ranks under mwrun).
    pub fn group(
        &self,
        n: u32,
        transport: &'static str,
        body: impl Fn(&Endpoint) -> Vec<f64> + Send + Sync + 'static,
    ) -> Option<Vec<Vec<f64>>> {
        match self {
            Job::Threads => Some(threads(n, transport, None, body)),
            Job::Process(p) => {
                assert_eq!(p.ep.size(), n, "rank count differs from the mwrun job (refused in the plan)");
                let mine = body(&p.ep);
                let all = gather_samples(&p.ep, &mine);
                (p.ep.rank() == 0).then_some(all)
            }
        }
    }
}

/// Every rank's samples at every rank, in pieces small enough for the
/// endpoint's internal allgather (meant for control data).
fn gather_samples(ep: &Endpoint, mine: &[f64]) -> Vec<Vec<f64>> {
    const PIECE: usize = 1024;
    let longest = ep.allgather_bytes(&(mine.len() as u64).to_le_bytes()).expect("allgather sample counts");
    let longest = longest.iter().map(|b| u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))).max().unwrap_or(0);
    let mut all = vec![Vec::new(); ep.size() as usize];
    for start in (0..longest as usize).step_by(PIECE) {
        let end = (start + PIECE).min(mine.len());
        let piece: Vec<u8> = mine.get(start..end).unwrap_or(&[]).iter().flat_map(|v| v.to_le_bytes()).collect();
        for (rank, blob) in ep.allgather_bytes(&piece).expect("allgather samples").into_iter().enumerate() {
            all[rank].extend(blob.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))));
        }
    }
    all
}

/// `n` ranks as threads, each with its own endpoint, joined through an
/// in-process rendezvous server; every rank's result in rank order.
fn threads<R: Send + 'static>(
    n: u32,
    transport: &'static str,
    adjust: Option<Adjust>,
    body: impl Fn(&Endpoint) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let key = mw_bootstrap::random_job_key().expect("random job key");
    let server = mw_bootstrap::RendezvousServer::bind("127.0.0.1:0", n, key).expect("rendezvous bind");
    let addr = server.local_addr().to_string();
    let _server = server.spawn().expect("rendezvous thread");
    let body = Arc::new(body);
    let handles: Vec<_> = (0..n)
        .map(|rank| {
            let body = body.clone();
            let addr = addr.clone();
            let adjust = adjust.clone();
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
                let mut config = Config::from_env().expect("MW_* settings");
                config.transport = choice(transport);
                if let Some(adjust) = &adjust {
                    adjust(&mut config);
                }
                let ep = Endpoint::init_with_bootstrap(config, boot).expect("endpoint");
                for peer in (0..n).filter(|&r| r != rank) {
                    assert_eq!(ep.shares_memory_with(peer), transport == "shm", "transport not as asked");
                }
                let result = body(&ep);
                ep.finalize().expect("finalize");
                result
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
}
