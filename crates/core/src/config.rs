//! Endpoint configuration: every knob with a default that works, and the one
//! table of `MW_*` environment variables that override them.
//!
//! Owns: parsing and validating the environment. Must not: act on the values
//! (the endpoint does), or read the environment anywhere else.

use std::time::Duration;

use crate::{Error, Result};

/// How incoming operations make progress while the application computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// Only when the application calls into the library. A rank that computes
    /// for longer than `peer_dead_after` without calling memwire looks dead
    /// to peers waiting on it.
    Inline,
    /// Default. The application drives progress whenever it calls memwire; a
    /// light background thread steps in only when it has not for a few
    /// milliseconds, so a computing rank still answers acks, keepalives,
    /// gets and atomics (at millisecond latency) and is never taken for dead.
    /// Costs nothing on the latency path: the thread sleeps while the
    /// application is active.
    Auto,
    /// A background thread blocks on the socket and serves every arrival at
    /// once (passive target at full speed; costs a thread wake-up per burst).
    Thread,
}

/// Which transports the endpoint may use toward peers on its own host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportChoice {
    /// Shared memory with same-host peers, UDP with the others (default).
    Auto,
    /// UDP with everyone (for comparison and tests).
    Udp,
}

/// How same-host peers reach registered user memory (not in a shared mapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShmCopy {
    /// Single copy with `process_vm_writev`/`readv`, falling back to the
    /// rings when the kernel refuses (default).
    Cma,
    /// Always the two-copy path through the rings (the owner executes).
    Rings,
}

/// How a rank writes the chunks of a large message into a same-host
/// receiver's staging area (ranks as processes, messages of 2 MiB and
/// more; `mw_transport::shm::StageCopy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageStores {
    /// Plain stores; non-temporal ones for a while after plain ones ran
    /// slow (the host placed the two CPUs far apart), and the kernel's
    /// copy for a while after those ran slow too (default).
    Auto,
    /// Plain stores only; the kernel's copy for a while after they ran slow.
    Plain,
    /// Non-temporal stores only; the kernel's copy for a while after they
    /// ran slow.
    Streaming,
}

