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
//! Chunks are pushed one datagram's worth each (the request counts them as
//! its parts), but asked for in spans: [`GetWindow::next`] merges the
//! following contiguous chunks of the same request, up to [`MAX_SPAN`]
//! bytes and [`MAX_SPAN_CHUNKS`] chunks, into one request message, and the target answers a span with as
//! many one-datagram responses as it takes. Answers are counted in bytes
//! ([`GetWindow::on_answer`] says how many of the pushed chunks each one
//! completed), so the target's cut need not match ours.
//!
//! Large puts toward a peer wait in the same line ([`PutFeed`], see
//! `crate::put_feed`): their bytes stay in the caller's buffer and are
//! copied into the send queue a little ahead of the protocol's window, in
//! turn with the gets and held operations around them.
//!
//! Order: operations to one target take effect in issue order on every
//! path (`Endpoint::fence`). A get whose chunks wait here has not reached
//! the target yet, so any operation issued toward that peer after it
//! (a put, an atomic, a put_signal, a message: anything but a reply) waits
//! here too, as a [`HeldOp`] behind those chunks, and [`GetWindow::next`]
//! yields it once every chunk before it has been asked for. Only while a
//! get or a fed put waits: puts to a peer with nothing waiting go out at once.
//!
//! Must not: send anything (the endpoint issues what [`GetWindow::next`]
//! yields) or decide whether a request still wants its data (the caller
//! checks the request slab). No scan over all peers: only those with chunks
//! or held operations waiting are looked at.

use std::collections::VecDeque;

use crate::put_feed::PutFeed;
use crate::request::RequestId;

/// Most bytes one get request message asks for: a few dozen datagrams,
/// answered back to back, while the window still holds several spans in
/// flight.
pub(crate) const MAX_SPAN: u64 = 64 << 10;

/// Most pushed chunks (one datagram's answer each) one span merges: the
/// answers to a span then fit one GSO send (at most 64 KiB of datagrams,
/// 44 of 1,472 bytes), rather than one full send and a short one.
pub(crate) const MAX_SPAN_CHUNKS: usize = 40;

/// One get request message to be sent: `len` bytes at `key+offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GetChunk {
    pub req: RequestId,
    pub key: u64,
    pub offset: u64,
    pub len: u64,
}

/// An operation message issued toward a peer while get chunks to it were
/// waiting: sent (to the protocol, `waiter` completed by its ack) once
/// every chunk before it has been asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeldOp {
    /// The whole message: operation header, then body.
    pub msg: Vec<u8>,
    /// The request its ack completes, if any.
    pub waiter: Option<RequestId>,
}

/// What [`GetWindow::next`] yields toward a peer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// A span of get chunks to request.
    Chunk(GetChunk),
    /// An operation that was waiting behind get chunks, to send now.
    Op(HeldOp),
    /// A put to feed while the send queue has room; what is left of it
    /// goes back first in line ([`GetWindow::resume_put`]).
    Put(PutFeed),
}

/// One entry of a peer's queue, in issue order.
#[derive(Debug)]
enum Waiting {
    Chunk(GetChunk),
    Op(HeldOp),
    Put(PutFeed),
}

impl Waiting {
    fn chunk(&self) -> Option<&GetChunk> {
        match self {
            Waiting::Chunk(c) => Some(c),
            Waiting::Op(_) | Waiting::Put(_) => None,
        }
    }
}

/// A span asked for and not yet wholly answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Asked {
    req: RequestId,
    /// Bytes asked for.
    len: u64,
    /// Bytes answered so far.
    answered: u64,
    /// Length of the pushed chunks it merges (all but the last are this long).
    piece: u64,
}

impl Asked {
    /// Pushed chunks wholly answered once `answered` bytes have arrived in
    /// answers that did (`whole`) or did not yet finish the span (an empty
    /// span's one chunk is done only by its answer).
    fn pieces_done(&self, answered: u64, whole: bool) -> u64 {
        if whole {
            self.len.div_ceil(self.piece.max(1)).max(1)
        } else {
            (answered / self.piece.max(1)).min(self.len.div_ceil(self.piece.max(1)).saturating_sub(1))
        }
    }
}

