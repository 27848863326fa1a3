//! The UDP transport: one nonblocking socket, single and batched sends and
//! receives, UDP GSO/GRO when the kernel has them.
//!
//! Owns: the socket, its options, the decision of how a batch of datagrams
//! maps onto `sendmmsg` entries and GSO segments, and splitting GRO buffers
//! back into datagrams. Must not: interpret datagram contents, retry on its
//! own (a full socket is reported as `WouldBlock` and the caller decides),
//! or block (every call here is nonblocking; waiting is `wait.rs`'s job).
//!
//! Hot path budget (STYLE habit 8): `send_to`, `send_parts` and `recv_one`
//! are one syscall each and allocate nothing; `send_batch` and `recv_batch` are one
//! syscall per up to [`SEND_CHUNK`] / `recv_batch` datagrams and allocate
//! nothing after `bind`/`new_recv_batch`.

mod gro_stash;
mod plan;
mod recv_batch;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use socket2::{Domain, Protocol, Socket, Type};

use crate::sys;
use gro_stash::GroStash;
use plan::{plan_groups, GsoPolicy};
pub use recv_batch::{RecvBatch, RecvIter};

/// Largest UDP payload over IPv4 on a 1500-byte Ethernet MTU
/// (1500 − 20 IP − 8 UDP): the default datagram size for remote peers.
pub const DEFAULT_PAYLOAD_MTU: usize = 1472;

/// Datagram size used for loopback destinations, where the MTU is 64 KiB.
/// Kept below the IPv4 maximum ([`MAX_UDP_PAYLOAD`]) to leave room for
/// headers a future protocol version may add.
pub const LOOPBACK_PAYLOAD_MTU: usize = 65_000;

/// Largest payload one IPv4 UDP datagram can carry (65535 − 20 − 8).
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// Largest payload of one IPv6 UDP datagram without jumbograms (65535 − 8).
const MAX_UDP6_PAYLOAD: usize = 65_527;

/// Size of a GRO receive buffer: the kernel coalesces up to 64 KiB.
const GRO_BUFFER_LEN: usize = 65_536;

/// Datagrams per `sendmmsg` call in `send_batch` (longer batches take
/// several calls). 64 keeps the preallocated header arrays small and is
/// the kernel's classic GSO segment limit.
pub const SEND_CHUNK: usize = 64;

/// Most segments in one GSO send. Linux accepted 64 (`UDP_MAX_SEGMENTS`)
/// until 6.9 raised it to 128; 64 works on every kernel with GSO.
const GSO_MAX_SEGMENTS: usize = 64;

/// Upper bound on `recv_batch`: `recvmmsg` rejects more than `UIO_MAXIOV`.
const MAX_RECV_BATCH: usize = 1024;

/// Settings for [`UdpTransport::bind`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpConfig {
    /// Largest datagram to send to a remote host (default 1472, one
    /// Ethernet frame). The protocol sizes its packets from
    /// [`UdpConfig::payload_mtu_for`].
    pub payload_mtu: usize,
    /// Largest datagram the receive path accepts: the size of each receive
    /// slot. Longer datagrams are dropped and counted in
    /// [`UdpTransport::truncated_datagrams`]. Default [`MAX_UDP_PAYLOAD`]
    /// so loopback peers may send [`LOOPBACK_PAYLOAD_MTU`]-sized datagrams;
    /// with GRO the slots are 64 KiB regardless.
    pub max_datagram: usize,
    /// Slots per [`RecvBatch`], i.e. datagrams (or GRO buffers) per
    /// `recvmmsg` (default 32).
    pub recv_batch: usize,
    /// Requested `SO_RCVBUF`/`SO_SNDBUF` (default 4 MiB): large enough to
    /// absorb a burst from many peers while the owner is computing.
    pub socket_buffer_bytes: usize,
    /// Use UDP GSO for batches of equal-sized datagrams to one destination
    /// when the kernel supports it (default true; probed at bind).
    pub gso: bool,
    /// Let the kernel coalesce received datagrams (default true; probed).
    pub gro: bool,
}

impl Default for UdpConfig {
    fn default() -> Self {
        Self {
            payload_mtu: DEFAULT_PAYLOAD_MTU,
            max_datagram: MAX_UDP_PAYLOAD,
            recv_batch: 32,
            socket_buffer_bytes: 4 << 20,
            gso: true,
            gro: true,
        }
    }
}

