//! The ring engine: operation messages to and from same-host peers.
//!
//! Owns: routing a message into a peer's ring (or a per-peer overflow queue
//! when the ring is full, drained by later progress), executing what
//! arrives in our inbound rings with the same `Target` code UDP deliveries
//! use, completing requests when the peer has *consumed* (executed) their
//! messages — the ring's head is the acknowledgement —, noticing a peer
//! process that died, and publishing this rank's regions in its directory
//! (and its staging area for large messages from other processes).
//! Must not: hold the rings' memory-ordering logic (mw-transport's ring
//! does) or touch region bytes.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use mw_proto::time::Instant as ProtoInstant;
use mw_transport::shm::{Consumer, DirEntry, Producer, PushError, RingView, DIR_SLOTS};
use mw_wire::op;

use super::{ShmShared, FLAG_LOGGED};
use crate::endpoint::State;
use crate::region::{Access, RawMem, RegionKey};
use crate::request::RequestId;
use crate::{Error, Result};

/// How often peers with outstanding traffic are checked for being alive.
const LIVENESS_EVERY: Duration = Duration::from_millis(200);
/// Messages taken from one inbound ring per progress round, so one busy
/// peer cannot starve the others (or the UDP side).
pub(crate) const BATCH: usize = 64;

#[derive(Debug)]
struct Pending {
    bytes: Vec<u8>,
    part: bool,
    /// An operation (not a reply): later direct accesses wait for it.
    ordered: bool,
    waiter: Option<RequestId>,
}

#[derive(Debug)]
struct Tx {
    producer: Producer,
    overflow: VecDeque<Pending>,
    overflow_bytes: usize,
    /// Largest record payload we send; bigger messages go in parts.
    largest: usize,
    /// Messages ever put into `overflow` (a delivery that raised it may
    /// have left its answer there).
    overflowed: u64,
}

/// Longest header [`State::shm_send_headed`] takes: an active message's
/// with every argument (an eager message's is shorter).
pub(crate) const HEADED_MAX: usize = op::AM_MAX_HEADER_LEN;
const _: () = assert!(op::Eager::HEADER_LEN <= HEADED_MAX);

/// The ring engine's state, owned by the endpoint state (under its lock).
#[derive(Debug)]
pub(crate) struct ShmState {
    pub shared: Arc<ShmShared>,
    rx: Vec<(u32, Consumer)>,
    /// By rank.
    tx: Vec<Option<Tx>>,
    dir_free: Vec<usize>,
    dir_slots: crate::region::KeyMap<RegionKey, usize>,
    last_liveness: ProtoInstant,
    /// By rank, reused every round: how far the peer had executed our ring
    /// (its `done`) before we took its replies, and how far its ring to us
    /// reached then (`None`: nothing waits on it).
    consumed: Vec<Option<(u64, u64)>>,
    /// Where senders in other processes stage the chunks of large messages
    /// they copy for us (`mw_transport::shm::stage`), made on first need.
    staging: Option<Staging>,
    /// The kernel gave no memory file for the staging area (or the
    /// directory was full): not asked again.
    staging_refused: bool,
}

/// This rank's staging area: a memory file published in its directory
/// under a key of its own, which the assist slot hands to the sender.
#[derive(Debug)]
struct Staging {
    key: RegionKey,
    /// Valid while the endpoint's state lives (`_owned`).
    mem: RawMem,
    /// Owns the mapping `mem` views; dropped with the endpoint's state.
    _owned: crate::region::OwnedMem,
}

impl ShmState {
    pub(super) fn new(shared: Arc<ShmShared>, rx: Vec<(u32, RingView)>, size: usize) -> ShmState {
        let mut tx: Vec<Option<Tx>> = (0..size).map(|_| None).collect();
        // Each peer's two rings as a pair: records carry acks of the other
        // ring, so request-reply traffic reuses a lap's first lines
        // (mw_transport::shm::ring, "Lap jumps").
        let rx = rx
            .into_iter()
            .map(|(r, inbound)| {
                let link = shared.links[r as usize].as_ref().expect("a ring from every linked peer");
                let (producer, consumer) = Producer::paired(link.out.clone(), inbound);
                let largest = link.out.capacity() / 4;
                tx[r as usize] =
                    Some(Tx { producer, overflow: VecDeque::new(), overflow_bytes: 0, largest, overflowed: 0 });
                (r, consumer)
            })
            .collect();
        ShmState {
            rx,
            tx,
            dir_free: (0..DIR_SLOTS).rev().collect(),
            dir_slots: Default::default(),
            last_liveness: ProtoInstant::from_nanos(0),
            consumed: vec![None; size],
            staging: None,
            staging_refused: false,
            shared,
        }
    }

