//! Tagged messages: matching, eager and rendezvous sends, and the credits
//! that bound the unexpected-message buffer.
//!
//! Owns: the posted-receive queue and the unexpected queue (both in order,
//! so matching is MPI's: a message matches the oldest posted receive that
//! accepts it, a receive the oldest arrived message it accepts; with each
//! peer's messages delivered in order this makes messages between a pair
//! non-overtaking); the per-peer credit a sender holds and the credit a
//! receiver owes back; sends queued for lack of credit.
//!
//! Credits (DESIGN §3, "receiver credits where data needs buffering"): each
//! sender starts with `unexpected_credit` bytes toward each receiver; an
//! eager message costs its length + [`OVERHEAD`], a rendezvous announcement
//! [`OVERHEAD`]. The receiver returns the cost when the message leaves its
//! unexpected buffer (or at once when it matched a posted receive), in
//! batches of a quarter of the credit. A sender without credit queues the
//! message locally (`isend`) or waits (`send`); it never drops it, and the
//! receiver's unexpected buffer never holds more than the credit per sender.
//!
//! Must not: touch the network directly from the delivery callback (replies
//! go through the outbox) or block with the lock held.

use std::borrow::Cow;
use std::collections::VecDeque;

use mw_wire::op::{self, OpRepr, RndvRts, Status};

use super::rndv::Then;
use super::{MsgOutput, Outgoing, Sink};
use crate::deadline::{Bound, LazyDeadline};
use crate::endpoint::{Endpoint, State};
use crate::handle::{Handle, Landing};
use crate::request::{Output, RequestId, Requests};
use crate::target::Target;
use crate::{Error, Result};

/// Receive from any rank.
pub const ANY_SOURCE: u32 = u32::MAX;
/// Receive any tag (so `u64::MAX` cannot be sent as a tag).
pub const ANY_TAG: u64 = u64::MAX;

/// Bytes of credit every message costs on top of its payload: it bounds the
/// bookkeeping of many empty messages, not only their bytes.
pub(crate) const OVERHEAD: u64 = 64;

/// What a completed receive (or a probe) found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvStatus {
    /// The sending rank.
    pub source: u32,
    /// The message's tag.
    pub tag: u64,
    /// The message's length in bytes (what landed in the buffer).
    pub len: usize,
}

#[derive(Debug)]
struct Posted {
    req: RequestId,
    context: u32,
    source: u32,
    tag: u64,
    capacity: usize,
}

#[derive(Debug)]
enum Arrived {
    Eager(Vec<u8>),
    Rts { total: u64, token: u32, key: u64, offset: u64 },
}

#[derive(Debug)]
struct Unexpected {
    context: u32,
    source: u32,
    tag: u64,
    arrived: Arrived,
    charge: u64,
}

impl Unexpected {
    fn len(&self) -> usize {
        match &self.arrived {
            Arrived::Eager(data) => data.len(),
            Arrived::Rts { total, .. } => *total as usize,
        }
    }
}

/// A send waiting for credit toward its destination.
#[derive(Debug)]
struct Queued {
    req: RequestId,
    context: u32,
    tag: u64,
    /// The message (eager) or `None` for a rendezvous announcement.
    data: Option<Vec<u8>>,
    total: u64,
    key: u64,
}

impl Queued {
    fn charge(&self) -> u64 {
        match &self.data {
            Some(data) => data.len() as u64 + OVERHEAD,
            None => OVERHEAD,
        }
    }
}

fn accepts(context: u32, source: u32, tag: u64, m_context: u32, m_source: u32, m_tag: u64) -> bool {
    context == m_context && (source == ANY_SOURCE || source == m_source) && (tag == ANY_TAG || tag == m_tag)
}

/// Matching queues and credits of one endpoint.
#[derive(Debug)]
pub(crate) struct Tagged {
    posted: VecDeque<Posted>,
    unexpected: VecDeque<Unexpected>,
    /// Per destination: bytes we may still put into its unexpected buffer.
    credit: Vec<u64>,
    /// Per source: bytes consumed here and not yet returned.
    owed: Vec<u64>,
    /// Per destination: sends waiting for credit, in order.
    queued: Vec<VecDeque<Queued>>,
    queued_total: usize,
    initial: u64,
}

impl Tagged {
    pub(crate) fn new(size: u32, credit: u64) -> Tagged {
        Tagged {
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
            credit: vec![credit; size as usize],
            owed: vec![0; size as usize],
            queued: (0..size).map(|_| VecDeque::new()).collect(),
            queued_total: 0,
            initial: credit,
        }
    }

    pub(crate) fn nothing_blocked(&self) -> bool {
        self.queued_total == 0
    }

    pub(crate) fn add_credit(&mut self, peer: u32, amount: u32) {
        if let Some(credit) = self.credit.get_mut(peer as usize) {
            *credit = (*credit + u64::from(amount)).min(self.initial);
        }
    }

    /// Takes `charge` from the credit toward `dest` if nothing is queued
    /// ahead (order between a pair is kept even when credit runs short).
    pub(super) fn take_credit(&mut self, dest: u32, charge: u64) -> bool {
        let d = dest as usize;
        if self.queued[d].is_empty() && self.credit[d] >= charge {
            self.credit[d] -= charge;
            return true;
        }
        false
    }

    /// `charge` bytes from `source` left the unexpected buffer (or never
    /// entered it); returns a credit grant to send when a batch is due.
    fn consumed(&mut self, source: u32, charge: u64) -> Option<Outgoing> {
        let owed = self.owed.get_mut(source as usize)?;
        *owed += charge;
        if *owed >= self.initial / 4 {
            let amount = u32::try_from(*owed).unwrap_or(u32::MAX);
            *owed -= u64::from(amount);
            return Some(Outgoing::Credit { peer: source, class: super::CREDIT_UNEXPECTED, amount });
        }
        None
    }

