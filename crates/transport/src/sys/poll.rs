//! Blocking for readability (`ppoll`) and giving up the CPU (`sched_yield`).
//!
//! Owns: the one blocking call of the crate (`ppoll` until readable or a
//! deadline) and the yield. Must not: decide when to block or for how long
//! (`wait.rs` does), or read the sockets it waits on.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// A reusable `pollfd` array, so waiting does not allocate once it has seen
/// its largest fd set.
#[derive(Debug, Default)]
pub(crate) struct PollFds {
    fds: Vec<libc::pollfd>,
}

/// Blocks until one of `fds` is readable or `timeout` passes (`None`: no
/// timeout). Returns the number of ready fds; 0 on timeout or when a signal
/// interrupted the wait (the caller re-checks its state either way).
///
/// `ppoll` rather than `poll` because its timeout has nanosecond resolution:
/// retransmission deadlines are tens of microseconds, and `poll`'s
/// milliseconds would overshoot them by up to 1 ms.
pub(crate) fn ppoll_readable(scratch: &mut PollFds, fds: &[RawFd], timeout: Option<Duration>) -> io::Result<usize> {
    scratch.fds.clear();
    scratch.fds.extend(fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }));
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `scratch.fds` holds `len` initialised pollfds that the kernel
    // may write `revents` into; `ts_ptr` is null or points to a live
    // timespec; a null sigmask means "leave the signal mask alone".
    let ret =
        unsafe { libc::ppoll(scratch.fds.as_mut_ptr(), scratch.fds.len() as libc::nfds_t, ts_ptr, std::ptr::null()) };
    match super::check(ret as libc::ssize_t) {
        Ok(n) => Ok(n),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(e),
    }
}

/// `sched_yield(2)`: lets another runnable thread on this CPU run. It cannot
/// fail on Linux, so its result is ignored.
pub(crate) fn yield_cpu() {
    // SAFETY: sched_yield takes no arguments and touches no memory.
    unsafe {
        libc::sched_yield();
    }
}
