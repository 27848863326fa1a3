//! Messaging: tagged send/recv, active messages, remote FIFOs and raw
//! datagrams (DESIGN §2: "messages", "active messages", "remote FIFO",
//! "raw datagrams").
//!
//! Owns: the matching engine and the credits that bound the unexpected
//! buffer (`tagged`), the receiver-driven rendezvous shared by large tagged
//! messages and large active-message payloads (`rndv`), the handler table and
//! handler dispatch (`am`), the FIFO table (`fifo`), the raw-datagram queue
//! (`raw`), and the *outbox*: messages the delivery callback owes (replies,
//! credits, rendezvous completions), sent by [`State::msg_progress`] once the
//! protocol call has returned.
//!
//! Must not: send from inside the delivery callback (the protocol is borrowed
//! there; everything owed goes through the outbox, so it is still submitted
//! before the ack of what caused it), block while the endpoint lock is held,
//! or hand user handlers the endpoint (a handler gets an [`AmContext`] that
//! queues what it wants sent, because it runs with the lock held).
//!
//! # Threads and handlers
//!
//! Handlers and FIFO watermark callbacks run inside the progress engine, on
//! whichever thread is making progress (the application's or the progress
//! thread), with the endpoint lock held: they must be short and must not call
//! the [`Endpoint`](crate::Endpoint) (that would deadlock); use the context.

mod am;
mod cancel;
mod fifo;
mod owned;
mod raw;
mod rndv;
mod sync;
mod tagged;

use std::collections::VecDeque;

use mw_wire::op::{self, AmArgs, OpRepr, Status};
use std::mem::MaybeUninit;

use crate::config::Config;
use crate::endpoint::{Endpoint, State};
use crate::lock::StateGuard;
use crate::region::RawMem;
use crate::request::{Output, RequestId};
use crate::target::Target;
use crate::{Error, Result};

pub use am::{AmContext, AmHandle, AmMessage, AmReplyData};
pub use fifo::{Fifo, FifoKey};
pub use owned::{OwnedRecv, OwnedSend};
pub use tagged::{RecvHandle, RecvStatus, ANY_SOURCE, ANY_TAG};

/// Credit classes carried in [`op::Credit::class`].
pub(crate) const CREDIT_UNEXPECTED: u8 = 0;
/// "A FIFO of mine has room again": a pusher that was refused retries.
pub(crate) const CREDIT_FIFO: u8 = 1;

/// Counters of the messaging layer ([`Endpoint::msg_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MsgStats {
    /// Bytes (payload + 64 per message) now held in the unexpected buffer.
    pub unexpected_bytes: u64,
    /// Highest value `unexpected_bytes` ever reached.
    pub unexpected_bytes_max: u64,
    /// Messages now held in the unexpected buffer.
    pub unexpected_messages: u64,
    /// Tagged sends that had to wait for credit from their receiver.
    pub credit_stalls: u64,
    /// Tagged messages sent eagerly.
    pub eager_sent: u64,
    /// Tagged messages sent by rendezvous.
    pub rndv_sent: u64,
    /// Rendezvous payloads pulled (tagged and active-message).
    pub rndv_pulled: u64,
    /// Active-message handlers run.
    pub am_handled: u64,
    /// Of those, requests from same-host peers run straight from the ring,
    /// their inline answer published at once (no queue in between).
    pub am_in_place: u64,
    /// Replies from same-host peers that the waiting requester took
    /// straight from the ring (the rest went through a progress round).
    pub am_replies_in_place: u64,
    /// Handlers that panicked (their request was answered `Unsupported`).
    pub am_handler_panics: u64,
    /// Active messages for an id without a handler.
    pub am_no_handler: u64,
    /// FIFO pushes refused because the FIFO was full.
    pub fifo_refused: u64,
    /// Raw datagrams received and queued.
    pub raw_received: u64,
    /// Raw datagrams dropped because the receive queue was full.
    pub raw_dropped: u64,
}

