//! The initiator side of one-sided operations: put and its variants, get,
//! atomics, put_signal, address registers.
//!
//! Owns: turning a call into operation messages (split into chunks of at most
//! `chunk_bytes`, so any size works and memory stays bounded; over UDP put
//! chunks and get responses are also cut to fit one datagram each) and a request
//! that completes when the target acknowledged (puts) or answered (gets,
//! fetching atomics). Must not: wait except for room in the send queue
//! (backpressure keeps queued bytes per peer bounded).

use mw_wire::op::{self, AtomicOp, AtomicWidth, OpRepr, SignalOp};

use crate::endpoint::{Endpoint, State};
use crate::get_window::{GetChunk, HeldOp, Next};
use crate::handle::{Handle, Landing};
use crate::put_feed::{FeedSignal, FeedSource, PutFeed};
use crate::region::RegionKey;
use crate::request::{Output, RequestId};
use crate::target::strided_extent;
use crate::{Error, Result};

/// The signal half of a `put_signal`: a 64-bit word at the target, set or
/// incremented after the data has landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal {
    /// Region holding the signal word.
    pub key: RegionKey,
    /// Offset of the word (8-byte aligned).
    pub offset: u64,
    /// Set or add.
    pub op: SignalOp,
    /// Value to set or add.
    pub value: u64,
}

/// Comparison for [`Endpoint::wait_until`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Greater than.
    Gt,
    /// Greater or equal.
    Ge,
    /// Less than.
    Lt,
    /// Less or equal.
    Le,
}

impl Cmp {
    /// Whether `lhs <cmp> rhs` holds.
    pub fn holds(self, lhs: u64, rhs: u64) -> bool {
        match self {
            Cmp::Eq => lhs == rhs,
            Cmp::Ne => lhs != rhs,
            Cmp::Gt => lhs > rhs,
            Cmp::Ge => lhs >= rhs,
            Cmp::Lt => lhs < rhs,
            Cmp::Le => lhs <= rhs,
        }
    }
}

/// Builds the operation for the final chunk of a put (e.g. the put_signal).
type LastChunkOp<'f> = dyn Fn(u64, &[u8]) -> OpRepr<'static> + 'f;

