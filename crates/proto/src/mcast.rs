//! Reliable one-to-many transfers over an unreliable multicast group, as
//! two sans-IO state machines: the root's [`McastSender`] and each member's
//! [`McastReceiver`].
//!
//! Owns: cutting a transfer into segments ([`McastConfig::segments`]), which
//! segment goes where next (the group, or one member as a repair), the
//! window that keeps the root from overrunning the slowest member, loss
//! detection at the member (gaps, silence) and its feedback: progress
//! reports, Nacks listing the missing segments, and the final "done".
//!
//! Must not: do I/O, read a clock, build packets or touch memory. The caller
//! (`mw-core`'s multicast engine in production, `mw-sim` in tests) moves
//! segments as `Mcast` packets (built and checked by
//! [`Endpoint::encode_mcast`](crate::Endpoint::encode_mcast) and
//! [`Endpoint::accept_mcast`](crate::Endpoint::accept_mcast)) and carries
//! feedback to the root over the *reliable* path, so feedback is never lost:
//! the only losses this module repairs are of segments.
//!
//! # The protocol
//!
//! Seed 004's receiver-driven rules (PM/UDP R4: a receiver that sees a gap
//! asks for exactly what is missing), carried over to one sender and many
//! receivers, as in NORM (RFC 5740) and PGM (RFC 3208):
//!
//! * The root sends segment `i` once to the group, in order, as long as
//!   `i < min(contig of the members not done) + window`.
//! * A member marks each segment it gets; `contig` is the first one it
//!   lacks. It reports `contig` every `report_every` segments (the root's
//!   window moves with the slowest member).
//! * A hole below the highest segment seen, still open after `gap_delay`
//!   (reordering is tolerated that long), is Nacked; so is everything
//!   missing, tail included, after `idle_nack` of silence (the last segments
//!   may all be lost, leaving no gap to see). Nacks are repeated with
//!   exponential backoff up to `max_nack_interval` while holes stay open.
//! * The root answers a Nack with repairs: a segment wanted by two members
//!   or more is multicast again (once), one wanted by a single member, or
//!   asked for again after its group repair, goes to each asker by unicast. Once the group is known not to work ([`McastSender::group_failed`])
//!   everything, new segments included, goes by unicast to each member.
//! * A member holding everything says "done" once; the transfer completes
//!   at the root when every member has. Segment `i` arriving twice is
//!   harmless (the member keeps the first copy).
//!
//! A Nack is never answered with a segment the root has not sent yet (it
//! will come anyway), so a member that Nacks early — before the root even
//! started — costs only a small message.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::time::{Duration, Instant};

/// Tuning of a multicast transfer; the same on the root and every member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McastConfig {
    /// Payload bytes per segment (every segment but the last is this long).
    pub segment_size: usize,
    /// Segments the root may send beyond the slowest member's `contig`.
    /// Bounded by the members' socket buffers: a window of segments must fit.
    pub window: u32,
    /// A member reports its progress every this many newly contiguous
    /// segments (at most `window`, or the root would wait forever).
    pub report_every: u32,
    /// How long a gap may stay open before it is Nacked (reordering tolerance).
    pub gap_delay: Duration,
    /// Silence after which a member Nacks everything it misses.
    pub idle_nack: Duration,
    /// How long a member waits for the repair of a Nacked hole before it
    /// Nacks it again (doubling each time).
    pub repair_wait: Duration,
    /// Ceiling of the backoff of repeated Nacks.
    pub max_nack_interval: Duration,
    /// Most missing ranges one Nack lists.
    pub max_ranges: usize,
}

impl McastConfig {
    /// A configuration for `segment_size`-byte segments and a window of
    /// about `window_bytes`, with timers suited to a LAN or one host.
    pub fn new(segment_size: usize, window_bytes: usize) -> McastConfig {
        let segment_size = segment_size.max(1);
        let window = (window_bytes / segment_size).clamp(4, 1 << 16) as u32;
        McastConfig {
            segment_size,
            window,
            report_every: (window / 4).max(1),
            gap_delay: Duration::from_micros(200),
            idle_nack: Duration::from_millis(2),
            repair_wait: Duration::from_millis(1),
            max_nack_interval: Duration::from_millis(20),
            max_ranges: mw_wire::op::MCAST_RANGES_MAX,
        }
    }