/// Something the delivery callback (or a handler) owes a peer; sent by
/// [`State::msg_progress`].
#[derive(Debug)]
pub(crate) enum Outgoing {
    Credit { peer: u32, class: u8, amount: u32 },
    RndvDone { peer: u32, token: u32, status: Status },
    Status { peer: u32, req: u32, status: Status },
    AmReply { peer: u32, req: u32, status: Status, args: AmArgs, payload: Vec<u8> },
    AmSend { peer: u32, handler: u16, args: AmArgs, payload: Vec<u8> },
}

/// Where received bytes land.
#[derive(Debug)]
pub(crate) enum Sink {
    /// Library-owned bytes, at most `limit` of them (nonblocking receives and
    /// AM payloads: a leaked handle can never make us write into user memory).
    Staged { data: Vec<u8>, limit: usize },
    /// The user's own buffer, written in place (blocking `recv`, which holds
    /// the borrow until the receive is complete or cancelled).
    Direct { mem: RawMem, filled: usize },
    /// A buffer the user handed over (`irecv_owned`): written in place and
    /// given back when the receive is collected (a leaked handle leaks the
    /// buffer, never memory safety).
    Owned { data: Vec<u8>, filled: usize },
}

impl Sink {
    fn staged(limit: usize) -> Sink {
        Sink::Staged { data: Vec::new(), limit }
    }

    /// Appends pulled bytes; `Err` when they would overflow the buffer.
    fn land(&mut self, bytes: &[u8]) -> core::result::Result<(), ()> {
        match self {
            Sink::Staged { data, limit } => {
                if data.len() + bytes.len() > *limit {
                    return Err(());
                }
                data.extend_from_slice(bytes);
            }
            Sink::Direct { mem, filled } => {
                if *filled + bytes.len() > mem.len() {
                    return Err(());
                }
                mem.write(*filled, bytes);
                *filled += bytes.len();
            }
            Sink::Owned { data, filled } => {
                let end = *filled + bytes.len();
                data.get_mut(*filled..end).ok_or(())?.copy_from_slice(bytes);
                *filled = end;
            }
        }
        Ok(())
    }

    /// Lets `read` write the next `len` bytes in place (a whole payload
    /// copied straight from a same-host peer); `Err` when they would
    /// overflow the buffer or `read` fails (nothing counts as landed then).
    /// A staged buffer is not zero-filled first: `read` copies into its
    /// spare room (1 MiB AM replies: 72 -> 51 us per half round trip).
    ///
    /// # Safety
    /// `read` writes only initialized bytes (it copies), and returns true
    /// only after it wrote every byte of the destination it was given.
    #[allow(unsafe_code)]
    unsafe fn land_with(
        &mut self,
        len: usize,
        read: impl FnOnce(&mut [MaybeUninit<u8>]) -> bool,
    ) -> core::result::Result<(), ()> {
        match self {
            Sink::Staged { data, limit } => {
                let start = data.len();
                if start + len > *limit {
                    return Err(());
                }
                data.try_reserve_exact(len).map_err(|_| ())?;
                if !read(&mut data.spare_capacity_mut()[..len]) {
                    return Err(());
                }
                // SAFETY: `read` wrote all `len` bytes after `start` (this
                // function's contract), within the capacity reserved above.
                unsafe { data.set_len(start + len) };
            }
            Sink::Direct { mem, filled } => {
                let fits = *filled + len <= mem.len();
                let landed = fits
                    && mem.with_slice_mut(*filled, len, |bytes| {
                        // SAFETY: `read` stores only initialized bytes (the
                        // contract), so they stay initialized through this view.
                        read(unsafe { as_uninit(bytes) })
                    });
                if !landed {
                    return Err(());
                }
                *filled += len;
            }
            Sink::Owned { data, filled } => {
                let end = *filled + len;
                let bytes = data.get_mut(*filled..end).ok_or(())?;
                // SAFETY: as for `Direct`.
                if !read(unsafe { as_uninit(bytes) }) {
                    return Err(());
                }
                *filled = end;
            }
        }
        Ok(())
    }

