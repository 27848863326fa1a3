//! Deadlines of blocking waits.
//!
//! Owns: which bound a wait runs under ([`Bound`]), turning the endpoint's
//! operation timeout (`Config::op_timeout`, `MW_OP_TIMEOUT_MS`) or a
//! caller's timeout into an instant (at once, or only once a call has to
//! wait: [`LazyDeadline`]), and a wait that passed it into
//! [`Error::Timeout`]. Waits for what another rank's library owes are
//! bounded by the operation timeout; waits paced by another rank's
//! application (receives, FIFO pops, barriers, collectives) by the wait
//! timeout, none by default; a few have no deadline unless the caller
//! gives one (`wait_until`, `recv_raw`, a send's completion; see
//! `Config::wait_timeout` for the list and why).
//! What a wait that timed out must undo (a posted receive, a team's step)
//! is its caller's: `msg::cancel`, `coll::wait`, `internal`.
//!
//! Must not: read the clock except where a bounded wait starts (the wait
//! loop in `endpoint` compares against the instant with the clock reading
//! it takes each round anyway), or reach into the protocol (mw-proto stays
//! clock-free: its own timers are the peer-death deadline).

use std::time::{Duration, Instant};

use crate::endpoint::{Endpoint, State};
use crate::{Error, Result};

/// How long a blocking wait may last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// Until the condition holds or the peer is declared dead: the wait is
    /// paced by another rank's application.
    Unbounded,
    /// The endpoint's operation timeout, counted from when the wait starts:
    /// the wait is for what a live peer's library owes.
    Op,
    /// The endpoint's wait timeout (`Config::wait_timeout`, none by
    /// default), counted from when the wait starts: the wait is paced by
    /// another rank's application, or the peer's death.
    Paced,
    /// A timeout the caller chose, counted from when the wait starts.
    After(Duration),
}

/// A [`Bound`] whose deadline is fixed when a call first has to wait,
/// so a call that finds what it wants at once reads no clock, and the
/// phases of one call (a receive tried in place, then posted) share it.
#[derive(Debug)]
pub(crate) struct LazyDeadline {
    bound: Bound,
    at: Option<Option<Instant>>,
}

impl LazyDeadline {
    pub(crate) fn new(bound: Bound) -> LazyDeadline {
        LazyDeadline { bound, at: None }
    }

    /// The deadline, fixed now if not yet; `None`: no deadline.
    pub(crate) fn get(&mut self, ep: &Endpoint) -> Option<Instant> {
        *self.at.get_or_insert_with(|| ep.deadline(self.bound))
    }
}

impl Endpoint {
    /// The instant a wait under `bound` that starts now gives up at.
    pub(crate) fn deadline(&self, bound: Bound) -> Option<Instant> {
        let timeout = match bound {
            Bound::Unbounded => return None,
            Bound::Op => self.shared.op_timeout?,
            Bound::Paced => self.shared.wait_timeout?,
            Bound::After(timeout) => timeout,
        };
        // A timeout too large to add is no deadline.
        Instant::now().checked_add(timeout)
    }

    /// [`wait_for`](Self::wait_for) bounded by the operation timeout.
    pub(crate) fn wait_for_op(&self, done: impl FnMut(&mut State) -> bool) -> Result<()> {
        self.wait_for_bound(done, Bound::Op)
    }

    /// [`wait_for`](Self::wait_for) under `bound`: [`Error::Timeout`] when
    /// `done` did not say so by its deadline.
    pub(crate) fn wait_for_bound(&self, done: impl FnMut(&mut State) -> bool, bound: Bound) -> Result<()> {
        match self.wait_for_bounded(done, &mut LazyDeadline::new(bound)) {
            true => Ok(()),
            false => Err(Error::Timeout),
        }
    }

    /// [`wait_for`](Self::wait_for) until `deadline`: whether `done` said
    /// so in time. `done` is asked once under the lock before the deadline
    /// is fixed, so a wait that is over at once reads no clock.
    pub(crate) fn wait_for_bounded(
        &self,
        mut done: impl FnMut(&mut State) -> bool,
        deadline: &mut LazyDeadline,
    ) -> bool {
        if deadline.bound == Bound::Unbounded {
            self.wait_for(done);
            return true;
        }
        if done(&mut self.lock()) {
            return true;
        }
        let until = deadline.get(self);
        self.wait_for_until(done, until)
    }

    /// The operation timeout in force (`Config::op_timeout`); `None`: waits
    /// for replies are not bounded.
    pub fn op_timeout(&self) -> Option<Duration> {
        self.shared.op_timeout
    }
}