impl UdpConfig {
    /// The datagram size to use toward `dst`: [`LOOPBACK_PAYLOAD_MTU`] for
    /// loopback addresses (capped by `max_datagram`, since the peer is
    /// assumed to run the same configuration), `payload_mtu` otherwise.
    pub fn payload_mtu_for(&self, dst: IpAddr) -> usize {
        if dst.to_canonical().is_loopback() {
            LOOPBACK_PAYLOAD_MTU.min(self.max_datagram).max(self.payload_mtu)
        } else {
            self.payload_mtu
        }
    }

    fn validate(&self) -> io::Result<()> {
        let invalid = |what: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, what.to_owned()));
        if !(1..=MAX_UDP6_PAYLOAD).contains(&self.payload_mtu) {
            return invalid("UdpConfig::payload_mtu must be in 1..=65527");
        }
        if !(1..=(1 << 20)).contains(&self.max_datagram) {
            return invalid("UdpConfig::max_datagram must be in 1..=1 MiB");
        }
        if !(1..=MAX_RECV_BATCH).contains(&self.recv_batch) {
            return invalid("UdpConfig::recv_batch must be in 1..=1024");
        }
        Ok(())
    }
}

/// A nonblocking UDP socket with batched I/O. One thread drives it at a time
/// (`&mut self` everywhere); it is `Send` so a progress thread can own it.
#[derive(Debug)]
pub struct UdpTransport {
    socket: Socket,
    local_addr: SocketAddr,
    cfg: UdpConfig,
    gso: GsoPolicy,
    gro: bool,
    buffers: sys::BufferSizes,
    send_scratch: sys::SendScratch,
    groups: Vec<sys::SendGroup>,
    /// Datagrams left over from a GRO buffer that `recv_one` split; `None`
    /// when GRO is off.
    stash: Option<GroStash>,
    truncated: u64,
    io: IoCounts,
}

/// How many datagrams went through how many system calls, counted by
/// [`UdpTransport`] (`MW_STATS`: datagrams per call tells whether batching,
/// GSO and GRO work on a path).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IoCounts {
    /// Send calls that sent something (`sendto`, `sendmsg`, `sendmmsg`).
    pub send_calls: u64,
    /// Datagrams those calls sent (a GSO send counts its segments).
    pub datagrams_sent: u64,
    /// Receive calls that returned something.
    pub recv_calls: u64,
    /// Datagrams those calls returned (a GRO buffer counts its segments).
    pub datagrams_received: u64,
}

impl UdpTransport {
    /// Opens a nonblocking, close-on-exec UDP socket bound to `addr` (port 0
    /// picks a free port), sizes its buffers and probes GSO/GRO.
    pub fn bind(addr: SocketAddr, cfg: &UdpConfig) -> io::Result<Self> {
        cfg.validate()?;
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        Self::from_bound(socket, cfg)
    }

    /// Finishes a nonblocking socket bound by the caller (the multicast
    /// socket sets its own options first): buffers, GSO/GRO probes.
    pub(crate) fn from_bound(socket: Socket, cfg: &UdpConfig) -> io::Result<Self> {
        cfg.validate()?;
        let local_addr = socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bound address is not IP"))?;
        let fd = socket.as_raw_fd();
        let buffers = sys::set_buffer_sizes(fd, cfg.socket_buffer_bytes);
        let gso_max_segments = if cfg.gso && sys::probe_gso(fd) { GSO_MAX_SEGMENTS } else { 1 };
        let gro = cfg.gro && sys::enable_gro(fd);
        tracing::debug!(
            %local_addr,
            gso = gso_max_segments > 1,
            gro,
            rcvbuf = buffers.recv,
            sndbuf = buffers.send,
            "udp transport bound"
        );
        Ok(Self {
            socket,
            local_addr,
            gso: GsoPolicy { max_segments: gso_max_segments, payload_mtu: cfg.payload_mtu },
            gro,
            buffers,
            send_scratch: sys::SendScratch::new(SEND_CHUNK),
            groups: Vec::with_capacity(SEND_CHUNK),
            stash: gro.then(|| GroStash::new(GRO_BUFFER_LEN)),
            truncated: 0,
            io: IoCounts::default(),
            cfg: cfg.clone(),
        })
    }

