//! The invariant checker: what every scenario must satisfy.
//!
//! Owns: the log of every message submitted on every (sender incarnation,
//! receiver) pair, and the checks made as things happen: each delivery is the
//! next message of its pair, byte-exact, exactly once; each `Acked` is
//! monotone and covers only delivered messages whose replies (if any) were
//! already delivered back (causal completion); each failure report covers
//! only unacked messages; at the end every message is acked or failed.
//!
//! Must not: drive the simulation; it only observes and judges.

use crate::rng::splitmix64;
use mw_proto::time::Instant;
use mw_proto::{Event, MsgId};
use std::collections::HashMap;

/// Identifies a message log: (sender node, sender incarnation, receiver node).
pub type LogKey = (u32, u32, u32);

/// One submitted message, remembered by the recipe of its bytes.
#[derive(Debug, Clone)]
pub struct SentMsg {
    /// Length in bytes.
    pub len: usize,
    /// Seed of its content.
    pub key: u64,
    /// The receiver answers it with a reply (causal-completion check).
    pub wants_reply: bool,
    /// Where that reply was logged, once submitted.
    pub reply: Option<(LogKey, usize)>,
    /// Delivered (by some incarnation of the receiver).
    pub delivered: bool,
}

#[derive(Debug, Default)]
struct Log {
    sent: Vec<SentMsg>,
    /// Next index each receiver incarnation must deliver.
    recv_next: HashMap<u32, usize>,
    /// Where each receiver incarnation's connection began.
    recv_base: HashMap<u32, usize>,
    /// Receiver incarnations that took the connection over from the start
    /// because the sender never heard from an earlier one (see `on_deliver`).
    taken_over: Vec<u32>,
    acked: Option<u64>,
    failed_upto: Option<u64>,
}

/// A reply the simulator must submit right after the delivery that caused it.
#[derive(Debug, Clone, Copy)]
pub struct ReplyDue {
    /// The node that must submit it (the one that delivered).
    pub from: u32,
    /// Its destination (the original sender).
    pub to: u32,
    /// The log entry it answers.
    pub answers: (LogKey, usize),
}

/// Observes a run and records the first invariant violation.
#[derive(Debug, Default)]
pub struct Checker {
    logs: HashMap<LogKey, Log>,
    /// Violations found, in order.
    pub errors: Vec<String>,
    /// Replies to submit now.
    pub replies_due: Vec<ReplyDue>,
    /// Whole messages delivered.
    pub delivered: u64,
    /// Bytes in those messages.
    pub delivered_bytes: u64,
}

