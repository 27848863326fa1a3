//! The endpoint: one per process, holding a connection to every rank of the job.
//!
//! Owns: header validation and drop accounting for every received datagram
//! (size, checksum, job, MAC, target, rank, epoch), dispatch to the right [`Peer`], the
//! round-robin list of peers with something to send, the endpoint-wide timer
//! queue, the event queue, and peer death and restart.
//!
//! Must not: do I/O or read a clock; scan all peers per packet (only
//! `is_quiescent` looks at every peer); allocate on the steady-state path of
//! an in-order message (buffers and queues are reused).

use crate::auth;
use crate::peer::{Ids, Peer};
use crate::time::Instant;
use crate::timer::{TimerKind, TimerQueue};
use crate::{Config, DropReason, Event, McastSegment, MsgId, PeerStats, Stats, SubmitError, Transmit, TransmitParts};
use mw_wire::mcast::{McastData, GROUP_RANK};
use mw_wire::{Flags, HeaderRepr, PacketType, HEADER_LEN};
use std::collections::VecDeque;

/// The protocol state of one process: reliable, ordered, exactly-once
/// message delivery to every other rank of a job, over an unreliable datagram
/// network, without doing any I/O itself.
///
/// # Call order
///
/// The caller owns the socket and the clock and drives the endpoint with
/// them (this is quinn-proto's `Connection` discipline):
///
/// 1. Feed every received datagram to [`handle_datagram`](Self::handle_datagram);
///    whole messages come out of its `deliver` callback, in order per peer.
/// 2. Submit outgoing messages with [`submit`](Self::submit) (and
///    [`request_ack`](Self::request_ack) when about to wait on completion).
///    Anything submitted after a delivery — e.g. a reply — is ordered before
///    the acknowledgement of that delivery, because acks are only generated
///    in step 3.
/// 3. Call [`poll_transmit`](Self::poll_transmit) until it returns `None`,
///    sending each datagram to the rank it names.
/// 4. Drain [`poll_event`](Self::poll_event) (completions, dead and restarted
///    peers, raw datagrams).
/// 5. Sleep until a datagram arrives or [`poll_timeout`](Self::poll_timeout)
///    passes; at that instant call [`handle_timeout`](Self::handle_timeout),
///    then go back to step 3.
///
/// After *any* `handle_*` or `submit` call, steps 3 and 4 must run before the
/// caller blocks, or packets and events may sit unsent. Time passed in must
/// never go backwards.
#[derive(Debug)]
pub struct Endpoint {
    config: Config,
    ids: Ids,
    n_ranks: u32,
    /// Indexed by rank; our own slot is never used.
    peers: Vec<Peer>,
    /// Peers that may have something to send, each at most once.
    ready: VecDeque<u32>,
    timers: TimerQueue,
    events: VecDeque<Event>,
    stats: Stats,
}

