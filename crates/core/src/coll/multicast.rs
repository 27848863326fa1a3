//! Multicast (Cenju-4's one-to-many put, seed 000 §5.4): the same bytes
//! put into a region of every team member, by IP multicast where the
//! network allows it, else down a binomial tree.
//!
//! As on Cenju-4, the set of destinations is registered once
//! ([`Team::multicast_group`], the analogue of registering a multicast
//! header by system call); each member may name its own region (Cenju-4
//! used address registers for per-node addresses). `multicast` is a
//! collective call.
//!
//! # Tree
//!
//! Pipelined in 64 KiB chunks, each hop a put straight from the parent's
//! region into the child's. Members announce to their parent that their
//! range may be overwritten (step 1) before any data moves.
//!
//! # IP multicast
//!
//! Decided per team when its first group is created (all members agree
//! through two allgathers): every member joins the team's group (a
//! 239.192.0.0/14 address and a port derived from the job and the team, see
//! `crate::mcast`), and team rank 0 multicasts a probe that must reach every
//! member through the group itself: the root repeats it every 2 ms until
//! every member has said "done" (it cannot get it otherwise), and gives up
//! after 250 ms if nobody has, 1 s if only some have. The root's verdict,
//! on its own clock, is the team's. If a member cannot join
//! (no IPv4, the port is taken, no interface), or the probe does not get
//! through, the team uses the tree (`MW_MCAST=1` makes that an error
//! instead; `MW_MCAST=0` skips all of it).
//!
//! With `Auto`, a call on such a team goes by IP from 64 KiB or on teams of
//! 8 ranks or more (measured: below that the tree's few hops win), and
//! then goes:
//!
//! 1. Every member arms its receive (from then on segments of this call are
//!    written into its region) and tells the root it is ready (step 1, with
//!    a health word: whether multicast from this root has been failing here).
//! 2. The root, once everyone is ready, picks the way: IP multicast if some
//!    members are reached over UDP, nobody reported trouble and its own
//!    sends to the group work; else the tree, announced by the root to every
//!    member on the root's own signal word (step 1; entry was step 1 above).
//! 3. IP: the root multicasts the segments; members Nack what they miss
//!    over the reliable path and get repairs (`mw_proto::mcast`); each
//!    member returns once it holds everything and has said so; the root
//!    returns when every member has — the same completion as the tree (no
//!    member returns before its data is in place; the root's region may be
//!    reused when it returns). Members that share memory with the root get
//!    the data by direct put instead (a memcpy beats a datagram), signalled
//!    with [`DIRECT_STEP`].
//! 4. A member waits for whichever comes: its receive completes, the
//!    root's direct put, or the root's word saying it is the tree. (Not the
//!    tree parent's word: a parent done early by multicast may already be
//!    signalling a later collective on it.)
//!
//! A member that receives a whole transfer from a root by repair only, in
//! [`MISSES_FOR_TREE`] transfers in a row, reports trouble to that root,
//! which then uses the tree; a root whose sends to the group fail uses the
//! tree from then on (the call in progress completes by unicast).
//!
//! Owns: multicast groups, the per-team choice between IP multicast and the
//! tree, the tree's pipeline and the members' signal-word protocol above. Must
//! not: send or repair IP multicast segments itself (the endpoint's multicast
//! engine, `crate::mcast`, does), let a member return before its data is in
//! place, or the root before every member's is.

use std::time::{Duration, Instant};

use super::tree::{binomial_children, binomial_parent};
use super::{McastAlgo, Team, STEP_BITS};
use crate::mcast::{team_identity, RxStatus};
use crate::memory::Region;
use crate::region::{RawMem, RegionKey};
use crate::{Error, Result};

/// Pipelining unit of a multicast down the tree.
const CHUNK: usize = 64 << 10;
/// Signal step of the root's direct put to a member sharing its memory:
/// above every tree step, so the two cannot be confused.
const DIRECT_STEP: u32 = (1 << STEP_BITS) - 1;
/// How long group creation waits for the probe while no member has it.
const PROBE_DEADLINE: Duration = Duration::from_millis(250);
/// How long once some member has it: the group works, and under loss a
/// member's "done" may take a few retransmissions to arrive.
const PROBE_DEADLINE_SOME: Duration = Duration::from_secs(1);
/// How often the root sends the probe to the group again.
const PROBE_REPEAT: Duration = Duration::from_millis(2);
/// Transfers in a row received by repair only before a member asks the root for the tree.
const MISSES_FOR_TREE: u32 = 3;

