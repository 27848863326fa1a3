//! The simulated network: links with loss, duplication, reordering, jitter
//! and a bandwidth cap, and a queue of datagrams in flight on a virtual clock.
//!
//! Owns: [`LinkConfig`], [`Network`] (what happens to a datagram between
//! `poll_transmit` on one endpoint and `handle_datagram` on another), and the
//! virtual clock.
//!
//! Must not: look inside datagrams beyond what tracing prints, or know about
//! workloads; it moves bytes and keeps time.

use crate::rng::Rng;
use mw_proto::time::{Duration, Instant};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How one direction of a link treats datagrams.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Probability that a datagram is lost.
    pub loss: f64,
    /// Probability that a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability that a datagram is held back by up to `reorder_delay`
    /// extra, so later ones overtake it.
    pub reorder: f64,
    /// Longest extra hold of a reordered datagram.
    pub reorder_delay: Duration,
    /// Fixed propagation delay.
    pub delay: Duration,
    /// Uniformly random extra delay in `[0, jitter]` per datagram.
    pub jitter: Duration,
    /// Serialization rate in bytes per second; `None` is infinitely fast.
    pub bandwidth: Option<u64>,
    /// Bytes that may wait for serialization before tail drop.
    pub queue_bytes: usize,
    /// The destination's receive port, shared by every link into it (a
    /// switch port, the receiver's NIC): its rate in bytes per second and
    /// the bytes that may wait for it before tail drop. Datagrams from
    /// several senders queue there together, which is what makes incast.
    /// `None`: each link is independent.
    pub port: Option<(u64, usize)>,
}

impl Default for LinkConfig {
    /// A clean 10 µs link with no bandwidth limit.
    fn default() -> LinkConfig {
        LinkConfig {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(50),
            delay: Duration::from_micros(10),
            jitter: Duration::ZERO,
            bandwidth: None,
            queue_bytes: 1 << 20,
            port: None,
        }
    }
}

/// Network-level counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Datagrams handed to the network.
    pub sent: u64,
    /// Dropped by random loss.
    pub lost: u64,
    /// Dropped because the link queue was full.
    pub queue_drops: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Dropped because the destination was down.
    pub to_down_node: u64,
    /// Handed to a destination endpoint.
    pub delivered: u64,
}

/// A datagram on its way.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Flight {
    at: Instant,
    order: u64,
    src: u32,
    dst: u32,
    bytes: Vec<u8>,
}

/// The links between `n` nodes and the datagrams in flight.
#[derive(Debug)]
pub struct Network {
    now: Instant,
    n: usize,
    links: Vec<LinkConfig>,
    busy_until: Vec<Instant>,
    /// When each node's shared receive port (`LinkConfig::port`) is free.
    port_busy_until: Vec<Instant>,
    flights: BinaryHeap<Reverse<Flight>>,
    order: u64,
    /// Counters.
    pub stats: NetStats,
}

impl Network {
    /// `n` nodes, every directed link configured as `link`.
    pub fn new(n: usize, link: LinkConfig) -> Network {
        Network {
            now: Instant::ZERO,
            n,
            links: vec![link; n * n],
            busy_until: vec![Instant::ZERO; n * n],
            port_busy_until: vec![Instant::ZERO; n],
            flights: BinaryHeap::new(),
            order: 0,
            stats: NetStats::default(),
        }
    }

    /// The virtual clock.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Moves the clock forward to `t` (never backward).
    pub fn advance(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }

    /// Reconfigures the link `src → dst`.
    pub fn set_link(&mut self, src: u32, dst: u32, link: LinkConfig) {
        self.links[src as usize * self.n + dst as usize] = link;
    }

    /// Sends `bytes` from `src` to `dst` through the link's faults.
    pub fn send(&mut self, rng: &mut Rng, src: u32, dst: u32, bytes: &[u8]) {
        self.stats.sent += 1;
        let li = src as usize * self.n + dst as usize;
        let link = &self.links[li];
        if rng.chance(link.loss) {
            self.stats.lost += 1;
            return;
        }
        let mut depart = self.now;
        if let Some(rate) = link.bandwidth {
            let start = self.busy_until[li].max(self.now);
            let backlog = (start - self.now).as_nanos() as u64 * rate / 1_000_000_000;
            if backlog as usize + bytes.len() > link.queue_bytes {
                self.stats.queue_drops += 1;
                return;
            }
            depart = start + Duration::from_nanos(bytes.len() as u64 * 1_000_000_000 / rate);
            self.busy_until[li] = depart;
        }
        // The shared port: datagrams reach it after the link's delay and
        // leave it in the order they were sent (all links into one node
        // share a delay in the scenarios, so send order is arrival order).
        let mut port_delay = Duration::ZERO;
        if let Some((rate, queue)) = link.port {
            let reach = depart + link.delay;
            let di = dst as usize;
            let start = self.port_busy_until[di].max(reach);
            let backlog = (start - reach).as_nanos() as u64 * rate / 1_000_000_000;
            if backlog as usize + bytes.len() > queue {
                self.stats.queue_drops += 1;
                return;
            }
            let leave = start + Duration::from_nanos(bytes.len() as u64 * 1_000_000_000 / rate);
            self.port_busy_until[di] = leave;
            port_delay = leave - reach;
        }
        let copies = if rng.chance(link.duplicate) { 2 } else { 1 };
        self.stats.duplicated += copies - 1;
        for _ in 0..copies {
            let link = &self.links[li];
            let mut at = depart + link.delay + port_delay;
            at += Duration::from_nanos((rng.unit() * link.jitter.as_nanos() as f64) as u64);
            if rng.chance(link.reorder) {
                at += Duration::from_nanos((rng.unit() * link.reorder_delay.as_nanos() as f64) as u64);
            }
            self.inject(at, src, dst, bytes.to_vec());
        }
    }

    /// Puts a datagram on the wire to arrive at `dst` at `at`, bypassing link faults.
    pub fn inject(&mut self, at: Instant, src: u32, dst: u32, bytes: Vec<u8>) {
        self.order += 1;
        self.flights.push(Reverse(Flight { at: at.max(self.now), order: self.order, src, dst, bytes }));
    }

    /// When the next datagram arrives.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.flights.peek().map(|Reverse(f)| f.at)
    }

    /// The next datagram due by now: `(src, dst, bytes)`.
    pub fn pop_arrival(&mut self) -> Option<(u32, u32, Vec<u8>)> {
        if self.next_arrival()? > self.now {
            return None;
        }
        let Reverse(f) = self.flights.pop()?;
        Some((f.src, f.dst, f.bytes))
    }

    /// Datagrams still in flight.
    pub fn in_flight(&self) -> usize {
        self.flights.len()
    }
}
