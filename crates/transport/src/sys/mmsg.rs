//! `sendmmsg`/`recvmmsg` with preallocated header arrays, and the UDP GSO
//! (`UDP_SEGMENT`) and GRO (`UDP_GRO`) control messages.
//!
//! Kernel contract (net/ipv4/udp.c, udp_offload.c):
//! - send: a `SOL_UDP`/`UDP_SEGMENT` cmsg carrying a `u16` segment size makes
//!   the kernel cut the message's concatenated iovecs into datagrams of that
//!   size (the last may be shorter). Fails with `EIO` when the device cannot
//!   checksum-offload, `EINVAL` when the segment exceeds the path MTU or there
//!   are too many segments.
//! - receive: with `UDP_GRO` enabled the kernel may hand over several
//!   datagrams from one sender in one buffer, with a `SOL_UDP`/`UDP_GRO` cmsg
//!   carrying the segment size as a C `int`.
//!
//! Owns: the preallocated `mmsghdr`/`iovec`/cmsg arrays and the two batch
//! calls. Must not: allocate per call, choose how datagrams are grouped into
//! GSO sends (`udp/plan.rs` does), or retry a partial batch (the caller sees
//! how many went).

use std::io;
use std::mem::size_of;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use super::addr::{decode_addr, encode_addr, zeroed_storage};

/// Room for one control message: a `cmsghdr` plus an `int`, rounded up. Eight
/// words with word alignment, as `CMSG_*` arithmetic requires.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(super) struct CmsgBuf([u8; CMSG_BUF_LEN]);

impl CmsgBuf {
    pub(super) const fn new() -> Self {
        Self([0; CMSG_BUF_LEN])
    }

    pub(super) fn as_mut_ptr(&mut self) -> *mut libc::c_void {
        self.0.as_mut_ptr().cast()
    }
}

pub(super) const CMSG_BUF_LEN: usize = 64;

/// `CMSG_SPACE(n)` as a `usize`.
fn cmsg_space(payload: usize) -> usize {
    // SAFETY: CMSG_SPACE is pure arithmetic on its argument; it is only
    // marked unsafe because libc declares all CMSG_* helpers that way.
    unsafe { libc::CMSG_SPACE(payload as libc::c_uint) as usize }
}

fn zeroed_mmsghdr() -> libc::mmsghdr {
    // SAFETY: `mmsghdr` is a C struct of pointers and integers; all-zero
    // (null pointers, zero lengths) is a valid, inert value.
    unsafe { std::mem::zeroed() }
}

/// A datagram to send: its destination and its bytes, in one or more
/// pieces sent as one (gathered by the kernel from the iovecs).
pub trait OutDatagram {
    /// Where it goes.
    fn dst(&self) -> &SocketAddr;
    /// Its bytes, in order.
    fn pieces(&self) -> &[&[u8]];
    /// Total bytes.
    fn len(&self) -> usize {
        self.pieces().iter().map(|p| p.len()).sum()
    }
}

impl OutDatagram for (SocketAddr, &[u8]) {
    fn dst(&self) -> &SocketAddr {
        &self.0
    }
    fn pieces(&self) -> &[&[u8]] {
        std::slice::from_ref(&self.1)
    }
    fn len(&self) -> usize {
        self.1.len()
    }
}

impl OutDatagram for (SocketAddr, [&[u8]; 4]) {
    fn dst(&self) -> &SocketAddr {
        &self.0
    }
    fn pieces(&self) -> &[&[u8]] {
        &self.1
    }
}

/// Most pieces (iovecs) one datagram may have.
pub(crate) const MAX_PIECES: usize = 4;

/// One `sendmmsg` entry: datagrams `start..end` of the caller's list, all to
/// the same destination; with `gso_size` they go as one GSO super-datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendGroup {
    pub start: usize,
    pub end: usize,
    pub gso_size: Option<u16>,
}

/// Preallocated arrays for one `sendmmsg` call.
///
/// The headers hold raw pointers into the other arrays and into the caller's
/// payloads; they are rewritten at the start of every call and never read
/// after it returns.
pub(crate) struct SendScratch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    cmsgs: Vec<CmsgBuf>,
}

// SAFETY: the raw pointers inside `hdrs`/`iovs` are scratch values written and
// consumed within a single `send` call on the owning thread; they are never
// dereferenced after that call returns, so moving the scratch to another
// thread cannot create shared access to anything.
unsafe impl Send for SendScratch {}

impl std::fmt::Debug for SendScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendScratch")
            .field("max_groups", &self.hdrs.len())
            .field("max_datagrams", &self.iovs.len())
            .finish()
    }
}