    /// The staging area (made and published now if this is the first time);
    /// `None` when the kernel gives no memory file for it or the directory
    /// is full: senders then copy with `process_vm_writev` as before.
    pub fn staging(&mut self) -> Option<(RegionKey, RawMem)> {
        if self.staging.is_none() && !self.staging_refused {
            // Asked once: a kernel without memory files would refuse every time.
            self.staging_refused = true;
            if self.dir_free.is_empty() {
                return None;
            }
            let len = mw_transport::shm::STAGE_LEN;
            let owned = crate::region::OwnedMem::zeroed(len, true);
            let fd = owned.fd()?;
            // Written in 512 KiB pieces at once: no first-touch faults then.
            if let crate::region::OwnedMem::Shared(segment) = &owned {
                segment.prefault();
            }
            // SAFETY: `owned` moves into `self.staging` beside the view and
            // lives as long as this state; copies of the view handed out by
            // this method are used only during one pull, under the endpoint
            // lock that keeps this state (and the mapping) alive.
            #[allow(unsafe_code)]
            let mem = unsafe { owned.raw(len) };
            self.staging_refused = false;
            let key = crate::memory::random_key();
            self.publish(key, &mem, Some(fd), Access::READ_WRITE);
            self.staging = Some(Staging { key, mem, _owned: owned });
        }
        self.staging.as_ref().map(|s| (s.key, s.mem))
    }

    /// When the next check that same-host peers are alive is due, if any
    /// of them is not known dead.
    pub fn next_liveness_check(&self, dead: &[bool]) -> Option<ProtoInstant> {
        let live = self.shared.links.iter().flatten().any(|link| !dead[link.rank as usize]);
        live.then(|| self.last_liveness + LIVENESS_EVERY)
    }

    /// Whether `peer` is reached through shared memory.
    pub fn is_peer(&self, peer: u32) -> bool {
        self.tx.get(peer as usize).is_some_and(Option::is_some)
    }

    /// Makes a region visible to same-host peers (`fd` when it lives in a
    /// shared memory file; otherwise only its address, for `process_vm_*`).
    pub fn publish(&mut self, key: RegionKey, mem: &RawMem, fd: Option<i32>, access: Access) {
        let Some(slot) = self.dir_free.pop() else {
            return; // Directory full: peers reach this region through the rings.
        };
        let entry = DirEntry {
            key: key.0,
            base: mem.addr(),
            len: mem.len() as u64,
            fd: fd.unwrap_or(-1),
            flags: u32::from(access.bits()),
        };
        self.shared.own.dir_publish(slot, &entry);
        self.dir_slots.insert(key, slot);
    }

    /// Withdraws a region: peers' next direct access sees it gone.
    pub fn unpublish(&mut self, key: RegionKey) {
        if let Some(slot) = self.dir_slots.remove(&key) {
            self.shared.own.dir_remove(slot);
            self.dir_free.push(slot);
        }
    }

    /// Offers the next message in `peer`'s inbound ring to `f`, which
    /// executes it and returns `true`, or declines it and leaves it for the
    /// next poll. A taken message frees its slots (the producer is woken if
    /// it sleeps waiting for room or consumption, as after any poll). A
    /// corrupt ring is left for the poll, which declares the peer dead.
    pub fn take_if(&mut self, peer: u32, f: impl FnOnce(&[u8]) -> bool) -> bool {
        let Some((_, consumer)) = self.rx.iter_mut().find(|(p, _)| *p == peer) else { return false };
        if consumer.pop_if(f) != Ok(true) {
            return false;
        }
        if let Some(link) = self.shared.link(peer) {
            self.shared.wake_for_ring(link);
        }
        true
    }

    /// Routes peers' operations on `key` through this rank (which logs
    /// arrivals) instead of direct access.
    pub fn set_logged(&mut self, key: RegionKey, access: Access) {
        if let Some(&slot) = self.dir_slots.get(&key) {
            self.shared.own.dir_set_flags(slot, u32::from(access.bits()) | FLAG_LOGGED);
        }
    }
}

/// Whether process `pid` still runs (not gone, not a zombie).
pub(crate) fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('Z' | 'X'))
        }
        Err(_) => false,
    }
}