    /// Segments of a `total`-byte transfer: at least one (an empty transfer
    /// is one empty segment, so that it too is confirmed); `None` if there
    /// would be more than `u32::MAX`.
    pub fn segments(&self, total: u64) -> Option<u32> {
        let n = total.div_ceil(self.segment_size as u64).max(1);
        u32::try_from(n).ok()
    }

    /// Offset and length of segment `index` of a `total`-byte transfer
    /// (the index must be below [`segments`](Self::segments)).
    pub fn segment_range(&self, total: u64, index: u32) -> (u64, usize) {
        let start = u64::from(index) * self.segment_size as u64;
        let len = total.saturating_sub(start).min(self.segment_size as u64);
        (start, len as usize)
    }

    fn is_valid(&self) -> bool {
        self.segment_size > 0
            && self.window > 0
            && (1..=self.window).contains(&self.report_every)
            && self.max_ranges > 0
            && self.repair_wait > Duration::ZERO
            && self.idle_nack > Duration::ZERO
    }
}

/// A member's report to the root (carried by `McastFeedback` on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Feedback {
    /// Every segment below this index has arrived.
    pub contig: u32,
    /// The member holds the whole transfer.
    pub done: bool,
    /// Missing segment ranges `(start, end)`, ascending, at or above `contig`.
    pub missing: Vec<(u32, u32)>,
}

/// Where the root sends a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McastDest {
    /// The multicast group.
    Group,
    /// One member, by its index among the transfer's members (a repair, or
    /// every send once the group has failed).
    Member(u32),
}

/// One segment to send, from [`McastSender::poll_send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McastSend {
    /// The segment's index.
    pub segment: u32,
    /// Where it goes.
    pub dest: McastDest,
}

/// Counters of one transfer at the root.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Segments sent for the first time.
    pub new_segments: u64,
    /// Segments sent to the group (first sends and repairs).
    pub group_sends: u64,
    /// Segments sent to one member (repairs, or every send after a group failure).
    pub unicast_sends: u64,
    /// Of the group sends, repairs.
    pub group_repairs: u64,
    /// Of the unicast sends, repairs.
    pub unicast_repairs: u64,
    /// Feedback messages listing missing segments.
    pub nacks: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct MemberTx {
    contig: u32,
    done: bool,
}

/// The root's side of one transfer to `members` members.
///
/// Call order: [`poll_send`](Self::poll_send) until `None` after creating it
/// and after every [`handle_feedback`](Self::handle_feedback) or
/// [`group_failed`](Self::group_failed); done when
/// [`is_complete`](Self::is_complete). It has no timers: members drive
/// recovery with theirs.
#[derive(Debug)]
pub struct McastSender {
    cfg: McastConfig,
    segments: u32,
    next_new: u32,
    group_ok: bool,
    /// Probe transfers test the group itself: never repair by unicast.
    group_only: bool,
    members: Vec<MemberTx>,
    done: u32,
    /// Smallest `contig` over members not done (`segments` when all are).
    min_contig: u32,
    /// Segment → members that asked for it (each listed once).
    repairs: BTreeMap<u32, Vec<u32>>,
    /// Segments already repaired through the group once: asked for again,
    /// they go by unicast (a group that silently loses everything must not
    /// be retried forever).
    group_repaired: BTreeSet<u32>,
    /// Unicast sends already decided, waiting for `poll_send`.
    fanout: VecDeque<McastSend>,
    stats: SenderStats,
}

impl McastSender {
    /// A transfer of `segments` segments to `members` members.
    ///
    /// # Panics
    /// If `cfg` is inconsistent (zero sizes, `report_every` above `window`)
    /// or `segments` is 0.
    pub fn new(cfg: McastConfig, segments: u32, members: u32) -> McastSender {
        assert!(cfg.is_valid(), "invalid multicast config {cfg:?}");
        assert!(segments > 0, "a transfer has at least one segment");
        let mut sender = McastSender {
            cfg,
            segments,
            next_new: 0,
            group_ok: true,
            group_only: false,
            members: vec![MemberTx::default(); members as usize],
            done: 0,
            min_contig: 0,
            repairs: BTreeMap::new(),
            group_repaired: BTreeSet::new(),
            fanout: VecDeque::new(),
            stats: SenderStats::default(),
        };
        sender.refresh_min();
        sender
    }

