//! The endpoint's IP multicast engine: the group socket, the transfers this
//! rank sends as a root or receives as a member, and the glue between the
//! sans-IO multicast state machines (`mw_proto::mcast`) and real memory,
//! sockets and the reliable path.
//!
//! Owns: [`McastState`] (the lazily opened [`McastSocket`], joined groups
//! with their reference counts, armed receive transfers, active send
//! transfers), the choice of a team's group address and port (derived from
//! the job id and the team, the same on every rank), moving segments
//! between a region and `Mcast` packets, sending feedback to roots as
//! `McastFeedback` operations over the reliable path, and the counters.
//!
//! Must not: decide when IP multicast is used instead of the tree, or
//! agree anything with other ranks (`coll::multicast` does both, with
//! collectives); implement loss recovery (`mw_proto::mcast` does); parse
//! packets (`mw_proto::Endpoint::accept_mcast` does). A segment is written
//! into memory only while a transfer is armed for it, i.e. while the member
//! is inside the collective call that expects it, so a late or replayed
//! segment can never touch memory the application owns again.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};

use mw_proto::mcast::{Arrival, McastConfig, McastDest, McastReceiver, McastSender, ReceiverStats, SenderStats};
use mw_proto::time::Instant as ProtoInstant;
use mw_transport::McastSocket;
use mw_wire::mcast::McastData;
use mw_wire::op::{self, McastRanges, OpRepr};

use crate::endpoint::State;
use crate::region::RawMem;

/// Bytes the root may have in flight beyond the slowest member: the same on
/// every rank (receivers derive their report interval from it), well below
/// the socket buffer asked for.
const WINDOW_BYTES: usize = 512 << 10;
/// Receive buffer asked for on the group socket.
const SOCKET_BUFFER: usize = 4 << 20;
/// Group ports are taken from here up, above Linux's default ephemeral
/// range (32768-60999), so an ordinary socket of the host rarely holds one.
const PORT_BASE: u16 = 61_000;
const PORT_SPAN: u64 = 4_000;

/// SplitMix64's finalizer: a good 64-bit mix (not a secret: group addresses
/// and team identities only need to differ, not to be unguessable).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A team's multicast identity from its members' scratch keys (identical on
/// every member, distinct between teams of a job).
pub(crate) fn team_identity(keys: impl IntoIterator<Item = u64>) -> u64 {
    keys.into_iter().fold(0x006d_776d_6361_7374, |acc, k| mix(acc ^ k))
}

/// The group address of team `team` of job `job`: in 239.192.0.0/14, the
/// IPv4 organization-local scope (RFC 2365), 2^18 groups.
pub(crate) fn group_address(job: u64, team: u64) -> Ipv4Addr {
    let h = (mix(job ^ mix(team)) & 0x3_ffff) as u32;
    Ipv4Addr::from(0xefc0_0000 | h)
}

/// The group port of job `job`, unless configured (`MW_MCAST_PORT`).
pub(crate) fn group_port(job: u64, configured: Option<u16>) -> u16 {
    configured.unwrap_or(PORT_BASE + (mix(job) % PORT_SPAN) as u16)
}

/// Counters of the multicast engine (part of [`crate::CoreStats`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct McastStats {
    /// Multicast calls this rank rooted over IP multicast.
    pub ip_transfers: u64,
    /// Multicast calls this rank rooted over the tree although the team
    /// had IP multicast (a member reported trouble, or sending failed).
    pub tree_fallbacks: u64,
    /// Segments sent to a group (first sends and repairs).
    pub group_sends: u64,
    /// Segments sent by unicast (repairs, or everything after a group failure).
    pub unicast_sends: u64,
    /// Of the group sends, repairs.
    pub group_repairs: u64,
    /// Nacks received from members.
    pub nacks_received: u64,
    /// Segments received first from a group.
    pub received_via_group: u64,
    /// Segments received first by unicast repair.
    pub received_via_unicast: u64,
    /// Copies of segments already held.
    pub duplicates: u64,
    /// Nacks sent to roots.
    pub nacks_sent: u64,
    /// Valid segments for no transfer armed here (late, early or another team's).
    pub stray: u64,
    /// Sends to a group the kernel refused (no route, not permitted).
    pub send_errors: u64,
    /// Failures to open the group socket or join a group.
    pub setup_failures: u64,
}

