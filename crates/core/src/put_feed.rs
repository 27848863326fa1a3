//! Puts toward UDP peers fed into the send queue as the window nears them.
//!
//! Owns: a put's description while its bytes wait in the caller's buffer
//! ([`PutFeed`], queued in its peer's line of `crate::get_window`, in issue
//! order with gets and held operations), and the copying of its next
//! datagrams into the protocol's send queue while that queue holds less
//! than `Config::copy_ahead_bytes` toward the peer ([`State::feed_put`]).
//! Copying just ahead of the window keeps the bytes in the cache until the
//! kernel copies them again; copying a whole large put at once leaves them
//! cold by the time they leave.
//!
//! The invariant everything here rests on: a feed reads the caller's
//! buffer only while the handle of its request is alive, or, for an
//! implicit put (no handle), until the caller's next flush or quiet, which
//! waits for every feed to finish. A handle dropped
//! before completion copies the part not fed yet ([`State::keep_put_feed`]:
//! the put still completes, unobserved, as any dropped operation does); a
//! wait that ends in failure or timeout removes the feed
//! ([`State::forget_put_feed`]); and a lent feed whose request is no
//! longer wanted is dropped before it is read.
//!
//! Must not: wait, or hold a source beyond the handle (or the quiet) that
//! bounds its loan.
#![allow(unsafe_code)]

use mw_wire::op::{self, OpRepr, SignalOp};

use crate::endpoint::{Endpoint, State};
use crate::handle::Handle;
use crate::region::RegionKey;
use crate::request::RequestId;
use crate::rma::Signal;
use crate::Result;

/// The bytes of a fed put: lent by the caller and read as they are fed, or,
/// once the caller's handle let go of an unfinished put, a copy of the
/// part not fed yet.
#[derive(PartialEq, Eq)]
pub(crate) enum FeedSource {
    /// Valid while the handle lives or, `until_quiet`, until the caller's
    /// next flush or quiet returns (an implicit put has no handle).
    Lent { ptr: *const u8, len: usize, until_quiet: bool },
    /// Bytes `from..` of the put (`len` in all).
    Kept { from: usize, rest: Vec<u8>, len: usize },
}

// SAFETY: a lent source is only read (never written) through its pointer,
// under the endpoint lock; the bytes belong to the caller, whose contract
// (see `FeedSource::lend`) keeps them valid and unmodified while any
// thread may read them.
unsafe impl Send for FeedSource {}

impl FeedSource {
    /// Lends `data` to a feed.
    ///
    /// # Safety
    /// `data` must stay valid and unmodified until the handle of the put it
    /// is lent to is waited on or dropped (never leaked with `mem::forget`):
    /// those paths copy or remove the feed (see the module doc).
    pub(crate) unsafe fn lend(data: &[u8]) -> FeedSource {
        FeedSource::Lent { ptr: data.as_ptr(), len: data.len(), until_quiet: false }
    }

    /// Lends `data` to the feed of an implicit put.
    ///
    /// # Safety
    /// `data` must stay valid and unmodified until a `flush` toward the
    /// put's target or a `quiet` issued after the put has returned: those
    /// wait until every byte is fed.
    pub(crate) unsafe fn lend_until_quiet(data: &[u8]) -> FeedSource {
        FeedSource::Lent { ptr: data.as_ptr(), len: data.len(), until_quiet: true }
    }

    /// A source that lives forever (tests of the queues that hold feeds).
    #[cfg(test)]
    pub(crate) fn from_static(data: &'static [u8]) -> FeedSource {
        FeedSource::Lent { ptr: data.as_ptr(), len: data.len(), until_quiet: false }
    }

    /// Bytes of the whole put.
    pub(crate) fn len(&self) -> usize {
        match self {
            FeedSource::Lent { len, .. } | FeedSource::Kept { len, .. } => *len,
        }
    }

    fn is_lent(&self) -> bool {
        matches!(self, FeedSource::Lent { .. })
    }

    /// Lent for as long as a handle holds the put (not until a quiet).
    fn is_lent_to_handle(&self) -> bool {
        matches!(self, FeedSource::Lent { until_quiet: false, .. })
    }

    fn bytes(&self, start: usize, end: usize) -> &[u8] {
        assert!(start <= end && end <= self.len(), "feed range out of its source");
        match self {
            // SAFETY: `lend`'s contract keeps `ptr..ptr+len` valid and
            // unmodified while the feed holds it (its handle is alive), and
            // the range is inside it (checked above).
            FeedSource::Lent { ptr, .. } => unsafe { std::slice::from_raw_parts(ptr.add(start), end - start) },
            FeedSource::Kept { from, rest, .. } => &rest[start - from..end - from],
        }
    }

