//! Active messages (seed 003, PPRAM-Link `actmes`; GASNet-style request and
//! reply): `register_handler(id, f)`, `am_request(rank, id, args, payload)`,
//! and a reply from inside the handler.
//!
//! Owns: the handler table, dispatch of incoming requests (inline payloads
//! at once, large ones after the rendezvous pull), the automatic reply (every
//! request with a `req` is answered: the handler's reply, an empty one if it
//! gave none, `NoHandler` for an unknown id, `Unsupported` if it panicked),
//! and landing replies at the initiator.
//!
//! Must not: let a handler reach the endpoint. Handlers run inside the
//! progress engine with the endpoint lock held; they get an [`AmContext`]
//! whose `reply` and `am_send` are queued and sent when the handler returns.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use mw_wire::op::{self, AmArgs, OpRepr, RndvDesc, Status};

use super::rndv::Then;
use super::{check_args, MsgOutput, MsgState, Outgoing, Sink, TOO_MANY_ARGS};
use crate::deadline::Bound;
use crate::endpoint::Endpoint;
use crate::internal::RESERVED_HANDLER_BASE;
use crate::request::{Output, RequestId};
use crate::target::Target;
use crate::{Error, Result};

type HandlerFn = dyn Fn(&mut AmContext, &AmMessage<'_>) + Send + Sync;

/// The registered handlers of one endpoint.
#[derive(Default)]
pub(crate) struct Handlers {
    /// By handler id. Ids are the application's own (nothing a peer sends
    /// inserts here), so the one-multiply hasher is enough.
    table: crate::region::KeyMap<u16, Arc<HandlerFn>>,
    /// A reply payload buffer back from its last send, for the next
    /// handler's reply: no allocation per small reply.
    pub(crate) spare: Vec<u8>,
    /// The buffer the last pulled (large) request payload landed in, all of
    /// it initialized, for the next one: a fresh megabyte was first zeroed
    /// (every page faulted in, then written) and only then copied into.
    staging: Vec<u8>,
}

/// Largest pulled-payload buffer kept for the next large request.
const STAGING_KEEP: usize = 16 << 20;

/// Largest reply buffer kept for reuse (a bigger one is freed after use).
/// Large ones come back from their exposure once the initiator pulled them
/// (`State::retire_exposures`): a 1 MiB reply then costs a copy into pages
/// already mapped instead of a fresh allocation that faults every page in.
const SPARE_KEEP: usize = 16 << 20;

impl Handlers {
    /// A buffer of exactly `len` initialized bytes for a pulled request
    /// payload: the kept one when it is large enough (nothing written),
    /// else grown (only the growth is zeroed). `None` when memory runs out.
    pub(crate) fn take_staging(&mut self, len: usize) -> Option<Vec<u8>> {
        let mut buf = std::mem::take(&mut self.staging);
        if buf.len() < len {
            buf.try_reserve_exact(len - buf.len()).ok()?;
            buf.resize(len, 0);
        }
        buf.truncate(len);
        Some(buf)
    }

    /// Takes back a pulled payload's buffer (its bytes up to `len()` are
    /// initialized) for the next large request, unless it is too large to
    /// keep or smaller than the one kept.
    pub(crate) fn keep_staging(&mut self, buf: Vec<u8>) {
        if buf.len() <= STAGING_KEEP && buf.len() > self.staging.len() {
            self.staging = buf;
        }
    }

    /// Takes back a reply payload buffer once its bytes are sent, for the
    /// next handler's reply (when it is small, and larger than the one kept).
    pub(crate) fn keep_spare(&mut self, mut payload: Vec<u8>) {
        if payload.capacity() <= SPARE_KEEP && payload.capacity() > self.spare.capacity() {
            payload.clear();
            self.spare = payload;
        }
    }
}

/// An incoming active message, as its handler sees it.
#[derive(Debug, Clone, Copy)]
pub struct AmMessage<'a> {
    /// The initiating rank.
    pub source: u32,
    /// The handler id it was sent to.
    pub handler: u16,
    /// Its u64 arguments (at most 8).
    pub args: &'a [u64],
    /// Its payload (any size; a large one was pulled before the handler ran).
    pub payload: &'a [u8],
}

