//! The shared-memory transport inside the endpoint: which peers share this
//! host, the links to them, and how a rank sleeps and is woken.
//!
//! Owns: the same-host decision at init ([`exchange`]: boot id, kernel host
//! name and the launcher's host name must all match; `MW_TRANSPORT=udp`
//! opts out), the per-peer [`Link`] (the peer's control segment mapped
//! here, our outbound ring in it, a cache of the peer's region windows), the
//! ring engine ([`engine`]: routing messages, executing what arrives, acks
//! by consumed position), and the direct one-sided operations ([`direct`]).
//! Must not: touch raw memory itself (mw-transport's `shm` and
//! `region::raw` do) or change what an operation means (target.rs decides,
//! the ring path runs the very same code as UDP).
//!
//! Sleeping and waking. A waiting thread about to block in the kernel adds
//! itself to `sleepers` in its own control block (SeqCst), then polls once
//! more. A peer that made something visible to it (published a ring record,
//! or stored into its memory directly) issues a full fence, reads
//! `sleepers`, and if someone may be asleep sends a 4-byte doorbell datagram
//! to the owner's UDP socket, which the owner's blocking `ppoll` watches.
//! The two fences make it impossible for both to miss each other (Dekker).
//! `sleepers` counts application waits in its high half and the progress
//! thread in its low half: direct stores only wake the former (the progress
//! thread has nothing to do for them), ring records wake both.

pub(crate) mod direct;
pub(crate) mod engine;
mod windows;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mw_transport::shm::{full_fence, Control, RingView};

use crate::config::{Config, ShmCopy, TransportChoice};
use crate::region::PeerWindow;
use crate::{Error, Result};

pub(crate) use engine::ShmState;

/// The doorbell datagram. Real memwire packets are longer than a header,
/// so four bytes can never be mistaken for one.
pub(crate) const DOORBELL: &[u8; 4] = b"MWDB";
const ANY_SLEEPER: u64 = 1 << 32;
const RING_SLEEPER: u64 = 1;

/// Directory flag: the region keeps an arrival log, so peers must go through
/// the owner (it logs what it executes); low bits are the access rights.
pub(crate) const FLAG_LOGGED: u32 = 1 << 8;

pub(crate) use crate::region::KeyHasher;

/// What a peer's region is, as cached here.
#[derive(Debug)]
pub(crate) enum WindowKind {
    /// In a shared mapping: direct loads, stores and atomics.
    Mapped(PeerWindow),
    /// User memory at this address in the peer: `process_vm_*` only.
    Cma { base: u64 },
}

/// A peer's region resolved through its directory.
#[derive(Debug)]
pub(crate) struct CachedWindow {
    /// Directory slot, rechecked on every use.
    pub slot: usize,
    pub len: u64,
    pub kind: WindowKind,
}

/// One same-host peer, as every thread of this endpoint sees it (no lock
/// beyond the window cache's read lock on the hot path).
#[derive(Debug)]
pub(crate) struct Link {
    pub rank: u32,
    pub pid: u32,
    /// Where the peer's lent memory is copied from and to: its process, or
    /// ours when it is another thread of this process.
    pub far: mw_transport::shm::Far,
    /// The peer's control segment (directory, sleepers, its inbound rings).
    pub peer: Control,
    /// Our ring in the peer's segment (its producer lives in `ShmState`).
    pub out: RingView,
    /// The peer's UDP address, for doorbells.
    pub addr: SocketAddr,
    /// Operations (not replies) queued in `ShmState` because the ring was full.
    pub overflow: AtomicUsize,
    /// Ring position just past our last operation (not reply) to the peer.
    pub ordered_end: AtomicU64,
    /// The kernel refused `process_vm_*` toward this peer: use the rings.
    pub cma_refused: AtomicBool,
    /// The peer was declared dead: direct accesses stop (its mapping
    /// outlives it, so a store would "succeed" into a dead process) and go
    /// the ring way, which fails them with `PeerUnreachable`.
    pub dead: AtomicBool,
    /// The peer's index in the host group: its assist slot in our segment.
    pub their_index: usize,
    windows: windows::WindowCache,
}