#[derive(Debug, Default)]
struct PeerGets {
    /// Chunks waiting to be requested and operations held behind them, in
    /// issue order.
    waiting: VecDeque<Waiting>,
    /// Spans requested and not yet wholly answered, oldest first. A peer
    /// answers its requests in order, so answers match the front.
    asked: VecDeque<Asked>,
    asked_bytes: u64,
    /// Bytes of the chunks in `waiting`.
    waiting_bytes: u64,
    /// Bytes of the operations in `waiting`.
    held_bytes: usize,
}

impl PeerGets {
    /// Whether the next span may be asked for now: always when nothing is
    /// on its way; otherwise only once the window has room for a whole span
    /// (or for all that waits, if less), so that answers trickling in do
    /// not each let one small request out (which would cost a request
    /// message per datagram of data).
    fn may_ask(&self, limit: u64, send_room: bool) -> bool {
        let first = match self.waiting.front() {
            None => return false,
            // A held operation takes no room: it goes as soon as it is first.
            Some(Waiting::Op(_)) => return true,
            // A put waits for room in the send queue, not in the get window.
            Some(Waiting::Put(_)) => return send_room,
            Some(Waiting::Chunk(first)) => first,
        };
        let want = first.len.max(MAX_SPAN.min(limit / 2).min(self.waiting_bytes));
        self.asked.is_empty() || self.asked_bytes + want <= limit
    }
}

/// The paced get chunks of one endpoint.
#[derive(Debug)]
pub(crate) struct GetWindow {
    peers: Vec<PeerGets>,
    limit: u64,
    /// Entries (chunks, held operations) waiting, over all peers: the
    /// progress loop's O(1) idle check.
    waiting: usize,
    /// The peers with entries waiting (no scan over every peer).
    waiting_peers: Vec<u32>,
    /// Puts waiting, over all peers.
    puts: usize,
}

impl GetWindow {
    /// A window of `limit` bytes per peer for a job of `size` ranks.
    pub(crate) fn new(size: u32, limit: usize) -> GetWindow {
        GetWindow {
            peers: (0..size).map(|_| PeerGets::default()).collect(),
            limit: limit.max(1) as u64,
            waiting: 0,
            waiting_peers: Vec::new(),
            puts: 0,
        }
    }

    /// Nothing waits to be requested from anyone.
    pub(crate) fn is_idle(&self) -> bool {
        self.waiting == 0
    }

    /// Queues a chunk to request from `peer`.
    pub(crate) fn push(&mut self, peer: u32, chunk: GetChunk) {
        let p = &mut self.peers[peer as usize];
        p.waiting_bytes += chunk.len;
        self.enqueue(peer, Waiting::Chunk(chunk));
    }

    /// Whether an operation toward `peer` issued now must wait behind get
    /// chunks (or operations already held) to keep issue order.
    #[inline]
    pub(crate) fn must_hold(&self, peer: u32) -> bool {
        self.peers.get(peer as usize).is_some_and(|p| !p.waiting.is_empty())
    }

    /// Queues an operation toward `peer` behind what waits for it (see
    /// [`must_hold`](Self::must_hold)).
    pub(crate) fn hold(&mut self, peer: u32, op: HeldOp) {
        self.peers[peer as usize].held_bytes += op.msg.len();
        self.enqueue(peer, Waiting::Op(op));
    }

    /// Queues a put to feed toward `peer`, behind what waits for it.
    pub(crate) fn push_put(&mut self, peer: u32, feed: PutFeed) {
        self.puts += 1;
        self.enqueue(peer, Waiting::Put(feed));
    }

    /// Puts back, first in its peer's line, what is left of a put that
    /// [`next`](Self::next) yielded.
    pub(crate) fn resume_put(&mut self, peer: u32, feed: PutFeed) {
        let p = &mut self.peers[peer as usize];
        if p.waiting.is_empty() {
            self.waiting_peers.push(peer);
        }
        p.waiting.push_front(Waiting::Put(feed));
        self.waiting += 1;
        self.puts += 1;
    }