impl Endpoint {
    /// Allocates a request toward `rank` after waiting for room in its send
    /// queue (the memory bound, `Config::max_queued_bytes`: an operation
    /// never waits for the protocol's window here), then lets `issue` send
    /// the operation's messages.
    pub(crate) fn start<'a>(
        &'a self,
        rank: u32,
        parts: u32,
        landing: Landing<'a>,
        output: Output,
        issue: impl FnOnce(&mut State, RequestId) -> Result<()>,
    ) -> Result<Handle<'a>> {
        let feed = Feed::Whole;
        self.check_rank(rank)?;
        // One lock on the common path: room is checked under the same lock
        // the operation is issued under, and waited for only when short.
        let mut state = self.lock();
        if queue_full(&state, rank, feed) {
            drop(state);
            self.wait_for_room_fed(rank, feed)?;
            state = self.lock();
        }
        let id = state.requests.alloc(rank, parts)?;
        state.requests.set_output(id, output);
        state.stats.ops_initiated += 1;
        if let Err(error) = issue(&mut state, id) {
            state.requests.fail(id, error);
        }
        drop(state);
        Ok(Handle::new(self, id, landing))
    }

    /// Waits while too many bytes are queued toward `rank`.
    fn wait_for_room(&self, rank: u32) -> Result<()> {
        self.wait_for_room_fed(rank, Feed::JustAhead)
    }

    fn wait_for_room_fed(&self, rank: u32, feed: Feed) -> Result<()> {
        if queue_full(&self.lock(), rank, feed) {
            self.wait_for_op(|state| !queue_full(state, rank, feed))?;
        }
        Ok(())
    }

    fn chunk_bytes(&self) -> usize {
        self.shared.chunk_bytes
    }

    /// Bytes of data per message of a put toward `rank` (or of a get's
    /// response from it) whose messages carry operation headers of up to
    /// `op_header` bytes: `chunk_bytes`, and over UDP no more than fits one
    /// datagram. A message that fits one datagram is executed straight from
    /// the receive buffer; a larger one is first reassembled there, one more
    /// copy of every byte (on loopback ~25% of a bulk put's receive-side CPU).
    fn data_chunk(&self, rank: u32, op_header: usize) -> usize {
        let chunk = self.chunk_bytes();
        if rank == self.rank() || self.shares_memory_with(rank) {
            return chunk;
        }
        chunk.min(self.shared.udp_segment.saturating_sub(op_header)).max(1)
    }

    /// Data bytes per message of a put toward `rank`; with `signal`, every
    /// chunk is sized for the longer PutSignal header, so the last fits too.
    fn put_chunk(&self, rank: u32, signal: bool) -> usize {
        let op = if signal { op::OpCode::PutSignal } else { op::OpCode::Put };
        self.data_chunk(rank, op.min_header_len())
    }

    /// Sends `data` as one or more put messages, copied into the send
    /// queue at once (up to the memory bound); the last one may be a
    /// different operation (put_signal) built by `last`.
    fn issue_chunked_put(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        data: &[u8],
        id: RequestId,
        last: Option<&LastChunkOp<'_>>,
    ) -> Result<()> {
        let chunk = self.put_chunk(rank, last.is_some());
        let count = data.len().div_ceil(chunk).max(1);
        if count > 1 && !self.probe_put_extent(rank, key, offset, data.len(), id, count as u32)? {
            return Ok(()); // refused: the request holds the error, nothing was written
        }
        let mut index = 0;
        while index < count {
            if index > 0 {
                self.wait_for_room_fed(rank, Feed::Whole)?;
            }
            // Under one lock, as many messages as the queue takes; then they
            // leave together (one batch of datagrams, not one send each).
            let mut state = self.lock();
            let now = self.shared.now();
            let mut queued = false;
            let result = loop {
                let start = index * chunk;
                let body = &data[start..data.len().min(start + chunk)];
                let Some(at) = offset.checked_add(start as u64) else {
                    break Err(Error::InvalidArgument("offset overflows"));
                };
                let repr = match (&last, index + 1 == count) {
                    (Some(build), true) => build(at, body),
                    _ if body.len() <= op::INLINE_MAX => {
                        OpRepr::PutInline(op::PutInline { req: id.0, key: key.0, offset: at, body: &[] })
                    }
                    _ => OpRepr::Put(op::Put { req: id.0, key: key.0, offset: at, body: &[] }),
                };
                match state.queue_op(now, rank, &repr, body, Some(id)) {
                    Ok(to_protocol) => queued |= to_protocol,
                    Err(error) => break Err(error),
                }
                index += 1;
                if index == count {
                    break Ok(());
                }
            };
            if queued {
                state.transmit(now);
            }
            result?;
        }
        Ok(())
    }

    /// Before a put of `count > 1` messages (request `id`, started with
    /// `count` parts): makes sure the target will accept all of them, so
    /// that a put that does not fit its region, or lacks the right, writes
    /// nothing at all rather than the messages that happen to fit. The
    /// target checks each message on its own (it cannot know they belong
    /// together), but its key and rights are the same for every one and only
    /// the last can overrun: an empty put at the end of the range is accepted
    /// exactly when every message will be. That probe costs a round trip, so
    /// its verdict is remembered per (rank, key) and repeated puts into a
    /// range already proven skip it (keys are random and never reused, so
    /// the memory cannot apply to another region). Returns whether to go on.
    fn probe_put_extent(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        len: usize,
        id: RequestId,
        count: u32,
    ) -> Result<bool> {
        let end = offset.checked_add(len as u64).ok_or(Error::InvalidArgument("offset + length overflows"))?;
        {
            let mut state = self.lock();
            if state.verified_put_ends.get(&(rank, key.0)).is_some_and(|&known| end <= known) {
                return Ok(true);
            }
            state.requests.set_pending(id, count + 1);
            let probe = OpRepr::PutInline(op::PutInline { req: id.0, key: key.0, offset: end, body: &[] });
            let now = self.shared.now();
            state.send_op(now, rank, &probe, &[], Some(id))?;
        }
        // The probe's part completes (pending drops to `count`) or the
        // request fails (pending reads 0).
        self.wait_for_op(|state| state.requests.pending(id).is_none_or(|pending| pending <= count))?;
        let mut state = self.lock();
        if state.requests.is_done(id) != Some(false) {
            return Ok(false);
        }
        if state.verified_put_ends.len() >= MAX_VERIFIED_PUT_ENDS {
            state.verified_put_ends.clear();
        }
        let known = state.verified_put_ends.entry((rank, key.0)).or_insert(0);
        *known = (*known).max(end);
        Ok(true)
    }

    /// Nonblocking put: copies `data` to `offset` of region `key` at `rank`.
    /// The handle completes when the data is in the target's memory.
    ///
    /// Returns without waiting for the transfer or for the protocol's
    /// window: over UDP the whole put is copied into the send queue at once
    /// and leaves as acknowledgements make room, driven by the progress
    /// thread or by any later call. It waits only while operations issued
    /// before it already fill `MW_MAX_QUEUED` bytes toward `rank`, and the
    /// first put of several messages into a range not yet proven to fit
    /// waits one round trip for that proof (a put that does not fit writes
    /// nothing). [`put_nb_lent`](Self::put_nb_lent) reads the bytes from
    /// `data` as they leave instead, saving the copy of a large put into
    /// the queue, for callers who can promise the handle is not leaked.
    pub fn put_nb<'a>(&'a self, rank: u32, key: RegionKey, offset: u64, data: &'a [u8]) -> Result<Handle<'a>> {
        self.put_fed(rank, key, offset, data, None)
    }

    /// A put; with `lent` (the same bytes as `data`), a put of several
    /// messages toward a UDP peer is fed from the caller's buffer
    /// (crate::put_feed) instead of copied into the send queue at once.
    pub(crate) fn put_fed<'a>(
        &'a self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        data: &'a [u8],
        lent: Option<FeedSource>,
    ) -> Result<Handle<'a>> {
        if self.shm_put(rank, key, offset, data).is_some() {
            return Ok(Handle::ready(self, Ok(Output::None)));
        }
        let chunk = self.put_chunk(rank, false);
        let chunks = data.len().div_ceil(chunk).max(1) as u32;
        if chunks == 1 {
            return self.start(rank, 1, Landing::Nothing, Output::None, |state, id| {
                let repr = if data.len() <= op::INLINE_MAX {
                    OpRepr::PutInline(op::PutInline { req: id.0, key: key.0, offset, body: &[] })
                } else {
                    OpRepr::Put(op::Put { req: id.0, key: key.0, offset, body: &[] })
                };
                state.send_op(self.shared.now(), rank, &repr, data, Some(id))
            });
        }
        let mut handle = self.start(rank, chunks, Landing::Nothing, Output::None, |_, _| Ok(()))?;
        let id = handle_id(&handle);
        if lent.is_some() {
            handle.set_lent();
        }
        let issued = match lent {
            Some(source) if self.is_udp_peer(rank) => self.issue_fed_put(rank, key, offset, id, source, chunk, None),
            _ => self.issue_chunked_put(rank, key, offset, data, id, None),
        };
        if let Err(error) = issued {
            self.lock().requests.fail(id, error);
        }
        self.shared.nudge_watchdog();
        Ok(handle)
    }

    /// Stores a 64-bit value (little-endian) at the target (PPRAM-Link's bit-of-data write).
    pub fn put_value(&self, rank: u32, key: RegionKey, offset: u64, value: u64) -> Result<()> {
        self.put(rank, key, offset, &value.to_le_bytes())
    }

    /// Nonblocking put_signal: the data, then the signal word is set or added
    /// to at the target, so a target waiting on the signal sees the data.
    /// Like [`put_nb`](Self::put_nb), it does not wait for the window.
    pub fn put_signal_nb<'a>(
        &'a self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        data: &'a [u8],
        signal: Signal,
    ) -> Result<Handle<'a>> {
        self.put_signal_fed(rank, key, offset, data, signal, None)
    }

    /// A put_signal; `lent` as for [`put_fed`](Self::put_fed).
    pub(crate) fn put_signal_fed<'a>(
        &'a self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        data: &'a [u8],
        signal: Signal,
        lent: Option<FeedSource>,
    ) -> Result<Handle<'a>> {
        if self.shm_put_signal(rank, key, offset, data, signal).is_some() {
            return Ok(Handle::ready(self, Ok(Output::None)));
        }
        let chunk = self.put_chunk(rank, true);
        let chunks = data.len().div_ceil(chunk).max(1) as u32;
        let build = move |id: RequestId, at: u64| {
            OpRepr::PutSignal(op::PutSignal {
                req: id.0,
                key: key.0,
                offset: at,
                signal_key: signal.key.0,
                signal_offset: signal.offset,
                signal_op: signal.op,
                signal_value: signal.value,
                body: &[],
            })
        };
        if chunks == 1 {
            return self.start(rank, 1, Landing::Nothing, Output::None, |state, id| {
                state.send_op(self.shared.now(), rank, &build(id, offset), data, Some(id))
            });
        }
        let mut handle = self.start(rank, chunks, Landing::Nothing, Output::None, |_, _| Ok(()))?;
        let id = handle_id(&handle);
        if lent.is_some() {
            handle.set_lent();
        }
        let issued = match lent {
            Some(source) if self.is_udp_peer(rank) => {
                let fed = FeedSignal { key: signal.key.0, offset: signal.offset, op: signal.op, value: signal.value };
                self.issue_fed_put(rank, key, offset, id, source, chunk, Some(fed))
            }
            _ => {
                let last = move |at: u64, _body: &[u8]| build(id, at);
                self.issue_chunked_put(rank, key, offset, data, id, Some(&last))
            }
        };
        if let Err(error) = issued {
            self.lock().requests.fail(id, error);
        }
        self.shared.nudge_watchdog();
        Ok(handle)
    }

    /// Whether `rank` is reached over UDP (not this rank, not on this host).
    fn is_udp_peer(&self, rank: u32) -> bool {
        rank != self.rank() && !self.shares_memory_with(rank)
    }

    /// Queues a put of several messages (request `id`) to be fed from
    /// `source` toward UDP peer `rank` (crate::put_feed), after making sure
    /// the target will accept all of it, and feeds what the send queue
    /// takes now.
    #[allow(clippy::too_many_arguments)] // the put's fields, its request, and how it is cut
    fn issue_fed_put(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        id: RequestId,
        source: FeedSource,
        chunk: usize,
        signal: Option<FeedSignal>,
    ) -> Result<()> {
        let count = source.len().div_ceil(chunk) as u32;
        if !self.probe_put_extent(rank, key, offset, source.len(), id, count)? {
            return Ok(()); // refused: the request holds the error, nothing was written
        }
        let mut state = self.lock();
        state.gets.push_put(rank, PutFeed { req: id, key: key.0, offset, source, chunk, fed: 0, signal });
        state.pump_gets(self.shared.now());
        Ok(())
    }

    /// Nonblocking get: reads `out.len()` bytes at `offset` of region `key`
    /// at `rank` into `out` (filled when the handle is waited on).
    pub fn get_nb<'a>(&'a self, rank: u32, key: RegionKey, offset: u64, out: &'a mut [u8]) -> Result<Handle<'a>> {
        if self.shm_get(rank, key, offset, out).is_some() {
            return Ok(Handle::ready(self, Ok(Output::None)));
        }
        let len = out.len();
        let chunk = self.data_chunk(rank, op::OpCode::GetResponse.min_header_len());
        let chunks = len.div_ceil(chunk).max(1);
        offset.checked_add(len as u64).ok_or(Error::InvalidArgument("offset + length overflows"))?;
        if rank != self.rank() && !self.shares_memory_with(rank) {
            // Over UDP the chunks are requested a window at a time (crate::get_window).
            if chunks > 1 {
                self.shared.nudge_watchdog();
            }
            return self.start(
                rank,
                chunks as u32,
                Landing::Bytes(out),
                Output::Data(Vec::with_capacity(len)),
                |state, id| {
                    for index in 0..chunks {
                        let start = index * chunk;
                        let this = (len - start).min(chunk);
                        state.gets.push(
                            rank,
                            GetChunk { req: id, key: key.0, offset: offset + start as u64, len: this as u64 },
                        );
                    }
                    state.pump_gets(self.shared.now());
                    Ok(())
                },
            );
        }
        let handle =
            self.start(rank, chunks as u32, Landing::Bytes(out), Output::Data(Vec::with_capacity(len)), |_, _| Ok(()))?;
        let id = handle_id(&handle);
        for index in 0..chunks {
            let start = index * chunk;
            let this = (len - start).min(chunk);
            let repr = OpRepr::GetRequest(op::GetRequest {
                req: id.0,
                key: key.0,
                offset: offset + start as u64,
                len: this as u64,
            });
            if index > 0 {
                if let Err(error) = self.wait_for_room(rank) {
                    self.lock().requests.fail(id, error);
                    break;
                }
            }
            let mut state = self.lock();
            let now = self.shared.now();
            if let Err(error) = state.send_op(now, rank, &repr, &[], None) {
                state.requests.fail(id, error);
                break;
            }
        }
        Ok(handle)
    }

    /// Get, waiting for the data.
    pub fn get(&self, rank: u32, key: RegionKey, offset: u64, out: &mut [u8]) -> Result<()> {
        self.get_nb(rank, key, offset, out)?.wait()
    }

    /// Reads a 64-bit little-endian value at the target (PPRAM-Link's bit-of-data read).
    pub fn get_value(&self, rank: u32, key: RegionKey, offset: u64) -> Result<u64> {
        let mut bytes = [0u8; 8];
        self.get(rank, key, offset, &mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Nonblocking atomic on a u32 or u64 word at the target, executed exactly
    /// once. With `fetch` the handle's value is the word before the operation.
    ///
    /// `operand` is the value to add, swap in, store or combine; `compare`
    /// the expected value of [`AtomicOp::CompareSwap`]. Arguments an op does
    /// not use are ignored on every path, whatever their value: `compare`
    /// for every op but CompareSwap, `operand` for [`AtomicOp::Load`] (which
    /// always fetches, whatever `fetch` says). For a 32-bit word the
    /// arguments the op uses must fit in 32 bits
    /// ([`Error::InvalidArgument`] otherwise).
    #[allow(clippy::too_many_arguments)]
    pub fn atomic_nb(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        op: AtomicOp,
        width: AtomicWidth,
        operand: u64,
        compare: u64,
        fetch: bool,
    ) -> Result<Handle<'_>> {
        // The wire carries an unused argument only as zero (the target
        // refuses anything else as malformed), so ignored means zeroed here.
        let compare = if op == AtomicOp::CompareSwap { compare } else { 0 };
        let operand = if op == AtomicOp::Load { 0 } else { operand };
        if width == AtomicWidth::U32 && (operand > u64::from(u32::MAX) || compare > u64::from(u32::MAX)) {
            return Err(Error::InvalidArgument("operand does not fit a 32-bit atomic"));
        }
        let fetch = fetch || op == AtomicOp::Load;
        if let Some(old) = self.shm_atomic(rank, key, offset, op, width, operand, compare) {
            return Ok(Handle::ready(self, Ok(if fetch { Output::Value(old) } else { Output::None })));
        }
        self.start(rank, 1, Landing::Nothing, Output::None, |state, id| {
            let repr = OpRepr::AtomicRequest(op::AtomicRequest {
                req: id.0,
                key: key.0,
                offset,
                op,
                width,
                fetch,
                operand,
                compare,
            });
            let now = self.shared.now();
            // A fetching atomic completes on its response, the others on the ack.
            state.send_op(now, rank, &repr, &[], (!fetch).then_some(id))
        })
    }

    #[allow(clippy::too_many_arguments)] // rank, key, offset, op, width, operand, compare
    fn atomic_fetch(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        op: AtomicOp,
        w: AtomicWidth,
        v: u64,
        c: u64,
    ) -> Result<u64> {
        self.atomic_nb(rank, key, offset, op, w, v, c, true)?.wait_value()
    }

    fn atomic_nofetch(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        op: AtomicOp,
        w: AtomicWidth,
        v: u64,
    ) -> Result<()> {
        self.atomic_nb(rank, key, offset, op, w, v, 0, false)?.wait()
    }

    /// Atomically adds `value` to the u64 at the target; returns the old value.
    pub fn fetch_add_u64(&self, rank: u32, key: RegionKey, offset: u64, value: u64) -> Result<u64> {
        self.atomic_fetch(rank, key, offset, AtomicOp::Add, AtomicWidth::U64, value, 0)
    }
    /// Atomically adds `value` to the u32 at the target; returns the old value.
    pub fn fetch_add_u32(&self, rank: u32, key: RegionKey, offset: u64, value: u32) -> Result<u32> {
        self.atomic_fetch(rank, key, offset, AtomicOp::Add, AtomicWidth::U32, value.into(), 0).map(|v| v as u32)
    }
    /// Atomically adds `value` to the u64 at the target.
    pub fn add_u64(&self, rank: u32, key: RegionKey, offset: u64, value: u64) -> Result<()> {
        self.atomic_nofetch(rank, key, offset, AtomicOp::Add, AtomicWidth::U64, value)
    }
    /// Atomically adds `value` to the u32 at the target.
    pub fn add_u32(&self, rank: u32, key: RegionKey, offset: u64, value: u32) -> Result<()> {
        self.atomic_nofetch(rank, key, offset, AtomicOp::Add, AtomicWidth::U32, value.into())
    }
    /// Atomically replaces the u64 at the target; returns the old value.
    pub fn swap_u64(&self, rank: u32, key: RegionKey, offset: u64, value: u64) -> Result<u64> {
        self.atomic_fetch(rank, key, offset, AtomicOp::Swap, AtomicWidth::U64, value, 0)
    }
    /// Atomically replaces the u32 at the target; returns the old value.
    pub fn swap_u32(&self, rank: u32, key: RegionKey, offset: u64, value: u32) -> Result<u32> {
        self.atomic_fetch(rank, key, offset, AtomicOp::Swap, AtomicWidth::U32, value.into(), 0).map(|v| v as u32)
    }
    /// Sets the u64 at the target to `new` if it equals `expected`; returns the old value.
    pub fn compare_swap_u64(&self, rank: u32, key: RegionKey, offset: u64, expected: u64, new: u64) -> Result<u64> {
        self.atomic_fetch(rank, key, offset, AtomicOp::CompareSwap, AtomicWidth::U64, new, expected)
    }
    /// Sets the u32 at the target to `new` if it equals `expected`; returns the old value.
    pub fn compare_swap_u32(&self, rank: u32, key: RegionKey, offset: u64, expected: u32, new: u32) -> Result<u32> {
        self.atomic_fetch(rank, key, offset, AtomicOp::CompareSwap, AtomicWidth::U32, new.into(), expected.into())
            .map(|v| v as u32)
    }
    /// Atomic bitwise op with fetch (`op` is And, Or or Xor); returns the old value.
    pub fn fetch_bitwise(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        op: AtomicOp,
        width: AtomicWidth,
        value: u64,
    ) -> Result<u64> {
        if !matches!(op, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor) {
            return Err(Error::InvalidArgument("fetch_bitwise takes And, Or or Xor"));
        }
        self.atomic_fetch(rank, key, offset, op, width, value, 0)
    }
    /// Atomic bitwise op without fetch (`op` is And, Or or Xor).
    pub fn bitwise(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        op: AtomicOp,
        width: AtomicWidth,
        value: u64,
    ) -> Result<()> {
        if !matches!(op, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor) {
            return Err(Error::InvalidArgument("bitwise takes And, Or or Xor"));
        }
        self.atomic_nofetch(rank, key, offset, op, width, value)
    }
    /// Atomic load of a word at the target.
    pub fn atomic_load(&self, rank: u32, key: RegionKey, offset: u64, width: AtomicWidth) -> Result<u64> {
        self.atomic_fetch(rank, key, offset, AtomicOp::Load, width, 0, 0)
    }
    /// Atomic store of a word at the target.
    pub fn atomic_store(&self, rank: u32, key: RegionKey, offset: u64, width: AtomicWidth, value: u64) -> Result<()> {
        self.atomic_nofetch(rank, key, offset, AtomicOp::Store, width, value)
    }

    /// Nonblocking strided put: `count` elements of `elem_size` bytes taken
    /// from `src` every `src_stride` bytes land at the target every
    /// `dst_stride` bytes starting at `offset` (PPRAM-Link stride scatter).
    #[allow(clippy::too_many_arguments)]
    pub fn put_strided(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        src: &[u8],
        elem_size: usize,
        count: usize,
        src_stride: usize,
        dst_stride: usize,
    ) -> Result<()> {
        check_local_strided(src.len(), elem_size, count, src_stride)?;
        strided_extent(elem_size as u32, count as u32, dst_stride as u64)
            .map_err(|_| Error::InvalidArgument("target stride smaller than element or extent overflows"))?;
        let per_msg = (self.chunk_bytes() / elem_size.max(1)).max(1);
        let msgs = count.div_ceil(per_msg).max(1);
        let handle = self.start(rank, msgs as u32, Landing::Nothing, Output::None, |_, _| Ok(()))?;
        let id = handle_id(&handle);
        let mut packed = Vec::with_capacity(per_msg.min(count) * elem_size);
        for m in 0..msgs {
            let first = m * per_msg;
            let n = (count - first).min(per_msg);
            packed.clear();
            for i in first..first + n {
                packed.extend_from_slice(&src[i * src_stride..i * src_stride + elem_size]);
            }
            let repr = OpRepr::PutStrided(op::PutStrided {
                req: id.0,
                key: key.0,
                offset: offset + (first * dst_stride) as u64,
                elem_size: elem_size as u32,
                count: n as u32,
                stride: dst_stride as u64,
                body: &[],
            });
            if m > 0 {
                if let Err(error) = self.wait_for_room(rank) {
                    self.lock().requests.fail(id, error);
                    break;
                }
            }
            let mut state = self.lock();
            let now = self.shared.now();
            if let Err(error) = state.send_op(now, rank, &repr, &packed, Some(id)) {
                state.requests.fail(id, error);
                break;
            }
        }
        handle.wait()
    }

    /// Strided get: `count` elements of `elem_size` bytes read at the target
    /// every `src_stride` bytes from `offset` land in `out` every `dst_stride` bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn get_strided(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        out: &mut [u8],
        elem_size: usize,
        count: usize,
        src_stride: usize,
        dst_stride: usize,
    ) -> Result<()> {
        check_local_strided(out.len(), elem_size, count, dst_stride)?;
        let per_msg = (self.chunk_bytes() / elem_size.max(1)).max(1);
        let mut first = 0;
        while first < count || (count == 0 && first == 0) {
            let n = (count - first).min(per_msg);
            let local_start = first * dst_stride;
            let local_end = if n == 0 { local_start } else { local_start + (n - 1) * dst_stride + elem_size };
            let landing =
                Landing::Strided { out: &mut out[local_start..local_end], elem_size, count: n, stride: dst_stride };
            let handle =
                self.start(rank, 1, landing, Output::Data(Vec::with_capacity(n * elem_size)), |state, id| {
                    let repr = OpRepr::GetStridedRequest(op::GetStridedRequest {
                        req: id.0,
                        key: key.0,
                        offset: offset + (first * src_stride) as u64,
                        elem_size: elem_size as u32,
                        count: n as u32,
                        stride: src_stride as u64,
                    });
                    let now = self.shared.now();
                    state.send_op(now, rank, &repr, &[], None)
                })?;
            handle.wait()?;
            first += n.max(1);
        }
        Ok(())
    }

    /// Vectored put: each `(offset, data)` segment lands at its own offset of
    /// region `key` at `rank`, as one operation (T3E-style gather list).
    pub fn put_iov(&self, rank: u32, key: RegionKey, segments: &[(u64, &[u8])]) -> Result<()> {
        let chunk = self.chunk_bytes();
        // Group segments into messages of bounded size and count; a segment
        // larger than a chunk becomes a plain chunked put of its own.
        let mut handles = Vec::new();
        let mut group: Vec<(u64, u32)> = Vec::new();
        let mut body: Vec<u8> = Vec::new();
        for &(offset, data) in segments {
            if data.len() > chunk {
                handles.push(self.put_nb(rank, key, offset, data)?);
                continue;
            }
            if body.len() + data.len() > chunk || group.len() == op::IOV_MAX {
                handles.push(self.issue_iov_group(rank, key, &group, &body)?);
                group.clear();
                body.clear();
            }
            group.push((offset, data.len() as u32));
            body.extend_from_slice(data);
        }
        if !group.is_empty() {
            handles.push(self.issue_iov_group(rank, key, &group, &body)?);
        }
        crate::handle::wait_all(handles)
    }

    fn issue_iov_group(&self, rank: u32, key: RegionKey, group: &[(u64, u32)], body: &[u8]) -> Result<Handle<'_>> {
        self.start(rank, 1, Landing::Nothing, Output::None, |state, id| {
            let repr = OpRepr::PutIov(op::PutIov {
                req: id.0,
                key: key.0,
                segments: op::IovSegments::from_pairs(group),
                body: &[],
            });
            let now = self.shared.now();
            state.send_op(now, rank, &repr, body, Some(id))
        })
    }

    /// Masked put (PPRAM-Link writesw): writes only the 4-byte words of the
    /// 64- or 256-byte `block` whose bit is set in `word_mask`.
    pub fn put_masked(&self, rank: u32, key: RegionKey, offset: u64, block: &[u8], word_mask: u64) -> Result<()> {
        let size = match block.len() {
            64 => op::MaskedBlock::B64,
            256 => op::MaskedBlock::B256,
            _ => return Err(Error::InvalidArgument("masked block must be 64 or 256 bytes")),
        };
        if block.len() == 64 && word_mask >> 16 != 0 {
            return Err(Error::InvalidArgument("a 64-byte block has 16 words: mask bits above 15 set"));
        }
        self.start(rank, 1, Landing::Nothing, Output::None, |state, id| {
            let repr = OpRepr::PutMasked(op::PutMasked {
                req: id.0,
                key: key.0,
                offset,
                block: size,
                mask: word_mask,
                body: &[],
            });
            let now = self.shared.now();
            state.send_op(now, rank, &repr, block, Some(id))
        })?
        .wait()
    }

    /// Puts `data` through address register `register` of `rank`: it lands
    /// wherever that rank pointed the register (Cenju-4).
    pub fn put_to_register(&self, rank: u32, register: u16, data: &[u8]) -> Result<()> {
        if data.len() > self.chunk_bytes() {
            return Err(Error::InvalidArgument("register puts are limited to one chunk (MW_CHUNK)"));
        }
        self.start(rank, 1, Landing::Nothing, Output::None, |state, id| {
            let repr = OpRepr::RegisterPut(op::RegisterPut { req: id.0, register, body: &[] });
            let now = self.shared.now();
            state.send_op(now, rank, &repr, data, Some(id))
        })?
        .wait()
    }
}

