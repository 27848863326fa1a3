//! Nonblocking tagged sends and receives on buffers the caller hands over
//! (`isend_owned`, `irecv_owned`): the zero-copy forms of `isend`/`irecv`.
//!
//! Owns: the handles that give the buffer back on completion. Why they
//! exist: `isend`/`irecv` borrow the caller's buffer, and since Rust lets a
//! handle be leaked (`mem::forget`) while its borrow ends, the library must
//! never touch a borrowed buffer after the call returns, so those forms copy
//! (into an exposure, out of a staging area). A buffer the library *owns*
//! until the handle is collected can be exposed to a rendezvous pull in
//! place and received into in place; a leaked handle then leaks the buffer,
//! never memory safety. Must not: duplicate matching or the rendezvous
//! (tagged.rs and rndv.rs do them).

use super::rndv::Keep;
use super::tagged::FromRing;
use super::{MsgOutput, Sink};
use crate::deadline::Bound;
use crate::endpoint::Endpoint;
use crate::request::{Output, RequestId};
use crate::{Error, RecvStatus, Result, ANY_SOURCE};

/// A nonblocking receive into a handed-over buffer ([`Endpoint::irecv_owned`]).
/// Dropping it before the message matched cancels the receive.
#[derive(Debug)]
pub struct OwnedRecv<'ep> {
    ep: &'ep Endpoint,
    id: RequestId,
    /// The rank named in the receive (or `ANY_SOURCE`): with a same-host
    /// one, the wait takes the message straight from its ring.
    source: u32,
    finished: bool,
}

impl OwnedRecv<'_> {
    /// Makes progress once and reports whether the receive is complete.
    pub fn test(&mut self) -> bool {
        self.ep.progress();
        self.is_complete()
    }

    /// Whether the receive is complete, without making progress.
    pub fn is_complete(&self) -> bool {
        self.ep.lock_without_progress().requests.is_done(self.id).unwrap_or(true)
    }

    /// Waits for the message. Gives the buffer back with the envelope (the
    /// message is in its first `status.len` bytes), or with the error (a
    /// too-short buffer is [`Error::Truncated`] and left untouched). Waits
    /// at most `Config::wait_timeout` (none by default); see
    /// [`wait_timeout`](Self::wait_timeout).
    pub fn wait(self) -> (Vec<u8>, Result<RecvStatus>) {
        self.finish(Bound::Paced)
    }

    /// [`wait`](Self::wait), giving up after `timeout`: the receive is then
    /// cancelled as [`RecvHandle::wait_timeout`](crate::RecvHandle::wait_timeout)
    /// cancels one, and the buffer comes back with [`Error::Timeout`].
    pub fn wait_timeout(self, timeout: std::time::Duration) -> (Vec<u8>, Result<RecvStatus>) {
        self.finish(Bound::After(timeout))
    }

    fn finish(mut self, bound: Bound) -> (Vec<u8>, Result<RecvStatus>) {
        let (id, source) = (self.id, self.source);
        let from_ring = source != ANY_SOURCE && self.ep.shares_memory_with(source);
        // The oldest posted receive takes its message from the ring itself,
        // without the generic dispatch (`recv_from_ring`).
        let mut taken = self.ep.wait_and_take_with(id, false, bound, |state| {
            from_ring && state.recv_from_ring(id, source, None) != FromRing::Nothing
        });
        self.finished = true;
        let timed_out = matches!(taken, Some((Err(Error::Timeout), Output::None)));
        if timed_out {
            // Still pending: cancelled, and its buffer taken back.
            taken = self.ep.cancel_recv(id, Error::Timeout);
        }
        super::cancel::owned_outcome(taken, timed_out)
    }
}

impl Drop for OwnedRecv<'_> {
    fn drop(&mut self) {
        if !self.finished {
            super::tagged::abandon_recv(self.ep, self.id);
        }
    }
}

/// A nonblocking send of a handed-over buffer ([`Endpoint::isend_owned`]).
#[derive(Debug)]
pub struct OwnedSend<'ep> {
    ep: &'ep Endpoint,
    id: RequestId,
    /// The buffer while the library does not need it (eager sends).
    buf: Option<Vec<u8>>,
    finished: bool,
}