/// Whether and how a team uses IP multicast.
#[derive(Debug)]
pub(crate) enum TeamIp {
    /// No multicast group created yet.
    Unchecked,
    /// The tree only.
    Off,
    /// IP multicast works on this team.
    On(IpTeam),
}

#[derive(Debug)]
pub(crate) struct IpTeam {
    /// The team's multicast identity (its group, in every packet).
    id: u64,
    /// Per team rank as root: transfers in a row it reached me by repair only.
    misses: Vec<u32>,
    /// My sends to the group failed: I root by the tree.
    send_failed: bool,
}

/// A registered set of multicast destinations: one region per member.
#[derive(Debug)]
pub struct McastGroup<'r> {
    team: RegionKey,
    keys: Vec<RegionKey>,
    /// Smallest region length over the members.
    len: usize,
    mem: RawMem,
    _region: std::marker::PhantomData<&'r Region<'r>>,
}

impl McastGroup<'_> {
    /// Bytes usable at every member.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no byte is usable.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// What a member waiting in an IP-capable multicast got.
enum Arrived {
    Ip(mw_proto::mcast::ReceiverStats),
    Direct,
    Tree,
}

/// Disarms a member's receive when the call ends, however it ends: no
/// segment may land in the region after `multicast` returned.
struct ArmedRx<'a> {
    ep: &'a crate::Endpoint,
    team: u64,
}

impl Drop for ArmedRx<'_> {
    fn drop(&mut self) {
        self.ep.mcast_disarm(self.team);
    }
}

/// Ends a root's transfer when the call ends, however it ends.
struct ActiveTx<'a> {
    ep: &'a crate::Endpoint,
    team: u64,
    finished: bool,
}

impl ActiveTx<'_> {
    fn finish(mut self) -> Option<(mw_proto::mcast::SenderStats, bool)> {
        self.finished = true;
        self.ep.mcast_finish(self.team)
    }
}

impl Drop for ActiveTx<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.ep.mcast_finish(self.team);
        }
    }
}

impl<'ep> Team<'ep> {
    /// Collective: registers `region` (this member's destination; it needs
    /// write access) as this member's part of a multicast group. The team's
    /// first group also decides whether the team uses IP multicast (see the
    /// module docs); with `MW_MCAST=1` (`McastAlgo::Ip` as the team's
    /// tuning) that failing is an error on every member.
    pub fn multicast_group<'r>(&mut self, region: &'r Region<'ep>) -> Result<McastGroup<'r>> {
        let writable = self
            .ep
            .lock()
            .regions
            .get(region.key())
            .is_ok_and(|entry| entry.access.contains(crate::region::Access::WRITE));
        // Agreed by everyone, so all members fail alike instead of one hanging.
        let mut rec = [0u8; 16];
        rec[..8].copy_from_slice(&region.key().0.to_le_bytes());
        let usable = if writable { region.len() as u64 } else { u64::MAX };
        rec[8..].copy_from_slice(&usable.to_le_bytes());
        let all = self.allgather_small(&rec)?;
        if all.chunks_exact(16).any(|r| r[8..] == u64::MAX.to_le_bytes()) {
            return Err(Error::NoPermission);
        }
        let mut keys = Vec::with_capacity(self.p());
        let mut len = usize::MAX;
        for r in all.chunks_exact(16) {
            keys.push(RegionKey(u64::from_le_bytes(r[..8].try_into().expect("16-byte record"))));
            len = len.min(u64::from_le_bytes(r[8..].try_into().expect("16-byte record")) as usize);
        }
        if matches!(self.ip, TeamIp::Unchecked) && self.p() > 1 {
            self.setup_ip()?;
        }
        Ok(McastGroup { team: self.scratch.key(), keys, len, mem: region.raw(), _region: std::marker::PhantomData })
    }

    /// Whether this team moves multicasts by IP multicast (decided when its
    /// first multicast group was created; a single call may still take the
    /// tree, see the module docs).
    pub fn uses_ip_multicast(&self) -> bool {
        matches!(self.ip, TeamIp::On(_))
    }