/// What a handler may do: reply, and queue further active messages. It
/// never gets the endpoint (the handler runs with the endpoint locked).
///
/// The reply lives in the context itself (its arguments inline, its payload
/// in a buffer reused from earlier replies), and the ring fast path sends it
/// straight from there: every copy of the reply is on a same-host request's
/// critical path. (Before, the reply was moved into an `Outgoing` and a
/// tuple on its way out: with that gone, and the request parsed as itself
/// rather than as an `OpRepr`, the 8-byte am ping-pong over shm went from
/// 0.218 to 0.188 us per half round trip, alternating runs.)
#[derive(Debug)]
pub struct AmContext {
    source: u32,
    rank: u32,
    size: u32,
    wants_reply: bool,
    replied: bool,
    reply_args: AmArgs,
    /// The reply's payload; before a reply, an empty buffer with capacity.
    reply_payload: Vec<u8>,
    sends: Vec<Outgoing>,
}

impl AmContext {
    /// The context for a handler run on `request`, with the endpoint's
    /// spare reply buffer.
    fn new(msg: &mut MsgState, request: &Request<'_>) -> AmContext {
        AmContext {
            source: request.source,
            rank: msg.rank,
            size: msg.size,
            wants_reply: request.want_reply && request.req != 0,
            replied: false,
            reply_args: AmArgs::EMPTY,
            reply_payload: std::mem::take(&mut msg.am.spare),
            sends: Vec::new(),
        }
    }

    /// The rank that sent the request.
    pub fn source(&self) -> u32 {
        self.source
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Answers the request with `args` (at most 8) and `payload` (any size;
    /// above the eager limit the initiator pulls it). At most once per
    /// request; a request sent without wanting a reply ignores it.
    pub fn reply(&mut self, args: &[u64], payload: &[u8]) -> Result<()> {
        if args.len() > op::AM_MAX_ARGS {
            return Err(TOO_MANY_ARGS);
        }
        if self.replied {
            return Err(Error::InvalidArgument("a handler replies at most once"));
        }
        self.replied = true;
        // Where they are, not built and moved in (wire::op::am module docs).
        self.reply_args.assign(args);
        self.reply_payload.extend_from_slice(payload);
        Ok(())
    }

    /// Whether the initiator waits for a reply.
    pub fn wants_reply(&self) -> bool {
        self.wants_reply
    }

    /// Queues a one-way active message to `rank` (sent when the handler
    /// returns; no reply, errors at the target are only counted there).
    pub fn am_send(&mut self, rank: u32, handler: u16, args: &[u64], payload: &[u8]) -> Result<()> {
        if rank >= self.size {
            return Err(Error::BadRank { rank, size: self.size });
        }
        if handler >= RESERVED_HANDLER_BASE {
            return Err(Error::InvalidArgument("handler ids from RESERVED_HANDLER_BASE up are internal"));
        }
        let args = check_args(args)?;
        self.sends.push(Outgoing::AmSend { peer: rank, handler, args, payload: payload.to_vec() });
        Ok(())
    }
}

/// What an active message's reply carried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AmReplyData {
    /// The reply's u64 arguments.
    pub args: Vec<u64>,
    /// The reply's payload.
    pub payload: Vec<u8>,
}

impl AmReplyData {
    /// Replaces the contents with `reply`'s arguments and payload, keeping
    /// the buffers.
    fn fill_from(&mut self, reply: &op::AmReplyView<'_>) {
        self.args.clear();
        self.args.extend((0..reply.args_len()).map(|i| reply.arg(i)));
        self.payload.clear();
        self.payload.extend_from_slice(reply.body());
    }
}

/// The answer to request `req` of `peer` when no handler ran to completion
/// (none when the initiator waits for nothing).
fn error_answer(peer: u32, req: u32, want_reply: bool, status: Status) -> Option<Outgoing> {
    if req == 0 {
        return None;
    }
    Some(if want_reply {
        Outgoing::AmReply { peer, req, status, args: AmArgs::EMPTY, payload: Vec::new() }
    } else {
        Outgoing::Status { peer, req, status }
    })
}

/// Answers request `req` of `peer` with an error (no handler ran).
pub(crate) fn answer_error(msg: &mut MsgState, peer: u32, req: u32, want_reply: bool, status: Status) {
    msg.outbox.extend(error_answer(peer, req, want_reply, status));
}

/// An active-message request to run, whole (its payload pulled already).
pub(crate) struct Request<'a> {
    pub source: u32,
    pub handler: u16,
    /// The initiator's request id; 0 for a one-way message.
    pub req: u32,
    pub want_reply: bool,
    pub args: &'a [u64],
    pub payload: &'a [u8],
}