/// Bytes of segments encoded for one batched send (a GSO send carries at
/// most 64 KiB anyway).
const BATCH_BYTES: usize = 256 << 10;

/// Scratch of the batched send: packets back to back and where each goes.
#[derive(Debug, Default)]
struct Batch {
    buf: Vec<u8>,
    /// (destination, start in `buf`, length).
    items: Vec<(SocketAddr, usize, usize)>,
}

/// A transfer this rank receives as a member.
#[derive(Debug)]
struct RxTransfer {
    team: u64,
    transfer: u64,
    root: u32,
    total: u64,
    mem: RawMem,
    base: usize,
    recv: McastReceiver,
}

/// A transfer this rank sends as the root.
#[derive(Debug)]
struct TxTransfer {
    team: u64,
    transfer: u64,
    group: SocketAddr,
    /// World ranks of the members, in the sender's member order.
    members: Vec<u32>,
    total: u64,
    mem: RawMem,
    base: usize,
    send: McastSender,
}

/// Where a multicast receive stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxStatus {
    /// Not armed (never, or disarmed).
    Unknown,
    /// Segments still missing.
    Pending,
    /// Everything arrived and "done" was handed to the reliable path.
    Complete(ReceiverStats),
}

/// The multicast engine of one endpoint.
#[derive(Debug)]
pub(crate) struct McastState {
    job: u64,
    port: u16,
    iface: Option<Ipv4Addr>,
    socket: Option<McastSocket>,
    send_enabled: bool,
    joined: HashMap<Ipv4Addr, u32>,
    rx: Vec<RxTransfer>,
    tx: Vec<TxTransfer>,
    cfg: Option<McastConfig>,
    /// Segments encoded for one `sendmmsg`.
    batch: Batch,
    /// Drops datagrams arriving from the group socket (`MW_FAULT_MCAST_DROP`).
    rx_fault: Option<mw_transport::FaultInjector>,
    pub stats: McastStats,
}

impl McastState {
    /// Datagrams the multicast socket dropped as longer than its buffer
    /// (0 while no group socket is open).
    pub(crate) fn truncated_datagrams(&self) -> u64 {
        self.socket.as_ref().map_or(0, McastSocket::truncated_datagrams)
    }

    /// The engine of an endpoint of job `job` whose data path is bound to
    /// `local` (groups are joined on that interface; IPv6 has no multicast
    /// support here).
    pub fn new(job: u64, local: IpAddr, port: Option<u16>) -> McastState {
        let iface = match local {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(v6) => v6.to_ipv4_mapped(),
        };
        McastState {
            job,
            port: group_port(job, port),
            iface,
            socket: None,
            send_enabled: false,
            joined: HashMap::new(),
            rx: Vec::new(),
            tx: Vec::new(),
            cfg: None,
            batch: Batch::default(),
            rx_fault: None,
            stats: McastStats::default(),
        }
    }

    /// Drops each datagram arriving from a group with probability `drop`
    /// (decisions seeded by `seed`); 0 turns it off.
    pub fn set_receive_drop(&mut self, drop: f64, seed: u64) {
        let cfg = mw_transport::FaultConfig { drop: drop.clamp(0.0, 1.0), dup: 0.0, reorder: 0.0, seed };
        self.rx_fault = cfg.is_active().then(|| mw_transport::FaultInjector::new(cfg).expect("a valid probability"));
    }

    /// The group socket's descriptor, once open (waiters poll it).
    pub fn fd(&self) -> Option<std::os::fd::RawFd> {
        self.socket.as_ref().map(std::os::fd::AsRawFd::as_raw_fd)
    }

    /// Earliest instant a member's timer needs the progress engine.
    pub fn poll_timeout(&self) -> Option<ProtoInstant> {
        self.rx.iter().filter_map(|t| t.recv.poll_timeout()).min()
    }

    /// Nothing armed or sending.
    pub fn is_idle(&self) -> bool {
        self.rx.is_empty() && self.tx.is_empty()
    }

