//! Nonblocking operation handles.
//!
//! Owns: the link between a user's call and its request slot, and where the
//! fetched data lands. A handle borrows its local buffers (source for puts,
//! destination for gets) until it is waited on or dropped, so the compiler
//! rejects reusing them early. Fetched data is staged in the request and
//! copied into the destination only while the handle (and so the borrow) is
//! alive: a handle that is leaked with `mem::forget` can never make the
//! library write into memory the user has since freed. While a handle is
//! being waited on (`wait`, `wait_all`), which it cannot be leaked during,
//! a large get's data lands in the destination directly instead
//! ([`Requests::pin`](crate::request::Requests::pin)), saving that copy.
//!
//! Must not: issue operations (`rma` does) or let a handle outlive the endpoint
//! or the buffers it borrows; dropping an unfinished handle releases its slot,
//! and the operation still completes unobserved.

use std::marker::PhantomData;

use crate::deadline::Bound;
use crate::endpoint::Endpoint;
use crate::request::{Output, RequestId};
use crate::{Error, Result};

/// Where a completed request's data goes.
#[derive(Debug)]
pub(crate) enum Landing<'a> {
    /// Nothing comes back (puts, non-fetching atomics).
    Nothing,
    /// Contiguous bytes (get).
    Bytes(&'a mut [u8]),
    /// Packed elements scattered at a local stride (get_strided).
    Strided { out: &'a mut [u8], elem_size: usize, count: usize, stride: usize },
}

/// A nonblocking operation in flight. Test it, wait on it, or drop it (the
/// operation still completes; its result is discarded).
///
/// An operation the target refuses, for whatever reason (unknown key, out of
/// bounds, missing right, misaligned, a message it cannot parse), fails its
/// handle with that error: nothing completes as a success without having
/// happened at the target.
#[must_use = "an operation handle does nothing unless tested or waited on"]
#[derive(Debug)]
pub struct Handle<'a> {
    ep: &'a Endpoint,
    id: RequestId,
    landing: Landing<'a>,
    finished: bool,
    /// Completed when issued (direct shared-memory access): no request slot.
    ready: Option<Result<Output>>,
    /// The landing buffer is lent to the request (see [`Handle::pin`]).
    pinned: bool,
    /// How long [`wait`](Self::wait) waits: the operation timeout, except
    /// for a send, whose completion is paced by the receiver's application.
    bound: Bound,
    /// A put fed from the caller's buffer (crate::put_feed): its feed is
    /// removed before this handle ends.
    lent: bool,
    _source: PhantomData<&'a [u8]>,
}