    fn take_posted(&mut self, context: u32, source: u32, tag: u64) -> Option<Posted> {
        let at = self.posted.iter().position(|p| accepts(p.context, p.source, p.tag, context, source, tag))?;
        self.posted.remove(at)
    }

    fn take_unexpected(&mut self, context: u32, source: u32, tag: u64) -> Option<Unexpected> {
        let at = self.unexpected.iter().position(|u| accepts(context, source, tag, u.context, u.source, u.tag))?;
        self.unexpected.remove(at)
    }

    fn peek_unexpected(&self, context: u32, source: u32, tag: u64) -> Option<RecvStatus> {
        self.unexpected.iter().find(|u| accepts(context, source, tag, u.context, u.source, u.tag)).map(|u| RecvStatus {
            source: u.source,
            tag: u.tag,
            len: u.len(),
        })
    }

    /// Removes a posted receive that never matched; whether it was there.
    pub(super) fn cancel(&mut self, req: RequestId) -> bool {
        match self.posted.iter().position(|p| p.req == req) {
            Some(at) => {
                self.posted.remove(at);
                true
            }
            None => false,
        }
    }
}

/// Records the unexpected arrival in the stats.
fn count_unexpected(stats: &mut super::MsgStats, charge: u64, add: bool) {
    if add {
        stats.unexpected_bytes += charge;
        stats.unexpected_messages += 1;
        stats.unexpected_bytes_max = stats.unexpected_bytes_max.max(stats.unexpected_bytes);
    } else {
        stats.unexpected_bytes -= charge;
        stats.unexpected_messages -= 1;
    }
}

/// Completes receive `req` with an eager message.
fn deliver_eager(requests: &mut Requests, req: RequestId, capacity: usize, status: RecvStatus, data: Cow<'_, [u8]>) {
    if data.len() > capacity {
        // The posted buffer is left untouched; the message is consumed.
        requests.fail(req, Error::Truncated);
        return;
    }
    if let Some(MsgOutput::Recv { status: s, sink }) = requests.msg_mut(req) {
        *s = status;
        sink.fill(data);
    }
    requests.part_done(req);
}

/// Receive `req` matched a rendezvous announcement: start pulling, or refuse.
#[allow(clippy::too_many_arguments)]
fn match_rts(
    msg: &mut super::MsgState,
    requests: &mut Requests,
    req: RequestId,
    capacity: usize,
    status: RecvStatus,
    token: u32,
    key: u64,
    offset: u64,
) {
    let total = status.len as u64;
    let prepared = match requests.msg_mut(req) {
        Some(MsgOutput::Recv { status: s, sink }) if total <= capacity as u64 => {
            *s = status;
            sink.prepare(status.len).is_ok()
        }
        _ => false,
    };
    if !prepared {
        requests.fail(req, Error::Truncated);
        msg.outbox.push_back(Outgoing::RndvDone { peer: status.source, token, status: Status::Truncated });
        return;
    }
    msg.rndv.start_pull(requests, req, status.source, key, offset, total, token, Then::Collect);
}

/// An eager message arrived from `peer`.
pub(crate) fn on_eager(t: &mut Target<'_>, peer: u32, eager: &op::Eager<'_>) {
    let charge = eager.body.len() as u64 + OVERHEAD;
    let msg = &mut *t.msg;
    match msg.tagged.take_posted(eager.context, peer, eager.tag) {
        Some(posted) => {
            let status = RecvStatus { source: peer, tag: eager.tag, len: eager.body.len() };
            t.requests.set_target(posted.req, peer);
            deliver_eager(t.requests, posted.req, posted.capacity, status, Cow::Borrowed(eager.body));
            if let Some(credit) = msg.tagged.consumed(peer, charge) {
                msg.outbox.push_back(credit);
            }
        }
        None => {
            count_unexpected(&mut msg.stats, charge, true);
            msg.tagged.unexpected.push_back(Unexpected {
                context: eager.context,
                source: peer,
                tag: eager.tag,
                arrived: Arrived::Eager(eager.body.to_vec()),
                charge,
            });
        }
    }
}

/// A rendezvous announcement arrived from `peer`.
pub(crate) fn on_rts(t: &mut Target<'_>, peer: u32, rts: &RndvRts) {
    let msg = &mut *t.msg;
    match msg.tagged.take_posted(rts.context, peer, rts.tag) {
        Some(posted) => {
            let len = usize::try_from(rts.total_len).unwrap_or(usize::MAX);
            let status = RecvStatus { source: peer, tag: rts.tag, len };
            match_rts(msg, t.requests, posted.req, posted.capacity, status, rts.sender_req, rts.key, rts.offset);
            if let Some(credit) = msg.tagged.consumed(peer, OVERHEAD) {
                msg.outbox.push_back(credit);
            }
        }
        None => {
            count_unexpected(&mut msg.stats, OVERHEAD, true);
            msg.tagged.unexpected.push_back(Unexpected {
                context: rts.context,
                source: peer,
                tag: rts.tag,
                arrived: Arrived::Rts { total: rts.total_len, token: rts.sender_req, key: rts.key, offset: rts.offset },
                charge: OVERHEAD,
            });
        }
    }
}