impl Endpoint {
    /// Creates the endpoint of rank `my_rank` in a job of `n_ranks` ranks
    /// identified by `job_id`. `my_epoch` identifies this incarnation: random,
    /// nonzero, chosen by the caller (the protocol draws no random numbers).
    ///
    /// # Panics
    ///
    /// If `config` fails [`Config::validate`], `my_epoch` is 0, or `my_rank >= n_ranks`.
    pub fn new(config: Config, job_id: u64, my_rank: u32, my_epoch: u32, n_ranks: u32) -> Endpoint {
        if let Err(e) = config.validate() {
            panic!("invalid memwire protocol config: {e}");
        }
        assert!(my_epoch != 0, "epoch 0 means 'unknown' on the wire");
        assert!(my_rank < n_ranks, "rank {my_rank} outside a job of {n_ranks}");
        let peers = (0..n_ranks).map(|rank| Peer::new(&config, rank)).collect();
        Endpoint {
            config,
            ids: Ids { job: job_id, rank: my_rank, epoch: my_epoch },
            n_ranks,
            peers,
            ready: VecDeque::new(),
            timers: TimerQueue::default(),
            events: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    /// Notes a call at `now`. The caller promised to call again by our
    /// earliest timer; being more than a quarter of `peer_dead_after` past it
    /// means *we* were not running (the process was stopped, e.g. for gang
    /// scheduling, or starved of CPU): our peers' silence over that gap
    /// proves nothing, and their packets may still sit unread in the socket.
    /// Every peer gets the benefit of the doubt: silence counts from now. A
    /// peer that really died is still declared dead, one deadline later.
    fn note_call(&mut self, now: Instant) {
        let late =
            self.timers.next().is_some_and(|due| now.saturating_duration_since(due) > self.config.peer_dead_after / 4);
        if !late {
            return;
        }
        self.stats.stalls_forgiven += 1;
        for index in 0..self.peers.len() {
            let p = &mut self.peers[index];
            if p.dead || index == self.ids.rank as usize {
                continue;
            }
            if p.last_heard.is_some() {
                p.last_heard = Some(now);
            }
            if p.busy_since.is_some() {
                p.busy_since = Some(now);
            }
            if p.keepalive_sent.is_some() {
                p.keepalive_sent = Some(now);
            }
            self.refresh(now, index);
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This endpoint's rank.
    pub fn rank(&self) -> u32 {
        self.ids.rank
    }

    /// This endpoint's epoch.
    pub fn epoch(&self) -> u32 {
        self.ids.epoch
    }

    fn peer_index(&self, peer: u32) -> Option<usize> {
        (peer < self.n_ranks && peer != self.ids.rank).then_some(peer as usize)
    }

    /// Queues one message, the concatenation of `parts`, for reliable
    /// in-order delivery to `peer`. The bytes are copied. Any length up to
    /// `Config::max_message` (longer: [`SubmitError::TooLarge`]), zero
    /// included; it is cut into Data packets of `Config::segment_size` bytes.
    /// The caller bounds memory with [`queued_bytes`](Self::queued_bytes).
    pub fn submit(&mut self, now: Instant, peer: u32, parts: &[&[u8]]) -> Result<MsgId, SubmitError> {
        let index = self.peer_index(peer).ok_or(SubmitError::BadRank)?;
        if self.peers[index].dead {
            return Err(SubmitError::PeerDead);
        }
        if parts.iter().map(|p| p.len()).sum::<usize>() > self.config.max_message {
            return Err(SubmitError::TooLarge);
        }
        self.note_call(now);
        let id = self.peers[index].send.submit(parts);
        self.stats.messages_submitted += 1;
        self.mark_ready(index);
        self.refresh(now, index);
        Ok(id)
    }

    /// Asks `peer` to acknowledge promptly: the caller is about to wait for
    /// completion (flush, quiet). The last packet queued so far will carry
    /// `ACK_NOW`; if everything was already sent, a Probe goes out instead
    /// (at most one until the peer acknowledges something).
    pub fn request_ack(&mut self, now: Instant, peer: u32) {
        let Some(index) = self.peer_index(peer) else {
            return;
        };
        let p = &mut self.peers[index];
        if p.dead {
            return;
        }
        if !p.send.all_sent() {
            p.send.request_ack_on_last();
        } else if p.send.outstanding() && !p.ack_probe_sent {
            p.ack_probe_sent = true;
            p.probe_owed = true;
        }
        self.mark_ready(index);
        self.refresh(now, index);
    }

    /// Feeds one received datagram. Whole messages that become deliverable
    /// are passed to `deliver(peer, message)` in order per peer, exactly once,
    /// byte-exact (a single-packet message that arrives in order straight
    /// from `datagram`, without a copy). A rejected datagram returns why; it
    /// is counted in [`Stats::drops`] and has no other effect (except that a
    /// duplicate's ack information is still used, and a stale-epoch packet is
    /// answered with a Reset).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        datagram: &[u8],
        deliver: &mut dyn FnMut(u32, &[u8]),
    ) -> Result<(), DropReason> {
        self.stats.packets_received += 1;
        self.stats.bytes_received += datagram.len() as u64;
        self.note_call(now);
        let result = self.receive(now, datagram, deliver);
        if let Err(reason) = &result {
            self.stats.drops.count(reason);
        }
        result
    }

    /// The checks every received datagram passes first, in this order:
    /// size, checksum (before any header field but magic and version is
    /// read), header syntax, job, MAC or checksum flag. Also says whether
    /// the packet carries a valid MAC (see `auth::verify`).
    fn admit<'a>(&self, datagram: &'a [u8]) -> Result<(HeaderRepr, &'a [u8], bool), DropReason> {
        if datagram.len() > self.config.max_datagram {
            return Err(DropReason::Oversized);
        }
        auth::check_checksum(&self.config, datagram)?;
        let (repr, payload) = HeaderRepr::parse_packet(datagram).map_err(DropReason::Malformed)?;
        if repr.job_id != self.ids.job {
            return Err(DropReason::WrongJob);
        }
        let proven = auth::verify(&self.config, datagram, &repr)?;
        Ok((repr, payload, proven))
    }

    fn receive(
        &mut self,
        now: Instant,
        datagram: &[u8],
        deliver: &mut dyn FnMut(u32, &[u8]),
    ) -> Result<(), DropReason> {
        let (repr, payload, proven) = self.admit(datagram)?;
        if repr.packet_type == PacketType::Mcast {
            // Outside any connection: `accept_mcast` takes these; here one
            // is misrouted and must not touch connection state.
            return Err(DropReason::WrongTarget);
        }
        if repr.dst_rank != self.ids.rank {
            return Err(DropReason::WrongTarget);
        }
        let index = self.peer_index(repr.src_rank).ok_or(DropReason::UnknownPeer)?;
        let src = repr.src_rank;
        if repr.dst_epoch != 0 && repr.dst_epoch != self.ids.epoch {
            // Meant for an earlier incarnation of us: tell the sender we are
            // new (one Reset per poll round at most; never answer a Reset).
            let p = &mut self.peers[index];
            if repr.packet_type != PacketType::Reset && !p.is_retired(repr.src_epoch) {
                p.reset_owed = Some(repr.src_epoch);
                self.mark_ready(index);
            }
            return Err(DropReason::StaleEpoch);
        }
        let p = &mut self.peers[index];
        if p.is_retired(repr.src_epoch) {
            return Err(DropReason::StaleEpoch); // a late packet of the peer's previous life
        }
        // Without authentication, a packet that would set or change the
        // peer's epoch must prove it was built with the job key (an epoch
        // proof, `Config::epoch_key`): a restarted peer's packets do until
        // it hears from us. Setting an unknown epoch needs no proof from a
        // packet that names our current epoch (the peer has heard from us,
        // through a proof of ours). Anything else would let one forged or
        // corrupted datagram make a live peer look restarted.
        if self.config.epoch_key.is_some()
            && !proven
            && p.epoch != repr.src_epoch
            && (p.epoch != 0 || repr.dst_epoch != self.ids.epoch)
        {
            return Err(DropReason::UnprovenEpoch);
        }
        if p.epoch == 0 {
            if p.dead && repr.dst_epoch == 0 {
                // Declared dead before we ever heard from it, and it has never
                // heard from us either: a new incarnation (an old one that had
                // received our data would address our epoch). Talk to it anew.
                self.restart(index, repr.src_epoch);
            } else {
                p.epoch = repr.src_epoch;
            }
        } else if p.epoch != repr.src_epoch {
            self.restart(index, repr.src_epoch);
        }
        let p = &mut self.peers[index];
        if p.dead {
            return Err(DropReason::DeadPeer);
        }
        p.last_heard = Some(now);
        p.keepalive_sent = None;
        let mut result = Ok(());
        match repr.packet_type {
            PacketType::Data => {
                self.stats.data_received += 1;
                let deliver_from = &mut |message: &[u8]| deliver(src, message);
                let drops = &mut self.stats.drops;
                match p.recv.on_data(now, &self.config, repr.seq, repr.flags, payload, drops, deliver_from) {
                    Ok(received) => {
                        self.stats.messages_delivered += u64::from(received.delivered);
                        if let Some(reason) = received.rejected {
                            result = Err(reason);
                        }
                    }
                    Err(reason) => result = Err(reason),
                }
                if repr.flags.contains(Flags::ACK) {
                    self.on_ack(now, index, &repr, repr.seq.wrapping_add(1));
                }
            }
            PacketType::Ack => self.on_ack(now, index, &repr, repr.seq),
            PacketType::Nack => {
                self.stats.nacks_received += 1;
                self.on_ack(now, index, &repr, repr.seq);
            }
            PacketType::Probe => p.recv.request_ack_now(),
            PacketType::Raw => {
                self.stats.raw_received += 1;
                self.events.push_back(Event::Raw { peer: src, data: payload.to_vec() });
            }
            PacketType::Reset => {} // the epoch check above did its work
            PacketType::Mcast => {} // returned above: never reaches a connection
        }
        let p = &mut self.peers[index];
        if let Some(upto) = p.send.release(p.recv.rcv_nxt()) {
            self.push_acked(src, upto);
        }
        self.mark_ready(index);
        self.refresh(now, index);
        result
    }

    fn on_ack(&mut self, now: Instant, index: usize, repr: &HeaderRepr, watermark: u32) {
        let nack = repr.packet_type == PacketType::Nack;
        let p = &mut self.peers[index];
        if p.send.on_ack(now, repr.ack, repr.sack, nack, watermark, &mut p.rtt) {
            p.ack_probe_sent = false;
        }
    }

    fn push_acked(&mut self, peer: u32, upto: MsgId) {
        if let Some(Event::Acked { peer: last, upto: prev }) = self.events.back_mut() {
            if *last == peer {
                *prev = upto;
                return;
            }
        }
        self.events.push_back(Event::Acked { peer, upto });
    }

    /// The peer came back with `epoch`: fail what was pending and start over.
    #[cold]
    fn restart(&mut self, index: usize, epoch: u32) {
        let p = &mut self.peers[index];
        let failed_upto = if p.dead { None } else { p.send.failed_upto() };
        p.reset(&self.config, Some(epoch));
        self.stats.peers_restarted += 1;
        self.events.push_back(Event::PeerRestarted { peer: index as u32, failed_upto });
    }

    /// Silence while waiting: fail everything pending toward the peer.
    #[cold]
    fn declare_dead(&mut self, index: usize) {
        let p = &mut self.peers[index];
        p.reset(&self.config, None);
        p.dead = true;
        self.stats.peers_dead += 1;
        self.events.push_back(Event::PeerDead { peer: index as u32 });
    }

    /// Writes the next datagram to send into `buf` and says where it goes;
    /// `None` when nothing is to be sent now. Call until `None` after every
    /// `handle_*` or `submit` call. Acks are generated here, never earlier.
    /// [`poll_transmit_parts`](Self::poll_transmit_parts) is the same without
    /// copying the payload.
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than `Config::max_datagram`.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        assert!(buf.len() >= self.config.max_datagram, "transmit buffer smaller than max_datagram");
        let (peer, emitted) = self.next_emitted(now, buf)?;
        if let Some(packet) = &emitted.data {
            self.peers[peer as usize].send.copy_payload(packet, &mut buf[emitted.head_len..emitted.len()]);
        }
        let len = auth::seal(&self.config, buf, emitted.len());
        Some(Transmit { peer, len })
    }

    /// [`poll_transmit`](Self::poll_transmit) without the payload copy: the
    /// datagram is `head`, then `payload[0]`, `payload[1]`, then `trailer`
    /// (the MAC or checksum, if any), to be sent as one datagram with a vectored send.
    /// `head` and `trailer` live in `buf`; the payload is lent straight from
    /// the retransmission buffer, so bulk data is copied once on its way to
    /// the socket (at `submit`) instead of twice.
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than `HEADER_LEN + TRAILER_RESERVE` (64 bytes).
    #[must_use]
    pub fn poll_transmit_parts<'a>(&'a mut self, now: Instant, buf: &'a mut [u8]) -> Option<TransmitParts<'a>> {
        assert!(buf.len() >= HEADER_LEN + auth::TRAILER_RESERVE, "transmit buffer smaller than header and trailer");
        let (peer, emitted) = self.next_emitted(now, buf)?;
        let payload = match &emitted.data {
            Some(packet) => self.peers[peer as usize].send.payload(packet),
            None => [&[][..], &[][..]],
        };
        let head_len = emitted.head_len;
        let trailer_len = auth::seal_parts(&self.config, buf, head_len, payload);
        let buf: &'a [u8] = buf;
        Some(TransmitParts { peer, head: &buf[..head_len], payload, trailer: &buf[head_len..head_len + trailer_len] })
    }

    /// [`poll_transmit_parts`](Self::poll_transmit_parts) for sending many
    /// datagrams at once without copying their payloads: writes the header
    /// and, right after it, the trailer into `buf`, and returns where the
    /// payload is ([`gather_payload`](Self::gather_payload)). Payloads of
    /// the datagrams taken this way stay lent until the next call of any
    /// other `&mut self` method (a submit or a received ack may move the
    /// retransmission buffer), so take a batch, send it, then go on.
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than `HEADER_LEN + TRAILER_RESERVE` (64 bytes).
    pub fn poll_transmit_gather(&mut self, now: Instant, buf: &mut [u8]) -> Option<crate::GatherTx> {
        assert!(buf.len() >= HEADER_LEN + auth::TRAILER_RESERVE, "transmit buffer smaller than header and trailer");
        let (peer, emitted) = self.next_emitted(now, buf)?;
        let payload = match &emitted.data {
            Some(packet) => self.peers[peer as usize].send.payload(packet),
            None => [&[][..], &[][..]],
        };
        let head_len = emitted.head_len;
        let trailer_len = auth::seal_parts(&self.config, buf, head_len, payload);
        Some(crate::GatherTx { peer, head_len, trailer_len, packet: emitted.data })
    }

    /// The payload of a datagram taken by
    /// [`poll_transmit_gather`](Self::poll_transmit_gather) (two slices when
    /// it wraps around the retransmission ring), valid under the rule given
    /// there.
    pub fn gather_payload(&self, tx: &crate::GatherTx) -> [&[u8]; 2] {
        match &tx.packet {
            Some(packet) => self.peers[tx.peer as usize].send.payload(packet),
            None => [&[][..], &[][..]],
        }
    }

    /// Picks the next packet (round robin over the ready peers), writes its
    /// header into `buf` and counts it as sent.
    fn next_emitted(&mut self, now: Instant, buf: &mut [u8]) -> Option<(u32, crate::peer::Emitted)> {
        let trailer = auth::trailer_len(&self.config);
        while let Some(&peer) = self.ready.front() {
            let index = peer as usize;
            let Some(emitted) = self.peers[index].poll_transmit(now, self.ids, buf, &mut self.stats) else {
                self.ready.pop_front();
                self.peers[index].in_ready = false;
                continue;
            };
            self.stats.packets_sent += 1;
            self.stats.bytes_sent += (emitted.len() + trailer) as u64;
            // Round robin: the peer goes to the back and is asked again later.
            self.ready.rotate_left(1);
            self.refresh(now, index);
            return Some((peer, emitted));
        }
        None
    }

    /// The earliest instant at which [`handle_timeout`](Self::handle_timeout)
    /// has work (a delayed ack, an RTO, a dead-peer deadline, a keepalive);
    /// `None` when no timer is armed.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Runs every timer due at `now`. Follow with `poll_transmit` and `poll_event`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.note_call(now);
        while let Some((peer, kind)) = self.timers.pop_due(now, &mut self.peers, |p| &mut p.timers) {
            let index = peer as usize;
            let p = &mut self.peers[index];
            match kind {
                TimerKind::AckDelay => p.recv.on_ack_timer(),
                TimerKind::Rto => {
                    p.send.on_rto(now, &mut p.rtt);
                }
                TimerKind::Dead => self.declare_dead(index),
                TimerKind::Keepalive => {
                    p.keepalive_sent = Some(now);
                    p.probe_owed = true;
                }
            }
            self.mark_ready(index);
            self.refresh(now, index);
        }
        self.timers.tidy(&mut self.peers, |p| &mut p.timers);
    }

