//! The relay's only unsafe code: packet sockets (`AF_PACKET`) bound to one
//! network interface, `ppoll` over them, and a termination-signal flag.
//!
//! Owns: [`LinkSocket`] (receive every frame arriving on a link, with
//! its `virtio_net_hdr`; send whole frames out of it) and [`wait_readable`].
//! Must not: parse or alter frames.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A packet socket bound to one interface, with `PACKET_VNET_HDR` on: every
/// frame read starts with a `virtio_net_hdr` (so a GSO super-frame says how
/// to split it), and every frame sent must start with one (all zero: no
/// offload requested).
#[derive(Debug)]
pub struct LinkSocket {
    fd: OwnedFd,
}

/// Every protocol: a bridge port hands frames to the bridge before
/// protocol-specific taps (`ETH_P_IP`) would see them; only "all" taps come
/// first. Non-IP frames are ignored by the caller.
const ETH_P_ALL: u16 = 0x0003;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn set_int_opt(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `fd` is an open socket; the option value is a valid c_int
    // that lives across the call, and its size is passed exactly.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

impl LinkSocket {
    /// Opens a nonblocking packet socket on interface `name` for every
    /// frame. Needs `CAP_NET_RAW`.
    pub fn open(name: &str) -> io::Result<LinkSocket> {
        let cname = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))?;
        // SAFETY: `cname` is a valid NUL-terminated string for the call.
        let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if index == 0 {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no network interface {name}")));
        }
        let kind = libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        // SAFETY: plain syscall with constant arguments.
        let raw = check(unsafe { libc::socket(libc::AF_PACKET, kind, libc::c_int::from(ETH_P_ALL.to_be())) })?;
        // SAFETY: `raw` was just returned by socket() and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        set_int_opt(&fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)?;
        // Our own sends on this link must not come back to us (Linux 4.20+;
        // the receive path also skips outgoing frames, so failure is fine).
        let _ = set_int_opt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1);
        // Bursts of GSO frames from several ranks: room for a few MiB.
        let _ = set_int_opt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20);
        // SAFETY: an all-zero sockaddr_ll is a valid value of the type.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as libc::c_ushort;
        addr.sll_protocol = ETH_P_ALL.to_be();
        addr.sll_ifindex = index as libc::c_int;
        // SAFETY: `addr` is an initialized sockaddr_ll and its exact size is passed.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        Ok(LinkSocket { fd })
    }

    /// Reads one frame that arrived on the link (vnet header first) into
    /// `buf`; `Ok(None)` when there is none waiting. Frames the link sent
    /// (outgoing) are skipped.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: an all-zero sockaddr_ll is a valid value of the type.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut from_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: `buf` is writable for its length; `from`/`from_len`
            // describe a writable sockaddr_ll of the size passed.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut from_len,
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                return match err.kind() {
                    io::ErrorKind::WouldBlock => Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(err),
                };
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            // MSG_TRUNC returns the real length; a frame longer than the
            // buffer is reported as such and the caller ignores it.
            return Ok(Some(n as usize));
        }
    }

    /// Sends one frame (vnet header first) out of the link.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is readable for its length; the socket is bound,
        // so no destination address is needed.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), libc::MSG_DONTWAIT) };
        check(n as libc::c_int).map(drop)
    }
}

/// Waits until one of `sockets` is readable, `timeout` passes, or a signal
/// arrives. Returns which sockets are readable.
pub fn wait_readable(sockets: &[LinkSocket], timeout: Option<Duration>, ready: &mut Vec<bool>) -> io::Result<()> {
    let mut fds: Vec<libc::pollfd> =
        sockets.iter().map(|s| libc::pollfd { fd: s.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a valid array of its length; `ts_ptr` is null or
    // points at a live timespec; a null sigmask keeps the current mask.
    let ret = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ts_ptr, std::ptr::null()) };
    ready.clear();
    if ret < 0 {
        let err = io::Error::last_os_error();
        ready.resize(sockets.len(), false);
        return if err.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(err) };
    }
    ready.extend(fds.iter().map(|p| p.revents & libc::POLLIN != 0));
    Ok(())
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Makes SIGTERM and SIGINT set a flag ([`stop_requested`]) instead of
/// killing the process, so the relay can report its counters on the way out.
pub fn catch_stop_signals() -> io::Result<()> {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: an all-zero sigaction is valid; the handler only stores
        // to an atomic (async-signal-safe); SA_RESTART is deliberately not
        // set so ppoll returns EINTR and the loop sees the flag at once.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            check(libc::sigaction(signal, &action, std::ptr::null_mut()))?;
        }
    }
    Ok(())
}

/// Whether SIGTERM or SIGINT arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}
