//! The only `unsafe` in mwrun: signalling process groups, catching the
//! signals that should stop the job, and binding a rank to its CPUs between
//! fork and exec. Everything here is a thin wrapper around one system call.
//!
//! Owns: the signal handler (one atomic store, async-signal-safe), taking the
//! pending signal, `kill` on a process group, and the pre-exec affinity hook.
//! Must not: do anything in the handler or the hook beyond that one call, or
//! hold any policy about which signal to send when (`supervise` does) or
//! which CPUs a rank gets (`cpus` does).
#![allow(unsafe_code)]

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

pub use libc::{SIGHUP, SIGINT, SIGKILL, SIGTERM};

/// The last termination signal mwrun received and has not handled yet; 0 for
/// none. Written by the signal handler, so it must be a lock-free atomic.
static PENDING_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn record_signal(signal: libc::c_int) {
    // Only async-signal-safe work here: one atomic store.
    PENDING_SIGNAL.store(signal, Ordering::Relaxed);
}

/// Catches SIGINT, SIGTERM and SIGHUP so that mwrun can pass them on to the
/// ranks (which run in their own process groups and so do not get the
/// terminal's signals) before exiting.
pub fn catch_termination_signals() -> io::Result<()> {
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        // SAFETY: `sigaction` is given a fully initialised struct whose
        // handler is an `extern "C" fn(c_int)` doing only an atomic store,
        // which is async-signal-safe; the old action pointer may be null.
        // `sa_mask` is emptied by `sigemptyset` on a valid pointer.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = record_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Returns the termination signal received since the last call, if any.
pub fn take_pending_signal() -> Option<i32> {
    match PENDING_SIGNAL.swap(0, Ordering::Relaxed) {
        0 => None,
        signal => Some(signal),
    }
}

/// Sends `signal` to every process in process group `pgid` (a rank and
/// whatever it started). A group that no longer exists is not an error.
pub fn signal_group(pgid: u32, signal: i32) -> io::Result<()> {
    let pgid = libc::pid_t::try_from(pgid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    if pgid <= 1 {
        // kill(-1) or kill(0) would hit far more than one rank.
        return Err(io::ErrorKind::InvalidInput.into());
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours;
    // the negative pid addresses exactly the group `pgid`, checked above to
    // be a real group id and not one of kill's broadcast values.
    if unsafe { libc::kill(-pgid, signal) } == 0 {
        return Ok(());
    }
    match io::Error::last_os_error() {
        e if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        e => Err(e),
    }
}

/// Makes the process `command` starts run only on `cpus` from its first
/// instruction on (set in the child between fork and exec, so that no
/// thread the program starts early escapes the binding).
pub fn bind_before_exec(command: &mut std::process::Command, cpus: rustix::thread::CpuSet) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the forked child before exec, where only
    // async-signal-safe work is allowed: it makes one raw system call
    // (rustix's sched_setaffinity, no allocation, no lock) on a CPU set
    // built before the fork and moved into the closure, and converts its
    // error without allocating (io::Error from an errno).
    unsafe {
        command.pre_exec(move || {
            rustix::thread::sched_setaffinity(None, &cpus).map_err(|e| io::Error::from_raw_os_error(e.raw_os_error()))
        });
    }
}

/// The conventional name of a signal, e.g. `SIGKILL`.
pub fn signal_name(signal: i32) -> &'static str {
    const NAMES: &[(i32, &str)] = &[
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGCHLD, "SIGCHLD"),
        (libc::SIGCONT, "SIGCONT"),
        (libc::SIGSTOP, "SIGSTOP"),
        (libc::SIGTSTP, "SIGTSTP"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    NAMES.iter().find(|(n, _)| *n == signal).map_or("unknown signal", |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(SIGTERM), "SIGTERM");
        assert_eq!(signal_name(1000), "unknown signal");
    }

    #[test]
    fn broadcast_pids_are_refused() {
        assert!(signal_group(0, 0).is_err());
        assert!(signal_group(1, 0).is_err());
    }
}
