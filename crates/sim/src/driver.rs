//! The scenario driver: runs endpoints over the simulated network in the
//! call order `mw_proto::Endpoint` documents, feeds the workload, injects
//! crashes, restarts and garbage, and hands every observation to the checker.
//!
//! Owns: the event loop (advance virtual time to the next arrival, timeout or
//! scheduled action), workload plans, and the crash/dead-time bookkeeping.
//!
//! Must not: reach into protocol internals; only the public API is used.

use crate::check::{content_key, fill_content, Checker, LogKey, SentMsg};
use crate::net::Network;
use crate::rng::Rng;
use crate::scenario::{Report, Scenario, JOB_ID};
use mw_proto::time::{Duration, Instant};
use mw_proto::{Endpoint, Event, SubmitError};
use mw_wire::{HeaderRepr, HEADER_LEN};
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;

/// Extra time allowed beyond `peer_dead_after` for the dead verdict (the
/// last packets of the crashed node may still be in flight when it dies).
const DEAD_SLACK: Duration = Duration::from_millis(5);
/// Transmissions one node may make at one instant before we call it a livelock.
const MAX_BURST: usize = 200_000;

#[derive(Debug)]
struct Node {
    ep: Option<Endpoint>,
    inc: u32,
    epochs: Vec<u32>,
}

#[derive(Debug, Clone, Copy)]
struct PlanItem {
    at: Instant,
    len: usize,
    wants_reply: bool,
}

/// Garbage kinds and the drop counter each must land in.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Expected {
    truncated: u64,
    bad_magic: u64,
    bad_version: u64,
    bad_length: u64,
    oversized: u64,
    bad_checksum: u64,
    wrong_job: u64,
    wrong_target: u64,
    unknown_peer: u64,
    stale_epoch: u64,
}

impl Expected {
    fn from_drops(d: &mw_proto::DropCounts) -> Expected {
        Expected {
            truncated: d.truncated,
            bad_magic: d.bad_magic,
            bad_version: d.bad_version,
            bad_length: d.bad_length,
            oversized: d.oversized,
            bad_checksum: d.bad_checksum,
            wrong_job: d.wrong_job,
            wrong_target: d.wrong_target,
            unknown_peer: d.unknown_peer,
            stale_epoch: d.stale_epoch,
        }
    }
}

/// Recomputes the checksum trailer of `packet` after its header was
/// rewritten, as a rank with a bug (not the network) would: the packet must
/// then be rejected for what it says, not for its checksum.
fn reseal(packet: &mut [u8]) {
    let covered = packet.len() - mw_wire::CHECKSUM_LEN;
    let crc = mw_wire::packet_checksum(&packet[..covered]);
    packet[covered..].copy_from_slice(&crc.to_le_bytes());
}

struct Driver<'a> {
    sc: &'a Scenario,
    n: u32,
    rng: Rng,
    net: Network,
    nodes: Vec<Node>,
    plans: Vec<VecDeque<PlanItem>>,
    checker: Checker,
    buf: Vec<u8>,
    content: Vec<u8>,
    crashed_at: Option<Instant>,
    restarted: bool,
    wait_start: HashMap<(u32, u32), Instant>,
    dead_events: Vec<(u32, u32, Instant)>,
    expected: Vec<Expected>,
    completed_at: Option<Instant>,
    /// Nodes that saw `PeerRestarted`.
    restart_seen: Vec<u32>,
    /// (node, peer, peer incarnation): node has accepted a packet of that
    /// incarnation of the peer, so it knows the peer's epoch.
    heard: std::collections::HashSet<(u32, u32, u32)>,
}

/// Runs one scenario to completion (or stall) and reports.
pub fn run(sc: &Scenario) -> Report {
    let mut d = Driver::new(sc);
    d.run();
    d.report()
}

fn new_epoch(rng: &mut Rng, taken: &[u32]) -> u32 {
    loop {
        let e = rng.next_u64() as u32;
        if e != 0 && !taken.contains(&e) {
            return e;
        }
    }
}