impl Link {
    /// Whether the peer is known dead or its process is gone, looked up at
    /// most once a millisecond (reading `/proc` costs microseconds): for a
    /// loop that waits on the peer, with `last_check` the time of its last
    /// look.
    pub fn gone_since(&self, last_check: &mut std::time::Instant) -> bool {
        if last_check.elapsed() < Duration::from_millis(1) {
            return false;
        }
        *last_check = std::time::Instant::now();
        self.dead.load(Ordering::Relaxed) || !engine::process_alive(self.pid)
    }

    /// No operation of ours is queued toward the peer or unconsumed in its
    /// ring, so a direct access now cannot overtake an earlier one. Replies
    /// we owe the peer do not count: nothing is ordered after them.
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.overflow.load(Ordering::Acquire) == 0 && self.out.executed() >= self.ordered_end.load(Ordering::Acquire)
    }

    /// Runs `f` on the peer's windows for `keys` with their live directory
    /// flags. `None` when a key is unknown to the directory, was withdrawn
    /// (the stale window is dropped), or `f` declines: the caller then sends
    /// the operation through the ring and the owner decides.
    #[inline]
    pub fn with_windows<const N: usize, R>(
        &self,
        keys: [u64; N],
        f: impl FnOnce([&CachedWindow; N], [u32; N]) -> Option<R>,
    ) -> Option<R> {
        self.windows.with_windows(&self.peer, self.pid, keys, f)
    }

    /// The window of the peer's region `key`, mapped now if no thread has
    /// yet (`None`: the peer has no such region). Whether it may be used
    /// is the caller's to check, against the live directory entry.
    pub fn window(&self, key: u64) -> Option<Arc<CachedWindow>> {
        self.windows.resolve(&self.peer, self.pid, key)
    }
}

/// The shared-memory side of the endpoint that every thread reads without
/// the endpoint lock. Immutable after init except for atomics and the
/// window caches.
#[derive(Debug)]
pub(crate) struct ShmShared {
    /// Our own control segment (directory, sleepers, inbound rings).
    pub own: Control,
    /// By rank: the link to that rank when it shares this host.
    pub links: Vec<Option<Link>>,
    doorbell: UdpSocket,
    pub spin: Duration,
    pub cma: bool,
    /// Direct operations issued (see `CoreStats::shm_direct_ops`).
    pub direct_ops: AtomicU64,
    /// Our index in the host group: our assist slot in peers' segments.
    pub my_index: usize,
    /// Lock-free looks at our inbound rings: a waiter spins on these and
    /// takes the endpoint lock only when a record is there to pop.
    pub inbound: Vec<mw_transport::shm::RingPeek>,
    /// [`mw_transport::shm::kernel_copy_is_costly`], measured once, when
    /// first asked.
    kernel_copy_costly: std::sync::OnceLock<bool>,
}

/// Announced sleep: undone on drop.
#[derive(Debug)]
pub(crate) struct Sleeping<'a> {
    word: &'a std::sync::atomic::AtomicU64,
    unit: u64,
}

impl Drop for Sleeping<'_> {
    fn drop(&mut self) {
        self.word.fetch_sub(self.unit, Ordering::SeqCst);
    }
}

impl ShmShared {
    /// Whether this process's cross-memory copy (`process_vm_readv`) costs
    /// more than two `memcpy`s: measured on first use (~30 µs), then kept
    /// for the endpoint's life, so every decision that depends on it (eager
    /// limits, single-copy collectives) sees the same answer.
    pub fn kernel_copy_is_costly(&self) -> bool {
        *self.kernel_copy_costly.get_or_init(mw_transport::shm::kernel_copy_is_costly)
    }

    /// Whether any inbound ring holds a record not yet popped (a hint).
    #[inline]
    pub fn inbound_pending(&self) -> bool {
        self.inbound.iter().any(|ring| ring.has_pending())
    }

