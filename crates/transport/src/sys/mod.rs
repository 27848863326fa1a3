//! The unsafe island: every system call and raw C structure this crate uses.
//!
//! Owns: thin wrappers over `sendto`, `sendmsg`, `recvfrom`, `recvmsg`, `sendmmsg`,
//! `recvmmsg`, socket options (buffer sizes, UDP GSO/GRO), `ppoll`,
//! `sched_yield`, `sched_getcpu` and CPU affinity, plus the conversions between `std::net::SocketAddr` and
//! `sockaddr_storage`. Each wrapper turns `-1`/`errno` into `io::Error`, so
//! the rest of the crate is safe code and can `#![deny(unsafe_code)]`.
//!
//! Must not: decide policy (when to batch, when to fall back, how long to
//! spin). Those choices live in `udp.rs` and `wait.rs`, where they can be read
//! and tested without thinking about pointers.
//!
//! Linux only: GSO/GRO and `*mmsg` are Linux interfaces.

mod addr;
mod mmsg;
mod poll;
mod single;
mod sockopt;

pub(crate) use mmsg::OutDatagram;
pub(crate) use mmsg::{RecvScratch, SendGroup, SendScratch};
pub(crate) use poll::{allowed_cpus, confine_to, current_cpu, nudge_to_cpu, ppoll_readable, yield_cpu, PollFds};
pub(crate) use single::{recv_from, recv_split, send_parts, send_to};
pub(crate) use sockopt::{enable_gro, probe_gso, set_buffer_sizes, BufferSizes};

use std::io;

/// `ENOBUFS` means the device queue or the socket's send buffer is full right
/// now; for a datagram sender that is the same situation as `EAGAIN`, so both
/// become `WouldBlock` and the caller retries after the next wait.
fn map_send_error(err: io::Error) -> io::Error {
    match err.raw_os_error() {
        Some(libc::ENOBUFS) => io::Error::new(io::ErrorKind::WouldBlock, err),
        _ => err,
    }
}

/// Converts a C return value into `io::Result`, reading `errno` on `-1`.
fn check(ret: libc::ssize_t) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}