    /// Copies what is not fed yet (bytes `fed..`) out of the caller's
    /// buffer, which is then no longer read.
    fn keep_rest(&mut self, fed: usize) {
        if self.is_lent() {
            let len = self.len();
            let rest = self.bytes(fed.min(len), len).to_vec();
            *self = FeedSource::Kept { from: fed.min(len), rest, len };
        }
    }
}

impl std::fmt::Debug for FeedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedSource").field("len", &self.len()).field("lent", &self.is_lent()).finish()
    }
}

/// The signal a put_signal's last datagram carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FeedSignal {
    pub key: u64,
    pub offset: u64,
    pub op: SignalOp,
    pub value: u64,
}

/// A put of several messages whose bytes are still (partly) in the
/// caller's buffer (a put of one message is queued at once).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct PutFeed {
    pub req: RequestId,
    pub key: u64,
    /// Target offset of the source's first byte.
    pub offset: u64,
    pub source: FeedSource,
    /// Data bytes per message (one datagram each).
    pub chunk: usize,
    /// Source bytes already fed.
    pub fed: usize,
    /// Carried by the last message, if this is a put_signal.
    pub signal: Option<FeedSignal>,
}

impl PutFeed {
    fn done(&self) -> bool {
        self.fed >= self.source.len()
    }
}

impl State {
    /// Whether the send queue toward `peer` has room for a feed's next
    /// message (it holds less than `Config::copy_ahead_bytes` not yet sent).
    pub(crate) fn feed_has_room(proto: &mw_proto::Endpoint, copy_ahead: usize, peer: u32) -> bool {
        proto.queued_bytes(peer) < copy_ahead
    }

    /// Copies `feed`'s next messages into the send queue toward `peer`
    /// while it has room. Returns the feed if some of it is left; `None`
    /// when it is all queued, or was dropped (its request no longer wanted,
    /// or the protocol refused a message: the request then holds the error).
    pub(crate) fn feed_put(&mut self, now: mw_proto::time::Instant, peer: u32, mut feed: PutFeed) -> Option<PutFeed> {
        // A failed put feeds no more. A lent source is read only while its
        // handle holds the request (a handle letting go first keeps the rest).
        let failed = self.requests.is_done(feed.req) != Some(false);
        if failed || (feed.source.is_lent_to_handle() && !self.requests.is_wanted(feed.req)) {
            return None;
        }
        let len = feed.source.len();
        let copy_ahead = self.config.copy_ahead_bytes;
        while !feed.done() && State::feed_has_room(&self.proto, copy_ahead, peer) {
            let start = feed.fed;
            let end = len.min(start + feed.chunk.max(1));
            let at = feed.offset + start as u64;
            let repr = match feed.signal {
                Some(s) if end == len => OpRepr::PutSignal(op::PutSignal {
                    req: feed.req.0,
                    key: feed.key,
                    offset: at,
                    signal_key: s.key,
                    signal_offset: s.offset,
                    signal_op: s.op,
                    signal_value: s.value,
                    body: &[],
                }),
                _ if end - start <= op::INLINE_MAX => {
                    OpRepr::PutInline(op::PutInline { req: feed.req.0, key: feed.key, offset: at, body: &[] })
                }
                _ => OpRepr::Put(op::Put { req: feed.req.0, key: feed.key, offset: at, body: &[] }),
            };
            let hlen = repr.emit_header(&mut self.hdr_buf);
            let body = feed.source.bytes(start, end);
            // Into the protocol directly: this feed is first in its peer's
            // line, so nothing issued before it is still waiting.
            match self.proto.submit(now, peer, &[&self.hdr_buf[..hlen], body]) {
                Ok(id) => self.ack_waiters[peer as usize].push_back((id.0, feed.req)),
                Err(error) => {
                    let error = crate::endpoint::submit_error(error, peer, self.size);
                    if let Some(c) = self.requests.fail(feed.req, error) {
                        self.completions.push(c);
                    }
                    return None;
                }
            }
            feed.fed = end;
        }
        (!feed.done()).then_some(feed)
    }

    /// The handle of request `id` lets go of an unfinished put (dropped
    /// before completion): what is not fed yet is copied out of the
    /// caller's buffer, and the put goes on unobserved.
    pub(crate) fn keep_put_feed(&mut self, id: RequestId) {
        if let Some(feed) = self.gets.put_mut(id) {
            let fed = feed.fed;
            feed.source.keep_rest(fed);
        }
    }