    /// Counts one direct operation. A load and a store, not a locked
    /// increment: this is on the fast path, and a count that may miss
    /// concurrent increments from several threads is good enough.
    #[inline]
    pub fn count_direct(&self) {
        let n = self.direct_ops.load(Ordering::Relaxed);
        self.direct_ops.store(n + 1, Ordering::Relaxed);
    }

    /// The link to `rank`, if it shares this host.
    #[inline]
    pub fn link(&self, rank: u32) -> Option<&Link> {
        self.links.get(rank as usize)?.as_ref()
    }

    /// Announces that a thread of ours is about to block. The caller must
    /// poll once more after this returns, before blocking.
    pub fn announce_sleep(&self, progress_thread: bool) -> Sleeping<'_> {
        let unit = if progress_thread { RING_SLEEPER } else { ANY_SLEEPER };
        let word = self.own.sleepers();
        word.fetch_add(unit, Ordering::SeqCst);
        full_fence();
        Sleeping { word, unit }
    }

    /// After publishing a ring record to `link`'s peer: wake it if asleep.
    pub fn wake_for_ring(&self, link: &Link) {
        full_fence();
        if link.peer.sleepers().load(Ordering::Relaxed) != 0 {
            self.ring_doorbell(link);
        }
    }

    /// After storing directly into `link`'s peer's memory: wake its
    /// application threads if one may be asleep (waiting on that word).
    #[inline]
    pub fn wake_for_store(&self, link: &Link) {
        full_fence();
        self.wake_if_asleep(link);
    }

    /// The second half of [`wake_for_store`](Self::wake_for_store), for a
    /// caller that stored into several peers and then issued one fence
    /// (`full_fence`) for all of them: without that fence in between, a
    /// peer that announced its sleep just now might miss the stores.
    #[inline]
    pub fn wake_if_asleep(&self, link: &Link) {
        if link.peer.sleepers().load(Ordering::Relaxed) >= ANY_SLEEPER {
            self.ring_doorbell(link);
        }
    }

    #[cold]
    fn ring_doorbell(&self, link: &Link) {
        let _ = self.doorbell.send_to(DOORBELL, link.addr);
    }
}

/// What the init exchange produced.
#[derive(Debug)]
pub(crate) struct Setup {
    /// Every rank's UDP address.
    pub peers: Vec<SocketAddr>,
    /// Present when at least one peer shares this host.
    pub shm: Option<(Arc<ShmShared>, ShmState)>,
}

/// Bytes of one inbound ring: room for two of the largest messages.
fn ring_capacity(config: &Config) -> usize {
    let largest = config.chunk_bytes + mw_wire::op::MAX_HEADER_LEN + 64;
    (2 * largest).next_power_of_two().max(64 << 10)
}

fn kernel_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_owned()).unwrap_or_default()
}

/// One rank's first message: where it listens and where it runs.
struct Hello {
    addr: SocketAddr,
    /// `boot id|kernel host|launcher host`, or empty when the rank uses UDP only.
    host: String,
    pid: u32,
}

impl Hello {
    fn encode(&self) -> Vec<u8> {
        format!("{}\n{}\n{}", self.addr, self.pid, self.host).into_bytes()
    }

    fn decode(rank: usize, blob: &[u8]) -> Result<Hello> {
        let bad = || Error::Bootstrap(format!("rank {rank} sent a malformed hello"));
        let text = std::str::from_utf8(blob).map_err(|_| bad())?;
        let mut lines = text.splitn(3, '\n');
        let addr = lines.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        let pid = lines.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        let host = lines.next().unwrap_or("").to_owned();
        Ok(Hello { addr, host, pid })
    }
}

fn gather(boot: &mut mw_bootstrap::Bootstrap, blob: &[u8]) -> Result<Vec<Vec<u8>>> {
    boot.allgather(blob).map_err(|e| Error::Bootstrap(e.to_string()))
}

