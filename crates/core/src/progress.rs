//! The progress engine: one round of it, and what a round does with what
//! arrives and what is to be sent.
//!
//! Owns: receiving datagrams (batched, GRO segments) and loopback messages,
//! handing operations to the target side and sending their replies,
//! queueing operation messages toward the protocol, shared memory or
//! loopback (`State::queue_op`, in issue order behind waiting gets and fed
//! puts), turning the protocol's events (acknowledgements, dead or
//! restarted peers) into request completions, and the order of a round.
//! Must not: block, read a clock (callers pass `now`), or decide when a
//! round runs (the waits of `crate::endpoint` and the progress thread do).

use std::sync::atomic::Ordering;

use mw_proto::time::Instant as ProtoInstant;
use mw_wire::op::{self, OpRepr};

use crate::endpoint::{internal_am, submit_error, PeerEvent, State};
use crate::request::RequestId;
use crate::target::{Reply, Target};
use crate::{Error, Result};

impl State {
    /// One round of progress. Returns whether anything happened.
    pub(crate) fn progress(&mut self, now: ProtoInstant) -> bool {
        self.progress_with(now, 64)
    }

    /// A round of progress without the sockets: loopback, the shared-memory
    /// rings, and what their deliveries set in motion. For waiters whose
    /// every peer shares this host (a full round now and then still reads
    /// the socket).
    pub(crate) fn progress_local(&mut self, now: ProtoInstant) -> bool {
        let mut worked = self.drain_loopback(now);
        worked |= self.poll_shm(now);
        self.internal_progress(now);
        worked |= self.msg_progress(now);
        worked
    }

    /// Whether something local may need a progress round soon even with no
    /// ring record arriving: messaging work (pulls, an outbox, sends held for
    /// credit), records queued for a full ring, loopback or internal
    /// traffic, operations waiting to be acknowledged (a ring's consumption).
    pub(crate) fn local_work_pending(&self) -> bool {
        !self.msg.is_idle()
            || !self.shm_idle()
            || !self.loopback.is_empty()
            || !self.internal.outgoing.is_empty()
            || self.ack_waiters.iter().any(|w| !w.is_empty())
    }

    /// The part of [`progress_local`](Self::progress_local) that executes
    /// ring arrivals: the rings, then messaging and internal traffic they
    /// may have set off (a receive's pull, a credit return, a collective's
    /// next step).
    ///
    /// When every record it took was an active message executed in place
    /// (`State::am_from_ring`: the reply and what the handler queued are
    /// sent before it returns), nothing is set off, and messaging and
    /// internal traffic wait for the next periodic round: an 8-byte am
    /// target waiting in a barrier answered 1-3 ns sooner per half round
    /// trip without their idle checks (in-process alternation, EPYC VM).
    pub(crate) fn progress_rings(&mut self, now: ProtoInstant) -> bool {
        let (popped, in_place) = (self.stats.shm_ring_received, self.msg.stats.am_in_place);
        let mut worked = self.poll_shm_rings(now, crate::shm::engine::BATCH);
        if self.stats.shm_ring_received - popped != self.msg.stats.am_in_place - in_place {
            self.internal_progress(now);
            worked |= self.msg_progress(now);
        }
        worked
    }

    /// One round of progress receiving at most `max_datagrams`.
    pub(crate) fn progress_with(&mut self, now: ProtoInstant, max_datagrams: usize) -> bool {
        let mut worked = self.drain_loopback(now);
        let mut taken = 0;
        while taken < max_datagrams {
            // One receive: a datagram, or (GRO) a run of them from one
            // sender, each handled in place in `rx_buf`. Their acks leave
            // together at the end of the round.
            let Ok(Some(rx)) = self.udp.recv_segments(&mut self.rx_buf) else {
                break;
            };
            worked = true;
            taken += rx.count();
            self.with_transmit_held(now, |state| {
                let mut start = 0;
                for _ in 0..rx.count() {
                    let end = (start + rx.segment).min(rx.len);
                    state.receive_datagram(now, start..end);
                    start = end;
                }
            });
        }
        worked |= self.mcast_receive(now, max_datagrams);
        worked |= self.poll_shm(now);
        if self.proto.poll_timeout().is_some_and(|t| t <= now) {
            self.proto.handle_timeout(now);
            worked = true;
        }
        worked |= self.drain_events(now);
        // After the acknowledgements: the room they made takes more get
        // requests and fed puts this round.
        if !self.gets.is_idle() {
            worked |= self.pump_gets(now);
        }
        self.internal_progress(now);
        worked |= self.msg_progress(now);
        worked |= self.mcast_progress(now);
        worked |= self.transmit(now);
        worked
    }

