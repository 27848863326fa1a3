//! Shared mappings: anonymous memory files (`memfd_create`) mapped
//! `MAP_SHARED`, and a same-host peer's mapping of them.
//!
//! A segment has no name in any file system: a peer reaches it by opening
//! `/proc/<owner pid>/fd/<fd>`, which the kernel allows to a process of the
//! same user (the `PTRACE_MODE_READ` check of `/proc/<pid>/fd`). So nothing
//! is ever left in `/dev/shm`: the memory is freed when the last process
//! that maps it exits, however it exits (normal exit, a signal, the whole
//! job killed). That is the clean-up guarantee of DESIGN §3, by construction.
//!
//! Owns: the `memfd_create`/`ftruncate`/`mmap`/`munmap` calls and the opening
//! of a peer's fd. Must not: interpret the bytes (the ring, the control
//! block and region users do).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

/// A `MAP_SHARED` mapping of a memory file: one this process created
/// ([`Segment::create`]), or a peer's ([`Segment::open_peer`]).
#[derive(Debug)]
pub struct Segment {
    ptr: NonNull<u8>,
    len: usize,
    /// Kept open by the owner so peers can open it through `/proc`; `None`
    /// for a peer's mapping (the mapping keeps the file alive).
    fd: Option<OwnedFd>,
}

// SAFETY: a Segment is a mapping (address + length) plus an fd; moving it to
// another thread changes nothing about who may touch the bytes. What is
// written through the pointer, and with which ordering, is the user's
// protocol (rings use atomics; region users follow RMA rules).
unsafe impl Send for Segment {}
// SAFETY: as above; `&Segment` only hands out the raw pointer and length.
unsafe impl Sync for Segment {}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        page as usize
    } else {
        4096
    }
}

/// `len` rounded up to whole pages, at least one page.
fn mapped_len(len: usize) -> io::Result<usize> {
    let page = page_size();
    len.max(1)
        .checked_add(page - 1)
        .map(|l| l / page * page)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "segment length overflows"))
}

fn map_shared(fd: RawFd, len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh mapping chosen by the kernel (addr null, no MAP_FIXED)
    // cannot alias any existing Rust object; fd and len are plain values.
    let ptr =
        unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap returned null"))
}

#[cfg(miri)]
fn map_anonymous(len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh anonymous mapping chosen by the kernel (Miri's shim)
    // cannot alias any existing Rust object.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap returned null"))
}

impl Segment {
    /// Creates a zeroed memory file of `len` bytes (rounded up to pages)
    /// and maps it. `name` shows in `/proc/<pid>/maps` as `/memfd:<name>`.
    pub fn create(name: &str, len: usize) -> io::Result<Segment> {
        let len = mapped_len(len)?;
        // Miri runs no real system calls (no memory files): the rings' and
        // stages' tests run there on anonymous private memory, which is all
        // they need within one process (`make miri`).
        #[cfg(miri)]
        {
            let _ = name;
            return map_anonymous(len).map(|ptr| Segment { ptr, len, fd: None });
        }
        #[cfg(not(miri))]
        Segment::create_file(name, len)
    }

    #[cfg(not(miri))]
    fn create_file(name: &str, len: usize) -> io::Result<Segment> {
        use std::fs::File;
        use std::os::fd::FromRawFd;

        let cname = std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: cname is a valid NUL-terminated string for the call.
        let raw = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: memfd_create returned a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let file = File::from(fd);
        file.set_len(len as u64)?;
        let ptr = map_shared(file.as_raw_fd(), len)?;
        Ok(Segment { ptr, len, fd: Some(file.into()) })
    }

    /// Maps `len` bytes of the memory file that process `pid` holds open as
    /// `fd`. Fails if the kernel refuses (another user, `hidepid`), the
    /// process is gone, or the file is shorter than `len`.
    pub fn open_peer(pid: u32, fd: i32, len: usize) -> io::Result<Segment> {
        let path = format!("/proc/{pid}/fd/{fd}");
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path)?;
        let meta = file.metadata()?;
        if meta.len() < len as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{path} is shorter than {len} bytes")));
        }
        let len = mapped_len(len)?.min(meta.len() as usize);
        let ptr = map_shared(file.as_raw_fd(), len)?;
        Ok(Segment { ptr, len, fd: None })
    }

    /// Faults in every page of the mapping now (page tables writable, pages
    /// allocated), without touching the bytes. For the control segments:
    /// their rings are written at a new page every 64 records during the
    /// first lap, and a first touch costs many times a message, which a
    /// ping-pong would then pay on one message in 64, in its tail latency
    /// (measurements: docs/perf-notes.md, "segment prefault"). Best
    /// effort: a kernel without `MADV_POPULATE_WRITE` (before 5.14) leaves
    /// the faults for later.
    pub fn prefault(&self) {
        if cfg!(miri) {
            return; // no madvise under Miri; the advice changes no contents
        }
        // SAFETY: the range is exactly this mapping; the advice only
        // populates page tables and does not change the contents.
        let _ = unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.len, libc::MADV_POPULATE_WRITE) };
    }

    /// Start of the mapping (page aligned).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Mapped length in bytes (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: at least one page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory file's descriptor in this process, for peers to open
    /// through `/proc`; `None` for a peer's mapping.
    pub fn fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(AsRawFd::as_raw_fd)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; users of the
        // pointer are bound (by the types holding this Segment, e.g. in an
        // Arc) not to outlive it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_mapping_sees_the_owners_bytes() {
        let owner = Segment::create("memwire-test", 100).unwrap();
        assert_eq!(owner.len() % page_size(), 0);
        let fd = owner.fd().unwrap();
        let peer = Segment::open_peer(std::process::id(), fd, 100).unwrap();
        assert_ne!(owner.as_ptr(), peer.as_ptr(), "a second mapping of the same file");
        // SAFETY: both pointers are valid for one page; byte 7 is in bounds.
        unsafe {
            owner.as_ptr().add(7).write_volatile(42);
            assert_eq!(peer.as_ptr().add(7).read_volatile(), 42);
        }
        assert!(Segment::open_peer(std::process::id(), fd, 1 << 30).is_err(), "too short");
        assert!(Segment::open_peer(std::process::id(), 9999, 10).is_err(), "no such fd");
    }
}
