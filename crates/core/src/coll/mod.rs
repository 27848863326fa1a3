//! Collectives over teams, built only on the one-sided operations: every
//! byte a collective moves is a `put_signal` into a peer's team scratch
//! region (or a direct put into a multicast group's regions), every wait is
//! `wait_for` on a signal word, so waiting yields the CPU like any other wait.
//! Two exceptions: multicast by IP multicast, whose segments the
//! endpoint's multicast engine (`crate::mcast`) moves (this module decides
//! when to use it and keeps its members in step with signal words), and the
//! single-copy algorithms of teams all on one host (`direct.rs`), where a
//! reader copies straight out of the owner's lent buffer with
//! `process_vm_readv` (the transport's `shm::vm_read`), coordinated by the
//! same signal words.
//!
//! Owns: teams (world, split, explicit list), their scratch regions, the
//! sequence numbers that keep consecutive collectives and concurrent teams
//! apart, the algorithms (one file per collective) and their automatic
//! choice, multicast groups and `quiesce`. Must not: touch the protocol or
//! the transport, or depend on messaging (send/recv); it runs unchanged over
//! any transport the endpoint uses.
//!
//! # How scratch space is kept safe (read this before adding an algorithm)
//!
//! Every team member owns one scratch region laid out identically on all
//! members ([`Layout`]):
//!
//! * **Signal words**, one per *writer*: `flag[w]` is written only by team
//!   rank `w`, always with `SignalOp::Set` and the value `seq << 20 | step`,
//!   where `seq` counts the team's collectives (the same on every member,
//!   because collectives are called in the same order) and `step` numbers the
//!   messages `w` sends to this rank within one collective, increasing. The
//!   endpoint delivers one peer's operations in issue order, so the word only
//!   grows, and seeing `flag[w] >= seq << 20 | step` proves that `w`'s data
//!   for that step has landed (put_signal writes the data first).
//! * **All-dependent data** (allgather, alltoall, allreduce, large broadcast,
//!   large reduce, barrier-free): two phases, alternated by a counter of such
//!   collectives. A rank can only finish one of them after every member
//!   entered it (its result depends on all of them), so when writer `w`
//!   starts all-dependent collective `m`, every member has finished `m - 2`,
//!   the last one that used the same phase. No handshake needed.
//! * **Rooted data** (small broadcast, reduce, gather, scatter): a rank may
//!   leave before the others entered, so these land in per-writer slots (two
//!   phases by a counter of rooted collectives) and the reader returns a
//!   *credit* (`credit[reader]` in the writer's region) once it has consumed
//!   the slot. A writer reuses a slot phase only after the credit for its
//!   previous write there came back (usually long before). A slot's first
//!   word is its own signal word (same `seq << 20 | step` values, written
//!   only by the slot's writer), and the data follows it: small data and
//!   its signal share a cache line, so over shared memory a reader waits
//!   for one line to move instead of two (the signal line, then the data's).
//! * **Large data** (more than a phase or slot holds) goes to a separate,
//!   growable region, after a small allgather that both synchronizes the
//!   team (everyone finished everything before) and exchanges the keys when
//!   a member had to grow it.
//!
//! Different teams have different regions and counters, so they never mix.

mod allgather;
mod alltoall;
mod barrier;
mod bcast;
mod direct;
mod kernel;
mod multicast;
mod quiesce;
mod reduce;
mod rooted;
mod tree;
mod trial;
mod tuning;
mod vector;
mod wait;

use mw_wire::op::SignalOp;

use crate::endpoint::Endpoint;
use crate::memory::Region;
use crate::region::{Access, RawMem, RegionKey};
use crate::rma::Signal;
use crate::shm::direct::PinnedWindow;
use crate::{Error, Result};

pub use kernel::{DType, Element, ReduceOp};
pub use multicast::McastGroup;
pub use tuning::{
    AllgatherAlgo, AllreduceAlgo, AlltoallAlgo, BarrierAlgo, BcastAlgo, CollTrials, CollTuning, McastAlgo, ReduceAlgo,
    VectorAlgo,
};

/// Bits of a signal value below the sequence number (the step).
const STEP_BITS: u32 = 20;