/// Endpoint settings. `Config::default()` is right for a LAN or one host;
/// `Config::from_env()` applies the `MW_*` overrides listed in [`ENV_VARS`].
#[derive(Debug, Clone)]
pub struct Config {
    /// Largest datagram sent (header included). Default 1472 bytes between
    /// hosts; loopback-only jobs use [`Config::loopback_datagram`].
    pub max_datagram: Option<usize>,
    /// Datagram size used when every peer is on loopback.
    pub loopback_datagram: usize,
    /// How long a waiting call busy-polls before yielding the CPU.
    pub spin: Duration,
    /// How long it then yields (sched_yield) before blocking in the kernel.
    pub yield_for: Duration,
    /// Progress mode.
    pub progress: ProgressMode,
    /// Print counters when the endpoint finalizes.
    pub print_stats: bool,
    /// Silence after which a peer we wait on is declared dead. Default
    /// 1.5 s: a killed peer is reported to a waiting survivor within 2 s of
    /// its death, and a live peer is probed every `rto_max` (100 ms) of
    /// silence, so at 20% loss in each direction 15 probes and their answers
    /// would all have to be lost for a false verdict (about 2 in 10 million).
    pub peer_dead_after: Duration,
    /// Longest a blocking call waits for what the library on the other side
    /// owes it: the completion of a put, get or atomic (`Handle::wait`, the
    /// blocking forms), `flush`, `quiet`, an active message's reply, room in
    /// a full send queue, and a push into this rank's own full FIFO. Past
    /// it the call fails with [`Error::Timeout`] (C: `MW_ERR_TIMEOUT`).
    /// Such a wait toward a dead peer ends sooner, with `PeerUnreachable`
    /// after `peer_dead_after`; this bounds the wait whose peer is alive
    /// but whose reply can never come (a connection disturbed by a forged
    /// packet, a bug). Default 60 s: a reply owed by a live peer's progress
    /// engine comes within a few retransmission timeouts (100 ms each at
    /// most) even under heavy loss, and the `Auto` progress mode answers
    /// for a computing peer within milliseconds, so only a wait that can
    /// no longer end reaches it. `None` (`MW_OP_TIMEOUT_MS=0`): no deadline.
    ///
    /// Waits paced by another rank's *application* (receives, probes,
    /// FIFO pops and pushes into another rank's full FIFO, barriers and
    /// collectives) are bounded by [`wait_timeout`](Self::wait_timeout)
    /// instead. `*_timeout` forms (`recv_timeout`, `probe_timeout`,
    /// `Fifo::pop_timeout`, `fifo_push_timeout`, `wait_until_timeout`,
    /// `recv_raw_timeout`, `Handle::wait_timeout`,
    /// `RecvHandle::wait_timeout`) take a deadline of the caller's.
    pub op_timeout: Option<Duration>,
    /// Longest wait paced by another rank's application: a receive or probe
    /// for a message not yet sent, a FIFO pop from an empty FIFO or a push
    /// into another rank's full one, `Endpoint::barrier`, and a team's
    /// collectives, which wait for the slowest member. Past it the call
    /// fails with [`Error::Timeout`]. Default `None` (`MW_WAIT_TIMEOUT_MS`
    /// unset or 0): such a wait ends when the awaited rank acts or is
    /// declared dead (`peer_dead_after`), never on a clock, because ranks
    /// legitimately compute for minutes between matching calls; a job that
    /// wants every wait bounded sets it. What a timeout leaves: a receive
    /// is cancelled (nothing lands in its buffer afterwards; the sender of
    /// a large message being pulled gets `Cancelled`), a team collective
    /// leaves its team broken (`TeamBroken`), `Endpoint::barrier` stays in
    /// progress and the next call continues it. Without either deadline
    /// (each has a `*_timeout` form or an end of its own): `wait_until`,
    /// `recv_raw` (raw datagrams may be lost by definition), the handle of
    /// a send, which completes when the receiver takes the message, and a
    /// blocking rendezvous send (both end with `Cancelled` when the receive
    /// gives up, and with `PeerUnreachable` when the peer dies).
    pub wait_timeout: Option<Duration>,
    /// Probe idle peers every quarter of `peer_dead_after`, so a peer that
    /// dies is noticed even when nothing is outstanding toward it (e.g. while
    /// waiting for it in a collective). Default on.
    pub keepalive: bool,
    /// Floor of the retransmission timeout.
    pub rto_min: Duration,
    /// A receiver acknowledges at least every this many in-order packets
    /// (`mw_proto::Config::ack_every`; default 32: about one ack per 45 KB
    /// of LAN datagrams, one per two or three GRO buffers). Senders assume
    /// their peers use the same value.
    pub ack_every: u32,
    /// Share of a round trip's packets (percent) that may be lost without
    /// shrinking the congestion window, while the RTT shows no queue
    /// (`mw_proto::Config::loss_tolerance_pct`; default 10). `0` halves
    /// the window on every loss event, as TCP Reno does.
    pub loss_tolerance_pct: u32,
    /// Bytes queued toward one peer before a new operation waits for room.
    pub max_queued_bytes: usize,
    /// Over UDP, how far a put may copy ahead of what the protocol's window
    /// lets out (the queue bound for one-sided operations toward UDP peers is
    /// the smaller of this and `max_queued_bytes`), and how much beyond that
    /// window a get asks one peer for. Bytes copied into the send queue are
    /// copied again by the kernel when they go out; a short queue keeps them
    /// in the cache until then. Measured on loopback (docs/performance.md):
    /// 1 MiB puts ran at ~4.6 GB/s with 8 MiB of copy-ahead, ~7.4 GB/s with
    /// 64 KiB.
    pub copy_ahead_bytes: usize,
    /// Largest message an operation is cut into (puts and gets of any size
    /// are split into messages of at most this many bytes).
    pub chunk_bytes: usize,
    /// Tagged messages to a peer on another host (over UDP) up to this many
    /// bytes travel eagerly (data in the message); larger ones use the
    /// receiver-driven rendezvous (the receiver GETs the data into the
    /// posted buffer). Also the inline limit of active-message payloads and
    /// replies. Default 64 KiB: over UDP the rendezvous copies as often as
    /// an eager message and costs a round trip more (measured on loopback:
    /// a 32 KiB ping-pong took 28 µs through the rendezvous, 15 µs eagerly).
    pub eager_limit: usize,
    /// The same limit between ranks of one host (shared memory); `None`
    /// (default) picks it per peer. There an eager message is copied twice
    /// (into the peer's ring and out of it) and a rendezvous once (straight
    /// from the sender's buffer): 16 KiB toward a rank that is a thread of
    /// this process (the copy is a `memcpy`) or another process where the
    /// kernel's cross-memory copy is cheap, 64 KiB toward another process
    /// where it costs more than two `memcpy`s (measured once per endpoint,
    /// `mw_transport::shm::kernel_copy_is_costly`).
    pub shm_eager_limit: Option<usize>,
    /// Bytes of this rank's unexpected-message buffer each sender may fill
    /// (the credit a sender starts with; each eager message costs its length
    /// plus 64, each rendezvous announcement 64). Raised to at least
    /// `2 × (eager limit + 64)` (the largest limit any peer may get) so a
    /// sender can always make progress.
    pub unexpected_credit: usize,
    /// Local address to bind; `None` picks one that reaches the bootstrap host.
    pub bind_addr: Option<std::net::IpAddr>,
    /// UDP ports to bind within, inclusive (`MW_PORT_RANGE`), so a firewall
    /// can let exactly those through; `None`: any port the kernel picks.
    pub port_range: Option<(u16, u16)>,
    /// Fault injection on the send path (`MW_FAULT_*`), for tests. It
    /// applies to multicast segments too (to the group: a loss every member
    /// sees; repairs: one member's).
    pub fault: Option<mw_transport::fault::FaultConfig>,
    /// Probability that a member drops a datagram arriving from a multicast
    /// group (`MW_FAULT_MCAST_DROP`), for tests: losses independent per
    /// member (the send-path faults hit every member alike); 1 makes the
    /// group deliver nothing at all.
    pub mcast_drop: f64,
    /// UDP port of the job's IP multicast groups (`MW_MCAST_PORT`); `None`:
    /// derived from the job id, in 61000-64999. Every rank must agree.
    pub mcast_port: Option<u16>,
    /// Default collective algorithms of new teams (`MW_COLL_*`).
    pub coll: crate::coll::CollTuning,
    /// Packet authentication (a 16-byte keyed-BLAKE3 MAC on every packet,
    /// keyed by the job key). `None` (default) decides per job: on unless
    /// every rank's address is a loopback address, i.e. on whenever packets
    /// cross a network. `Some(true)`/`Some(false)` force it (`MW_AUTH=1|0`).
    /// Every rank must decide alike; the automatic rule does, since all ranks
    /// see the same address table.
    pub auth: Option<bool>,
    /// Packet checksums (a 4-byte CRC32C on every packet, verified before
    /// anything else is read) when authentication is off, so a packet
    /// corrupted on the way is dropped even when the UDP checksum missed it
    /// (a middlebox that rewrote and re-checksummed it, or a 1-in-65536
    /// collision). `None` (default) decides like [`Config::auth`]: on unless
    /// every rank is on loopback (the kernel's loopback does not corrupt, and
    /// latency is kept). `Some(true)`/`Some(false)` force it (`MW_CHECKSUM=1|0`).
    /// Never used with authentication, whose MAC already detects corruption.
    /// Every rank must decide alike.
    pub checksum: Option<bool>,
    /// Shared memory with same-host peers, or UDP only.
    pub transport: TransportChoice,
    /// Path to registered user memory of same-host peers.
    pub shm_copy: ShmCopy,
    /// How large messages are written into a same-host receiver's staging
    /// area (`MW_SHM_STAGE_STORES`).
    pub stage_stores: StageStores,
    /// How long `wait_until` busy-polls a word written by same-host peers
    /// before it falls back to the progress loop (and eventually sleeps).
    pub shm_spin: Duration,
    /// The CPUs the library's own threads (the progress thread, the `Auto`
    /// watchdog) run on; `None` leaves them the process's affinity. mwrun
    /// sets it (`MW_BACKGROUND_CPUS`) to every CPU of the job on its host
    /// when it binds each rank to a share of them: a rank's progress thread
    /// then runs where a CPU is free instead of taking turns with the
    /// rank's own thread on its one CPU.
    pub background_cpus: Option<Vec<u32>>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_datagram: None,
            loopback_datagram: 65_000,
            // Measured on these VMs (see mw-transport's wait.rs): spinning
            // gains ~1 µs per round trip but can stall loopback delivery and
            // starves oversubscribed ranks; yielding, then blocking, does not.
            spin: Duration::ZERO,
            yield_for: Duration::from_micros(100),
            progress: ProgressMode::Auto,
            print_stats: false,
            peer_dead_after: Duration::from_millis(1500),
            op_timeout: Some(Duration::from_secs(60)),
            wait_timeout: None,
            keepalive: true,
            rto_min: Duration::from_micros(500),
            ack_every: mw_proto::Config::default().ack_every,
            loss_tolerance_pct: mw_proto::Config::default().loss_tolerance_pct,
            max_queued_bytes: 8 << 20,
            copy_ahead_bytes: 64 << 10,
            chunk_bytes: 256 << 10,
            eager_limit: 64 << 10,
            shm_eager_limit: None,
            unexpected_credit: 256 << 10,
            bind_addr: None,
            port_range: None,
            fault: None,
            mcast_port: None,
            mcast_drop: 0.0,
            coll: crate::coll::CollTuning::default(),
            auth: None,
            checksum: None,
            transport: TransportChoice::Auto,
            shm_copy: ShmCopy::Cma,
            stage_stores: StageStores::Auto,
            shm_spin: Duration::from_micros(1000),
            background_cpus: None,
        }
    }
}