impl State {
    /// Sends the announcement or eager message of `queued` now.
    fn send_envelope(&mut self, now: mw_proto::time::Instant, dest: u32, q: &Queued) -> Result<()> {
        match &q.data {
            Some(data) => {
                self.msg.stats.eager_sent += 1;
                let repr = OpRepr::Eager(op::Eager { context: q.context, tag: q.tag, body: &[] });
                self.send_op(now, dest, &repr, data, None)
            }
            None => {
                self.msg.stats.rndv_sent += 1;
                let repr = OpRepr::RndvRts(op::RndvRts {
                    context: q.context,
                    tag: q.tag,
                    total_len: q.total,
                    sender_req: q.req.0,
                    key: q.key,
                    offset: 0,
                });
                self.send_op(now, dest, &repr, &[], None)
            }
        }
    }

    /// Sends queued messages whose destination granted enough credit.
    pub(crate) fn pump_blocked_sends(&mut self, now: mw_proto::time::Instant) -> bool {
        if self.msg.tagged.queued_total == 0 {
            return false;
        }
        let mut worked = false;
        for dest in 0..self.size {
            let d = dest as usize;
            loop {
                let tagged = &mut self.msg.tagged;
                let Some(front) = tagged.queued[d].front() else {
                    break;
                };
                let charge = front.charge();
                let dead = dest != self.rank && self.dead[d];
                if !dead && tagged.credit[d] < charge {
                    break;
                }
                let q = tagged.queued[d].pop_front().expect("front checked");
                tagged.queued_total -= 1;
                worked = true;
                if dead {
                    let completion = self.requests.fail(q.req, Error::PeerUnreachable { rank: dest });
                    self.completions.extend(completion);
                    continue;
                }
                tagged.credit[d] -= charge;
                let sent = self.send_envelope(now, dest, &q);
                let completion = match sent {
                    // An eager send is complete once it is on its way; a
                    // rendezvous send when the receiver has pulled it.
                    Ok(()) if q.data.is_some() => self.requests.part_done(q.req),
                    Ok(()) => None,
                    Err(error) => self.requests.fail(q.req, error),
                };
                self.completions.extend(completion);
            }
        }
        worked
    }

    /// Sends eager message (`context`, `tag`, `data`) into same-host
    /// `dest`'s ring; the caller took its credit.
    fn shm_eager(&mut self, context: u32, dest: u32, tag: u64, data: &[u8]) -> Result<()> {
        let eager = op::Eager { context, tag, body: &[] };
        self.shm_send_headed(dest, op::Eager::HEADER_LEN, |header| _ = eager.emit_header(header), data)
    }

    /// The eager half of a nonblocking send: sends `data` now (the request
    /// is complete at once), or queues a copy until `dest` grants credit.
    /// `now` is asked for only when the message goes out over UDP (a clock
    /// read costs about as much as the ring push of a small message).
    pub(super) fn eager_send_request(
        &mut self,
        now: impl FnOnce() -> mw_proto::time::Instant,
        context: u32,
        dest: u32,
        tag: u64,
        data: &[u8],
    ) -> Result<RequestId> {
        let charge = data.len() as u64 + OVERHEAD;
        if self.msg.tagged.take_credit(dest, charge) {
            let id = self.requests.alloc(dest, 0)?;
            self.msg.stats.eager_sent += 1;
            let sent = if self.is_shm_peer(dest) {
                self.shm_eager(context, dest, tag, data)
            } else {
                let repr = OpRepr::Eager(op::Eager { context, tag, body: &[] });
                self.send_op(now(), dest, &repr, data, None)
            };
            if let Err(error) = sent {
                let _ = self.requests.take(id);
                return Err(error);
            }
            return Ok(id);
        }
        let id = self.requests.alloc(dest, 1)?;
        self.msg.stats.credit_stalls += 1;
        let q = Queued { req: id, context, tag, data: Some(data.to_vec()), total: 0, key: 0 };
        self.msg.tagged.queued[dest as usize].push_back(q);
        self.msg.tagged.queued_total += 1;
        Ok(id)
    }

    /// Posts a receive (or matches it against the unexpected queue at once).
    pub(super) fn post_recv(
        &mut self,
        context: u32,
        source: u32,
        tag: u64,
        capacity: usize,
        sink: Sink,
    ) -> Result<RequestId> {
        let target = if source == ANY_SOURCE { self.rank } else { source };
        let id = self.requests.alloc(target, 1)?;
        self.requests.set_output(id, Output::Msg(MsgOutput::Recv { status: RecvStatus::default(), sink }));
        let Some(found) = self.msg.tagged.take_unexpected(context, source, tag) else {
            self.msg.tagged.posted.push_back(Posted { req: id, context, source, tag, capacity });
            return Ok(id);
        };
        count_unexpected(&mut self.msg.stats, found.charge, false);
        self.requests.set_target(id, found.source);
        let status = RecvStatus { source: found.source, tag: found.tag, len: found.len() };
        match found.arrived {
            Arrived::Eager(data) => deliver_eager(&mut self.requests, id, capacity, status, Cow::Owned(data)),
            Arrived::Rts { token, key, offset, .. } => {
                match_rts(&mut self.msg, &mut self.requests, id, capacity, status, token, key, offset)
            }
        }
        if let Some(credit) = self.msg.tagged.consumed(found.source, found.charge) {
            self.msg.outbox.push_back(credit);
        }
        Ok(id)
    }
}

/// What [`State::recv_from_ring`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FromRing {
    /// Nothing: the front record is not this receive's message.
    Nothing,
    /// The message is in the receive's own buffer and its request is freed:
    /// this is the whole result.
    Collected(RecvStatus),
    /// The receive completed; collect it as any other.
    Completed,
}

