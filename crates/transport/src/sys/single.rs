//! Single-datagram send and receive: the latency path, one syscall each, no
//! allocation; and the vectored send of a bulk payload that is not behind
//! its header.
//!
//! Owns: `sendto`, `sendmsg` with a gather list, and `recvfrom`/`recvmsg`
//! with `MSG_DONTWAIT`, turning "nothing queued" into `None` and reporting
//! truncation and GRO segment sizes.
//! Must not: block, retry, or look inside a datagram.

use std::io;
use std::mem::size_of;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use super::addr::{decode_addr, encode_addr, zeroed_storage};
use super::mmsg::{read_gro_cmsg, CmsgBuf, CMSG_BUF_LEN};

/// `sendto(2)` of one datagram. `EAGAIN`/`ENOBUFS` come back as `WouldBlock`.
pub(crate) fn send_to(fd: RawFd, buf: &[u8], dst: &SocketAddr) -> io::Result<()> {
    let mut storage = zeroed_storage();
    let addr_len = encode_addr(dst, &mut storage);
    // SAFETY: `buf` is valid for `buf.len()` bytes of reads; `storage` holds
    // an initialised address of `addr_len` bytes; both outlive the call.
    let ret = unsafe {
        libc::sendto(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            0,
            (&storage as *const libc::sockaddr_storage).cast(),
            addr_len,
        )
    };
    super::check(ret).map(drop).map_err(super::map_send_error)
}

/// Most pieces [`send_parts`] gathers into one datagram.
pub(crate) const MAX_SEND_PARTS: usize = 4;

/// `sendmsg(2)` of one datagram gathered from `parts` (at most
/// [`MAX_SEND_PARTS`]; empty ones are skipped), so a caller can send a header
/// and a payload that live apart without first copying them together.
/// `EAGAIN`/`ENOBUFS` come back as `WouldBlock`.
pub(crate) fn send_parts(fd: RawFd, parts: &[&[u8]], dst: &SocketAddr) -> io::Result<()> {
    if parts.len() > MAX_SEND_PARTS {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "send_parts: too many parts"));
    }
    let mut storage = zeroed_storage();
    let addr_len = encode_addr(dst, &mut storage);
    let mut iovs = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_SEND_PARTS];
    let mut count = 0;
    for part in parts.iter().filter(|p| !p.is_empty()) {
        // sendmsg only reads through iov_base; the cast to *mut is what the C type demands.
        iovs[count] = libc::iovec { iov_base: part.as_ptr().cast_mut().cast(), iov_len: part.len() };
        count += 1;
    }
    // SAFETY: `msghdr` is plain C data; all-zero is a valid empty header.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_name = (&mut storage as *mut libc::sockaddr_storage).cast();
    hdr.msg_namelen = addr_len;
    hdr.msg_iov = iovs.as_mut_ptr();
    hdr.msg_iovlen = count as _;
    // SAFETY: `hdr` points at `storage` (an initialised address of `addr_len`
    // bytes) and at `count` iovecs, each describing a live borrowed slice
    // with its true length; the kernel only reads them; all outlive the call.
    let ret = unsafe { libc::sendmsg(fd, &hdr, 0) };
    super::check(ret).map(drop).map_err(super::map_send_error)
}

/// Turns the "nothing queued" errors of a nonblocking receive into `None`.
fn nothing_queued(err: io::Error) -> io::Result<()> {
    match err.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(()),
        _ => Err(err),
    }
}

fn unexpected_family() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "recv: address family is not IPv4/IPv6")
}

/// `recvfrom(MSG_DONTWAIT | MSG_TRUNC)`: returns the datagram's full length,
/// which exceeds `buf.len()` when it was cut, or `None` when nothing is queued.
pub(crate) fn recv_from(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
    let mut storage = zeroed_storage();
    let mut addr_len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `buf` is valid for `buf.len()` bytes of writes; `storage` and
    // `addr_len` describe a writable address buffer of the stated size.
    let ret = unsafe {
        libc::recvfrom(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            &mut addr_len,
        )
    };
    match super::check(ret) {
        Ok(len) => {
            let addr = decode_addr(&storage, addr_len).ok_or_else(unexpected_family)?;
            Ok(Some((len, addr)))
        }
        Err(e) => nothing_queued(e).map(|()| None),
    }
}

/// What one `recv_split` returned.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SplitRecv {
    /// Bytes written across both buffers.
    pub len: usize,
    pub addr: SocketAddr,
    /// Segment size when the kernel coalesced several datagrams (GRO).
    pub gro_segment: Option<usize>,
    /// The message was larger than both buffers together (MSG_TRUNC).
    pub truncated: bool,
}

/// `recvmsg(MSG_DONTWAIT)` scattering into `first`, then `spill`, and reading
/// the GRO segment size: the single-datagram path on a GRO socket, where one
/// receive may return many datagrams.
pub(crate) fn recv_split(fd: RawFd, first: &mut [u8], spill: &mut [u8]) -> io::Result<Option<SplitRecv>> {
    let mut storage = zeroed_storage();
    let mut iovs = [
        libc::iovec { iov_base: first.as_mut_ptr().cast(), iov_len: first.len() },
        libc::iovec { iov_base: spill.as_mut_ptr().cast(), iov_len: spill.len() },
    ];
    let mut cmsg = CmsgBuf::new();
    // SAFETY: `msghdr` is plain C data; all-zero is a valid empty header.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_name = (&mut storage as *mut libc::sockaddr_storage).cast();
    hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    hdr.msg_iov = iovs.as_mut_ptr();
    hdr.msg_iovlen = iovs.len() as _;
    hdr.msg_control = cmsg.as_mut_ptr();
    hdr.msg_controllen = CMSG_BUF_LEN as _;
    // SAFETY: every pointer in `hdr` refers to a live local or to the
    // caller's exclusively borrowed buffers, with their true lengths.
    let ret = unsafe { libc::recvmsg(fd, &mut hdr, libc::MSG_DONTWAIT) };
    match super::check(ret) {
        Ok(len) => Ok(Some(SplitRecv {
            len,
            addr: decode_addr(&storage, hdr.msg_namelen).ok_or_else(unexpected_family)?,
            gro_segment: read_gro_cmsg(&hdr),
            truncated: hdr.msg_flags & libc::MSG_TRUNC != 0,
        })),
        Err(e) => nothing_queued(e).map(|()| None),
    }
}
