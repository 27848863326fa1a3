//! The endpoint: one per process. Owns the protocol instance, the UDP
//! transport, the peer table, the region table, the outstanding requests and
//! the progress engine that ties them together (including the IP multicast
//! engine's state, `crate::mcast`, whose sockets it polls and whose timers
//! it honours).
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
use crate::deadline::Bound;
use crate::internal::Internal;
use crate::lock::{StateGuard, StateLock};
use crate::region::RegionTable;
use crate::request::{Completion, Output, RequestId, Requests};
use crate::stats::CoreStats;
use crate::target::{Reply, Target};
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
    hold_transmit: bool,
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
    fd: std::os::fd::RawFd,
    /// The multicast group socket's descriptor once opened (-1 before):
    /// waiters poll it next to `fd`.
    mcast_fd: AtomicI32,
    stop: AtomicBool,
    /// The `Auto` mode's watchdog thread, woken when a nonblocking transfer
    /// over UDP starts (`Shared::nudge_watchdog`).
    watchdog: std::sync::OnceLock<std::thread::Thread>,
    /// Bumped on every application call into the endpoint; the watchdog
    /// (`ProgressMode::Auto`) steps in only when it stops moving.
    app_calls: AtomicU64,
    /// Nonzero while application threads are inside `wait_for` (driving
    /// progress themselves): the watchdog stays out of their way.
    app_waiting: AtomicU64,
    /// A progress thread runs: it may consume the datagram a waiter sleeps on.
    threaded: AtomicBool,
    clock_base: std::time::Instant,
    wait_policy: mw_transport::wait::WaitPolicy,
    /// Same-host peers: read without the lock on the direct path.
    pub shm: Option<Arc<crate::shm::ShmShared>>,
    /// Every peer is reached through shared memory: a waiter may poll the
    /// rings alone (no receive syscall) between full progress rounds.
    all_shm: bool,
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

    /// Locks the state for an application call (which counts as activity:
    /// the watchdog leaves an active application alone).
    pub(crate) fn lock(&self) -> StateGuard<'_, State> {
        // A load and a store, not a locked increment (this is on every
        // call): the watchdog only asks whether the count moved, and an
        // increment lost to a concurrent one still moves it.
        let calls = &self.shared.app_calls;
        calls.store(calls.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        self.shared.lock()
    }

    /// The state lock, not counted as an application call: for a look that
    /// makes no progress (`is_complete`), so that an application polling
    /// it while it computes still has the `Auto` mode's watchdog drive its
    /// transfers, and is not taken for a rank that serves its peers.
    pub(crate) fn lock_without_progress(&self) -> StateGuard<'_, State> {
        self.shared.lock()
    }

    /// Makes progress until `done` says so, busy-polling, then yielding, then
    /// blocking (seed 004: PM/UDP hands the CPU over when polling finds nothing).
    pub(crate) fn wait_for(&self, done: impl FnMut(&mut State) -> bool) {
        self.wait_for_until(done, None);
    }

    /// Waits until request `id` completes and takes its outcome (`None`: it
    /// was already collected, or never existed). One lock when it is
    /// complete already (an eager send's is at once), and collected under
    /// the lock that saw it complete otherwise: not a second one after.
    pub(crate) fn wait_and_take(&self, id: RequestId, bound: Bound) -> Option<(Result<()>, Output)> {
        self.wait_and_take_with(id, false, bound, |_| false)
    }

    /// [`wait_and_take`](Self::wait_and_take) with `advance`, which may
    /// complete the request itself (a receive taking its message from a
    /// ring) and says whether it did: tried first under the same single
    /// lock, before any of the waiting machinery. `ring_spin`: what completes
    /// the request arrives through a same-host ring, so the wait starts with
    /// [`spin_for_ring_record`](Self::spin_for_ring_record) (only once the
    /// first look found the request incomplete: a window of requests whose
    /// replies progress already executed must not spin for nothing).
    /// Past `bound`'s deadline the outcome is `Err(Timeout)` and the request
    /// stays where it is: the caller retires or keeps it.
    pub(crate) fn wait_and_take_with(
        &self,
        id: RequestId,
        ring_spin: bool,
        bound: Bound,
        mut advance: impl FnMut(&mut State) -> bool,
    ) -> Option<(Result<()>, Output)> {
        let mut ready = |state: &mut State| state.requests.is_done(id) != Some(false) || advance(state);
        let first_look = {
            let mut state = self.lock();
            if ready(&mut state) {
                return state.requests.take(id);
            }
            state
        };
        let mut taken = None;
        if !ring_spin {
            drop(first_look);
        } else if self.spin_for_ring_record(first_look, |state, _| {
            if !ready(state) {
                return false;
            }
            taken = state.requests.take(id);
            true
        }) {
            return taken;
        }
        let until = self.deadline(bound);
        let finished = self.wait_for_until(
            |state| {
                if !ready(state) {
                    return false;
                }
                taken = state.requests.take(id);
                true
            },
            until,
        );
        if !finished {
            return Some((Err(Error::Timeout), Output::None));
        }
        taken
    }

    /// The first microseconds of a wait for a record from a same-host ring
    /// (a receive's message, an active message's reply): only the rings'
    /// stamps are polled (no lock, no clock, no progress round), and the
    /// first record that lands is offered to `take` under the lock at once.
    /// Returns whether `take` took it. A record `take` leaves (another
    /// tag, a credit grant, someone else's reply), or a quiet spell of a
    /// few microseconds, hands over to [`wait_for`](Self::wait_for), which
    /// executes it and serves every other path. That loop reaches the same
    /// record through more layers: an 8-byte send/recv ping-pong over shared
    /// memory took 0.121-0.126 µs per hop through it and 0.106-0.111 with
    /// this spin in front (alternating runs, before the rings' lap jumps).
    /// Only for waits a ring ends: a UDP reply would wait out the spin.
    ///
    /// `first_look` is the guard of the caller's first look (which found
    /// nothing): the spin keeps the lock while it peeks, so the record is
    /// taken without another locked instruction between its landing and the
    /// caller's return (~6 ns a hop on the Intel Xeon test VM, where an
    /// uncontended compare-exchange costs more than on the EPYC: an 8-byte
    /// send_recv ping-pong over shared memory does two per hop, one here
    /// and one in the send). It lets go as soon as another thread waits
    /// for the lock (`StateLock::is_wanted`: the progress thread, another
    /// application thread), and peeks without it from then on. `take`'s
    /// second argument says whether the lock was held throughout: the state
    /// is then exactly as the first look left it, and what that look
    /// checked need not be checked again (a receive's matching queues).
    pub(crate) fn spin_for_ring_record(
        &self,
        first_look: StateGuard<'_, State>,
        take: impl FnOnce(&mut State, bool) -> bool,
    ) -> bool {
        let Some(shm) = self.shared.shm.as_deref() else { return false };
        let mut held = Some(first_look);
        for _ in 0..RING_SPIN_ROUNDS {
            if shm.inbound_pending() {
                let (mut state, unchanged) = match held {
                    Some(state) => (state, true),
                    None => (self.lock(), false),
                };
                return take(&mut state, unchanged);
            }
            if held.is_some() && self.shared.state.is_wanted() {
                held = None;
            }
            std::hint::spin_loop();
        }
        false
    }

    /// [`spin_for_ring_record`](Self::spin_for_ring_record) for a caller
    /// that must not let go of the lock until it has finished what it
    /// started under it (`am_begin`: a request published under the id the
    /// next allocation gives, not allocated yet). Polls the rings' stamps
    /// with `held` kept, offers the first record that lands to `take`, and
    /// hands the guard back: after `take` (with what it returned), or with
    /// `false` as soon as another thread waits for the lock or the spin
    /// (~4 µs) is over.
    pub(crate) fn spin_holding_lock<'a>(
        &'a self,
        mut held: StateGuard<'a, State>,
        take: impl FnOnce(&mut State) -> bool,
    ) -> (StateGuard<'a, State>, bool) {
        let Some(shm) = self.shared.shm.as_deref() else { return (held, false) };
        for _ in 0..RING_SPIN_ROUNDS {
            if shm.inbound_pending() {
                let taken = take(&mut held);
                return (held, taken);
            }
            if self.shared.state.is_wanted() {
                break;
            }
            std::hint::spin_loop();
        }
        (held, false)
    }

    /// [`wait_for`](Self::wait_for), giving up at `until`: returns whether
    /// `done` said so.
    pub(crate) fn wait_for_until(
        &self,
        mut done: impl FnMut(&mut State) -> bool,
        until: Option<std::time::Instant>,
    ) -> bool {
        let mut waiter = mw_transport::wait::Waiter::new(self.shared.wait_policy);
        let mut waiting = WaitingMark::new(&self.shared);
        // The mark ends where the wait succeeds, under the lock `done` runs
        // with (no locked instruction on the way back to the caller).
        let mut done = |state: &mut State| {
            let finished = done(state);
            if finished {
                waiting.end(state);
            }
            finished
        };
        // Whether to (re)enter the ring spin: at the start, and whenever the
        // slower loop below found work after a quiet spell (a peer that went
        // quiet for a while, then starts a ping-pong, must be served at ring
        // speed again, not at the pace of the socket and the doorbell).
        let mut spin_rings = self.shared.all_shm;
        loop {
            if spin_rings {
                spin_rings = false;
                if let Some(done_now) = self.spin_on_rings(&mut done, until) {
                    return done_now;
                }
            }
            // One clock read a round serves the deadline and the protocol.
            let clock = std::time::Instant::now();
            if until.is_some_and(|t| clock >= t) {
                return false;
            }
            let deadline = {
                let mut state = self.shared.lock();
                let now = self.shared.at(clock);
                // One datagram per round: the caller's condition is checked
                // as soon as something arrived, instead of after another
                // receive syscall that would only report an empty socket.
                let worked = state.progress_with(now, 1) | state.assist_pulls();
                if done(&mut state) {
                    return true;
                }
                if worked {
                    waiter.reset();
                    spin_rings = self.shared.all_shm;
                    continue;
                }
                state.next_timeout()
            };
            let mut deadline = deadline.map(|t| self.shared.to_std(t));
            if let Some(until) = until {
                deadline = Some(deadline.map_or(until, |d| d.min(until)));
            }
            if self.shared.threaded.load(Ordering::Relaxed) || self.shared.app_waiting.load(Ordering::Relaxed) > 1 {
                // Another thread (the progress thread, or a second
                // application thread waiting too) may receive what we wait
                // for (the datagram, or the shared-memory doorbell) and the
                // socket then stays quiet: never sleep long on it alone.
                // (The Auto watchdog never runs while we wait.)
                let cap = std::time::Instant::now() + Duration::from_micros(500);
                deadline = Some(deadline.map_or(cap, |d| d.min(cap)));
            }
            // About to sleep with same-host peers: announce it so that their
            // next store or ring record rings our doorbell, then poll once
            // more (see crate::shm on why neither side can miss the other).
            let _sleeping = match &self.shared.shm {
                Some(shm) if waiter.blocks_next() => Some(shm.announce_sleep(false)),
                _ => None,
            };
            if _sleeping.is_some() {
                let mut state = self.shared.lock();
                let worked = state.progress(self.shared.now());
                if done(&mut state) {
                    return true;
                }
                if worked {
                    waiter.reset();
                    spin_rings = self.shared.all_shm;
                    continue;
                }
            }
            let fds = self.shared.fds();
            let _ = waiter.idle(fds.as_slice(), deadline);
        }
    }

    /// The first phase of a wait when every peer shares this host: what we
    /// wait for arrives in a ring or by a direct store, so poll the rings
    /// and `done` alone (no receive syscall, which costs more than a whole
    /// shared-memory message), with a full progress round every few µs for
    /// the socket (raw datagrams, timers). After 20 µs each round also
    /// yields (a peer sharing our core runs at once, see `wait_until`);
    /// after `MW_SHM_SPIN_US` the caller's kernel-blocking loop takes over.
    /// `Some(result)` when the wait ended here.
    fn spin_on_rings(
        &self,
        done: &mut impl FnMut(&mut State) -> bool,
        until: Option<std::time::Instant>,
    ) -> Option<bool> {
        const FULL_EVERY: Duration = Duration::from_micros(10);
        const LOCAL_EVERY: Duration = Duration::from_micros(1);
        const YIELD_AFTER: Duration = Duration::from_micros(20);
        let shm = self.shared.shm.as_deref()?;
        let spin = shm.spin;
        // The clock is read every few idle rounds only: a read costs about
        // as much as polling every ring once, and a protocol time stale by
        // well under a microsecond changes no timer's outcome.
        const CLOCK_EVERY: u32 = 8;
        // A record already waiting (a receive whose message is there) is
        // taken before the first clock read.
        if shm.inbound_pending() && done(&mut self.shared.lock()) {
            return Some(true);
        }
        let mut clock = std::time::Instant::now();
        let mut idle_since = clock;
        let mut last_full = clock;
        let mut last_local = clock;
        // Whether the last locked round left local work (messaging, queued
        // ring records, unacknowledged operations): then the locked rounds
        // come every CLOCK_EVERY rounds, otherwise every LOCAL_EVERY only.
        let mut busy = true;
        // The first round only peeks (the clock was just read).
        let mut rounds_since_clock = 1u32;
        // A record-driven round did work since the last clock read.
        let mut restart_idle = false;
        // Record-driven rounds since the last clock read (see below).
        const RECORDS_BEFORE_CLOCK: u32 = 16;
        let mut records_unclocked = 0u32;
        // The lock, kept from the last locked round while the spin only
        // peeks, so that a record is executed without a locked instruction
        // between its landing and the reply (module docs of `lock`,
        // "Holding while spinning"); dropped when another thread wants it
        // and before the CPU is yielded.
        let mut held: Option<StateGuard<'_, State>> = None;
        loop {
            if held.is_some() && self.shared.state.is_wanted() {
                held = None;
            }
            // Between the rounds that take the lock (periodic ones, and any
            // with a record waiting in a ring) the spin only peeks at the
            // rings: a locked round of progress is a few hundred
            // instructions, a peek two loads per peer, so a record is seen
            // and popped sooner after it lands. A record that lands during a
            // locked round waits for it to end: with nothing else to do,
            // those rounds are rare (measured: a ping-pong of 8-byte
            // messages went from 0.22 to 0.19 us when they were 8 times
            // rarer).
            let periodic = rounds_since_clock == 0 && (busy || clock - last_local >= LOCAL_EVERY);
            if periodic || shm.inbound_pending() {
                let record_driven = !periodic;
                let worked = {
                    let mut state = match held.take() {
                        Some(state) => state,
                        None => self.shared.lock(),
                    };
                    // An active-message request at a ring's front runs
                    // first: its reply is on the peer's critical path.
                    // `done` never takes a request from a ring itself, and
                    // executing one first only brings forward what `done`
                    // may be waiting for (an internal collective's step).
                    let served = record_driven && state.serve_ring_requests(|| self.shared.at(clock));
                    // The condition first when a record is there: a receive
                    // takes its own message straight from the ring
                    // (`State::recv_from_ring`). A record-driven round saw
                    // one a moment ago: no second look (taken meanwhile by
                    // another thread, `done` just finds nothing).
                    if (record_driven || shm.inbound_pending()) && done(&mut state) {
                        return Some(true);
                    }
                    let now = self.shared.at(clock);
                    let mut worked = served;
                    worked |= if periodic && clock - last_full >= FULL_EVERY {
                        last_full = clock;
                        last_local = clock;
                        state.progress_with(now, 1)
                    } else if periodic {
                        last_local = clock;
                        state.progress_local(now)
                    } else {
                        // Execute the record (and what it set off in
                        // messaging); the rest waits for the next periodic
                        // round.
                        state.progress_rings(now)
                    };
                    worked |= state.assist_pulls();
                    if done(&mut state) {
                        return Some(true);
                    }
                    busy = worked || state.local_work_pending();
                    held = Some(state);
                    worked
                };
                if worked && record_driven && records_unclocked < RECORDS_BEFORE_CLOCK {
                    // Straight back to peeking: the next record (a
                    // request-reply partner's next request) often lands
                    // within ~100 ns, and a clock read and a periodic round
                    // right here were in its way (8-byte am target waiting
                    // in a barrier: 0.118 -> 0.113 us per half round trip,
                    // `examples/pingpong_blocks`). The clock read that ends
                    // the next few idle rounds restarts the idle time; a
                    // stream of records with no idle round between them
                    // still reads it (deadline, periodic round: sockets and
                    // timers) every RECORDS_BEFORE_CLOCK records.
                    records_unclocked += 1;
                    rounds_since_clock = 1;
                    restart_idle = true;
                    continue;
                }
                if worked {
                    clock = std::time::Instant::now();
                    rounds_since_clock = 0;
                    records_unclocked = 0;
                    idle_since = clock;
                    continue;
                }
            }
            rounds_since_clock += 1;
            if rounds_since_clock < CLOCK_EVERY {
                std::hint::spin_loop();
                continue;
            }
            clock = std::time::Instant::now();
            rounds_since_clock = 0;
            records_unclocked = 0;
            if std::mem::take(&mut restart_idle) {
                idle_since = clock;
            }
            if until.is_some_and(|t| clock >= t) {
                return Some(false);
            }
            let idle = clock - idle_since;
            if idle >= spin {
                return None;
            }
            if idle >= YIELD_AFTER {
                held = None;
                std::thread::yield_now();
            } else {
                // One pause only: it costs ~14 ns on these CPUs, and every
                // pause here is latency added to the message we wait for.
                std::hint::spin_loop();
            }
        }
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

/// Rounds of the spins that wait for a ring record (`Endpoint::
/// spin_for_ring_record`, `Endpoint::spin_holding_lock`): ~15 ns a round
/// (a pause and a peek per ring), ~4 µs in all.
const RING_SPIN_ROUNDS: u32 = 256;

/// Marks an application thread as waiting inside the library (in
/// `Shared::app_waiting`) until [`end`](WaitingMark::end) or its drop (also
/// when the wait unwinds). The count changes only under the endpoint lock,
/// so a load and a store change it: the mark's end, on the critical path of
/// every wait that succeeds, costs no locked instruction (measured: ~4 ns
/// per 8-byte same-host message).
struct WaitingMark<'a> {
    shared: &'a Shared,
    marked: bool,
}