    /// Removes the feed of request `id`, if one is still waiting: its
    /// handle saw it fail or time out, and its source may go.
    pub(crate) fn forget_put_feed(&mut self, id: RequestId) {
        self.gets.remove_put(id);
    }
}

impl Endpoint {
    /// [`put_nb`](Self::put_nb) that reads the bytes from `data` as they
    /// leave rather than copying the whole put into the send queue at once:
    /// toward a peer on another host, a put of several datagrams is copied
    /// into the queue a little ahead of the protocol's window, so the bytes
    /// are still in the cache when the kernel takes them. Returns as
    /// `put_nb` does, without waiting for the window.
    ///
    /// # Safety
    /// `data` must stay valid and unmodified until the handle is waited on,
    /// found complete by [`Handle::test`] and dropped, or dropped; the
    /// handle must not be leaked (`mem::forget`), since the library reads
    /// `data` until one of those.
    pub unsafe fn put_nb_lent<'a>(
        &'a self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        data: &'a [u8],
    ) -> Result<Handle<'a>> {
        // SAFETY: forwarded to our caller.
        let source = unsafe { FeedSource::lend(data) };
        self.put_fed(rank, key, offset, data, Some(source))
    }

    /// [`put_signal_nb`](Self::put_signal_nb) reading `data` as it leaves,
    /// like [`put_nb_lent`](Self::put_nb_lent).
    ///
    /// # Safety
    /// As for [`put_nb_lent`](Self::put_nb_lent).
    pub unsafe fn put_signal_nb_lent<'a>(
        &'a self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        data: &'a [u8],
        signal: Signal,
    ) -> Result<Handle<'a>> {
        // SAFETY: forwarded to our caller.
        let source = unsafe { FeedSource::lend(data) };
        self.put_signal_fed(rank, key, offset, data, signal, Some(source))
    }

    /// Implicit nonblocking put (OpenSHMEM's `put_nbi`): no handle; the put
    /// is complete once a later [`flush`](Self::flush) toward `rank` or
    /// [`quiet`](Self::quiet) returns, and if it fails there, that call
    /// reports the error. Toward a same-host peer it is usually done when
    /// this returns; toward a peer on another host its bytes are read from
    /// `data` as they leave, as for [`put_nb_lent`](Self::put_nb_lent).
    /// An error found at issue (bad rank, unknown key, out of bounds) is
    /// returned here.
    ///
    /// # Safety
    /// `data` must stay valid and unmodified until a `flush(rank)` or
    /// `quiet()` called after this returns has returned.
    pub unsafe fn put_nbi_lent(&self, rank: u32, key: RegionKey, offset: u64, data: &[u8]) -> Result<()> {
        // SAFETY: forwarded to our caller.
        let source = unsafe { FeedSource::lend_until_quiet(data) };
        self.put_fed(rank, key, offset, data, Some(source))?.release_implicit()
    }

    /// Implicit nonblocking put_signal (OpenSHMEM's `put_signal_nbi`), as
    /// [`put_nbi_lent`](Self::put_nbi_lent).
    ///
    /// # Safety
    /// As for [`put_nbi_lent`](Self::put_nbi_lent).
    pub unsafe fn put_signal_nbi_lent(
        &self,
        rank: u32,
        key: RegionKey,
        offset: u64,
        data: &[u8],
        signal: Signal,
    ) -> Result<()> {
        // SAFETY: forwarded to our caller.
        let source = unsafe { FeedSource::lend_until_quiet(data) };
        self.put_signal_fed(rank, key, offset, data, signal, Some(source))?.release_implicit()
    }

    /// Put, waiting until the data is in the target's memory. Over UDP it
    /// copies only a little ahead of what the window lets out
    /// (`MW_COPY_AHEAD`), so the bytes are still cached when they leave.
    pub fn put(&self, rank: u32, key: RegionKey, offset: u64, data: &[u8]) -> Result<()> {
        // SAFETY: the handle is waited on right here, or dropped if the
        // wait unwinds; `data` is borrowed for the whole call.
        unsafe { self.put_nb_lent(rank, key, offset, data) }?.wait()
    }

    /// put_signal, waiting for completion at the target (fed as
    /// [`put`](Self::put) is).
    pub fn put_signal(&self, rank: u32, key: RegionKey, offset: u64, data: &[u8], signal: Signal) -> Result<()> {
        // SAFETY: as in `put`.
        unsafe { self.put_signal_nb_lent(rank, key, offset, data, signal) }?.wait()
    }
}