    /// The put of request `id` still waiting, if any.
    pub(crate) fn put_mut(&mut self, id: RequestId) -> Option<&mut PutFeed> {
        if self.puts == 0 {
            return None;
        }
        let peer = *self.waiting_peers.iter().find(|&&peer| {
            self.peers[peer as usize].waiting.iter().any(|w| matches!(w, Waiting::Put(feed) if feed.req == id))
        })?;
        self.peers[peer as usize].waiting.iter_mut().find_map(|w| match w {
            Waiting::Put(feed) if feed.req == id => Some(feed),
            _ => None,
        })
    }

    /// Removes the put of request `id` still waiting, if any; returns
    /// whether there was one.
    pub(crate) fn remove_put(&mut self, id: RequestId) -> bool {
        if self.puts == 0 {
            return false;
        }
        for i in 0..self.waiting_peers.len() {
            let peer = self.waiting_peers[i];
            let p = &mut self.peers[peer as usize];
            let Some(at) = p.waiting.iter().position(|w| matches!(w, Waiting::Put(f) if f.req == id)) else {
                continue;
            };
            p.waiting.remove(at);
            if p.waiting.is_empty() {
                self.waiting_peers.swap_remove(i);
            }
            self.waiting -= 1;
            self.puts -= 1;
            return true;
        }
        false
    }

    /// Bytes of the operations held toward `peer` (they count as queued
    /// toward it, for backpressure).
    pub(crate) fn held_bytes(&self, peer: u32) -> usize {
        self.peers.get(peer as usize).map_or(0, |p| p.held_bytes)
    }

    fn enqueue(&mut self, peer: u32, entry: Waiting) {
        let p = &mut self.peers[peer as usize];
        if p.waiting.is_empty() {
            self.waiting_peers.push(peer);
        }
        p.waiting.push_back(entry);
        self.waiting += 1;
    }

    /// The next span to request from some peer whose window has room (one
    /// chunk may always be on its way): the first waiting chunk and the
    /// contiguous chunks of the same request after it, up to [`MAX_SPAN`]
    /// bytes and the window's room. It counts as asked from now on.
    /// An operation held behind chunks comes out as [`Next::Op`] once it
    /// is first in its peer's queue.
    ///
    /// A put first in its peer's line comes out as [`Next::Put`] when
    /// `send_room(peer)` says the send queue toward it has room.
    pub(crate) fn next(&mut self, send_room: impl Fn(u32) -> bool) -> Option<(u32, Next)> {
        let limit = self.limit;
        let i =
            self.waiting_peers.iter().position(|&peer| self.peers[peer as usize].may_ask(limit, send_room(peer)))?;
        let peer = self.waiting_peers[i];
        let p = &mut self.peers[peer as usize];
        let mut span = match p.waiting.pop_front()? {
            Waiting::Chunk(span) => span,
            Waiting::Put(feed) => {
                if p.waiting.is_empty() {
                    self.waiting_peers.swap_remove(i);
                }
                self.waiting -= 1;
                self.puts -= 1;
                return Some((peer, Next::Put(feed)));
            }
            Waiting::Op(op) => {
                p.held_bytes -= op.msg.len();
                if p.waiting.is_empty() {
                    self.waiting_peers.swap_remove(i);
                }
                self.waiting -= 1;
                return Some((peer, Next::Op(op)));
            }
        };
        let piece = span.len;
        let mut merged = 1;
        while let Some(c) = p.waiting.front().and_then(Waiting::chunk) {
            let fits =
                merged < MAX_SPAN_CHUNKS && span.len + c.len <= MAX_SPAN && p.asked_bytes + span.len + c.len <= limit;
            if !(fits && c.req == span.req && c.key == span.key && c.offset == span.offset + span.len && c.len <= piece)
            {
                break;
            }
            span.len += c.len;
            merged += 1;
            let short = c.len < piece;
            p.waiting.pop_front();
            if short {
                break; // a short chunk is a request's last
            }
        }
        if p.waiting.is_empty() {
            self.waiting_peers.swap_remove(i);
        }
        p.waiting_bytes -= span.len;
        self.waiting -= merged;
        p.asked.push_back(Asked { req: span.req, len: span.len, answered: 0, piece });
        p.asked_bytes += span.len;
        Some((peer, Next::Chunk(span)))
    }

    /// A span taken by [`next`](Self::next) was not sent after all.
    pub(crate) fn unask(&mut self, peer: u32) {
        let p = &mut self.peers[peer as usize];
        if let Some(asked) = p.asked.pop_back() {
            p.asked_bytes -= asked.len - asked.answered;
        }
    }