impl<'a> WaitingMark<'a> {
    /// Marks before the wait first looks at the state (the watchdog relies
    /// on it: see `start_watchdog`).
    fn new(shared: &'a Shared) -> WaitingMark<'a> {
        let _locked = shared.lock();
        Self::add(&shared.app_waiting, 1);
        WaitingMark { shared, marked: true }
    }

    /// Ends the mark; `_locked` proves the caller holds the endpoint lock.
    fn end(&mut self, _locked: &mut State) {
        if std::mem::take(&mut self.marked) {
            Self::add(&self.shared.app_waiting, u64::MAX); // -1
        }
    }

    /// Adds `delta` (wrapping) with a plain load and store: callers hold
    /// the endpoint lock, so no other change races with this one.
    fn add(counter: &AtomicU64, delta: u64) {
        counter.store(counter.load(Ordering::Relaxed).wrapping_add(delta), Ordering::Relaxed);
    }
}

impl Drop for WaitingMark<'_> {
    fn drop(&mut self) {
        if self.marked {
            let _locked = self.shared.lock();
            Self::add(&self.shared.app_waiting, u64::MAX);
        }
    }
}

/// The descriptors a waiter polls: the data path's socket and, once open,
/// the multicast group socket.
struct Fds {
    fds: [std::os::fd::RawFd; 2],
    len: usize,
}