/// The init exchange, three bootstrap allgathers that every rank makes:
/// hellos (address, pid, host identity); control segment locations of the
/// same-host group; which of them each rank could map. A pair uses shared
/// memory only when both mapped each other, so the choice is symmetric.
pub(crate) fn exchange(boot: &mut mw_bootstrap::Bootstrap, config: &Config, me: SocketAddr) -> Result<Setup> {
    let info = boot.info().clone();
    let rank = info.rank as usize;
    let host = match (config.transport, mw_transport::shm::boot_id()) {
        (TransportChoice::Auto, Some(boot_id)) => format!("{boot_id}|{}|{}", kernel_hostname(), info.host),
        _ => String::new(),
    };
    let hello = Hello { addr: me, host, pid: std::process::id() };
    let hellos = gather(boot, &hello.encode())?
        .iter()
        .enumerate()
        .map(|(r, blob)| Hello::decode(r, blob))
        .collect::<Result<Vec<_>>>()?;
    let peers: Vec<SocketAddr> = hellos.iter().map(|h| h.addr).collect();
    let group: Vec<usize> =
        (0..hellos.len()).filter(|&r| !hello.host.is_empty() && hellos[r].host == hello.host).collect();
    let my_index = group.iter().position(|&r| r == rank);

    // Step 2: our control segment, with one inbound ring per group member.
    let cap = ring_capacity(config);
    let own = if group.len() >= 2 { Control::create(group.len(), cap).ok() } else { None };
    let location = match &own {
        Some(c) => format!("{} {}", c.fd().unwrap_or(-1), c.len()).into_bytes(),
        None => Vec::new(),
    };
    let locations = gather(boot, &location)?;

    // Step 3: map the others' segments; tell everyone which worked.
    let mut mapped: Vec<Option<Control>> = (0..hellos.len()).map(|_| None).collect();
    if own.is_some() {
        for &r in group.iter().filter(|&&r| r != rank) {
            let text = String::from_utf8_lossy(&locations[r]).into_owned();
            let mut words = text.split(' ').map(str::parse::<i64>);
            if let (Some(Ok(fd)), Some(Ok(len))) = (words.next(), words.next()) {
                if let Ok(c) = Control::open_peer(hellos[r].pid, fd as i32, len as usize) {
                    if c.ring_count() == group.len() {
                        mapped[r] = Some(c);
                    }
                }
            }
        }
    }
    let bitmap: Vec<u8> = mapped.iter().map(|m| u8::from(m.is_some())).collect();
    let bitmaps = gather(boot, &bitmap)?;

    let (Some(own), Some(my_index)) = (own, my_index) else {
        return Ok(Setup { peers, shm: None });
    };
    let mut links: Vec<Option<Link>> = (0..hellos.len()).map(|_| None).collect();
    let mut rx = Vec::new();
    for (r, control) in mapped.into_iter().enumerate() {
        let Some(control) = control else { continue };
        if bitmaps[r].get(rank) != Some(&1) {
            continue;
        }
        let their_index = group.iter().position(|&g| g == r).expect("mapped peers are in the group");
        let (Some(out), Some(inbound)) = (control.ring(my_index), own.ring(their_index)) else {
            continue;
        };
        rx.push((r as u32, inbound));
        links[r] = Some(Link {
            rank: r as u32,
            pid: hellos[r].pid,
            far: mw_transport::shm::Far::of(hellos[r].pid),
            peer: control,
            out,
            addr: hellos[r].addr,
            overflow: AtomicUsize::new(0),
            ordered_end: AtomicU64::new(0),
            cma_refused: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            their_index,
            windows: windows::WindowCache::new(),
        });
    }
    if rx.is_empty() {
        return Ok(Setup { peers, shm: None });
    }
    let doorbell = UdpSocket::bind(SocketAddr::new(me.ip(), 0))?;
    doorbell.set_nonblocking(true)?;
    let shared = Arc::new(ShmShared {
        own,
        links,
        doorbell,
        spin: config.shm_spin,
        cma: config.shm_copy == ShmCopy::Cma,
        direct_ops: AtomicU64::new(0),
        inbound: rx.iter().map(|(_, view)| view.peek()).collect(),
        my_index,
        kernel_copy_costly: std::sync::OnceLock::new(),
    });
    let state = ShmState::new(Arc::clone(&shared), rx, hellos.len());
    Ok(Setup { peers, shm: Some((shared, state)) })
}