    /// Replaces the contents with a whole eager message (moved when staged).
    fn fill(&mut self, bytes: std::borrow::Cow<'_, [u8]>) {
        match self {
            Sink::Staged { data, .. } => *data = bytes.into_owned(),
            Sink::Direct { mem, filled } => {
                mem.write(0, &bytes);
                *filled = bytes.len();
            }
            Sink::Owned { data, filled } => {
                data[..bytes.len()].copy_from_slice(&bytes);
                *filled = bytes.len();
            }
        }
    }

    /// Makes room for a pulled payload of `total` bytes (staged sinks
    /// allocate here, not at post time). `Err` when it cannot be allocated.
    fn prepare(&mut self, total: usize) -> core::result::Result<(), ()> {
        match self {
            Sink::Staged { data, limit } => {
                data.clear();
                *limit = total;
                data.try_reserve_exact(total).map_err(|_| ())
            }
            Sink::Direct { filled, .. } | Sink::Owned { filled, .. } => {
                *filled = 0;
                Ok(())
            }
        }
    }

    fn take_staged(&mut self) -> Vec<u8> {
        match self {
            Sink::Staged { data, .. } => std::mem::take(data),
            Sink::Direct { .. } | Sink::Owned { .. } => Vec::new(),
        }
    }

    /// The handed-over buffer of an `Owned` sink (empty for the others).
    fn take_owned(&mut self) -> Vec<u8> {
        match self {
            Sink::Owned { data, .. } => std::mem::take(data),
            Sink::Staged { .. } | Sink::Direct { .. } => Vec::new(),
        }
    }
}

/// A request's messaging output (stored in the request slab).
#[derive(Debug)]
pub(crate) enum MsgOutput {
    /// A tagged receive: its envelope once matched, and its buffer.
    Recv { status: RecvStatus, sink: Sink },
    /// The reply to an `am_request`; `args` only when it has any (boxed,
    /// like `AmIncoming`'s: eight inline words would make every request
    /// slot, and every move of one, twice as large).
    AmReply { args: Option<Box<AmArgs>>, sink: Sink },
    /// A large active-message payload being pulled at the target; the
    /// handler runs when it is complete.
    AmIncoming { source: u32, handler: u16, req: u32, want_reply: bool, args: Box<AmArgs>, sink: Sink },
    /// An `isend_owned` buffer the receiver has pulled, to give back.
    Sent { buf: Vec<u8> },
}

impl MsgOutput {
    pub(crate) fn land(&mut self, bytes: &[u8]) -> core::result::Result<(), ()> {
        match self {
            MsgOutput::Recv { sink, .. } | MsgOutput::AmReply { sink, .. } | MsgOutput::AmIncoming { sink, .. } => {
                sink.land(bytes)
            }
            MsgOutput::Sent { .. } => Err(()),
        }
    }

    /// [`Sink::land_with`] on this output's sink.
    ///
    /// # Safety
    /// As [`Sink::land_with`]: `read` writes only initialized bytes, and
    /// returns true only after it wrote every byte of its destination.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn land_with(
        &mut self,
        len: usize,
        read: impl FnOnce(&mut [MaybeUninit<u8>]) -> bool,
    ) -> core::result::Result<(), ()> {
        match self {
            MsgOutput::Recv { sink, .. } | MsgOutput::AmReply { sink, .. } | MsgOutput::AmIncoming { sink, .. } => {
                // SAFETY: the caller's contract is this one's.
                unsafe { sink.land_with(len, read) }
            }
            MsgOutput::Sent { .. } => Err(()),
        }
    }
}

/// Initialized bytes seen as room that may be uninitialized, for a copy
/// routine that fills either.
///
/// # Safety
/// Nothing may store an uninitialized value through the result (copies of
/// bytes are fine), or `bytes` would hold one after the borrow ends.
#[allow(unsafe_code)]
unsafe fn as_uninit(bytes: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: same layout; the caller keeps the bytes initialized.
    unsafe { &mut *(bytes as *mut [u8] as *mut [MaybeUninit<u8>]) }
}

