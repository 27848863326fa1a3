//! Raw datagrams (seed 003, PPRAM-Link raw packets): one datagram of the
//! job's packet format with no sequence number, ack or retransmission.
//!
//! **Unreliable and unordered**: a raw datagram may be lost, duplicated (by
//! the network), or overtake another; nothing tells the sender. It is
//! authenticated like every packet of the job (job id, and MAC when on).
//!
//! Owns: the bounded receive queue (full ⇒ new datagrams are dropped and
//! counted, never memory without bound). Must not: retry, or block a sender.

use std::collections::VecDeque;

use crate::deadline::Bound;
use crate::endpoint::Endpoint;
use crate::transmit::send_datagram;
use crate::{Error, Result};

/// Most raw datagrams queued before new ones are dropped.
const MAX_QUEUED: usize = 4096;
/// Most bytes queued before new datagrams are dropped.
const MAX_QUEUED_BYTES: usize = 16 << 20;

/// Received raw datagrams waiting for `recv_raw`.
#[derive(Debug, Default)]
pub(crate) struct RawQueue {
    queue: VecDeque<(u32, Vec<u8>)>,
    bytes: usize,
    received: u64,
    dropped: u64,
    scratch: Vec<u8>,
}

impl RawQueue {
    /// Queues a datagram from `peer`, or drops it when the queue is full.
    pub(crate) fn push(&mut self, peer: u32, data: Vec<u8>) {
        if self.queue.len() >= MAX_QUEUED || self.bytes + data.len() > MAX_QUEUED_BYTES {
            self.dropped += 1;
            return;
        }
        self.received += 1;
        self.bytes += data.len();
        self.queue.push_back((peer, data));
    }

    /// Takes the oldest datagram into `out`: `(source, length)`. One longer
    /// than `out` stays queued ([`Error::Truncated`]).
    fn pop(&mut self, out: &mut [u8]) -> Result<Option<(u32, usize)>> {
        let Some((_, front)) = self.queue.front() else {
            return Ok(None);
        };
        out.get_mut(..front.len()).ok_or(Error::Truncated)?.copy_from_slice(front);
        let (peer, data) = self.queue.pop_front().expect("front checked");
        self.bytes -= data.len();
        Ok(Some((peer, data.len())))
    }
}

impl Endpoint {
    /// The largest raw datagram payload (one protocol segment).
    pub fn raw_max_len(&self) -> usize {
        self.lock().proto.config().segment_size()
    }

    /// Sends one **unreliable, unordered** datagram to `rank`: it may be
    /// lost or reordered and nobody will know. At most
    /// [`raw_max_len`](Self::raw_max_len) bytes.
    pub fn send_raw(&self, rank: u32, data: &[u8]) -> Result<()> {
        self.check_rank(rank)?;
        let mut guard = self.lock();
        let state = &mut *guard;
        if data.len() > state.proto.config().segment_size() {
            return Err(Error::InvalidArgument("raw datagram larger than raw_max_len()"));
        }
        if rank == state.rank {
            state.msg.raw.push(rank, data.to_vec());
            state.msg.stats.raw_received = state.msg.raw.received;
            return Ok(());
        }
        let mut buf = std::mem::take(&mut state.msg.raw.scratch);
        buf.resize(data.len() + 256, 0);
        let encoded = state.proto.encode_raw(rank, data, &mut buf);
        let result = match encoded {
            Ok(len) => {
                let dst = state.peers[rank as usize];
                let packet = &buf[..len];
                let (udp, stats) = (&mut state.udp, &mut state.stats);
                // Unreliable by contract: a send the kernel refuses is lost like any other.
                let _ = send_datagram(udp, state.fault.as_mut(), stats, packet, dst);
                Ok(())
            }
            Err(mw_proto::SubmitError::PeerDead) => Err(Error::PeerUnreachable { rank }),
            Err(_) => Err(Error::InvalidArgument("raw datagram does not fit a packet")),
        };
        state.msg.raw.scratch = buf;
        result
    }

    /// Takes a received raw datagram into `out` if one is queued: `(source,
    /// length)`. Makes progress once first.
    pub fn try_recv_raw(&self, out: &mut [u8]) -> Result<Option<(u32, usize)>> {
        self.progress();
        let mut state = self.lock();
        let popped = state.msg.raw.pop(out);
        state.msg.stats.raw_received = state.msg.raw.received;
        state.msg.stats.raw_dropped = state.msg.raw.dropped;
        popped
    }

    /// Waits for a raw datagram and takes it into `out`: `(source, length)`.
    /// Waits as long as none comes: raw datagrams are unreliable, so a lost
    /// one never does, and when another rank sends is up to its
    /// application (no operation timeout applies). Use
    /// [`recv_raw_timeout`](Self::recv_raw_timeout) or
    /// [`try_recv_raw`](Self::try_recv_raw) where one may be lost.
    pub fn recv_raw(&self, out: &mut [u8]) -> Result<(u32, usize)> {
        self.recv_raw_bounded(out, Bound::Unbounded)
    }

    /// [`recv_raw`](Self::recv_raw), giving up with [`Error::Timeout`]
    /// when no datagram arrived within `timeout`.
    pub fn recv_raw_timeout(&self, out: &mut [u8], timeout: std::time::Duration) -> Result<(u32, usize)> {
        self.recv_raw_bounded(out, Bound::After(timeout))
    }

    fn recv_raw_bounded(&self, out: &mut [u8], bound: Bound) -> Result<(u32, usize)> {
        let until = self.deadline(bound);
        loop {
            if let Some(got) = self.try_recv_raw(out)? {
                return Ok(got);
            }
            // The datagram that ended the wait may be taken by another
            // thread first: wait again, toward the same deadline.
            if !self.wait_for_until(|state| !state.msg.raw.queue.is_empty(), until) {
                return Err(Error::Timeout);
            }
        }
    }
}
