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
//!
//! The exception is memory a peer *lends* for exactly one copy (a
//! rendezvous payload until the receiver reports it pulled, a collective's
//! exposed buffer until every reader reports done, a receive buffer until
//! the assisting sender reports its chunks): [`read_lent`] and
//! [`write_lent`] copy it with a plain `memcpy` when the peer is a thread
//! of this process ([`Far::Local`]), which is why they are `unsafe`. The
//! kernel's copy pins and maps each page, which a `memcpy` between threads
//! does not (measurements: docs/perf-notes.md, "cross-memory copy").

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

/// The other side of a copy of lent memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Far {
    /// Another process, by pid: the kernel copies (cross-memory attach).
    Process(u32),
    /// This process (a rank that is another thread of it): a `memcpy`.
    Local,
}

impl Far {
    /// Process `pid` as seen from this process.
    pub fn of(pid: u32) -> Far {
        if pid == std::process::id() {
            Far::Local
        } else {
            Far::Process(pid)
        }
    }
}

/// Copies `len` bytes from address `remote` of `far` into `out` from its
/// byte `at` on: [`vm_read_part`] from another process, a `memcpy` from
/// this one.
///
/// # Safety
/// For [`Far::Local`], `remote .. remote + len` must be memory of this
/// process that stays allocated, and that nobody writes, for the whole call
/// (memory its owner lends until this reader reports it is done). For
/// [`Far::Process`] nothing is required: the kernel checks the address.
///
/// # Panics
/// If `at + len` is beyond `out`.
pub unsafe fn read_lent<D: CopyDest + ?Sized>(
    far: Far,
    remote: u64,
    out: &mut D,
    at: usize,
    len: usize,
) -> io::Result<()> {
    let pid = match far {
        Far::Process(pid) => pid,
        Far::Local => {
            assert!(at.checked_add(len).is_some_and(|end| end <= out.dest_len()), "copy beyond its destination");
            if len > 0 {
                // SAFETY: the source is valid for reads of `len` bytes and
                // not written meanwhile (this function's contract); the
                // destination lies inside `out` (asserted), valid for writes
                // and exclusively ours (`CopyDest`); a lent buffer is never
                // the reader's own destination, so they do not overlap.
                unsafe { std::ptr::copy_nonoverlapping(remote as usize as *const u8, out.dest_ptr().add(at), len) };
            }
            return Ok(());
        }
    };
    vm_read_part(pid, remote, out, at, len)
}

/// Copies `data` to address `remote` of `far`: [`vm_write`] into another
/// process, a `memcpy` within this one.
///
/// # Safety
/// For [`Far::Local`], `remote .. remote + data.len()` must be memory of
/// this process that stays allocated, and that nobody else reads or writes,
/// for the whole call (a destination its owner lends until this writer
/// reports it is done). For [`Far::Process`] nothing is required.
pub unsafe fn write_lent(far: Far, remote: u64, data: &[u8]) -> io::Result<()> {
    match far {
        Far::Process(pid) => vm_write(pid, remote, data),
        Far::Local => {
            // SAFETY: the destination is valid for writes of `data.len()`
            // bytes and nobody else touches it (this function's contract),
            // so it cannot overlap `data`, which we only read.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), remote as usize as *mut u8, data.len()) };
            Ok(())
        }
    }
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

/// Whether this process's `process_vm_readv` costs more than two `memcpy`s
/// of the same 64 KiB (the best of five tries each, on this process's own
/// memory: the same kernel path as reading a peer). Where it does, copying
/// a message twice through shared memory beats copying it once through the
/// kernel up to larger sizes. The ratio differs from host to host, hence a
/// probe at run time rather than a constant (measurements:
/// docs/perf-notes.md, "cross-memory copy"). `false` when the kernel
/// refuses the copy (whether it may be used is decided elsewhere; this
/// only compares costs).
pub fn kernel_copy_is_costly() -> bool {
    const LEN: usize = 64 << 10;
    let source = vec![1u8; LEN];
    let mut out = vec![0u8; LEN];
    let pid = std::process::id();
    let (mut kernel, mut memcpy) = (std::time::Duration::MAX, std::time::Duration::MAX);
    for _ in 0..5 {
        let start = std::time::Instant::now();
        if vm_read(pid, source.as_ptr() as u64, &mut out[..]).is_err() {
            return false;
        }
        kernel = kernel.min(start.elapsed());
        let start = std::time::Instant::now();
        out.copy_from_slice(std::hint::black_box(&source));
        std::hint::black_box(&out);
        memcpy = memcpy.min(start.elapsed());
    }
    kernel > memcpy * 2
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
    fn lent_memory_of_this_process_is_copied_both_ways() {
        assert_eq!(Far::of(std::process::id()), Far::Local);
        assert_eq!(Far::of(1), Far::Process(1));
        let source: Vec<u8> = (0..200).collect();
        let mut out = vec![0u8; 210];
        // SAFETY: `source` is allocated and unwritten during the call.
        unsafe { read_lent(Far::Local, source.as_ptr() as u64 + 10, &mut out[..], 5, 150) }.unwrap();
        assert_eq!(out[..5], [0; 5]);
        assert_eq!(out[5..155], source[10..160]);
        assert_eq!(out[155..], [0; 55]);
        let mut target = vec![0u8; 64];
        // SAFETY: `target` is allocated and untouched elsewhere during the call.
        unsafe { write_lent(Far::Local, target.as_mut_ptr() as u64 + 3, b"lent") }.unwrap();
        assert_eq!(std::hint::black_box(&target)[..8], *b"\0\0\0lent\0");
        // The same calls through the kernel give the same bytes.
        let mut again = vec![0u8; 210];
        let far = Far::Process(std::process::id());
        // SAFETY: nothing is required for `Far::Process`.
        unsafe { read_lent(far, source.as_ptr() as u64 + 10, &mut again[..], 5, 150) }.unwrap();
        assert_eq!(again, out);
    }

    #[test]
    #[should_panic(expected = "copy beyond its destination")]
    fn a_lent_read_beyond_the_destination_panics_before_copying() {
        let source = [7u8; 16];
        let mut out = [0u8; 8];
        // SAFETY: `source` is allocated and unwritten during the call.
        let _ = unsafe { read_lent(Far::Local, source.as_ptr() as u64, &mut out[..], 6, 4) };
    }

    #[test]
    #[should_panic(expected = "copy beyond its destination")]
    fn a_part_beyond_the_destination_panics_before_copying() {
        let source = [7u8; 16];
        let mut out = [0u8; 8];
        let _ = vm_read_part(std::process::id(), source.as_ptr() as u64, &mut out[..], 6, 4);
    }
}