impl Fds {
    fn as_slice(&self) -> &[std::os::fd::RawFd] {
        &self.fds[..self.len]
    }
}

impl Shared {
    fn fds(&self) -> Fds {
        let mcast = self.mcast_fd.load(Ordering::Acquire);
        Fds { fds: [self.fd, mcast], len: if mcast >= 0 { 2 } else { 1 } }
    }

    /// Records the multicast group socket's descriptor for waiters.
    pub(crate) fn set_mcast_fd(&self, fd: std::os::fd::RawFd) {
        self.mcast_fd.store(fd, Ordering::Release);
    }

    fn lock(&self) -> StateGuard<'_, State> {
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
    fn at(&self, clock: std::time::Instant) -> ProtoInstant {
        ProtoInstant::from_nanos(clock.saturating_duration_since(self.clock_base).as_nanos() as u64)
    }

    fn to_std(&self, t: ProtoInstant) -> std::time::Instant {
        self.clock_base + Duration::from_nanos(t.as_nanos())
    }

    fn until(&self, deadline: Option<ProtoInstant>) -> Duration {
        match deadline {
            Some(t) => Duration::from_nanos(t.as_nanos()).saturating_sub(self.clock_base.elapsed()),
            None => Duration::from_millis(5),
        }
    }
}

impl State {
    /// One round of progress. Returns whether anything happened.
    pub(crate) fn progress(&mut self, now: ProtoInstant) -> bool {
        self.progress_with(now, 64)
    }