    /// `peer` answered a get request of `req` with `bytes` of data, or with
    /// an error (`bytes` is then `None`: the span is given up). Returns how
    /// many of the pushed chunks this answer completed, or `None` when the
    /// answer is not for a span asked through the window (a get to this
    /// rank or a same-host peer, whose every answer is one part).
    pub(crate) fn on_answer(&mut self, peer: u32, req: RequestId, bytes: Option<u64>) -> Option<u64> {
        let p = self.peers.get_mut(peer as usize)?;
        let front = p.asked.front_mut().filter(|asked| asked.req == req)?;
        let before = front.answered;
        let after = match bytes {
            Some(bytes) => (before + bytes).min(front.len),
            None => front.len,
        };
        front.answered = after;
        let done = front.pieces_done(after, after == front.len) - front.pieces_done(before, false);
        p.asked_bytes -= after - before;
        if after == front.len {
            p.asked.pop_front();
        }
        Some(done)
    }

    /// Forgets everything toward `peer` (it died or restarted: what was
    /// asked will never be answered); returns the requests whose chunks or
    /// held operations were still waiting, for the caller to fail.
    pub(crate) fn clear_peer(&mut self, peer: u32) -> Vec<RequestId> {
        let p = &mut self.peers[peer as usize];
        self.waiting -= p.waiting.len();
        p.waiting_bytes = 0;
        p.held_bytes = 0;
        self.waiting_peers.retain(|&waiting| waiting != peer);
        let mut reqs: Vec<RequestId> = p
            .waiting
            .drain(..)
            .filter_map(|w| match w {
                Waiting::Chunk(c) => Some(c.req),
                Waiting::Op(op) => op.waiter,
                Waiting::Put(feed) => {
                    self.puts -= 1;
                    Some(feed.req)
                }
            })
            .collect();
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

    fn span(req: u32, offset: u64, len: u64) -> GetChunk {
        GetChunk { req: RequestId(req), key: 1, offset, len }
    }

    /// The next span to ask for; panics on a held operation.
    fn ask(w: &mut GetWindow) -> Option<(u32, GetChunk)> {
        w.next(|_| true).map(|(peer, next)| match next {
            Next::Chunk(c) => (peer, c),
            Next::Op(op) => panic!("a held operation where a chunk was expected: {op:?}"),
            Next::Put(feed) => panic!("a put where a chunk was expected: {feed:?}"),
        })
    }

    #[test]
    fn asks_while_the_window_has_room_and_refills_on_answers() {
        let mut w = GetWindow::new(3, 100);
        assert!(w.is_idle());
        // Three chunks of different requests: not merged.
        for req in [7, 17, 27] {
            w.push(1, chunk(req, 40));
        }
        w.push(1, chunk(8, 500));
        assert_eq!(ask(&mut w), Some((1, chunk(7, 40))));
        assert_eq!(ask(&mut w), Some((1, chunk(17, 40))));
        assert_eq!(ask(&mut w), None, "120 bytes would exceed the window of 100");
        w.push(2, chunk(5, 60));
        assert_eq!(ask(&mut w), Some((2, chunk(5, 60))), "another peer has its own window");
        assert_eq!(w.on_answer(1, RequestId(9), Some(40)), None, "an answer to something else");
        assert_eq!(ask(&mut w), None, "an answer to something else frees nothing");
        assert_eq!(w.on_answer(1, RequestId(7), Some(40)), Some(1));
        assert_eq!(ask(&mut w), Some((1, chunk(27, 40))));
        assert_eq!(w.on_answer(1, RequestId(17), Some(40)), Some(1));
        assert_eq!(w.on_answer(1, RequestId(27), None), Some(1), "an error gives the span up");
        assert_eq!(ask(&mut w), Some((1, chunk(8, 500))), "a chunk larger than the window goes alone");
        assert!(w.is_idle());
        w.unask(1);
        assert_eq!(w.peers[1].asked_bytes, 0);
    }

    /// Contiguous chunks of one request go as one span (up to MAX_SPAN and
    /// the window), answered by pieces of any size: each answer reports the
    /// pushed chunks it completed, and the span's room comes back by bytes.
    #[test]
    fn contiguous_chunks_of_a_request_are_asked_as_spans_and_answered_by_bytes() {
        let mut w = GetWindow::new(2, 10_000);
        for i in 0..10 {
            w.push(1, span(3, 1000 + i * 1400, if i == 9 { 600 } else { 1400 }));
        }
        assert_eq!(ask(&mut w), Some((1, span(3, 1000, 7 * 1400))), "cut at the window");
        assert_eq!(ask(&mut w), None);
        // The target answers in pieces of 1000 bytes; room for a mere piece
        // or two lets no small request out.
        let mut done = 0;
        for _ in 0..4 {
            assert_eq!(ask(&mut w), None, "room for less than all that waits (3400 bytes)");
            done += w.on_answer(1, RequestId(3), Some(1000)).unwrap();
        }
        assert_eq!(ask(&mut w), Some((1, span(3, 1000 + 7 * 1400, 2 * 1400 + 600))), "room for the rest");
        assert!(w.is_idle());
        done += w.on_answer(1, RequestId(3), Some(1000)).unwrap();
        assert_eq!(done, 3, "5000 bytes complete three 1400-byte chunks");
        assert_eq!(w.peers[1].asked_bytes, 7 * 1400 - 5000 + 3400);
        done += w.on_answer(1, RequestId(3), Some(4800)).unwrap();
        assert_eq!(done, 7);
        done += w.on_answer(1, RequestId(3), Some(3400)).unwrap();
        assert_eq!(done, 10, "every pushed chunk completed exactly once");
        assert_eq!(w.peers[1].asked_bytes, 0);
        assert!(w.peers[1].asked.is_empty());
        // A gap or another request ends a span; so does MAX_SPAN.
        w.push(1, span(4, 0, 1000));
        w.push(1, span(4, 2000, 1000));
        w.push(1, span(5, 3000, 1000));
        assert_eq!(ask(&mut w), Some((1, span(4, 0, 1000))));
        assert_eq!(ask(&mut w), Some((1, span(4, 2000, 1000))));
        assert_eq!(ask(&mut w), Some((1, span(5, 3000, 1000))));
        // An empty get is one chunk, done by its (empty) answer.
        let mut empty = GetWindow::new(2, 100);
        empty.push(1, span(9, 0, 0));
        assert_eq!(ask(&mut empty), Some((1, span(9, 0, 0))));
        assert_eq!(empty.on_answer(1, RequestId(9), Some(0)), Some(1));
        assert!(empty.peers[1].asked.is_empty());
        let mut big = GetWindow::new(2, 1 << 30);
        for i in 0..100 {
            big.push(0, span(6, i * 1000, 1000));
        }
        assert_eq!(ask(&mut big).unwrap().1.len, MAX_SPAN_CHUNKS as u64 * 1000);
        let mut wide = GetWindow::new(2, 1 << 30);
        for i in 0..100 {
            wide.push(0, span(6, i * 4000, 4000));
        }
        assert_eq!(ask(&mut wide).unwrap().1.len, MAX_SPAN / 4000 * 4000);
    }

    #[test]
    fn clearing_a_peer_returns_the_waiting_requests() {
        let mut w = GetWindow::new(3, 10);
        w.push(2, chunk(1, 10));
        w.push(2, chunk(1, 10));
        w.push(2, chunk(4, 10));
        assert_eq!(ask(&mut w), Some((2, chunk(1, 10))));
        assert_eq!(w.clear_peer(2), vec![RequestId(1), RequestId(4)]);
        assert!(w.is_idle());
        assert_eq!(ask(&mut w), None);
    }
}

#[cfg(test)]
mod hold_tests {
    use super::*;

