//! Remote FIFOs (seed 001, MBCF's Memory-Based FIFO; seed 000, Cenju-4's
//! message buffers): a ring of fixed-size slots owned by one rank, that any
//! rank pushes entries into and the owner pops.
//!
//! Owns: the FIFO table (key → ring), the push rule (a full FIFO refuses
//! the push with `WouldBlock` and remembers the pusher; nothing is dropped),
//! the wake-up (when the owner pops from a FIFO that refused someone, it
//! sends each refused rank a FIFO credit, and a waiting `fifo_push` retries),
//! and the ¾ watermark callback (Cenju-4's quarter-buffer interrupt).
//!
//! Must not: queue entries anywhere but the ring (its memory is allocated
//! once, at `create_fifo`), or run the watermark callback outside the lock
//! (it runs in the progress engine, like a handler).

use std::collections::HashMap;

use mw_wire::op::{self, OpRepr, Status};

use crate::deadline::{Bound, LazyDeadline};
use crate::endpoint::{Endpoint, State};
use crate::target::{Reply, Target};
use crate::{Error, Result};

/// The name of a FIFO: `(owner rank, key)` reaches it from anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FifoKey(pub u64);

type Watermark = Box<dyn FnMut(usize) + Send>;

struct Ring {
    slot_size: usize,
    slots: usize,
    bytes: Vec<u8>,
    lens: Vec<u32>,
    head: usize,
    len: usize,
    /// Ranks refused since the last pop; each gets a credit at the next pop.
    refused: Vec<u32>,
    watermark: Option<Watermark>,
    above_mark: bool,
}

impl Ring {
    fn mark(&self) -> usize {
        (self.slots * 3).div_ceil(4)
    }

    fn push(&mut self, peer: u32, entry: &[u8]) -> core::result::Result<(), Status> {
        if entry.len() > self.slot_size {
            return Err(Status::Truncated);
        }
        if self.len == self.slots {
            if !self.refused.contains(&peer) {
                self.refused.push(peer);
            }
            return Err(Status::WouldBlock);
        }
        let slot = (self.head + self.len) % self.slots;
        let at = slot * self.slot_size;
        self.bytes[at..at + entry.len()].copy_from_slice(entry);
        self.lens[slot] = entry.len() as u32;
        self.len += 1;
        if !self.above_mark && self.len >= self.mark() {
            self.above_mark = true;
            if let Some(callback) = &mut self.watermark {
                callback(self.len);
            }
        }
        Ok(())
    }

    /// Pops the oldest entry into `out`; `Err(Truncated)` leaves it queued.
    fn pop(&mut self, out: &mut [u8]) -> Result<Option<usize>> {
        if self.len == 0 {
            return Ok(None);
        }
        let len = self.lens[self.head] as usize;
        let at = self.head * self.slot_size;
        out.get_mut(..len).ok_or(Error::Truncated)?.copy_from_slice(&self.bytes[at..at + len]);
        self.head = (self.head + 1) % self.slots;
        self.len -= 1;
        if self.len < self.mark() {
            self.above_mark = false;
        }
        Ok(Some(len))
    }
}

/// The FIFOs this rank owns, and the FIFO credits it received.
pub(crate) struct Fifos {
    rings: HashMap<u64, Ring>,
    /// Per rank: FIFO credits received from it (a refused push waits for
    /// this to move).
    credits_seen: Vec<u64>,
}

impl Fifos {
    pub(crate) fn new(size: u32) -> Fifos {
        Fifos { rings: HashMap::new(), credits_seen: vec![0; size as usize] }
    }

    pub(crate) fn on_credit(&mut self, peer: u32) {
        if let Some(seen) = self.credits_seen.get_mut(peer as usize) {
            *seen += 1;
        }
    }

    fn push(&mut self, peer: u32, key: u64, entry: &[u8]) -> core::result::Result<(), Status> {
        self.rings.get_mut(&key).ok_or(Status::BadKey)?.push(peer, entry)
    }
}

/// A FIFO push arrived from `peer`.
pub(crate) fn on_push(t: &mut Target<'_>, peer: u32, push: &op::FifoPush<'_>) {
    if let Err(status) = t.msg.fifo.push(peer, push.key, push.body) {
        if status == Status::WouldBlock {
            t.msg.stats.fifo_refused += 1;
        }
        // A push completes on the ack; only a refusal answers, before it.
        if push.req != 0 {
            t.replies.push(Reply::Status { peer, req: push.req, status });
        }
    }
}