/// The environment variables the endpoint reads, with what each does.
pub const ENV_VARS: &[(&str, &str)] = &[
    ("MW_MTU", "largest datagram in bytes (default 1472 between hosts, 65000 on loopback)"),
    ("MW_SPIN_US", "busy-poll time before yielding the CPU, microseconds (default 0)"),
    ("MW_YIELD_US", "time spent yielding before blocking, microseconds (default 100)"),
    (
        "MW_PROGRESS",
        "'auto' (default: a background thread steps in when the application is busy), 'inline' or 'thread'",
    ),
    ("MW_KEEPALIVE", "0 turns off probing of idle peers (default on, every MW_PEER_DEAD_MS / 4)"),
    ("MW_STATS", "1 prints per-endpoint counters at finalize"),
    ("MW_PEER_DEAD_MS", "silence before a peer is declared unreachable, ms (default 1500)"),
    (
        "MW_OP_TIMEOUT_MS",
        "longest wait for a reply a live peer's library owes (completions, flush, quiet, AM replies), ms; then Timeout (default 60000, 0: none)",
    ),
    (
        "MW_WAIT_TIMEOUT_MS",
        "longest wait paced by another rank's application (receives, probes, FIFO pops, barriers, collectives), ms; then Timeout (default none: until the rank acts or dies)",
    ),
    ("MW_RTO_MIN_US", "retransmission timeout floor, microseconds (default 500)"),
    ("MW_ACK_EVERY", "acknowledge at least every N in-order packets received, 1-256 (default 32)"),
    (
        "MW_LOSS_TOLERANCE",
        "percent of a round trip's packets that may be lost without shrinking the congestion window while the RTT shows no queue, 0-100 (default 10; 0: halve on every loss event)",
    ),
    ("MW_MAX_QUEUED", "bytes queued toward one peer before senders wait (default 8 MiB)"),
    (
        "MW_COPY_AHEAD",
        "over UDP: bytes a put copies ahead of the send window, and a get asks for beyond it (default 64 KiB)",
    ),
    ("MW_CHUNK", "largest message an operation is cut into, bytes (default 256 KiB)"),
    (
        "MW_EAGER_LIMIT",
        "largest tagged message sent eagerly, bytes (default 65536 over UDP; over shared memory see MW_SHM_EAGER_LIMIT; sets both); larger ones use rendezvous",
    ),
    (
        "MW_SHM_EAGER_LIMIT",
        "the eager limit between ranks of one host alone, bytes (default 16384, or 65536 toward other processes where the kernel's cross-memory copy is slow)",
    ),
    ("MW_UNEXPECTED_CREDIT", "unexpected-message buffer bytes per sender (default 256 KiB)"),
    ("MW_BIND", "local IP address to bind (default: the one that reaches the bootstrap host)"),
    ("MW_PORT_RANGE", "UDP ports to bind within, FIRST-LAST, one per rank on a host (default: any)"),
    ("MW_AUTH", "1 forces packet authentication on, 0 off (default: on unless every rank is on loopback)"),
    (
        "MW_CHECKSUM",
        "1 forces a CRC32C on every packet when authentication is off, 0 none (default: on unless every rank is on loopback)",
    ),
    (
        "MW_TRANSPORT",
        "'auto' (default: shared memory with same-host peers, UDP across hosts) or 'udp' (UDP with everyone)",
    ),
    (
        "MW_SHM_COPY",
        "'cma' (default: process_vm_readv/writev into peers' registered memory) or 'ring' (two-copy fallback)",
    ),
    (
        "MW_SHM_STAGE_STORES",
        "how a large message is written into a same-host receiver's staging area: 'auto' (default: plain stores, non-temporal ones while plain ones run slow), 'plain' or 'streaming'",
    ),
    (
        "MW_SHM_SPIN_US",
        "how long wait_until polls a shared-memory word before the progress loop takes over, microseconds (default 1000)",
    ),
    (
        "MW_BACKGROUND_CPUS",
        "CPUs the library's own threads may run on, a list like 0-3,6 (mwrun sets it to the job's CPUs on the host when it binds ranks)",
    ),
    (
        "MW_FAULT_DROP / MW_FAULT_DUP / MW_FAULT_REORDER / MW_FAULT_SEED",
        "fault injection on the UDP send path (tests); makes UDP the default transport unless MW_TRANSPORT is set",
    ),
    (
        "MW_FAULT_MCAST_DROP",
        "probability that a member drops a datagram arriving from a multicast group (tests; 1: the group delivers nothing)",
    ),
    ("MW_COLL_BARRIER", "barrier method: auto, a|all_to_all, b|tree, c|counters, d|multicast, e|dissemination, binomial"),
    ("MW_COLL_BCAST", "broadcast: auto, binomial, scatter_allgather, direct"),
    ("MW_COLL_ALLGATHER", "allgather: auto, ring, recursive_doubling, bruck, direct"),
    ("MW_COLL_ALLTOALL", "alltoall: auto, pairwise, bruck, direct, allgather"),
    ("MW_COLL_ALLREDUCE", "allreduce: auto, recursive_doubling, reduce_scatter_allgather, ring"),
    ("MW_COLL_REDUCE", "reduce: auto, binomial, reduce_scatter_gather"),
    ("MW_COLL_VECTOR", "allgatherv and alltoallv: auto, exchange, direct"),
    (
        "MW_COLL_TRIALS",
        "where allgather and alltoall try both single-copy and slot algorithms before keeping one: 1 (default: teams whose single-copy reads are costly), 0 (never), always",
    ),
    (
        "MW_COLL_SPREAD",
        "0: never nudge a thread waiting in a collective onto another CPU (default 1: team members crowded on one CPU are moved apart once)",
    ),
    (
        "MW_MCAST",
        "team multicast: auto (IP multicast where the network allows it, else the tree), 0|tree, 1|ip (required: creating a group fails without it)",
    ),
    ("MW_MCAST_PORT", "UDP port of the IP multicast groups, the same on every rank (default: from the job id, 61000-64999)"),
];