    /// Repairs go to the group only, never by unicast: for a transfer whose
    /// point is to find out whether the group works.
    pub fn set_group_only(&mut self) {
        self.group_only = true;
    }

    /// Segments in the transfer.
    pub fn segments(&self) -> u32 {
        self.segments
    }

    /// The next segment to send, if the window and the repair queue allow one.
    #[must_use]
    pub fn poll_send(&mut self) -> Option<McastSend> {
        loop {
            if let Some(send) = self.fanout.pop_front() {
                return Some(send);
            }
            if let Some((segment, askers)) = self.repairs.pop_first() {
                let needy: Vec<u32> = askers
                    .into_iter()
                    .filter(|&m| {
                        let member = self.members[m as usize];
                        !member.done && member.contig <= segment
                    })
                    .collect();
                if needy.is_empty() {
                    continue;
                }
                let first_repair = self.group_repaired.insert(segment);
                if self.group_ok && (self.group_only || (needy.len() >= 2 && first_repair)) {
                    self.stats.group_sends += 1;
                    self.stats.group_repairs += 1;
                    return Some(McastSend { segment, dest: McastDest::Group });
                }
                if self.group_only {
                    continue; // the group failed: a probe has nothing else to try
                }
                self.stats.unicast_repairs += needy.len() as u64;
                self.queue_unicast(segment, needy.into_iter());
                continue;
            }
            let limit = self.min_contig.saturating_add(self.cfg.window).min(self.segments);
            if self.next_new >= limit {
                return None;
            }
            let segment = self.next_new;
            self.next_new += 1;
            self.stats.new_segments += 1;
            if self.group_ok {
                self.stats.group_sends += 1;
                return Some(McastSend { segment, dest: McastDest::Group });
            }
            if self.group_only {
                continue;
            }
            let waiting: Vec<u32> =
                (0..self.members.len() as u32).filter(|&m| !self.members[m as usize].done).collect();
            self.queue_unicast(segment, waiting.into_iter());
        }
    }

    fn queue_unicast(&mut self, segment: u32, members: impl Iterator<Item = u32>) {
        for m in members {
            self.stats.unicast_sends += 1;
            self.fanout.push_back(McastSend { segment, dest: McastDest::Member(m) });
        }
    }

    /// Feedback from member `member`: its `contig`, whether it is `done`, and
    /// the `(start, end)` ranges it misses. Unknown members are ignored.
    pub fn handle_feedback(
        &mut self,
        member: u32,
        contig: u32,
        done: bool,
        missing: impl IntoIterator<Item = (u32, u32)>,
    ) {
        let segments = self.segments;
        let Some(m) = self.members.get_mut(member as usize) else {
            return;
        };
        if m.done {
            return;
        }
        if done {
            m.done = true;
            m.contig = segments;
            self.done += 1;
            self.refresh_min();
            return;
        }
        let contig = contig.min(segments);
        if contig > m.contig {
            m.contig = contig;
            self.refresh_min();
        }
        let from = self.members[member as usize].contig;
        let mut nack = false;
        for (start, end) in missing {
            nack = true;
            // Only what was sent already: the rest is on its way.
            for segment in start.max(from)..end.min(self.next_new) {
                let askers = self.repairs.entry(segment).or_default();
                if !askers.contains(&member) {
                    askers.push(member);
                }
            }
        }
        if nack {
            self.stats.nacks += 1;
        }
    }

    /// Sending to the group failed for good (no route, not permitted): from
    /// now on every segment, new or repaired, goes to each member by unicast.
    pub fn group_failed(&mut self) {
        self.group_ok = false;
    }

    /// Sends once more, to the group, every segment already sent that some
    /// member not done still lacks (by its reported `contig`), ahead of new
    /// segments. For a probe, whose root repeats it on its own timer: a probe
    /// asks whether the group reaches everyone, and the answer must not hang
    /// on a Nack (reliable, but late under loss). Nothing if the group failed.
    pub fn repeat_to_group(&mut self) {
        if !self.group_ok {
            return;
        }
        for segment in 0..self.next_new {
            let lacking = self.members.iter().any(|m| !m.done && m.contig <= segment);
            if lacking {
                self.stats.group_sends += 1;
                self.stats.group_repairs += 1;
                self.fanout.push_back(McastSend { segment, dest: McastDest::Group });
            }
        }
    }