/// Fills `out` with the content of the message with seed `key`.
pub fn fill_content(key: u64, out: &mut [u8]) {
    let mut x = key;
    for chunk in out.chunks_mut(8) {
        let v = splitmix64(&mut x).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

fn content_matches(key: u64, data: &[u8]) -> bool {
    let mut x = key;
    data.chunks(8).all(|chunk| {
        let v = splitmix64(&mut x).to_le_bytes();
        chunk == &v[..chunk.len()]
    })
}

/// The content seed of message `index` of a log.
pub fn content_key(log: LogKey, index: usize) -> u64 {
    let mut x = (u64::from(log.0) << 48) ^ (u64::from(log.1) << 32) ^ (u64::from(log.2) << 16) ^ index as u64;
    splitmix64(&mut x)
}

impl Checker {
    fn fail(&mut self, now: Instant, text: String) {
        if self.errors.len() < 20 {
            self.errors.push(format!("[{now:?}] {text}"));
        }
    }

    /// A message was submitted on `log` and got `id`; `dst_inc` is the
    /// receiver's current incarnation (a new log starts delivering there at 0).
    pub fn on_submit(&mut self, now: Instant, log: LogKey, dst_inc: u32, id: MsgId, msg: SentMsg) -> usize {
        let entry = self.logs.entry(log).or_default();
        let index = entry.sent.len();
        entry.sent.push(msg);
        if index == 0 {
            entry.recv_next.entry(dst_inc).or_insert(0);
        }
        if id.0 != index as u64 {
            self.fail(now, format!("log {log:?}: submit returned {id:?}, expected consecutive id {index}"));
        }
        index
    }

    /// Number of messages submitted on `log`.
    pub fn submitted(&self, log: LogKey) -> usize {
        self.logs.get(&log).map_or(0, |l| l.sent.len())
    }

    /// Node `dst` (incarnation `dst_inc`) delivered `data` from the sender of `log`.
    ///
    /// `sender_knew_none_before`: the sender has never heard from an earlier
    /// incarnation of `dst`, so its packets name no receiver epoch and a new
    /// incarnation legitimately takes the connection over from its first
    /// message, with no `PeerRestarted` at the sender. Messages the crashed
    /// incarnation had already delivered (and never acknowledged: the sender
    /// heard nothing) are then delivered again, to the new one: exactly once
    /// per incarnation, never twice to one.
    pub fn on_deliver(&mut self, now: Instant, log: LogKey, dst_inc: u32, sender_knew_none_before: bool, data: &[u8]) {
        let Some(entry) = self.logs.get_mut(&log) else {
            return self.fail(now, format!("log {log:?}: delivery of a message never submitted"));
        };
        if dst_inc > 0 && sender_knew_none_before && !entry.recv_next.contains_key(&dst_inc) && entry.acked.is_none() {
            entry.recv_next.insert(dst_inc, 0);
            entry.recv_base.insert(dst_inc, 0);
            entry.taken_over.push(dst_inc);
        }
        let Some(&next) = entry.recv_next.get(&dst_inc) else {
            return self.fail(
                now,
                format!("log {log:?}: receiver incarnation {dst_inc} delivered before its connection began"),
            );
        };
        let submitted = entry.sent.len();
        let Some(msg) = entry.sent.get_mut(next) else {
            return self
                .fail(now, format!("log {log:?}: delivered message #{next}, only {submitted} submitted (duplicate?)"));
        };
        if msg.len != data.len() || !content_matches(msg.key, data) {
            let len = msg.len;
            return self
                .fail(now, format!("log {log:?}: message #{next} corrupted: {} bytes, expected {len}", data.len()));
        }
        if msg.delivered && !entry.taken_over.contains(&dst_inc) {
            return self.fail(now, format!("log {log:?}: message #{next} delivered twice"));
        }
        msg.delivered = true;
        let wants_reply = msg.wants_reply;
        entry.recv_next.insert(dst_inc, next + 1);
        self.delivered += 1;
        self.delivered_bytes += data.len() as u64;
        if wants_reply {
            self.replies_due.push(ReplyDue { from: log.2, to: log.0, answers: (log, next) });
        }
    }

    /// Links a submitted reply to the message it answers.
    pub fn on_reply_submitted(&mut self, answers: (LogKey, usize), reply: (LogKey, usize)) {
        if let Some(entry) = self.logs.get_mut(&answers.0) {
            entry.sent[answers.1].reply = Some(reply);
        }
    }

    /// A protocol event at the sender of `log`'s family; `log_of(peer)` gives
    /// the log from this node to `peer`, `peer_inc(peer)` the peer's current incarnation.
    pub fn on_event(&mut self, now: Instant, log: LogKey, peer_inc: u32, event: &Event) {
        match *event {
            Event::Acked { upto, .. } => self.on_acked(now, log, upto.0),
            Event::PeerDead { .. } => {
                let entry = self.logs.entry(log).or_default();
                let last = entry.sent.len() as u64;
                if last > 0 && !matches!(entry.acked, Some(a) if a >= last - 1) {
                    entry.failed_upto = Some(last - 1);
                }
            }
            Event::PeerRestarted { failed_upto, .. } => {
                let entry = self.logs.entry(log).or_default();
                if let Some(f) = failed_upto {
                    if entry.acked.is_some_and(|a| a >= f.0) {
                        return self.fail(now, format!("log {log:?}: restart fails {f:?}, already acked"));
                    }
                    entry.failed_upto = Some(f.0);
                }
                let base = failed_upto.map_or(entry.sent.len(), |f| f.0 as usize + 1);
                if base != entry.sent.len() {
                    let n = entry.sent.len();
                    return self.fail(now, format!("log {log:?}: restart failed up to {failed_upto:?} of {n}"));
                }
                entry.recv_next.insert(peer_inc, base);
                entry.recv_base.insert(peer_inc, base);
            }
            _ => {}
        }
    }

    fn on_acked(&mut self, now: Instant, log: LogKey, upto: u64) {
        let Some(entry) = self.logs.get(&log) else {
            return self.fail(now, format!("log {log:?}: Acked({upto}) for nothing submitted"));
        };
        let from = entry.acked.map_or(0, |a| a + 1);
        if upto < from {
            return self.fail(now, format!("log {log:?}: Acked({upto}) after Acked({})", from - 1));
        }
        let from = from.max(entry.failed_upto.map_or(0, |f| f + 1));
        if upto as usize >= entry.sent.len() {
            return self.fail(now, format!("log {log:?}: Acked({upto}) beyond {} submitted", entry.sent.len()));
        }
        if entry.failed_upto.is_some_and(|f| upto <= f) {
            return self.fail(now, format!("log {log:?}: Acked({upto}) of a failed message"));
        }
        for id in from..=upto {
            let msg = &entry.sent[id as usize];
            if !msg.delivered {
                return self.fail(now, format!("log {log:?}: Acked({upto}) but #{id} not delivered"));
            }
            if msg.wants_reply {
                let reply_delivered = msg.reply.and_then(|(k, i)| self.logs.get(&k).map(|l| l.sent[i].delivered));
                if reply_delivered != Some(true) {
                    return self.fail(
                        now,
                        format!("log {log:?}: causal completion violated: Acked({upto}) before the reply to #{id} was delivered"),
                    );
                }
            }
        }
        self.logs.get_mut(&log).expect("checked").acked = Some(upto);
    }

    /// Messages of `log` neither acked nor failed.
    pub fn unresolved(&self, log: LogKey) -> usize {
        self.logs.get(&log).map_or(0, |l| {
            let done = l.acked.max(l.failed_upto).map_or(0, |x| x + 1);
            l.sent.len() - done as usize
        })
    }

    /// Messages of `log` reported failed.
    pub fn failed(&self, log: LogKey) -> u64 {
        self.logs.get(&log).map_or(0, |l| {
            let acked = l.acked.map_or(0, |a| a + 1);
            l.failed_upto.map_or(0, |f| (f + 1).saturating_sub(acked))
        })
    }

    /// Messages of `log` delivered by receiver incarnation `dst_inc` in its connection.
    pub fn delivered_to(&self, log: LogKey, dst_inc: u32) -> usize {
        self.logs.get(&log).map_or(0, |l| {
            let base = l.recv_base.get(&dst_inc).copied().unwrap_or(0);
            l.recv_next.get(&dst_inc).map_or(0, |&next| next - base)
        })
    }

    /// Every log key seen.
    pub fn logs(&self) -> impl Iterator<Item = LogKey> + '_ {
        self.logs.keys().copied()
    }
}