fn status_error(status: Status) -> Error {
    Error::from_status(status).unwrap_or(Error::Remote(status as u8))
}

/// A FIFO this rank owns. Dropping it removes it; later pushes get `BadKey`.
pub struct Fifo<'ep> {
    ep: &'ep Endpoint,
    key: FifoKey,
}

impl std::fmt::Debug for Fifo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fifo").field("key", &self.key).finish()
    }
}

impl State {
    /// Sends a FIFO credit to every rank a pop of ring `key` may unblock.
    fn wake_refused(&mut self, now: mw_proto::time::Instant, key: u64) {
        let Some(ring) = self.msg.fifo.rings.get_mut(&key) else {
            return;
        };
        if ring.refused.is_empty() {
            return;
        }
        for peer in std::mem::take(&mut ring.refused) {
            if peer == self.rank {
                self.msg.fifo.on_credit(peer);
            } else {
                let repr = OpRepr::Credit(op::Credit { class: super::CREDIT_FIFO, amount: 1 });
                let _ = self.send_op(now, peer, &repr, &[], None);
            }
        }
        self.transmit(now);
    }
}

impl Fifo<'_> {
    /// The key other ranks push to (with this rank's number).
    pub fn key(&self) -> FifoKey {
        self.key
    }

    /// Entries waiting.
    pub fn len(&self) -> usize {
        self.ep.lock().msg.fifo.rings.get(&self.key.0).map_or(0, |r| r.len)
    }

    /// Whether no entry is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the oldest entry into `out` if there is one; returns its
    /// length. An entry longer than `out` stays queued: [`Error::Truncated`].
    pub fn try_pop(&self, out: &mut [u8]) -> Result<Option<usize>> {
        self.ep.progress();
        let mut state = self.ep.lock();
        let popped = state.msg.fifo.rings.get_mut(&self.key.0).ok_or(Error::BadKey)?.pop(out)?;
        if popped.is_some() {
            let now = self.ep.shared.now();
            state.wake_refused(now, self.key.0);
        }
        Ok(popped)
    }

    /// Waits for an entry and takes it into `out`; returns its length.
    /// Waits at most `Config::wait_timeout` (none by default;
    /// [`Error::Timeout`], nothing taken; see [`pop_timeout`](Self::pop_timeout)).
    pub fn pop(&self, out: &mut [u8]) -> Result<usize> {
        self.pop_bounded(out, Bound::Paced)
    }

    /// [`pop`](Self::pop), giving up after `timeout` with
    /// [`Error::Timeout`] (nothing is taken then).
    pub fn pop_timeout(&self, out: &mut [u8], timeout: std::time::Duration) -> Result<usize> {
        self.pop_bounded(out, Bound::After(timeout))
    }

    fn pop_bounded(&self, out: &mut [u8], bound: Bound) -> Result<usize> {
        let mut deadline = LazyDeadline::new(bound);
        loop {
            if let Some(len) = self.try_pop(out)? {
                return Ok(len);
            }
            let key = self.key.0;
            let woken = self
                .ep
                .wait_for_bounded(|state| state.msg.fifo.rings.get(&key).is_none_or(|r| r.len > 0), &mut deadline);
            if !woken {
                return Err(Error::Timeout);
            }
        }
    }

    /// Calls `callback(entries)` whenever a push fills the FIFO to ¾ or
    /// more from below (re-armed when pops take it below ¾ again). It runs
    /// in the progress engine with the endpoint locked: it must not call
    /// the endpoint (set a flag, wake a thread).
    pub fn set_watermark(&self, callback: impl FnMut(usize) + Send + 'static) {
        if let Some(ring) = self.ep.lock().msg.fifo.rings.get_mut(&self.key.0) {
            ring.watermark = Some(Box::new(callback));
        }
    }
}

impl Drop for Fifo<'_> {
    fn drop(&mut self) {
        self.ep.lock().msg.fifo.rings.remove(&self.key.0);
    }
}

