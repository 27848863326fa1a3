//! The target side: what happens when an operation message is delivered.
//!
//! Owns: executing each incoming operation exactly as the wire describes it,
//! after the protection gate (known key, rights, overflow-safe bounds,
//! alignment) has passed for *every* byte the operation touches, so a
//! rejected operation leaves target memory untouched; and consuming replies
//! (get data, atomic values, statuses) into the request slab.
//! Must not: send anything itself. Replies are queued as [`Reply`] values and
//! the endpoint submits them after the protocol call returns (acks are emitted
//! later, so a reply always precedes the ack of what caused it).

use std::sync::atomic::Ordering;

use mw_wire::op::{self, AtomicOp, AtomicWidth, OpCode, OpRepr, SignalOp, Status, Unparsed};

use crate::region::{Access, Arrival, ArrivalKind, RegionKey, RegionTable};
use crate::request::{Completion, Output, RequestId, Requests};
use crate::stats::CoreStats;
use crate::Error;

/// A reply owed to a peer, submitted once the delivery callback returns.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// Operation status (only failures are reported for puts).
    Status { peer: u32, req: u32, status: Status },
    /// Atomic result.
    Atomic { peer: u32, req: u32, status: Status, value: u64 },
    /// Read `len` bytes at `key+offset` (already checked) and send them.
    Get { peer: u32, req: u32, key: RegionKey, offset: usize, len: usize },
    /// Gather `count` elements of `elem_size` at `stride` (already checked) and send them.
    GetStrided { peer: u32, req: u32, key: RegionKey, offset: usize, elem_size: usize, count: usize, stride: usize },
    /// A failed get: status only, no data.
    GetError { peer: u32, req: u32, status: Status },
    /// A get's data, read before a later operation of the same delivery
    /// batch could change it (see [`Target::settle_reads`]).
    GetData { peer: u32, req: u32, data: Vec<u8> },
}

impl Reply {
    /// Whether this refuses request `req` of `peer` (an error answer).
    pub(crate) fn refuses(&self, peer: u32, req: u32) -> bool {
        match *self {
            Reply::Status { peer: p, req: r, .. } | Reply::GetError { peer: p, req: r, .. } => p == peer && r == req,
            Reply::Atomic { peer: p, req: r, status, .. } => p == peer && r == req && status != Status::Ok,
            _ => false,
        }
    }

    /// A get whose data is read only when the reply is sent.
    fn reads_later(&self) -> bool {
        matches!(self, Reply::Get { .. } | Reply::GetStrided { .. })
    }

    /// For a get whose data is read when the reply is sent: reads it now
    /// (`Err`: the region went away since the check).
    pub(crate) fn read(&self, regions: &RegionTable) -> Option<Result<Vec<u8>, Status>> {
        match *self {
            Reply::Get { key, offset, len, .. } => {
                Some(regions.get(key).map(|region| region.mem.with_slice(offset, len, <[u8]>::to_vec)))
            }
            Reply::GetStrided { key, offset, elem_size, count, stride, .. } => Some(regions.get(key).map(|region| {
                let mut data = vec![0u8; elem_size * count];
                for (i, out) in data.chunks_exact_mut(elem_size.max(1)).enumerate().take(count) {
                    region.mem.read(offset + i * stride, out);
                }
                data
            })),
            _ => None,
        }
    }

    /// The status of an error answer; `None` for data and success.
    pub(crate) fn status(&self) -> Option<Status> {
        match *self {
            Reply::Status { status, .. } | Reply::GetError { status, .. } | Reply::Atomic { status, .. } => {
                (status != Status::Ok).then_some(status)
            }
            _ => None,
        }
    }
}

/// Borrowed endpoint state the delivery callback works on.
pub(crate) struct Target<'a> {
    pub regions: &'a mut RegionTable,
    pub requests: &'a mut Requests,
    pub gets: &'a mut crate::get_window::GetWindow,
    pub replies: &'a mut Vec<Reply>,
    pub completions: &'a mut Vec<Completion>,
    pub stats: &'a mut CoreStats,
    pub internal: &'a mut crate::internal::Internal,
    pub msg: &'a mut crate::msg::MsgState,
    pub mcast: &'a mut crate::mcast::McastState,
}

pub(crate) fn fail_status(status: Status) -> Error {
    Error::from_status(status).unwrap_or(Error::Remote(status as u8))
}