impl State {
    /// Whether `peer` is reached through shared memory.
    pub(crate) fn is_shm_peer(&self, peer: u32) -> bool {
        self.shm.as_ref().is_some_and(|shm| shm.is_peer(peer))
    }

    /// Bytes queued toward `peer` and not yet handed to its transport.
    pub(crate) fn queued_bytes(&self, peer: u32) -> usize {
        match self.shm.as_ref().and_then(|shm| shm.tx.get(peer as usize)?.as_ref()) {
            Some(tx) => tx.overflow_bytes,
            None => self.proto.queued_bytes(peer) + self.gets.held_bytes(peer),
        }
    }

    /// Nothing waits in a shared-memory overflow queue.
    pub(crate) fn shm_idle(&self) -> bool {
        self.shm.as_ref().is_none_or(|shm| shm.tx.iter().flatten().all(|tx| tx.overflow.is_empty()))
    }

    /// Nothing waits in the overflow queue toward `peer`. A queued message's
    /// waiter joins `ack_waiters` only once the message is in the ring, so
    /// `flush(peer)` needs this as well as empty `ack_waiters`.
    pub(crate) fn shm_idle_toward(&self, peer: u32) -> bool {
        self.shm.as_ref().and_then(|shm| shm.tx.get(peer as usize)?.as_ref()).is_none_or(|tx| tx.overflow.is_empty())
    }

    /// Sends one message made of `parts` to same-host `peer`; `waiter` is
    /// completed once the peer has executed it. `ordered`: an operation,
    /// which later direct accesses to the peer must not overtake (replies
    /// are not).
    pub(crate) fn shm_send(
        &mut self,
        peer: u32,
        parts: &[&[u8]],
        waiter: Option<RequestId>,
        ordered: bool,
    ) -> Result<()> {
        let State { shm, ack_waiters, stats, .. } = self;
        let unreachable = || Error::PeerUnreachable { rank: peer };
        let shm = shm.as_mut().ok_or_else(unreachable)?;
        stats.shm_ring_sent += 1;
        let tx = shm.tx[peer as usize].as_mut().ok_or_else(unreachable)?;
        let link = shm.shared.link(peer).ok_or_else(unreachable)?;
        let total = mw_transport::shm::parts_len(parts);
        if tx.overflow.is_empty() && total <= tx.largest {
            match tx.producer.push(parts) {
                Ok(end) => {
                    if let Some(w) = waiter {
                        ack_waiters[peer as usize].push_back((end, w));
                    }
                    if ordered {
                        link.ordered_end.store(end, Ordering::Release);
                    }
                    shm.shared.wake_for_ring(link);
                    return Ok(());
                }
                Err(PushError::Full) => {}
                Err(PushError::TooBig) => return Err(Error::InvalidArgument("message larger than the ring")),
            }
        }
        // Slow path: queue (in parts if large), then push what fits.
        let bytes = parts.concat();
        let pieces: Vec<&[u8]> = if bytes.is_empty() { vec![&[]] } else { bytes.chunks(tx.largest).collect() };
        let count = pieces.len();
        for (i, piece) in pieces.into_iter().enumerate() {
            let last = i + 1 == count;
            let waiter = if last { waiter } else { None };
            tx.overflow.push_back(Pending { bytes: piece.to_vec(), part: !last, ordered, waiter });
            if ordered {
                link.overflow.fetch_add(1, Ordering::AcqRel);
            }
        }
        tx.overflow_bytes += bytes.len();
        tx.overflowed += 1;
        self.shm_flush(peer);
        Ok(())
    }

    /// [`shm_send`](Self::shm_send) of an ordered message of `len` bytes
    /// with no waiter, written by `write` straight into its ring slot: no
    /// buffer to assemble it in, no parts to copy one by one. `false`, and
    /// nothing sent, unless it fits one slot and nothing is queued toward
    /// `peer`: the caller then sends it with `shm_send`. For an 8-byte
    /// send_recv this took `cost_probe`'s count from 1278 to 1131
    /// instructions per round trip.
    #[inline]
    pub(crate) fn shm_send_slot(&mut self, peer: u32, len: usize, write: impl FnOnce(&mut [u8])) -> bool {
        let State { shm, stats, .. } = self;
        let Some(shm) = shm.as_mut() else { return false };
        let (Some(Some(tx)), Some(link)) = (shm.tx.get_mut(peer as usize), shm.shared.link(peer)) else {
            return false;
        };
        if !tx.overflow.is_empty() {
            return false;
        }
        let Some(end) = tx.producer.push_slot_with(len, write) else { return false };
        stats.shm_ring_sent += 1;
        link.ordered_end.store(end, Ordering::Release);
        shm.shared.wake_for_ring(link);
        true
    }