/// Default bytes per all-dependent phase.
const FULL_PHASE_BYTES: usize = 1 << 20;
/// Bounds of the per-writer rooted slot (scaled down for large teams).
const ROOTED_SLOT_MAX: usize = 64 << 10;
const ROOTED_SLOT_MIN: usize = 4 << 10;
/// Total rooted area per phase the slot size aims at.
const ROOTED_PHASE_TARGET: usize = 1 << 20;
/// Bytes in front of a slot's data: its signal word, padded to a cache
/// line's worth of stride so slots stay line-aligned.
const SLOT_SIGNAL: usize = 8;
const SLOT_PAD: usize = 64;

/// Where things are in a team member's scratch region (identical on all).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    p: usize,
    ctrl: usize,
    /// Bytes per all-dependent phase.
    pub full: usize,
    /// Data bytes per rooted writer slot (its stride is this plus
    /// `SLOT_PAD`, for the signal word in front).
    pub slot: usize,
}

impl Layout {
    fn new(p: usize) -> Layout {
        let ctrl = (8 * (7 * p + 1)).div_ceil(64) * 64;
        let slot = (ROOTED_PHASE_TARGET / p.max(1)).clamp(ROOTED_SLOT_MIN, ROOTED_SLOT_MAX) / 64 * 64;
        Layout { p, ctrl, full: FULL_PHASE_BYTES, slot }
    }
    /// Signal word written only by team rank `writer`.
    fn flag(&self, writer: usize) -> u64 {
        (8 * writer) as u64
    }
    /// Credit word written only by team rank `reader` (rooted slots).
    fn credit(&self, reader: usize) -> u64 {
        (8 * (self.p + reader)) as u64
    }
    /// Multicast-arrival word for origin `o` (barrier D).
    fn arrival(&self, origin: usize) -> u64 {
        (8 * (2 * self.p + origin)) as u64
    }
    /// Word written only by team rank `writer` with its IP multicast
    /// report when it enters a multicast this rank roots.
    fn health(&self, writer: usize) -> u64 {
        (8 * (3 * self.p + writer)) as u64
    }
    /// The atomic counter of barrier C.
    fn counter(&self) -> u64 {
        (8 * 4 * self.p) as u64
    }
    /// Word written only by team rank `writer`: the CPU it last ran on,
    /// plus one (0: not known), so a waiter can tell whether spinning for
    /// it makes sense (see `wait.rs`).
    fn cpu(&self, writer: usize) -> u64 {
        (8 * (4 * self.p + 1 + writer)) as u64
    }
    /// Two words written only by team rank `writer`: the address and the
    /// length of the buffer it exposes to this rank in a single-copy
    /// collective (`direct.rs`).
    fn exposed(&self, writer: usize) -> u64 {
        (8 * (5 * self.p + 1 + 2 * writer)) as u64
    }
    fn full_base(&self, phase: u64) -> u64 {
        (self.ctrl + (phase as usize % 2) * self.full) as u64
    }
    /// The signal word of the slot that `writer`'s rooted data lands in
    /// (the data follows it, at `+ SLOT_SIGNAL`).
    fn slot_base(&self, phase: u64, writer: usize) -> u64 {
        (self.ctrl + 2 * self.full + ((phase as usize % 2) * self.p + writer) * (self.slot + SLOT_PAD)) as u64
    }
    fn total(&self) -> usize {
        self.ctrl + 2 * self.full + 2 * self.p * (self.slot + SLOT_PAD)
    }
}

/// A landing area for one collective: where peers put its data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Area {
    /// This rank's memory holding the area.
    mem: RawMem,
    /// Offset of the area in every member's region.
    base: u64,
    /// In the large region (else in the scratch region).
    large: bool,
    /// Usable bytes.
    len: usize,
}