impl State {
    /// Completes posted receive `id` from same-host `source` with the eager
    /// message at the front of that peer's ring, executed in place: no copy
    /// out of the ring, no trip through the generic delivery path. Only
    /// when that is exactly what the generic path would do: `id` is the
    /// oldest posted receive (so it is the one the message matches), the
    /// message is an eager one it accepts and has room for, and no credit
    /// grant falls due (the generic path sends grants at once). Anything
    /// else stays in the ring for the next poll.
    ///
    /// `out`: the buffer a nonblocking receive's wait copies its staged
    /// message into; the message then goes there directly.
    pub(crate) fn recv_from_ring(&mut self, id: RequestId, source: u32, out: Option<&mut [u8]>) -> FromRing {
        let Some(front) = self.msg.tagged.posted.front() else { return FromRing::Nothing };
        if front.req != id || self.dead.get(source as usize) != Some(&false) {
            return FromRing::Nothing;
        }
        let (context, want_source, want_tag, capacity) = (front.context, front.source, front.tag, front.capacity);
        let owed = self.msg.tagged.owed[source as usize];
        let batch = self.msg.tagged.initial / 4;
        let State { shm, msg, requests, stats, .. } = self;
        let Some(shm) = shm.as_mut() else { return FromRing::Nothing };
        let mut outcome = FromRing::Nothing;
        let taken = shm.take_if(source, |payload| {
            let want = InPlace { context, source: want_source, tag: want_tag, capacity, owed, batch };
            let Some((eager, charge)) = want.eager_from(source, payload) else { return false };
            let len = eager.body.len();
            msg.tagged.posted.pop_front();
            msg.tagged.owed[source as usize] = owed + charge;
            let status = RecvStatus { source, tag: eager.tag, len };
            // Into the receive's own buffer, and the request freed (nothing
            // else refers to it: it left the posted queue above).
            match (requests.msg_mut(id), out) {
                (Some(MsgOutput::Recv { sink: Sink::Direct { mem, .. }, .. }), _) => mem.write(0, eager.body),
                (Some(MsgOutput::Recv { sink: Sink::Staged { .. }, .. }), Some(out)) if len <= out.len() => {
                    out[..len].copy_from_slice(eager.body);
                }
                // A handed-over buffer (`irecv_owned`): filled in place; the
                // request completes and its wait gives the buffer back.
                (Some(MsgOutput::Recv { status: landed, sink: Sink::Owned { data, filled } }), _)
                    if len <= data.len() =>
                {
                    data[..len].copy_from_slice(eager.body);
                    *filled = len;
                    *landed = status;
                    requests.set_target(id, source);
                    requests.part_done(id);
                    outcome = FromRing::Completed;
                    return true;
                }
                _ => {
                    requests.set_target(id, source);
                    deliver_eager(requests, id, capacity, status, Cow::Borrowed(eager.body));
                    outcome = FromRing::Completed;
                    return true;
                }
            }
            requests.retire(id);
            outcome = FromRing::Collected(status);
            true
        });
        if taken {
            stats.shm_ring_received += 1;
        }
        outcome
    }
}

/// What a receive waiting for a message from a same-host ring asks of the
/// record at the front of that ring before taking it in place.
pub(crate) struct InPlace {
    context: u32,
    source: u32,
    tag: u64,
    capacity: usize,
    /// Credit owed to the sender before this message, and the grant batch.
    owed: u64,
    batch: u64,
}

impl InPlace {
    /// The eager message (and its credit charge) in `payload` from
    /// `source`, when it is one the receive takes in place: it matches,
    /// fits, and leaves no credit grant due (the generic path sends grants
    /// at once). Anything else stays in the ring for the generic path.
    fn eager_from<'p>(&self, source: u32, payload: &'p [u8]) -> Option<(op::Eager<'p>, u64)> {
        // The eager message itself, not the whole `OpRepr`: a smaller
        // value to return, on every same-host receive's critical path.
        if payload.first() != Some(&(op::OpCode::Eager as u8)) {
            return None;
        }
        let eager = op::Eager::parse(payload).ok()?;
        let charge = eager.body.len() as u64 + OVERHEAD;
        (accepts(self.context, self.source, self.tag, eager.context, source, eager.tag)
            && eager.body.len() <= self.capacity
            && self.owed + charge < self.batch)
            .then_some((eager, charge))
    }
}

/// What [`State::recv_unposted`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unposted {
    /// The message is in the caller's buffer.
    Received(RecvStatus),
    /// Nothing for this receive yet; look again when a record arrives.
    Wait,
    /// Leave it to the generic path: a message for it already arrived
    /// (and may need a rendezvous or fail truncated), or another receive
    /// is posted ahead of it (it would take the next match).
    Post,
    /// The source is gone and nothing it sent is left for this receive.
    Gone,
}

impl State {
    /// A blocking receive from same-host `source` without posting it: the
    /// eager message at the front of `source`'s ring goes straight into
    /// `buf`, with no request to allocate, complete and free. Only while
    /// that is what posting would do: no receive is posted (so this one
    /// would be the oldest), no arrived message matches (the receive would
    /// take that first), and the record is one [`InPlace`] accepts.
    /// Otherwise the caller posts the receive ([`Unposted::Post`]), or
    /// waits while progress executes whatever else is in the ring: an
    /// arrival for this receive then lands in the unexpected queue, where
    /// the next look finds it and answers `Post`.
    pub(crate) fn recv_unposted(&mut self, context: u32, source: u32, tag: u64, buf: &mut [u8]) -> Unposted {
        match self.unposted_receive(context, source, tag, buf.len()) {
            Ok(want) => self.recv_in_place(&want, buf),
            Err(outcome) => outcome,
        }
    }