    /// A round of progress without the sockets: loopback, the shared-memory
    /// rings, and what their deliveries set in motion. For waiters whose
    /// every peer shares this host (a full round now and then still reads
    /// the socket).
    pub(crate) fn progress_local(&mut self, now: ProtoInstant) -> bool {
        let mut worked = self.drain_loopback(now);
        worked |= self.poll_shm(now);
        self.internal_progress(now);
        worked |= self.msg_progress(now);
        worked
    }

    /// Whether something local may need a progress round soon even with no
    /// ring record arriving: messaging work (pulls, an outbox, sends held for
    /// credit), records queued for a full ring, loopback or internal
    /// traffic, operations waiting to be acknowledged (a ring's consumption).
    pub(crate) fn local_work_pending(&self) -> bool {
        !self.msg.is_idle()
            || !self.shm_idle()
            || !self.loopback.is_empty()
            || !self.internal.outgoing.is_empty()
            || self.ack_waiters.iter().any(|w| !w.is_empty())
    }

    /// The part of [`progress_local`](Self::progress_local) that executes
    /// ring arrivals: the rings, then messaging and internal traffic they
    /// may have set off (a receive's pull, a credit return, a collective's
    /// next step).
    ///
    /// When every record it took was an active message executed in place
    /// (`State::am_from_ring`: the reply and what the handler queued are
    /// sent before it returns), nothing is set off, and messaging and
    /// internal traffic wait for the next periodic round: an 8-byte am
    /// target waiting in a barrier answered 1-3 ns sooner per half round
    /// trip without their idle checks (in-process alternation, EPYC VM).
    pub(crate) fn progress_rings(&mut self, now: ProtoInstant) -> bool {
        let (popped, in_place) = (self.stats.shm_ring_received, self.msg.stats.am_in_place);
        let mut worked = self.poll_shm_rings(now, crate::shm::engine::BATCH);
        if self.stats.shm_ring_received - popped != self.msg.stats.am_in_place - in_place {
            self.internal_progress(now);
            worked |= self.msg_progress(now);
        }
        worked
    }