/// An ordered set of ranks on which collectives run.
///
/// Created collectively ([`Endpoint::team_world`], [`Team::split`],
/// [`Team::subset`]); every member must call the team's collectives in the
/// same order with matching arguments. A team is used by one thread at a
/// time (`&mut self`); different teams may be used from different threads
/// at once.
///
/// # Deadlines
///
/// A collective waits for the other members at most `Config::wait_timeout`
/// (none by default) at a time (a member that is alive but never joins), then fails with
/// [`Error::Timeout`] (`PeerUnreachable` sooner if a member dies). The
/// team is then out of step with its other members, who may still be in
/// that collective: every later collective on it, on this rank, fails at
/// once with [`Error::TeamBroken`] rather than mixing with theirs. Drop it
/// (the others should too; their collectives on it time out in turn).
#[derive(Debug)]
pub struct Team<'ep> {
    ep: &'ep Endpoint,
    /// Team rank → world rank.
    ranks: Vec<u32>,
    me: usize,
    scratch: Region<'ep>,
    mem: RawMem,
    keys: Vec<RegionKey>,
    /// By team rank: the window of that member's scratch region when it
    /// shares this host (stores into it skip the window lookup).
    pinned: Vec<Option<PinnedWindow>>,
    lay: Layout,
    large: Option<Region<'ep>>,
    large_keys: Vec<RegionKey>,
    /// Collectives started on this team (the current one's number).
    seq: u64,
    full_count: u64,
    rooted_count: u64,
    counter_rounds: u64,
    /// Per peer and rooted phase: the rooted count of my last write into its slot for me.
    last_write: Vec<[u64; 2]>,
    /// Credits owed to writers, sent when the next collective starts (off
    /// the critical path of the one that consumed the data).
    owed_credits: Vec<(usize, u64)>,
    tuning: CollTuning,
    /// IP multicast on this team (decided with its first multicast group).
    ip: multicast::TeamIp,
    /// How this team's waits spin, yield and block.
    wait: wait::WaitPolicy,
    /// `Some` when every member may read every member's memory directly
    /// (`process_vm_readv`, or `memcpy` between threads of one process),
    /// `Some(true)` when some member's reads go through a costly kernel
    /// copy (see `mw_transport::shm::kernel_copy_is_costly`); `None` on other teams.
    single_copy: Option<bool>,
    /// Consecutive team ranks per CPU when the members outnumber the CPUs
    /// they may use between them (the blocks `wait::Team::spread` places),
    /// else 1.
    /// Agreed when the team forms: every member computes it from the same
    /// records.
    cpu_block: usize,
    /// The CPU last announced to the other members (`Layout::cpu`).
    announced_cpu: Option<u32>,
    /// Scratch buffers kept between calls (no allocation per call once
    /// they have grown): see [`Team::take_work`].
    work: [Vec<u8>; 2],
    /// The headers a vector collective received (`vector.rs`), kept for the
    /// next call.
    vector_words: Vec<usize>,
    /// The automatic choices this team tries out before it keeps one (`trial.rs`).
    trials: trial::Trials,
    /// A wait of a collective on this team timed out: the members are out
    /// of step, and every later collective fails with `TeamBroken`.
    broken: std::sync::atomic::AtomicBool,
}

impl Endpoint {
    /// The algorithms a new team starts with (`Config::coll`, from the
    /// `MW_COLL_*` variables); [`Team::set_tuning`] changes one team's.
    pub fn coll_tuning(&self) -> CollTuning {
        self.lock().config.coll
    }

    /// Collective over the whole job: the team of every rank, in rank order.
    pub fn team_world(&self) -> Result<Team<'_>> {
        let n = self.size() as usize;
        let lay = Layout::new(n);
        let scratch = self.alloc(lay.total(), Access::ALL)?;
        let ranks: Vec<u32> = (0..n as u32).collect();
        // Registered before it is announced, so no put can arrive first.
        let mine = MemberRecord::of(self, &scratch, &ranks).encode();
        let all = self.allgather_bytes(&mine)?;
        let records = all.iter().map(|b| MemberRecord::decode(b)).collect::<Result<Vec<_>>>()?;
        Team::assemble(self, ranks, self.rank() as usize, scratch, &records)
    }
}

/// What each member tells the others when a team forms.
#[derive(Debug, Clone, Copy)]
struct MemberRecord {
    /// Its scratch region's key.
    key: RegionKey,
    /// Where that region is in its address space (the single-copy probe reads it).
    base: u64,
    /// It reaches every member through shared memory.
    shm: bool,
    /// The CPUs it may run on, CPU c as bit c mod 64.
    cpus: u64,
}

impl MemberRecord {
    const LEN: usize = 25;