impl<'a> Request<'a> {
    /// An eager request of `peer`, as it arrived.
    fn of(peer: u32, am: &'a op::AmRequest<'a>) -> Request<'a> {
        Request {
            source: peer,
            handler: am.handler,
            req: am.req,
            want_reply: am.want_reply,
            args: am.args.as_slice(),
            payload: am.body,
        }
    }
}

/// Runs the handler of `request` and queues its reply and the messages it
/// asked to send.
pub(crate) fn run_handler(msg: &mut MsgState, request: &Request<'_>) {
    let mut ctx = AmContext::new(msg, request);
    let called = call_handler(msg, request, &mut ctx);
    let answer = answer_of(msg, request, called, &mut ctx);
    msg.outbox.extend(answer);
    msg.outbox.extend(ctx.sends);
}

/// How a handler call went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Called {
    /// It ran to completion; its reply and sends are in the context.
    Ran,
    /// No handler under the request's id.
    NoHandler,
    /// It panicked (whatever it left in the context is void).
    Panicked,
}

/// Runs the handler of `request` with `ctx` (see [`AmContext::new`]).
fn call_handler(msg: &mut MsgState, request: &Request<'_>, ctx: &mut AmContext) -> Called {
    let Some(f) = msg.am.table.get(&request.handler) else {
        msg.stats.am_no_handler += 1;
        return Called::NoHandler;
    };
    let message =
        AmMessage { source: request.source, handler: request.handler, args: request.args, payload: request.payload };
    // A panicking handler must not unwind through the protocol's delivery.
    let ran = catch_unwind(AssertUnwindSafe(|| f(ctx, &message)));
    msg.stats.am_handled += 1;
    if ran.is_err() {
        msg.stats.am_handler_panics += 1;
        return Called::Panicked;
    }
    Called::Ran
}

/// The answer to `request` after its handler call (the handler's reply, or
/// the error when there is no such handler or it panicked; none when the
/// initiator waits for nothing), to send before the context's one-way
/// messages. The reply buffer goes back to the spare when no reply took it.
fn answer_of(msg: &mut MsgState, request: &Request<'_>, called: Called, ctx: &mut AmContext) -> Option<Outgoing> {
    let (source, req, want_reply) = (request.source, request.req, request.want_reply);
    let answer = match called {
        Called::NoHandler => error_answer(source, req, want_reply, Status::NoHandler),
        Called::Panicked => error_answer(source, req, want_reply, Status::Unsupported),
        Called::Ran if ctx.wants_reply => {
            let payload = if ctx.replied { std::mem::take(&mut ctx.reply_payload) } else { Vec::new() };
            Some(Outgoing::AmReply { peer: source, req, status: Status::Ok, args: ctx.reply_args, payload })
        }
        Called::Ran => None,
    };
    // A buffer no answer took serves the next handler's reply.
    msg.am.keep_spare(std::mem::take(&mut ctx.reply_payload));
    answer
}

/// An active-message request arrived from `peer`.
pub(crate) fn on_request(t: &mut Target<'_>, peer: u32, am: &op::AmRequest<'_>) {
    let msg = &mut *t.msg;
    if !msg.am.table.contains_key(&am.handler) {
        msg.stats.am_no_handler += 1;
        answer_error(msg, peer, am.req, am.want_reply, Status::NoHandler);
        if let (true, Ok(desc)) = (am.rndv, RndvDesc::parse(am.body)) {
            // The initiator exposed a payload we will never pull: release it.
            msg.outbox.push_back(Outgoing::RndvDone { peer, token: desc.token, status: Status::NoHandler });
        }
        return;
    }
    if !am.rndv {
        run_handler(msg, &Request::of(peer, am));
        return;
    }
    let Ok(desc) = RndvDesc::parse(am.body) else {
        t.stats.malformed_ops += 1;
        answer_error(msg, peer, am.req, am.want_reply, Status::BadArgument);
        return;
    };
    let Ok(total) = usize::try_from(desc.total_len) else {
        answer_error(msg, peer, am.req, am.want_reply, Status::BadArgument);
        msg.outbox.push_back(Outgoing::RndvDone { peer, token: desc.token, status: Status::BadArgument });
        return;
    };
    // Into a reused buffer (`Handlers::take_staging`), filled in place.
    let data = msg.am.take_staging(total);
    let slot = data.as_ref().and_then(|_| t.requests.alloc(peer, 1).ok());
    let (Some(data), Some(slot)) = (data, slot) else {
        answer_error(msg, peer, am.req, am.want_reply, Status::WouldBlock);
        msg.outbox.push_back(Outgoing::RndvDone { peer, token: desc.token, status: Status::WouldBlock });
        return;
    };
    let incoming = MsgOutput::AmIncoming {
        source: peer,
        handler: am.handler,
        req: am.req,
        want_reply: am.want_reply,
        args: Box::new(am.args),
        sink: Sink::Owned { data, filled: 0 },
    };
    t.requests.set_output(slot, Output::Msg(incoming));
    msg.rndv.start_pull(t.requests, slot, peer, desc.key, desc.offset, desc.total_len, desc.token, Then::RunHandler);
}

