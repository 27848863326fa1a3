//! Preallocated buffers for batched receive, and the iterator that hands
//! the received datagrams out, split back into datagrams where GRO merged them.
//!
//! Owns: [`RecvBatch`] (slots allocated once, filled by one `recvmmsg`) and
//! [`RecvIter`]. Must not: allocate per receive, or interpret datagram
//! contents; the endpoint does.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use super::gro_stash::GroStash;
use crate::sys;

/// One filled slot: `len` bytes from `from`, made of datagrams of `segment`
/// bytes (the last may be shorter; `segment == len` when not coalesced).
#[derive(Debug, Clone, Copy)]
struct Entry {
    slot: usize,
    len: usize,
    segment: usize,
    from: SocketAddr,
}

impl Entry {
    fn datagrams(&self) -> usize {
        if self.len == 0 {
            1 // an empty datagram is still a datagram
        } else {
            self.len.div_ceil(self.segment)
        }
    }
}

/// Receive buffers for [`UdpTransport::recv_batch`](super::UdpTransport::recv_batch):
/// `slots` × `slot_len` bytes allocated once, refilled by every call.
/// Make one with [`UdpTransport::new_recv_batch`](super::UdpTransport::new_recv_batch)
/// so the slots are large enough for GRO.
#[derive(Debug)]
pub struct RecvBatch {
    scratch: sys::RecvScratch,
    entries: Vec<Entry>,
    datagrams: usize,
}

impl RecvBatch {
    /// `slots` receive slots of `slot_len` bytes each (at least one slot).
    pub fn new(slots: usize, slot_len: usize) -> Self {
        let scratch = sys::RecvScratch::new(slots, slot_len);
        Self { entries: Vec::with_capacity(scratch.slots()), scratch, datagrams: 0 }
    }

    /// Number of receive slots (kernel messages per call).
    pub fn slots(&self) -> usize {
        self.scratch.slots()
    }

    /// Bytes per slot.
    pub fn slot_len(&self) -> usize {
        self.scratch.slot_len()
    }

    /// Datagrams received by the last call (after GRO splitting).
    pub fn len(&self) -> usize {
        self.datagrams
    }

    /// Whether the last call received nothing.
    pub fn is_empty(&self) -> bool {
        self.datagrams == 0
    }

    /// The datagrams of the last call, in arrival order.
    pub fn iter(&self) -> RecvIter<'_> {
        RecvIter { batch: self, entry: 0, offset: 0, left: self.datagrams }
    }

    /// Refills the batch: first with datagrams `stash` still holds from a
    /// GRO split in `recv_one` (one slot each, keeping arrival order), then
    /// with one `recvmmsg` into the remaining slots.
    pub(super) fn fill(&mut self, fd: RawFd, stash: Option<&mut GroStash>, truncated: &mut u64) -> io::Result<usize> {
        self.entries.clear();
        self.datagrams = 0;
        let slots = self.scratch.slots();
        let mut first_free = 0;
        if let Some(stash) = stash {
            while first_free < slots {
                let Some((len, from)) = stash.pop_into(self.scratch.slot_mut(first_free), truncated) else {
                    break;
                };
                self.push(Entry { slot: first_free, len, segment: len, from });
                first_free += 1;
            }
        }
        let filled = self.scratch.recv(fd, first_free)?;
        for slot in first_free..first_free + filled {
            let meta = self.scratch.meta(slot);
            let Some(from) = meta.addr.filter(|_| !meta.truncated) else {
                *truncated += 1;
                continue;
            };
            let segment = meta.gro_segment.map_or(meta.len, |s| s.min(meta.len));
            self.push(Entry { slot, len: meta.len, segment, from });
        }
        Ok(self.datagrams)
    }

    fn push(&mut self, entry: Entry) {
        self.datagrams += entry.datagrams();
        self.entries.push(entry);
    }
}

impl<'a> IntoIterator for &'a RecvBatch {
    type Item = (SocketAddr, &'a [u8]);
    type IntoIter = RecvIter<'a>;

    fn into_iter(self) -> RecvIter<'a> {
        self.iter()
    }
}

/// Iterator over `(sender, payload)` of a [`RecvBatch`].
#[derive(Debug, Clone)]
pub struct RecvIter<'a> {
    batch: &'a RecvBatch,
    entry: usize,
    /// Offset of the next datagram within the current entry's slot.
    offset: usize,
    left: usize,
}

impl<'a> Iterator for RecvIter<'a> {
    type Item = (SocketAddr, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let entry = self.batch.entries.get(self.entry)?;
        let data = &self.batch.scratch.slot(entry.slot)[..entry.len];
        let end = (self.offset + entry.segment).min(entry.len);
        let payload = &data[self.offset..end];
        if end >= entry.len {
            self.entry += 1;
            self.offset = 0;
        } else {
            self.offset = end;
        }
        self.left -= 1;
        Some((entry.from, payload))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for RecvIter<'_> {}