fn parse_num(name: &'static str, value: &str) -> Result<u64> {
    value.trim().parse::<u64>().map_err(|_| Error::InvalidArgument(name))
}

/// Parses a CPU list as Linux writes one (`0-3,6`): numbers and inclusive
/// ranges, comma-separated, at least one CPU.
fn parse_cpu_list(value: &str) -> Result<Vec<u32>> {
    const BAD: &str = "MW_BACKGROUND_CPUS must be a CPU list like 0-3,6";
    let mut cpus = Vec::new();
    for part in value.trim().split(',') {
        let (first, last) = part.trim().split_once('-').unwrap_or((part.trim(), part.trim()));
        let cpu = |c: &str| c.trim().parse::<u32>().map_err(|_| Error::InvalidArgument(BAD));
        let (first, last) = (cpu(first)?, cpu(last)?);
        if first > last || last - first > 4096 {
            return Err(Error::InvalidArgument(BAD));
        }
        cpus.extend(first..=last);
    }
    Ok(cpus)
}

/// Parses `FIRST-LAST` (or a single port) into an inclusive range.
fn parse_port_range(value: &str) -> Result<(u16, u16)> {
    const BAD: &str = "MW_PORT_RANGE must be FIRST-LAST with 1 <= FIRST <= LAST <= 65535";
    let (first, last) = value.trim().split_once('-').unwrap_or((value.trim(), value.trim()));
    let port = |p: &str| p.trim().parse::<u16>().map_err(|_| Error::InvalidArgument(BAD));
    let (first, last) = (port(first)?, port(last)?);
    if first == 0 || first > last {
        return Err(Error::InvalidArgument(BAD));
    }
    Ok((first, last))
}