impl SendScratch {
    /// Room for `max_datagrams` datagrams per call (each group uses one
    /// header, each non-empty piece of a datagram one iovec).
    pub(crate) fn new(max_datagrams: usize) -> Self {
        let max = max_datagrams.max(1);
        let empty_iov = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        Self {
            hdrs: vec![zeroed_mmsghdr(); max],
            iovs: vec![empty_iov; max * MAX_PIECES],
            addrs: vec![zeroed_storage(); max],
            cmsgs: vec![CmsgBuf::new(); max],
        }
    }

    /// The most datagrams one call can carry.
    pub(crate) fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Sends `groups` (which index into `msgs`) with one `sendmmsg` and returns
    /// how many groups the kernel accepted. Errors only when the first group
    /// fails; `EAGAIN`/`ENOBUFS` come back as `WouldBlock`.
    ///
    /// Panics if the groups need more entries than `capacity()`: the planner
    /// in `udp.rs` never builds such a list.
    pub(crate) fn send<D: OutDatagram>(&mut self, fd: RawFd, msgs: &[D], groups: &[SendGroup]) -> io::Result<usize> {
        assert!(groups.len() <= self.hdrs.len(), "too many send groups");
        let mut next_iov = 0;
        for (g, group) in groups.iter().enumerate() {
            let datagrams = &msgs[group.start..group.end];
            let iov_start = next_iov;
            for datagram in datagrams {
                let pieces = datagram.pieces();
                assert!(pieces.len() <= MAX_PIECES, "too many pieces in a datagram");
                assert!(next_iov + pieces.len() <= self.iovs.len(), "too many payloads");
                for piece in pieces.iter().filter(|p| !p.is_empty()) {
                    self.iovs[next_iov] = libc::iovec {
                        // The kernel only reads through this pointer (sendmmsg).
                        iov_base: piece.as_ptr() as *mut libc::c_void,
                        iov_len: piece.len(),
                    };
                    next_iov += 1;
                }
            }
            let addr_len = encode_addr(datagrams[0].dst(), &mut self.addrs[g]);

            let hdr = &mut self.hdrs[g];
            *hdr = zeroed_mmsghdr();
            hdr.msg_hdr.msg_name = (&mut self.addrs[g] as *mut libc::sockaddr_storage).cast();
            hdr.msg_hdr.msg_namelen = addr_len;
            hdr.msg_hdr.msg_iov = self.iovs[iov_start..].as_mut_ptr();
            hdr.msg_hdr.msg_iovlen = (next_iov - iov_start) as _;
            if let Some(segment) = group.gso_size {
                write_gso_cmsg(&mut hdr.msg_hdr, &mut self.cmsgs[g], segment);
            }
        }
        if groups.is_empty() {
            return Ok(0);
        }
        // SAFETY: `hdrs[..groups.len()]` were fully initialised above; every
        // pointer in them refers to `self.iovs`, `self.addrs`, `self.cmsgs`
        // (owned, not resized during the call) or to the caller's payloads
        // (borrowed for the duration of this function), with matching lengths.
        let ret = unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), groups.len() as libc::c_uint, 0) };
        super::check(ret as libc::ssize_t).map_err(super::map_send_error)
    }
}

/// Attaches a `UDP_SEGMENT` control message with `segment` to `hdr`.
fn write_gso_cmsg(hdr: &mut libc::msghdr, buf: &mut CmsgBuf, segment: u16) {
    hdr.msg_control = buf.as_mut_ptr();
    hdr.msg_controllen = cmsg_space(size_of::<u16>()) as _;
    // SAFETY: `msg_control` points to `buf`, which is 8-byte aligned and
    // `CMSG_BUF_LEN` >= CMSG_SPACE(2) bytes long, so FIRSTHDR returns a
    // non-null, aligned header inside `buf`, and CMSG_DATA points at the
    // following bytes, also inside `buf`; the u16 is written unaligned.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(hdr);
        debug_assert!(!cmsg.is_null());
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = libc::UDP_SEGMENT;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as libc::c_uint) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment);
    }
}

/// Finds a `UDP_GRO` control message in a received header and returns its
/// segment size.
pub(super) fn read_gro_cmsg(hdr: &libc::msghdr) -> Option<usize> {
    // SAFETY: the kernel filled `msg_control` with `msg_controllen` bytes of
    // well-formed control messages; FIRSTHDR/NXTHDR only return headers that
    // lie entirely within that range (or null), and CMSG_DATA of a UDP_GRO
    // message has at least `cmsg_len - CMSG_LEN(0)` >= 4 readable bytes,
    // checked before the unaligned read.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
        while !cmsg.is_null() {
            let c = &*cmsg;
            if c.cmsg_level == libc::SOL_UDP
                && c.cmsg_type == libc::UDP_GRO
                && c.cmsg_len as usize >= libc::CMSG_LEN(size_of::<libc::c_int>() as _) as usize
            {
                let size = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                return usize::try_from(size).ok().filter(|&s| s > 0);
            }
            cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
        }
    }
    None
}