/// A reply to one of our requests arrived from `peer`.
pub(crate) fn on_reply(t: &mut Target<'_>, peer: u32, reply: &op::AmReply<'_>) {
    let id = RequestId(reply.req);
    let desc = if reply.rndv { RndvDesc::parse(reply.body).ok() } else { None };
    let ours = matches!(t.requests.msg_mut(id), Some(MsgOutput::AmReply { .. }));
    let release = |t: &mut Target<'_>, status: Status| {
        if let Some(desc) = desc {
            t.msg.outbox.push_back(Outgoing::RndvDone { peer, token: desc.token, status });
        }
    };
    if !ours {
        // The handle was dropped (or a stray id): nothing waits for the data.
        release(t, Status::Ok);
        return;
    }
    if reply.status != Status::Ok || (reply.rndv && desc.is_none()) {
        let error = Error::from_status(reply.status).unwrap_or(Error::InvalidArgument("malformed reply"));
        let completion = t.requests.fail(id, error);
        t.completions.extend(completion);
        release(t, Status::Ok);
        return;
    }
    let Some(MsgOutput::AmReply { args, sink }) = t.requests.msg_mut(id) else {
        return;
    };
    *args = (!reply.args.as_slice().is_empty()).then(|| Box::new(reply.args));
    match desc {
        None => {
            *sink = Sink::Staged { data: reply.body.to_vec(), limit: reply.body.len() };
            let completion = t.requests.part_done(id);
            t.completions.extend(completion);
        }
        Some(desc) => {
            let total = usize::try_from(desc.total_len).unwrap_or(usize::MAX);
            *sink = Sink::staged(total);
            if sink.prepare(total).is_err() {
                let completion = t.requests.fail(id, Error::Io("cannot allocate the reply payload".into()));
                t.completions.extend(completion);
                release(t, Status::WouldBlock);
                return;
            }
            t.msg.rndv.start_pull(
                t.requests,
                id,
                peer,
                desc.key,
                desc.offset,
                desc.total_len,
                desc.token,
                Then::Collect,
            );
        }
    }
}

impl crate::endpoint::State {
    /// Runs an eager active-message request from same-host `peer` straight
    /// from its ring `record`, and publishes the handler's inline answer in
    /// `peer`'s ring at once: what `on_request` and the outbox would do,
    /// without the generic dispatch and the queue in between (8-byte am over
    /// shm, alternating runs: 0.227 -> 0.224 us per half round trip). Declines
    /// (`false`; the record is left to the generic delivery) any other
    /// operation, an internal or rendezvous request, or when the outbox holds
    /// something that must leave first.
    pub(crate) fn am_from_ring(&mut self, peer: u32, record: &[u8]) -> bool {
        if record.first() != Some(&(op::OpCode::AmRequest as u8)) || !self.msg.outbox.is_empty() {
            return false;
        }
        // In place, the arguments decoded straight into `args` (wire::op::am
        // module docs: building and moving an `AmArgs` on this path cost
        // ~9 ns of an 8-byte am's half round trip, in-binary comparison).
        let Ok(am) = op::AmRequestView::parse(record) else { return false };
        if am.rndv || am.handler >= RESERVED_HANDLER_BASE {
            return false;
        }
        let mut args = [0u64; op::AM_MAX_ARGS];
        let request = Request {
            source: peer,
            handler: am.handler,
            req: am.req,
            want_reply: am.want_reply,
            args: am.args_into(&mut args),
            payload: am.body(),
        };
        let mut ctx = AmContext::new(&mut self.msg, &request);
        let called = call_handler(&mut self.msg, &request, &mut ctx);
        if called == Called::Ran && ctx.wants_reply && ctx.reply_payload.len() <= self.am_eager_limit_to(peer) {
            // The reply straight from the context, before anything the
            // handler queued (the order `answer_of` gives too).
            let (req, reply_args) = (am.req, &ctx.reply_args);
            let header_len = op::AmReply::ok_header_len(reply_args);
            let emit = |header: &mut [u8]| _ = op::AmReply::emit_ok_header(req, reply_args, header);
            // A peer that died meanwhile: nothing to deliver it to (the
            // outbox drops it the same way).
            let _ = self.shm_send_headed(peer, header_len, emit, &ctx.reply_payload);
            self.msg.am.keep_spare(std::mem::take(&mut ctx.reply_payload));
        } else {
            let answer = answer_of(&mut self.msg, &request, called, &mut ctx);
            self.msg.outbox.extend(answer);
        }
        if !ctx.sends.is_empty() {
            self.msg.outbox.extend(ctx.sends);
        }
        self.msg.stats.am_in_place += 1;
        true
    }