    /// Joins the team's group and probes it; sets `self.ip`. Collective.
    fn setup_ip(&mut self) -> Result<()> {
        let algo = self.tuning.mcast;
        if algo == McastAlgo::Tree {
            self.ip = TeamIp::Off;
            return Ok(());
        }
        let (p, me) = (self.p(), self.me);
        let id = team_identity(self.keys.iter().map(|k| k.0));
        let udp_peer = (0..p).any(|m| m != me && !self.ep.shares_memory_with(self.ranks[m]));
        let joined = if udp_peer {
            self.ep.mcast_join(id).map_err(|e| format!("joining the team's group: {e}"))
        } else {
            Err("every member shares memory with this one".to_owned())
        };
        // The probe is a transfer of its own, numbered like a collective.
        self.begin()?;
        let probe = self.seq;
        if joined.is_ok() && me != 0 {
            self.ep.mcast_arm(id, probe, self.ranks[0], 0, self.mem, 0);
        }
        let guard = (joined.is_ok() && me != 0).then(|| ArmedRx { ep: self.ep, team: id });
        // Everyone armed (or failed) before the root sends anything.
        let all = self.allgather_small(&[u8::from(joined.is_ok())])?;
        let mut reason = joined.as_ref().err().cloned();
        let mut ok = all.iter().all(|&b| b == 1);
        if ok {
            // The root alone judges, on its own clock: members leave the
            // allgather above at different times (an RTO apart under loss),
            // so a member's own deadline could run out before the root has
            // even sent. Members wait in the verdict's broadcast below,
            // receiving the probe and saying "done" meanwhile.
            let verdict = if me == 0 { self.run_probe(id, probe) } else { true };
            let mut word = [0u8];
            if me == 0 {
                word[0] = u8::from(verdict);
            }
            let verdict = self.allgather_small(&word)?[0] == 1;
            drop(guard);
            ok = verdict;
            if !ok {
                reason.get_or_insert_with(|| "the probe did not reach every member through the group".to_owned());
            }
        } else {
            drop(guard);
            reason.get_or_insert_with(|| "a member could not join the team's group".to_owned());
        }
        if ok {
            self.ip = TeamIp::On(IpTeam { id, misses: vec![0; p], send_failed: false });
            return Ok(());
        }
        if joined.is_ok() {
            self.ep.mcast_leave(id);
        }
        self.ip = TeamIp::Off;
        if algo == McastAlgo::Ip {
            let why = reason.unwrap_or_default();
            return Err(Error::Io(format!("IP multicast unavailable on this team (MW_MCAST=1): {why}")));
        }
        Ok(())
    }

    /// The root's side of the probe: sends it to the group, and again every
    /// [`PROBE_REPEAT`] to whoever has not said "done", until every member
    /// has (it can only get the probe through the group) or the deadline
    /// passes: [`PROBE_DEADLINE`] when nobody got it, [`PROBE_DEADLINE_SOME`]
    /// once somebody did (the group works; the rest may be slow to say so).
    fn run_probe(&self, id: u64, probe: u64) -> bool {
        let members: Vec<u32> = self.ranks[1..].to_vec();
        let count = members.len() as u32;
        self.ep.mcast_send(id, probe, members, 0, self.mem, 0, true);
        let tx = ActiveTx { ep: self.ep, team: id, finished: false };
        let start = Instant::now();
        let done = loop {
            let step = Some(Instant::now() + PROBE_REPEAT);
            if self.ep.wait_for_until(|state| state.mcast.tx_complete(id, probe).unwrap_or(true), step) {
                break true;
            }
            let Some(reached) = self.ep.mcast_repeat(id, probe) else { break false };
            let deadline = if reached > 0 { PROBE_DEADLINE_SOME } else { PROBE_DEADLINE };
            if reached == count || start.elapsed() >= deadline {
                break reached == count;
            }
        };
        let group_ok = tx.finish().is_some_and(|(_, group_ok)| group_ok);
        done && group_ok
    }

    /// Collective: bytes `offset..offset + len` of the root's group region
    /// are put into the same range of every member's group region, by IP
    /// multicast when the team has it, else down the tree. Returns on each
    /// member once its range holds the data (on the root: once every member's
    /// does).
    pub fn multicast(&mut self, group: &McastGroup<'_>, root: u32, offset: usize, len: usize) -> Result<()> {
        self.multicast_with(McastAlgo::Auto, group, root, offset, len)
    }