    /// One round of progress receiving at most `max_datagrams`.
    pub(crate) fn progress_with(&mut self, now: ProtoInstant, max_datagrams: usize) -> bool {
        let mut worked = self.drain_loopback(now);
        let mut taken = 0;
        while taken < max_datagrams {
            // One receive: a datagram, or (GRO) a run of them from one
            // sender, each handled in place in `rx_buf`. Their acks leave
            // together at the end of the round.
            let Ok(Some(rx)) = self.udp.recv_segments(&mut self.rx_buf) else {
                break;
            };
            worked = true;
            taken += rx.count();
            self.with_transmit_held(now, |state| {
                let mut start = 0;
                for _ in 0..rx.count() {
                    let end = (start + rx.segment).min(rx.len);
                    state.receive_datagram(now, start..end);
                    start = end;
                }
            });
        }
        worked |= self.mcast_receive(now, max_datagrams);
        worked |= self.poll_shm(now);
        if self.proto.poll_timeout().is_some_and(|t| t <= now) {
            self.proto.handle_timeout(now);
            worked = true;
        }
        worked |= self.drain_events(now);
        // After the acknowledgements: the room they made takes more get
        // requests and fed puts this round.
        if !self.gets.is_idle() {
            worked |= self.pump_gets(now);
        }
        self.internal_progress(now);
        worked |= self.msg_progress(now);
        worked |= self.mcast_progress(now);
        worked |= self.transmit(now);
        worked
    }