    /// Completes `am_request` `id` to same-host `rank` with the reply at the
    /// front of that peer's ring, read in place: the successful inline
    /// reply the generic path (`on_reply`) would land, written straight into
    /// the caller's `out` (its buffers reused), and the request freed.
    /// `allocated` false: `id` was published and not allocated yet
    /// (`Endpoint::am_begin`, which holds the lock from the publication
    /// on), so there is no request to check or free. Anything else (an
    /// error status, a rendezvous reply, another record) stays in the ring
    /// for the next poll. Returns whether it completed.
    pub(crate) fn am_reply_from_ring(
        &mut self,
        id: RequestId,
        rank: u32,
        out: &mut AmReplyData,
        allocated: bool,
    ) -> bool {
        if self.dead.get(rank as usize) != Some(&false) {
            return false;
        }
        let crate::endpoint::State { shm, requests, stats, msg, .. } = self;
        let Some(shm) = shm.as_mut() else { return false };
        let taken = shm.take_if(rank, |payload| {
            let Some(reply) = inline_reply_to(id, payload) else { return false };
            if allocated {
                if !matches!(requests.msg_mut(id), Some(MsgOutput::AmReply { .. })) {
                    return false;
                }
                requests.retire(id);
            }
            out.fill_from(&reply);
            true
        });
        if taken {
            stats.shm_ring_received += 1;
            msg.stats.am_replies_in_place += 1;
        }
        taken
    }
}

/// `payload` (a ring record) parsed as the successful inline reply to
/// request `id`; `None` for anything else (another record, an error
/// status, a rendezvous reply), which the general path handles.
fn inline_reply_to(id: RequestId, payload: &[u8]) -> Option<op::AmReplyView<'_>> {
    if payload.first() != Some(&(op::OpCode::AmReply as u8)) {
        return None;
    }
    // In place (wire::op::am module docs): on the initiator's critical path.
    let reply = op::AmReplyView::parse(payload).ok()?;
    (reply.req == id.0 && !reply.rndv && reply.status == Status::Ok).then_some(reply)
}

/// An active-message request in flight; completes with the handler's reply.
#[must_use = "an active-message handle does nothing unless tested or waited on"]
#[derive(Debug)]
pub struct AmHandle<'a> {
    ep: &'a Endpoint,
    id: RequestId,
    /// The target: with a same-host one, the wait takes the reply straight
    /// from its ring.
    rank: u32,
    finished: bool,
}