/// The messaging state of one endpoint (a field of the endpoint state).
pub(crate) struct MsgState {
    rank: u32,
    size: u32,
    pub(crate) tagged: tagged::Tagged,
    pub(crate) am: am::Handlers,
    pub(crate) fifo: fifo::Fifos,
    pub(crate) raw: raw::RawQueue,
    pub(crate) rndv: rndv::Rndv,
    pub(crate) outbox: VecDeque<Outgoing>,
    /// Eager limit toward peers on other hosts (`Config::eager_limit`).
    pub(crate) eager_limit: usize,
    /// By rank: the eager limit toward that peer (`State::init_eager_limits`).
    pub(crate) eager_limits: Vec<usize>,
    /// By rank: the inline limit of active-message payloads and replies
    /// toward that peer (`State::init_eager_limits`).
    pub(crate) am_eager_limits: Vec<usize>,
    pub(crate) stats: MsgStats,
}

impl std::fmt::Debug for MsgState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsgState").field("rank", &self.rank).field("stats", &self.stats).finish_non_exhaustive()
    }
}

/// Eager limit toward a same-host peer when `Config::shm_eager_limit`
/// leaves it to us: a rank that is a thread of this process, or a process
/// this one reads through a cheap kernel copy.
pub(crate) const SHM_EAGER_LIMIT: usize = 16 << 10;
/// ... toward another process when the kernel's cross-memory copy costs more
/// than two `memcpy`s. Measured under `mwrun -n 2` on the host of
/// 2026-11-25 (send_recv ping-pong, then bandwidth; through the ring against
/// the single kernel copy): 32 KiB 3.3-4.0 against 5.5 µs and 10-11.7
/// against 5.5 GB/s, 64 KiB 6.5-6.7 against 7.8 µs; 128 KiB about even,
/// 256 KiB 35 against 21.5 µs through the ring.
pub(crate) const SHM_EAGER_LIMIT_COSTLY_COPY: usize = 64 << 10;

impl State {
    /// Gives every peer its eager limits, once, when the endpoint starts.
    /// Tagged messages: `Config::eager_limit` toward other hosts,
    /// `Config::shm_eager_limit` (or the choice it leaves to us, see there)
    /// toward this host's ranks. Active messages: the same, but inline up
    /// to at least [`SHM_EAGER_LIMIT_COSTLY_COPY`] toward this host's ranks
    /// when the configuration leaves it to us. A pulled payload costs more
    /// than a tagged message's single copy (the target pulls the request,
    /// copies the reply, and the initiator pulls that): between threads of
    /// one process, where a tagged message's limit stays at 16 KiB, a 32 KiB
    /// am round trip took 3.7-3.8 µs pulled and 1.8 µs inline, 64 KiB 6.2
    /// and 3.2-3.4 (`mwbench --bench pingpong --op am --transport shm`).
    pub(crate) fn init_eager_limits(&mut self) {
        let configured = self.config.shm_eager_limit;
        let (tagged, am) = (0..self.size)
            .map(|peer| {
                let Some(shm) = self.shm.as_ref().filter(|shm| shm.is_peer(peer)) else {
                    return (self.msg.eager_limit, self.msg.eager_limit);
                };
                if let Some(limit) = configured {
                    return (limit, limit);
                }
                let other_process =
                    shm.shared.link(peer).is_some_and(|link| matches!(link.far, mw_transport::shm::Far::Process(_)));
                if other_process && shm.shared.cma && shm.shared.kernel_copy_is_costly() {
                    (SHM_EAGER_LIMIT_COSTLY_COPY, SHM_EAGER_LIMIT_COSTLY_COPY)
                } else {
                    (SHM_EAGER_LIMIT, SHM_EAGER_LIMIT_COSTLY_COPY)
                }
            })
            .unzip();
        self.msg.eager_limits = tagged;
        self.msg.am_eager_limits = am;
    }

    /// Largest tagged message that goes to `peer` eagerly (see
    /// `init_eager_limits`).
    #[inline]
    pub(crate) fn eager_limit_to(&self, peer: u32) -> usize {
        self.msg.eager_limits.get(peer as usize).copied().unwrap_or(self.msg.eager_limit)
    }

    /// Largest active-message payload or reply that goes to `peer` inline
    /// (see `init_eager_limits`).
    #[inline]
    pub(crate) fn am_eager_limit_to(&self, peer: u32) -> usize {
        self.msg.am_eager_limits.get(peer as usize).copied().unwrap_or(self.msg.eager_limit)
    }
}