    /// [`recv_unposted`](Self::recv_unposted)'s checks: what the receive
    /// may take in place from `source`'s ring, or why it may not
    /// ([`Unposted::Post`], [`Unposted::Gone`]).
    fn unposted_receive(
        &self,
        context: u32,
        source: u32,
        tag: u64,
        capacity: usize,
    ) -> std::result::Result<InPlace, Unposted> {
        let tagged = &self.msg.tagged;
        // `is_empty` first: iterating an empty deque still costs ~30
        // instructions, on every same-host receive's critical path.
        if !tagged.posted.is_empty()
            || (!tagged.unexpected.is_empty()
                && tagged.unexpected.iter().any(|u| accepts(context, source, tag, u.context, u.source, u.tag)))
        {
            return Err(Unposted::Post);
        }
        if self.dead.get(source as usize) != Some(&false) {
            // A posted receive would have failed with the peer; one posted
            // now would wait for nothing.
            return Err(Unposted::Gone);
        }
        Ok(InPlace { context, source, tag, capacity, owed: tagged.owed[source as usize], batch: tagged.initial / 4 })
    }

    /// [`recv_unposted`](Self::recv_unposted)'s take, for a receive its
    /// checks allowed as `want`, in the state they saw (the lock held since):
    /// the message at the front of the source's ring into `buf`, or
    /// [`Unposted::Wait`] when that is not one `want` takes.
    pub(crate) fn recv_in_place(&mut self, want: &InPlace, buf: &mut [u8]) -> Unposted {
        let State { shm, msg, stats, .. } = self;
        let Some(shm) = shm.as_mut() else { return Unposted::Post };
        let source = want.source;
        let mut received = None;
        let taken = shm.take_if(source, |payload| {
            let Some((eager, charge)) = want.eager_from(source, payload) else { return false };
            let len = eager.body.len();
            mw_transport::shm::copy_short(buf, eager.body);
            msg.tagged.owed[source as usize] = want.owed + charge;
            received = Some(RecvStatus { source, tag: eager.tag, len });
            true
        });
        if taken {
            stats.shm_ring_received += 1;
        }
        received.map_or(Unposted::Wait, Unposted::Received)
    }
}

/// Undoes a blocking call's in-place exposure (a send's, an active-message
/// request's) on every exit path (also on unwind), before the caller's
/// borrow of the data ends, and frees its token: once withdrawn, nothing
/// waits on it, and a late `RndvDone` for it finds nothing to release.
pub(super) struct Unexpose<'a> {
    pub(super) ep: &'a Endpoint,
    pub(super) token: RequestId,
}

impl Drop for Unexpose<'_> {
    fn drop(&mut self) {
        let mut state = self.ep.lock();
        state.unexpose(self.token);
        state.requests.retire(self.token);
    }
}

impl Endpoint {
    pub(super) fn check_send(&self, dest: u32, tag: u64) -> Result<()> {
        self.check_rank(dest)?;
        if tag == ANY_TAG {
            return Err(Error::InvalidArgument("ANY_TAG (u64::MAX) is not a valid tag to send"));
        }
        Ok(())
    }

    pub(super) fn check_source(&self, source: u32) -> Result<()> {
        if source == ANY_SOURCE {
            return Ok(());
        }
        self.check_rank(source)
    }

    /// Sends `data` to `dest` with `tag` and waits until the buffer may be
    /// reused: at once for a message up to the eager limit (unless `dest`
    /// owes us credit), after the receiver has pulled it for a larger one
    /// (which is then never copied: the receiver GETs it from `data`).
    /// A receiver whose buffer is too small consumes the message and gets
    /// [`Error::Truncated`]; the send still succeeds. Above the eager limit
    /// this waits for a matching receive, so a blocking send to oneself of a
    /// large message needs a receive posted first (or use `isend`).
    pub fn send(&self, dest: u32, tag: u64, data: &[u8]) -> Result<()> {
        self.send_in(0, dest, tag, data)
    }

    /// [`send`](Self::send) in matching context `context` (messages only
    /// match receives of the same context; libraries layered on memwire use
    /// their own so their traffic never mixes with the application's).
    pub fn send_in(&self, context: u32, dest: u32, tag: u64, data: &[u8]) -> Result<()> {
        self.check_send(dest, tag)?;
        let mut state = self.lock();
        // The same-host eager case here, the rest out of line: a smaller
        // stack frame on the ping-pong's path (`cost_probe send_recv`, with
        // `recv_posted` out of line too: 1390 -> 1330 instructions per round
        // trip; sharing this test with `eager_into_ring` through a helper
        // cost 30-65 of them back, through what the compiler then inlined).
        if state.is_shm_peer(dest)
            && data.len() <= state.eager_limit_to(dest)
            && state.msg.tagged.take_credit(dest, data.len() as u64 + OVERHEAD)
        {
            state.msg.stats.eager_sent += 1;
            return state.shm_eager(context, dest, tag, data);
        }
        self.send_general(state, context, dest, tag, data)
    }