impl AmHandle<'_> {
    /// Makes progress once and reports whether the reply has arrived.
    pub fn test(&mut self) -> bool {
        self.ep.progress();
        self.ep.lock().requests.is_done(self.id).unwrap_or(true)
    }

    /// Waits for the reply; [`Error::Timeout`] if it does not come within
    /// `Config::op_timeout` (the handler runs in the target's progress
    /// engine, so a live target answers promptly).
    pub fn wait(self) -> Result<AmReplyData> {
        let mut reply = AmReplyData::default();
        self.wait_into(&mut reply)?;
        Ok(reply)
    }

    /// [`wait`](Self::wait), with the reply written into `reply`, whose
    /// buffers are reused: a loop of requests allocates nothing once they
    /// are large enough (a fresh [`AmReplyData`] per call costs an
    /// allocation and a free on every round trip's critical path). On error
    /// `reply` is left empty.
    pub fn wait_into(mut self, reply: &mut AmReplyData) -> Result<()> {
        reply.args.clear();
        reply.payload.clear();
        let id = self.id;
        let (rank, from_ring) = (self.rank, self.ep.shares_memory_with(self.rank));
        let mut in_place = false;
        // The reply taken straight from the ring (which frees the request),
        // or collected under the lock that saw the request complete.
        // No spin with the progress thread on: it takes the reply from the
        // ring into the request, and the spin would wait out its rounds for
        // nothing.
        let ring_spin = from_ring && !self.ep.progress_thread_runs();
        let taken = self.ep.wait_and_take_with(id, ring_spin, Bound::Op, |state| {
            in_place = from_ring && state.am_reply_from_ring(id, rank, reply, true);
            in_place
        });
        self.finished = true;
        if in_place {
            return Ok(());
        }
        if let Some((Err(Error::Timeout), _)) = &taken {
            // Abandoned: a late reply finds a stale id and is dropped.
            self.ep.lock().requests.retire(id);
            return Err(Error::Timeout);
        }
        let (result, output) = taken.ok_or(Error::InvalidArgument("operation already collected"))?;
        result?;
        if let Output::Msg(MsgOutput::AmReply { args, mut sink }) = output {
            if let Some(args) = args {
                reply.args.extend_from_slice(args.as_slice());
            }
            // A staged payload is the request's own buffer (possibly a
            // large pulled one): moved, not copied.
            reply.payload = sink.take_staged();
        }
        Ok(())
    }
}

impl Drop for AmHandle<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.ep.lock().requests.release(self.id);
        }
    }
}

impl Endpoint {
    /// Registers `handler` under `id` (below [`RESERVED_HANDLER_BASE`]);
    /// replaces nothing: registering a taken id is an error. The handler
    /// runs in the progress engine, on whichever thread makes progress, with
    /// the endpoint locked: keep it short and use only its [`AmContext`].
    pub fn register_handler<F>(&self, id: u16, handler: F) -> Result<()>
    where
        F: Fn(&mut AmContext, &AmMessage<'_>) + Send + Sync + 'static,
    {
        if id >= RESERVED_HANDLER_BASE {
            return Err(Error::InvalidArgument("handler ids from RESERVED_HANDLER_BASE (0xFF00) up are internal"));
        }
        let mut state = self.lock();
        if state.msg.am.table.contains_key(&id) {
            return Err(Error::InvalidArgument("a handler is already registered under this id"));
        }
        state.msg.am.table.insert(id, Arc::new(handler));
        Ok(())
    }

    /// Removes the handler under `id`; returns whether there was one. Later
    /// requests for it are answered [`Error::NoHandler`].
    pub fn unregister_handler(&self, id: u16) -> bool {
        self.lock().msg.am.table.remove(&id).is_some()
    }

    /// Runs handler `id` at `rank` with `args` (at most 8) and `payload`
    /// (any size; above the eager limit the target pulls it straight from
    /// `payload`, which this call borrows until the reply is in) and waits
    /// for its reply. [`Error::NoHandler`] if `rank` has no handler under `id`.
    pub fn am_request(&self, rank: u32, id: u16, args: &[u64], payload: &[u8]) -> Result<AmReplyData> {
        let mut reply = AmReplyData::default();
        self.am_request_into(rank, id, args, payload, &mut reply)?;
        Ok(reply)
    }

    /// [`am_request`](Self::am_request), with the reply written into
    /// `reply`, whose buffers are reused (see [`AmHandle::wait_into`]): the
    /// form for a loop of requests. On error `reply` is left empty.
    pub fn am_request_into(
        &self,
        rank: u32,
        id: u16,
        args: &[u64],
        payload: &[u8],
        reply: &mut AmReplyData,
    ) -> Result<()> {
        reply.args.clear();
        reply.payload.clear();
        let (handle, exposed) = match self.am_begin(rank, id, args, payload, Expose::InPlace, Some(&mut *reply))? {
            Begun::Replied => return Ok(()),
            Begun::Pending(handle, exposed) => (handle, exposed),
        };
        // The exposure is withdrawn on every way out, before the borrow of
        // `payload` ends. On success the target has pulled all of it: its
        // handler runs only once the payload is in, and the reply comes after.
        let _unexpose = exposed.map(|token| super::tagged::Unexpose { ep: self, token });
        handle.wait_into(reply)
    }

    /// Nonblocking [`am_request`](Self::am_request); a `payload` above the
    /// eager limit is copied before this returns (so the caller may reuse it).
    pub fn am_request_nb(&self, rank: u32, id: u16, args: &[u64], payload: &[u8]) -> Result<AmHandle<'_>> {
        match self.am_begin(rank, id, args, payload, Expose::Copy, None)? {
            Begun::Pending(handle, _) => Ok(handle),
            // Only with a reply to fill in place, and there was none.
            Begun::Replied => Err(Error::InvalidArgument("internal: a nonblocking request completed in place")),
        }
    }