impl MsgState {
    pub(crate) fn new(rank: u32, size: u32, config: &Config) -> MsgState {
        let eager_limit = config.eager_limit;
        let largest = eager_limit.max(config.shm_eager_limit.unwrap_or(SHM_EAGER_LIMIT_COSTLY_COPY)) as u64;
        let credit = (config.unexpected_credit as u64).max(2 * (largest + tagged::OVERHEAD));
        MsgState {
            rank,
            size,
            tagged: tagged::Tagged::new(size, credit),
            am: am::Handlers::default(),
            fifo: fifo::Fifos::new(size),
            raw: raw::RawQueue::default(),
            rndv: rndv::Rndv::new(config.chunk_bytes, config.max_queued_bytes, config.stage_stores),
            outbox: VecDeque::new(),
            eager_limit,
            eager_limits: vec![eager_limit; size as usize],
            am_eager_limits: vec![eager_limit; size as usize],
            stats: MsgStats::default(),
        }
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.outbox.is_empty() && self.rndv.is_idle() && self.tagged.nothing_blocked()
    }
}

/// Executes one delivered messaging operation from `peer` (called by the
/// target dispatcher for every opcode it does not own).
pub(crate) fn on_message(t: &mut Target<'_>, peer: u32, op: OpRepr<'_>) {
    match op {
        OpRepr::Eager(eager) => tagged::on_eager(t, peer, &eager),
        OpRepr::RndvRts(rts) => tagged::on_rts(t, peer, &rts),
        OpRepr::RndvDone(done) => rndv::on_done(t, peer, &done),
        OpRepr::Credit(credit) => match credit.class {
            CREDIT_UNEXPECTED => t.msg.tagged.add_credit(peer, credit.amount),
            CREDIT_FIFO => t.msg.fifo.on_credit(peer),
            _ => t.stats.unsupported_ops += 1,
        },
        OpRepr::FifoPush(push) => fifo::on_push(t, peer, &push),
        OpRepr::AmRequest(am) => am::on_request(t, peer, &am),
        OpRepr::AmReply(reply) => am::on_reply(t, peer, &reply),
        _ => t.stats.unsupported_ops += 1,
    }
}

impl State {
    /// The messaging layer's share of a progress round: send what the
    /// callback owes, pull rendezvous payloads (within a window), run
    /// handlers whose payload has arrived, release sends that got credit.
    /// Returns whether anything happened.
    pub(crate) fn msg_progress(&mut self, now: mw_proto::time::Instant) -> bool {
        if self.msg.is_idle() {
            return false;
        }
        let mut worked = self.pump_pulls(now);
        worked |= self.flush_outbox(now);
        worked |= self.pump_blocked_sends(now);
        worked |= self.reap_exposures();
        worked
    }

    /// Sends everything in the outbox.
    pub(crate) fn flush_outbox(&mut self, now: mw_proto::time::Instant) -> bool {
        let mut worked = false;
        while let Some(out) = self.msg.outbox.pop_front() {
            worked = true;
            // A peer that died meanwhile: nothing to deliver it to.
            let _ = self.send_outgoing(now, out);
        }
        worked
    }