    /// [`send_in`](Self::send_in) for everything but an eager message with
    /// credit to a same-host peer.
    #[cold]
    #[inline(never)]
    fn send_general(
        &self,
        mut state: crate::lock::StateGuard<'_, State>,
        context: u32,
        dest: u32,
        tag: u64,
        data: &[u8],
    ) -> Result<()> {
        let shm_dest = state.is_shm_peer(dest);
        if data.len() <= state.eager_limit_to(dest) {
            let charge = data.len() as u64 + OVERHEAD;
            let queued = {
                if state.msg.tagged.take_credit(dest, charge) {
                    state.msg.stats.eager_sent += 1;
                    if shm_dest {
                        return state.shm_eager(context, dest, tag, data);
                    }
                    let repr = OpRepr::Eager(op::Eager { context, tag, body: &[] });
                    let now = self.shared.now();
                    state.send_op(now, dest, &repr, data, None)?;
                    // On the wire now, not at the next call into the library.
                    state.transmit(now);
                    return Ok(());
                }
                let id = state.requests.alloc(dest, 1)?;
                state.msg.stats.credit_stalls += 1;
                let q = Queued { req: id, context, tag, data: Some(data.to_vec()), total: 0, key: 0 };
                state.msg.tagged.queued[dest as usize].push_back(q);
                state.msg.tagged.queued_total += 1;
                id
            };
            drop(state);
            return Handle::new(self, queued, Landing::Nothing).unbounded().wait();
        }
        drop(state);
        // Rendezvous, zero copy: the receiver pulls straight from `data`.
        let mem = crate::memory::readonly_mem(data);
        let token = self.lock().requests.alloc(dest, 1)?;
        let _unexpose = Unexpose { ep: self, token };
        {
            let mut state = self.lock();
            let key = state.expose(dest, mem, super::rndv::Keep::Borrowed, token);
            self.announce(&mut state, context, dest, tag, data.len() as u64, key.0, token);
            state.transmit(self.shared.now());
        }
        let result = self.wait_and_take(token, Bound::Unbounded).map(|(result, _)| result);
        result.unwrap_or(Ok(()))
    }

    /// `isend`'s shortcut to a same-host peer: what `send` does for an
    /// eager message with credit, into the peer's ring, complete at once
    /// (no request to allocate and collect, no clock read; 8 B isend
    /// returned in 0.04-0.10 us instead of 0.156). Whether it was sent so;
    /// `false` leaves everything to the general path. Not `isend_owned`'s:
    /// there it made the sender outrun its receiver in `--bench rate` (1 KiB:
    /// 4.7 -> 1.8-3.7 M messages/s, the surplus waiting as unexpected
    /// messages), while 8 B went 5.8 -> 7.7-9.1 M.
    fn eager_into_ring(&self, context: u32, dest: u32, tag: u64, data: &[u8]) -> Result<bool> {
        if !self.shares_memory_with(dest) {
            return Ok(false);
        }
        let mut state = self.lock();
        if data.len() > state.eager_limit_to(dest) || !state.msg.tagged.take_credit(dest, data.len() as u64 + OVERHEAD)
        {
            return Ok(false);
        }
        state.msg.stats.eager_sent += 1;
        state.shm_eager(context, dest, tag, data)?;
        Ok(true)
    }

