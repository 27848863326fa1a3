//! Single-copy transfers into and out of another process's memory with
//! `process_vm_writev`/`process_vm_readv` (cross-memory attach): the path
//! for registered regions that are not in a shared mapping.
//!
//! The kernel allows these only where it would allow `ptrace` attach (same
//! user and no Yama or container policy against it); a refusal is returned
//! as `PermissionDenied` and the caller falls back to the two-copy path.
//! Must not: decide whether a remote range is valid; the caller checked it
//! against the owner's region table entry. A wrong address fails with
//! `EFAULT` in the kernel, never touches this process's memory.

use std::io;

fn check(ret: libc::ssize_t, want: usize) -> io::Result<()> {
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    if ret as usize != want {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "partial cross-memory transfer"));
    }
    Ok(())
}

/// Copies `data` to address `remote` in process `pid`.
pub fn vm_write(pid: u32, remote: u64, data: &[u8]) -> io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let local = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    let remote = libc::iovec { iov_base: remote as usize as *mut libc::c_void, iov_len: data.len() };
    // SAFETY: the local iovec describes `data`, valid for reads for the
    // call; the remote one is only interpreted by the kernel in the other
    // process's address space (a bad address there is EFAULT).
    let ret = unsafe { libc::process_vm_writev(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    check(ret, data.len())
}

/// Copies `out.len()` bytes from address `remote` in process `pid` into `out`.
pub fn vm_read(pid: u32, remote: u64, out: &mut [u8]) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let local = libc::iovec { iov_base: out.as_mut_ptr().cast(), iov_len: out.len() };
    let remote = libc::iovec { iov_base: remote as usize as *mut libc::c_void, iov_len: out.len() };
    // SAFETY: the local iovec describes `out`, valid and exclusively
    // borrowed for writes during the call; the remote side is checked by
    // the kernel.
    let ret = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    check(ret, out.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_within_this_process() {
        let mut target = vec![0u8; 64];
        let addr = target.as_mut_ptr() as u64;
        vm_write(std::process::id(), addr + 3, b"abc").unwrap();
        let mut back = [0u8; 3];
        vm_read(std::process::id(), addr + 3, &mut back).unwrap();
        assert_eq!(&back, b"abc");
        assert_eq!(std::hint::black_box(&target)[3..6], *b"abc");
        assert!(vm_read(std::process::id(), 8, &mut back).is_err(), "unmapped address is EFAULT");
    }
}