    /// The socket itself, for option setters elsewhere in this crate.
    pub(crate) fn socket_ref(&self) -> &Socket {
        &self.socket
    }

    /// The address the socket is bound to (with the real port if 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The configuration the transport was bound with.
    pub fn config(&self) -> &UdpConfig {
        &self.cfg
    }

    /// Whether batches may use UDP GSO (probed at bind; turned off for good
    /// if the kernel later reports the device cannot offload).
    pub fn gso_enabled(&self) -> bool {
        self.gso.max_segments > 1
    }

    /// Whether the kernel may coalesce received datagrams (probed at bind).
    pub fn gro_enabled(&self) -> bool {
        self.gro
    }

    /// `(SO_RCVBUF, SO_SNDBUF)` as the kernel reports them after bind (Linux
    /// reports twice the usable size).
    pub fn socket_buffer_sizes(&self) -> (usize, usize) {
        (self.buffers.recv, self.buffers.send)
    }

    /// Datagrams and system calls so far.
    pub fn io_counts(&self) -> IoCounts {
        self.io
    }

    /// Datagrams dropped so far because they did not fit the receive buffer.
    pub fn truncated_datagrams(&self) -> u64 {
        self.truncated
    }

    /// Size of each receive slot: `max_datagram`, or 64 KiB with GRO, since a
    /// coalesced buffer cut short would lose whole datagrams.
    pub fn recv_slot_len(&self) -> usize {
        if self.gro {
            self.cfg.max_datagram.max(GRO_BUFFER_LEN)
        } else {
            self.cfg.max_datagram
        }
    }

    /// A receive batch sized for this transport (`recv_batch` slots of
    /// [`recv_slot_len`](Self::recv_slot_len) bytes). Allocate once, reuse.
    pub fn new_recv_batch(&self) -> RecvBatch {
        RecvBatch::new(self.cfg.recv_batch, self.recv_slot_len())
    }

    /// Sends one datagram with one `sendto`. A full socket buffer or device
    /// queue (`EAGAIN`, `ENOBUFS`) is an error of kind `WouldBlock`: nothing
    /// was sent, retry after waiting.
    ///
    /// Loopback caveat (seen on the test machines; measurements:
    /// docs/perf-notes.md, "wait policy"): the kernel may finish
    /// delivering a loopback datagram only once the sending thread enters
    /// the kernel again (any receive poll, `sched_yield`, blocking). A
    /// caller that computes in user space right after sending can delay
    /// its peer by milliseconds; see `wait.rs`.
    pub fn send_to(&mut self, buf: &[u8], dst: SocketAddr) -> io::Result<()> {
        sys::send_to(self.socket.as_raw_fd(), buf, &dst)?;
        self.count_sent(1);
        Ok(())
    }

    fn count_sent(&mut self, datagrams: usize) {
        self.io.send_calls += 1;
        self.io.datagrams_sent += datagrams as u64;
    }

    fn count_received(&mut self, datagrams: usize) {
        self.io.recv_calls += 1;
        self.io.datagrams_received += datagrams as u64;
    }

    /// Sends one datagram made of `parts` concatenated (at most four, e.g. a
    /// header, a payload in two pieces and a trailer) with one `sendmsg`,
    /// without copying them together first: the kernel gathers them as it
    /// copies the datagram in. Errors like [`send_to`](Self::send_to); more
    /// than four parts is `InvalidInput`.
    pub fn send_parts(&mut self, parts: &[&[u8]], dst: SocketAddr) -> io::Result<()> {
        sys::send_parts(self.socket.as_raw_fd(), parts, &dst)?;
        self.count_sent(1);
        Ok(())
    }

    /// Sends `msgs` in order with `sendmmsg`, merging runs of equal-sized
    /// datagrams to one destination into GSO sends when available. Returns
    /// how many leading datagrams were sent; fewer than `msgs.len()` means
    /// the socket filled up (retry the rest later). Errors only when not
    /// even the first datagram could be sent (`WouldBlock` if full).
    pub fn send_batch(&mut self, msgs: &[(SocketAddr, &[u8])]) -> io::Result<usize> {
        self.send_datagrams(msgs)
    }