    /// [`multicast`](Self::multicast) with the way forced: `Tree`, or `Ip`
    /// (an error on a team without IP multicast; members then never fall
    /// back to the tree for this call). Every member passes the same `algo`.
    pub fn multicast_with(
        &mut self,
        algo: McastAlgo,
        group: &McastGroup<'_>,
        root: u32,
        offset: usize,
        len: usize,
    ) -> Result<()> {
        let (p, root) = (self.p(), root as usize);
        if group.team != self.scratch.key() {
            return Err(Error::InvalidArgument("multicast group belongs to another team"));
        }
        if root >= p {
            return Err(Error::InvalidArgument("multicast root outside the team"));
        }
        if offset.checked_add(len).is_none_or(|end| end > group.len) {
            return Err(Error::OutOfBounds);
        }
        if len.div_ceil(CHUNK) + 2 >= DIRECT_STEP as usize {
            return Err(Error::InvalidArgument("multicast of more than 64 GiB"));
        }
        let algo = if algo == McastAlgo::Auto { self.tuning.mcast } else { algo };
        let ip = matches!(self.ip, TeamIp::On(_));
        if algo == McastAlgo::Ip && !ip && p > 1 {
            return Err(Error::InvalidArgument("IP multicast is not available on this team"));
        }
        self.begin()?;
        if p == 1 {
            return Ok(());
        }
        // Every member passes the same length, so every member decides alike.
        let by_ip = match algo {
            McastAlgo::Tree => false,
            McastAlgo::Ip => true,
            McastAlgo::Auto => ip && super::tuning::pick_mcast_ip(len, p),
        };
        if !by_ip {
            return self.tree_multicast(group, root, offset, len, true);
        }
        if root == self.me {
            self.ip_root(group, offset, len, algo == McastAlgo::Ip)
        } else {
            self.ip_member(group, root, offset, len)
        }
    }

