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
use std::mem::MaybeUninit;

/// Memory a copy writes into whole: initialized bytes, or room not yet
/// initialized (a vector's spare capacity, so a large payload lands without
/// being zero-filled first, which cost as much as the copy). Copies through
/// it only ever store bytes they copied.
///
/// # Safety
/// `dest_ptr` must be valid for writes of `dest_len` bytes for as long as
/// the exclusive borrow the implementor is reached through lasts.
pub unsafe trait CopyDest {
    /// Where the first byte goes.
    fn dest_ptr(&mut self) -> *mut u8;
    /// How many bytes the copy writes.
    fn dest_len(&self) -> usize;
}

// SAFETY: a mutable byte slice is valid for writes of its whole length.
unsafe impl CopyDest for [u8] {
    fn dest_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn dest_len(&self) -> usize {
        self.len()
    }
}

// SAFETY: as for `[u8]`; writing bytes into uninitialized room is allowed.
unsafe impl CopyDest for [MaybeUninit<u8>] {
    fn dest_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr().cast()
    }
    fn dest_len(&self) -> usize {
        self.len()
    }
}

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

/// Copies all of `out` from address `remote` in process `pid`; on error
/// `out` holds a partial copy (or nothing) and must not be taken as filled.
pub fn vm_read<D: CopyDest + ?Sized>(pid: u32, remote: u64, out: &mut D) -> io::Result<()> {
    let len = out.dest_len();
    vm_read_part(pid, remote, out, 0, len)
}

/// Copies `len` bytes from address `remote` in process `pid` into `out`
/// from its byte `at` on (a chunk of a larger copy).
///
/// # Panics
/// If `at + len` is beyond `out`.
pub fn vm_read_part<D: CopyDest + ?Sized>(pid: u32, remote: u64, out: &mut D, at: usize, len: usize) -> io::Result<()> {
    assert!(at.checked_add(len).is_some_and(|end| end <= out.dest_len()), "copy beyond its destination");
    if len == 0 {
        return Ok(());
    }
    // SAFETY: `at + len` is within `out` (asserted), so the pointer stays
    // inside the destination.
    let local = libc::iovec { iov_base: unsafe { out.dest_ptr().add(at) }.cast(), iov_len: len };
    let remote = libc::iovec { iov_base: remote as usize as *mut libc::c_void, iov_len: len };
    // SAFETY: the local iovec lies inside `out`, valid and exclusively
    // borrowed for writes during the call (`CopyDest`'s contract); the
    // remote side is checked by the kernel.
    let ret = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    check(ret, len)
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
        vm_read(std::process::id(), addr + 3, &mut back[..]).unwrap();
        assert_eq!(&back, b"abc");
        assert_eq!(std::hint::black_box(&target)[3..6], *b"abc");
        assert!(vm_read(std::process::id(), 8, &mut back[..]).is_err(), "unmapped address is EFAULT");
    }

    #[test]
    fn fills_uninitialized_room_and_parts_of_a_destination() {
        let source: Vec<u8> = (0..=255).collect();
        let addr = source.as_ptr() as u64;
        let mut room: Vec<u8> = Vec::with_capacity(256);
        vm_read(std::process::id(), addr, &mut room.spare_capacity_mut()[..256]).unwrap();
        // SAFETY: vm_read returned Ok, so all 256 bytes were written.
        unsafe { room.set_len(256) };
        assert_eq!(room, source);
        let mut part = [0u8; 8];
        vm_read_part(std::process::id(), addr + 100, &mut part[..], 2, 4).unwrap();
        assert_eq!(part, [0, 0, 100, 101, 102, 103, 0, 0]);
    }

    #[test]
    #[should_panic(expected = "copy beyond its destination")]
    fn a_part_beyond_the_destination_panics_before_copying() {
        let source = [7u8; 16];
        let mut out = [0u8; 8];
        let _ = vm_read_part(std::process::id(), source.as_ptr() as u64, &mut out[..], 6, 4);
    }
}