fn pick_size(rng: &mut Rng, seg: usize, max: usize) -> usize {
    let size = match rng.range(0, 19) {
        0 => 0,
        1 => 1,
        2..=5 => rng.range(2, 64) as usize,
        6..=8 => rng.range(65, seg as u64) as usize,
        9..=11 => seg * rng.range(1, 4) as usize,
        12..=13 => (seg * rng.range(1, 4) as usize).wrapping_add(rng.pick(&[1, usize::MAX])),
        14..=16 => rng.range(seg as u64 + 1, 8 * seg as u64) as usize,
        _ => rng.range(0, max as u64) as usize,
    };
    size.min(max)
}

impl<'a> Driver<'a> {
    fn new(sc: &'a Scenario) -> Driver<'a> {
        let n = sc.nodes;
        let mut rng = Rng::new(sc.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5eed);
        let mut epochs = Vec::new();
        let mut nodes = Vec::new();
        for rank in 0..n {
            let epoch = new_epoch(&mut rng, &epochs);
            epochs.push(epoch);
            let ep = Endpoint::new(sc.config.clone(), JOB_ID, rank, epoch, n);
            nodes.push(Node { ep: Some(ep), inc: 0, epochs: vec![epoch] });
        }
        let mut d = Driver {
            sc,
            n,
            rng,
            net: Network::new(n as usize, sc.link.clone()),
            nodes,
            plans: vec![VecDeque::new(); (n * n) as usize],
            checker: Checker::default(),
            buf: vec![0; sc.config.max_datagram],
            content: Vec::new(),
            crashed_at: None,
            restarted: false,
            wait_start: HashMap::new(),
            dead_events: Vec::new(),
            expected: vec![Expected::default(); n as usize],
            completed_at: None,
            restart_seen: Vec::new(),
            heard: std::collections::HashSet::new(),
        };
        for src in 0..n {
            d.make_plans(src, Instant::ZERO, false);
        }
        d
    }

    fn make_plans(&mut self, src: u32, start: Instant, at_least_one: bool) {
        let w = &self.sc.workload;
        let seg = self.sc.config.segment_size();
        for dst in 0..self.n {
            if dst == src || (w.one_way && src != 0) || (w.incast && (src == 0 || dst != 0)) {
                continue;
            }
            let talks = self.rng.chance(w.pair_chance);
            if !talks && !at_least_one {
                continue;
            }
            let count = if talks { w.messages } else { 1 };
            let mut items: Vec<PlanItem> = (0..count)
                .map(|_| {
                    let offset = self.rng.unit() * w.spread.as_nanos() as f64;
                    PlanItem {
                        at: start + Duration::from_nanos(offset as u64),
                        len: w.fixed_size.unwrap_or_else(|| pick_size(&mut self.rng, seg, w.max_size)),
                        wants_reply: self.rng.chance(w.reply_chance),
                    }
                })
                .collect();
            items.sort_by_key(|i| i.at);
            self.plans[(src * self.n + dst) as usize] = items.into();
        }
    }

    fn up(&self, node: u32) -> bool {
        self.nodes[node as usize].ep.is_some()
    }

    fn log(&self, src: u32, dst: u32) -> LogKey {
        (src, self.nodes[src as usize].inc, dst)
    }

    fn error(&mut self, text: String) {
        let now = self.net.now();
        self.checker.errors.push(format!("[{now:?}] {text}"));
    }

    fn run(&mut self) {
        let budget = Instant::ZERO + self.sc.budget;
        let mut same_instant = 0u32;
        loop {
            let now = self.net.now();
            self.scheduled(now);
            self.arrivals(now);
            self.timeouts(now);
            self.submit_due(now);
            self.transmit_all(now);
            if !self.checker.errors.is_empty() {
                return;
            }
            if self.completed_at.is_none() && self.all_resolved() {
                self.completed_at = Some(now);
            }
            // Quiescent, and (unless keepalives tick forever) the wire drained too.
            let drained = self.net.in_flight() == 0 || self.sc.config.keepalive.is_some();
            if self.completed_at.is_some() && self.all_quiescent() && drained {
                return;
            }
            let Some(next) = self.next_time() else {
                let what = if self.completed_at.is_some() { "an endpoint is not quiescent" } else { "work remains" };
                return self.error(format!("stall: {what} but nothing is scheduled"));
            };
            if next > budget {
                return self.error(format!("stall: virtual-time budget {:?} exhausted", self.sc.budget));
            }
            if next <= now {
                same_instant += 1;
                if same_instant > 100_000 {
                    return self.error("livelock: no progress of virtual time".into());
                }
            } else {
                same_instant = 0;
            }
            self.net.advance(next);
        }
    }

    fn scheduled(&mut self, now: Instant) {
        let Some(crash) = &self.sc.crash else { return };
        let x = crash.node;
        if self.crashed_at.is_none() && now >= Instant::ZERO + crash.at {
            self.crashed_at = Some(now);
            self.nodes[x as usize].ep = None;
            if self.sc.trace {
                println!("{now:?} *** node {x} crashes");
            }
            for a in 0..self.n {
                if a != x && self.nodes[a as usize].ep.as_ref().is_some_and(|ep| ep.unacked_messages(x) > 0) {
                    self.wait_start.insert((a, x), now);
                }
            }
        }
        if let (Some(t), Some(after), false) = (self.crashed_at, crash.restart_after, self.restarted) {
            if now >= t + after {
                self.restarted = true;
                let node = &mut self.nodes[x as usize];
                let epoch = new_epoch(&mut self.rng, &node.epochs);
                node.epochs.push(epoch);
                node.inc += 1;
                node.ep = Some(Endpoint::new(self.sc.config.clone(), JOB_ID, x, epoch, self.n));
                if self.sc.trace {
                    println!("{now:?} *** node {x} restarts with epoch {epoch:#x}");
                }
                self.make_plans(x, now, true);
            }
        }
    }

    fn arrivals(&mut self, now: Instant) {
        while let Some((src, dst, bytes)) = self.net.pop_arrival() {
            if !self.up(dst) {
                self.net.stats.to_down_node += 1;
                continue;
            }
            self.net.stats.delivered += 1;
            let header = HeaderRepr::parse_packet(&bytes).ok().map(|(h, _)| h);
            let src_inc = header
                .and_then(|h| self.nodes.get(h.src_rank as usize)?.epochs.iter().position(|&e| e == h.src_epoch))
                .map_or(u32::MAX, |i| i as u32);
            let dst_inc = self.nodes[dst as usize].inc;
            // Whether the sender ever heard from an earlier incarnation of dst.
            let sender_knew_none_before =
                header.is_some_and(|h| (0..dst_inc).all(|inc| !self.heard.contains(&(h.src_rank, dst, inc))));
            let ep = self.nodes[dst as usize].ep.as_mut().expect("checked up");
            let checker = &mut self.checker;
            let result = ep.handle_datagram(now, &bytes, &mut |from, msg| {
                checker.on_deliver(now, (from, src_inc, dst), dst_inc, sender_knew_none_before, msg)
            });
            if let Some(h) = header.filter(|h| ep.peer_epoch(h.src_rank) == Some(h.src_epoch)) {
                self.heard.insert((dst, h.src_rank, src_inc));
            }
            if self.sc.trace {
                match header {
                    Some(h) => println!("{now:?} recv {h} -> {result:?}"),
                    None => println!("{now:?} recv {src}->{dst} {} bytes of garbage -> {result:?}", bytes.len()),
                }
            }
            self.drain_events(now, dst);
            self.submit_replies(now);
        }
    }

    fn timeouts(&mut self, now: Instant) {
        for node in 0..self.n {
            let Some(ep) = self.nodes[node as usize].ep.as_mut() else {
                continue;
            };
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
                self.drain_events(now, node);
            }
        }
    }