    /// Whether data toward or from a UDP peer is still in flight: sent and
    /// not yet acknowledged, queued behind the window, or gets still to be
    /// requested (what the `Auto` mode's watchdog drives while the
    /// application computes).
    pub(crate) fn udp_transfer_pending(&self) -> bool {
        !self.gets.is_idle() || !self.proto.is_quiescent()
    }

    /// When the progress engine must run again even if nothing arrives:
    /// the protocol's timers and the multicast members'.
    pub(crate) fn next_timeout(&self) -> Option<ProtoInstant> {
        // Same-host peers have no protocol timers: a blocked waiter wakes
        // for the liveness check, or a peer that died would never be noticed.
        let shm = self.shm.as_ref().and_then(|shm| shm.next_liveness_check(&self.dead));
        [self.proto.poll_timeout(), self.mcast.poll_timeout(), shm].into_iter().flatten().min()
    }

    /// One received datagram, `rx_buf[at]`.
    fn receive_datagram(&mut self, now: ProtoInstant, at: std::ops::Range<usize>) {
        let datagram = &self.rx_buf[at.clone()];
        if datagram == crate::shm::DOORBELL {
            return; // a same-host peer woke us; the rings are polled in the round
        }
        if mw_wire::peek_packet_type(datagram) == Some(mw_wire::PacketType::Mcast) {
            self.mcast_datagram(now, at); // a repair, by unicast
            return;
        }
        let State { proto, regions, requests, gets, replies, completions, stats, rx_buf, internal, msg, mcast, .. } =
            self;
        let mut target = Target { regions, requests, gets, replies, completions, stats, internal, msg, mcast };
        // Rejected packets are counted by the protocol; nothing else to do.
        let _ = proto.handle_datagram(now, &rx_buf[at], &mut |peer, msg| target.on_message(peer, msg));
        self.after_delivery(now);
    }

    fn drain_loopback(&mut self, now: ProtoInstant) -> bool {
        let mut worked = false;
        while let Some((msg, waiter)) = self.loopback.pop_front() {
            worked = true;
            let me = self.rank;
            let State { regions, requests, gets, replies, completions, stats, internal, msg: m, mcast, .. } = self;
            Target { regions, requests, gets, replies, completions, stats, internal, msg: m, mcast }
                .on_message(me, &msg);
            if let Some(id) = waiter {
                // A put to ourselves completes on delivery (there is no ack),
                // so a rejection must fail it now: its status reply, queued
                // behind this message, would find the request already done.
                let rejected = self.replies.iter().position(|reply| reply.refuses(me, id.0));
                let completion = match rejected.map(|i| self.replies.remove(i)).and_then(|r| r.status()) {
                    Some(status) => self.requests.fail(id, crate::target::fail_status(status)),
                    None => self.requests.part_done(id),
                };
                if let Some(c) = completion {
                    self.completions.push(c);
                }
            }
            self.after_delivery(now);
        }
        worked
    }

    /// Executes one message from `peer` that arrived outside the protocol
    /// (a shared-memory ring). The caller then sends the replies it queued
    /// ([`State::after_delivery`]).
    pub(crate) fn deliver(&mut self, peer: u32, msg: &[u8]) {
        let State { regions, requests, gets, replies, completions, stats, internal, msg: m, mcast, .. } = self;
        Target { regions, requests, gets, replies, completions, stats, internal, msg: m, mcast }.on_message(peer, msg);
    }

    /// Submits the replies the delivered operations asked for, then applies
    /// completion notifications.
    pub(crate) fn after_delivery(&mut self, now: ProtoInstant) {
        let replies = std::mem::take(&mut self.replies);
        for reply in &replies {
            self.send_reply(now, reply);
        }
        if !replies.is_empty() && !self.hold_transmit {
            self.transmit(now);
        }
        let mut replies = replies;
        replies.clear();
        if self.replies.is_empty() {
            self.replies = replies;
        }
        if self.completions.is_empty() {
            return;
        }
        // Drained in place: the vector keeps its capacity (taking it would
        // free it here and allocate again at the next completion).
        let mut completions = std::mem::take(&mut self.completions);
        for completion in completions.drain(..) {
            if let Some((key, offset)) = completion.notify {
                if let Ok(region) = self.regions.get(key) {
                    if region.mem.is_aligned(offset as usize, 8) && offset + 8 <= region.mem.len() as u64 {
                        region.mem.atomic_u64(offset as usize).fetch_add(1, Ordering::Release);
                    }
                }
            }
        }
        if self.completions.is_empty() {
            self.completions = completions;
        }
    }