    /// Next event for the layer above, if any. Drain it after every
    /// `handle_*` call: events (raw datagrams in particular) queue up until
    /// polled.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Builds an unreliable datagram (`PacketType::Raw`) carrying `data` to
    /// `peer` in `buf`, returning its length. It is not sequenced, acked,
    /// retransmitted or counted in [`Stats`]; the receiver gets
    /// [`Event::Raw`]. `data` must fit one segment.
    pub fn encode_raw(&self, peer: u32, data: &[u8], buf: &mut [u8]) -> Result<usize, SubmitError> {
        let index = self.peer_index(peer).ok_or(SubmitError::BadRank)?;
        let p = &self.peers[index];
        if p.dead {
            return Err(SubmitError::PeerDead);
        }
        if data.len() > self.config.segment_size() {
            return Err(SubmitError::TooLarge);
        }
        let len = HEADER_LEN + data.len();
        if buf.len() < len + auth::trailer_len(&self.config) {
            return Err(SubmitError::BufferTooSmall);
        }
        let repr = HeaderRepr {
            packet_type: PacketType::Raw,
            flags: Flags::empty(),
            payload_len: data.len() as u16,
            job_id: self.ids.job,
            src_rank: self.ids.rank,
            dst_rank: peer,
            src_epoch: self.ids.epoch,
            dst_epoch: p.epoch,
            seq: p.send.watermark(),
            ack: 0,
            sack: 0,
        };
        repr.emit_into(buf);
        buf[HEADER_LEN..len].copy_from_slice(data);
        Ok(auth::seal(&self.config, buf, len))
    }

