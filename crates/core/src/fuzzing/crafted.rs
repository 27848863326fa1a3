//! Crafted operation messages from a live endpoint (test support, behind the
//! `fuzzing` feature like the rest of [`crate::fuzzing`]).
//!
//! Owns: [`send_crafted`], which sends bytes a test built by hand (the wire
//! carries them, but the public API never produces them, since it normalizes
//! its arguments) to any rank as the endpoint sends its own operations, over
//! whatever path the rank takes (UDP, a same-host ring, loopback to itself),
//! under a request the test waits on like any other. Lets a test check that
//! an operation the target refuses fails its handle.
//!
//! Must not: be used by the library itself, or skip the path's ordinary
//! completion rules (ack, ring consumption, loopback delivery).

use crate::endpoint::{Endpoint, State};
use crate::handle::{Handle, Landing};
use crate::request::{Output, RequestId};
use crate::Result;

/// Largest answer a crafted request takes (a get's data).
pub const CRAFTED_OUTPUT_MAX: usize = 1 << 16;

/// Sends the message `build(req)` returns (a whole operation message, header
/// then body, with `req` in its request field) to `rank` and returns the
/// handle of request `req`. With `on_ack` the request completes, as a put's
/// does, when the message has been delivered (acknowledged, consumed from
/// the ring, or delivered to this rank) unless an error reply comes first;
/// without it, only a reply completes it (a get's or a fetching atomic's).
/// The message bypasses the get window's ordering (see `crate::get_window`).
pub fn send_crafted<'ep>(
    ep: &'ep Endpoint,
    rank: u32,
    on_ack: bool,
    build: impl FnOnce(u32) -> Vec<u8>,
) -> Result<Handle<'ep>> {
    let output = Output::Data(Vec::with_capacity(CRAFTED_OUTPUT_MAX));
    ep.start(rank, 1, Landing::Nothing, output, |state, id| {
        let msg = build(id.0);
        let now = ep.shared.now();
        send_raw(state, now, rank, &msg, on_ack.then_some(id))
    })
}

fn send_raw(
    state: &mut State,
    now: mw_proto::time::Instant,
    peer: u32,
    msg: &[u8],
    waiter: Option<RequestId>,
) -> Result<()> {
    if peer == state.rank {
        state.loopback.push_back((msg.to_vec(), waiter));
        return Ok(());
    }
    if state.is_shm_peer(peer) {
        return state.shm_send(peer, &[msg], waiter, true);
    }
    let id = state.proto.submit(now, peer, &[msg]).map_err(|e| crate::endpoint::submit_error(e, peer, state.size))?;
    if let Some(w) = waiter {
        state.ack_waiters[peer as usize].push_back((id.0, w));
    }
    state.transmit(now);
    Ok(())
}