    /// Sends the message made of a `header_len`-byte header, which `emit`
    /// writes, and `body` to same-host `peer` (ordered, no waiter): straight
    /// into its ring slot when it fits one ([`shm_send_slot`](Self::shm_send_slot)),
    /// through a buffer and [`shm_send`](Self::shm_send) otherwise. For
    /// headers of at most [`HEADED_MAX`] bytes (an eager message's, an
    /// active message's).
    #[inline]
    pub(crate) fn shm_send_headed(
        &mut self,
        peer: u32,
        header_len: usize,
        emit: impl Fn(&mut [u8]),
        body: &[u8],
    ) -> Result<()> {
        let in_slot = self.shm_send_slot(peer, header_len + body.len(), |slot| {
            let (header, rest) = slot.split_at_mut(header_len);
            emit(header);
            mw_transport::shm::copy_short(rest, body);
        });
        if in_slot {
            return Ok(());
        }
        let mut header = [0u8; HEADED_MAX];
        emit(&mut header[..header_len]);
        self.shm_send(peer, &[&header[..header_len], body], None, true)
    }

    /// Moves queued messages toward `peer` into its ring while they fit.
    fn shm_flush(&mut self, peer: u32) -> bool {
        let State { shm, ack_waiters, .. } = self;
        let Some(shm) = shm.as_mut() else { return false };
        let (Some(Some(tx)), Some(link)) = (shm.tx.get_mut(peer as usize), shm.shared.link(peer)) else {
            return false;
        };
        let mut pushed = false;
        while let Some(front) = tx.overflow.front() {
            let result =
                if front.part { tx.producer.push_part(&[&front.bytes]) } else { tx.producer.push(&[&front.bytes]) };
            match result {
                Ok(end) => {
                    let done = tx.overflow.pop_front().expect("front exists");
                    tx.overflow_bytes -= done.bytes.len();
                    if let Some(w) = done.waiter {
                        ack_waiters[peer as usize].push_back((end, w));
                    }
                    if done.ordered {
                        // End first, then the count: a direct access that
                        // sees the count drop also sees the new end.
                        link.ordered_end.store(end, Ordering::Release);
                        link.overflow.fetch_sub(1, Ordering::AcqRel);
                    }
                    pushed = true;
                }
                Err(PushError::Full) => break,
                Err(PushError::TooBig) => {
                    // Cannot happen (pieces are at most `largest`); drop it
                    // rather than wedge the queue.
                    if tx.overflow.pop_front().is_some_and(|p| p.ordered) {
                        link.overflow.fetch_sub(1, Ordering::AcqRel);
                    }
                }
            }
        }
        if pushed {
            shm.shared.wake_for_ring(link);
        }
        pushed
    }

    /// One round of the ring engine: drain overflow, execute arrivals,
    /// complete what peers consumed, check peers are alive.
    pub(crate) fn poll_shm(&mut self, now: ProtoInstant) -> bool {
        let Some(shm) = self.shm.as_ref() else { return false };
        let mut worked = false;
        // Polled every round, often with nothing to do: no allocation here.
        for peer in 0..shm.tx.len() {
            let backlog =
                self.shm.as_ref().is_some_and(|s| s.tx[peer].as_ref().is_some_and(|t| !t.overflow.is_empty()));
            if backlog {
                worked |= self.shm_flush(peer as u32);
            }
        }
        // How far each peer has executed, read *before* its replies: a peer
        // puts the replies to a message into its ring before it moves `done`
        // past the message (mw_transport::shm::ring, "Completion"), so once
        // we have taken everything its ring held when we read `done` (the
        // tail read after it), every error status among them has failed its
        // request before the `done` that would complete it as a success.
        let shm = self.shm.as_mut().expect("checked");
        let mut consumed_by_peer = std::mem::take(&mut shm.consumed);
        for (peer, tx) in shm.tx.iter().enumerate() {
            consumed_by_peer[peer] = match tx {
                Some(tx) if !self.ack_waiters[peer].is_empty() => {
                    let done = tx.producer.done();
                    let replies_to = shm.rx.iter().find(|(p, _)| *p as usize == peer).map_or(0, |(_, c)| c.published());
                    Some((done, replies_to))
                }
                _ => None,
            };
        }
        worked |= self.poll_shm_rings_to(now, BATCH, &consumed_by_peer);
        let mut completed = false;
        for (peer, consumed) in consumed_by_peer.iter_mut().enumerate() {
            let Some((consumed, _)) = consumed.take() else { continue };
            let waiters = &mut self.ack_waiters[peer];
            while waiters.front().is_some_and(|(end, _)| *end <= consumed) {
                let (_, req) = waiters.pop_front().expect("front checked");
                if let Some(c) = self.requests.part_done(req) {
                    self.completions.push(c);
                }
                completed = true;
            }
        }
        self.shm.as_mut().expect("checked").consumed = consumed_by_peer;
        if completed {
            worked = true;
            self.after_delivery(now);
        }
        self.shm_check_liveness(now);
        worked
    }