    /// Payload bytes one multicast segment can carry in a packet of at most
    /// `Config::max_datagram` bytes (trailer included: MAC or checksum).
    pub fn mcast_segment_size(&self) -> usize {
        self.config.max_datagram - HEADER_LEN - McastData::HEADER_LEN - auth::trailer_len(&self.config)
    }

    /// Builds the `Mcast` packet carrying segment `index` (`segment`) in
    /// `buf`, sealed like every packet of the job (job id, our rank and
    /// epoch, MAC when authenticating), addressed to the whole group
    /// (`to: None`) or to one member as a repair. Returns its length.
    /// Segments travel outside every connection: nothing is sequenced,
    /// acknowledged or retransmitted here (see [`crate::mcast`]).
    pub fn encode_mcast(
        &mut self,
        to: Option<u32>,
        index: u32,
        segment: &McastData<'_>,
        buf: &mut [u8],
    ) -> Result<usize, SubmitError> {
        let dst_epoch = match to {
            None => 0,
            Some(peer) => {
                let p = &self.peers[self.peer_index(peer).ok_or(SubmitError::BadRank)?];
                if p.dead {
                    return Err(SubmitError::PeerDead);
                }
                p.epoch
            }
        };
        let payload = segment.buffer_len();
        if payload > self.config.max_datagram - HEADER_LEN - auth::trailer_len(&self.config) {
            return Err(SubmitError::TooLarge);
        }
        let len = HEADER_LEN + payload;
        if buf.len() < len + auth::trailer_len(&self.config) {
            return Err(SubmitError::BufferTooSmall);
        }
        let repr = HeaderRepr {
            packet_type: PacketType::Mcast,
            flags: Flags::empty(),
            payload_len: payload as u16,
            job_id: self.ids.job,
            src_rank: self.ids.rank,
            dst_rank: to.unwrap_or(GROUP_RANK),
            src_epoch: self.ids.epoch,
            dst_epoch,
            seq: index,
            ack: 0,
            sack: 0,
        };
        repr.emit_into(buf);
        segment.emit(&mut buf[HEADER_LEN..len]);
        let len = auth::seal(&self.config, buf, len);
        self.stats.mcast_sent += 1;
        Ok(len)
    }