impl Target<'_> {
    /// Executes one delivered message from `peer`.
    pub fn on_message(&mut self, peer: u32, msg: &[u8]) {
        let op = match OpRepr::parse(msg) {
            Ok(op) => op,
            Err(_) => {
                self.stats.malformed_ops += 1;
                self.refuse_unparsed(peer, msg);
                return;
            }
        };
        if writes_regions(&op) && self.replies.iter().any(Reply::reads_later) {
            self.settle_reads();
        }
        match op {
            OpRepr::Put(put) => {
                let result = self.write(peer, put.key, put.offset, put.body, ArrivalKind::Put);
                self.report(peer, put.req, result);
            }
            OpRepr::PutInline(put) => {
                let result = self.write(peer, put.key, put.offset, put.body, ArrivalKind::Put);
                self.report(peer, put.req, result);
            }
            OpRepr::PutSignal(ps) => {
                let result = self.put_signal(peer, &ps);
                self.report(peer, ps.req, result);
            }
            OpRepr::PutStrided(ps) => {
                let result = self.put_strided(peer, &ps);
                self.report(peer, ps.req, result);
            }
            OpRepr::PutIov(pi) => {
                let result = self.put_iov(peer, &pi);
                self.report(peer, pi.req, result);
            }
            OpRepr::PutMasked(pm) => {
                let result = self.put_masked(peer, &pm);
                self.report(peer, pm.req, result);
            }
            OpRepr::RegisterPut(rp) => {
                let result = self.register_put(peer, &rp);
                self.report(peer, rp.req, result);
            }
            OpRepr::GetRequest(get) => self.get(peer, &get),
            OpRepr::GetStridedRequest(get) => self.get_strided(peer, &get),
            OpRepr::AtomicRequest(at) => {
                let result = self.atomic(peer, &at);
                if let Err(status) = result {
                    self.count_rejection(status);
                }
                if at.fetch {
                    let (status, value) = match result {
                        Ok(value) => (Status::Ok, value),
                        Err(status) => (status, 0),
                    };
                    self.replies.push(Reply::Atomic { peer, req: at.req, status, value });
                } else if let Err(status) = result {
                    // Non-fetching atomics complete on the ack; only failures answer.
                    self.replies.push(Reply::Status { peer, req: at.req, status });
                }
            }
            OpRepr::AmRequest(am) if am.handler >= crate::internal::RESERVED_HANDLER_BASE => {
                let seq = am.args.as_slice().first().copied().unwrap_or(0);
                if !self.internal.on_message(peer, am.handler, seq, am.body) {
                    self.stats.unsupported_ops += 1;
                    self.report(peer, am.req, Err(Status::Unsupported));
                }
            }
            OpRepr::GetResponse(resp) => self.on_get_response(peer, &resp),
            OpRepr::McastFeedback(fb) => self.mcast.on_feedback(peer, &fb),
            OpRepr::AtomicResponse(resp) => {
                let id = RequestId(resp.req);
                if resp.status == Status::Ok {
                    self.requests.set_output(id, Output::Value(resp.value));
                    let completion = self.requests.part_done(id);
                    self.complete(completion);
                } else {
                    let completion = self.requests.fail(id, fail_status(resp.status));
                    self.complete(completion);
                }
            }
            OpRepr::OpStatus(st) => {
                let id = RequestId(st.req);
                if st.status == Status::Ok {
                    let completion = self.requests.part_done(id);
                    self.complete(completion);
                } else {
                    let completion = self.requests.fail(id, fail_status(st.status));
                    self.complete(completion);
                }
            }
            // Tagged messages, user active messages, FIFOs, credits: crate::msg.
            op => crate::msg::on_message(self, peer, op),
        }
    }

    /// Answers a message that does not parse, so that whoever waits for it
    /// learns it was refused (`Status::BadArgument`; `Unsupported` for an
    /// opcode this build does not know) instead of seeing its ack as
    /// success or waiting forever for a response. A reply that does not
    /// parse is never answered: it fails our own request it names. Only a
    /// message naming no request (see [`Unparsed`]) can go unanswered.
    #[cold]
    fn refuse_unparsed(&mut self, peer: u32, msg: &[u8]) {
        let status = Status::BadArgument;
        match Unparsed::of(msg) {
            Unparsed::Request { opcode, req } => {
                let status = if opcode.is_some() { status } else { Status::Unsupported };
                self.count_rejection(status);
                self.replies.push(Reply::Status { peer, req, status });
            }
            Unparsed::Get { req } => {
                self.count_rejection(status);
                self.replies.push(Reply::GetError { peer, req, status });
            }
            Unparsed::Rendezvous { sender_req } => {
                self.count_rejection(status);
                let done = crate::msg::Outgoing::RndvDone { peer, token: sender_req, status };
                self.msg.outbox.push_back(done);
            }
            Unparsed::Reply { opcode, req } => match opcode {
                OpCode::GetResponse => self.on_get_response(peer, &op::GetResponse { req, status, body: &[] }),
                OpCode::RndvDone => {
                    crate::msg::on_message(self, peer, OpRepr::RndvDone(op::RndvDone { sender_req: req, status }))
                }
                _ => {
                    let completion = self.requests.fail(RequestId(req), fail_status(status));
                    self.complete(completion);
                }
            },
            Unparsed::Anonymous => {}
        }
    }

    /// Reads now the data of the get replies still owed. A get is answered
    /// from memory when its reply is sent, after the whole delivery batch
    /// (a datagram, or the run a filled gap releases); an operation after it
    /// in that batch that writes memory must not show in its answer, since
    /// one initiator's operations take effect at a target in issue order.
    /// Costs a copy only when a write follows a get within one batch.
    #[cold]
    fn settle_reads(&mut self) {
        for reply in self.replies.iter_mut() {
            let (peer, req) = match *reply {
                Reply::Get { peer, req, .. } | Reply::GetStrided { peer, req, .. } => (peer, req),
                _ => continue,
            };
            *reply = match reply.read(self.regions) {
                Some(Ok(data)) => Reply::GetData { peer, req, data },
                Some(Err(status)) => Reply::GetError { peer, req, status },
                None => continue,
            };
        }
    }

    fn complete(&mut self, completion: Option<Completion>) {
        if let Some(c) = completion {
            self.completions.push(c);
        }
    }

    fn count_rejection(&mut self, status: Status) {
        match status {
            Status::BadKey => self.stats.rejected_bad_key += 1,
            Status::OutOfBounds => self.stats.rejected_out_of_bounds += 1,
            Status::NoPermission => self.stats.rejected_no_permission += 1,
            _ => self.stats.rejected_other += 1,
        }
    }

    /// Puts report only failures; success is the protocol ack.
    fn report(&mut self, peer: u32, req: u32, result: Result<(), Status>) {
        if let Err(status) = result {
            self.count_rejection(status);
            if req != 0 {
                self.replies.push(Reply::Status { peer, req, status });
            }
        }
    }

    fn write(&mut self, peer: u32, key: u64, offset: u64, body: &[u8], kind: ArrivalKind) -> Result<(), Status> {
        let region = self.regions.get_mut(RegionKey(key))?;
        let (start, len) = region.check(Access::WRITE, offset, body.len() as u64)?;
        region.mem.write(start, body);
        if len > 0 {
            // An empty put (a multi-message put's bounds probe, crate::rma)
            // changes nothing, so nothing arrived.
            region.log(Arrival { kind, source: peer, offset, len: len as u64 });
        }
        Ok(())
    }

    fn put_signal(&mut self, peer: u32, ps: &op::PutSignal<'_>) -> Result<(), Status> {
        // Check both targets before writing either: all or nothing.
        let (start, len) =
            self.regions.get(RegionKey(ps.key))?.check(Access::WRITE, ps.offset, ps.body.len() as u64)?;
        let signal = self.regions.get(RegionKey(ps.signal_key))?;
        let (sig_off, _) = signal.check(Access::WRITE, ps.signal_offset, 8)?;
        if !signal.mem.is_aligned(sig_off, 8) {
            return Err(Status::Misaligned);
        }
        let region = self.regions.get_mut(RegionKey(ps.key))?;
        region.mem.write(start, ps.body);
        region.log(Arrival { kind: ArrivalKind::PutSignal, source: peer, offset: ps.offset, len: len as u64 });
        let signal = self.regions.get_mut(RegionKey(ps.signal_key))?;
        // Release: whoever observes the signal (wait_until loads with Acquire)
        // also observes the data written above.
        let word = signal.mem.atomic_u64(sig_off);
        match ps.signal_op {
            SignalOp::Set => word.store(ps.signal_value, Ordering::Release),
            SignalOp::Add => {
                word.fetch_add(ps.signal_value, Ordering::Release);
            }
        }
        signal.log(Arrival { kind: ArrivalKind::Signal, source: peer, offset: ps.signal_offset, len: 8 });
        Ok(())
    }

    fn put_strided(&mut self, peer: u32, ps: &op::PutStrided<'_>) -> Result<(), Status> {
        let region = self.regions.get_mut(RegionKey(ps.key))?;
        let extent = strided_extent(ps.elem_size, ps.count, ps.stride)?;
        let (start, _) = region.check(Access::WRITE, ps.offset, extent)?;
        let elem = ps.elem_size as usize;
        for (i, chunk) in ps.body.chunks_exact(elem.max(1)).take(ps.count as usize).enumerate() {
            region.mem.write(start + i * ps.stride as usize, chunk);
        }
        region.log(Arrival { kind: ArrivalKind::PutStrided, source: peer, offset: ps.offset, len: extent });
        Ok(())
    }

    fn put_iov(&mut self, peer: u32, pi: &op::PutIov<'_>) -> Result<(), Status> {
        let region = self.regions.get_mut(RegionKey(pi.key))?;
        for (offset, len) in pi.segments.iter() {
            region.check(Access::WRITE, offset, u64::from(len))?;
        }
        let mut body = pi.body;
        for (offset, len) in pi.segments.iter() {
            let (head, rest) = body.split_at(len as usize);
            region.mem.write(offset as usize, head);
            region.log(Arrival { kind: ArrivalKind::PutIov, source: peer, offset, len: u64::from(len) });
            body = rest;
        }
        Ok(())
    }

    fn put_masked(&mut self, peer: u32, pm: &op::PutMasked<'_>) -> Result<(), Status> {
        let region = self.regions.get_mut(RegionKey(pm.key))?;
        let (start, len) = region.check(Access::WRITE, pm.offset, pm.body.len() as u64)?;
        // seed 003, PPRAM-Link writesw: only the selected 4-byte words are written,
        // so two ranks' diffs of one block merge instead of overwriting each other.
        for word in 0..len / 4 {
            if pm.mask & (1u64 << word) != 0 {
                region.mem.write(start + word * 4, &pm.body[word * 4..word * 4 + 4]);
            }
        }
        region.log(Arrival { kind: ArrivalKind::PutMasked, source: peer, offset: pm.offset, len: len as u64 });
        Ok(())
    }

    fn register_put(&mut self, peer: u32, rp: &op::RegisterPut<'_>) -> Result<(), Status> {
        let target = self.regions.register(rp.register)?;
        if rp.body.len() as u64 > target.len {
            return Err(Status::OutOfBounds);
        }
        let region = self.regions.get_mut(target.key)?;
        // The register's window was checked when it was set, but the region's
        // rights may not include remote writes.
        let (start, len) = region.check(Access::WRITE, target.offset, rp.body.len() as u64)?;
        region.mem.write(start, rp.body);
        region.log(Arrival { kind: ArrivalKind::RegisterPut, source: peer, offset: target.offset, len: len as u64 });
        Ok(())
    }

    fn get(&mut self, peer: u32, get: &op::GetRequest) {
        let checked = self.regions.get_mut(RegionKey(get.key)).and_then(|region| {
            let range = region.check(Access::READ, get.offset, get.len)?;
            region.log(Arrival { kind: ArrivalKind::Get, source: peer, offset: get.offset, len: get.len });
            Ok(range)
        });
        match checked {
            Ok((offset, len)) => {
                self.replies.push(Reply::Get { peer, req: get.req, key: RegionKey(get.key), offset, len })
            }
            Err(status) => {
                self.count_rejection(status);
                self.replies.push(Reply::GetError { peer, req: get.req, status });
            }
        }
    }

    fn get_strided(&mut self, peer: u32, get: &op::GetStridedRequest) {
        let checked = self.regions.get_mut(RegionKey(get.key)).and_then(|region| {
            let extent = strided_extent(get.elem_size, get.count, get.stride)?;
            let (offset, _) = region.check(Access::READ, get.offset, extent)?;
            region.log(Arrival { kind: ArrivalKind::Get, source: peer, offset: get.offset, len: extent });
            Ok(offset)
        });
        match checked {
            Ok(offset) => self.replies.push(Reply::GetStrided {
                peer,
                req: get.req,
                key: RegionKey(get.key),
                offset,
                elem_size: get.elem_size as usize,
                count: get.count as usize,
                stride: get.stride as usize,
            }),
            Err(status) => {
                self.count_rejection(status);
                self.replies.push(Reply::GetError { peer, req: get.req, status });
            }
        }
    }

    fn on_get_response(&mut self, peer: u32, resp: &op::GetResponse<'_>) {
        let id = RequestId(resp.req);
        let ok = resp.status == Status::Ok;
        let parts = self.gets.on_answer(peer, id, ok.then_some(resp.body.len() as u64));
        if !ok {
            let completion = self.requests.fail(id, fail_status(resp.status));
            self.complete(completion);
            return;
        }
        // Chunks of one get come back in order on one peer's stream: append.
        if self.requests.land(id, resp.body).is_err() {
            let completion = self.requests.fail(id, Error::Truncated);
            self.complete(completion);
            return;
        }
        // A windowed span's answer completes the chunks it covered (maybe
        // none yet); any other answer is one part.
        for _ in 0..parts.unwrap_or(1) {
            let completion = self.requests.part_done(id);
            self.complete(completion);
        }
    }

    fn atomic(&mut self, peer: u32, at: &op::AtomicRequest) -> Result<u64, Status> {
        let region = self.regions.get_mut(RegionKey(at.key))?;
        let width = match at.width {
            AtomicWidth::U32 => 4,
            AtomicWidth::U64 => 8,
        };
        let (offset, _) = region.check(Access::ATOMIC, at.offset, width)?;
        if !region.mem.is_aligned(offset, width as usize) {
            return Err(Status::Misaligned);
        }
        let old = match at.width {
            AtomicWidth::U64 => apply_u64(region.mem.atomic_u64(offset), at.op, at.operand, at.compare),
            AtomicWidth::U32 => {
                u64::from(apply_u32(region.mem.atomic_u32(offset), at.op, at.operand as u32, at.compare as u32))
            }
        };
        region.log(Arrival { kind: ArrivalKind::Atomic, source: peer, offset: at.offset, len: width });
        Ok(old)
    }
}

