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
//!
//! Also owns the job's [`NetPath`]: at join every rank works out the address
//! its host is reached at, as memwire's endpoint does (`MW_BIND`, else the
//! local address the kernel routes from toward mwrun's rendezvous), and the
//! ranks exchange them through the endpoint. The raw baselines between
//! ranks bind there, MPI launches across hosts name those hosts, and every
//! `udp` row records the path (`hosts` or `loopback`) and datagram size.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
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
    net: NetPath,
}

/// Where a job's UDP bytes go: every rank's address, and the datagram size
/// memwire (and the raw baselines) use on that path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPath {
    /// Each rank's data address, in rank order (one entry with threads).
    pub ips: Vec<IpAddr>,
    /// UDP payload per datagram: `MW_MTU`, else 1472 between hosts and
    /// 65000 on loopback.
    pub datagram: usize,
    /// Whether every rank's kernel sends UDP GSO.
    pub gso: bool,
}

/// Whether this kernel sends UDP GSO (probed on a loopback socket).
fn kernel_has_gso() -> bool {
    let cfg = mw_transport::udp::UdpConfig::default();
    mw_transport::udp::UdpTransport::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), &cfg)
        .is_ok_and(|t| t.gso_enabled())
}

impl NetPath {
    /// The path of a job whose ranks are at `ips`, with `config`'s `MW_MTU`.
    pub fn new(ips: Vec<IpAddr>, config: &Config, gso: bool) -> NetPath {
        let loopback = ips.iter().all(|ip| ip.is_loopback());
        let datagram = config.max_datagram.unwrap_or(if loopback { config.loopback_datagram } else { 1472 });
        NetPath { ips, datagram, gso }
    }

    /// Threads of this process: loopback (worked out once per process).
    pub fn threads() -> NetPath {
        static THREADS: std::sync::OnceLock<NetPath> = std::sync::OnceLock::new();
        THREADS
            .get_or_init(|| {
                let config = Config::from_env().unwrap_or_default();
                NetPath::new(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)], &config, kernel_has_gso())
            })
            .clone()
    }

    /// Whether a GSO send carries several of this path's datagrams (it
    /// carries at most 64 KiB), on kernels that have GSO: where `udp_gso`
    /// is a baseline of its own rather than `udp_raw` again.
    pub fn gso_useful(&self) -> bool {
        self.gso && 2 * self.datagram <= mw_transport::udp::MAX_UDP_PAYLOAD
    }

    /// `hosts` when ranks 0 and 1 are on different hosts, else `loopback`,
    /// as rows record it.
    pub fn name(&self) -> &'static str {
        if self.spans_hosts() {
            "hosts"
        } else {
            "loopback"
        }
    }

    /// Whether the job's ranks are on more than one host.
    pub fn spans_hosts(&self) -> bool {
        self.ips.iter().any(|ip| *ip != self.ips[0])
    }
}

/// The local address the other hosts reach this rank at, as memwire's
/// endpoint chooses it: `MW_BIND`, else the address the kernel routes from
/// toward the rendezvous (`MW_BOOTSTRAP`; connecting a UDP socket sends
/// nothing), loopback when that is on this host.
fn data_ip(config: &Config) -> Result<IpAddr, String> {
    if let Some(ip) = config.bind_addr {
        return Ok(ip);
    }
    let boot = std::env::var("MW_BOOTSTRAP").map_err(|_| "MW_BOOTSTRAP is not set".to_string())?;
    let target = boot
        .to_socket_addrs()
        .map_err(|e| format!("MW_BOOTSTRAP={boot}: {e}"))?
        .next()
        .ok_or_else(|| format!("MW_BOOTSTRAP={boot} resolves to nothing"))?;
    if target.ip().is_loopback() {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let any: IpAddr =
        if target.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { std::net::Ipv6Addr::UNSPECIFIED.into() };
    let probe = UdpSocket::bind(SocketAddr::new(any, 0)).map_err(|e| format!("routing probe: {e}"))?;
    probe.connect(target).map_err(|e| format!("no route toward {target}: {e}"))?;
    Ok(probe.local_addr().map_err(|e| format!("routing probe: {e}"))?.ip())
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
        let mine = data_ip(&config)?;
        let net_config = config.clone();
        let ep = Endpoint::init_with(config).map_err(|e| format!("joining the mwrun job: {e}"))?;
        let blobs = ep
            .allgather_bytes(format!("{mine} {}", u8::from(kernel_has_gso())).as_bytes())
            .map_err(|e| format!("exchanging the ranks' addresses: {e}"))?;
        let mut ips = Vec::new();
        let mut gso = true;
        for blob in blobs {
            let text = String::from_utf8_lossy(&blob).into_owned();
            let (ip, has_gso) = text.split_once(' ').unwrap_or((&text, "0"));
            ips.push(ip.parse::<IpAddr>().map_err(|e| format!("a rank's address {ip:?}: {e}"))?);
            gso &= has_gso == "1";
        }
        let net = NetPath::new(ips, &net_config, gso);
        for peer in (0..ep.size()).filter(|&r| r != ep.rank()) {
            if ep.shares_memory_with(peer) != (transport == "shm") {
                return Err(format!(
                    "rank {} reaches rank {peer} by {}, not {transport} as asked (ranks on different hosts?)",
                    ep.rank(),
                    if ep.shares_memory_with(peer) { "shared memory" } else { "UDP" }
                ));
            }
        }
        Ok(Job::Process(ProcessRank { ep, transport, net }))
    }

    /// This rank's endpoint and the job's path under mwrun.
    pub fn process(&self) -> Option<(&Endpoint, &NetPath)> {
        match self {
            Job::Threads => None,
            Job::Process(p) => Some((&p.ep, &p.net)),
        }
    }

    /// The path of the job's UDP points.
    pub fn net(&self) -> NetPath {
        match self {
            Job::Threads => NetPath::threads(),
            Job::Process(p) => p.net.clone(),
        }
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
                let vars = move |name: &str| match name {
                    "MW_RANK" => Some(rank.to_string()),
                    "MW_SIZE" => Some(n.to_string()),
                    "MW_BOOTSTRAP" => Some(addr.clone()),
                    "MW_JOB_KEY" => Some(hex.clone()),
                    _ => None,
                };
                let mut config = Config::from_env().expect("MW_* settings");
                config.transport = choice(transport);
                if let Some(adjust) = &adjust {
                    adjust(&mut config);
                }
                let ep = Endpoint::init_from_lookup(config, vars).expect("endpoint");
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
