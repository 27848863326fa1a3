//! Receiver-driven pacing of get requests toward UDP peers (SR8000's GET,
//! seed 002: the side that receives the data decides how much of it is on
//! its way).
//!
//! Owns: per peer, the get chunks not yet requested and the chunks requested
//! but not yet answered, and the rule for when the next one may be asked
//! for: while fewer than `limit` bytes are on their way. A target answers a
//! request the moment it arrives, copying the data into its send queue; a
//! rank that asked for megabytes at once would make the target copy all of
//! it long before it can be sent, and on loopback those bytes have left the
//! cache by then (measured: 8 outstanding 1 MiB gets ran at ~4.2 GB/s, 2 at
//! ~5.4 GB/s). Pacing keeps the target's queue short, whatever the caller
//! keeps outstanding.
//!
//! Must not: send anything (the endpoint issues what [`GetWindow::next`]
//! yields) or decide whether a request still wants its data (the caller
//! checks the request slab). No scan over all peers: only those with chunks
//! waiting are looked at.

use std::collections::VecDeque;

use crate::request::RequestId;

/// One get request message to be sent: `len` bytes at `key+offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GetChunk {
    pub req: RequestId,
    pub key: u64,
    pub offset: u64,
    pub len: u64,
}

#[derive(Debug, Default)]
struct PeerGets {
    /// Chunks waiting to be requested, in issue order.
    waiting: VecDeque<GetChunk>,
    /// Chunks requested and not yet answered, oldest first: (request, bytes).
    /// A peer answers its requests in order, so answers match the front.
    asked: VecDeque<(RequestId, u64)>,
    asked_bytes: u64,
}

/// The paced get chunks of one endpoint.
#[derive(Debug)]
pub(crate) struct GetWindow {
    peers: Vec<PeerGets>,
    limit: u64,
    /// Chunks waiting, over all peers: the progress loop's O(1) idle check.
    waiting: usize,
    /// The peers with chunks waiting (no scan over every peer).
    waiting_peers: Vec<u32>,
}

impl GetWindow {
    /// A window of `limit` bytes per peer for a job of `size` ranks.
    pub(crate) fn new(size: u32, limit: usize) -> GetWindow {
        GetWindow {
            peers: (0..size).map(|_| PeerGets::default()).collect(),
            limit: limit.max(1) as u64,
            waiting: 0,
            waiting_peers: Vec::new(),
        }
    }

    /// Nothing waits to be requested from anyone.
    pub(crate) fn is_idle(&self) -> bool {
        self.waiting == 0
    }

    /// Queues a chunk to request from `peer`.
    pub(crate) fn push(&mut self, peer: u32, chunk: GetChunk) {
        let p = &mut self.peers[peer as usize];
        if p.waiting.is_empty() {
            self.waiting_peers.push(peer);
        }
        p.waiting.push_back(chunk);
        self.waiting += 1;
    }

    /// The next chunk to request from some peer whose window has room (one
    /// chunk may always be on its way); it counts as asked from now on.
    pub(crate) fn next(&mut self) -> Option<(u32, GetChunk)> {
        let limit = self.limit;
        let i = self.waiting_peers.iter().position(|&peer| {
            let p = &self.peers[peer as usize];
            p.waiting.front().is_some_and(|c| p.asked.is_empty() || p.asked_bytes + c.len <= limit)
        })?;
        let peer = self.waiting_peers[i];
        let p = &mut self.peers[peer as usize];
        let chunk = p.waiting.pop_front()?;
        if p.waiting.is_empty() {
            self.waiting_peers.swap_remove(i);
        }
        self.waiting -= 1;
        p.asked.push_back((chunk.req, chunk.len));
        p.asked_bytes += chunk.len;
        Some((peer, chunk))
    }

    /// A chunk taken by [`next`](Self::next) was not sent after all.
    pub(crate) fn unask(&mut self, peer: u32) {
        let p = &mut self.peers[peer as usize];
        if let Some((_, len)) = p.asked.pop_back() {
            p.asked_bytes -= len;
        }
    }

    /// `peer` answered a get request of `req` (data or an error).
    pub(crate) fn on_answer(&mut self, peer: u32, req: RequestId) {
        let Some(p) = self.peers.get_mut(peer as usize) else {
            return;
        };
        if p.asked.front().is_some_and(|&(asked, _)| asked == req) {
            let (_, len) = p.asked.pop_front().expect("front checked");
            p.asked_bytes -= len;
        }
    }

    /// Forgets everything toward `peer` (it died or restarted: what was
    /// asked will never be answered); returns the requests whose chunks
    /// were still waiting, for the caller to fail.
    pub(crate) fn clear_peer(&mut self, peer: u32) -> Vec<RequestId> {
        let p = &mut self.peers[peer as usize];
        self.waiting -= p.waiting.len();
        self.waiting_peers.retain(|&waiting| waiting != peer);
        let mut reqs: Vec<RequestId> = p.waiting.drain(..).map(|c| c.req).collect();
        reqs.dedup();
        p.asked.clear();
        p.asked_bytes = 0;
        reqs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(req: u32, len: u64) -> GetChunk {
        GetChunk { req: RequestId(req), key: 1, offset: 0, len }
    }

    #[test]
    fn asks_while_the_window_has_room_and_refills_on_answers() {
        let mut w = GetWindow::new(3, 100);
        assert!(w.is_idle());
        for _ in 0..3 {
            w.push(1, chunk(7, 40));
        }
        w.push(1, chunk(8, 500));
        assert_eq!(w.next(), Some((1, chunk(7, 40))));
        assert_eq!(w.next(), Some((1, chunk(7, 40))));
        assert_eq!(w.next(), None, "120 bytes would exceed the window of 100");
        w.push(2, chunk(5, 60));
        assert_eq!(w.next(), Some((2, chunk(5, 60))), "another peer has its own window");
        w.on_answer(1, RequestId(9));
        assert_eq!(w.next(), None, "an answer to something else frees nothing");
        w.on_answer(1, RequestId(7));
        assert_eq!(w.next(), Some((1, chunk(7, 40))));
        w.on_answer(1, RequestId(7));
        w.on_answer(1, RequestId(7));
        assert_eq!(w.next(), Some((1, chunk(8, 500))), "a chunk larger than the window goes alone");
        assert!(w.is_idle());
        w.unask(1);
        assert_eq!(w.peers[1].asked_bytes, 0);
    }

    #[test]
    fn clearing_a_peer_returns_the_waiting_requests() {
        let mut w = GetWindow::new(3, 10);
        w.push(2, chunk(1, 10));
        w.push(2, chunk(1, 10));
        w.push(2, chunk(4, 10));
        assert_eq!(w.next(), Some((2, chunk(1, 10))));
        assert_eq!(w.clear_peer(2), vec![RequestId(1), RequestId(4)]);
        assert!(w.is_idle());
        assert_eq!(w.next(), None);
    }
}
