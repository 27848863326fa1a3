//! A batch of outgoing datagrams written in place, sent with as few
//! `sendmmsg` calls (and as many GSO super-datagrams) as the kernel allows.
//!
//! Owns: one contiguous arena of `slots` × `slot_len` bytes, allocated once,
//! and the list of datagrams written into it with their destinations and the
//! count already handed to the kernel. Must not: interpret datagram contents
//! or retry on its own (a partial send leaves the rest for the caller's next
//! [`UdpTransport::send_tx_batch`](super::UdpTransport::send_tx_batch)).
//!
//! Datagrams to one destination are written back to back in slot order, so
//! runs of equal-sized ones go out as one GSO send (the kernel cuts the
//! concatenation into the segments).

use std::net::{Ipv4Addr, SocketAddr};

/// Outgoing datagrams in one preallocated arena.
#[derive(Debug)]
pub struct TxBatch {
    arena: Vec<u8>,
    slot_len: usize,
    /// Destination and length of every datagram written, in slot order.
    entries: Vec<(SocketAddr, usize)>,
    /// Leading entries the kernel has accepted.
    sent: usize,
}

impl TxBatch {
    /// Room for `slots` datagrams (at least one) of up to `slot_len` bytes.
    pub fn new(slots: usize, slot_len: usize) -> Self {
        let slots = slots.max(1);
        Self { arena: vec![0; slots * slot_len], slot_len, entries: Vec::with_capacity(slots), sent: 0 }
    }

    /// The largest datagram a slot holds.
    pub fn slot_len(&self) -> usize {
        self.slot_len
    }

    /// Datagrams written and not yet sent.
    pub fn pending(&self) -> usize {
        self.entries.len() - self.sent
    }

    /// Whether every slot holds a datagram (send, then [`clear`](Self::clear)).
    pub fn is_full(&self) -> bool {
        self.entries.len() * self.slot_len >= self.arena.len()
    }

    /// The next free slot, to write a datagram into; then
    /// [`commit`](Self::commit) it. `None` when the batch is full.
    pub fn slot_mut(&mut self) -> Option<&mut [u8]> {
        let start = self.entries.len() * self.slot_len;
        self.arena.get_mut(start..start + self.slot_len)
    }

    /// Records the first `len` bytes of the free slot as a datagram to `dst`.
    ///
    /// # Panics
    ///
    /// If the batch is full or `len` exceeds the slot.
    pub fn commit(&mut self, dst: SocketAddr, len: usize) {
        assert!(!self.is_full(), "commit into a full TxBatch");
        assert!(len <= self.slot_len, "datagram longer than its slot");
        self.entries.push((dst, len));
    }

    /// Forgets every datagram (sent or not).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.sent = 0;
    }

    /// The unsent datagrams, at most `out.len()` of them, as
    /// `(destination, bytes)` written into `out`; returns how many.
    pub(super) fn unsent<'a>(&'a self, out: &mut [(SocketAddr, &'a [u8])]) -> usize {
        let mut n = 0;
        for (i, &(dst, len)) in self.entries.iter().enumerate().skip(self.sent).take(out.len()) {
            let start = i * self.slot_len;
            out[n] = (dst, &self.arena[start..start + len]);
            n += 1;
        }
        n
    }

    /// Gives up on the first unsent datagram (the kernel refused it for
    /// good); the rest stay pending.
    pub fn skip_one(&mut self) {
        self.advance(1);
    }

    /// Marks `n` more leading datagrams as accepted by the kernel.
    pub(super) fn advance(&mut self, n: usize) {
        self.sent = (self.sent + n).min(self.entries.len());
    }
}

/// A placeholder destination for unused entries of a send list.
pub(super) const NOWHERE: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_are_kept_in_order_with_their_destinations_until_sent() {
        let a: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:2".parse().unwrap();
        let mut batch = TxBatch::new(3, 8);
        for (dst, fill, len) in [(a, 1u8, 8), (a, 2, 3), (b, 3, 0)] {
            let slot = batch.slot_mut().expect("room");
            slot[..len].fill(fill);
            batch.commit(dst, len);
        }
        assert!(batch.is_full());
        assert!(batch.slot_mut().is_none());
        {
            let mut out = [(NOWHERE, &[][..]); 4];
            assert_eq!(batch.unsent(&mut out), 3);
            assert_eq!(out[0], (a, &[1u8; 8][..]));
            assert_eq!(out[1], (a, &[2u8; 3][..]));
            assert_eq!(out[2], (b, &[][..]));
        }
        batch.advance(2);
        assert_eq!(batch.pending(), 1);
        let mut out = [(NOWHERE, &[][..]); 4];
        assert_eq!(batch.unsent(&mut out), 1);
        assert_eq!(out[0], (b, &[][..]));
        batch.clear();
        assert_eq!(batch.pending(), 0);
        assert!(!batch.is_full());
    }
}
