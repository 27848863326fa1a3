//! Starting a rank with an inherited socket, the way a PMI launcher does.
//!
//! Owns: the one `unsafe` of the tests (a `pre_exec` hook that moves the
//! socket to a fixed descriptor number). Must not: do anything in the child
//! but async-signal-safe descriptor calls.

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Descriptor number the child finds its PMI socket at (`PMI_FD`).
pub const CHILD_PMI_FD: RawFd = 100;

/// Makes `command` start with `socket` open at [`CHILD_PMI_FD`] and not
/// closed on exec; every other descriptor std creates stays close-on-exec.
pub fn inherit_as_pmi_fd(command: &mut Command, socket: &UnixStream) {
    let fd = socket.as_raw_fd();
    let hook = move || {
        // SAFETY: dup2 and fcntl are async-signal-safe and touch only the
        // child's own descriptor table; `fd` is open in the parent (the
        // caller keeps `socket` alive until spawn returns), hence in the
        // child. dup2 to a new number clears close-on-exec; when the numbers
        // are equal dup2 does nothing, so the flag is cleared by hand.
        let rc = unsafe {
            if fd == CHILD_PMI_FD {
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, CHILD_PMI_FD)
            }
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    // SAFETY: the hook only makes async-signal-safe calls (see above) and
    // allocates nothing, as required between fork and exec.
    unsafe {
        command.pre_exec(hook);
    }
}