    fn drain_events(&mut self, now: Instant, node: u32) {
        while let Some(event) = self.nodes[node as usize].ep.as_mut().and_then(Endpoint::poll_event) {
            if self.sc.trace {
                println!("{now:?} node {node} event {event:?}");
            }
            let peer = match event {
                Event::Acked { peer, .. } | Event::PeerDead { peer } | Event::PeerRestarted { peer, .. } => peer,
                other => return self.error(format!("node {node}: unexpected event {other:?}")),
            };
            match event {
                Event::PeerDead { .. } => self.on_dead(now, node, peer),
                Event::PeerRestarted { .. } => {
                    if self.nodes[peer as usize].inc == 0 {
                        self.error(format!("node {node}: PeerRestarted for {peer}, which never restarted"));
                    }
                    self.wait_start.remove(&(node, peer));
                    // Talk to the new incarnation, to show the connection works again.
                    let item = PlanItem { at: now, len: 100, wants_reply: true };
                    self.plans[(node * self.n + peer) as usize].push_back(item);
                    self.restart_seen.push(node);
                }
                _ => {}
            }
            let log = self.log(node, peer);
            let peer_inc = self.nodes[peer as usize].inc;
            self.checker.on_event(now, log, peer_inc, &event);
        }
    }

    fn on_dead(&mut self, now: Instant, node: u32, peer: u32) {
        self.dead_events.push((node, peer, now));
        let crashed = self.sc.crash.as_ref().is_some_and(|c| c.node == peer);
        let (Some(t), true) = (self.crashed_at, crashed) else {
            return self.error(format!("false alarm: node {node} declared live peer {peer} dead"));
        };
        let Some(&start) = self.wait_start.get(&(node, peer)) else {
            return self.error(format!("node {node} declared {peer} dead while not waiting on it since its crash"));
        };
        let latency = self.sc.link.delay + self.sc.link.jitter + self.sc.link.reorder_delay;
        let bound = start.max(t + latency) + self.sc.config.peer_dead_after + DEAD_SLACK;
        if now > bound {
            self.error(format!("node {node} declared {peer} dead at {now:?}, later than {bound:?}"));
        }
        if self.nodes[node as usize].ep.as_ref().is_some_and(|ep| ep.unacked_messages(peer) != 0) {
            self.error(format!("node {node}: messages toward dead {peer} still pending"));
        }
    }