    /// Whether data toward or from a UDP peer is still in flight: sent and
    /// not yet acknowledged, queued behind the window, or gets still to be
    /// requested (what the `Auto` mode's watchdog drives while the
    /// application computes).
    pub(crate) fn udp_transfer_pending(&self) -> bool {
        !self.gets.is_idle() || !self.proto.is_quiescent()
    }

    /// When the progress engine must run again even if nothing arrives:
    /// the protocol's timers and the multicast members'.
    pub(crate) fn next_timeout(&self) -> Option<ProtoInstant> {
        // Same-host peers have no protocol timers: a blocked waiter wakes
        // for the liveness check, or a peer that died would never be noticed.
        let shm = self.shm.as_ref().and_then(|shm| shm.next_liveness_check(&self.dead));
        [self.proto.poll_timeout(), self.mcast.poll_timeout(), shm].into_iter().flatten().min()
    }

    /// One received datagram, `rx_buf[at]`.
    fn receive_datagram(&mut self, now: ProtoInstant, at: std::ops::Range<usize>) {
        let datagram = &self.rx_buf[at.clone()];
        if datagram == crate::shm::DOORBELL {
            return; // a same-host peer woke us; the rings are polled in the round
        }
        if mw_wire::peek_packet_type(datagram) == Some(mw_wire::PacketType::Mcast) {
            self.mcast_datagram(now, at); // a repair, by unicast
            return;
        }
        let State { proto, regions, requests, gets, replies, completions, stats, rx_buf, internal, msg, mcast, .. } =
            self;
        let mut target = Target { regions, requests, gets, replies, completions, stats, internal, msg, mcast };
        // Rejected packets are counted by the protocol; nothing else to do.
        let _ = proto.handle_datagram(now, &rx_buf[at], &mut |peer, msg| target.on_message(peer, msg));
        self.after_delivery(now);
    }

    fn drain_loopback(&mut self, now: ProtoInstant) -> bool {
        let mut worked = false;
        while let Some((msg, waiter)) = self.loopback.pop_front() {
            worked = true;
            let me = self.rank;
            let State { regions, requests, gets, replies, completions, stats, internal, msg: m, mcast, .. } = self;
            Target { regions, requests, gets, replies, completions, stats, internal, msg: m, mcast }
                .on_message(me, &msg);
            if let Some(id) = waiter {
                // A put to ourselves completes on delivery (there is no ack),
                // so a rejection must fail it now: its status reply, queued
                // behind this message, would find the request already done.
                let rejected = self.replies.iter().position(|reply| reply.refuses(me, id.0));
                let completion = match rejected.map(|i| self.replies.remove(i)).and_then(|r| r.status()) {
                    Some(status) => self.requests.fail(id, crate::target::fail_status(status)),
                    None => self.requests.part_done(id),
                };
                if let Some(c) = completion {
                    self.completions.push(c);
                }
            }
            self.after_delivery(now);
        }
        worked
    }

    /// Executes one message from `peer` that arrived outside the protocol
    /// (a shared-memory ring). The caller then sends the replies it queued
    /// ([`State::after_delivery`]).
    pub(crate) fn deliver(&mut self, peer: u32, msg: &[u8]) {
        let State { regions, requests, gets, replies, completions, stats, internal, msg: m, mcast, .. } = self;
        Target { regions, requests, gets, replies, completions, stats, internal, msg: m, mcast }.on_message(peer, msg);
    }

    /// Submits the replies the delivered operations asked for, then applies
    /// completion notifications.
    pub(crate) fn after_delivery(&mut self, now: ProtoInstant) {
        let replies = std::mem::take(&mut self.replies);
        for reply in &replies {
            self.send_reply(now, reply);
        }
        if !replies.is_empty() && !self.hold_transmit {
            self.transmit(now);
        }
        let mut replies = replies;
        replies.clear();
        if self.replies.is_empty() {
            self.replies = replies;
        }
        if self.completions.is_empty() {
            return;
        }
        // Drained in place: the vector keeps its capacity (taking it would
        // free it here and allocate again at the next completion).
        let mut completions = std::mem::take(&mut self.completions);
        for completion in completions.drain(..) {
            if let Some((key, offset)) = completion.notify {
                if let Ok(region) = self.regions.get(key) {
                    if region.mem.is_aligned(offset as usize, 8) && offset + 8 <= region.mem.len() as u64 {
                        region.mem.atomic_u64(offset as usize).fetch_add(1, Ordering::Release);
                    }
                }
            }
        }
        if self.completions.is_empty() {
            self.completions = completions;
        }
    }

