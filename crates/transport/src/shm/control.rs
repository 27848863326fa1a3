//! The control block of a rank's shared segment: identity, the sleep flag
//! its peers check before waking it, the region directory, and the inbound
//! rings (one per same-host peer; that peer is the ring's only producer).
//!
//! ```text
//!      0  magic u64, pid u32, ring count u32, ring capacity u64
//!     64  sleepers: AtomicU64   threads of the owner about to block (own line)
//!    256  assist slots: ASSIST_SLOTS lines, one per peer index (`assist.rs`)
//!   4096  directory: DIR_SLOTS entries of 32 bytes
//! RINGS   ring i at RINGS + i * ring_len(cap)
//! ```
//!
//! The directory lets a peer resolve a region key to the owner's memory
//! without asking the owner: each entry is `key, base, len, fd, flags`. The
//! owner is the only writer and uses the key word as a seqlock: `key = 0`,
//! Release fence, the fields, then `key = K` with Release. A reader loads
//! `key` (Acquire), the fields, an Acquire fence, and `key` again; equal and
//! nonzero means the fields belong to `K` (keys are random and never reused,
//! so there is no ABA). Removing a region stores `key = 0` (Release), which
//! a peer's per-operation check of its cached slot observes.
//!
//! Owns: the control block's layout and the directory's seqlock, in both roles
//! (owner writes, peers read). Must not: judge what a region's flags allow
//! (mw-core checks rights) or interpret the rings it lays out (`ring.rs` does).

use std::io;
use std::sync::atomic::{fence, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use super::ring::{ring_len, RingView};
use super::segment::Segment;

const MAGIC: u64 = u64::from_le_bytes(*b"MWSHM\0\x01\0");
/// Directory entries per rank; regions beyond these are served through the
/// rings (the owner executes the operations), still correct, just slower.
pub const DIR_SLOTS: usize = 1024;
const DIR_AT: usize = 4096;
const ASSIST_AT: usize = 256;
/// Peers (by index in the host group) that can help this rank copy a large
/// message (`assist.rs`); in larger host groups the others copy alone.
pub const ASSIST_SLOTS: usize = (DIR_AT - ASSIST_AT) / 64;
const ENTRY: usize = 32;
const RINGS_AT: usize = DIR_AT + DIR_SLOTS * ENTRY;

/// One published region, as peers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirEntry {
    /// Region key (nonzero).
    pub key: u64,
    /// Address of the region in the owner's address space.
    pub base: u64,
    /// Length in bytes.
    pub len: u64,
    /// The owner's fd of the region's memory file, or -1 when the region
    /// is not in a shared mapping (user memory: cross-memory attach only).
    pub fd: i32,
    /// Owner-defined bits (access rights, routing hints).
    pub flags: u32,
}

/// A rank's control segment: its own (created) or a peer's (mapped).
#[derive(Debug, Clone)]
pub struct Control {
    seg: Arc<Segment>,
    ring_count: usize,
    ring_cap: usize,
    pid: u32,
}

impl Control {
    /// Bytes a control segment with `ring_count` rings of `ring_cap` takes.
    pub fn len_for(ring_count: usize, ring_cap: usize) -> usize {
        RINGS_AT + ring_count * ring_len(ring_cap)
    }