    /// The tree, announcing entry first (`announce`) or not (the IP path's
    /// step 1 did already).
    fn tree_multicast(
        &mut self,
        group: &McastGroup<'_>,
        root: usize,
        offset: usize,
        len: usize,
        announce: bool,
    ) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let parent = binomial_parent(me, root, p);
        let children = binomial_children(me, root, p);
        if announce {
            if let Some(parent) = parent {
                self.notify(parent, 1)?;
            }
            for &c in &children {
                self.wait_from(c, 1)?;
            }
        }
        let chunks = len.div_ceil(CHUNK).max(1);
        let mut buf = Vec::with_capacity(len.min(CHUNK));
        for i in 0..chunks {
            let start = offset + i * CHUNK;
            let this = (offset + len - start).min(CHUNK);
            let step = 2 + i as u32;
            if let Some(parent) = parent {
                self.wait_from(parent, step)?;
            }
            if children.is_empty() {
                continue;
            }
            buf.resize(this, 0);
            {
                let _guard = self.ep.lock();
                group.mem.read(start, &mut buf);
            }
            for &c in &children {
                self.put_to(c, group.keys[c], start as u64, &buf, step)?;
            }
        }
        Ok(())
    }

    /// The root of a call on a team with IP multicast.
    fn ip_root(&mut self, group: &McastGroup<'_>, offset: usize, len: usize, forced: bool) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let TeamIp::On(ip) = &self.ip else { unreachable!("checked by the caller") };
        let (id, send_failed) = (ip.id, ip.send_failed);
        let mut receivers = Vec::new();
        let mut direct = Vec::new();
        for m in (0..p).filter(|&m| m != me) {
            if self.ep.shares_memory_with(self.ranks[m]) {
                direct.push(m);
            } else {
                receivers.push(m);
            }
        }
        let mut trouble = false;
        for m in (0..p).filter(|&m| m != me) {
            self.wait_from(m, 1)?;
            trouble |= self.mem.load_u64(self.lay.health(m) as usize) != 0;
        }
        let use_ip = !receivers.is_empty() && (forced || !(trouble || send_failed));
        if !use_ip {
            if !receivers.is_empty() {
                self.ep.mcast_count(|s| s.tree_fallbacks += 1);
            }
            // Tell every member it is the tree this time: on a signal word
            // only the root writes (a parent's own word may already carry a
            // later collective's signals when multicast let it finish early).
            for m in (0..p).filter(|&m| m != me) {
                self.notify(m, 1)?;
            }
            return self.tree_multicast(group, me, offset, len, false);
        }
        self.ep.mcast_count(|s| s.ip_transfers += 1);
        let transfer = self.seq;
        let members: Vec<u32> = receivers.iter().map(|&m| self.ranks[m]).collect();
        self.ep.mcast_send(id, transfer, members.clone(), len as u64, group.mem, offset, false);
        let tx = ActiveTx { ep: self.ep, team: id, finished: false };
        // Same-host members by direct put while the segments fly.
        self.direct_puts(group, &direct, offset, len)?;
        let mut dead = None;
        self.wait_bounded(|state| {
            if state.mcast.tx_complete(id, transfer).unwrap_or(true) {
                return true;
            }
            dead = members.iter().copied().find(|&r| state.dead[r as usize]);
            dead.is_some()
        })?;
        let finished = tx.finish();
        if let Some(rank) = dead {
            return Err(Error::PeerUnreachable { rank });
        }
        if finished.is_some_and(|(_, group_ok)| !group_ok) {
            if let TeamIp::On(ip) = &mut self.ip {
                ip.send_failed = true;
            }
        }
        Ok(())
    }

    /// The root's data to members that share its memory: chunks by put,
    /// the last one with the [`DIRECT_STEP`] signal.
    fn direct_puts(&mut self, group: &McastGroup<'_>, direct: &[usize], offset: usize, len: usize) -> Result<()> {
        if direct.is_empty() {
            return Ok(());
        }
        let chunks = len.div_ceil(CHUNK).max(1);
        let mut buf = Vec::with_capacity(len.min(CHUNK));
        for i in 0..chunks {
            let start = offset + i * CHUNK;
            let this = (offset + len - start).min(CHUNK);
            buf.resize(this, 0);
            {
                let _guard = self.ep.lock();
                group.mem.read(start, &mut buf);
            }
            for &d in direct {
                if i + 1 == chunks {
                    self.put_to(d, group.keys[d], start as u64, &buf, DIRECT_STEP)?;
                } else {
                    // Copied (or stored) before this returns; the final
                    // signal follows it in issue order.
                    drop(self.ep.put_nb(self.ranks[d], group.keys[d], start as u64, &buf)?);
                }
            }
        }
        Ok(())
    }

    /// A non-root member of a call on a team with IP multicast.
    fn ip_member(&mut self, group: &McastGroup<'_>, root: usize, offset: usize, len: usize) -> Result<()> {
        let me = self.me;
        let TeamIp::On(ip) = &self.ip else { unreachable!("checked by the caller") };
        let (id, trouble) = (ip.id, ip.misses[root] >= MISSES_FOR_TREE);
        let transfer = self.seq;
        let root_world = self.ranks[root];
        let by_ip = !self.ep.shares_memory_with(root_world);
        let armed = by_ip.then(|| {
            self.ep.mcast_arm(id, transfer, root_world, len as u64, group.mem, offset);
            ArmedRx { ep: self.ep, team: id }
        });
        // Ready, with my report on multicast from this root.
        let health = u64::from(trouble).to_le_bytes();
        self.put_to(root, self.keys[root], self.lay.health(me), &health, 1)?;
        // The root's word says "direct put done" or "the tree this time";
        // nobody else writes it, and the root cannot move on to a later
        // collective before this member holds the data.
        let mem = self.mem;
        let root_at = self.lay.flag(root) as usize;
        let (direct_want, tree_want) = (self.sig(DIRECT_STEP), self.sig(1));
        let mut arrived = None;
        let mut dead = false;
        let waited = self.wait_bounded(|state| {
            let word = mem.load_u64(root_at);
            if word >= direct_want {
                arrived = Some(Arrived::Direct);
            } else if word >= tree_want {
                arrived = Some(Arrived::Tree);
            } else if let (true, RxStatus::Complete(stats)) = (by_ip, state.mcast.rx_status(id, transfer)) {
                arrived = Some(Arrived::Ip(stats));
            } else {
                dead = state.dead[root_world as usize];
            }
            arrived.is_some() || dead
        });
        drop(armed);
        waited?;
        match arrived {
            None => Err(Error::PeerUnreachable { rank: root_world }),
            Some(Arrived::Direct) => Ok(()),
            Some(Arrived::Tree) => self.tree_multicast(group, root, offset, len, false),
            Some(Arrived::Ip(stats)) => {
                if let TeamIp::On(ip) = &mut self.ip {
                    ip.misses[root] = if stats.via_group == 0 { ip.misses[root] + 1 } else { 0 };
                }
                Ok(())
            }
        }
    }
}

impl Drop for Team<'_> {
    fn drop(&mut self) {
        if let TeamIp::On(ip) = &self.ip {
            self.ep.mcast_leave(ip.id);
        }
    }
}