    fn send_reply(&mut self, now: ProtoInstant, reply: &Reply) {
        match *reply {
            Reply::Status { peer, req, status } => {
                let repr = OpRepr::OpStatus(op::OpStatus { req, status });
                let _ = self.send_op(now, peer, &repr, &[], None);
            }
            Reply::Atomic { peer, req, status, value } => {
                let repr = OpRepr::AtomicResponse(op::AtomicResponse { req, status, value });
                let _ = self.send_op(now, peer, &repr, &[], None);
            }
            Reply::GetError { peer, req, status } => {
                let repr = OpRepr::GetResponse(op::GetResponse { req, status, body: &[] });
                let _ = self.send_op(now, peer, &repr, &[], None);
            }
            Reply::Get { peer, req, key, offset, len } => {
                let Ok(region) = self.regions.get(key) else {
                    // Deregistered since the check: still answered.
                    return self.send_reply(now, &Reply::GetError { peer, req, status: op::Status::BadKey });
                };
                let mem = region.mem;
                mem.with_slice(offset, len, |data| self.send_get_data(now, peer, req, data));
            }
            Reply::GetData { peer, req, ref data } => self.send_get_data(now, peer, req, data),
            Reply::GetStrided { peer, req, .. } => match reply.read(&self.regions) {
                Some(Ok(gathered)) => {
                    let repr = OpRepr::GetResponse(op::GetResponse { req, status: op::Status::Ok, body: &[] });
                    let _ = self.send_op(now, peer, &repr, &gathered, None);
                }
                _ => self.send_reply(now, &Reply::GetError { peer, req, status: op::Status::BadKey }),
            },
        }
    }

    /// Sends a get's answer, `data`, to `peer`.
    fn send_get_data(&mut self, now: ProtoInstant, peer: u32, req: u32, data: &[u8]) {
        let repr = OpRepr::GetResponse(op::GetResponse { req, status: op::Status::Ok, body: &[] });
        let hlen = repr.emit_header(&mut self.hdr_buf);
        if self.is_shm_peer(peer) {
            let hdr = std::mem::take(&mut self.hdr_buf);
            let _ = self.shm_send(peer, &[&hdr[..hlen], data], None, false);
            self.hdr_buf = hdr;
            return;
        }
        let hdr = &self.hdr_buf[..hlen];
        if peer == self.rank {
            let mut msg = Vec::with_capacity(hlen + data.len());
            msg.extend_from_slice(hdr);
            msg.extend_from_slice(data);
            self.loopback.push_back((msg, None));
            return;
        }
        // Over UDP one response per datagram, so the requester lands each
        // straight from its receive buffer; a span asked for at once
        // (crate::get_window) goes back as a run of them.
        let proto = &mut self.proto;
        let piece = proto.config().segment_size().saturating_sub(hlen).max(1);
        if data.is_empty() {
            let _ = proto.submit(now, peer, &[hdr]);
        } else {
            for part in data.chunks(piece) {
                let _ = proto.submit(now, peer, &[hdr, part]);
            }
        }
    }

    /// Sends one operation message (header from `repr`, then `body`) to
    /// `peer`; `waiter` is completed by the peer's ack. Loopback for self.
    pub(crate) fn send_op(
        &mut self,
        now: ProtoInstant,
        peer: u32,
        repr: &OpRepr<'_>,
        body: &[u8],
        waiter: Option<RequestId>,
    ) -> Result<()> {
        if self.queue_op(now, peer, repr, body, waiter)? && !self.hold_transmit {
            // Out now rather than at the end of the next progress round,
            // which would first spend a receive syscall (latency: the
            // initiator's request and the target's reply both leave here).
            self.transmit(now);
        }
        Ok(())
    }