    fn chunk(req: u32, offset: u64, len: u64) -> GetChunk {
        GetChunk { req: RequestId(req), key: 1, offset, len }
    }

    fn op(tag: u8, waiter: u32) -> HeldOp {
        HeldOp { msg: vec![tag; 10], waiter: Some(RequestId(waiter)) }
    }

    /// An operation issued after a get whose chunks wait is held until they
    /// have all been asked for, and operations after it stay behind it;
    /// a peer with nothing waiting holds nothing.
    #[test]
    fn operations_wait_behind_the_get_chunks_issued_before_them() {
        let mut w = GetWindow::new(3, 100);
        assert!(!w.must_hold(1), "nothing waits: operations go at once");
        for i in 0..3 {
            w.push(1, chunk(7, i * 60, 60));
        }
        assert!(w.must_hold(1) && !w.must_hold(2));
        w.hold(1, op(1, 20));
        w.push(1, chunk(8, 0, 30));
        w.hold(1, op(2, 21));
        assert_eq!(w.held_bytes(1), 20);
        assert_eq!(w.next(|_| true), Some((1, Next::Chunk(chunk(7, 0, 60)))));
        assert_eq!(w.next(|_| true), None, "the window is full; the held put stays behind the chunks");
        assert_eq!(w.on_answer(1, RequestId(7), Some(60)), Some(1));
        assert_eq!(w.next(|_| true), Some((1, Next::Chunk(chunk(7, 60, 60)))));
        assert_eq!(w.on_answer(1, RequestId(7), Some(60)), Some(1));
        assert_eq!(w.next(|_| true), Some((1, Next::Chunk(chunk(7, 120, 60)))));
        assert_eq!(w.next(|_| true), Some((1, Next::Op(op(1, 20)))), "every chunk before it asked: out it goes");
        assert_eq!(w.next(|_| true), Some((1, Next::Chunk(chunk(8, 0, 30)))), "30 bytes fit beside the 60 asked");
        assert_eq!(w.next(|_| true), Some((1, Next::Op(op(2, 21)))));
        assert_eq!(w.next(|_| true), None);
        assert!(w.is_idle() && !w.must_hold(1));
        assert_eq!(w.held_bytes(1), 0);
        // A peer that dies fails its held operations' requests too.
        w.push(2, chunk(9, 0, 500));
        w.push(2, chunk(9, 500, 500));
        w.hold(2, op(3, 22));
        assert_eq!(w.clear_peer(2), vec![RequestId(9), RequestId(22)]);
        assert!(w.is_idle());
        assert_eq!(w.held_bytes(2), 0);
    }