    /// Sends (or queues, without credit) the announcement of rendezvous send `token`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn announce(
        &self,
        state: &mut State,
        context: u32,
        dest: u32,
        tag: u64,
        total: u64,
        key: u64,
        token: RequestId,
    ) {
        let q = Queued { req: token, context, tag, data: None, total, key };
        if state.msg.tagged.take_credit(dest, OVERHEAD) {
            let now = self.shared.now();
            if let Err(error) = state.send_envelope(now, dest, &q) {
                let completion = state.requests.fail(token, error);
                state.completions.extend(completion);
            }
        } else {
            state.msg.stats.credit_stalls += 1;
            state.msg.tagged.queued[dest as usize].push_back(q);
            state.msg.tagged.queued_total += 1;
        }
    }

    /// Nonblocking send. Never waits for the receiver: a message up to the
    /// eager limit goes out now (or is queued locally until `dest` grants
    /// credit); a larger one is copied once into library memory and
    /// announced, and the handle completes when the receiver has pulled it.
    pub fn isend<'a>(&'a self, dest: u32, tag: u64, data: &'a [u8]) -> Result<Handle<'a>> {
        self.isend_in(0, dest, tag, data)
    }

    /// [`isend`](Self::isend) in matching context `context`.
    pub fn isend_in<'a>(&'a self, context: u32, dest: u32, tag: u64, data: &'a [u8]) -> Result<Handle<'a>> {
        self.check_send(dest, tag)?;
        if self.eager_into_ring(context, dest, tag, data)? {
            return Ok(Handle::ready(self, Ok(Output::None)));
        }
        let mut state = self.lock_with_room(dest)?;
        // The clock only for the socket: a ring record needs neither it nor a transmit.
        let shm_dest = state.is_shm_peer(dest);
        let now = (!shm_dest).then(|| self.shared.now());
        let id = if data.len() <= state.eager_limit_to(dest) {
            state.eager_send_request(|| now.unwrap_or_else(|| self.shared.now()), context, dest, tag, data)?
        } else {
            let id = state.requests.alloc(dest, 1)?;
            let key = state.expose_copy(dest, data, id);
            self.announce(&mut state, context, dest, tag, data.len() as u64, key.0, id);
            id
        };
        if let Some(now) = now {
            state.transmit(now);
        }
        drop(state);
        Ok(Handle::new(self, id, Landing::Nothing).unbounded())
    }

    /// Receives a message from `source` (or [`ANY_SOURCE`]) with `tag` (or
    /// [`ANY_TAG`]) into `buf`, waiting for it. The data lands in `buf`
    /// directly (for a rendezvous message, the GETs write into it). A
    /// message longer than `buf` fails with [`Error::Truncated`], leaves
    /// `buf` untouched and is consumed.
    ///
    /// Waits at most `Config::wait_timeout` (none by default: until the
    /// message comes or its sender is declared dead; see
    /// [`recv_timeout`](Self::recv_timeout) for what a timeout leaves).
    pub fn recv(&self, source: u32, tag: u64, buf: &mut [u8]) -> Result<RecvStatus> {
        self.recv_in(0, source, tag, buf)
    }

    /// [`recv`](Self::recv) in matching context `context`.
    pub fn recv_in(&self, context: u32, source: u32, tag: u64, buf: &mut [u8]) -> Result<RecvStatus> {
        self.recv_in_bounded(context, source, tag, buf, Bound::Paced)
    }

    /// [`recv_in`](Self::recv_in) under `bound`.
    pub(super) fn recv_in_bounded(
        &self,
        context: u32,
        source: u32,
        tag: u64,
        buf: &mut [u8],
        bound: Bound,
    ) -> Result<RecvStatus> {
        self.check_source(source)?;
        let mut deadline = LazyDeadline::new(bound);
        if source != ANY_SOURCE && self.shares_memory_with(source) {
            if let Some(result) = self.recv_unposted_wait(context, source, tag, buf, &mut deadline) {
                return result;
            }
        }
        self.recv_posted(context, source, tag, buf, deadline)
    }

    /// [`recv_in`](Self::recv_in) through a posted receive (out of line: a
    /// smaller stack frame on the same-host shortcut's path).
    #[cold]
    #[inline(never)]
    fn recv_posted(
        &self,
        context: u32,
        source: u32,
        tag: u64,
        buf: &mut [u8],
        deadline: LazyDeadline,
    ) -> Result<RecvStatus> {
        let capacity = buf.len();
        let mem = crate::memory::scoped_mem(buf);
        let id = self.lock().post_recv(context, source, tag, capacity, Sink::Direct { mem, filled: 0 })?;
        // The handle cancels the receive if we unwind or time out, before
        // `buf`'s borrow ends.
        RecvHandle { ep: self, id, source, out: None, finished: false }.finish(deadline)
    }

    /// [`recv_in`](Self::recv_in)'s shortcut from a same-host peer (see
    /// [`State::recv_unposted`]): `Some` when the message landed in `buf`
    /// (or the peer is gone), `None` when the receive must be posted after
    /// all. Not with the
    /// progress thread on: it would move the message into the unexpected
    /// queue (a copy) before this wait saw it, where a posted receive gets
    /// it delivered in place.
    fn recv_unposted_wait(
        &self,
        context: u32,
        source: u32,
        tag: u64,
        buf: &mut [u8],
        deadline: &mut LazyDeadline,
    ) -> Option<Result<RecvStatus>> {
        if self.progress_thread_runs() {
            return None;
        }
        let mut first_look = self.lock();
        let mut outcome = match first_look.unposted_receive(context, source, tag, buf.len()) {
            Ok(want) => {
                let mut outcome = first_look.recv_in_place(&want, buf);
                if outcome != Unposted::Wait {
                    drop(first_look);
                } else {
                    self.spin_for_ring_record(first_look, |state, unchanged| {
                        // With the lock held since the first look, its checks
                        // still hold: only the take is left (~40 instructions
                        // fewer between the record's landing and the return).
                        outcome = if unchanged {
                            state.recv_in_place(&want, buf)
                        } else {
                            state.recv_unposted(context, source, tag, buf)
                        };
                        outcome != Unposted::Wait
                    });
                }
                outcome
            }
            Err(outcome) => outcome,
        };
        if outcome == Unposted::Wait {
            // Nothing is posted: a receive that times out here leaves nothing behind.
            let until = deadline.get(self);
            let in_time = self.wait_for_until(
                |state| {
                    outcome = state.recv_unposted(context, source, tag, buf);
                    outcome != Unposted::Wait
                },
                until,
            );
            if !in_time {
                return Some(Err(Error::Timeout));
            }
        }
        match outcome {
            Unposted::Received(status) => Some(Ok(status)),
            Unposted::Gone => Some(Err(Error::PeerUnreachable { rank: source })),
            Unposted::Wait | Unposted::Post => None,
        }
    }

    /// Nonblocking receive into `buf` (filled when the handle completes:
    /// the data is staged in library memory and copied into `buf` by
    /// `wait`, so a leaked handle can never write into freed memory).
    /// Dropping the handle before it matched cancels the receive.
    pub fn irecv<'a>(&'a self, source: u32, tag: u64, buf: &'a mut [u8]) -> Result<RecvHandle<'a>> {
        self.irecv_in(0, source, tag, buf)
    }

    /// [`irecv`](Self::irecv) in matching context `context`.
    pub fn irecv_in<'a>(&'a self, context: u32, source: u32, tag: u64, buf: &'a mut [u8]) -> Result<RecvHandle<'a>> {
        self.check_source(source)?;
        let id = self.lock().post_recv(context, source, tag, buf.len(), Sink::staged(buf.len()))?;
        Ok(RecvHandle { ep: self, id, source, out: Some(buf), finished: false })
    }

    /// Whether a message from `source` with `tag` has arrived and is not yet
    /// received; makes progress once. The message stays queued.
    pub fn iprobe(&self, source: u32, tag: u64) -> Result<Option<RecvStatus>> {
        self.iprobe_in(0, source, tag)
    }

    /// [`iprobe`](Self::iprobe) in matching context `context`.
    pub fn iprobe_in(&self, context: u32, source: u32, tag: u64) -> Result<Option<RecvStatus>> {
        self.check_source(source)?;
        self.progress();
        Ok(self.lock().msg.tagged.peek_unexpected(context, source, tag))
    }

    /// Waits until a message from `source` with `tag` has arrived; returns
    /// its envelope (the message stays queued for a receive). Waits at most
    /// `Config::wait_timeout` (none by default; [`Error::Timeout`]; see
    /// [`probe_timeout`](Self::probe_timeout)).
    pub fn probe(&self, source: u32, tag: u64) -> Result<RecvStatus> {
        self.probe_in(0, source, tag)
    }

    /// [`probe`](Self::probe) in matching context `context`.
    pub fn probe_in(&self, context: u32, source: u32, tag: u64) -> Result<RecvStatus> {
        self.probe_in_bounded(context, source, tag, Bound::Paced)
    }

    /// [`probe_in`](Self::probe_in) under `bound`.
    pub(super) fn probe_in_bounded(&self, context: u32, source: u32, tag: u64, bound: Bound) -> Result<RecvStatus> {
        self.check_source(source)?;
        let mut found = None;
        self.wait_for_bound(
            |state| {
                found = state.msg.tagged.peek_unexpected(context, source, tag);
                found.is_some()
            },
            bound,
        )?;
        found.ok_or(Error::InvalidArgument("probe ended without a message"))
    }
}