    fn of(ep: &Endpoint, scratch: &Region<'_>, ranks: &[u32]) -> MemberRecord {
        let me = ep.rank();
        let shm = ranks.len() > 1 && ranks.iter().all(|&r| r == me || ep.shares_memory_with(r));
        let cpus =
            mw_transport::wait::allowed_cpus().map_or(0, |all| all.iter().fold(0u64, |mask, &c| mask | 1 << (c % 64)));
        MemberRecord { key: scratch.key(), base: scratch.as_ptr() as u64, shm, cpus }
    }

    fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..8].copy_from_slice(&self.key.0.to_le_bytes());
        out[8..16].copy_from_slice(&self.base.to_le_bytes());
        out[16] = u8::from(self.shm);
        out[17..25].copy_from_slice(&self.cpus.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Result<MemberRecord> {
        let bad = Error::InvalidArgument("team exchange returned a malformed record");
        if bytes.len() != Self::LEN {
            return Err(bad);
        }
        let word = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("length checked"));
        let cpus = u64::from_le_bytes(bytes[17..25].try_into().expect("length checked"));
        Ok(MemberRecord { key: RegionKey(word(0)), base: word(1), shm: bytes[16] == 1, cpus })
    }
}

/// Members per CPU block: the team's size over the CPUs its members may
/// use between them, rounded up (1 when every member can have a CPU of its
/// own, as when each is bound to a core of its own).
fn cpu_block(p: usize, records: &[MemberRecord]) -> usize {
    let cpus = records.iter().fold(0u64, |all, r| all | r.cpus).count_ones() as usize;
    p.div_ceil(cpus.max(1))
}

impl<'ep> Team<'ep> {
    /// Builds the team from every member's record, then (on teams whose
    /// members all share memory) checks collectively whether each member
    /// can read the others' memory with `process_vm_readv` (single-copy
    /// algorithms, `direct.rs`).
    fn assemble(
        ep: &'ep Endpoint,
        ranks: Vec<u32>,
        me: usize,
        scratch: Region<'ep>,
        records: &[MemberRecord],
    ) -> Result<Self> {
        let p = ranks.len();
        let tuning = ep.coll_tuning();
        // Every member computes the same: all said they share memory with all.
        let shm = p > 1 && records.iter().all(|r| r.shm);
        let mut team = Team {
            ep,
            me,
            mem: scratch.raw(),
            scratch,
            keys: records.iter().map(|r| r.key).collect(),
            pinned: records
                .iter()
                .zip(&ranks)
                .enumerate()
                .map(|(j, (r, &rank))| if j == me { None } else { ep.pin_window(rank, r.key) })
                .collect(),
            lay: Layout::new(p),
            large: None,
            large_keys: Vec::new(),
            seq: 0,
            full_count: 0,
            rooted_count: 0,
            counter_rounds: 0,
            last_write: vec![[0; 2]; p],
            owed_credits: Vec::new(),
            tuning,
            ip: multicast::TeamIp::Unchecked,
            wait: wait::WaitPolicy::new(ep, &ranks, shm, !tuning.no_spread),
            single_copy: None,
            cpu_block: cpu_block(p, records),
            announced_cpu: None,
            work: Default::default(),
            vector_words: Vec::new(),
            trials: trial::Trials::default(),
            broken: std::sync::atomic::AtomicBool::new(false),
            ranks,
        };
        if shm {
            let bases: Vec<u64> = records.iter().map(|r| r.base).collect();
            team.single_copy = team.probe_single_copy(&bases)?;
        }
        Ok(team)
    }

    /// This rank's position in the team.
    pub fn rank(&self) -> u32 {
        self.me as u32
    }

    /// Number of members.
    pub fn size(&self) -> u32 {
        self.ranks.len() as u32
    }

    /// The job (world) rank of team rank `rank`.
    pub fn world_rank(&self, rank: u32) -> Option<u32> {
        self.ranks.get(rank as usize).copied()
    }