impl Endpoint {
    /// Creates a FIFO of `slots` entries of at most `slot_size` bytes each
    /// (memory for all of them is allocated now). Other ranks push with
    /// [`fifo_push`](Self::fifo_push) using this rank and [`Fifo::key`].
    pub fn create_fifo(&self, slot_size: usize, slots: usize) -> Result<Fifo<'_>> {
        let chunk = self.lock().config.chunk_bytes;
        if slot_size == 0 || slot_size > chunk {
            return Err(Error::InvalidArgument("FIFO slot size must be 1 byte to MW_CHUNK"));
        }
        let bytes = slot_size
            .checked_mul(slots)
            .filter(|&b| slots > 0 && b <= 1 << 30)
            .ok_or(Error::InvalidArgument("FIFO needs 1 or more slots and at most 1 GiB"))?;
        let mut state = self.lock();
        let key = loop {
            let mut raw = [0u8; 8];
            getrandom::getrandom(&mut raw).map_err(|e| Error::Io(e.to_string()))?;
            let key = u64::from_le_bytes(raw).max(1);
            if !state.msg.fifo.rings.contains_key(&key) {
                break key;
            }
        };
        let ring = Ring {
            slot_size,
            slots,
            bytes: vec![0; bytes],
            lens: vec![0; slots],
            head: 0,
            len: 0,
            refused: Vec::new(),
            watermark: None,
            above_mark: false,
        };
        state.msg.fifo.rings.insert(key, ring);
        Ok(Fifo { ep: self, key: FifoKey(key) })
    }

    /// Appends `entry` to FIFO `key` of `rank` once; a full FIFO refuses it
    /// with [`Error::WouldBlock`] (and the entry is not queued anywhere).
    pub fn try_fifo_push(&self, rank: u32, key: FifoKey, entry: &[u8]) -> Result<()> {
        self.check_rank(rank)?;
        let mut state = self.lock_with_room(rank)?;
        if rank == state.rank {
            let me = state.rank;
            return state.msg.fifo.push(me, key.0, entry).map_err(status_error);
        }
        let id = state.requests.alloc(rank, 1)?;
        let now = self.shared.now();
        let repr = OpRepr::FifoPush(op::FifoPush { req: id.0, key: key.0, body: &[] });
        if let Err(error) = state.send_op(now, rank, &repr, entry, Some(id)) {
            let _ = state.requests.take(id);
            return Err(error);
        }
        // The pusher waits for the outcome: ask for the ack now.
        state.proto.request_ack(now, rank);
        state.transmit(now);
        drop(state);
        crate::handle::Handle::new(self, id, crate::handle::Landing::Nothing).wait()
    }

    /// Appends `entry` to FIFO `key` of `rank`, waiting while it is full
    /// (the owner's pops wake us; the entry is never dropped). Into another
    /// rank's full FIFO it waits at most `Config::wait_timeout` (none by
    /// default: the owner's application paces it); into this rank's own
    /// full FIFO, which only another thread of this process popping could
    /// end, at most `Config::op_timeout`. Past it: [`Error::Timeout`], and
    /// the entry is not queued anywhere. [`Error::PeerUnreachable`] if the
    /// owner dies.
    pub fn fifo_push(&self, rank: u32, key: FifoKey, entry: &[u8]) -> Result<()> {
        let bound = if rank == self.rank() { Bound::Op } else { Bound::Paced };
        self.fifo_push_bounded(rank, key, entry, bound)
    }

    /// [`fifo_push`](Self::fifo_push), giving up after `timeout` instead.
    pub fn fifo_push_timeout(&self, rank: u32, key: FifoKey, entry: &[u8], timeout: std::time::Duration) -> Result<()> {
        self.fifo_push_bounded(rank, key, entry, Bound::After(timeout))
    }

    fn fifo_push_bounded(&self, rank: u32, key: FifoKey, entry: &[u8], bound: Bound) -> Result<()> {
        let until = self.deadline(bound);
        loop {
            let seen = self.lock().msg.fifo.credits_seen.get(rank as usize).copied().unwrap_or(0);
            match self.try_fifo_push(rank, key, entry) {
                Err(Error::WouldBlock) => {}
                other => return other,
            }
            let woken = self.wait_for_until(
                |state| {
                    state.msg.fifo.credits_seen[rank as usize] > seen
                        || (rank != state.rank && state.dead[rank as usize])
                },
                until,
            );
            if !woken {
                return Err(Error::Timeout);
            }
            if rank != self.rank() && self.lock().dead[rank as usize] {
                return Err(Error::PeerUnreachable { rank });
            }
        }
    }
}