    fn send_outgoing(&mut self, now: mw_proto::time::Instant, out: Outgoing) -> Result<()> {
        match out {
            Outgoing::Credit { peer, class, amount } => {
                self.send_op(now, peer, &OpRepr::Credit(op::Credit { class, amount }), &[], None)
            }
            Outgoing::RndvDone { peer, token, status } => {
                self.send_op(now, peer, &OpRepr::RndvDone(op::RndvDone { sender_req: token, status }), &[], None)
            }
            Outgoing::Status { peer, req, status } => {
                self.send_op(now, peer, &OpRepr::OpStatus(op::OpStatus { req, status }), &[], None)
            }
            Outgoing::AmReply { peer, req, status, args, payload } => {
                if payload.len() > self.am_eager_limit_to(peer) {
                    let desc = self.expose_payload(peer, payload)?;
                    let repr = OpRepr::AmReply(op::AmReply { req, status, rndv: true, args, body: &[] });
                    return self.send_op(now, peer, &repr, &desc, None);
                }
                let repr = OpRepr::AmReply(op::AmReply { req, status, rndv: false, args, body: &[] });
                let sent = self.send_op(now, peer, &repr, &payload, None);
                self.msg.am.keep_spare(payload);
                sent
            }
            Outgoing::AmSend { peer, handler, args, payload } => {
                let rndv = payload.len() > self.am_eager_limit_to(peer);
                let repr =
                    OpRepr::AmRequest(op::AmRequest { req: 0, handler, want_reply: false, rndv, args, body: &[] });
                if rndv {
                    let desc = self.expose_payload(peer, payload)?;
                    return self.send_op(now, peer, &repr, &desc, None);
                }
                self.send_op(now, peer, &repr, &payload, None)
            }
        }
    }

    /// Exposes an active-message payload above the eager limit for `peer`
    /// to pull (the buffer moves into the exposure: no copy); returns the
    /// descriptor to send instead of the payload.
    fn expose_payload(&mut self, peer: u32, payload: Vec<u8>) -> Result<[u8; op::RndvDesc::LEN]> {
        let token = self.requests.alloc(peer, 1)?;
        // Nobody waits on the token: it frees itself when the pull is done.
        self.requests.release(token);
        let total_len = payload.len() as u64;
        let key = self.expose_vec(peer, payload, token);
        Ok(op::RndvDesc { total_len, key: key.0, offset: 0, token: token.0 }.to_bytes())
    }
}

impl Endpoint {
    /// Counters of the messaging layer.
    pub fn msg_stats(&self) -> MsgStats {
        self.lock().msg.stats
    }

    /// The largest tagged message this rank sends to `rank` eagerly: larger
    /// ones go by rendezvous, so a receive posted before they arrive is what
    /// lets them move. Fixed when the endpoint starts (see
    /// `Config::eager_limit` and `Config::shm_eager_limit`). Active-message
    /// payloads and replies use the same limit, except toward this host's
    /// ranks when `Config::shm_eager_limit` is left to the library: then
    /// they go inline up to at least 64 KiB.
    pub fn eager_limit(&self, rank: u32) -> Result<usize> {
        self.check_rank(rank)?;
        Ok(self.lock().eager_limit_to(rank))
    }

    /// Takes the endpoint lock once too many bytes are no longer queued
    /// toward `rank`, waiting while they are (bounds the sender's memory
    /// like the one-sided operations do). One lock in the usual case.
    /// [`Error::Timeout`] when no room came within `Config::op_timeout`.
    pub(crate) fn lock_with_room(&self, rank: u32) -> Result<StateGuard<'_, State>> {
        let state = self.lock();
        if !state.queue_full_toward(rank) {
            return Ok(state);
        }
        drop(state);
        self.wait_for_op(|state| !state.queue_full_toward(rank))?;
        Ok(self.lock())
    }
}

impl State {
    /// Whether `rank`'s send queue is at its limit (see `lock_with_room`).
    pub(crate) fn queue_full_toward(&self, rank: u32) -> bool {
        rank != self.rank && self.proto.queued_bytes(rank) >= self.config.max_queued_bytes && !self.dead[rank as usize]
    }
}

/// The error for more than [`AM_MAX_ARGS`](mw_wire::op::AM_MAX_ARGS) arguments.
pub(crate) const TOO_MANY_ARGS: Error = Error::InvalidArgument("at most 8 active-message arguments");

/// Active-message arguments from a slice (at most eight).
pub(crate) fn check_args(args: &[u64]) -> Result<AmArgs> {
    AmArgs::from_slice(args).ok_or(TOO_MANY_ARGS)
}

/// Takes a completed request's messaging output.
pub(crate) fn take_msg(state: &mut State, id: RequestId) -> Result<Option<MsgOutput>> {
    let (result, output) = state.requests.take(id).ok_or(Error::InvalidArgument("operation already collected"))?;
    result?;
    Ok(match output {
        Output::Msg(msg) => Some(msg),
        _ => None,
    })
}
