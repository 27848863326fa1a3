//! Receives that end before their message: a timeout, or a handle dropped.
//!
//! Owns: cancelling a receive so that nothing lands in its buffer once the
//! call that gave up returns, and answering the sender of a message that
//! was being pulled into it, cancelling a receive only while no message
//! has matched it (MPI's `MPI_Cancel`), and the `*_timeout` forms of the
//! blocking receive calls. Every byte that reaches a receive's buffer (an eager
//! message, a rendezvous chunk over UDP or a ring, a same-host pull that
//! copies the whole payload, a sender's assisted copy inside that pull) is
//! written under the endpoint lock through the receive's request slot, so
//! detaching the slot under that lock ends them all.
//!
//! Must not: decide matching (tagged.rs) or run the pull (rndv.rs).

use std::time::Duration;

use mw_wire::op::Status;

use super::{MsgOutput, Outgoing};
use crate::deadline::Bound;
use crate::endpoint::{Endpoint, State};
use crate::request::{Output, RequestId};
use crate::{Error, RecvStatus, Result};

impl State {
    /// Cancels receive `id` with `error`, or takes it if it is complete;
    /// either way its slot is freed and its outcome returned (`None` for an
    /// unknown id). A receive still posted leaves the posted queue; one
    /// with a rendezvous pull on its way stops pulling, and its sender is
    /// told `Cancelled` (its send fails: the message was not delivered).
    pub(crate) fn cancel_recv(&mut self, id: RequestId, error: Error) -> Option<(Result<()>, Output)> {
        if self.requests.is_done(id) == Some(false) && !self.msg.tagged.cancel(id) {
            if let Some((peer, token)) = self.msg.rndv.cancel_pull(id) {
                self.msg.outbox.push_back(Outgoing::RndvDone { peer, token, status: Status::Cancelled });
            }
        }
        let completion = self.requests.fail(id, error);
        self.completions.extend(completion);
        self.requests.take(id)
    }
}

impl State {
    /// Cancels receive `id` only if no message has matched it yet: then it
    /// leaves the posted queue, fails with [`Error::Cancelled`] and its slot
    /// is freed (true). A receive that a message has matched (arrived, or
    /// still being pulled) is left as it is (false), as is an unknown id.
    pub(crate) fn cancel_recv_unmatched(&mut self, id: RequestId) -> bool {
        if self.requests.is_done(id) != Some(false) || !self.msg.tagged.cancel(id) {
            return false;
        }
        let completion = self.requests.fail(id, Error::Cancelled);
        self.completions.extend(completion);
        drop(self.requests.take(id));
        true
    }
}

impl Endpoint {
    /// [`State::cancel_recv_unmatched`] under the endpoint lock.
    pub(crate) fn cancel_recv_unmatched(&self, id: RequestId) -> bool {
        self.lock().cancel_recv_unmatched(id)
    }

    /// [`State::cancel_recv`], and the sender's answer on its way.
    pub(crate) fn cancel_recv(&self, id: RequestId, error: Error) -> Option<(Result<()>, Output)> {
        let mut state = self.lock();
        let taken = state.cancel_recv(id, error);
        if !state.msg.outbox.is_empty() {
            let now = self.shared.now();
            state.flush_outbox(now);
            state.transmit(now);
        }
        taken
    }

    /// [`recv`](Self::recv), giving up after `timeout` instead of
    /// `Config::wait_timeout`. On [`Error::Timeout`] the receive is cancelled:
    /// a message that had not matched it is left for a later receive; one
    /// being pulled into it (a large message) is dropped and its sender's
    /// send fails with [`Error::Cancelled`]; `buf` is not written after the
    /// call returns. A message that arrived whole by the deadline is
    /// received.
    pub fn recv_timeout(&self, source: u32, tag: u64, buf: &mut [u8], timeout: Duration) -> Result<RecvStatus> {
        self.recv_in_bounded(0, source, tag, buf, Bound::After(timeout))
    }

    /// [`recv_timeout`](Self::recv_timeout) in matching context `context`.
    pub fn recv_in_timeout(
        &self,
        context: u32,
        source: u32,
        tag: u64,
        buf: &mut [u8],
        timeout: Duration,
    ) -> Result<RecvStatus> {
        self.recv_in_bounded(context, source, tag, buf, Bound::After(timeout))
    }

    /// [`probe`](Self::probe), giving up after `timeout` with [`Error::Timeout`].
    pub fn probe_timeout(&self, source: u32, tag: u64, timeout: Duration) -> Result<RecvStatus> {
        self.probe_in_bounded(0, source, tag, Bound::After(timeout))
    }

    /// [`probe_timeout`](Self::probe_timeout) in matching context `context`.
    pub fn probe_in_timeout(&self, context: u32, source: u32, tag: u64, timeout: Duration) -> Result<RecvStatus> {
        self.probe_in_bounded(context, source, tag, Bound::After(timeout))
    }
}

/// The buffer of a cancelled or completed owned receive, and its outcome.
pub(super) fn owned_outcome(taken: Option<(Result<()>, Output)>, timed_out: bool) -> (Vec<u8>, Result<RecvStatus>) {
    let Some((result, output)) = taken else {
        let error = if timed_out { Error::Timeout } else { Error::InvalidArgument("operation already collected") };
        return (Vec::new(), Err(error));
    };
    let Output::Msg(MsgOutput::Recv { status, mut sink }) = output else {
        return (Vec::new(), result.and(Err(Error::InvalidArgument("not a receive"))));
    };
    (sink.take_owned(), result.map(|()| status))
}