    fn submit_one(
        &mut self,
        now: Instant,
        src: u32,
        dst: u32,
        len: usize,
        wants_reply: bool,
    ) -> Result<usize, SubmitError> {
        let log = self.log(src, dst);
        let index = self.checker.submitted(log);
        let key = content_key(log, index);
        self.content.resize(len, 0);
        fill_content(key, &mut self.content);
        let cut1 = self.rng.range(0, len as u64) as usize;
        let cut2 = self.rng.range(cut1 as u64, len as u64) as usize;
        let parts = [&self.content[..cut1], &self.content[cut1..cut2], &self.content[cut2..]];
        let ep = self.nodes[src as usize].ep.as_mut().expect("submit from a live node");
        let id = ep.submit(now, dst, &parts)?;
        let dst_inc = self.nodes[dst as usize].inc;
        let msg = SentMsg { len, key, wants_reply, reply: None, delivered: false };
        let index = self.checker.on_submit(now, log, dst_inc, id, msg);
        if self.crashed_at.is_some() && !self.up(dst) {
            self.wait_start.entry((src, dst)).or_insert(now);
        }
        Ok(index)
    }

    fn submit_replies(&mut self, now: Instant) {
        for due in std::mem::take(&mut self.checker.replies_due) {
            if !self.up(due.from) {
                continue;
            }
            let len = self.rng.range(0, 200) as usize;
            match self.submit_one(now, due.from, due.to, len, false) {
                Ok(index) => {
                    let log = self.log(due.from, due.to);
                    self.checker.on_reply_submitted(due.answers, (log, index));
                }
                Err(SubmitError::PeerDead) => {}
                Err(e) => self.error(format!("reply submit {}->{} failed: {e}", due.from, due.to)),
            }
        }
    }

    fn submit_due(&mut self, now: Instant) {
        let permanent_crash = self.sc.crash.as_ref().filter(|c| c.restart_after.is_none()).map(|c| c.node);
        for src in 0..self.n {
            for dst in 0..self.n {
                let slot = (src * self.n + dst) as usize;
                while let Some(&item) = self.plans[slot].front() {
                    let Some(ep) = self.nodes[src as usize].ep.as_ref() else {
                        break;
                    };
                    if item.at > now || ep.queued_bytes(dst) >= self.sc.workload.queue_limit {
                        break;
                    }
                    match self.submit_one(now, src, dst, item.len, item.wants_reply) {
                        Ok(_) => {
                            self.plans[slot].pop_front();
                        }
                        Err(SubmitError::PeerDead) if permanent_crash == Some(dst) => self.plans[slot].clear(),
                        Err(SubmitError::PeerDead) if self.sc.crash.is_some() => break,
                        Err(e) => {
                            self.error(format!("submit {src}->{dst} failed: {e}"));
                            self.plans[slot].clear();
                        }
                    }
                }
            }
        }
    }

