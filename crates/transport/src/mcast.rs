//! IPv4 multicast: the receiving socket of a rank's multicast groups, and
//! the options that let the ordinary UDP socket send to a group.
//!
//! Owns: [`McastSocket`] (bound to a port shared by every rank of the job on
//! a host, joined to groups on the interface the data path uses) and
//! [`UdpTransport::enable_multicast_send`]. Sending to a group is an
//! ordinary `send_to` on the data path's socket, so whatever wraps it (fault
//! injection, retries) applies to multicast too.
//!
//! Must not: interpret datagrams, pick group addresses or ports, or decide
//! what happens when multicast does not work (the caller falls back); every
//! failure is reported as the `io::Error` the kernel gave.
//!
//! Socket choices, all Linux:
//! - `SO_REUSEADDR`, so that several ranks of one host (or one process) bind
//!   the same port; each socket joined to a group gets its own copy.
//! - `IP_MULTICAST_ALL` off: a socket bound to `0.0.0.0:port` would
//!   otherwise receive every group *any* socket of the host joined on that
//!   port (another job's, say); with it off it gets only its own groups.
//! - Joining names the interface by its address (`IP_ADD_MEMBERSHIP` with
//!   `imr_interface`), so no multicast route is needed to join; sending sets
//!   `IP_MULTICAST_IF` the same way, TTL 1 (the local network only) and
//!   `IP_MULTICAST_LOOP` on (members on the sender's own host, loopback
//!   jobs included, receive it too).

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use socket2::{Domain, Protocol, Socket, Type};

use crate::udp::{UdpConfig, UdpTransport};

/// A nonblocking socket receiving the datagrams of the multicast groups it
/// joined, on one port and one interface. Receiving is [`UdpTransport`]'s
/// (single datagrams, batches, GRO when the kernel has it).
#[derive(Debug)]
pub struct McastSocket {
    udp: UdpTransport,
    port: u16,
    iface: Ipv4Addr,
}

impl McastSocket {
    /// Opens a socket on `0.0.0.0:port` (shared with other sockets of the
    /// host that ask for the same port) that will join groups on the
    /// interface with address `iface` (`0.0.0.0`: the one the kernel routes
    /// the group to), with receive and send buffers of `buffer_bytes`.
    pub fn bind(port: u16, iface: Ipv4Addr, buffer_bytes: usize) -> io::Result<McastSocket> {
        let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_reuse_address(true)?;
        socket.set_multicast_all_v4(false)?;
        socket.set_nonblocking(true)?;
        socket.bind(&SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).into())?;
        let cfg = UdpConfig { socket_buffer_bytes: buffer_bytes, ..UdpConfig::default() };
        Ok(McastSocket { udp: UdpTransport::from_bound(socket, &cfg)?, port, iface })
    }

    /// The port every group is received on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The interface groups are joined on.
    pub fn interface(&self) -> Ipv4Addr {
        self.iface
    }

    /// `(SO_RCVBUF, SO_SNDBUF)` as the kernel reports them.
    pub fn socket_buffer_sizes(&self) -> (usize, usize) {
        self.udp.socket_buffer_sizes()
    }

    /// Starts receiving the datagrams sent to `group` (a multicast address).
    pub fn join(&self, group: Ipv4Addr) -> io::Result<()> {
        if !group.is_multicast() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{group} is not a multicast address")));
        }
        self.udp.socket_ref().join_multicast_v4(&group, &self.iface)
    }

    /// Stops receiving `group`.
    pub fn leave(&self, group: Ipv4Addr) -> io::Result<()> {
        self.udp.socket_ref().leave_multicast_v4(&group, &self.iface)
    }

    /// Datagrams dropped so far because they did not fit the buffer given.
    pub fn truncated_datagrams(&self) -> u64 {
        self.udp.truncated_datagrams()
    }

    /// Receives one datagram into `buf` if one is queued: `Some((len, from))`,
    /// or `None` at once when nothing is; see [`UdpTransport::recv_one`]
    /// (a coalesced GRO buffer is split and served over the next calls).
    pub fn recv_one(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        self.udp.recv_one(buf)
    }
}

impl AsRawFd for McastSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.udp.as_raw_fd()
    }
}

impl AsFd for McastSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.udp.as_fd()
    }
}

impl UdpTransport {
    /// Lets this socket send to IPv4 multicast groups: out of the interface
    /// with address `iface` (`0.0.0.0`: as routed), TTL 1, looped back to
    /// members on this host. Fails on an IPv6 socket.
    pub fn enable_multicast_send(&mut self, iface: Ipv4Addr) -> io::Result<()> {
        let socket = self.socket_ref();
        socket.set_multicast_if_v4(&iface)?;
        socket.set_multicast_ttl_v4(1)?;
        socket.set_multicast_loop_v4(true)
    }
}
