//! The endpoint: one per process. Owns the endpoint's state (the protocol
//! instance, the UDP transport, the peer table, the region table, the
//! outstanding requests, and the IP multicast engine's state,
//! `crate::mcast`), its creation from a configuration and a bootstrap, the
//! background threads (progress thread, watchdog), flush/quiet/fence,
//! finalization and statistics. The progress engine is `crate::progress`,
//! the send path `crate::transmit`, the wait loop `crate::wait`.
//!
//! Must not: implement reliability (crate proto does, sans-IO) or touch raw
//! memory outside `region::raw`. Same-host peers are reached through
//! `crate::shm` (rings and direct access) instead of the protocol. Every public call locks the endpoint state,
//! makes progress, and unlocks before it idles, so an optional progress thread
//! and the application thread take turns driving the transport (only one at a
//! time, as DESIGN §3 requires).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mw_proto::time::Instant as ProtoInstant;
use mw_wire::op::{self, OpRepr};

use crate::config::{Config, ProgressMode};
use crate::internal::Internal;
use crate::lock::{StateGuard, StateLock};
use crate::region::RegionTable;
use crate::request::{Completion, RequestId, Requests};
use crate::stats::CoreStats;
use crate::target::Reply;
use crate::{Error, Result};

/// Mutable endpoint state, guarded by the endpoint lock.
pub(crate) struct State {
    pub rank: u32,
    pub size: u32,
    pub proto: mw_proto::Endpoint,
    pub udp: mw_transport::udp::UdpTransport,
    pub fault: Option<mw_transport::fault::FaultInjector>,
    pub peers: Vec<SocketAddr>,
    pub regions: RegionTable,
    pub requests: Requests,
    /// Get chunks toward UDP peers, requested a window at a time.
    pub gets: crate::get_window::GetWindow,
    /// Per (target rank, region key): the end of a range a put was checked
    /// to fit into there (crate::rma: a put of several messages is probed
    /// first, so a rejected one writes nothing).
    pub verified_put_ends: std::collections::HashMap<(u32, u64), u64>,
    pub replies: Vec<Reply>,
    pub completions: Vec<Completion>,
    /// Per peer: (message id, request) pairs completed by that peer's acks.
    pub ack_waiters: Vec<VecDeque<(u64, RequestId)>>,
    /// Messages to self: executed by the progress engine, never sent.
    pub loopback: VecDeque<(Vec<u8>, Option<RequestId>)>,
    pub dead: Vec<bool>,
    /// Peer failures and restarts noticed, for the application to poll.
    pub peer_events: VecDeque<PeerEvent>,
    pub stats: CoreStats,
    pub config: Config,
    pub internal: Internal,
    /// Tagged messages, active messages, FIFOs, raw datagrams (crate::msg).
    pub msg: crate::msg::MsgState,
    /// IP multicast: the group socket and the transfers in progress (crate::mcast).
    pub mcast: crate::mcast::McastState,
    pub(crate) rx_buf: Vec<u8>,
    /// Whole datagrams with small payloads (and every datagram under fault injection).
    pub(crate) tx_buf: Vec<u8>,
    /// Header and trailer (MAC or checksum) of a datagram whose payload is sent in place.
    pub(crate) head_buf: [u8; mw_wire::HEADER_LEN + mw_proto::TRAILER_RESERVE],
    /// Datagrams of one transmit round, gathered in place and sent with
    /// `sendmmsg`/GSO; `None` with loopback-sized datagrams, which go one
    /// gathered `sendmsg` each (see `crate::transmit`).
    pub(crate) gather: Option<crate::transmit::GatherBatch>,
    /// While set, messages queued for the protocol wait for the holder's
    /// [`State::transmit`] instead of leaving one by one: a receive batch's
    /// replies, a round of get requests (see [`State::with_transmit_held`]).
    pub(crate) hold_transmit: bool,
    /// Scratch for operation headers (`MAX_HEADER_LEN`: a 256-segment iov header).
    pub hdr_buf: Vec<u8>,
    /// The shared-memory ring engine, when some peers share this host.
    pub shm: Option<crate::shm::ShmState>,
}