    fn transmit_all(&mut self, now: Instant) {
        for src in 0..self.n {
            let mut count = 0;
            while let Some(t) = self.nodes[src as usize].ep.as_mut().and_then(|ep| ep.poll_transmit(now, &mut self.buf))
            {
                count += 1;
                if count > MAX_BURST {
                    return self.error(format!("node {src}: poll_transmit never returns None"));
                }
                let packet = &self.buf[..t.len];
                if self.sc.trace {
                    match HeaderRepr::parse_packet(packet) {
                        Ok((h, _)) => println!("{now:?} send {h}"),
                        Err(e) => println!("{now:?} send UNPARSEABLE {e:?}"),
                    }
                }
                self.net.send(&mut self.rng, src, t.peer, packet);
                if self.rng.chance(self.sc.garbage) {
                    self.inject_garbage(now, src, t.peer, t.len);
                }
            }
        }
    }

    fn inject_garbage(&mut self, now: Instant, src: u32, dst: u32, len: usize) {
        let checksum = self.sc.config.checksum;
        let mut bad = self.buf[..len].to_vec();
        let e = &mut self.expected[dst as usize];
        match self.rng.range(0, 9) {
            0 => {
                let cut = self.rng.range(0, len as u64 - 1) as usize;
                bad.truncate(cut);
                if checksum && cut >= HEADER_LEN {
                    e.bad_checksum += 1; // checked before the header's length
                } else {
                    e.truncated += 1;
                }
            }
            1 => {
                let n = self.rng.range(0, 100) as usize;
                bad = (0..n).map(|_| self.rng.next_u64() as u8).collect();
                if let Some(b) = bad.first_mut() {
                    *b = 0; // never the magic
                }
                if n < HEADER_LEN {
                    e.truncated += 1;
                } else {
                    e.bad_magic += 1;
                }
            }
            2 => {
                bad[2] = 99; // version
                e.bad_version += 1;
            }
            7 if len == self.sc.config.max_datagram => {
                bad.push(0); // one byte past the longest datagram
                e.oversized += 1;
            }
            3 => {
                bad[8] ^= 0x5a;
                e.wrong_job += 1;
            }
            4 => {
                bad[20..24].copy_from_slice(&(dst + 1 + self.rng.range(0, 10) as u32).to_le_bytes());
                e.wrong_target += 1;
            }
            5 => {
                let who = if self.rng.chance(0.5) { dst } else { self.n + self.rng.range(0, 100) as u32 };
                bad[16..20].copy_from_slice(&who.to_le_bytes());
                e.unknown_peer += 1;
            }
            6 => {
                // Longer than any rank of the job sends.
                bad.resize(self.sc.config.max_datagram + 1 + self.rng.range(0, 100) as usize, 0xee);
                e.oversized += 1;
            }
            7 => {
                // Bytes after the announced packet (the trailer moves, if any).
                if checksum {
                    bad.truncate(len - mw_wire::CHECKSUM_LEN);
                    bad.push(0);
                    bad.extend_from_slice(&[0; mw_wire::CHECKSUM_LEN]);
                } else {
                    bad.push(0);
                }
                e.bad_length += 1;
            }
            8 if checksum => {
                // Corruption on the way that the UDP checksum missed: any
                // byte past magic and version, any nonzero change.
                let at = self.rng.range(3, len as u64 - 1) as usize;
                bad[at] ^= self.rng.range(1, 255) as u8;
                e.bad_checksum += 1;
                let at = now + self.sc.link.delay;
                return self.net.inject(at, src, dst, bad);
            }
            _ => {
                let mine = self.nodes[dst as usize].epochs.clone();
                bad[28..32].copy_from_slice(&new_epoch(&mut self.rng, &mine).to_le_bytes());
                e.stale_epoch += 1;
            }
        }
        let rewritten_header = bad.len() == len && bad != self.buf[..len];
        if checksum && (rewritten_header || bad.len() == len + 1) && bad.len() > HEADER_LEN {
            reseal(&mut bad);
        }
        let at = now + self.sc.link.delay;
        self.net.inject(at, src, dst, bad);
    }