    /// Checks a datagram that claims to be a multicast segment exactly as
    /// every packet is checked (size, checksum, well-formed, this job, valid MAC, addressed
    /// to the group or to us, from another rank of the job in the
    /// incarnation we know, not declared dead) and returns it. Rejections
    /// are counted in [`Stats::drops`]. Touches no connection state.
    pub fn accept_mcast<'a>(&mut self, datagram: &'a [u8]) -> Result<McastSegment<'a>, DropReason> {
        let result = self.check_mcast(datagram);
        match &result {
            Ok(_) => self.stats.mcast_received += 1,
            Err(reason) => self.stats.drops.count(reason),
        }
        result
    }

    fn check_mcast<'a>(&self, datagram: &'a [u8]) -> Result<McastSegment<'a>, DropReason> {
        let (repr, payload, _) = self.admit(datagram)?;
        if repr.packet_type != PacketType::Mcast {
            return Err(DropReason::Malformed(mw_wire::Error::UnknownType));
        }
        if repr.dst_rank != GROUP_RANK && repr.dst_rank != self.ids.rank {
            return Err(DropReason::WrongTarget);
        }
        let index = self.peer_index(repr.src_rank).ok_or(DropReason::UnknownPeer)?;
        if repr.dst_epoch != 0 && repr.dst_epoch != self.ids.epoch {
            return Err(DropReason::StaleEpoch);
        }
        let p = &self.peers[index];
        if p.is_retired(repr.src_epoch) || (p.epoch != 0 && p.epoch != repr.src_epoch) {
            return Err(DropReason::StaleEpoch);
        }
        if p.dead {
            return Err(DropReason::DeadPeer);
        }
        let data = McastData::parse(payload).map_err(DropReason::Malformed)?;
        Ok(McastSegment { from: repr.src_rank, index: repr.seq, to_group: repr.dst_rank == GROUP_RANK, data })
    }

    /// Endpoint-wide counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// A snapshot of the connection with `peer`; `None` for an invalid rank.
    pub fn peer_stats(&self, peer: u32) -> Option<PeerStats> {
        let p = &self.peers[self.peer_index(peer)?];
        let (cwnd, ssthresh, inflight, inflight_bytes) = p.send.window_stats();
        Some(PeerStats {
            epoch: (p.epoch != 0).then_some(p.epoch),
            dead: p.dead,
            srtt: p.rtt.srtt(),
            rto: p.rtt.rto(),
            cwnd,
            ssthresh,
            inflight,
            inflight_bytes,
            queued_bytes: p.send.queued_bytes(),
            unacked_messages: p.send.unreported() as usize,
            rcv_nxt: p.recv.rcv_nxt(),
            out_of_order: p.recv.out_of_order(),
            reassembly_bytes: p.recv.reassembly_bytes(),
        })
    }

    /// The epoch of `peer` as last seen on the wire; `None` before its first packet.
    pub fn peer_epoch(&self, peer: u32) -> Option<u32> {
        let p = &self.peers[self.peer_index(peer)?];
        (p.epoch != 0).then_some(p.epoch)
    }

    /// Messages to `peer` submitted and not yet reported by [`Event::Acked`]
    /// (0 for an invalid rank).
    pub fn unacked_messages(&self, peer: u32) -> usize {
        self.peer_index(peer).map_or(0, |i| self.peers[i].send.unreported() as usize)
    }

    /// Bytes submitted to `peer` and not yet sent once (0 for an invalid
    /// rank). Bound it to bound the endpoint's memory.
    pub fn queued_bytes(&self, peer: u32) -> usize {
        self.peer_index(peer).map_or(0, |i| self.peers[i].send.queued_bytes())
    }

    /// Nothing queued, unacknowledged (or acked but not yet reported), or
    /// owed (a pending ack, Reset or Probe) toward any peer. Dead peers count
    /// as quiescent. Looks at every peer: not for the per-packet path.
    pub fn is_quiescent(&self) -> bool {
        self.peers.iter().all(Peer::is_quiescent)
    }

    fn mark_ready(&mut self, index: usize) {
        let p = &mut self.peers[index];
        if !p.in_ready {
            p.in_ready = true;
            self.ready.push_back(index as u32);
        }
    }

    /// Recomputes the peer's timer deadlines from its state. O(1).
    fn refresh(&mut self, now: Instant, index: usize) {
        let config = &self.config;
        let p = &mut self.peers[index];
        let waiting = p.is_waiting();
        p.busy_since = match (waiting, p.busy_since) {
            (false, _) => None,
            (true, None) => Some(now),
            (true, since) => since,
        };
        let dead_at = p.busy_since.map(|since| since.max(p.last_heard.unwrap_or(since)) + config.peer_dead_after);
        let keepalive = match config.keepalive {
            Some(_) if p.dead || p.epoch == 0 => None,
            // An unanswered keepalive is repeated every RTO until the dead verdict.
            Some(_) if p.keepalive_sent.is_some() => p.keepalive_sent.map(|at| at + p.rtt.rto()),
            Some(idle) if !waiting => p.last_heard.map(|at| at + idle),
            _ => None,
        };
        let mut due = [None; 4];
        due[TimerKind::AckDelay as usize] = p.recv.ack_deadline();
        due[TimerKind::Rto as usize] = p.send.rto_deadline();
        due[TimerKind::Dead as usize] = dead_at;
        due[TimerKind::Keepalive as usize] = keepalive;
        self.timers.set_all(&mut p.timers, index as u32, due);
        self.timers.tidy(&mut self.peers, |p| &mut p.timers);
    }
}