pub(crate) struct Shared {
    pub state: StateLock<State>,
    pub rank: u32,
    pub size: u32,
    /// `Config::chunk_bytes`, readable without the lock.
    pub chunk_bytes: usize,
    /// Payload bytes of one UDP datagram (the protocol's segment size).
    pub udp_segment: usize,
    pub(crate) fd: std::os::fd::RawFd,
    /// The multicast group socket's descriptor once opened (-1 before):
    /// waiters poll it next to `fd`.
    pub(crate) mcast_fd: AtomicI32,
    pub(crate) stop: AtomicBool,
    /// The `Auto` mode's watchdog thread, woken when a nonblocking transfer
    /// over UDP starts (`Shared::nudge_watchdog`).
    pub(crate) watchdog: std::sync::OnceLock<std::thread::Thread>,
    /// Bumped on every application call into the endpoint; the watchdog
    /// (`ProgressMode::Auto`) steps in only when it stops moving.
    pub(crate) app_calls: AtomicU64,
    /// Nonzero while application threads are inside `wait_for` (driving
    /// progress themselves): the watchdog stays out of their way.
    pub(crate) app_waiting: AtomicU64,
    /// A progress thread runs: it may consume the datagram a waiter sleeps on.
    pub(crate) threaded: AtomicBool,
    pub(crate) clock_base: std::time::Instant,
    pub(crate) wait_policy: mw_transport::wait::WaitPolicy,
    /// Same-host peers: read without the lock on the direct path.
    pub shm: Option<Arc<crate::shm::ShmShared>>,
    /// Every peer is reached through shared memory: a waiter may poll the
    /// rings alone (no receive syscall) between full progress rounds.
    pub(crate) all_shm: bool,
    /// Every rank of the job runs on this host (by the launcher's host
    /// names), whether or not shared memory connects them.
    pub one_host: bool,
    /// `Config::op_timeout`: how long a wait bounded by it may last
    /// (`crate::deadline`).
    pub op_timeout: Option<Duration>,
    /// `Config::wait_timeout`: the bound of waits paced by another rank's
    /// application (`crate::deadline::Bound::Paced`).
    pub wait_timeout: Option<Duration>,
}

/// A change in a peer's liveness, from [`Endpoint::poll_peer_event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerEvent {
    /// The peer stayed silent past the deadline: it is treated as dead.
    Down {
        /// Its rank.
        rank: u32,
    },
    /// The peer came back as a new incarnation (a restarted process):
    /// operations addressed to the old one failed.
    Restarted {
        /// Its rank.
        rank: u32,
    },
}

/// A memwire endpoint: this process's place in the job.
///
/// Created once per process with [`Endpoint::init`]; every operation is a
/// method on it. It is `Sync`: several threads may call it, they take turns.
pub struct Endpoint {
    pub(crate) shared: Arc<Shared>,
    progress_thread: Option<std::thread::JoinHandle<()>>,
    finalized: bool,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("rank", &self.shared.rank).field("size", &self.shared.size).finish()
    }
}

fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    getrandom::getrandom(&mut bytes).expect("the OS random source failed");
    u64::from_le_bytes(bytes)
}

/// Picks the local address peers can reach: `MW_BIND`, else the one the
/// bootstrap knows the other ranks reach (loopback for a job on one host).
fn choose_bind_ip(config: &Config, boot: &mw_bootstrap::Bootstrap) -> Result<IpAddr> {
    if let Some(ip) = config.bind_addr {
        return Ok(ip);
    }
    boot.reachable_ip().map_err(|e| Error::Bootstrap(format!("choosing the address to bind: {e}")))
}

/// The UDP transport's settings for `config`. A datagram size set by
/// `MW_MTU` is the path's: GSO may cut sends into segments that large (the
/// transport allows only segments up to its payload MTU toward other
/// hosts, 1,472 bytes unless told).
fn udp_config(config: &Config) -> mw_transport::udp::UdpConfig {
    let mut udp = mw_transport::udp::UdpConfig::default();
    if let Some(mtu) = config.max_datagram {
        udp.payload_mtu = mtu;
    }
    udp
}