impl Config {
    /// Defaults overridden by the process environment.
    pub fn from_env() -> Result<Config> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Defaults overridden through `lookup` (testable without touching the environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let mut cfg = Config::default();
        if let Some(v) = lookup("MW_MTU") {
            let mtu = parse_num("MW_MTU must be a byte count", &v)?;
            if !(256..=65_507).contains(&mtu) {
                return Err(Error::InvalidArgument("MW_MTU must be between 256 and 65507"));
            }
            cfg.max_datagram = Some(mtu as usize);
        }
        if let Some(v) = lookup("MW_SPIN_US") {
            cfg.spin = Duration::from_micros(parse_num("MW_SPIN_US must be microseconds", &v)?);
        }
        if let Some(v) = lookup("MW_YIELD_US") {
            cfg.yield_for = Duration::from_micros(parse_num("MW_YIELD_US must be microseconds", &v)?);
        }
        if let Some(v) = lookup("MW_PROGRESS") {
            cfg.progress = match v.trim() {
                "" | "auto" => ProgressMode::Auto,
                "inline" | "none" => ProgressMode::Inline,
                "thread" => ProgressMode::Thread,
                _ => return Err(Error::InvalidArgument("MW_PROGRESS must be 'auto', 'inline' or 'thread'")),
            };
        }
        if let Some(v) = lookup("MW_KEEPALIVE") {
            cfg.keepalive = !matches!(v.trim(), "0" | "no" | "false" | "off");
        }
        if let Some(v) = lookup("MW_STATS") {
            cfg.print_stats = !matches!(v.trim(), "" | "0" | "no" | "false");
        }
        if let Some(v) = lookup("MW_PEER_DEAD_MS") {
            let ms = parse_num("MW_PEER_DEAD_MS must be milliseconds", &v)?;
            if ms == 0 {
                return Err(Error::InvalidArgument("MW_PEER_DEAD_MS must be positive"));
            }
            cfg.peer_dead_after = Duration::from_millis(ms);
        }
        if let Some(v) = lookup("MW_OP_TIMEOUT_MS") {
            cfg.op_timeout = match v.trim() {
                "none" | "off" => None,
                v => Some(Duration::from_millis(parse_num("MW_OP_TIMEOUT_MS must be milliseconds or 'none'", v)?))
                    .filter(|t| !t.is_zero()),
            };
        }
        if let Some(v) = lookup("MW_WAIT_TIMEOUT_MS") {
            cfg.wait_timeout = match v.trim() {
                "none" | "off" => None,
                v => Some(Duration::from_millis(parse_num("MW_WAIT_TIMEOUT_MS must be milliseconds or 'none'", v)?))
                    .filter(|t| !t.is_zero()),
            };
        }
        if let Some(v) = lookup("MW_RTO_MIN_US") {
            cfg.rto_min = Duration::from_micros(parse_num("MW_RTO_MIN_US must be microseconds", &v)?);
        }
        if let Some(v) = lookup("MW_ACK_EVERY") {
            let every = parse_num("MW_ACK_EVERY must be a packet count", &v)?;
            if !(1..=256).contains(&every) {
                return Err(Error::InvalidArgument("MW_ACK_EVERY must be between 1 and 256"));
            }
            cfg.ack_every = every as u32;
        }
        if let Some(v) = lookup("MW_LOSS_TOLERANCE") {
            let pct = parse_num("MW_LOSS_TOLERANCE must be a percentage", &v)?;
            if pct > 100 {
                return Err(Error::InvalidArgument("MW_LOSS_TOLERANCE must be between 0 and 100"));
            }
            cfg.loss_tolerance_pct = pct as u32;
        }
        if let Some(v) = lookup("MW_MAX_QUEUED") {
            cfg.max_queued_bytes = parse_num("MW_MAX_QUEUED must be a byte count", &v)?.max(64 << 10) as usize;
        }
        if let Some(v) = lookup("MW_COPY_AHEAD") {
            let bytes = parse_num("MW_COPY_AHEAD must be a byte count", &v)?;
            if !(1024..=(1 << 30)).contains(&bytes) {
                return Err(Error::InvalidArgument("MW_COPY_AHEAD must be between 1 KiB and 1 GiB"));
            }
            cfg.copy_ahead_bytes = bytes as usize;
        }
        if let Some(v) = lookup("MW_CHUNK") {
            let chunk = parse_num("MW_CHUNK must be a byte count", &v)?;
            if !(1024..=(64 << 20)).contains(&chunk) {
                return Err(Error::InvalidArgument("MW_CHUNK must be between 1 KiB and 64 MiB"));
            }
            cfg.chunk_bytes = chunk as usize;
        }
        // An eager limit: a byte count of at most 16 MiB (both messages
        // name the variable, so the caller knows which one to fix).
        let eager_limit = |v: &str, not_a_count: &'static str, too_large: &'static str| -> Result<usize> {
            let limit = parse_num(not_a_count, v)?;
            if limit > 16 << 20 {
                return Err(Error::InvalidArgument(too_large));
            }
            Ok(limit as usize)
        };
        if let Some(v) = lookup("MW_EAGER_LIMIT") {
            let limit =
                eager_limit(&v, "MW_EAGER_LIMIT must be a byte count", "MW_EAGER_LIMIT must be at most 16 MiB")?;
            cfg.eager_limit = limit;
            cfg.shm_eager_limit = Some(limit);
        }
        if let Some(v) = lookup("MW_SHM_EAGER_LIMIT") {
            cfg.shm_eager_limit = Some(eager_limit(
                &v,
                "MW_SHM_EAGER_LIMIT must be a byte count",
                "MW_SHM_EAGER_LIMIT must be at most 16 MiB",
            )?);
        }
        if let Some(v) = lookup("MW_UNEXPECTED_CREDIT") {
            let credit = parse_num("MW_UNEXPECTED_CREDIT must be a byte count", &v)?;
            if credit > u64::from(u32::MAX) {
                return Err(Error::InvalidArgument("MW_UNEXPECTED_CREDIT must be below 4 GiB"));
            }
            cfg.unexpected_credit = credit as usize;
        }
        if let Some(v) = lookup("MW_BIND") {
            cfg.bind_addr =
                Some(v.trim().parse().map_err(|_| Error::InvalidArgument("MW_BIND must be an IP address"))?);
        }
        if let Some(v) = lookup("MW_PORT_RANGE") {
            cfg.port_range = Some(parse_port_range(&v)?);
        }
        if let Some(v) = lookup("MW_FAULT_MCAST_DROP") {
            let p = v.trim().trim_end_matches('%').trim().parse::<f64>().ok();
            let p = p.map(|p| if v.trim().ends_with('%') { p / 100.0 } else { p });
            cfg.mcast_drop = p
                .filter(|p| (0.0..=1.0).contains(p))
                .ok_or(Error::InvalidArgument("MW_FAULT_MCAST_DROP must be a probability (0..1 or N%)"))?;
        }
        if let Some(v) = lookup("MW_MCAST_PORT") {
            let port = v.trim().parse::<u16>().ok().filter(|&p| p != 0);
            cfg.mcast_port = Some(port.ok_or(Error::InvalidArgument("MW_MCAST_PORT must be a port, 1-65535"))?);
        }
        cfg.coll = crate::coll::CollTuning::from_lookup(&lookup)?;
        if let Some(v) = lookup("MW_AUTH") {
            cfg.auth = match v.trim() {
                "" | "auto" => None,
                "1" | "on" | "yes" | "true" => Some(true),
                "0" | "off" | "no" | "false" => Some(false),
                _ => return Err(Error::InvalidArgument("MW_AUTH must be 0, 1 or auto")),
            };
        }
        if let Some(v) = lookup("MW_CHECKSUM") {
            cfg.checksum = match v.trim() {
                "" | "auto" => None,
                "1" | "on" | "yes" | "true" => Some(true),
                "0" | "off" | "no" | "false" => Some(false),
                _ => return Err(Error::InvalidArgument("MW_CHECKSUM must be 0, 1 or auto")),
            };
        }
        if let Some(v) = lookup("MW_TRANSPORT") {
            cfg.transport = match v.trim() {
                "" | "auto" | "shm" => TransportChoice::Auto,
                "udp" => TransportChoice::Udp,
                _ => return Err(Error::InvalidArgument("MW_TRANSPORT must be 'auto' or 'udp'")),
            };
        }
        if let Some(v) = lookup("MW_SHM_COPY") {
            cfg.shm_copy = match v.trim() {
                "" | "cma" => ShmCopy::Cma,
                "ring" | "rings" => ShmCopy::Rings,
                _ => return Err(Error::InvalidArgument("MW_SHM_COPY must be 'cma' or 'ring'")),
            };
        }
        if let Some(v) = lookup("MW_SHM_STAGE_STORES") {
            cfg.stage_stores = match v.trim() {
                "" | "auto" => StageStores::Auto,
                "plain" => StageStores::Plain,
                "streaming" => StageStores::Streaming,
                _ => return Err(Error::InvalidArgument("MW_SHM_STAGE_STORES must be 'auto', 'plain' or 'streaming'")),
            };
        }
        if let Some(v) = lookup("MW_SHM_SPIN_US") {
            cfg.shm_spin = Duration::from_micros(parse_num("MW_SHM_SPIN_US must be microseconds", &v)?);
        }
        if let Some(v) = lookup("MW_BACKGROUND_CPUS").filter(|v| !v.trim().is_empty()) {
            cfg.background_cpus = Some(parse_cpu_list(&v)?);
        }
        let fault = mw_transport::fault::FaultConfig::from_lookup(&lookup)
            .map_err(|_| Error::InvalidArgument("MW_FAULT_* must be probabilities (0..1 or N%)"))?;
        cfg.fault = fault.is_active().then_some(fault);
        // Faults are injected into UDP datagrams; shared memory loses
        // nothing. Someone who asks for loss wants it, so unless they also
        // chose a transport, same-host peers use UDP too.
        if cfg.fault.is_some() && lookup("MW_TRANSPORT").is_none_or(|v| v.trim().is_empty()) {
            cfg.transport = TransportChoice::Udp;
        }
        Ok(cfg)
    }

