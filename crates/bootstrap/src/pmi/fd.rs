//! Adopting the socket a PMI launcher leaves open for the rank (`PMI_FD`).
//!
//! Owns: the one `unsafe` operation of this crate, turning an inherited
//! descriptor number into an owned stream, at most once per process. Must
//! not: touch any descriptor other than the one named by `PMI_FD`.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once `PMI_FD` has been adopted: a second owner would close it twice.
static ADOPTED: AtomicBool = AtomicBool::new(false);

/// Takes ownership of the launcher's socket `fd`. Fails (with the reason)
/// when the descriptor is not an open socket, or was adopted before.
pub(crate) fn adopt_pmi_fd(fd: RawFd) -> Result<UnixStream, String> {
    if fd < 0 {
        return Err(format!("PMI_FD={fd} is not a descriptor"));
    }
    // procfs tells whether the number names an open socket, without unsafe:
    // a PMI_FD leaked from an outer job into an unrelated process would
    // otherwise make us adopt whatever file happens to have that number.
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map_err(|_| format!("PMI_FD={fd} is not an open descriptor of this process"))?;
    if !target.to_string_lossy().starts_with("socket:") {
        return Err(format!("PMI_FD={fd} is {}, not the launcher's socket", target.display()));
    }
    if ADOPTED.swap(true, Ordering::SeqCst) {
        return Err("the PMI socket was already used by an earlier join in this process".to_owned());
    }
    // SAFETY: `fd` is open and is a socket (checked just above), inherited
    // from the launcher for this process's PMI conversation; ADOPTED makes
    // this the only OwnedFd this process ever makes for it, and nothing else
    // in a memwire program reads or closes PMI_FD.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(UnixStream::from(owned))
}