    /// Creates this process's control segment.
    pub fn create(ring_count: usize, ring_cap: usize) -> io::Result<Control> {
        if !ring_cap.is_power_of_two() || ring_cap < 2 * super::ring::SLOT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ring capacity must be a power of two of at least 128",
            ));
        }
        let seg = Arc::new(Segment::create("memwire-control", Self::len_for(ring_count, ring_cap))?);
        seg.prefault();
        let pid = std::process::id();
        let mut head = [0u8; 24];
        head[..8].copy_from_slice(&MAGIC.to_le_bytes());
        head[8..12].copy_from_slice(&pid.to_le_bytes());
        head[12..16].copy_from_slice(&(ring_count as u32).to_le_bytes());
        head[16..24].copy_from_slice(&(ring_cap as u64).to_le_bytes());
        // SAFETY: the fresh mapping is at least one page; nobody else has it yet.
        unsafe { std::ptr::copy_nonoverlapping(head.as_ptr(), seg.as_ptr(), head.len()) };
        let control = Control { seg, ring_count, ring_cap, pid };
        for i in 0..ring_count {
            control.ring(i).expect("ring inside the new segment").init_salt();
        }
        Ok(control)
    }

    /// Maps the control segment process `pid` created (`fd`, `len` bytes,
    /// as it advertised them) and checks its header.
    pub fn open_peer(pid: u32, fd: i32, len: usize) -> io::Result<Control> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("peer control segment: {what}"));
        if len < RINGS_AT {
            return Err(bad("too short"));
        }
        let seg = Arc::new(Segment::open_peer(pid, fd, len)?);
        seg.prefault();
        let mut head = [0u8; 24];
        // SAFETY: the mapping is at least RINGS_AT bytes (checked by open_peer).
        unsafe { std::ptr::copy_nonoverlapping(seg.as_ptr(), head.as_mut_ptr(), head.len()) };
        let word = |at: usize, n: usize| head[at..at + n].iter().rev().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        if word(0, 8) != MAGIC {
            return Err(bad("bad magic"));
        }
        if word(8, 4) != u64::from(pid) {
            return Err(bad("pid mismatch"));
        }
        let ring_count = word(12, 4) as usize;
        let ring_cap = word(16, 8) as usize;
        if ring_cap % super::ring::SLOT != 0
            || ring_count
                .checked_mul(ring_len(ring_cap))
                .and_then(|r| r.checked_add(RINGS_AT))
                .is_none_or(|l| l > seg.len())
        {
            return Err(bad("rings outside the segment"));
        }
        Ok(Control { seg, ring_count, ring_cap, pid })
    }

    /// The owner's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The memory file's fd in this process (own segment only).
    pub fn fd(&self) -> Option<i32> {
        self.seg.fd()
    }

    /// Mapped length.
    pub fn len(&self) -> usize {
        self.seg.len()
    }

    /// Whether the mapping is empty (never).
    pub fn is_empty(&self) -> bool {
        self.seg.is_empty()
    }

    /// Number of rings.
    pub fn ring_count(&self) -> usize {
        self.ring_count
    }

    /// Inbound ring `i` (the one peer `i` of the host group produces into).
    pub fn ring(&self, i: usize) -> Option<RingView> {
        if i >= self.ring_count {
            return None;
        }
        RingView::new(Arc::clone(&self.seg), RINGS_AT + i * ring_len(self.ring_cap), self.ring_cap)
    }

    fn at<T>(&self, offset: usize) -> *mut T {
        debug_assert!(offset + std::mem::size_of::<T>() <= RINGS_AT);
        // SAFETY: every caller passes an offset inside the header/directory,
        // which lie inside the mapping (checked at create/open).
        unsafe { self.seg.as_ptr().add(offset).cast() }
    }

    /// The owner's count of threads about to block in the kernel (the
    /// owner decides the encoding). A peer that just made something visible
    /// to the owner reads it (after a full fence) and rings the doorbell
    /// when the owner asked for it.
    pub fn sleepers(&self) -> &AtomicU64 {
        // SAFETY: offset 64 is 8-aligned, inside the header, and only ever
        // accessed atomically.
        unsafe { AtomicU64::from_ptr(self.at(64)) }
    }

    /// The assist slot of the host group's peer `index` in this segment
    /// (`None` beyond [`ASSIST_SLOTS`]).
    pub fn assist_slot(&self, index: usize) -> Option<super::assist::AssistSlot<'_>> {
        if index >= ASSIST_SLOTS {
            return None;
        }
        // SAFETY: the line at ASSIST_AT + 64 * index lies between the header
        // and the directory (index checked), inside the mapping; it is
        // 64-aligned, and every process accesses its words only atomically.
        let words: &[AtomicU64; 8] = unsafe { &*self.at::<[AtomicU64; 8]>(ASSIST_AT + 64 * index) };
        Some(super::assist::AssistSlot::new(words))
    }

    fn entry(&self, slot: usize) -> (&AtomicU64, &AtomicU64, &AtomicU64, &AtomicI32, &AtomicU32) {
        assert!(slot < DIR_SLOTS, "directory slot out of range");
        let base = DIR_AT + slot * ENTRY;
        // SAFETY: the entry lies inside the directory (slot checked), its
        // fields are naturally aligned (32-byte entries on a page boundary),
        // and every process accesses them only atomically.
        unsafe {
            (
                AtomicU64::from_ptr(self.at(base)),
                AtomicU64::from_ptr(self.at(base + 8)),
                AtomicU64::from_ptr(self.at(base + 16)),
                AtomicI32::from_ptr(self.at(base + 24)),
                AtomicU32::from_ptr(self.at(base + 28)),
            )
        }
    }

    /// Publishes `entry` in `slot` (owner only; single writer).
    pub fn dir_publish(&self, slot: usize, entry: &DirEntry) {
        let (key, base, len, fd, flags) = self.entry(slot);
        key.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        base.store(entry.base, Ordering::Relaxed);
        len.store(entry.len, Ordering::Relaxed);
        fd.store(entry.fd, Ordering::Relaxed);
        flags.store(entry.flags, Ordering::Relaxed);
        key.store(entry.key, Ordering::Release);
    }

    /// Changes the flags of a published entry (owner only).
    pub fn dir_set_flags(&self, slot: usize, value: u32) {
        self.entry(slot).4.store(value, Ordering::Release);
    }

    /// Withdraws `slot` (owner only).
    pub fn dir_remove(&self, slot: usize) {
        self.entry(slot).0.store(0, Ordering::Release);
    }

    /// The key now in `slot` and its flags (0 when empty): the per-operation
    /// check that a cached entry is still live.
    pub fn dir_key_flags(&self, slot: usize) -> (u64, u32) {
        let (key, _, _, _, flags) = self.entry(slot);
        (key.load(Ordering::Acquire), flags.load(Ordering::Acquire))
    }

    /// A consistent snapshot of `slot`, if it holds an entry.
    pub fn dir_read(&self, slot: usize) -> Option<DirEntry> {
        let (key, base, len, fd, flags) = self.entry(slot);
        let k1 = key.load(Ordering::Acquire);
        if k1 == 0 {
            return None;
        }
        let entry = DirEntry {
            key: k1,
            base: base.load(Ordering::Relaxed),
            len: len.load(Ordering::Relaxed),
            fd: fd.load(Ordering::Relaxed),
            flags: flags.load(Ordering::Relaxed),
        };
        fence(Ordering::Acquire);
        (key.load(Ordering::Relaxed) == k1).then_some(entry)
    }

    /// Finds `key` in the directory (a scan: done once per peer and region).
    pub fn dir_find(&self, key: u64) -> Option<(usize, DirEntry)> {
        if key == 0 {
            return None;
        }
        (0..DIR_SLOTS).find_map(|slot| self.dir_read(slot).filter(|e| e.key == key).map(|e| (slot, e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_sees_the_directory_and_rings() {
        let own = Control::create(3, 4096).unwrap();
        let peer = Control::open_peer(std::process::id(), own.fd().unwrap(), own.len()).unwrap();
        assert_eq!(peer.ring_count(), 3);
        let entry = DirEntry { key: 77, base: 0x1000, len: 64, fd: 5, flags: 3 };
        own.dir_publish(9, &entry);
        assert_eq!(peer.dir_find(77), Some((9, entry)));
        own.dir_set_flags(9, 7);
        assert_eq!(peer.dir_key_flags(9), (77, 7));
        own.dir_remove(9);
        assert_eq!(peer.dir_find(77), None);
        assert_eq!(peer.dir_key_flags(9).0, 0);
        peer.sleepers().store(1, Ordering::SeqCst);
        assert_eq!(own.sleepers().load(Ordering::SeqCst), 1);
        let mut tx = super::super::ring::Producer::new(peer.ring(2).unwrap());
        let mut rx = super::super::ring::Consumer::new(own.ring(2).unwrap());
        tx.push(&[b"ping"]).unwrap();
        assert!(rx.pop(|m| assert_eq!(m, b"ping")).unwrap());
        assert!(peer.ring(3).is_none());
        assert!(Control::open_peer(std::process::id(), own.fd().unwrap(), 100).is_err());
    }
}