/// Bound of `State::verified_put_ends` (forgotten all at once when full:
/// the next multi-message put into each region probes again).
const MAX_VERIFIED_PUT_ENDS: usize = 4096;

impl State {
    /// Requests the get chunks the windows of their peers have room for
    /// (crate::get_window), and feeds the puts waiting with them while the
    /// send queue has room (crate::put_feed). Returns whether any went out.
    pub(crate) fn pump_gets(&mut self, now: mw_proto::time::Instant) -> bool {
        self.with_transmit_held(now, |state| state.request_get_chunks(now))
    }

    fn request_get_chunks(&mut self, now: mw_proto::time::Instant) -> bool {
        let mut worked = false;
        let copy_ahead = self.config.copy_ahead_bytes;
        loop {
            let proto = &self.proto;
            let Some((peer, next)) = self.gets.next(|peer| State::feed_has_room(proto, copy_ahead, peer)) else {
                break;
            };
            let chunk = match next {
                Next::Chunk(chunk) => chunk,
                Next::Op(held) => {
                    worked = true;
                    self.submit_held(now, peer, held);
                    continue;
                }
                Next::Put(feed) => {
                    worked = true;
                    if let Some(rest) = self.feed_put(now, peer, feed) {
                        self.gets.resume_put(peer, rest);
                    }
                    continue;
                }
            };
            if !self.requests.is_wanted(chunk.req) {
                // Failed already, or its handle was dropped: ask for nothing
                // more; a dropped one completes now so its slot is freed.
                self.gets.unask(peer);
                if let Some(c) = self.requests.fail(chunk.req, Error::InvalidArgument("get handle dropped")) {
                    self.completions.push(c);
                }
                continue;
            }
            let repr = OpRepr::GetRequest(op::GetRequest {
                req: chunk.req.0,
                key: chunk.key,
                offset: chunk.offset,
                len: chunk.len,
            });
            worked = true;
            if let Err(error) = self.send_op(now, peer, &repr, &[], None) {
                self.gets.unask(peer);
                if let Some(c) = self.requests.fail(chunk.req, error) {
                    self.completions.push(c);
                }
            }
        }
        worked
    }