    /// The endpoint this team runs on.
    pub fn endpoint(&self) -> &'ep Endpoint {
        self.ep
    }

    /// The algorithms picked when a call does not name one.
    pub fn tuning(&self) -> CollTuning {
        self.tuning
    }

    /// Replaces the default algorithms of this team (per-call `_with`
    /// variants still override them).
    pub fn set_tuning(&mut self, tuning: CollTuning) {
        self.tuning = tuning;
    }

    fn p(&self) -> usize {
        self.ranks.len()
    }

    /// Collective over this team: members passing the same `color` form a
    /// new team, ordered by `key` (ties by rank in this team); `None` takes
    /// no part and gets `None` back (MPI_Comm_split).
    pub fn split(&mut self, color: Option<u32>, key: u32) -> Result<Option<Team<'ep>>> {
        let mut mine = [0u8; 12];
        mine[..4].copy_from_slice(&color.map_or(u32::MAX, |c| c).to_le_bytes());
        mine[4..8].copy_from_slice(&key.to_le_bytes());
        mine[8..].copy_from_slice(&u32::from(color.is_some()).to_le_bytes());
        let all = self.allgather_small(&mine)?;
        let field = |b: &[u8], i: usize| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().expect("12-byte record"));
        let mut members: Vec<(u32, usize)> = Vec::new();
        if color.is_some() {
            for (r, rec) in all.chunks_exact(12).enumerate() {
                if field(rec, 2) == 1 && field(rec, 0) == field(&mine, 0) {
                    members.push((field(rec, 1), r));
                }
            }
            members.sort_unstable();
        }
        let new_p = members.len();
        let scratch = match color {
            Some(_) => Some(self.ep.alloc(Layout::new(new_p).total(), Access::ALL)?),
            None => None,
        };
        // Second round: every member's record (zeros for those not joining).
        let ranks: Vec<u32> = members.iter().map(|&(_, r)| self.ranks[r]).collect();
        let mine = scratch.as_ref().map_or([0u8; MemberRecord::LEN], |s| MemberRecord::of(self.ep, s, &ranks).encode());
        let all = self.allgather_small(&mine)?;
        let Some(scratch) = scratch else {
            return Ok(None);
        };
        let records = members
            .iter()
            .map(|&(_, r)| MemberRecord::decode(&all[MemberRecord::LEN * r..MemberRecord::LEN * (r + 1)]))
            .collect::<Result<Vec<_>>>()?;
        let me = members.iter().position(|&(_, r)| r == self.me).expect("a member finds itself");
        Team::assemble(self.ep, ranks, me, scratch, &records).map(Some)
    }

    /// Collective over this team: the members listed (team ranks, in the
    /// order given, which becomes the new team's rank order) form a new
    /// team; everyone passes the same list; non-members get `None`.
    pub fn subset(&mut self, members: &[u32]) -> Result<Option<Team<'ep>>> {
        let mut seen = vec![false; self.p()];
        for &m in members {
            let slot =
                seen.get_mut(m as usize).ok_or(Error::InvalidArgument("subset names a rank outside the team"))?;
            if std::mem::replace(slot, true) {
                return Err(Error::InvalidArgument("subset names a rank twice"));
            }
        }
        let position = members.iter().position(|&m| m as usize == self.me);
        self.split(position.map(|_| 0), position.unwrap_or(0) as u32)
    }

    // ------------------------------------------------------------ plumbing

    /// Starts a collective: pays the credits owed, takes the next sequence number.
    fn begin(&mut self) -> Result<()> {
        if self.is_broken() {
            return Err(Error::TeamBroken);
        }
        // Taken and put back, so the vector keeps its capacity (no
        // allocation per call).
        let mut owed = std::mem::take(&mut self.owed_credits);
        for &(writer, phase) in &owed {
            self.send_credit(phase, writer)?;
        }
        owed.clear();
        self.owed_credits = owed;
        self.announce_cpu()?;
        self.seq += 1;
        if self.seq >= 1 << (64 - STEP_BITS) {
            return Err(Error::InvalidArgument("team sequence numbers exhausted"));
        }
        Ok(())
    }

    fn sig(&self, step: u32) -> u64 {
        (self.seq << STEP_BITS) | u64::from(step)
    }

    /// Landing area for an all-dependent collective needing `need` bytes.
    fn full_area(&mut self, need: usize) -> Result<Area> {
        if need <= self.lay.full {
            self.full_count += 1;
            return Ok(Area { mem: self.mem, base: self.lay.full_base(self.full_count), large: false, len: need });
        }
        self.large_area(need)
    }

    /// The large region, at least `need` bytes on every member, after a
    /// synchronizing exchange (every member has finished all earlier calls).
    fn large_area(&mut self, need: usize) -> Result<Area> {
        let have = self.large.as_ref().map_or(0, Region::len);
        let grown = if have < need { Some(self.ep.alloc(need.next_multiple_of(1 << 20), Access::ALL)?) } else { None };
        let key = grown.as_ref().or(self.large.as_ref()).map_or(0, |r| r.key().0);
        let mut rec = [0u8; 16];
        rec[..8].copy_from_slice(&key.to_le_bytes());
        rec[8..].copy_from_slice(&(need as u64).to_le_bytes());
        let all = self.allgather_small(&rec)?;
        let mut keys = Vec::with_capacity(self.p());
        for r in all.chunks_exact(16) {
            if u64::from_le_bytes(r[8..].try_into().expect("16-byte record")) != need as u64 {
                return Err(Error::InvalidArgument("collective called with different sizes on different ranks"));
            }
            keys.push(RegionKey(u64::from_le_bytes(r[..8].try_into().expect("16-byte record"))));
        }
        if let Some(region) = grown {
            self.large = Some(region);
        }
        self.large_keys = keys;
        let region = self.large.as_ref().expect("large region present");
        Ok(Area { mem: region.raw(), base: 0, large: true, len: need })
    }

    fn area_key(&self, area: &Area, to: usize) -> RegionKey {
        if area.large {
            self.large_keys[to]
        } else {
            self.keys[to]
        }
    }

    /// Puts `data` at `offset` of `to`'s region `key` and then sets
    /// `flag[me]` there to this collective's `step`. Does not wait.
    fn put_to(&self, to: usize, key: RegionKey, offset: u64, data: &[u8], step: u32) -> Result<()> {
        debug_assert_ne!(to, self.me, "collectives copy to themselves locally");
        if key == self.keys[to] {
            return self.put_scratch(to, offset, data, self.lay.flag(self.me), self.sig(step), true);
        }
        let signal =
            Signal { key: self.keys[to], offset: self.lay.flag(self.me), op: SignalOp::Set, value: self.sig(step) };
        // The data is copied into the send queue before this returns, so the
        // handle can go: a failure shows as a dead peer to whoever waits.
        drop(self.ep.put_signal_nb(self.ranks[to], key, offset, data, signal)?);
        Ok(())
    }

    /// Puts `data` at `offset` of `to`'s scratch region, then sets the word
    /// at `signal_at` there to `value`; by direct stores through the pinned
    /// window when they may go, otherwise by `put_signal_nb`. Does not wait.
    /// `wake` false defers the wake-up of a sleeping peer to
    /// [`Team::wake_members`], which the caller must call before it waits.
    fn put_scratch(&self, to: usize, offset: u64, data: &[u8], signal_at: u64, value: u64, wake: bool) -> Result<()> {
        if let Some(pinned) = &self.pinned[to] {
            if self.ep.put_signal_pinned(pinned, offset, data, signal_at, value, wake).is_some() {
                return Ok(());
            }
        }
        let key = self.keys[to];
        let signal = Signal { key, offset: signal_at, op: SignalOp::Set, value };
        // The data is copied into the send queue before this returns, so the
        // handle can go: a failure shows as a dead peer to whoever waits.
        drop(self.ep.put_signal_nb(self.ranks[to], key, offset, data, signal)?);
        Ok(())
    }

    /// `put_to` into `to`'s part of `area` at `offset` within the area.
    fn put_area(&self, area: &Area, to: usize, offset: usize, data: &[u8], step: u32) -> Result<()> {
        debug_assert!(offset + data.len() <= area.len, "put beyond the landing area");
        self.put_to(to, self.area_key(area, to), area.base + offset as u64, data, step)
    }

    /// A signal without data.
    fn notify(&self, to: usize, step: u32) -> Result<()> {
        self.put_to(to, self.keys[to], 0, &[], step)
    }

    /// [`notify`](Self::notify) to each of `members`, with one fence for
    /// all of them: the signals' line transfers overlap instead of
    /// following one another.
    fn notify_each(&self, members: impl IntoIterator<Item = usize> + Clone, step: u32) -> Result<()> {
        let (flag, value) = (self.lay.flag(self.me), self.sig(step));
        let sent = members.clone().into_iter().try_for_each(|to| self.put_scratch(to, 0, &[], flag, value, false));
        // Those stored into before a failure are woken too.
        self.wake_members(members);
        sent
    }

    /// Wakes whichever of `members` may sleep, after stores into their
    /// scratch regions made with `wake` false (one fence for all).
    fn wake_members(&self, members: impl IntoIterator<Item = usize>) {
        self.ep.wake_pinned(members.into_iter().filter_map(|m| self.pinned[m].as_ref()));
    }

    /// Waits until `from` has signalled `step` of this collective.
    fn wait_from(&self, from: usize, step: u32) -> Result<()> {
        self.wait_word(self.lay.flag(from), self.sig(step), from)
    }

    /// Copies `out.len()` bytes at `offset` of `area` (this rank's) into `out`.
    fn read_area(&self, area: &Area, offset: usize, out: &mut [u8]) {
        let _guard = self.ep.lock();
        area.mem.read(area.base as usize + offset, out);
    }

    /// Runs `f` on `len` bytes at `offset` of this rank's `area`.
    fn with_area<R>(&self, area: &Area, offset: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        let _guard = self.ep.lock();
        area.mem.with_slice(area.base as usize + offset, len, f)
    }

    // ----------------------------------------------- rooted slots, credits

    /// Starts a rooted collective whose per-writer data fits a slot.
    fn rooted_phase(&mut self) -> u64 {
        self.rooted_count += 1;
        self.rooted_count
    }

    /// Waits until `writer`'s rooted data of `phase` is in this rank's slot,
    /// then returns the slot as an area.
    fn wait_slot(&self, phase: u64, writer: usize) -> Result<Area> {
        let signal = self.lay.slot_base(phase, writer);
        self.wait_word(signal, self.sig(1), writer)?;
        Ok(Area { mem: self.mem, base: signal + SLOT_SIGNAL as u64, large: false, len: self.lay.slot })
    }

    /// Puts `data` into my slot at `to` (rooted) and sets the slot's signal
    /// word to step 1 of this collective (the only step a slot carries),
    /// after the credit for my previous write into that slot phase came
    /// back. Does not wait for the put. `wake` as in [`Team::put_scratch`];
    /// if the credit must be waited for, every member stored into without
    /// a wake is woken first.
    fn put_slot(&mut self, phase: u64, to: usize, data: &[u8], wake: bool) -> Result<()> {
        self.put_slot_step(phase, to, data, 1, wake)
    }

    /// [`put_slot`](Self::put_slot) signalling `step` (1: the data is
    /// there; a collective may give other steps a meaning of its own).
    fn put_slot_step(&mut self, phase: u64, to: usize, data: &[u8], step: u32, wake: bool) -> Result<()> {
        let owed = self.last_write[to][(phase % 2) as usize];
        if owed > 0 {
            let credit = self.lay.credit(to);
            if !wake && self.mem.load_u64(credit as usize) < owed {
                self.wake_members(0..self.p());
            }
            self.wait_word(credit, owed, to)?;
        }
        self.last_write[to][(phase % 2) as usize] = phase;
        let signal_at = self.lay.slot_base(phase, self.me);
        self.put_scratch(to, signal_at + SLOT_SIGNAL as u64, data, signal_at, self.sig(step), wake)
    }

    /// Records that `writer`'s rooted data of `phase` was consumed; the
    /// credit goes out when this team's next collective starts. A writer
    /// waits for it only two rooted collectives later, which this rank
    /// enters only after starting the next one, so deferring cannot deadlock.
    fn return_credit(&mut self, phase: u64, writer: usize) -> Result<()> {
        self.owed_credits.push((writer, phase));
        Ok(())
    }

    fn send_credit(&self, phase: u64, writer: usize) -> Result<()> {
        self.put_scratch(writer, 0, &[], self.lay.credit(self.me), phase, true)
    }

    /// Scratch buffer `which` (0 or 1) of at least `len` bytes, contents
    /// unspecified; hand it back with [`Team::put_work`].
    fn take_work(&mut self, which: usize, len: usize) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.work[which]);
        if buf.len() < len {
            buf.resize(len, 0);
        }
        buf
    }

    fn put_work(&mut self, which: usize, buf: Vec<u8>) {
        // Kept only up to a phase's size: one large call should not pin
        // megabytes for the team's lifetime.
        if buf.capacity() <= self.lay.full {
            self.work[which] = buf;
        }
    }

    /// Whether the automatic choice for `block`-byte blocks of allgather or
    /// alltoall is left to trials (`trial.rs`): single-copy reads through a
    /// costly kernel copy, from the size where single copy may pay (as
    /// `MW_COLL_TRIALS` says).
    fn trials_decide(&self, block: usize) -> bool {
        self.p() > 1 && tuning::trial_pays(self.tuning.trials, self.single_copy, block)
    }

    /// Runs `run(candidate)` for one call of an automatic choice that
    /// trials decide between `candidate` 0 (the fixed rule's) and 1, on
    /// `block`-byte blocks: untimed, timed for the trials, or after the
    /// decision (an allgather of every member's scores first). Every
    /// member takes the same step, since it depends only on the calls
    /// the team made.
    fn run_trialed(
        &mut self,
        op: trial::Trialed,
        block: usize,
        mut run: impl FnMut(&mut Self, usize) -> Result<()>,
    ) -> Result<()> {
        let class = trial::size_class(block);
        match self.trials.step(op, class) {
            trial::Step::Run { candidate, timed: false } => run(self, candidate),
            trial::Step::Run { candidate, timed: true } => {
                let start = std::time::Instant::now();
                let result = run(self, candidate);
                let took = result.is_ok().then(|| start.elapsed());
                self.trials.record(op, class, candidate, took);
                result
            }
            trial::Step::Decide => {
                let scores = self.trials.scores(op, class);
                let gathered = self.allgather_small(&scores)?;
                let candidate = self.trials.decide(op, class, &gathered);
                run(self, candidate)
            }
        }
    }

    /// Allgather of small equal-sized records (control data), through the
    /// all-dependent area; Bruck, any team size.
    fn allgather_small(&mut self, mine: &[u8]) -> Result<Vec<u8>> {
        let mut out = vec![0u8; mine.len() * self.p()];
        self.allgather_with(AllgatherAlgo::Bruck, mine, &mut out)?;
        Ok(out)
    }
}