    /// Sends a one-way active message to handler `id` at `rank` with `args`
    /// (at most 8) and `payload` (any size; above the eager limit it is
    /// copied and the target pulls the copy), the application's form of
    /// [`AmContext::am_send`]. Returns once the message is queued: `payload`
    /// may be reused at once. It is delivered reliably and, toward one
    /// target, in order with this rank's other operations; nothing comes
    /// back: an unknown `id` or a panicking handler at the target is only
    /// counted there (`MsgStats::am_no_handler`, `am_handler_panics`), and
    /// [`flush`](Self::flush) does not wait for it. Use
    /// [`am_request_nb`](Self::am_request_nb) to learn the outcome.
    pub fn am_send(&self, rank: u32, id: u16, args: &[u64], payload: &[u8]) -> Result<()> {
        self.check_rank(rank)?;
        if id >= RESERVED_HANDLER_BASE {
            return Err(Error::InvalidArgument("handler ids from RESERVED_HANDLER_BASE (0xFF00) up are internal"));
        }
        let args = check_args(args)?;
        let mut state = self.lock_with_room(rank)?;
        let now = self.shared.now();
        if payload.len() <= state.am_eager_limit_to(rank) {
            // Straight from the caller's buffer: no copy beyond the send's.
            let repr = OpRepr::AmRequest(op::AmRequest {
                req: 0,
                handler: id,
                want_reply: false,
                rndv: false,
                args,
                body: &[],
            });
            return state.send_op(now, rank, &repr, payload, None);
        }
        state.send_outgoing(now, Outgoing::AmSend { peer: rank, handler: id, args, payload: payload.to_vec() })
    }