    fn all_resolved(&self) -> bool {
        let pending_plan =
            self.plans.iter().enumerate().any(|(slot, p)| !p.is_empty() && self.up(slot as u32 / self.n));
        if pending_plan || !self.checker.replies_due.is_empty() {
            return false;
        }
        if self.sc.crash.as_ref().is_some_and(|c| c.restart_after.is_some()) && !self.restarted {
            return false;
        }
        self.checker.logs().all(|log @ (src, inc, _)| {
            !self.up(src) || self.nodes[src as usize].inc != inc || self.checker.unresolved(log) == 0
        })
    }

    fn all_quiescent(&self) -> bool {
        self.nodes.iter().all(|n| n.ep.as_ref().is_none_or(Endpoint::is_quiescent))
    }

    fn next_time(&self) -> Option<Instant> {
        let now = self.net.now();
        let mut next = self.net.next_arrival();
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for node in &self.nodes {
            consider(node.ep.as_ref().and_then(Endpoint::poll_timeout));
        }
        for (slot, plan) in self.plans.iter().enumerate() {
            if self.up(slot as u32 / self.n) {
                consider(plan.front().map(|i| i.at).filter(|&at| at > now));
            }
        }
        if let Some(c) = &self.sc.crash {
            match self.crashed_at {
                None => consider(Some(Instant::ZERO + c.at)),
                Some(t) if !self.restarted => consider(c.restart_after.map(|a| t + a)),
                _ => {}
            }
        }
        next
    }

    fn dump(&self) -> String {
        let mut s = String::new();
        let _ =
            writeln!(s, "  at {:?}; network {:?}, {} in flight", self.net.now(), self.net.stats, self.net.in_flight());
        for (rank, node) in self.nodes.iter().enumerate() {
            let Some(ep) = &node.ep else {
                let _ = writeln!(s, "  node {rank}: down");
                continue;
            };
            let _ = writeln!(s, "  node {rank} (inc {}, epoch {:#x}): {:?}", node.inc, ep.epoch(), ep.stats());
            for peer in 0..self.n {
                if let Some(ps) = ep.peer_stats(peer) {
                    let log = self.log(rank as u32, peer);
                    let unresolved = self.checker.unresolved(log);
                    let plan = self.plans[rank * self.n as usize + peer as usize].len();
                    let _ = writeln!(s, "    -> {peer}: unresolved {unresolved}, planned {plan}, {ps:?}");
                }
            }
        }
        s
    }

    fn report(&self) -> Report {
        let mut errors = self.checker.errors.clone();
        if errors.is_empty() {
            self.final_checks(&mut errors);
        }
        let failed = self.checker.logs().map(|log| self.checker.failed(log)).sum();
        Report {
            family: self.sc.family.clone(),
            seed: self.sc.seed,
            dump: if errors.is_empty() { String::new() } else { self.dump() },
            errors,
            completed_at: self.completed_at,
            ended_at: self.net.now(),
            delivered: self.checker.delivered,
            delivered_bytes: self.checker.delivered_bytes,
            failed,
            stats: self.nodes.iter().map(|n| n.ep.as_ref().map(|ep| ep.stats().clone()).unwrap_or_default()).collect(),
            net: self.net.stats.clone(),
            dead_events: self.dead_events.clone(),
        }
    }

    fn final_checks(&self, errors: &mut Vec<String>) {
        if let Some(crash) = &self.sc.crash {
            let x = crash.node;
            if crash.restart_after.is_some() {
                let x_inc = self.nodes[x as usize].inc;
                for &a in &self.restart_seen {
                    if self.checker.delivered_to(self.log(a, x), x_inc) == 0 {
                        errors.push(format!("node {a} never got a message through to the restarted node {x}"));
                    }
                }
            }
            return;
        }
        for (rank, node) in self.nodes.iter().enumerate() {
            let Some(ep) = &node.ep else { continue };
            let d = &ep.stats().drops;
            let got = Expected::from_drops(d);
            if d.malformed + d.unknown_type + d.oversized_message + d.bad_mac != 0 {
                errors.push(format!("node {rank}: drops no garbage kind explains: {d}"));
            }
            if got != self.expected[rank] {
                errors.push(format!("node {rank}: drop counters {got:?}, injected {:?}", self.expected[rank]));
            }
        }
    }
}