    /// Executes up to `batch` records of each inbound ring, and nothing
    /// else: the part of [`poll_shm`](Self::poll_shm) a waiter runs when a
    /// peek saw a record (overflow, consumption and liveness wait for its
    /// next full round; completing requests by consumption only there keeps
    /// the order poll_shm needs, see its comment).
    pub(crate) fn poll_shm_rings(&mut self, now: ProtoInstant, batch: usize) -> bool {
        self.poll_shm_rings_to(now, batch, &[])
    }

    /// [`poll_shm_rings`](Self::poll_shm_rings), and beyond `batch` from a
    /// peer whose `targets` entry is `Some((_, to))` until its ring is
    /// consumed up to `to` (see `poll_shm`).
    fn poll_shm_rings_to(&mut self, now: ProtoInstant, batch: usize, targets: &[Option<(u64, u64)>]) -> bool {
        let Some(shm) = self.shm.as_mut() else { return false };
        let mut worked = false;
        let mut rx = std::mem::take(&mut shm.rx);
        for (peer, consumer) in rx.iter_mut() {
            let peer = *peer;
            if self.dead[peer as usize] {
                continue;
            }
            let to = targets.get(peer as usize).copied().flatten().map_or(0, |(_, to)| to);
            let mut consumed_any = false;
            let mut taken = 0;
            while taken < batch || consumer.position() < to {
                taken += 1;
                let (before, _) = self.overflowed_toward(peer);
                let popped = consumer.pop_holding(|msg| self.execute_ring_record(peer, msg, || now, before));
                match popped {
                    Ok(true) => {
                        consumed_any = true;
                        self.stats.shm_ring_received += 1;
                    }
                    Ok(false) => break,
                    Err(_) => {
                        self.stats.malformed_ops += 1;
                        self.shm_peer_dead(peer);
                        break;
                    }
                }
            }
            worked |= self.after_ring_records(peer, consumer, consumed_any);
        }
        if let Some(shm) = self.shm.as_mut() {
            shm.rx = rx;
        }
        worked
    }

    /// Executes `msg`, a record `peer` sent through its ring (taken by a
    /// `Consumer::pop_holding`-style call, whose `f` this is), and returns
    /// whether `done` must stay below it. `before`: the overflow count
    /// toward `peer` before (`overflowed_toward`). `now` is read only when
    /// needed: the active-message fast path, on a request's critical path,
    /// does not.
    fn execute_ring_record(&mut self, peer: u32, msg: &[u8], now: impl Fn() -> ProtoInstant, before: u64) -> bool {
        if !self.am_from_ring(peer, msg) {
            self.deliver(peer, msg);
            self.after_delivery(now());
        }
        // What it set off in messaging (an active message's reply, a credit
        // grant) leaves now, not after the look at the next slot: that line
        // was last written a lap ago and is likely a cache miss.
        if !self.msg.outbox.is_empty() {
            self.flush_outbox(now());
        }
        // An answer that did not fit the ring back waits in the overflow
        // queue (it is still there unless the queue emptied): the peer must
        // not see this message done before it can see the answer.
        let (after, empty) = self.overflowed_toward(peer);
        after > before && !empty
    }

    /// Messages ever queued in the overflow toward `peer`, and whether that
    /// queue is empty now.
    fn overflowed_toward(&self, peer: u32) -> (u64, bool) {
        let tx = self.shm.as_ref().and_then(|s| s.tx[peer as usize].as_ref());
        tx.map_or((0, true), |t| (t.overflowed, t.overflow.is_empty()))
    }