    /// Whether packets are authenticated in a job whose ranks are all on
    /// loopback (`all_loopback`) or not: [`Config::auth`], or the default rule.
    pub fn auth_enabled(&self, all_loopback: bool) -> bool {
        self.auth.unwrap_or(!all_loopback)
    }

    /// Whether packets carry a CRC32C checksum in a job whose ranks are all
    /// on loopback (`all_loopback`) or not: never with authentication (the
    /// MAC covers corruption), else [`Config::checksum`] or the default rule,
    /// the same as authentication's.
    pub fn checksum_enabled(&self, all_loopback: bool) -> bool {
        !self.auth_enabled(all_loopback) && self.checksum.unwrap_or(!all_loopback)
    }

    /// The protocol's MAC key for this job, when authentication is on.
    pub(crate) fn auth_key(&self, all_loopback: bool, job_key: &[u8; 16]) -> Option<mw_proto::AuthKey> {
        self.auth_enabled(all_loopback).then(|| mw_proto::AuthKey::from_job_key(job_key))
    }

    /// The key that proves epoch changes (`mw_proto::Config::epoch_key`):
    /// in a job on one host without authentication, so that a forged or
    /// corrupted datagram cannot make a live peer look restarted (which
    /// fails every operation toward it). There packets are not checksummed
    /// either and 16 bytes of a 65,000-byte datagram are nothing. Between
    /// hosts it would cost `MW_AUTH=0` runs 1% of every LAN datagram, and
    /// there anyone who can forge can also read the epochs off the wire
    /// (SECURITY.md).
    pub(crate) fn epoch_key(&self, all_loopback: bool, job_key: &[u8; 16]) -> Option<mw_proto::AuthKey> {
        (all_loopback && !self.auth_enabled(all_loopback)).then(|| mw_proto::AuthKey::epoch_proof_from_job_key(job_key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> Result<Config> {
        let map: std::collections::HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn background_cpus_take_a_linux_cpu_list() {
        assert_eq!(with(&[]).unwrap().background_cpus, None);
        assert_eq!(with(&[("MW_BACKGROUND_CPUS", " ")]).unwrap().background_cpus, None);
        let cfg = with(&[("MW_BACKGROUND_CPUS", "0-2, 5,7-7")]).unwrap();
        assert_eq!(cfg.background_cpus, Some(vec![0, 1, 2, 5, 7]));
        for bad in ["3-1", "a", "1,,2", "-1", "0-99999"] {
            assert!(with(&[("MW_BACKGROUND_CPUS", bad)]).is_err(), "{bad}");
        }
    }

    #[test]
    fn stage_stores_are_auto_unless_told() {
        assert_eq!(with(&[]).unwrap().stage_stores, StageStores::Auto);
        for (value, stores) in
            [("auto", StageStores::Auto), ("plain", StageStores::Plain), (" streaming ", StageStores::Streaming)]
        {
            assert_eq!(with(&[("MW_SHM_STAGE_STORES", value)]).unwrap().stage_stores, stores, "{value}");
        }
        assert!(with(&[("MW_SHM_STAGE_STORES", "nt")]).is_err());
    }

    #[test]
    fn defaults_and_overrides() {
        let cfg = with(&[]).unwrap();
        assert_eq!(cfg.progress, ProgressMode::Auto);
        assert!(cfg.keepalive);
        assert_eq!(with(&[("MW_PROGRESS", "inline"), ("MW_KEEPALIVE", "0")]).unwrap().progress, ProgressMode::Inline);
        assert!(!with(&[("MW_KEEPALIVE", "off")]).unwrap().keepalive);
        assert!(with(&[("MW_PROGRESS", "sometimes")]).is_err());
        let cfg = with(&[("MW_PROGRESS", "thread"), ("MW_MTU", "9000"), ("MW_STATS", "1")]).unwrap();
        assert_eq!(cfg.progress, ProgressMode::Thread);
        assert_eq!(cfg.max_datagram, Some(9000));
        assert!(cfg.print_stats);
        let cfg = with(&[("MW_EAGER_LIMIT", "0"), ("MW_UNEXPECTED_CREDIT", "1000")]).unwrap();
        assert_eq!((cfg.eager_limit, cfg.shm_eager_limit, cfg.unexpected_credit), (0, Some(0), 1000));
        assert_eq!((with(&[]).unwrap().eager_limit, with(&[]).unwrap().shm_eager_limit), (64 << 10, None));
        let cfg = with(&[("MW_EAGER_LIMIT", "4096"), ("MW_SHM_EAGER_LIMIT", "100")]).unwrap();
        assert_eq!((cfg.eager_limit, cfg.shm_eager_limit), (4096, Some(100)));
        assert!(with(&[("MW_SHM_EAGER_LIMIT", "17000000")]).is_err() && with(&[("MW_SHM_EAGER_LIMIT", "x")]).is_err());
        assert_eq!(cfg.transport, TransportChoice::Auto);
        assert_eq!(with(&[("MW_TRANSPORT", "udp")]).unwrap().transport, TransportChoice::Udp);
        // Asking for loss means UDP, unless a transport is chosen too.
        assert_eq!(with(&[("MW_FAULT_DROP", "0.05")]).unwrap().transport, TransportChoice::Udp);
        let both = with(&[("MW_FAULT_DROP", "5%"), ("MW_TRANSPORT", "auto")]).unwrap();
        assert_eq!(both.transport, TransportChoice::Auto);
        let cfg = with(&[("MW_TRANSPORT", "udp"), ("MW_SHM_COPY", "ring")]).unwrap();
        assert_eq!((cfg.transport, cfg.shm_copy), (TransportChoice::Udp, ShmCopy::Rings));
    }

    #[test]
    fn op_timeout_is_a_minute_unless_told() {
        assert_eq!(with(&[]).unwrap().op_timeout, Some(Duration::from_secs(60)));
        assert_eq!(with(&[("MW_OP_TIMEOUT_MS", "250")]).unwrap().op_timeout, Some(Duration::from_millis(250)));
        for none in ["0", "none", " off "] {
            assert_eq!(with(&[("MW_OP_TIMEOUT_MS", none)]).unwrap().op_timeout, None, "{none}");
        }
        assert!(matches!(with(&[("MW_OP_TIMEOUT_MS", "soon")]), Err(Error::InvalidArgument(_))));
        assert_eq!(with(&[]).unwrap().wait_timeout, None);
        assert_eq!(with(&[("MW_WAIT_TIMEOUT_MS", "250")]).unwrap().wait_timeout, Some(Duration::from_millis(250)));
        assert_eq!(with(&[("MW_WAIT_TIMEOUT_MS", "0")]).unwrap().wait_timeout, None);
        assert!(matches!(with(&[("MW_WAIT_TIMEOUT_MS", "later")]), Err(Error::InvalidArgument(_))));
        assert_eq!(with(&[]).unwrap().peer_dead_after, Duration::from_millis(1500));
    }

    #[test]
    fn acks_every_32_packets_unless_told() {
        assert_eq!(with(&[]).unwrap().ack_every, 32);
        assert_eq!(with(&[("MW_ACK_EVERY", "8")]).unwrap().ack_every, 8);
        assert_eq!(with(&[]).unwrap().loss_tolerance_pct, 10);
        assert_eq!(with(&[("MW_LOSS_TOLERANCE", "0")]).unwrap().loss_tolerance_pct, 0);
        assert!(with(&[("MW_LOSS_TOLERANCE", "101")]).is_err());
        assert!(with(&[("MW_LOSS_TOLERANCE", "ten")]).is_err());
        for bad in ["0", "257", "many"] {
            assert!(matches!(with(&[("MW_ACK_EVERY", bad)]), Err(Error::InvalidArgument(_))), "{bad}");
        }
    }

    #[test]
    fn bad_values_are_clear_errors() {
        assert!(matches!(with(&[("MW_MTU", "12")]), Err(Error::InvalidArgument(_))));
        assert!(matches!(with(&[("MW_MTU", "big")]), Err(Error::InvalidArgument(_))));
        assert!(matches!(with(&[("MW_PROGRESS", "sometimes")]), Err(Error::InvalidArgument(_))));
        assert!(matches!(with(&[("MW_BIND", "nowhere")]), Err(Error::InvalidArgument(_))));
        assert!(matches!(with(&[("MW_EAGER_LIMIT", "lots")]), Err(Error::InvalidArgument(_))));
        assert!(matches!(with(&[("MW_EAGER_LIMIT", "999999999")]), Err(Error::InvalidArgument(_))));
        for bad in ["0-10", "20-10", "x", "1-70000", "-5"] {
            assert!(matches!(with(&[("MW_PORT_RANGE", bad)]), Err(Error::InvalidArgument(_))), "{bad}");
        }
    }

    #[test]
    fn port_ranges_parse() {
        assert_eq!(with(&[("MW_PORT_RANGE", "40000-40063")]).unwrap().port_range, Some((40000, 40063)));
        assert_eq!(with(&[("MW_PORT_RANGE", " 5000 ")]).unwrap().port_range, Some((5000, 5000)));
        assert_eq!(with(&[]).unwrap().port_range, None);
        assert!(matches!(with(&[("MW_AUTH", "maybe")]), Err(Error::InvalidArgument(_))));
        assert_eq!(with(&[("MW_MCAST_PORT", "62000")]).unwrap().mcast_port, Some(62000));
        assert_eq!(with(&[("MW_FAULT_MCAST_DROP", "5%")]).unwrap().mcast_drop, 0.05);
        assert_eq!(with(&[("MW_FAULT_MCAST_DROP", "1")]).unwrap().mcast_drop, 1.0);
        assert!(with(&[("MW_FAULT_MCAST_DROP", "2")]).is_err());
        for bad in ["0", "70000", "x"] {
            assert!(matches!(with(&[("MW_MCAST_PORT", bad)]), Err(Error::InvalidArgument(_))), "{bad}");
        }
        let tuning = with(&[("MW_MCAST", "0")]).unwrap().coll;
        assert_eq!(tuning.mcast, crate::McastAlgo::Tree);
        assert_eq!(with(&[("MW_MCAST", "1")]).unwrap().coll.mcast, crate::McastAlgo::Ip);
        assert_eq!(with(&[]).unwrap().coll.mcast, crate::McastAlgo::Auto);
        assert!(with(&[("MW_MCAST", "sometimes")]).is_err());
    }

    #[test]
    fn auth_is_on_between_hosts_unless_forced() {
        let auto = with(&[]).unwrap();
        assert!(auto.auth_enabled(false) && !auto.auth_enabled(true));
        let on = with(&[("MW_AUTH", "1")]).unwrap();
        assert!(on.auth_enabled(true) && on.auth_enabled(false));
        let off = with(&[("MW_AUTH", "0")]).unwrap();
        assert!(!off.auth_enabled(true) && !off.auth_enabled(false));
        // Checksums: only without authentication; by default between hosts.
        assert!(!auto.checksum_enabled(true) && !auto.checksum_enabled(false), "auth covers remote peers");
        assert!(off.checksum_enabled(false) && !off.checksum_enabled(true), "MW_AUTH=0 between hosts");
        let forced = with(&[("MW_AUTH", "0"), ("MW_CHECKSUM", "1")]).unwrap();
        assert!(forced.checksum_enabled(true) && forced.checksum_enabled(false));
        let none = with(&[("MW_AUTH", "0"), ("MW_CHECKSUM", "0")]).unwrap();
        assert!(!none.checksum_enabled(true) && !none.checksum_enabled(false));
        assert!(!with(&[("MW_CHECKSUM", "1")]).unwrap().checksum_enabled(false), "never with the MAC");
        assert!(matches!(with(&[("MW_CHECKSUM", "crc")]), Err(Error::InvalidArgument(_))));
        assert!(off.auth_key(false, &[1; 16]).is_none());
        assert_eq!(on.auth_key(true, &[1; 16]), Some(mw_proto::AuthKey::from_job_key(&[1; 16])));
        assert!(matches!(with(&[("MW_TRANSPORT", "carrier-pigeon")]), Err(Error::InvalidArgument(_))));
    }
}