/// What the kernel reported for one received slot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecvMeta {
    /// Bytes written into the slot (the whole GRO buffer when coalesced).
    pub len: usize,
    /// The sender; `None` only if the kernel returned an unexpected family.
    pub addr: Option<SocketAddr>,
    /// Segment size when several datagrams were coalesced (GRO).
    pub gro_segment: Option<usize>,
    /// The datagram did not fit in the slot and was cut (MSG_TRUNC).
    pub truncated: bool,
}

/// Preallocated receive slots plus the headers `recvmmsg` needs.
pub(crate) struct RecvScratch {
    slot_len: usize,
    bufs: Vec<u8>,
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    cmsgs: Vec<CmsgBuf>,
}

// SAFETY: as for `SendScratch`: the raw pointers in `hdrs`/`iovs` point into
// this struct's own heap buffers, are rewritten before every `recvmmsg`, and
// are never dereferenced by Rust code, so the struct may move between threads.
unsafe impl Send for RecvScratch {}

impl std::fmt::Debug for RecvScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvScratch").field("slots", &self.hdrs.len()).field("slot_len", &self.slot_len).finish()
    }
}

impl RecvScratch {
    pub(crate) fn new(slots: usize, slot_len: usize) -> Self {
        let slots = slots.max(1);
        let empty_iov = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        Self {
            slot_len,
            bufs: vec![0; slots * slot_len],
            hdrs: vec![zeroed_mmsghdr(); slots],
            iovs: vec![empty_iov; slots],
            addrs: vec![zeroed_storage(); slots],
            cmsgs: vec![CmsgBuf::new(); slots],
        }
    }

    pub(crate) fn slots(&self) -> usize {
        self.hdrs.len()
    }

    pub(crate) fn slot_len(&self) -> usize {
        self.slot_len
    }

    /// One `recvmmsg(MSG_DONTWAIT)` into slots `first_slot..`; returns the
    /// number of slots filled (counting from `first_slot`), 0 when nothing is
    /// queued. Slots before `first_slot` keep their contents.
    pub(crate) fn recv(&mut self, fd: RawFd, first_slot: usize) -> io::Result<usize> {
        let slots = self.hdrs.len();
        if first_slot >= slots {
            return Ok(0);
        }
        let base = self.bufs.as_mut_ptr();
        for i in first_slot..slots {
            // SAFETY: `i * slot_len` < `bufs.len()` because `bufs` holds
            // exactly `slots * slot_len` bytes and `i < slots`.
            let slot = unsafe { base.add(i * self.slot_len) };
            self.iovs[i] = libc::iovec { iov_base: slot.cast(), iov_len: self.slot_len };
            let hdr = &mut self.hdrs[i];
            *hdr = zeroed_mmsghdr();
            hdr.msg_hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            hdr.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            hdr.msg_hdr.msg_iov = &mut self.iovs[i];
            hdr.msg_hdr.msg_iovlen = 1;
            hdr.msg_hdr.msg_control = self.cmsgs[i].as_mut_ptr();
            hdr.msg_hdr.msg_controllen = CMSG_BUF_LEN as _;
        }
        // SAFETY: headers `first_slot..slots` were initialised above with
        // pointers to this struct's own buffers and their true lengths; the
        // buffers are not resized while the call runs; a null timeout is
        // allowed.
        let ret = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr().add(first_slot),
                (slots - first_slot) as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        match super::check(ret as libc::ssize_t) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// The kernel's report for slot `i` of the last `recv`.
    pub(crate) fn meta(&self, i: usize) -> RecvMeta {
        let hdr = &self.hdrs[i];
        RecvMeta {
            len: (hdr.msg_len as usize).min(self.slot_len),
            addr: decode_addr(&self.addrs[i], hdr.msg_hdr.msg_namelen),
            gro_segment: read_gro_cmsg(&hdr.msg_hdr),
            truncated: hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        }
    }

    /// The bytes of slot `i`.
    pub(crate) fn slot(&self, i: usize) -> &[u8] {
        &self.bufs[i * self.slot_len..(i + 1) * self.slot_len]
    }

    /// Slot `i` for writing (used to hand datagrams held back by the
    /// single-datagram path to a batch).
    pub(crate) fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i * self.slot_len..(i + 1) * self.slot_len]
    }
}