    fn feed(req: u32) -> PutFeed {
        static SOURCE: [u8; 4096] = [7; 4096];
        PutFeed {
            req: RequestId(req),
            key: 1,
            offset: 0,
            source: crate::put_feed::FeedSource::from_static(&SOURCE),
            chunk: 1024,
            fed: 0,
            signal: None,
        }
    }

    /// A put waits its turn in line and for room in the send queue (not in
    /// the get window); what is left of it goes back first; operations
    /// behind it stay behind it; a removed put frees its place.
    #[test]
    fn puts_wait_in_line_for_send_room() {
        let mut w = GetWindow::new(2, 100);
        w.push_put(1, feed(5));
        assert!(w.must_hold(1), "operations issued after a put wait behind it");
        w.hold(1, op(1, 20));
        assert_eq!(w.next(|_| false), None, "no room in the send queue: nothing moves");
        let Some((1, Next::Put(mut first))) = w.next(|_| true) else { panic!("the put comes first") };
        first.fed = 1024;
        w.resume_put(1, first);
        assert_eq!(w.next(|_| false), None, "the rest is first again, and still waits for room");
        let Some((1, Next::Put(rest))) = w.next(|_| true) else { panic!("the rest of the put") };
        assert_eq!(rest.fed, 1024);
        assert_eq!(w.next(|_| false), Some((1, Next::Op(op(1, 20)))), "then what was held behind it");
        assert!(w.is_idle());

        w.push_put(1, feed(6));
        w.push_put(1, feed(7));
        assert!(w.remove_put(RequestId(6)));
        assert!(!w.remove_put(RequestId(6)), "gone");
        let Some((1, Next::Put(left))) = w.next(|_| true) else { panic!("the other put") };
        assert_eq!(left.req, RequestId(7));
        assert!(w.is_idle() && !w.remove_put(RequestId(7)));

        w.push_put(1, feed(8));
        w.push(1, chunk(9, 0, 10));
        assert_eq!(w.clear_peer(1), vec![RequestId(8), RequestId(9)]);
        assert!(w.is_idle() && !w.remove_put(RequestId(8)), "a cleared peer's puts are gone");
    }
}