    /// Whether a member's receive of `team`'s `transfer` is complete.
    pub fn rx_status(&self, team: u64, transfer: u64) -> RxStatus {
        match self.rx.iter().find(|t| t.team == team && t.transfer == transfer) {
            None => RxStatus::Unknown,
            Some(t) if t.recv.done_reported() => RxStatus::Complete(t.recv.stats()),
            Some(_) => RxStatus::Pending,
        }
    }

    /// Whether the root's transfer of `team` completed (`None`: no such transfer).
    pub fn tx_complete(&self, team: u64, transfer: u64) -> Option<bool> {
        self.tx.iter().find(|t| t.team == team && t.transfer == transfer).map(|t| t.send.is_complete())
    }

    fn config(&mut self, proto: &mw_proto::Endpoint) -> McastConfig {
        self.cfg.get_or_insert_with(|| McastConfig::new(proto.mcast_segment_size(), WINDOW_BYTES)).clone()
    }

    /// Arms the receive of `team`'s `transfer` of `total` bytes from world
    /// rank `root` into `mem` at `base` (which must hold them). From now
    /// until [`disarm_rx`](Self::disarm_rx) its segments are written there.
    #[allow(clippy::too_many_arguments)]
    pub fn arm_rx(
        &mut self,
        proto: &mw_proto::Endpoint,
        now: ProtoInstant,
        team: u64,
        transfer: u64,
        root: u32,
        total: u64,
        mem: RawMem,
        base: usize,
    ) {
        assert!(base as u64 + total <= mem.len() as u64, "multicast armed past the end of its region");
        let cfg = self.config(proto);
        let segments = cfg.segments(total).expect("transfer sizes are checked by the caller");
        self.rx.retain(|t| t.team != team);
        self.rx.push(RxTransfer {
            team,
            transfer,
            root,
            total,
            mem,
            base,
            recv: McastReceiver::new(cfg, segments, now),
        });
    }

    /// Stops receiving `team`'s transfer: later segments are dropped.
    pub fn disarm_rx(&mut self, team: u64) -> Option<ReceiverStats> {
        let at = self.rx.iter().position(|t| t.team == team)?;
        let t = self.rx.swap_remove(at);
        let stats = t.recv.stats();
        self.stats.received_via_group += u64::from(stats.via_group);
        self.stats.received_via_unicast += u64::from(stats.via_unicast);
        self.stats.duplicates += stats.duplicates;
        self.stats.nacks_sent += stats.nacks;
        Some(stats)
    }

    /// One datagram that claims to be a multicast segment, from the group
    /// socket or (a repair) the data path's: checked by the protocol, then
    /// written into the armed transfer it belongs to, if any, at the place
    /// its index says (nothing else is trusted).
    pub fn on_datagram(&mut self, proto: &mut mw_proto::Endpoint, now: ProtoInstant, datagram: &[u8]) {
        let Ok(seg) = proto.accept_mcast(datagram) else {
            return; // counted by the protocol's drop counters
        };
        let data = seg.data;
        let Some(t) = self.rx.iter_mut().find(|t| t.team == data.team && t.transfer == data.transfer) else {
            self.stats.stray += 1;
            return;
        };
        let Some(cfg) = self.cfg.as_ref() else {
            return;
        };
        let (offset, want_len) = cfg.segment_range(t.total, seg.index);
        if seg.from != t.root || data.total != t.total || data.offset != offset || data.data.len() != want_len {
            self.stats.stray += 1;
            return;
        }
        if t.recv.handle_segment(now, seg.index, seg.to_group) == Arrival::New {
            t.mem.write(t.base + offset as usize, data.data);
        }
    }

    /// Feedback from `peer` delivered over the reliable path.
    pub fn on_feedback(&mut self, peer: u32, fb: &op::McastFeedback<'_>) {
        let Some(t) = self.tx.iter_mut().find(|t| t.team == fb.team && t.transfer == fb.transfer) else {
            return; // a finished transfer: the member re-Nacked before it heard the end
        };
        let Some(member) = t.members.iter().position(|&r| r == peer) else {
            return;
        };
        if !fb.missing.is_empty() {
            self.stats.nacks_received += 1;
        }
        t.send.handle_feedback(member as u32, fb.contig, fb.done, fb.missing.iter());
    }
}