    /// [`send_batch`](Self::send_batch) for datagrams in pieces (e.g. a
    /// header, a payload lent from a retransmission buffer in up to two
    /// slices, and a trailer), gathered by the kernel: no copy into one
    /// buffer first. Empty pieces are skipped.
    pub fn send_gathered(&mut self, msgs: &[(SocketAddr, [&[u8]; 4])]) -> io::Result<usize> {
        self.send_datagrams(msgs)
    }

    fn send_datagrams<D: sys::OutDatagram>(&mut self, msgs: &[D]) -> io::Result<usize> {
        let mut sent = 0;
        for chunk in msgs.chunks(self.send_scratch.capacity()) {
            match self.send_chunk(chunk) {
                Ok(n) => {
                    sent += n;
                    if n < chunk.len() {
                        break;
                    }
                }
                // The same error will come back on the retry of the rest.
                Err(_) if sent > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    /// One `sendmmsg` for at most `SEND_CHUNK` datagrams, with the GSO
    /// fallbacks: `EIO` (device cannot offload) disables GSO for good,
    /// `EINVAL` (segment above path MTU, or a bad destination) retries this
    /// chunk once without GSO.
    fn send_chunk<D: sys::OutDatagram>(&mut self, chunk: &[D]) -> io::Result<usize> {
        let mut policy = self.gso;
        loop {
            plan_groups(chunk, &policy, &mut self.groups);
            let used_gso = self.groups.iter().any(|g| g.gso_size.is_some());
            match self.send_scratch.send(self.socket.as_raw_fd(), chunk, &self.groups) {
                Ok(0) => return Ok(0),
                Ok(accepted) => {
                    let datagrams = self.groups[accepted - 1].end;
                    self.count_sent(datagrams);
                    return Ok(datagrams);
                }
                Err(e) if used_gso && e.raw_os_error() == Some(libc::EIO) => {
                    self.disable_gso(&e);
                    policy = self.gso;
                }
                Err(e) if used_gso && e.raw_os_error() == Some(libc::EINVAL) => {
                    policy = GsoPolicy::disabled();
                }
                Err(e) => return Err(e),
            }
        }
    }

    #[cold]
    fn disable_gso(&mut self, cause: &io::Error) {
        tracing::warn!(error = %cause, "UDP GSO send failed; falling back to plain sendmmsg");
        self.gso = GsoPolicy::disabled();
    }

    /// Receives up to `batch`'s capacity with one `recvmmsg(MSG_DONTWAIT)`,
    /// splitting GRO buffers into datagrams. Returns the number of datagrams
    /// now in `batch` (0 when nothing was queued; never blocks). Datagrams
    /// left by `recv_one`'s GRO splitting come first, keeping arrival order.
    pub fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        let n = batch.fill(self.socket.as_raw_fd(), self.stash.as_mut(), &mut self.truncated)?;
        if n > 0 {
            self.count_received(n);
        }
        Ok(n)
    }

    /// Receives what one `recvmsg` returns into `buf`: one datagram or, with
    /// GRO, several from one sender coalesced by the kernel, to be cut into
    /// [`RecvSegments::segment`]-byte datagrams in place (no copy, unlike
    /// [`recv_one`](Self::recv_one)'s splitting). `None` at once when nothing
    /// is queued. `buf` should be [`recv_slot_len`](Self::recv_slot_len)
    /// long; a longer message is dropped and counted in
    /// [`truncated_datagrams`](Self::truncated_datagrams). Datagrams held from
    /// an earlier `recv_one` come first, one per call.
    pub fn recv_segments(&mut self, buf: &mut [u8]) -> io::Result<Option<RecvSegments>> {
        let fd = self.socket.as_raw_fd();
        if let Some(stash) = self.stash.as_mut() {
            if let Some((len, from)) = stash.pop_into(buf, &mut self.truncated) {
                return Ok(Some(RecvSegments { len, segment: len, from }));
            }
        }
        loop {
            let Some(rx) = sys::recv_split(fd, buf, &mut [])? else {
                return Ok(None);
            };
            if rx.truncated {
                self.truncated += 1;
                continue;
            }
            let segment = rx.gro_segment.map_or(rx.len, |s| s.min(rx.len));
            let rx = RecvSegments { len: rx.len, segment, from: rx.addr };
            self.count_received(rx.count());
            return Ok(Some(rx));
        }
    }

    /// Receives one datagram into `buf` if one is queued: `Some((len, from))`,
    /// or `None` at once when nothing is. One syscall, no allocation.
    ///
    /// `buf` should hold the largest datagram a peer sends; a longer one is
    /// dropped and counted in [`truncated_datagrams`](Self::truncated_datagrams).
    /// With GRO, one receive may return several coalesced datagrams: the
    /// first is returned and the rest are kept (copied out of `buf`) for the
    /// next calls, which then make no syscall.
    pub fn recv_one(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        let fd = self.socket.as_raw_fd();
        let Some(stash) = self.stash.as_mut() else {
            loop {
                match sys::recv_from(fd, buf)? {
                    Some((len, from)) if len <= buf.len() => {
                        self.count_received(1);
                        return Ok(Some((len, from)));
                    }
                    Some(_) => self.truncated += 1,
                    None => return Ok(None),
                }
            }
        };
        loop {
            if let Some(held) = stash.pop_into(buf, &mut self.truncated) {
                return Ok(Some(held));
            }
            let Some(rx) = sys::recv_split(fd, buf, stash.spill_mut())? else {
                return Ok(None);
            };
            if rx.truncated {
                self.truncated += 1;
                continue;
            }
            match rx.gro_segment.filter(|&segment| rx.len > segment) {
                None if rx.len <= buf.len() => {
                    self.io.recv_calls += 1;
                    self.io.datagrams_received += 1;
                    return Ok(Some((rx.len, rx.addr)));
                }
                // One datagram, longer than `buf`: its tail went to the spill.
                None => self.truncated += 1,
                Some(segment) if segment > buf.len() => {
                    self.truncated += rx.len.div_ceil(segment) as u64;
                }
                Some(segment) => {
                    let in_buf = rx.len.min(buf.len());
                    stash.load(&buf[segment..in_buf], rx.len - in_buf, segment, rx.addr);
                    self.io.recv_calls += 1;
                    self.io.datagrams_received += rx.len.div_ceil(segment) as u64;
                    return Ok(Some((segment, rx.addr)));
                }
            }
        }
    }
}

/// What one [`UdpTransport::recv_segments`] received: `len` bytes from
/// `from`, made of datagrams of `segment` bytes (the last may be shorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvSegments {
    /// Bytes received.
    pub len: usize,
    /// Size of each datagram but the last (`len` when not coalesced).
    pub segment: usize,
    /// The sender.
    pub from: SocketAddr,
}

impl RecvSegments {
    /// The datagrams in `buf` (the buffer they were received into), in order;
    /// an empty datagram is one empty slice.
    pub fn datagrams<'a>(&self, buf: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        let data = &buf[..self.len];
        let segment = self.segment.max(1);
        let empty = (self.len == 0).then_some(data);
        data.chunks(segment).chain(empty)
    }