/// Binds the UDP transport on `ip`, at a port of `MW_PORT_RANGE` when one is
/// set (for firewalls), else wherever the kernel likes.
fn bind_udp(
    ip: IpAddr,
    ports: Option<(u16, u16)>,
    cfg: &mw_transport::udp::UdpConfig,
) -> Result<mw_transport::udp::UdpTransport> {
    let Some((first, last)) = ports else {
        return Ok(mw_transport::udp::UdpTransport::bind(SocketAddr::new(ip, 0), cfg)?);
    };
    for port in first..=last {
        match mw_transport::udp::UdpTransport::bind(SocketAddr::new(ip, port), cfg) {
            Ok(udp) => return Ok(udp),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Bootstrap(format!("every UDP port of MW_PORT_RANGE={first}-{last} on {ip} is in use")))
}

impl Endpoint {
    /// Joins the job this process was started in (by `mwrun`, or the `MW_*`
    /// variables; a process started alone is a job of one), with the
    /// configuration from the environment.
    pub fn init() -> Result<Endpoint> {
        Endpoint::init_with(Config::from_env()?)
    }

    /// Joins the job with an explicit configuration.
    pub fn init_with(config: Config) -> Result<Endpoint> {
        let boot = mw_bootstrap::Bootstrap::from_env().map_err(|e| Error::Bootstrap(e.to_string()))?;
        Endpoint::init_with_bootstrap(config, boot)
    }

    /// Joins the job that the launcher's variables, as `lookup` answers
    /// them, describe: [`init_with`](Self::init_with) with `lookup` in
    /// place of the process environment (`MW_RANK`, `MW_SIZE`,
    /// `MW_BOOTSTRAP`, `MW_JOB_KEY`, `MW_HOST`, or the PMI variables; see
    /// `docs/configuration.md`). For harnesses that run several ranks as
    /// threads of one process, each answering its own `MW_RANK`, and for
    /// launchers that hold a rank's variables themselves. The
    /// configuration is `config` (read it with `Config::from_lookup` from
    /// the same variables if they carry `MW_*` settings too).
    pub fn init_from_lookup(config: Config, lookup: impl Fn(&str) -> Option<String>) -> Result<Endpoint> {
        let boot = mw_bootstrap::Bootstrap::from_lookup(lookup).map_err(|e| Error::Bootstrap(e.to_string()))?;
        Endpoint::init_with_bootstrap(config, boot)
    }

    /// Joins the job through an already-connected bootstrap.
    pub(crate) fn init_with_bootstrap(config: Config, mut boot: mw_bootstrap::Bootstrap) -> Result<Endpoint> {
        let info = boot.info().clone();
        let bind_ip = choose_bind_ip(&config, &boot)?;
        let udp_cfg = udp_config(&config);
        let udp = bind_udp(bind_ip, config.port_range, &udp_cfg)?;
        let me = udp.local_addr();
        // Addresses, and which peers share this host (shared memory with them).
        let setup = crate::shm::exchange(&mut boot, &config, me)?;
        let peers = setup.peers;
        let (shm_shared, shm_state) = setup.shm.unzip();
        let all_loopback = peers.iter().all(|a| a.ip().is_loopback());
        let max_datagram = config.max_datagram.unwrap_or(if all_loopback { config.loopback_datagram } else { 1472 });
        let mut proto_cfg = mw_proto::Config { max_datagram, ..mw_proto::Config::default() };
        proto_cfg.peer_dead_after = config.peer_dead_after;
        proto_cfg.keepalive = config.keepalive.then(|| config.peer_dead_after / 4);
        proto_cfg.rto_min = config.rto_min;
        proto_cfg.ack_every = config.ack_every;
        proto_cfg.loss_tolerance_pct = config.loss_tolerance_pct;
        // A floor above the protocol's defaults lifts the first timeout and
        // the ceiling with it (the protocol refuses min > initial or max).
        proto_cfg.rto_initial = proto_cfg.rto_initial.max(config.rto_min);
        proto_cfg.rto_max = proto_cfg.rto_max.max(config.rto_min);
        proto_cfg.max_window_bytes = proto_cfg.max_window_bytes.min(udp_cfg.socket_buffer_bytes / 2);
        proto_cfg.auth = config.auth_key(all_loopback, &info.job_key);
        proto_cfg.checksum = config.checksum_enabled(all_loopback);
        proto_cfg.epoch_key = config.epoch_key(all_loopback, &info.job_key);
        let job_id = mw_proto::job_id_from_key(&info.job_key);
        let epoch = (random_u64() as u32).max(1);
        let udp_segment = proto_cfg.segment_size();
        let get_window = proto_cfg.max_window_bytes + config.copy_ahead_bytes.min(config.max_queued_bytes);
        let proto = mw_proto::Endpoint::new(proto_cfg, job_id, info.rank, epoch, info.size);
        let fault = match config.fault {
            Some(cfg) if cfg.is_active() => Some(
                mw_transport::fault::FaultInjector::new(cfg)
                    .map_err(|_| Error::InvalidArgument("fault injection settings out of range"))?,
            ),
            _ => None,
        };
        let size = info.size;
        let rank = info.rank;
        let wait_policy = mw_transport::wait::WaitPolicy { spin: config.spin, yield_for: config.yield_for };
        let progress = config.progress;
        let chunk_bytes = config.chunk_bytes;
        let op_timeout = config.op_timeout;
        let wait_timeout = config.wait_timeout;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&udp);
        let mut mcast = crate::mcast::McastState::new(job_id, udp.local_addr().ip(), config.mcast_port);
        let fault_seed = config.fault.map_or(0, |f| f.seed);
        mcast
            .set_receive_drop(config.mcast_drop, fault_seed ^ u64::from(info.rank).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut state = State {
            rank,
            size,
            proto,
            udp,
            fault,
            peers,
            regions: RegionTable::default(),
            requests: Requests::default(),
            gets: crate::get_window::GetWindow::new(info.size, get_window),
            verified_put_ends: std::collections::HashMap::new(),
            replies: Vec::new(),
            completions: Vec::new(),
            ack_waiters: (0..size).map(|_| VecDeque::new()).collect(),
            loopback: VecDeque::new(),
            dead: vec![false; size as usize],
            peer_events: VecDeque::new(),
            stats: CoreStats::default(),
            msg: {
                let mut msg = crate::msg::MsgState::new(rank, size, &config);
                msg.rndv.set_udp_chunk(udp_segment.saturating_sub(op::OpCode::GetResponse.min_header_len()).max(1));
                msg
            },
            mcast,
            config,
            internal: Internal::new(rank, size),
            rx_buf: vec![0u8; 65_536],
            tx_buf: vec![0u8; max_datagram.max(2048)],
            head_buf: [0u8; mw_wire::HEADER_LEN + mw_proto::TRAILER_RESERVE],
            gather: (max_datagram <= crate::transmit::BATCH_MAX_DATAGRAM).then(crate::transmit::GatherBatch::new),
            hold_transmit: false,
            hdr_buf: vec![0u8; op::MAX_HEADER_LEN],
            shm: shm_state,
        };
        state.init_eager_limits();
        let all_shm = size > 1 && (0..size).all(|peer| peer == rank || state.is_shm_peer(peer));
        let shared = Arc::new(Shared {
            chunk_bytes,
            udp_segment,
            state: StateLock::new(state),
            rank,
            size,
            fd,
            mcast_fd: AtomicI32::new(-1),
            stop: AtomicBool::new(false),
            watchdog: std::sync::OnceLock::new(),
            app_calls: AtomicU64::new(0),
            app_waiting: AtomicU64::new(0),
            threaded: AtomicBool::new(false),
            clock_base: std::time::Instant::now(),
            wait_policy,
            shm: shm_shared,
            all_shm,
            one_host: info.local_size == info.size,
            op_timeout,
            wait_timeout,
        });
        // Everyone is reachable before anyone sends: the bootstrap keeps ranks
        // from racing ahead of a peer that has not bound its socket yet.
        boot.barrier().map_err(|e| Error::Bootstrap(e.to_string()))?;
        drop(boot);
        let mut ep = Endpoint { shared, progress_thread: None, finalized: false };
        match progress {
            ProgressMode::Inline => {}
            ProgressMode::Auto => ep.start_watchdog(),
            ProgressMode::Thread => ep.start_progress_thread(),
        }
        Ok(ep)
    }

    /// `ProgressMode::Auto`: wakes every few milliseconds and, if the
    /// application neither called in since the last wake nor is waiting
    /// inside the library, makes progress on its behalf (acks, keepalive
    /// answers, passive-target gets and atomics). Never blocks on the lock:
    /// if the application holds it, it is active.
    fn start_watchdog(&mut self) {
        let shared = Arc::clone(&self.shared);
        let interval = {
            let state = shared.lock();
            (state.config.peer_dead_after / 50).clamp(Duration::from_millis(1), Duration::from_millis(10))
        };
        let cpus = shared.lock().config.background_cpus.clone();
        let handle = std::thread::Builder::new()
            .name("memwire-watchdog".into())
            .spawn(move || {
                confine_background_thread(cpus.as_deref());
                let mut seen = shared.app_calls.load(Ordering::Relaxed);
                // Shorter while a UDP transfer is under way, so one that the
                // application started just before computing is taken over
                // within a millisecond, not a whole interval later.
                let mut pause = interval;
                while !shared.stop.load(Ordering::Acquire) {
                    std::thread::park_timeout(pause);
                    let calls = shared.app_calls.load(Ordering::Relaxed);
                    if calls != seen || shared.app_waiting.load(Ordering::Relaxed) != 0 {
                        seen = calls;
                        let transferring = shared.state.try_lock().is_some_and(|state| state.udp_transfer_pending());
                        pause = if transferring { interval.min(Duration::from_millis(1)) } else { interval };
                        continue;
                    }
                    pause = interval;
                    let Some(mut state) = shared.state.try_lock() else {
                        continue;
                    };
                    // Checked again under the lock: an application thread
                    // marks itself waiting (under the lock) before it first
                    // looks at the state, so either we see the mark here and
                    // stay out, or it locks after us and sees everything we
                    // received. Without this, we
                    // could take the datagram or ring record (and consume
                    // the doorbell) that a thread about to sleep waits for,
                    // and it would sleep on a socket that stays quiet.
                    if shared.app_waiting.load(Ordering::Relaxed) != 0 {
                        continue;
                    }
                    for _ in 0..16 {
                        let now = shared.now();
                        if !state.progress(now) {
                            break;
                        }
                    }
                    // A transfer over UDP is under way while the application
                    // computes: drive it to its end (or until the application
                    // calls again) rather than a few rounds per interval, so a
                    // nonblocking put, get or send overlaps the computation in
                    // the default mode too. Between rounds the thread sleeps
                    // on the sockets, so it costs only the work it does.
                    while state.udp_transfer_pending() && !shared.stop.load(Ordering::Acquire) {
                        let deadline = state.next_timeout();
                        drop(state);
                        let timeout = shared.until(deadline).min(interval);
                        let mut blocker =
                            mw_transport::wait::Waiter::new(mw_transport::wait::WaitPolicy::block_at_once());
                        let fds = shared.fds();
                        let _ = blocker.idle(fds.as_slice(), Some(std::time::Instant::now() + timeout));
                        if shared.app_calls.load(Ordering::Relaxed) != seen
                            || shared.app_waiting.load(Ordering::Relaxed) != 0
                        {
                            break;
                        }
                        let Some(locked) = shared.state.try_lock() else {
                            break;
                        };
                        state = locked;
                        // Under the lock again, for the reason given above.
                        if shared.app_waiting.load(Ordering::Relaxed) != 0 {
                            break;
                        }
                        for _ in 0..16 {
                            let now = shared.now();
                            if !state.progress(now) {
                                break;
                            }
                        }
                    }
                }
            })
            .expect("spawning the watchdog thread failed");
        let _ = self.shared.watchdog.set(handle.thread().clone());
        self.progress_thread = Some(handle);
    }

    fn start_progress_thread(&mut self) {
        self.shared.threaded.store(true, Ordering::Release);
        let shared = Arc::clone(&self.shared);
        let cpus = shared.lock().config.background_cpus.clone();
        let handle = std::thread::Builder::new()
            .name("memwire-progress".into())
            .spawn(move || {
                confine_background_thread(cpus.as_deref());
                while !shared.stop.load(Ordering::Acquire) {
                    let deadline = {
                        let mut state = shared.lock();
                        let now = shared.now();
                        state.progress(now);
                        state.next_timeout()
                    };
                    // Block in the kernel: the thread serves passive-target
                    // traffic without burning the CPU the application computes on.
                    let timeout = shared.until(deadline).min(Duration::from_millis(5));
                    // Ring records from same-host peers wake us by doorbell;
                    // announce, poll once more, then block.
                    let _sleeping = shared.shm.as_ref().map(|shm| shm.announce_sleep(true));
                    if _sleeping.is_some() && shared.lock().progress(shared.now()) {
                        continue;
                    }
                    let mut blocker = mw_transport::wait::Waiter::new(mw_transport::wait::WaitPolicy::block_at_once());
                    let fds = shared.fds();
                    let _ = blocker.idle(fds.as_slice(), Some(std::time::Instant::now() + timeout));
                }
            })
            .expect("spawning the progress thread failed");
        self.progress_thread = Some(handle);
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.shared.rank
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.shared.size
    }

    /// Makes progress once without waiting: receives, executes incoming
    /// operations, retransmits, acknowledges.
    pub fn progress(&self) {
        let mut state = self.lock();
        let now = self.shared.now();
        state.progress(now);
    }

    /// Waits until every one-sided operation this rank issued toward `rank`
    /// before the call is complete at the target: every put and its variants
    /// (put_signal, strided, iov, masked, to a register), atomic and FIFO
    /// push has been executed in the target's memory, whether or not its
    /// handle was kept. Afterwards anyone the caller tells, by any path, sees
    /// their effects. Operations that return data (get, fetching atomics)
    /// complete through their handles; messages (`send`, `isend`) through
    /// theirs. Covers every path: acknowledged UDP datagrams, records a
    /// same-host peer has consumed from its ring *and* messages still
    /// waiting in the overflow queue in front of that ring, and operations
    /// on this rank itself. Fails with [`Error::Timeout`] if that takes
    /// longer than [`Config::op_timeout`], and with the error of an implicit
    /// operation toward `rank` ([`put_nbi_lent`](Self::put_nbi_lent)) that
    /// failed since the last report.
    pub fn flush(&self, rank: u32) -> Result<()> {
        self.check_rank(rank)?;
        {
            let mut state = self.lock();
            let now = self.shared.now();
            state.proto.request_ack(now, rank);
        }
        self.wait_for_op(|state| {
            state.ack_waiters[rank as usize].is_empty()
                && !state.gets.must_hold(rank)
                && state.shm_idle_toward(rank)
                && (rank != state.rank || state.loopback.is_empty())
        })?;
        self.lock().requests.take_implicit_failure(Some(rank)).map_or(Ok(()), Err)
    }

    /// [`flush`](Self::flush) toward every rank at once: waits until every
    /// one-sided operation this rank issued before the call is complete at
    /// its target ([`Error::Timeout`] past [`Config::op_timeout`]; the
    /// error of an implicit operation that failed since the last report).
    pub fn quiet(&self) -> Result<()> {
        {
            let mut state = self.lock();
            let now = self.shared.now();
            for peer in 0..state.size {
                if !state.ack_waiters[peer as usize].is_empty() {
                    state.proto.request_ack(now, peer);
                }
            }
        }
        self.wait_for_op(|state| {
            state.ack_waiters.iter().all(VecDeque::is_empty)
                && state.gets.is_idle()
                && state.loopback.is_empty()
                && state.shm_idle()
        })?;
        self.lock().requests.take_implicit_failure(None).map_or(Ok(()), Err)
    }

    /// Orders one-sided operations per target: at each target, every put,
    /// get, atomic or other one-sided operation this rank issued before the
    /// fence takes effect before any it issues to that target after it. So a
    /// target that sees the effect of a later operation (a flag word it waits
    /// on with [`wait_until`](Self::wait_until), or the signal of a
    /// put_signal) also sees the earlier ones, and a get issued before a put
    /// into its range returns the bytes from before the put.
    ///
    /// It does not wait for anything, and orders nothing between different
    /// targets or with other paths (messages relayed by third ranks, out of
    /// band signalling): that takes [`flush`](Self::flush) or
    /// [`quiet`](Self::quiet).
    ///
    /// It costs nothing because every path already executes one initiator's
    /// operations at one target in issue order: over UDP the protocol
    /// delivers each peer's messages exactly once and in order, a get whose
    /// chunks still wait for the per-peer get window holds every operation
    /// issued toward that peer after it until its last chunk has been asked
    /// for (so bulk puts go out at once unless a get to the same peer is
    /// waiting), and the target reads a get's data before executing a later
    /// write delivered with it; over shared memory a ring is FIFO, and a
    /// direct access is made only when every earlier operation toward that
    /// peer has been executed (otherwise the operation goes through the ring
    /// behind them); operations on this rank itself run in issue order.
    /// `tests/completion.rs` and `tests/ordering.rs` check the guarantee
    /// under injected loss and reordering. The call exists so that code
    /// written for libraries without that guarantee (OpenSHMEM's
    /// `shmem_fence`) states its intent, and keeps it if the guarantee ever
    /// changes.
    pub fn fence(&self) {}

    pub(crate) fn check_rank(&self, rank: u32) -> Result<()> {
        if rank >= self.shared.size {
            return Err(Error::BadRank { rank, size: self.shared.size });
        }
        Ok(())
    }

    /// Collective: returns when every rank has called it, making progress
    /// while it waits (so peers waiting on this rank are served).
    ///
    /// A dissemination barrier over reliable messages, on any transport
    /// and for any N: `ceil(log2 N)` rounds, in each of which every rank
    /// sends one one-way message and waits for one, so no rank handles more
    /// than `ceil(log2 N)` messages per barrier (the module docs of
    /// `internal.rs` give the details). Consecutive barriers are kept apart
    /// by their numbers. Fails with `PeerUnreachable` if a peer fails
    /// before this rank has heard from everyone. Barriers over a team, by a
    /// choice of methods: [`Team::barrier_with`](crate::Team::barrier_with).
    ///
    /// Waits for a rank that is alive but does not come at most
    /// `Config::wait_timeout` (none by default) at a time, then fails with [`Error::Timeout`];
    /// the barrier is then still in progress on this rank, and the next
    /// `barrier` call (also `finalize`'s) continues it where it stopped,
    /// so the ranks stay in step.
    pub fn barrier(&self) -> Result<()> {
        self.barrier_dissemination()
    }

    /// Collective: every rank contributes `blob`, everyone gets all of them in
    /// rank order. For small control data (keys, addresses), not bulk data.
    ///
    /// Waits at most `Config::op_timeout` ([`Error::Timeout`]); after one
    /// that timed out the ranks are out of step, and every later call of
    /// it (and of what is built on it: `alloc_symmetric`, `team_world`)
    /// fails with [`Error::TeamBroken`].
    pub fn allgather_bytes(&self, blob: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.internal_allgather(blob)
    }

    /// The next peer failure or restart noticed so far, oldest first. A peer
    /// is declared down after `peer_dead_after` of silence while this rank
    /// waits on it (keepalives make that include idle peers); from then on
    /// every operation toward it fails with `PeerUnreachable`.
    pub fn poll_peer_event(&self) -> Option<PeerEvent> {
        self.lock().peer_events.pop_front()
    }

    /// Whether `rank` has been declared down (and has not come back).
    pub fn is_peer_down(&self, rank: u32) -> bool {
        self.lock().dead.get(rank as usize).copied().unwrap_or(false)
    }

    /// Counters of this endpoint: the operation layer's and the protocol's.
    pub fn stats(&self) -> (CoreStats, crate::ProtoStats) {
        let state = self.lock();
        let mut core = state.stats;
        core.mcast = state.mcast.stats;
        core.udp_oversized = state.udp.truncated_datagrams();
        core.mcast_oversized = state.mcast.truncated_datagrams();
        core.fault = state.fault.as_ref().map(|f| f.stats()).unwrap_or_default();
        core.requests_live = state.requests.live() as u64;
        core.udp_io = state.udp.io_counts();
        core.udp_payload_mtu = state.proto.config().max_datagram as u64;
        core.udp_gso = state.udp.gso_enabled() && state.gather.is_some();
        core.udp_gro = state.udp.gro_enabled();
        (core.cpu_user_us, core.cpu_system_us) = crate::stats::process_cpu_us().unwrap_or_default();
        if let Some(shm) = &self.shared.shm {
            core.shm_direct_ops = shm.direct_ops.load(Ordering::Relaxed);
        }
        (core, state.proto.stats().clone())
    }

    /// Whether a progress thread runs (it may execute arrivals while an
    /// application thread waits for them).
    pub(crate) fn progress_thread_runs(&self) -> bool {
        self.shared.threaded.load(Ordering::Relaxed)
    }

    /// Whether `rank` is reached through shared memory (it runs on this
    /// host and neither side chose `MW_TRANSPORT=udp`), rather than UDP.
    pub fn shares_memory_with(&self, rank: u32) -> bool {
        self.shared.shm.as_ref().is_some_and(|shm| shm.link(rank).is_some())
    }

    /// Leaves the job cleanly: completes this rank's operations, waits for
    /// every rank to get here, and stays long enough to acknowledge what the
    /// others sent last. Prints counters when `MW_STATS=1`.
    pub fn finalize(mut self) -> Result<()> {
        self.finalize_inner()
    }

    fn finalize_inner(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        let result = self.quiet().and_then(|()| self.barrier());
        self.linger();
        self.stop_progress_thread();
        if self.lock().config.print_stats {
            self.print_stats();
        }
        result
    }

    /// Keeps acknowledging for a short while, so a peer's last message is not
    /// left unacknowledged (and retransmitted to a closed socket) when we exit.
    fn linger(&self) {
        let until = std::time::Instant::now() + Duration::from_millis(50);
        self.wait_for(|state| state.proto.is_quiescent() || std::time::Instant::now() >= until);
    }

    fn stop_progress_thread(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(handle) = self.progress_thread.take() {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }

    fn print_stats(&self) {
        let (core, proto) = self.stats();
        eprint!("{}", crate::stats::report(self.rank(), &core, &proto));
    }
}

/// Moves one of the library's own threads onto `cpus`
/// ([`Config::background_cpus`](crate::Config::background_cpus)), if set.
/// A refusal (CPUs this process may not use) leaves the thread where it
/// is: it still works, only placed as the process is.
fn confine_background_thread(cpus: Option<&[u32]>) {
    if let Some(cpus) = cpus {
        let _ = mw_transport::wait::confine_to(cpus);
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if !self.finalized {
            // No barrier here: the others may already be gone. Acknowledge
            // what arrived, then stop.
            self.linger();
            self.stop_progress_thread();
            if self.lock().config.print_stats {
                self.print_stats();
            }
        }
    }
}

pub(crate) fn internal_am(handler: u16, seq: u64) -> OpRepr<'static> {
    OpRepr::AmRequest(op::AmRequest {
        req: 0,
        handler,
        want_reply: false,
        rndv: false,
        args: op::AmArgs::from_slice(&[seq]).expect("one argument fits"),
        body: &[],
    })
}

impl Endpoint {
    /// See [`crate::internal`]: allgather of small blobs through rank 0,
    /// progressing while it waits.
    pub(crate) fn internal_allgather(&self, blob: &[u8]) -> Result<Vec<Vec<u8>>> {
        let seq = {
            let mut state = self.lock();
            if state.internal.gather_broken {
                return Err(Error::TeamBroken);
            }
            let seq = state.internal.next_seq;
            state.internal.next_seq += 1;
            if state.rank == 0 {
                state.internal.contribute(seq, 0, blob);
            } else {
                let now = self.shared.now();
                let repr = internal_am(crate::internal::HANDLER_GATHER, seq);
                state.send_op(now, 0, &repr, blob, None)?;
            }
            seq
        };
        let mut outcome = None;
        let waited = self.wait_for_bound(
            |state| {
                // The result wins over a failed peer (`Internal::outcome`).
                outcome = state.internal.outcome(seq);
                outcome.is_some()
            },
            crate::deadline::Bound::Paced,
        );
        if waited.is_err() {
            self.lock().internal.gather_broken = true;
            return Err(Error::Timeout);
        }
        match outcome {
            Some(Ok(all)) => Ok(all),
            Some(Err(rank)) => Err(Error::PeerUnreachable { rank }),
            None => Err(Error::InvalidArgument("internal gather ended without an outcome")),
        }
    }
}

/// The descriptors a waiter polls: the data path's socket and, once open,
/// the multicast group socket.
pub(crate) struct Fds {
    fds: [std::os::fd::RawFd; 2],
    len: usize,
}

impl Fds {
    pub(crate) fn as_slice(&self) -> &[std::os::fd::RawFd] {
        &self.fds[..self.len]
    }
}

impl Shared {
    pub(crate) fn fds(&self) -> Fds {
        let mcast = self.mcast_fd.load(Ordering::Acquire);
        Fds { fds: [self.fd, mcast], len: if mcast >= 0 { 2 } else { 1 } }
    }

    /// Records the multicast group socket's descriptor for waiters.
    pub(crate) fn set_mcast_fd(&self, fd: std::os::fd::RawFd) {
        self.mcast_fd.store(fd, Ordering::Release);
    }

    pub(crate) fn lock(&self) -> StateGuard<'_, State> {
        // A panic while holding the lock (a bug) unlocks it on unwind: it
        // does not wedge every later call.
        self.state.lock()
    }

    /// Wakes the `Auto` mode's watchdog (if it runs): a nonblocking transfer
    /// over UDP has data beyond the window, which the watchdog drives while
    /// the application computes, from about a millisecond after its last call.
    pub(crate) fn nudge_watchdog(&self) {
        if let Some(thread) = self.watchdog.get() {
            thread.unpark();
        }
    }

    pub(crate) fn now(&self) -> ProtoInstant {
        ProtoInstant::from_nanos(self.clock_base.elapsed().as_nanos() as u64)
    }

    /// The protocol's time at `clock`, a reading the caller already took.
    pub(crate) fn at(&self, clock: std::time::Instant) -> ProtoInstant {
        ProtoInstant::from_nanos(clock.saturating_duration_since(self.clock_base).as_nanos() as u64)
    }

    pub(crate) fn to_std(&self, t: ProtoInstant) -> std::time::Instant {
        self.clock_base + Duration::from_nanos(t.as_nanos())
    }

    pub(crate) fn until(&self, deadline: Option<ProtoInstant>) -> Duration {
        match deadline {
            Some(t) => Duration::from_nanos(t.as_nanos()).saturating_sub(self.clock_base.elapsed()),
            None => Duration::from_millis(5),
        }
    }
}

/// The error a refused `mw_proto` submit toward `peer` stands for.
pub(crate) fn submit_error(error: mw_proto::SubmitError, peer: u32, size: u32) -> Error {
    match error {
        mw_proto::SubmitError::PeerDead => Error::PeerUnreachable { rank: peer },
        mw_proto::SubmitError::TooLarge => {
            Error::InvalidArgument("operation message larger than the protocol's max_message (64 MiB + 64 KiB)")
        }
        _ => Error::BadRank { rank: peer, size },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `MW_MTU` sets the largest GSO segment toward other hosts too: with
    /// the transport's default (1,472) a jumbo-frame job sent its 8,972-byte
    /// datagrams one `sendmmsg` entry each, never as GSO sends.
    #[test]
    fn the_datagram_size_asked_for_is_the_transports_payload_mtu() {
        let default = udp_config(&Config::default());
        assert_eq!(default, mw_transport::udp::UdpConfig::default());
        let jumbo = udp_config(&Config { max_datagram: Some(8972), ..Config::default() });
        assert_eq!(jumbo.payload_mtu, 8972);
        assert_eq!(jumbo.payload_mtu_for("10.0.0.2".parse().unwrap()), 8972);
    }
}