impl State {
    /// Opens the group socket if needed, lets the data-path socket send to
    /// groups, and joins `team`'s group. Every failure is an `Err` with the
    /// kernel's reason: the caller falls back to the tree.
    pub(crate) fn mcast_join(&mut self, team: u64) -> io::Result<()> {
        let result = self.mcast_join_inner(team);
        if result.is_err() {
            self.mcast.stats.setup_failures += 1;
        }
        result
    }

    fn mcast_join_inner(&mut self, team: u64) -> io::Result<()> {
        let iface = self
            .mcast
            .iface
            .ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, "the data path is IPv6: no IPv4 multicast"))?;
        if self.mcast.socket.is_none() {
            self.mcast.socket = Some(McastSocket::bind(self.mcast.port, iface, SOCKET_BUFFER)?);
        }
        if !self.mcast.send_enabled {
            self.udp.enable_multicast_send(iface)?;
            self.mcast.send_enabled = true;
        }
        let group = group_address(self.mcast.job, team);
        let count = self.mcast.joined.entry(group).or_insert(0);
        if *count == 0 {
            self.mcast.socket.as_ref().expect("opened above").join(group)?;
        }
        *count += 1;
        Ok(())
    }

    /// Leaves `team`'s group (when no other team of this rank uses it).
    pub(crate) fn mcast_leave(&mut self, team: u64) {
        let group = group_address(self.mcast.job, team);
        if let Some(count) = self.mcast.joined.get_mut(&group) {
            *count -= 1;
            if *count == 0 {
                self.mcast.joined.remove(&group);
                if let Some(socket) = &self.mcast.socket {
                    let _ = socket.leave(group);
                }
            }
        }
    }

    /// Starts sending `team`'s `transfer`: `total` bytes of `mem` at `base`
    /// to the world ranks `members` (all armed already). `group_only`: a
    /// probe, repaired through the group only.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mcast_start_tx(
        &mut self,
        now: ProtoInstant,
        team: u64,
        transfer: u64,
        members: Vec<u32>,
        total: u64,
        mem: RawMem,
        base: usize,
        group_only: bool,
    ) {
        let cfg = self.mcast.config(&self.proto);
        let segments = cfg.segments(total).expect("transfer sizes are checked by the caller");
        let mut send = McastSender::new(cfg, segments, members.len() as u32);
        if group_only {
            send.set_group_only();
        }
        let group = SocketAddr::V4(SocketAddrV4::new(group_address(self.mcast.job, team), self.mcast.port));
        self.mcast.tx.retain(|t| t.team != team);
        self.mcast.tx.push(TxTransfer { team, transfer, group, members, total, mem, base, send });
        self.mcast_progress(now);
    }

    /// Ends the root's transfer of `team`; its counters.
    pub(crate) fn mcast_finish_tx(&mut self, team: u64) -> Option<(SenderStats, bool)> {
        let at = self.mcast.tx.iter().position(|t| t.team == team)?;
        let t = self.mcast.tx.swap_remove(at);
        let stats = t.send.stats();
        self.mcast.stats.group_sends += stats.group_sends;
        self.mcast.stats.unicast_sends += stats.unicast_sends;
        self.mcast.stats.group_repairs += stats.group_repairs;
        Some((stats, t.send.group_ok()))
    }

    /// Receives what the group socket holds (at most `max` datagrams).
    pub(crate) fn mcast_receive(&mut self, now: ProtoInstant, max: usize) -> bool {
        let mut worked = false;
        for _ in 0..max {
            let Some(socket) = self.mcast.socket.as_mut() else {
                return worked;
            };
            match socket.recv_one(&mut self.rx_buf) {
                Ok(Some((len, _))) => {
                    worked = true;
                    let dropped =
                        self.mcast.rx_fault.as_mut().is_some_and(|f| f.decide() == mw_transport::FaultAction::Drop);
                    if !dropped {
                        self.mcast_datagram(now, 0..len);
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        worked
    }

    /// One `Mcast` datagram in `rx_buf[at]`, from the group socket or
    /// (a repair) the data path's.
    pub(crate) fn mcast_datagram(&mut self, now: ProtoInstant, at: std::ops::Range<usize>) {
        let State { proto, rx_buf, mcast, .. } = self;
        mcast.on_datagram(proto, now, &rx_buf[at]);
    }

    /// Sends what the roots' windows allow and the members' feedback.
    pub(crate) fn mcast_progress(&mut self, now: ProtoInstant) -> bool {
        if self.mcast.is_idle() {
            return false;
        }
        let mut worked = false;
        for i in 0..self.mcast.tx.len() {
            worked |= self.mcast_pump(i);
        }
        let mut feedback = Vec::new();
        for t in &mut self.mcast.rx {
            while let Some(fb) = t.recv.poll_feedback(now) {
                feedback.push((t.root, t.team, t.transfer, fb));
            }
        }
        for (root, team, transfer, fb) in feedback {
            worked = true;
            let repr = OpRepr::McastFeedback(op::McastFeedback {
                team,
                transfer,
                contig: fb.contig,
                done: fb.done,
                missing: McastRanges::from_pairs(&fb.missing),
            });
            // A dead root fails the waiting member through `dead`.
            let _ = self.send_op(now, root, &repr, &[], None);
        }
        worked
    }

    /// Sends the segments transfer `i` may send now: encoded back to back
    /// and handed to the kernel in batches (`sendmmsg`, with UDP GSO for
    /// runs to the group), or one by one through the fault injector when
    /// one is configured (every datagram meets its fate).
    fn mcast_pump(&mut self, i: usize) -> bool {
        let mut worked = false;
        loop {
            let State { proto, peers, fault, udp, stats, mcast, .. } = self;
            let McastState { tx, cfg, batch, stats: mstats, .. } = mcast;
            let t = &mut tx[i];
            let cfg = cfg.as_ref().expect("set when the transfer started");
            let room = proto.config().max_datagram + mw_proto::TRAILER_RESERVE;
            batch.buf.resize(BATCH_BYTES.max(room), 0);
            batch.items.clear();
            let mut used = 0;
            while batch.items.len() < mw_transport::udp::SEND_CHUNK && used + room <= batch.buf.len() {
                let Some(send) = t.send.poll_send() else { break };
                let (offset, len) = cfg.segment_range(t.total, send.segment);
                let (to, dst) = match send.dest {
                    McastDest::Group => (None, t.group),
                    McastDest::Member(m) => {
                        let rank = t.members[m as usize];
                        (Some(rank), peers[rank as usize])
                    }
                };
                let out = &mut batch.buf[used..used + room];
                let built = t.mem.with_slice(t.base + offset as usize, len, |data| {
                    let seg = McastData { team: t.team, transfer: t.transfer, total: t.total, offset, data };
                    proto.encode_mcast(to, send.segment, &seg, out)
                });
                if let Ok(len) = built {
                    batch.items.push((dst, used, len));
                    used += len;
                } // else a dead member: its waiters fail on their own
            }
            if batch.items.is_empty() {
                return worked;
            }
            worked = true;
            let group = t.group;
            let buf = &batch.buf;
            let mut failed_group = false;
            match fault.as_mut() {
                Some(fault) => {
                    for &(dst, at, len) in &batch.items {
                        let sent = crate::transmit::send_datagram(udp, Some(fault), stats, &buf[at..at + len], dst);
                        failed_group |= sent.is_err() && dst == group;
                    }
                }
                None => {
                    let msgs: Vec<(SocketAddr, &[u8])> =
                        batch.items.iter().map(|&(dst, at, len)| (dst, &buf[at..at + len])).collect();
                    let mut done = 0;
                    let mut full = 0;
                    while done < msgs.len() {
                        let refused = match udp.send_batch(&msgs[done..]) {
                            Ok(n) if n > 0 => {
                                done += n;
                                continue;
                            }
                            // The socket is full: transient, as in `send_retrying`.
                            Ok(_) => false,
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                            Err(_) => true,
                        };
                        full += 1;
                        if refused || full >= 1000 {
                            // Count it and skip it: a member Nacks what it lacks.
                            stats.send_errors += 1;
                            failed_group |= refused && msgs[done].0 == group;
                            done += 1;
                        } else {
                            std::thread::yield_now();
                        }
                    }
                }
            }
            if failed_group {
                mstats.send_errors += 1;
                t.send.group_failed();
            }
        }
    }
}

impl crate::Endpoint {
    /// See [`State::mcast_join`]; waiters poll the group socket from now on.
    pub(crate) fn mcast_join(&self, team: u64) -> io::Result<()> {
        let mut state = self.lock();
        state.mcast_join(team)?;
        if let Some(fd) = state.mcast.fd() {
            self.shared.set_mcast_fd(fd);
        }
        Ok(())
    }

    /// See [`State::mcast_leave`].
    pub(crate) fn mcast_leave(&self, team: u64) {
        self.lock().mcast_leave(team);
    }

    /// See [`McastState::arm_rx`].
    pub(crate) fn mcast_arm(&self, team: u64, transfer: u64, root: u32, total: u64, mem: RawMem, base: usize) {
        let mut state = self.lock();
        let now = self.shared.now();
        let State { proto, mcast, .. } = &mut *state;
        mcast.arm_rx(proto, now, team, transfer, root, total, mem, base);
    }

    /// See [`McastState::disarm_rx`].
    pub(crate) fn mcast_disarm(&self, team: u64) -> Option<ReceiverStats> {
        self.lock().mcast.disarm_rx(team)
    }

    /// See [`State::mcast_start_tx`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mcast_send(
        &self,
        team: u64,
        transfer: u64,
        members: Vec<u32>,
        total: u64,
        mem: RawMem,
        base: usize,
        group_only: bool,
    ) {
        let mut state = self.lock();
        let now = self.shared.now();
        state.mcast_start_tx(now, team, transfer, members, total, mem, base, group_only);
        state.transmit(now);
    }

    /// The root of `team`'s `transfer` sends to the group once more what
    /// some member still lacks (`McastSender::repeat_to_group`); how many
    /// members reported done (`None`: no such transfer).
    pub(crate) fn mcast_repeat(&self, team: u64, transfer: u64) -> Option<u32> {
        let mut state = self.lock();
        let now = self.shared.now();
        let t = state.mcast.tx.iter_mut().find(|t| t.team == team && t.transfer == transfer)?;
        t.send.repeat_to_group();
        let done = t.send.members_done();
        state.mcast_progress(now);
        state.transmit(now);
        Some(done)
    }

    /// See [`State::mcast_finish_tx`].
    pub(crate) fn mcast_finish(&self, team: u64) -> Option<(SenderStats, bool)> {
        self.lock().mcast_finish_tx(team)
    }

    /// Test hook: from now on this rank drops each datagram arriving from a
    /// multicast group with probability `drop` (as `MW_FAULT_MCAST_DROP`
    /// does from the start), e.g. 1 to make a group that worked go silent.
    #[doc(hidden)]
    pub fn set_mcast_receive_drop(&self, drop: f64) {
        let seed = u64::from(self.rank()).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x6d63;
        self.lock().mcast.set_receive_drop(drop, seed);
    }

    /// Updates the multicast counters.
    pub(crate) fn mcast_count(&self, f: impl FnOnce(&mut McastStats)) {
        f(&mut self.lock().mcast.stats);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_addresses_are_organization_local_and_spread() {
        let mut seen = std::collections::HashSet::new();
        for team in 0..1000u64 {
            let addr = group_address(7, mix(team));
            let o = addr.octets();
            assert!(addr.is_multicast() && o[0] == 239 && (192..=195).contains(&o[1]), "{addr}");
            seen.insert(addr);
        }
        assert!(seen.len() > 990, "1000 teams share {} addresses", seen.len());
        assert_ne!(group_address(1, 5), group_address(2, 5), "jobs differ");
        assert_eq!(group_port(9, Some(1234)), 1234);
        assert!((PORT_BASE..PORT_BASE + PORT_SPAN as u16).contains(&group_port(9, None)));
        assert_ne!(team_identity([1, 2, 3]), team_identity([1, 2, 4]));
        assert_eq!(team_identity([5, 6]), team_identity([5, 6]));
    }
}