/// Whether `op` may change region memory when executed here (so get
/// replies owed from before it must be read first).
#[inline]
fn writes_regions(op: &OpRepr<'_>) -> bool {
    match op {
        OpRepr::Put(_)
        | OpRepr::PutInline(_)
        | OpRepr::PutSignal(_)
        | OpRepr::PutStrided(_)
        | OpRepr::PutIov(_)
        | OpRepr::PutMasked(_)
        | OpRepr::RegisterPut(_) => true,
        OpRepr::AtomicRequest(at) => at.op != AtomicOp::Load,
        _ => false,
    }
}

/// Bytes spanned by `count` elements of `elem_size` every `stride` bytes,
/// or `OutOfBounds` on overflow or on overlapping elements (stride < size).
pub(crate) fn strided_extent(elem_size: u32, count: u32, stride: u64) -> Result<u64, Status> {
    if count == 0 {
        return Ok(0);
    }
    if stride < u64::from(elem_size) {
        return Err(Status::BadArgument);
    }
    stride
        .checked_mul(u64::from(count) - 1)
        .and_then(|v| v.checked_add(u64::from(elem_size)))
        .ok_or(Status::OutOfBounds)
}

/// Applies an atomic operation to a 64-bit word and returns the old value.
pub(crate) fn apply_u64(word: &std::sync::atomic::AtomicU64, op: AtomicOp, operand: u64, compare: u64) -> u64 {
    let ord = Ordering::AcqRel;
    match op {
        AtomicOp::Add => word.fetch_add(operand, ord),
        AtomicOp::Swap => word.swap(operand, ord),
        AtomicOp::CompareSwap => match word.compare_exchange(compare, operand, ord, Ordering::Acquire) {
            Ok(old) | Err(old) => old,
        },
        AtomicOp::And => word.fetch_and(operand, ord),
        AtomicOp::Or => word.fetch_or(operand, ord),
        AtomicOp::Xor => word.fetch_xor(operand, ord),
        AtomicOp::Load => word.load(Ordering::Acquire),
        AtomicOp::Store => word.swap(operand, ord),
    }
}

/// Applies an atomic operation to a 32-bit word and returns the old value.
pub(crate) fn apply_u32(word: &std::sync::atomic::AtomicU32, op: AtomicOp, operand: u32, compare: u32) -> u32 {
    let ord = Ordering::AcqRel;
    match op {
        AtomicOp::Add => word.fetch_add(operand, ord),
        AtomicOp::Swap => word.swap(operand, ord),
        AtomicOp::CompareSwap => match word.compare_exchange(compare, operand, ord, Ordering::Acquire) {
            Ok(old) | Err(old) => old,
        },
        AtomicOp::And => word.fetch_and(operand, ord),
        AtomicOp::Or => word.fetch_or(operand, ord),
        AtomicOp::Xor => word.fetch_xor(operand, ord),
        AtomicOp::Load => word.load(Ordering::Acquire),
        AtomicOp::Store => word.swap(operand, ord),
    }
}