    fn send_reply(&mut self, now: ProtoInstant, reply: &Reply) {
        match *reply {
            Reply::Status { peer, req, status } => {
                let repr = OpRepr::OpStatus(op::OpStatus { req, status });
                let _ = self.send_op(now, peer, &repr, &[], None);
            }
            Reply::Atomic { peer, req, status, value } => {
                let repr = OpRepr::AtomicResponse(op::AtomicResponse { req, status, value });
                let _ = self.send_op(now, peer, &repr, &[], None);
            }
            Reply::GetError { peer, req, status } => {
                let repr = OpRepr::GetResponse(op::GetResponse { req, status, body: &[] });
                let _ = self.send_op(now, peer, &repr, &[], None);
            }
            Reply::Get { peer, req, key, offset, len } => {
                let Ok(region) = self.regions.get(key) else {
                    // Deregistered since the check: still answered.
                    return self.send_reply(now, &Reply::GetError { peer, req, status: op::Status::BadKey });
                };
                let mem = region.mem;
                mem.with_slice(offset, len, |data| self.send_get_data(now, peer, req, data));
            }
            Reply::GetData { peer, req, ref data } => self.send_get_data(now, peer, req, data),
            Reply::GetStrided { peer, req, .. } => match reply.read(&self.regions) {
                Some(Ok(gathered)) => {
                    let repr = OpRepr::GetResponse(op::GetResponse { req, status: op::Status::Ok, body: &[] });
                    let _ = self.send_op(now, peer, &repr, &gathered, None);
                }
                _ => self.send_reply(now, &Reply::GetError { peer, req, status: op::Status::BadKey }),
            },
        }
    }

    /// Sends a get's answer, `data`, to `peer`.
    fn send_get_data(&mut self, now: ProtoInstant, peer: u32, req: u32, data: &[u8]) {
        let repr = OpRepr::GetResponse(op::GetResponse { req, status: op::Status::Ok, body: &[] });
        let hlen = repr.emit_header(&mut self.hdr_buf);
        if self.is_shm_peer(peer) {
            let hdr = std::mem::take(&mut self.hdr_buf);
            let _ = self.shm_send(peer, &[&hdr[..hlen], data], None, false);
            self.hdr_buf = hdr;
            return;
        }
        let hdr = &self.hdr_buf[..hlen];
        if peer == self.rank {
            let mut msg = Vec::with_capacity(hlen + data.len());
            msg.extend_from_slice(hdr);
            msg.extend_from_slice(data);
            self.loopback.push_back((msg, None));
            return;
        }
        // Over UDP one response per datagram, so the requester lands each
        // straight from its receive buffer; a span asked for at once
        // (crate::get_window) goes back as a run of them.
        let proto = &mut self.proto;
        let piece = proto.config().segment_size().saturating_sub(hlen).max(1);
        if data.is_empty() {
            let _ = proto.submit(now, peer, &[hdr]);
        } else {
            for part in data.chunks(piece) {
                let _ = proto.submit(now, peer, &[hdr, part]);
            }
        }
    }

    /// Sends one operation message (header from `repr`, then `body`) to
    /// `peer`; `waiter` is completed by the peer's ack. Loopback for self.
    pub(crate) fn send_op(
        &mut self,
        now: ProtoInstant,
        peer: u32,
        repr: &OpRepr<'_>,
        body: &[u8],
        waiter: Option<RequestId>,
    ) -> Result<()> {
        if self.queue_op(now, peer, repr, body, waiter)? && !self.hold_transmit {
            // Out now rather than at the end of the next progress round,
            // which would first spend a receive syscall (latency: the
            // initiator's request and the target's reply both leave here).
            self.transmit(now);
        }
        Ok(())
    }

    /// [`send_op`](Self::send_op) without sending: returns `true` when the
    /// message went to the protocol and leaves at the next
    /// [`transmit`](Self::transmit) (the caller queues several, then
    /// transmits them as one batch), `false` when it was delivered or queued
    /// by another path (loopback, shared memory).
    pub(crate) fn queue_op(
        &mut self,
        now: ProtoInstant,
        peer: u32,
        repr: &OpRepr<'_>,
        body: &[u8],
        waiter: Option<RequestId>,
    ) -> Result<bool> {
        let hlen = repr.emit_header(&mut self.hdr_buf);
        if peer == self.rank {
            let mut msg = Vec::with_capacity(hlen + body.len());
            msg.extend_from_slice(&self.hdr_buf[..hlen]);
            msg.extend_from_slice(body);
            self.loopback.push_back((msg, waiter));
            return Ok(false);
        }
        if self.dead[peer as usize] {
            return Err(Error::PeerUnreachable { rank: peer });
        }
        // Replies and the internal collective's messages are not operations
        // a later direct access (shm) or a get still waiting for its window
        // (UDP) must keep order with.
        let ordered = match repr {
            OpRepr::OpStatus(_) | OpRepr::AtomicResponse(_) | OpRepr::GetResponse(_) => false,
            OpRepr::AmRequest(am) => am.handler < crate::internal::RESERVED_HANDLER_BASE,
            _ => true,
        };
        if self.is_shm_peer(peer) {
            let hdr = std::mem::take(&mut self.hdr_buf);
            let sent = self.shm_send(peer, &[&hdr[..hlen], body], waiter, ordered);
            self.hdr_buf = hdr;
            return sent.map(|()| false);
        }
        // A get request toward a UDP peer comes only from the window, in
        // order; anything else issued while a get waits there waits behind it.
        if ordered && !matches!(repr, OpRepr::GetRequest(_)) && self.gets.must_hold(peer) {
            self.hold_behind_gets(peer, hlen, body, waiter);
            return Ok(false);
        }
        match self.proto.submit(now, peer, &[&self.hdr_buf[..hlen], body]) {
            Ok(id) => {
                if let Some(w) = waiter {
                    self.ack_waiters[peer as usize].push_back((id.0, w));
                }
                Ok(true)
            }
            Err(error) => Err(submit_error(error, peer, self.size)),
        }
    }