impl<'a> Handle<'a> {
    pub(crate) fn new(ep: &'a Endpoint, id: RequestId, landing: Landing<'a>) -> Handle<'a> {
        Handle {
            ep,
            id,
            landing,
            finished: false,
            ready: None,
            pinned: false,
            bound: Bound::Op,
            lent: false,
            _source: PhantomData,
        }
    }

    /// A handle whose wait is not bounded by the operation timeout: a send
    /// completes when the receiving application takes the message.
    pub(crate) fn unbounded(mut self) -> Handle<'a> {
        self.bound = Bound::Unbounded;
        self
    }

    /// A handle for an operation that completed as it was issued.
    pub(crate) fn ready(ep: &'a Endpoint, result: Result<Output>) -> Handle<'a> {
        Handle {
            ep,
            id: RequestId(0),
            landing: Landing::Nothing,
            finished: false,
            ready: Some(result),
            pinned: false,
            bound: Bound::Op,
            lent: false,
            _source: PhantomData,
        }
    }

    /// Lets the operation complete unobserved, its failure kept for the
    /// next `flush`/`quiet` to report (an implicit operation); an
    /// operation already failed at issue reports it here.
    pub(crate) fn release_implicit(mut self) -> Result<()> {
        self.finished = true;
        if let Some(result) = self.ready.take() {
            return result.map(drop);
        }
        self.ep.lock().requests.release_implicit(self.id);
        Ok(())
    }

    /// Marks the handle of a put fed from the caller's buffer.
    pub(crate) fn set_lent(&mut self) {
        self.lent = true;
    }

    pub(crate) fn id(&self) -> RequestId {
        self.id
    }

    /// Increments the u64 at `offset` of local `region` when this operation
    /// completes (Cenju-4's notification address; MBCF's completion flag).
    pub fn notify(&self, region: &crate::Region<'_>, offset: u64) -> Result<()> {
        region.load_u64(offset)?;
        let mut state = self.ep.lock();
        match state.requests.is_done(self.id) {
            Some(false) => state.requests.set_notify(self.id, (region.key(), offset)),
            _ => {
                drop(state);
                region.store_u64(offset, region.load_u64(offset)?.wrapping_add(1))?;
            }
        }
        Ok(())
    }

    /// Makes progress once and reports whether the operation is complete.
    pub fn test(&mut self) -> bool {
        if self.ready.is_some() {
            return true;
        }
        self.ep.progress();
        self.ep.lock().requests.is_done(self.id).unwrap_or(true)
    }

    /// Whether the operation is complete, without making progress: with the
    /// progress thread on (`MW_PROGRESS=thread`), a nonblocking operation
    /// completes while the application computes without calling memwire.
    pub fn is_complete(&self) -> bool {
        self.ready.is_some() || self.ep.lock_without_progress().requests.is_done(self.id).unwrap_or(true)
    }

    /// Waits for completion and returns its result. A put, get or atomic
    /// whose completion does not come within `Config::op_timeout` fails
    /// with [`Error::Timeout`] (its outcome at the target is then unknown,
    /// as with `PeerUnreachable`, and a get's buffer may hold part of the
    /// data); a send's handle waits for the receiver without that bound.
    pub fn wait(mut self) -> Result<()> {
        let bound = self.bound;
        self.finish(bound).map(|_| ())
    }

    /// [`wait`](Self::wait), giving up with [`Error::Timeout`] after
    /// `timeout` instead of the operation timeout (for a send's handle
    /// too). Either way the handle is consumed: the operation is abandoned
    /// and a late completion is discarded.
    pub fn wait_timeout(mut self, timeout: std::time::Duration) -> Result<()> {
        self.finish(Bound::After(timeout)).map(|_| ())
    }

    /// Waits for completion and returns the fetched word (atomics, `get_value`).
    pub fn wait_value(mut self) -> Result<u64> {
        let bound = self.bound;
        fetched_value(self.finish(bound)?)
    }

    /// [`wait_value`](Self::wait_value) with [`wait_timeout`](Self::wait_timeout)'s deadline.
    pub fn wait_value_timeout(mut self, timeout: std::time::Duration) -> Result<u64> {
        fetched_value(self.finish(Bound::After(timeout))?)
    }

    /// Lends a large get's destination to its request so the rest of the
    /// data lands there directly. Only called by `finish` and `wait_all`,
    /// which own the handle until the request is taken, or drop it (and so
    /// release the request) when unwinding: the buffer's borrow outlives the
    /// loan either way.
    fn pin(&mut self) {
        if self.pinned || self.ready.is_some() {
            return;
        }
        if let Landing::Bytes(out) = &mut self.landing {
            if out.len() >= PIN_MIN {
                let mem = crate::memory::scoped_mem(out);
                self.ep.lock().requests.pin(self.id, mem);
                self.pinned = true;
            }
        }
    }

    fn finish(&mut self, bound: Bound) -> Result<Output> {
        if let Some(result) = self.ready.take() {
            self.finished = true;
            return result;
        }
        let id = self.id;
        self.pin();
        let unpin = Unpin { ep: self.ep, id, armed: self.pinned };
        let taken = self.ep.wait_and_take(id, bound);
        self.finished = true;
        if self.lent && !matches!(taken, Some((Ok(()), _))) {
            // A failed or abandoned put may leave part of its feed waiting:
            // it must not read the caller's buffer once we return.
            self.ep.lock().forget_put_feed(id);
        }
        if let Some((Err(Error::Timeout), _)) = &taken {
            // Abandoned: the slot is freed now (a late reply finds a stale
            // id and is dropped) and nothing lands in the buffer after we
            // return, pinned or not.
            self.ep.lock().requests.retire(id);
            unpin.disarm();
            return Err(Error::Timeout);
        }
        unpin.disarm();
        let (result, output) = taken.ok_or(Error::InvalidArgument("operation already collected"))?;
        result?;
        let landing_empty = self.landing_is_empty();
        match (&mut self.landing, output) {
            (Landing::Nothing, output) => Ok(output),
            (Landing::Bytes(out), Output::Pinned { filled, .. }) => {
                if filled != out.len() {
                    return Err(Error::Truncated);
                }
                Ok(Output::None)
            }
            (Landing::Bytes(out), Output::Data(data)) => {
                if data.len() != out.len() {
                    return Err(Error::Truncated);
                }
                out.copy_from_slice(&data);
                Ok(Output::None)
            }
            (Landing::Strided { out, elem_size, count, stride }, Output::Data(data)) => {
                if data.len() != *elem_size * *count {
                    return Err(Error::Truncated);
                }
                for (i, elem) in data.chunks_exact((*elem_size).max(1)).enumerate().take(*count) {
                    out[i * *stride..i * *stride + *elem_size].copy_from_slice(elem);
                }
                Ok(Output::None)
            }
            (_, _) if landing_empty => Ok(Output::None),
            _ => Err(Error::Truncated),
        }
    }

    fn landing_is_empty(&self) -> bool {
        match &self.landing {
            Landing::Bytes(out) => out.is_empty(),
            Landing::Strided { count, elem_size, .. } => *count == 0 || *elem_size == 0,
            Landing::Nothing => true,
        }
    }
}

impl Drop for Handle<'_> {
    fn drop(&mut self) {
        if !self.finished && self.ready.is_none() {
            let mut state = self.ep.lock();
            if self.lent {
                state.keep_put_feed(self.id);
            }
            state.requests.release(self.id);
        }
    }
}

/// The word an atomic or `get_value` fetched.
fn fetched_value(output: Output) -> Result<u64> {
    match output {
        Output::Value(v) => Ok(v),
        _ => Err(Error::InvalidArgument("this operation fetches no value")),
    }
}

/// Gets at least this long land directly in the destination while waited
/// on; shorter ones keep the staging copy, which costs less than the extra
/// lock round of lending the buffer (and keeps the small-get latency path
/// as it was).
const PIN_MIN: usize = 4096;

/// Takes back a pinned landing if a wait unwinds before the request is taken.
struct Unpin<'a> {
    ep: &'a Endpoint,
    id: RequestId,
    armed: bool,
}

impl Unpin<'_> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Unpin<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.ep.lock().requests.unpin(self.id);
        }
    }
}

/// Waits for every handle; returns the first error after all have completed.
/// The handles' large get destinations are all lent out first, so data that
/// arrives for one handle while another is waited on lands in place too.
pub fn wait_all<'a>(handles: impl IntoIterator<Item = Handle<'a>>) -> Result<()> {
    let mut handles: Vec<Handle<'a>> = handles.into_iter().collect();
    // On unwind, the handles not yet waited on are dropped, which releases
    // their requests and with them the loans.
    for handle in &mut handles {
        handle.pin();
    }
    let mut first = Ok(());
    for handle in handles {
        let result = handle.wait();
        if first.is_ok() {
            first = result;
        }
    }
    first
}