    /// After taking records from `peer`'s ring (`consumed_any`): lets
    /// `done` catch up once every held-back answer is in the ring, and
    /// wakes the peer if it sleeps. Returns whether anything was consumed.
    fn after_ring_records(&mut self, peer: u32, consumer: &mut Consumer, mut consumed_any: bool) -> bool {
        if consumer.holds_done() && self.overflowed_toward(peer).1 {
            // Every held-back answer is in the ring now.
            consumer.release_done();
            consumed_any = true;
        }
        if consumed_any {
            // Consumption is the producer's acknowledgement (a request
            // completes when its record is consumed) and frees room for what
            // it queued: wake it if it sleeps waiting for either. Without
            // this, a rank blocked on an eager send or an overflowing ring
            // sleeps until something else arrives.
            let shared = &self.shm.as_ref().expect("rings exist").shared;
            if let Some(link) = shared.link(peer) {
                shared.wake_for_ring(link);
            }
        }
        consumed_any
    }

    /// Executes the active-message requests at the fronts of the inbound
    /// rings (one-slot records; anything else stays for `poll_shm_rings`),
    /// for a waiter whose peek just saw a record: before the waiter's own
    /// condition and the general round, which then run as before. A
    /// request's reply leaves a few layers sooner this way (`pingpong_blocks`
    /// 8-byte am, threads, same placement: see docs/messaging.md
    /// section). Returns whether it executed any.
    pub(crate) fn serve_ring_requests(&mut self, now: impl Fn() -> ProtoInstant) -> bool {
        if !self.msg.outbox.is_empty() {
            return false; // what is queued leaves first (`am_from_ring`)
        }
        let Some(shm) = self.shm.as_mut() else { return false };
        let mut rx = std::mem::take(&mut shm.rx);
        let mut served = false;
        for (peer, consumer) in rx.iter_mut() {
            let peer = *peer;
            if self.dead[peer as usize] {
                continue;
            }
            let (before, _) = self.overflowed_toward(peer);
            let request = |msg: &[u8]| msg.first() == Some(&(op::OpCode::AmRequest as u8));
            // A corrupt ring is left to `poll_shm_rings`, which finds it
            // again and declares the peer dead.
            let taken = consumer.pop_slot_if(request, |msg| self.execute_ring_record(peer, msg, &now, before));
            if taken == Ok(true) {
                served = true;
                self.stats.shm_ring_received += 1;
                self.after_ring_records(peer, consumer, true);
            }
        }
        if let Some(shm) = self.shm.as_mut() {
            shm.rx = rx;
        }
        served
    }

    fn shm_check_liveness(&mut self, now: ProtoInstant) {
        let Some(shm) = self.shm.as_mut() else { return };
        // `now`, not a clock read: this runs on every poll of the rings.
        if now.saturating_duration_since(shm.last_liveness) < LIVENESS_EVERY {
            return;
        }
        shm.last_liveness = now;
        let gone: Vec<u32> = shm
            .shared
            .links
            .iter()
            .flatten()
            .filter(|link| !self.dead[link.rank as usize] && !process_alive(link.pid))
            .map(|link| link.rank)
            .collect();
        if gone.is_empty() {
            return;
        }
        // First take what is in the rings now: what the gone peer published
        // before it exited, and what others sent since this round's poll (a
        // peer that finished `finalize`'s barrier exits at once, and the
        // root's answer that ends ours may have landed just after our poll:
        // declaring the peer dead before reading it failed that barrier in
        // a 4-process CI job). A gone peer adds nothing more; a live one that
        // keeps sending is read this far, no further.
        const DRAIN_BEFORE_DEAD: usize = 1 << 14;
        self.poll_shm_rings_to(now, DRAIN_BEFORE_DEAD, &[]);
        for peer in gone {
            self.shm_peer_dead(peer);
        }
    }

    /// A same-host peer exited or corrupted its ring: everything toward it
    /// fails with `PeerUnreachable`, as for a UDP peer declared dead.
    fn shm_peer_dead(&mut self, peer: u32) {
        let error = Error::PeerUnreachable { rank: peer };
        if !self.dead[peer as usize] {
            self.peer_events.push_back(crate::PeerEvent::Down { rank: peer });
        }
        self.dead[peer as usize] = true;
        self.ack_waiters[peer as usize].clear();
        if let Some(shm) = self.shm.as_mut() {
            if let (Some(Some(tx)), Some(link)) = (shm.tx.get_mut(peer as usize), shm.shared.link(peer)) {
                tx.overflow.clear();
                tx.overflow_bytes = 0;
                link.overflow.store(0, Ordering::Release);
                link.dead.store(true, Ordering::Release);
            }
        }
        let done = self.requests.fail_target(peer, &error);
        self.completions.extend(done);
        self.internal.peer_failed(peer);
    }
}