    #[cold]
    fn hold_behind_gets(&mut self, peer: u32, hlen: usize, body: &[u8], waiter: Option<RequestId>) {
        let mut msg = Vec::with_capacity(hlen + body.len());
        msg.extend_from_slice(&self.hdr_buf[..hlen]);
        msg.extend_from_slice(body);
        self.gets.hold(peer, crate::get_window::HeldOp { msg, waiter });
    }

    /// Rank 0 sends completed internal gathers to the others.
    fn internal_progress(&mut self, now: ProtoInstant) {
        for (seq, body) in std::mem::take(&mut self.internal.outgoing) {
            for peer in 1..self.size {
                let repr = internal_am(crate::internal::HANDLER_RESULT, seq);
                if self.send_op(now, peer, &repr, &body, None).is_err() {
                    self.internal.peer_failed(peer);
                }
            }
        }
    }

    fn drain_events(&mut self, now: ProtoInstant) -> bool {
        let mut worked = false;
        while let Some(event) = self.proto.poll_event() {
            worked = true;
            match event {
                mw_proto::Event::Acked { peer, upto } => {
                    let waiters = &mut self.ack_waiters[peer as usize];
                    while waiters.front().is_some_and(|(id, _)| *id <= upto.0) {
                        let (_, req) = waiters.pop_front().expect("front checked");
                        if let Some(c) = self.requests.part_done(req) {
                            self.completions.push(c);
                        }
                    }
                }
                mw_proto::Event::PeerDead { peer } => {
                    let error = Error::PeerUnreachable { rank: peer };
                    // Its requests are failed below, with everything else toward it.
                    let _ = self.gets.clear_peer(peer);
                    self.dead[peer as usize] = true;
                    self.peer_events.push_back(PeerEvent::Down { rank: peer });
                    self.ack_waiters[peer as usize].clear();
                    let done = self.requests.fail_target(peer, &error);
                    self.completions.extend(done);
                    self.internal.peer_failed(peer);
                }
                mw_proto::Event::PeerRestarted { peer, .. } => {
                    // Everything outstanding toward the peer was addressed to
                    // its old incarnation: its regions and keys died with it
                    // (a restarted process allocates new, random keys), and a
                    // get or fetching atomic it had accepted will never be
                    // answered. Fail them all rather than let a caller hang;
                    // operations issued from now on use the new connection.
                    self.dead[peer as usize] = false;
                    self.peer_events.push_back(PeerEvent::Restarted { rank: peer });
                    let error = Error::PeerUnreachable { rank: peer };
                    let _ = self.gets.clear_peer(peer);
                    self.ack_waiters[peer as usize].clear();
                    let done = self.requests.fail_target(peer, &error);
                    self.completions.extend(done);
                    self.internal.peer_failed(peer);
                }
                mw_proto::Event::Raw { peer, data } => self.msg.raw.push(peer, data),
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }
        if !self.completions.is_empty() {
            self.after_delivery(now);
        }
        worked
    }

    /// Runs `body` with messages to the protocol held back, then transmits
    /// them together: what a batch of received datagrams or a round of get
    /// requests sets off leaves as one batch of datagrams (GSO runs), not
    /// one system call each. Nested holds transmit once, at the outermost.
    pub(crate) fn with_transmit_held<R>(&mut self, now: ProtoInstant, body: impl FnOnce(&mut State) -> R) -> R {
        let outer = !std::mem::replace(&mut self.hold_transmit, true);
        let result = body(self);
        if outer {
            self.hold_transmit = false;
            self.transmit(now);
        }
        result
    }
}