/// Checks the byte lengths of a reduction buffer.
fn check_reduce(dtype: DType, op: ReduceOp, send: &[u8], recv_len: usize) -> Result<usize> {
    if send.len() != recv_len {
        return Err(Error::InvalidArgument("reduction send and receive buffers differ in length"));
    }
    if send.len() % dtype.size() != 0 {
        return Err(Error::InvalidArgument("reduction buffer is not a whole number of elements"));
    }
    if op.is_bitwise() && dtype.is_float() {
        return Err(Error::InvalidArgument("bitwise reduction on a floating-point type"));
    }
    Ok(send.len() / dtype.size())
}

#[cfg(test)]
mod tests {
    use super::{cpu_block, MemberRecord};
    use crate::RegionKey;

    fn on(cpus: u64) -> MemberRecord {
        MemberRecord { key: RegionKey(7), base: 0x1000, shm: true, cpus }
    }

    #[test]
    fn members_bound_to_cores_of_their_own_form_no_blocks() {
        assert_eq!(cpu_block(4, &[on(0b0001), on(0b0010), on(0b0100), on(0b1000)]), 1);
        assert_eq!(cpu_block(2, &[on(0b11), on(0b11)]), 1);
    }

    #[test]
    fn members_sharing_fewer_cpus_form_blocks() {
        assert_eq!(cpu_block(3, &[on(0b11); 3]), 2);
        assert_eq!(cpu_block(4, &[on(0b11); 4]), 2);
        assert_eq!(cpu_block(8, &[on(0b11); 8]), 4);
        // Two members bound to one CPU each, two more to the same pair.
        assert_eq!(cpu_block(4, &[on(0b01), on(0b10), on(0b11), on(0b11)]), 2);
    }

    #[test]
    fn an_unknown_affinity_counts_as_one_cpu() {
        assert_eq!(cpu_block(2, &[on(0), on(0)]), 2);
    }

    #[test]
    fn records_round_trip() {
        let record = on(1 << 63 | 0b101);
        let back = MemberRecord::decode(&record.encode()).expect("decodes");
        assert_eq!((back.key, back.base, back.shm, back.cpus), (record.key, record.base, record.shm, record.cpus));
        assert!(MemberRecord::decode(&[0u8; MemberRecord::LEN - 1]).is_err());
    }
}
