//! Socket options: buffer sizes and the UDP offload probes.
//!
//! Owns: reading and setting `SO_RCVBUF`/`SO_SNDBUF` (the `FORCE` variants when
//! privileged) and probing `UDP_SEGMENT`/`UDP_GRO`. Must not: fail the socket
//! over an option: a refused option is reported (smaller buffer, no offload)
//! and the caller falls back.

use std::io;
use std::mem::size_of;
use std::os::fd::RawFd;

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `value` is a live `c_int` and the length passed matches it.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    super::check(ret as libc::ssize_t).map(drop)
}

fn get_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live locals describing a writable
    // buffer of `len` bytes.
    let ret = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut libc::c_int).cast(), &mut len) };
    super::check(ret as libc::ssize_t).map(|_| value)
}

/// The kernel's socket buffer sizes after `set_buffer_sizes`, as `getsockopt`
/// reports them (Linux doubles the requested value to account for overhead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BufferSizes {
    pub recv: usize,
    pub send: usize,
}

/// Asks for `bytes` of receive and send buffer. Tries the `*FORCE` options
/// first, which ignore `net.core.{r,w}mem_max` but need CAP_NET_ADMIN (we
/// are often root on cluster nodes), then the ordinary ones, which the kernel
/// silently caps. Failures are not errors: a small buffer costs drops, which
/// the protocol above recovers from.
pub(crate) fn set_buffer_sizes(fd: RawFd, bytes: usize) -> BufferSizes {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    for (force, plain) in [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)] {
        if set_int(fd, libc::SOL_SOCKET, force, value).is_err() {
            // Capped by rmem_max/wmem_max; nothing better is possible unprivileged.
            let _ = set_int(fd, libc::SOL_SOCKET, plain, value);
        }
    }
    let read = |name| get_int(fd, libc::SOL_SOCKET, name).ok().and_then(|v| usize::try_from(v).ok()).unwrap_or(0);
    BufferSizes { recv: read(libc::SO_RCVBUF), send: read(libc::SO_SNDBUF) }
}

/// Whether the kernel knows `UDP_SEGMENT` (Linux 4.18+). Reading the option
/// succeeds exactly when sending with it is supported by the stack; whether
/// the egress device can offload is only learnt from the first send (`EIO`).
pub(crate) fn probe_gso(fd: RawFd) -> bool {
    get_int(fd, libc::SOL_UDP, libc::UDP_SEGMENT).is_ok()
}

/// Turns on `UDP_GRO` (Linux 5.0+); returns whether the kernel accepted it.
pub(crate) fn enable_gro(fd: RawFd) -> bool {
    set_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok()
}