    /// Members that reported done.
    pub fn members_done(&self) -> u32 {
        self.done
    }

    /// Whether the group is still used.
    pub fn group_ok(&self) -> bool {
        self.group_ok
    }

    /// Every member holds the whole transfer.
    pub fn is_complete(&self) -> bool {
        self.done as usize == self.members.len()
    }

    /// Whether member `member` reported done.
    pub fn member_done(&self, member: u32) -> bool {
        self.members.get(member as usize).is_some_and(|m| m.done)
    }

    /// Counters so far.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    fn refresh_min(&mut self) {
        self.min_contig =
            self.members.iter().filter(|m| !m.done).map(|m| m.contig).min().unwrap_or(self.segments).min(self.segments);
    }
}

/// What [`McastReceiver::handle_segment`] made of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// First copy: the caller stores its bytes.
    New,
    /// Already held: the caller drops it.
    Duplicate,
    /// Not a segment of this transfer.
    Invalid,
}

/// Counters of one transfer at a member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Segments first received from the group.
    pub via_group: u32,
    /// Segments first received by unicast (repairs).
    pub via_unicast: u32,
    /// Copies of segments already held.
    pub duplicates: u64,
    /// Nacks sent.
    pub nacks: u64,
    /// Progress reports sent (Nacks and "done" not included).
    pub reports: u64,
}

/// A member's side of one transfer.
///
/// Call order: [`handle_segment`](Self::handle_segment) for every segment
/// that arrives; then [`poll_feedback`](Self::poll_feedback) until `None`,
/// sending each to the root reliably; sleep until
/// [`poll_timeout`](Self::poll_timeout) (or the next segment) and poll again.
#[derive(Debug)]
pub struct McastReceiver {
    cfg: McastConfig,
    segments: u32,
    have: Vec<u64>,
    received: u32,
    contig: u32,
    /// One past the highest segment received (0: none yet).
    upto: u32,
    last_activity: Instant,
    idle_wait: Duration,
    /// Since when a hole at or above `nacked_upto` has been open.
    gap_since: Option<Instant>,
    /// Holes below this were Nacked at `last_nack`.
    nacked_upto: u32,
    last_nack: Option<Instant>,
    nack_interval: Duration,
    reported_contig: u32,
    done_reported: bool,
    stats: ReceiverStats,
}

impl McastReceiver {
    /// Expects a transfer of `segments` segments from now on.
    ///
    /// # Panics
    /// If `cfg` is inconsistent or `segments` is 0.
    pub fn new(cfg: McastConfig, segments: u32, now: Instant) -> McastReceiver {
        assert!(cfg.is_valid(), "invalid multicast config {cfg:?}");
        assert!(segments > 0, "a transfer has at least one segment");
        McastReceiver {
            idle_wait: cfg.idle_nack,
            nack_interval: cfg.repair_wait,
            cfg,
            segments,
            have: vec![0; (segments as usize).div_ceil(64)],
            received: 0,
            contig: 0,
            upto: 0,
            last_activity: now,
            gap_since: None,
            nacked_upto: 0,
            last_nack: None,
            reported_contig: 0,
            done_reported: false,
            stats: ReceiverStats::default(),
        }
    }

    fn has(&self, index: u32) -> bool {
        self.have[index as usize / 64] & (1 << (index % 64)) != 0
    }

    /// Segment `index` arrived (from the group when `via_group`, else by
    /// unicast). O(1) amortized.
    pub fn handle_segment(&mut self, now: Instant, index: u32, via_group: bool) -> Arrival {
        if index >= self.segments {
            return Arrival::Invalid;
        }
        if self.has(index) {
            self.stats.duplicates += 1;
            return Arrival::Duplicate;
        }
        self.have[index as usize / 64] |= 1 << (index % 64);
        self.received += 1;
        if via_group {
            self.stats.via_group += 1;
        } else {
            self.stats.via_unicast += 1;
        }
        // Segments between the old highest and this one are missing: a new
        // hole, unless it lies below what was Nacked already.
        let fresh_from = self.upto.max(self.nacked_upto).max(self.contig);
        if index > fresh_from && self.gap_since.is_none() {
            self.gap_since = Some(now);
        }
        self.upto = self.upto.max(index + 1);
        while self.contig < self.segments && self.has(self.contig) {
            self.contig += 1;
        }
        if self.contig >= self.nacked_upto {
            // Every Nacked hole was filled: the next Nack starts patient again.
            self.nack_interval = self.cfg.repair_wait;
        }
        if self.contig >= self.upto {
            self.gap_since = None; // no hole left below the highest segment
        }
        self.last_activity = now;
        self.idle_wait = self.cfg.idle_nack;
        Arrival::New
    }