    /// Sends an operation that waited behind get chunks toward `peer`.
    fn submit_held(&mut self, now: mw_proto::time::Instant, peer: u32, held: HeldOp) {
        match self.proto.submit(now, peer, &[&held.msg]) {
            Ok(id) => {
                if let Some(waiter) = held.waiter {
                    self.ack_waiters[peer as usize].push_back((id.0, waiter));
                }
            }
            Err(error) => {
                let error = crate::endpoint::submit_error(error, peer, self.size);
                if let Some(c) = held.waiter.and_then(|waiter| self.requests.fail(waiter, error)) {
                    self.completions.push(c);
                }
            }
        }
    }
}

/// How an operation's messages enter the send queue toward a UDP peer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Feed {
    /// A blocking call: a little ahead of the window (`Config::copy_ahead_bytes`),
    /// waiting for room between batches, so the copied bytes are still in the
    /// cache when the kernel copies them again.
    JustAhead,
    /// A nonblocking call: the whole operation at once, waiting only while
    /// earlier operations fill `Config::max_queued_bytes` (the memory bound).
    Whole,
}

/// Too many bytes queued toward `rank` to issue more now (a dead peer never
/// drains its queue, so it never blocks: its operations fail instead).
fn queue_full(state: &State, rank: u32, feed: Feed) -> bool {
    let mut limit = state.config.max_queued_bytes;
    if feed == Feed::JustAhead && rank != state.rank && !state.is_shm_peer(rank) {
        // Over UDP, copy only a little ahead of the window (Config::copy_ahead_bytes).
        limit = limit.min(state.config.copy_ahead_bytes);
    }
    state.queued_bytes(rank) >= limit && !state.dead[rank as usize]
}

fn handle_id(handle: &Handle<'_>) -> RequestId {
    handle.id()
}

fn check_local_strided(buf_len: usize, elem_size: usize, count: usize, stride: usize) -> Result<()> {
    if count == 0 {
        return Ok(());
    }
    if stride < elem_size {
        return Err(Error::InvalidArgument("local stride smaller than the element"));
    }
    let extent = stride
        .checked_mul(count - 1)
        .and_then(|v| v.checked_add(elem_size))
        .ok_or(Error::InvalidArgument("strided extent overflows"))?;
    if extent > buf_len {
        return Err(Error::InvalidArgument("local buffer too small for the strided layout"));
    }
    Ok(())
}