impl OwnedSend<'_> {
    /// Whether the send is complete, without making progress.
    pub fn is_complete(&self) -> bool {
        self.ep.lock_without_progress().requests.is_done(self.id).unwrap_or(true)
    }

    /// Waits until the buffer may be reused and gives it back with the
    /// outcome. After a failure (the receiver died) the buffer of a large
    /// message may not come back: an empty `Vec` is returned then.
    pub fn wait(mut self) -> (Vec<u8>, Result<()>) {
        let taken = self.ep.wait_and_take(self.id, Bound::Unbounded);
        self.finished = true;
        let (result, output) =
            taken.unwrap_or((Err(Error::InvalidArgument("operation already collected")), Output::None));
        let buf = match (self.buf.take(), output) {
            (Some(buf), _) => buf,
            (None, Output::Msg(MsgOutput::Sent { buf })) => buf,
            (None, _) => Vec::new(),
        };
        (buf, result)
    }
}

impl Drop for OwnedSend<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.ep.lock().requests.release(self.id);
        }
    }
}

impl Endpoint {
    /// Nonblocking receive into `buf`, which the library owns until the
    /// handle is collected: the message lands in it directly (a large one is
    /// pulled straight into it), with no staging copy, and
    /// [`OwnedRecv::wait`] gives it back. Up to `buf.len()` bytes are
    /// received. Use this rather than [`irecv`](Self::irecv) for large
    /// messages; see the module docs of `memwire` on why `irecv` copies.
    pub fn irecv_owned(&self, source: u32, tag: u64, buf: Vec<u8>) -> Result<OwnedRecv<'_>> {
        self.irecv_owned_in(0, source, tag, buf)
    }

    /// [`irecv_owned`](Self::irecv_owned) in matching context `context`.
    pub fn irecv_owned_in(&self, context: u32, source: u32, tag: u64, buf: Vec<u8>) -> Result<OwnedRecv<'_>> {
        self.check_source(source)?;
        let capacity = buf.len();
        let id = self.lock().post_recv(context, source, tag, capacity, Sink::Owned { data: buf, filled: 0 })?;
        Ok(OwnedRecv { ep: self, id, source, finished: false })
    }

    /// Nonblocking send of `data`, which the library owns until the handle
    /// is collected: a message above the eager limit is exposed in place for
    /// the receiver to pull (no copy), and [`OwnedSend::wait`] gives the
    /// buffer back once the receiver has it. The zero-copy form of
    /// [`isend`](Self::isend).
    pub fn isend_owned(&self, dest: u32, tag: u64, data: Vec<u8>) -> Result<OwnedSend<'_>> {
        self.isend_owned_in(0, dest, tag, data)
    }

    /// [`isend_owned`](Self::isend_owned) in matching context `context`.
    pub fn isend_owned_in(&self, context: u32, dest: u32, tag: u64, data: Vec<u8>) -> Result<OwnedSend<'_>> {
        self.check_send(dest, tag)?;
        let mut state = self.lock_with_room(dest)?;
        // The clock only for the socket: a ring record needs neither it nor a transmit.
        let shm_dest = state.is_shm_peer(dest);
        let now = (!shm_dest).then(|| self.shared.now());
        let (id, buf) = if data.len() <= state.eager_limit_to(dest) {
            (
                state.eager_send_request(|| now.unwrap_or_else(|| self.shared.now()), context, dest, tag, &data)?,
                Some(data),
            )
        } else {
            let id = state.requests.alloc(dest, 1)?;
            let total = data.len() as u64;
            let mem = crate::memory::owned_mem(&data);
            let key = state.expose(dest, mem, Keep::Owned(data), id);
            self.announce(&mut state, context, dest, tag, total, key.0, id);
            (id, None)
        };
        if let Some(now) = now {
            state.transmit(now);
        }
        Ok(OwnedSend { ep: self, id, buf, finished: false })
    }
}