    /// How many datagrams [`datagrams`](Self::datagrams) yields.
    pub fn count(&self) -> usize {
        if self.len == 0 {
            1
        } else {
            self.len.div_ceil(self.segment.max(1))
        }
    }
}

impl AsRawFd for UdpTransport {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

impl AsFd for UdpTransport {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_destinations_get_the_large_mtu() {
        let cfg = UdpConfig::default();
        assert_eq!(cfg.payload_mtu_for("127.0.0.1".parse().unwrap()), LOOPBACK_PAYLOAD_MTU);
        assert_eq!(cfg.payload_mtu_for("::1".parse().unwrap()), LOOPBACK_PAYLOAD_MTU);
        assert_eq!(cfg.payload_mtu_for("::ffff:127.0.0.1".parse().unwrap()), LOOPBACK_PAYLOAD_MTU);
        assert_eq!(cfg.payload_mtu_for("10.0.0.1".parse().unwrap()), DEFAULT_PAYLOAD_MTU);
        let small = UdpConfig { max_datagram: 9000, ..UdpConfig::default() };
        assert_eq!(small.payload_mtu_for("127.0.0.1".parse().unwrap()), 9000);
    }

    #[test]
    fn nonsense_configs_are_rejected() {
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        for cfg in [
            UdpConfig { recv_batch: 0, ..UdpConfig::default() },
            UdpConfig { payload_mtu: 70_000, ..UdpConfig::default() },
            UdpConfig { max_datagram: 0, ..UdpConfig::default() },
        ] {
            let err = UdpTransport::bind(addr, &cfg).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{cfg:?}");
        }
    }
}