    /// Every segment has arrived.
    pub fn is_complete(&self) -> bool {
        self.received == self.segments
    }

    /// Whether the final "done" has been handed out by `poll_feedback`.
    pub fn done_reported(&self) -> bool {
        self.done_reported
    }

    /// Segments held below this index: all of them.
    pub fn contig(&self) -> u32 {
        self.contig
    }

    /// Counters so far.
    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }

    /// The next report for the root, if one is due at `now`: "done" once
    /// complete; a Nack when a hole is old enough, a Nacked hole was not
    /// repaired in time, or nothing arrived for a while; else a progress
    /// report every `report_every` segments.
    #[must_use]
    pub fn poll_feedback(&mut self, now: Instant) -> Option<Feedback> {
        if self.done_reported {
            return None;
        }
        if self.is_complete() {
            self.done_reported = true;
            return Some(Feedback { contig: self.segments, done: true, missing: Vec::new() });
        }
        let due_gap = self.gap_since.is_some_and(|t| now >= t + self.cfg.gap_delay);
        let due_retry = self.contig < self.nacked_upto && self.last_nack.is_some_and(|t| now >= t + self.nack_interval);
        let due_idle = now >= self.last_activity + self.idle_wait;
        if due_gap || due_retry || due_idle {
            // Silence: the tail may be lost as a whole. Otherwise the holes
            // seen, and a tail Nacked before and still missing.
            let end = if due_idle { self.segments } else { self.upto.max(self.nacked_upto) };
            let missing = self.missing_ranges(end);
            if due_idle {
                self.last_activity = now;
                self.idle_wait = (self.idle_wait * 2).min(self.cfg.max_nack_interval);
            }
            if due_retry {
                self.nack_interval = (self.nack_interval * 2).min(self.cfg.max_nack_interval);
            }
            self.gap_since = None;
            self.last_nack = Some(now);
            self.nacked_upto = missing.last().map_or(self.upto, |r| r.1).max(self.nacked_upto);
            if !missing.is_empty() {
                self.stats.nacks += 1;
                self.reported_contig = self.contig;
                return Some(Feedback { contig: self.contig, done: false, missing });
            }
        }
        if self.contig >= self.reported_contig.saturating_add(self.cfg.report_every) {
            self.reported_contig = self.contig;
            self.stats.reports += 1;
            return Some(Feedback { contig: self.contig, done: false, missing: Vec::new() });
        }
        None
    }

    /// Missing ranges in `contig..end`, at most `max_ranges` of them.
    /// Everything from `upto` on is missing, so that part is one range.
    fn missing_ranges(&self, end: u32) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = Vec::new();
        let seen_end = self.upto.min(end);
        let mut index = self.contig;
        while index < seen_end && out.len() < self.cfg.max_ranges {
            if self.has(index) {
                index += 1;
                continue;
            }
            let start = index;
            while index < seen_end && !self.has(index) {
                index += 1;
            }
            out.push((start, index));
        }
        let tail_start = self.upto.max(self.contig);
        if end > tail_start {
            let room = out.len() < self.cfg.max_ranges;
            match out.last_mut() {
                Some(last) if last.1 == tail_start => last.1 = end,
                _ if room => out.push((tail_start, end)),
                _ => {}
            }
        }
        out
    }

    /// When [`poll_feedback`](Self::poll_feedback) should be called again
    /// even if no segment arrives; `None` once "done" was reported.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.done_reported {
            return None;
        }
        if self.is_complete() {
            return Some(self.last_activity);
        }
        let mut due = self.last_activity + self.idle_wait;
        if let Some(t) = self.gap_since {
            due = due.min(t + self.cfg.gap_delay);
        }
        if let (true, Some(t)) = (self.contig < self.nacked_upto, self.last_nack) {
            due = due.min(t + self.nack_interval);
        }
        Some(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> McastConfig {
        McastConfig { report_every: 2, ..McastConfig::new(100, 400) }
    }

    fn at(micros: u64) -> Instant {
        Instant::from_nanos(micros * 1000)
    }

    #[test]
    fn segments_cover_the_transfer() {
        let c = cfg();
        assert_eq!(c.segments(0), Some(1));
        assert_eq!(c.segment_range(0, 0), (0, 0));
        assert_eq!(c.segments(100), Some(1));
        assert_eq!(c.segments(101), Some(2));
        assert_eq!(c.segment_range(101, 1), (100, 1));
        assert_eq!(McastConfig::new(1, 4).segments(u64::MAX), None);
        assert_eq!(c.window, 4);
    }

    #[test]
    fn window_follows_the_slowest_member() {
        let mut tx = McastSender::new(cfg(), 10, 2);
        let sent: Vec<_> = std::iter::from_fn(|| tx.poll_send()).collect();
        assert_eq!(sent.len(), 4, "window of 4");
        assert!(sent.iter().all(|s| s.dest == McastDest::Group));
        tx.handle_feedback(0, 4, false, []);
        assert_eq!(tx.poll_send(), None, "member 1 still at 0");
        tx.handle_feedback(1, 2, false, []);
        assert_eq!(tx.poll_send().map(|s| s.segment), Some(4));
        assert_eq!(tx.poll_send().map(|s| s.segment), Some(5));
        assert_eq!(tx.poll_send(), None);
    }

    #[test]
    fn repairs_are_unicast_for_one_member_and_multicast_for_several() {
        let mut tx = McastSender::new(cfg(), 4, 3);
        while tx.poll_send().is_some() {}
        tx.handle_feedback(0, 1, false, [(1, 2)]);
        tx.handle_feedback(1, 1, false, [(1, 3), (5, 9)]);
        tx.handle_feedback(2, 0, false, [(0, 1), (3, 4)]);
        let sends: Vec<_> = std::iter::from_fn(|| tx.poll_send()).collect();
        assert_eq!(
            sends,
            vec![
                McastSend { segment: 0, dest: McastDest::Member(2) },
                McastSend { segment: 1, dest: McastDest::Group },
                McastSend { segment: 2, dest: McastDest::Member(1) },
                McastSend { segment: 3, dest: McastDest::Member(2) },
            ]
        );
        assert_eq!(tx.stats().nacks, 3);
        tx.handle_feedback(0, 4, true, []);
        tx.handle_feedback(1, 4, true, []);
        assert!(!tx.is_complete());
        tx.handle_feedback(2, 4, true, []);
        assert!(tx.is_complete());
        tx.handle_feedback(2, 0, false, [(0, 4)]);
        assert_eq!(tx.poll_send(), None, "a done member asks for nothing");
    }

    #[test]
    fn a_repeat_resends_to_the_group_only_what_a_member_still_lacks() {
        let mut tx = McastSender::new(cfg(), 3, 3);
        tx.set_group_only();
        assert_eq!(tx.poll_send(), Some(McastSend { segment: 0, dest: McastDest::Group }));
        tx.repeat_to_group();
        assert_eq!(tx.poll_send(), Some(McastSend { segment: 0, dest: McastDest::Group }), "sent, nobody has it");
        let sends: Vec<_> = std::iter::from_fn(|| tx.poll_send()).collect();
        assert_eq!(sends.iter().map(|s| s.segment).collect::<Vec<_>>(), vec![1, 2], "then the new ones");
        tx.handle_feedback(0, 3, true, []);
        tx.handle_feedback(1, 2, false, []);
        assert_eq!(tx.members_done(), 1);
        tx.repeat_to_group();
        let sends: Vec<_> = std::iter::from_fn(|| tx.poll_send()).collect();
        assert_eq!(
            sends.iter().map(|s| s.segment).collect::<Vec<_>>(),
            vec![0, 1, 2],
            "member 2 reported nothing: it may lack every segment"
        );
        assert!(sends.iter().all(|s| s.dest == McastDest::Group));
        tx.handle_feedback(2, 2, false, []);
        tx.repeat_to_group();
        let sends: Vec<_> = std::iter::from_fn(|| tx.poll_send()).collect();
        assert_eq!(sends, vec![McastSend { segment: 2, dest: McastDest::Group }], "only what 1 and 2 lack");
        tx.group_failed();
        tx.repeat_to_group();
        assert_eq!(tx.poll_send(), None, "never once the group failed");
        assert_eq!(tx.stats().group_repairs, 5);
    }

    #[test]
    fn a_failed_group_turns_every_send_into_unicast() {
        let mut tx = McastSender::new(cfg(), 2, 2);
        assert_eq!(tx.poll_send(), Some(McastSend { segment: 0, dest: McastDest::Group }));
        tx.group_failed();
        tx.handle_feedback(1, 0, false, [(0, 2)]);
        let sends: Vec<_> = std::iter::from_fn(|| tx.poll_send()).collect();
        assert_eq!(
            sends,
            vec![
                McastSend { segment: 0, dest: McastDest::Member(1) },
                McastSend { segment: 1, dest: McastDest::Member(0) },
                McastSend { segment: 1, dest: McastDest::Member(1) },
            ]
        );
    }

    #[test]
    fn gaps_are_nacked_after_the_reorder_delay() {
        let c = cfg();
        let mut rx = McastReceiver::new(c.clone(), 6, at(0));
        assert_eq!(rx.handle_segment(at(10), 0, true), Arrival::New);
        assert_eq!(rx.handle_segment(at(11), 2, true), Arrival::New);
        assert_eq!(rx.poll_feedback(at(12)), None, "within the reorder tolerance");
        assert_eq!(rx.poll_timeout(), Some(at(11) + c.gap_delay));
        let nack = rx.poll_feedback(at(11) + c.gap_delay).unwrap();
        assert_eq!(nack, Feedback { contig: 1, done: false, missing: vec![(1, 2)] });
        assert_eq!(rx.handle_segment(at(300), 2, true), Arrival::Duplicate);
        // Not repaired within repair_wait: asked again.
        let retry = at(211) + c.repair_wait;
        assert_eq!(rx.poll_timeout(), Some(retry));
        assert_eq!(rx.poll_feedback(retry).unwrap().missing, vec![(1, 2)]);
        assert_eq!(rx.handle_segment(retry, 1, false), Arrival::New);
        assert_eq!(rx.contig(), 3);
        assert_eq!(rx.poll_feedback(retry), Some(Feedback { contig: 3, done: false, missing: vec![] }), "progress");
        assert_eq!(rx.poll_feedback(retry), None);
        for i in 3..6 {
            rx.handle_segment(retry, i, true);
        }
        assert_eq!(rx.poll_feedback(retry), Some(Feedback { contig: 6, done: true, missing: vec![] }));
        assert_eq!(rx.poll_feedback(retry), None);
        assert_eq!(rx.poll_timeout(), None);
        assert_eq!(rx.stats().via_unicast, 1);
        assert_eq!(rx.handle_segment(retry, 6, true), Arrival::Invalid);
    }

    #[test]
    fn silence_nacks_the_tail_with_backoff() {
        let c = cfg();
        let mut rx = McastReceiver::new(c.clone(), 5, at(0));
        rx.handle_segment(at(1), 0, true);
        rx.handle_segment(at(1), 1, true);
        assert_eq!(rx.poll_feedback(at(1)).map(|f| f.contig), Some(2), "progress report");
        let first = at(1) + c.idle_nack;
        assert_eq!(rx.poll_timeout(), Some(first));
        assert_eq!(rx.poll_feedback(first).unwrap().missing, vec![(2, 5)]);
        assert_eq!(rx.poll_timeout(), Some(first + c.repair_wait), "retry before the doubled idle wait");
        let second = first + c.repair_wait;
        assert_eq!(rx.poll_feedback(second).unwrap().missing, vec![(2, 5)]);
        assert_eq!(rx.poll_timeout(), Some(second + c.repair_wait * 2));
        assert_eq!(rx.stats().nacks, 2);
    }

    #[test]
    fn nothing_received_is_nacked_whole() {
        let c = cfg();
        let mut rx = McastReceiver::new(c.clone(), 3, at(0));
        assert_eq!(rx.poll_feedback(at(5)), None);
        let nack = rx.poll_feedback(at(0) + c.idle_nack).unwrap();
        assert_eq!(nack.missing, vec![(0, 3)]);
    }
}
