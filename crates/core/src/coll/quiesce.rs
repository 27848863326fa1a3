//! `quiesce`: PM's network preemption (seed 004) — bring the job to a point
//! where nothing is in flight, so a scheduler can stop every process
//! (SIGSTOP) and resume it later without anything lost or any peer taken for
//! dead (the protocol forgives its own stalls on resumption).
//!
//! Owns: the collective sequence (quiet, barrier, quiescence wait, twice) that
//! gets there. Must not: change protocol state (it only asks for acks and reads
//! whether anything is unacknowledged), or stop any process itself: that is the
//! scheduler's job.

use crate::endpoint::Endpoint;
use crate::Result;

impl Endpoint {
    /// Collective over the whole job: returns when every operation any rank
    /// issued before the call is complete at its target and acknowledged,
    /// and no rank owes an acknowledgement: nothing of the job is in flight
    /// (keepalive probes, which expect nothing, aside).
    ///
    /// Every rank first completes its own operations; a barrier then means
    /// every rank did. Each rank then waits until its protocol state is
    /// quiescent (the barrier's own messages acknowledged, no ack owed). A
    /// second barrier and wait settle the first barrier's traffic: each of
    /// its messages is awaited by its receiver, so once a rank is through it
    /// has received everything addressed to it, and the final wait returns
    /// once what it sent was acknowledged.
    pub fn quiesce(&self) -> Result<()> {
        self.quiet()?;
        self.barrier()?;
        self.wait_quiescent()?;
        self.barrier()?;
        self.wait_quiescent()
    }

    /// Waits (at most `Config::op_timeout`) until everything this rank sent is acknowledged.
    fn wait_quiescent(&self) -> crate::Result<()> {
        {
            let mut state = self.lock();
            let now = self.shared.now();
            for peer in 0..state.size {
                if state.proto.unacked_messages(peer) > 0 {
                    state.proto.request_ack(now, peer);
                }
            }
        }
        self.wait_for_op(|state| state.loopback.is_empty() && state.proto.is_quiescent())
    }
}
