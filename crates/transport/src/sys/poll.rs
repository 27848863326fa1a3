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

/// `sched_getcpu(3)`: the CPU this thread runs on right now (glibc reads it
/// from the thread's rseq area, no system call), or `None` if unknown.
pub(crate) fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments and touches no memory.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).ok()
}

/// Moves the calling thread onto `cpu` now, then gives it back its own
/// affinity mask (so the scheduler may move it again later): a one-time
/// nudge, not a binding. `Ok(false)` when `cpu` is not in the thread's
/// mask (the user pinned it elsewhere) or out of range.
pub(crate) fn nudge_to_cpu(cpu: u32) -> io::Result<bool> {
    let cpu = cpu as usize;
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut original: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    if cpu >= 8 * size {
        return Ok(false);
    }
    // SAFETY: `original` is a live cpu_set_t of `size` bytes the kernel fills;
    // pid 0 is the calling thread.
    super::check(unsafe { libc::sched_getaffinity(0, size, &mut original) } as libc::ssize_t)?;
    // SAFETY: `cpu` is below the set's capacity (checked above).
    if !unsafe { libc::CPU_ISSET(cpu, &original) } {
        return Ok(false);
    }
    // SAFETY: as above, an empty set, then one CPU in range added.
    let mut only: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below the set's capacity.
    unsafe { libc::CPU_SET(cpu, &mut only) };
    // SAFETY: both sets are live cpu_set_t values of `size` bytes; pid 0 is
    // the calling thread. The kernel migrates us before the first call returns.
    super::check(unsafe { libc::sched_setaffinity(0, size, &only) } as libc::ssize_t)?;
    // SAFETY: as above.
    super::check(unsafe { libc::sched_setaffinity(0, size, &original) } as libc::ssize_t)?;
    Ok(true)
}

/// Lets the calling thread run on `cpus` only (those in range of a
/// `cpu_set_t`), until it is told otherwise: a binding, unlike
/// [`nudge_to_cpu`]. The kernel refuses (EINVAL) a set that leaves the
/// thread no CPU its cpuset allows.
pub(crate) fn confine_to(cpus: &[u32]) -> io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    for &cpu in cpus.iter().filter(|&&cpu| (cpu as usize) < 8 * size) {
        // SAFETY: `cpu` is below the set's capacity (filtered above).
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    }
    // SAFETY: `set` is a live cpu_set_t of `size` bytes; pid 0 is the
    // calling thread.
    super::check(unsafe { libc::sched_setaffinity(0, size, &set) } as libc::ssize_t)?;
    Ok(())
}

/// The CPUs in the calling thread's affinity mask.
pub(crate) fn allowed_cpus() -> io::Result<Vec<u32>> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a live cpu_set_t of `size` bytes the kernel fills;
    // pid 0 is the calling thread.
    super::check(unsafe { libc::sched_getaffinity(0, size, &mut set) } as libc::ssize_t)?;
    // SAFETY: every index is below the set's capacity (8 bits per byte).
    Ok((0..8 * size).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) }).map(|cpu| cpu as u32).collect())
}