    /// [`send_op`](Self::send_op) without sending: returns `true` when the
    /// message went to the protocol and leaves at the next
    /// [`transmit`](Self::transmit) (the caller queues several, then
    /// transmits them as one batch), `false` when it was delivered or queued
    /// by another path (loopback, shared memory).
    pub(crate) fn queue_op(
        &mut self,
        now: ProtoInstant,
        peer: u32,
        repr: &OpRepr<'_>,
        body: &[u8],
        waiter: Option<RequestId>,
    ) -> Result<bool> {
        let hlen = repr.emit_header(&mut self.hdr_buf);
        if peer == self.rank {
            let mut msg = Vec::with_capacity(hlen + body.len());
            msg.extend_from_slice(&self.hdr_buf[..hlen]);
            msg.extend_from_slice(body);
            self.loopback.push_back((msg, waiter));
            return Ok(false);
        }
        if self.dead[peer as usize] {
            return Err(Error::PeerUnreachable { rank: peer });
        }
        // Replies and the internal collective's messages are not operations
        // a later direct access (shm) or a get still waiting for its window
        // (UDP) must keep order with.
        let ordered = match repr {
            OpRepr::OpStatus(_) | OpRepr::AtomicResponse(_) | OpRepr::GetResponse(_) => false,
            OpRepr::AmRequest(am) => am.handler < crate::internal::RESERVED_HANDLER_BASE,
            _ => true,
        };
        if self.is_shm_peer(peer) {
            let hdr = std::mem::take(&mut self.hdr_buf);
            let sent = self.shm_send(peer, &[&hdr[..hlen], body], waiter, ordered);
            self.hdr_buf = hdr;
            return sent.map(|()| false);
        }
        // A get request toward a UDP peer comes only from the window, in
        // order; anything else issued while a get waits there waits behind it.
        if ordered && !matches!(repr, OpRepr::GetRequest(_)) && self.gets.must_hold(peer) {
            self.hold_behind_gets(peer, hlen, body, waiter);
            return Ok(false);
        }
        match self.proto.submit(now, peer, &[&self.hdr_buf[..hlen], body]) {
            Ok(id) => {
                if let Some(w) = waiter {
                    self.ack_waiters[peer as usize].push_back((id.0, w));
                }
                Ok(true)
            }
            Err(error) => Err(submit_error(error, peer, self.size)),
        }
    }

    #[cold]
    fn hold_behind_gets(&mut self, peer: u32, hlen: usize, body: &[u8], waiter: Option<RequestId>) {
        let mut msg = Vec::with_capacity(hlen + body.len());
        msg.extend_from_slice(&self.hdr_buf[..hlen]);
        msg.extend_from_slice(body);
        self.gets.hold(peer, crate::get_window::HeldOp { msg, waiter });
    }

    /// Rank 0 sends completed internal gathers to the others.
    fn internal_progress(&mut self, now: ProtoInstant) {
        for (seq, body) in std::mem::take(&mut self.internal.outgoing) {
            for peer in 1..self.size {
                let repr = internal_am(crate::internal::HANDLER_RESULT, seq);
                if self.send_op(now, peer, &repr, &body, None).is_err() {
                    self.internal.peer_failed(peer);
                }
            }
        }
    }

    fn drain_events(&mut self, now: ProtoInstant) -> bool {
        let mut worked = false;
        while let Some(event) = self.proto.poll_event() {
            worked = true;
            match event {
                mw_proto::Event::Acked { peer, upto } => {
                    let waiters = &mut self.ack_waiters[peer as usize];
                    while waiters.front().is_some_and(|(id, _)| *id <= upto.0) {
                        let (_, req) = waiters.pop_front().expect("front checked");
                        if let Some(c) = self.requests.part_done(req) {
                            self.completions.push(c);
                        }
                    }
                }
                mw_proto::Event::PeerDead { peer } => {
                    let error = Error::PeerUnreachable { rank: peer };
                    // Its requests are failed below, with everything else toward it.
                    let _ = self.gets.clear_peer(peer);
                    self.dead[peer as usize] = true;
                    self.peer_events.push_back(PeerEvent::Down { rank: peer });
                    self.ack_waiters[peer as usize].clear();
                    let done = self.requests.fail_target(peer, &error);
                    self.completions.extend(done);
                    self.internal.peer_failed(peer);
                }
                mw_proto::Event::PeerRestarted { peer, .. } => {
                    // Everything outstanding toward the peer was addressed to
                    // its old incarnation: its regions and keys died with it
                    // (a restarted process allocates new, random keys), and a
                    // get or fetching atomic it had accepted will never be
                    // answered. Fail them all rather than let a caller hang;
                    // operations issued from now on use the new connection.
                    self.dead[peer as usize] = false;
                    self.peer_events.push_back(PeerEvent::Restarted { rank: peer });
                    let error = Error::PeerUnreachable { rank: peer };
                    let _ = self.gets.clear_peer(peer);
                    self.ack_waiters[peer as usize].clear();
                    let done = self.requests.fail_target(peer, &error);
                    self.completions.extend(done);
                    self.internal.peer_failed(peer);
                }
                mw_proto::Event::Raw { peer, data } => self.msg.raw.push(peer, data),
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }
        if !self.completions.is_empty() {
            self.after_delivery(now);
        }
        worked
    }

    /// Runs `body` with messages to the protocol held back, then transmits
    /// them together: what a batch of received datagrams or a round of get
    /// requests sets off leaves as one batch of datagrams (GSO runs), not
    /// one system call each. Nested holds transmit once, at the outermost.
    pub(crate) fn with_transmit_held<R>(&mut self, now: ProtoInstant, body: impl FnOnce(&mut State) -> R) -> R {
        let outer = !std::mem::replace(&mut self.hold_transmit, true);
        let result = body(self);
        if outer {
            self.hold_transmit = false;
            self.transmit(now);
        }
        result
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