/// A nonblocking receive in flight. Wait on it, test it, or drop it:
/// dropping cancels the receive as a timeout does (see
/// [`wait_timeout`](RecvHandle::wait_timeout); a message that arrived whole
/// is discarded).
#[must_use = "a receive handle does nothing unless tested or waited on"]
#[derive(Debug)]
pub struct RecvHandle<'a> {
    ep: &'a Endpoint,
    id: RequestId,
    /// The rank named in the receive (or `ANY_SOURCE`): with a same-host
    /// one, the wait takes the message straight from its ring.
    source: u32,
    /// Where staged data is copied; `None` when it landed in place.
    out: Option<&'a mut [u8]>,
    finished: bool,
}

impl RecvHandle<'_> {
    /// Makes progress once and reports whether the receive is complete.
    pub fn test(&mut self) -> bool {
        self.ep.progress();
        self.is_complete()
    }

    /// Whether the receive is complete, without making progress (with the
    /// progress thread on, a receive completes while the application computes).
    pub fn is_complete(&self) -> bool {
        self.ep.lock_without_progress().requests.is_done(self.id).unwrap_or(true)
    }

    /// Waits for the message; returns its envelope. Waits at most
    /// `Config::wait_timeout` (none by default); see
    /// [`wait_timeout`](Self::wait_timeout).
    pub fn wait(self) -> Result<RecvStatus> {
        self.finish(LazyDeadline::new(Bound::Paced))
    }

    /// [`wait`](Self::wait), giving up after `timeout` with
    /// [`Error::Timeout`]. The receive is then cancelled: if no message
    /// matched it, none will; if a large message was being pulled into it,
    /// the rest is dropped and its sender's send fails with
    /// [`Error::Cancelled`]; nothing is written to the buffer after this
    /// returns. A message that arrived whole by then is received instead.
    pub fn wait_timeout(self, timeout: std::time::Duration) -> Result<RecvStatus> {
        self.finish(LazyDeadline::new(Bound::After(timeout)))
    }

    /// Cancels the receive if no message has matched it yet (MPI's
    /// `MPI_Cancel` of a receive): true when it was cancelled (no message
    /// will match it, nothing lands in the buffer, and the handle is done:
    /// drop it), false when a message has matched it (arrived, or still
    /// arriving: wait for it as usual; its sender's send completes).
    pub fn cancel_unmatched(&mut self) -> bool {
        let cancelled = !self.finished && self.ep.cancel_recv_unmatched(self.id);
        self.finished |= cancelled;
        cancelled
    }

    /// Waits for the message until `deadline`, then cancels the receive.
    pub(super) fn finish(mut self, mut deadline: LazyDeadline) -> Result<RecvStatus> {
        let id = self.id;
        // Collected under the lock that saw it complete (not a second one).
        let mut collected = None;
        let source = self.source;
        let from_ring = source != ANY_SOURCE && self.ep.shares_memory_with(source);
        let mut in_place = None;
        let mut out = self.out.take();
        let in_time = self.ep.wait_for_bounded(
            |state| {
                if state.requests.is_done(id) == Some(false) {
                    if !from_ring {
                        return false;
                    }
                    match state.recv_from_ring(id, source, out.as_deref_mut()) {
                        FromRing::Nothing => return false,
                        FromRing::Collected(status) => {
                            in_place = Some(status);
                            return true;
                        }
                        FromRing::Completed => {}
                    }
                }
                collected = Some(super::take_msg(state, id));
                true
            },
            &mut deadline,
        );
        self.finished = true;
        if !in_time {
            // Cancelled under the lock, so nothing lands in the buffer after
            // this; a message that completed meanwhile is taken instead.
            collected = Some(match self.ep.cancel_recv(id, Error::Timeout) {
                Some((result, output)) => result.map(|()| match output {
                    Output::Msg(msg) => Some(msg),
                    _ => None,
                }),
                None => Err(Error::Timeout),
            });
        }
        if let Some(status) = in_place {
            return Ok(status);
        }
        let output = collected.expect("the wait ends only after collecting")?;
        let Some(MsgOutput::Recv { status, mut sink }) = output else {
            return Err(Error::InvalidArgument("not a receive"));
        };
        if let Some(out) = out {
            let data = sink.take_staged();
            out.get_mut(..data.len()).ok_or(Error::Truncated)?.copy_from_slice(&data);
        }
        Ok(status)
    }
}

impl Drop for RecvHandle<'_> {
    fn drop(&mut self) {
        if !self.finished {
            abandon_recv(self.ep, self.id);
        }
    }
}

/// Gives up receive `id` whose handle goes away unfinished: cancelled
/// (see [`Endpoint::cancel_recv`]) and its slot freed with whatever it holds.
pub(super) fn abandon_recv(ep: &Endpoint, id: RequestId) {
    drop(ep.cancel_recv(id, Error::Cancelled));
}