    /// Sends the request; also returns the token of an in-place exposure of
    /// `payload`, which the caller must withdraw before its borrow ends.
    /// With `in_place` (a blocking request) the reply from a same-host
    /// peer may be taken into it here, before the request is allocated
    /// (`Begun::Replied`; see the shared-memory branch).
    fn am_begin<'a>(
        &'a self,
        rank: u32,
        id: u16,
        args: &[u64],
        payload: &[u8],
        expose: Expose,
        in_place: Option<&mut AmReplyData>,
    ) -> Result<Begun<'a>> {
        self.check_rank(rank)?;
        if id >= RESERVED_HANDLER_BASE {
            return Err(Error::InvalidArgument("handler ids from RESERVED_HANDLER_BASE (0xFF00) up are internal"));
        }
        if args.len() > op::AM_MAX_ARGS {
            return Err(TOO_MANY_ARGS);
        }
        let mut state = self.lock_with_room(rank)?;
        let output = || Output::Msg(MsgOutput::AmReply { args: None, sink: Sink::staged(0) });
        let eager = payload.len() <= state.am_eager_limit_to(rank);
        if eager && state.is_shm_peer(rank) {
            // Into the peer's ring: no clock, no socket. Published first,
            // under the id the allocation below then gives (we hold the
            // lock): the bookkeeping is off the request's critical path.
            // The header is written from `args` where they are (wire::op::am
            // module docs).
            let req = state.requests.next_id().ok_or(Error::WouldBlock)?;
            // `args` fit (checked above): `emit_plain_header` writes them all.
            let header_len = op::AmRequest::plain_header_len(args.len());
            let emit = |header: &mut [u8]| _ = op::AmRequest::emit_plain_header(req.0, id, true, args, header);
            let sent = state.shm_send_headed(rank, header_len, emit, payload);
            if let (Ok(()), Some(out)) = (&sent, in_place) {
                if !self.progress_thread_runs() {
                    // A blocking request waits for its reply here, still
                    // holding the lock: until it lets go, nobody else can
                    // take a record from the rings or allocate a request,
                    // so the reply can only be taken here and `req` stays
                    // the next id. A reply taken here needs no request at
                    // all: no allocation, output slot, retirement or
                    // general wait (8-byte `mwbench` ping-pong as two
                    // processes, EPYC VM, 9 alternating runs: median of the
                    // medians 0.141 -> 0.135 µs per half round trip, lower
                    // in 7 of 9). Anything else (another record first, the
                    // spin over, another thread wanting the lock) allocates
                    // the request below before the lock goes, and the
                    // general wait takes over.
                    let taken;
                    (state, taken) =
                        self.spin_holding_lock(state, |state| state.am_reply_from_ring(req, rank, out, false));
                    if taken {
                        return Ok(Begun::Replied);
                    }
                }
            }
            let allocated = state.requests.alloc(rank, 1)?;
            debug_assert_eq!(allocated, req);
            state.requests.set_output(req, output());
            if let Err(error) = sent {
                state.requests.fail(req, error);
            }
            drop(state);
            return Ok(Begun::Pending(AmHandle { ep: self, id: req, rank, finished: false }, None));
        }
        let args = check_args(args)?;
        let req = state.requests.alloc(rank, 1)?;
        state.requests.set_output(req, output());
        let request = |rndv: bool| op::AmRequest { req: req.0, handler: id, want_reply: true, rndv, args, body: &[] };
        let now = self.shared.now();
        let mut exposed = None;
        let sent = if eager {
            state.send_op(now, rank, &OpRepr::AmRequest(request(false)), payload, None)
        } else {
            let token = match state.requests.alloc(rank, 1) {
                Ok(token) => token,
                Err(error) => {
                    state.requests.retire(req); // nothing was sent for it
                    return Err(error);
                }
            };
            let key = match expose {
                Expose::InPlace => {
                    exposed = Some(token);
                    let mem = crate::memory::readonly_mem(payload);
                    state.expose(rank, mem, super::rndv::Keep::Borrowed, token)
                }
                Expose::Copy => {
                    // Nothing waits on the token: the copy lives in the
                    // exposure until the target's RndvDone.
                    state.requests.release(token);
                    state.expose_copy(rank, payload, token)
                }
            };
            let desc = RndvDesc { total_len: payload.len() as u64, key: key.0, offset: 0, token: token.0 };
            state.send_op(now, rank, &OpRepr::AmRequest(request(true)), &desc.to_bytes(), None)
        };
        match sent {
            Ok(()) => {
                state.transmit(now);
            }
            Err(error) => {
                state.requests.fail(req, error);
            }
        }
        drop(state);
        Ok(Begun::Pending(AmHandle { ep: self, id: req, rank, finished: false }, exposed))
    }
}

/// What [`Endpoint::am_begin`] left to do.
enum Begun<'a> {
    /// The reply is in the caller's `in_place` already.
    Replied,
    /// The request is in flight; with the token of an in-place exposure of
    /// the payload, which the caller must withdraw before its borrow ends.
    Pending(AmHandle<'a>, Option<RequestId>),
}

/// How a request payload above the eager limit is offered to the target.
#[derive(Clone, Copy)]
enum Expose {
    /// The caller's buffer itself (a blocking request, which outlives the pull).
    InPlace,
    /// A copy the exposure owns (a nonblocking request returns at once).
    Copy,
}

#[cfg(test)]
mod tests {
    use super::{Handlers, STAGING_KEEP};

    #[test]
    fn pulled_payload_buffers_are_reused_and_sized_exactly() {
        let mut handlers = Handlers::default();
        let mut first = handlers.take_staging(100).expect("memory");
        assert_eq!(first.len(), 100);
        first.fill(7);
        let at = first.as_ptr();
        handlers.keep_staging(first);
        let smaller = handlers.take_staging(40).expect("memory");
        assert_eq!((smaller.len(), smaller.as_ptr()), (40, at), "the kept buffer, cut to size");
        handlers.keep_staging(smaller);
        let larger = handlers.take_staging(60).expect("memory");
        assert_eq!((larger.len(), &larger[..40], &larger[40..]), (60, &[7u8; 40][..], &[0u8; 20][..]));
        // Too large to keep: the next one is a fresh buffer.
        handlers.keep_staging(vec![1u8; STAGING_KEEP + 1]);
        assert_eq!(handlers.take_staging(3).expect("memory"), vec![0u8; 3]);
    }
}
