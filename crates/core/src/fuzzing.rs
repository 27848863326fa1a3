//! Fuzzing entry point (not a public API; hidden from the docs): the target
//! side of an endpoint — protocol endpoint, region table, request slab and
//! operation executor, wired as `endpoint.rs` wires them — fed with arbitrary
//! datagrams, with no socket and no clock.
//!
//! Owns: [`Harness`] (one endpoint with registered regions laid out in one
//! arena with guard bytes around each), [`run`] (the cargo-fuzz target body:
//! decode a fuzz input into datagrams and feed them) and [`seeds`] (valid
//! inputs carrying every operation kind, for the seed corpus); and
//! [`send_crafted`] (hand-made operation messages from a live endpoint, for
//! tests of what a target refuses). Every fuzzed datagram
//! must leave the guard bytes, the read-only region and the no-access region
//! exactly as they were; anything else panics, and so does any out-of-bounds
//! access (region memory asserts its bounds).
//!
//! Must not: be used by the library itself. It duplicates the small amount of
//! reply handling `endpoint.rs` does, so that `endpoint.rs` need not expose
//! its state.

mod crafted;

use std::sync::atomic::Ordering;

use mw_proto::time::Instant;
use mw_wire::op::{self, AtomicOp, AtomicWidth, IovSegments, MaskedBlock, OpRepr, SignalOp, Status};
use mw_wire::{Flags, HeaderRepr, CHECKSUM_LEN, HEADER_LEN, MAC_LEN};

use crate::internal::Internal;
use crate::region::{Access, AlignedBuf, RegionKey, RegionTable, RegisterTarget};
use crate::request::{Completion, Output, RequestId, Requests};
use crate::stats::CoreStats;
use crate::target::{Reply, Target};

pub use crafted::{send_crafted, CRAFTED_OUTPUT_MAX};

/// The job key of the fuzzed endpoint's job.
pub const JOB_KEY: [u8; 16] = *b"memwire-fuzz-job";
/// Ranks in the job; the harness is rank [`ME`].
pub const RANKS: u32 = 3;
/// The harness's rank (0: the root of the internal gather, so that code runs too).
pub const ME: u32 = 0;
/// The harness's epoch.
pub const MY_EPOCH: u32 = 0x00f0_0d01;
/// A region granting everything (256 bytes).
pub const KEY_ALL: u64 = 0x1111;
/// A read-only region (64 bytes); must never change.
pub const KEY_READ: u64 = 0x2222;
/// A write-only region (128 bytes).
pub const KEY_WRITE: u64 = 0x3333;
/// A region granting nothing (64 bytes); must never change.
pub const KEY_NONE: u64 = 0x4444;
/// An address register pointing at `KEY_ALL[64..128]`.
pub const REGISTER: u16 = 5;
/// The multicast transfer the harness has armed: team, transfer number,
/// root rank, length, and where in `KEY_ALL` it lands.
pub const MCAST_TEAM: u64 = 0x7465_616d;
/// See [`MCAST_TEAM`].
pub const MCAST_TRANSFER: u64 = 3;
/// See [`MCAST_TEAM`].
pub const MCAST_ROOT: u32 = 1;
/// See [`MCAST_TEAM`].
pub const MCAST_LEN: u64 = 200;
/// See [`MCAST_TEAM`].
pub const MCAST_AT: usize = 16;
/// Fuzz input mode bit (`data[0]`): packets are authenticated (MAC).
pub const MODE_AUTH: u8 = 1;
/// Fuzz input mode bit: packets carry a CRC32C checksum (ignored with [`MODE_AUTH`]).
pub const MODE_CHECKSUM: u8 = 2;
/// Every mode the seeds cover: plain, authenticated, checksummed.
pub const MODES: [u8; 3] = [0, MODE_AUTH, MODE_CHECKSUM];

/// The protocol configuration of the job in `mode`.
fn proto_config(mode: u8) -> mw_proto::Config {
    let auth = (mode & MODE_AUTH != 0).then(|| mw_proto::AuthKey::from_job_key(&JOB_KEY));
    let checksum = auth.is_none() && mode & MODE_CHECKSUM != 0;
    mw_proto::Config { auth, checksum, ..mw_proto::Config::default() }
}

/// Guard bytes before, between and after the regions.
const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xA5;

/// (key, length, rights) of each region, in arena order.
const REGIONS: [(u64, usize, Access); 4] = [
    (KEY_ALL, 256, Access::ALL),
    (KEY_READ, 64, Access::READ),
    (KEY_WRITE, 128, Access::WRITE),
    (KEY_NONE, 64, Access::NONE),
];

/// One fuzzed endpoint.
#[derive(Debug)]
pub struct Harness {
    arena: AlignedBuf,
    /// Arena offset of each region of [`REGIONS`].
    offsets: Vec<usize>,
    /// The arena as it must stay outside writable regions.
    initial: Vec<u8>,
    proto: mw_proto::Endpoint,
    auth: Option<mw_proto::AuthKey>,
    checksum: bool,
    regions: RegionTable,
    requests: Requests,
    gets: crate::get_window::GetWindow,
    replies: Vec<Reply>,
    completions: Vec<Completion>,
    stats: CoreStats,
    internal: Internal,
    /// Messaging state: tagged messages, AMs and FIFOs reach it too.
    msg: crate::msg::MsgState,
    /// A multicast receive armed into `KEY_ALL`, so segments reach memory.
    mcast: crate::mcast::McastState,
    /// Requests the harness has outstanding (so responses have something to land in).
    pending: Vec<RequestId>,
    now: Instant,
    tx: Vec<u8>,
    hdr: Vec<u8>,
}

impl Harness {
    /// A fresh endpoint whose packets are authenticated, checksummed or
    /// plain as `mode` says ([`MODE_AUTH`], [`MODE_CHECKSUM`]).
    pub fn new(mode: u8) -> Harness {
        let total = GUARD + REGIONS.iter().map(|r| r.1 + GUARD).sum::<usize>();
        let arena = AlignedBuf::zeroed(total);
        // SAFETY: the arena moves into the harness with the region table
        // holding the views; the harness drops both together and the views
        // are not dereferenced by any drop.
        #[allow(unsafe_code)]
        let mem = unsafe { arena.raw() };
        let mut regions = RegionTable::default();
        let mut offsets = Vec::new();
        let mut at = GUARD;
        for (i, &(key, len, access)) in REGIONS.iter().enumerate() {
            mem.write(at - GUARD, &[GUARD_BYTE; GUARD]);
            // Recognizable contents, so a stray write shows.
            let fill: Vec<u8> = (0..len).map(|b| (b as u8).wrapping_mul(31).wrapping_add(i as u8)).collect();
            mem.write(at, &fill);
            regions.insert(RegionKey(key), mem.subrange(at, len), access);
            offsets.push(at);
            at += len + GUARD;
        }
        mem.write(at - GUARD, &[GUARD_BYTE; GUARD]);
        regions.enable_log(RegionKey(KEY_ALL), 4);
        regions
            .set_register(REGISTER, RegisterTarget { key: RegionKey(KEY_ALL), offset: 64, len: 64 })
            .expect("register window inside the region");
        let mut initial = vec![0u8; total];
        mem.read(0, &mut initial);
        let config = proto_config(mode);
        let (auth, checksum) = (config.auth.clone(), config.checksum);
        let job = mw_proto::job_id_from_key(&JOB_KEY);
        let proto = mw_proto::Endpoint::new(config, job, ME, MY_EPOCH, RANKS);
        let now = Instant::from_nanos(1_000_000);
        let mut mcast = crate::mcast::McastState::new(job, std::net::Ipv4Addr::LOCALHOST.into(), None);
        let all = regions.get(RegionKey(KEY_ALL)).expect("registered").mem;
        mcast.arm_rx(&proto, now, MCAST_TEAM, MCAST_TRANSFER, MCAST_ROOT, MCAST_LEN, all, MCAST_AT);
        let mut requests = Requests::default();
        let get = requests.alloc(1, 1).expect("slab has room");
        requests.set_output(get, Output::Data(Vec::with_capacity(64)));
        let atomic = requests.alloc(2, 1).expect("slab has room");
        let put = requests.alloc(1, 2).expect("slab has room");
        requests.set_notify(put, (RegionKey(KEY_ALL), 248));
        Harness {
            arena,
            offsets,
            initial,
            proto,
            auth,
            checksum,
            regions,
            requests,
            gets: crate::get_window::GetWindow::new(RANKS, 1 << 20),
            replies: Vec::new(),
            completions: Vec::new(),
            stats: CoreStats::default(),
            internal: Internal::new(ME, RANKS),
            msg: crate::msg::MsgState::new(ME, RANKS, &crate::Config::default()),
            mcast,
            pending: vec![get, atomic, put],
            now,
            tx: vec![0u8; 2048],
            hdr: vec![0u8; op::MAX_HEADER_LEN],
        }
    }

    /// The wire `req` values of the harness's outstanding requests (a get
    /// expecting up to 64 bytes from rank 1, a fetching atomic toward rank 2,
    /// a two-part put toward rank 1 that notifies `KEY_ALL[248]`).
    pub fn request_ids(&self) -> Vec<u32> {
        self.pending.iter().map(|id| id.0).collect()
    }

    /// Lets `micros` of virtual time pass, running due timers.
    pub fn advance(&mut self, micros: u64) {
        self.now += mw_proto::time::Duration::from_micros(micros);
        if self.proto.poll_timeout().is_some_and(|t| t <= self.now) {
            self.proto.handle_timeout(self.now);
        }
        self.flush();
    }

    /// Feeds one datagram as the endpoint's progress engine would, then
    /// checks that no byte outside writable regions changed.
    pub fn handle_datagram(&mut self, datagram: &[u8]) {
        let Harness { proto, regions, requests, gets, replies, completions, stats, internal, msg, mcast, now, .. } =
            self;
        if mw_wire::peek_packet_type(datagram) == Some(mw_wire::PacketType::Mcast) {
            // Routed as the endpoint routes it: to the multicast engine.
            mcast.on_datagram(proto, *now, datagram);
            self.check_memory();
            return;
        }
        let mut target = Target { regions, requests, gets, replies, completions, stats, internal, msg, mcast };
        let _ = proto.handle_datagram(*now, datagram, &mut |peer, msg| target.on_message(peer, msg));
        self.flush();
        self.check_memory();
    }

    /// Rewrites `datagram` into one that passes the protocol's header
    /// checks (magic, version, length, job id, target rank, a peer's rank,
    /// a nonzero epoch, our epoch when `to_my_epoch`, and a valid MAC or
    /// checksum when the mode asks for one), leaving type, flags, sequence numbers and
    /// payload as the fuzzer made them. Shorter than a header: untouched.
    pub fn fixup(&self, datagram: &mut Vec<u8>, to_my_epoch: bool) {
        if datagram.len() < HEADER_LEN {
            return;
        }
        let mut flags = u16::from_le_bytes([datagram[4], datagram[5]]);
        if flags & Flags::MAC.bits() != 0 && datagram.len() >= HEADER_LEN + MAC_LEN {
            datagram.truncate(datagram.len() - MAC_LEN);
        } else if flags & Flags::CHECKSUM.bits() != 0 && datagram.len() >= HEADER_LEN + CHECKSUM_LEN {
            datagram.truncate(datagram.len() - CHECKSUM_LEN);
        }
        datagram.truncate(HEADER_LEN + usize::from(u16::MAX));
        flags &= !(Flags::MAC.bits() | Flags::CHECKSUM.bits());
        let payload_len = (datagram.len() - HEADER_LEN) as u16;
        datagram[0..2].copy_from_slice(&mw_wire::MAGIC.to_le_bytes());
        datagram[2] = mw_wire::VERSION;
        datagram[4..6].copy_from_slice(&flags.to_le_bytes());
        datagram[6..8].copy_from_slice(&payload_len.to_le_bytes());
        datagram[8..16].copy_from_slice(&mw_proto::job_id_from_key(&JOB_KEY).to_le_bytes());
        let src = u32::from_le_bytes([datagram[16], datagram[17], datagram[18], datagram[19]]) % RANKS;
        let src = if src == ME { 1 } else { src };
        datagram[16..20].copy_from_slice(&src.to_le_bytes());
        datagram[20..24].copy_from_slice(&ME.to_le_bytes());
        if datagram[24..28] == [0; 4] {
            datagram[24] = 1;
        }
        if to_my_epoch {
            datagram[28..32].copy_from_slice(&MY_EPOCH.to_le_bytes());
        }
        if let Some(key) = &self.auth {
            datagram[4..6].copy_from_slice(&(flags | Flags::MAC.bits()).to_le_bytes());
            let tag = key.tag(datagram);
            datagram.extend_from_slice(&tag);
        } else if self.checksum {
            datagram[4..6].copy_from_slice(&(flags | Flags::CHECKSUM.bits()).to_le_bytes());
            let crc = mw_wire::packet_checksum(datagram);
            datagram.extend_from_slice(&crc.to_le_bytes());
        }
    }

    /// Panics if a guard byte, the read-only region or the no-access region changed.
    pub fn check_memory(&self) {
        let mut now = vec![0u8; self.initial.len()];
        self.arena.read(0, &mut now);
        let mut at = 0;
        for (i, &(key, len, access)) in REGIONS.iter().enumerate() {
            assert_eq!(now[at..at + GUARD], self.initial[at..at + GUARD], "guard before region {key:#x} written");
            let start = self.offsets[i];
            if !access.contains(Access::WRITE) && !access.contains(Access::ATOMIC) {
                assert_eq!(now[start..start + len], self.initial[start..start + len], "region {key:#x} written");
            }
            at = start + len;
        }
        assert_eq!(now[at..], self.initial[at..], "guard after the last region written");
    }

    /// Sends the replies the delivered operations asked for (reading the
    /// region bytes they name), applies completions, and emits and discards
    /// whatever the protocol wants to send.
    fn flush(&mut self) {
        for reply in std::mem::take(&mut self.replies) {
            self.send_reply(reply);
        }
        for completion in std::mem::take(&mut self.completions) {
            if let Some((key, offset)) = completion.notify {
                if let Ok(region) = self.regions.get(key) {
                    if region.mem.is_aligned(offset as usize, 8) && offset + 8 <= region.mem.len() as u64 {
                        region.mem.atomic_u64(offset as usize).fetch_add(1, Ordering::Release);
                    }
                }
            }
        }
        // Rank 0's finished internal gathers would go to every rank.
        self.internal.outgoing.clear();
        while let Some(event) = self.proto.poll_event() {
            if let mw_proto::Event::PeerDead { peer } | mw_proto::Event::PeerRestarted { peer, .. } = event {
                let error = crate::Error::PeerUnreachable { rank: peer };
                let _ = self.requests.fail_target(peer, &error);
                self.internal.peer_failed(peer);
            }
        }
        while self.proto.poll_transmit(self.now, &mut self.tx).is_some() {}
    }

    fn send_reply(&mut self, reply: Reply) {
        let (peer, repr, data) = match reply {
            Reply::Status { peer, req, status } => (peer, OpRepr::OpStatus(op::OpStatus { req, status }), Vec::new()),
            Reply::Atomic { peer, req, status, value } => {
                (peer, OpRepr::AtomicResponse(op::AtomicResponse { req, status, value }), Vec::new())
            }
            Reply::GetError { peer, req, status } => {
                (peer, OpRepr::GetResponse(op::GetResponse { req, status, body: &[] }), Vec::new())
            }
            Reply::GetData { peer, req, data } => {
                (peer, OpRepr::GetResponse(op::GetResponse { req, status: Status::Ok, body: &[] }), data)
            }
            Reply::Get { peer, req, .. } | Reply::GetStrided { peer, req, .. } => {
                let (status, data) = match reply.read(&self.regions) {
                    Some(Ok(data)) => (Status::Ok, data),
                    Some(Err(status)) => (status, Vec::new()),
                    None => return,
                };
                (peer, OpRepr::GetResponse(op::GetResponse { req, status, body: &[] }), data)
            }
        };
        let hlen = repr.emit_header(&mut self.hdr);
        let _ = self.proto.submit(self.now, peer, &[&self.hdr[..hlen], &data]);
    }
}

/// Most datagrams taken from one fuzz input.
const MAX_RECORDS: usize = 64;

/// The fuzz target: `data[0]` is the mode (bit 0 turns authentication on,
/// else bit 1 checksums, see [`MODE_AUTH`] and [`MODE_CHECKSUM`]); the rest is a
/// sequence of records `[ctl, len_lo, len_hi, bytes…]`, each one datagram
/// (the last may be short). `ctl` bit 0: [`Harness::fixup`] the datagram;
/// bit 1: address it to our epoch; bits 2-7: advance that many times 50 µs
/// of virtual time first.
pub fn run(data: &[u8]) {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let mut harness = Harness::new(mode);
    for _ in 0..MAX_RECORDS {
        let [ctl, lo, hi, tail @ ..] = rest else {
            break;
        };
        let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(tail.len());
        let (bytes, next) = tail.split_at(len);
        rest = next;
        if ctl >> 2 != 0 {
            harness.advance(u64::from(ctl >> 2) * 50);
        }
        let mut datagram = bytes.to_vec();
        if ctl & 1 != 0 {
            harness.fixup(&mut datagram, ctl & 2 != 0);
        }
        harness.handle_datagram(&datagram);
    }
    harness.advance(200_000);
    harness.check_memory();
}

/// Appends one record (no fixup, no time advance) to a fuzz input.
fn push_record(input: &mut Vec<u8>, datagram: &[u8]) {
    input.push(0);
    input.extend_from_slice(&(datagram.len() as u16).to_le_bytes());
    input.extend_from_slice(datagram);
}

/// The operations a seed carries: every kind, in and out of bounds, with
/// and without the rights, and replies to the harness's requests.
fn seed_ops(reqs: &[u32]) -> Vec<OpRepr<'static>> {
    static DATA: [u8; 512] = {
        let mut a = [0u8; 512];
        let mut i = 0;
        while i < 512 {
            a[i] = (i as u8).wrapping_mul(13).wrapping_add(1);
            i += 1;
        }
        a
    };
    static PAIRS: [(u64, u32); 2] = [(8, 4), (100, 8)];
    static BAD_PAIRS: [(u64, u32); 2] = [(8, 4), (250, 16)];
    let put = |key, offset, len| OpRepr::Put(op::Put { req: 7, key, offset, body: &DATA[..len] });
    let atomic = |key, offset, op, width, fetch| {
        OpRepr::AtomicRequest(op::AtomicRequest { req: 8, key, offset, op, width, fetch, operand: 5, compare: 0 })
    };
    vec![
        put(KEY_ALL, 0, 256),
        put(KEY_ALL, 200, 100),
        put(KEY_READ, 0, 8),
        put(KEY_WRITE, 120, 8),
        put(KEY_NONE, 0, 1),
        put(0xdead, 0, 8),
        OpRepr::PutInline(op::PutInline { req: 0, key: KEY_WRITE, offset: 96, body: &DATA[..32] }),
        OpRepr::GetRequest(op::GetRequest { req: 9, key: KEY_READ, offset: 0, len: 64 }),
        OpRepr::GetRequest(op::GetRequest { req: 9, key: KEY_WRITE, offset: 0, len: 8 }),
        OpRepr::GetRequest(op::GetRequest { req: 9, key: KEY_ALL, offset: u64::MAX - 4, len: 8 }),
        atomic(KEY_ALL, 8, AtomicOp::Add, AtomicWidth::U64, true),
        atomic(KEY_ALL, 12, AtomicOp::CompareSwap, AtomicWidth::U32, false),
        atomic(KEY_ALL, 9, AtomicOp::Swap, AtomicWidth::U64, true),
        atomic(KEY_READ, 0, AtomicOp::Store, AtomicWidth::U64, false),
        atomic(KEY_ALL, 256, AtomicOp::Xor, AtomicWidth::U32, true),
        OpRepr::PutSignal(op::PutSignal {
            req: 10,
            key: KEY_ALL,
            offset: 16,
            signal_key: KEY_ALL,
            signal_offset: 0,
            signal_op: SignalOp::Add,
            signal_value: 1,
            body: &DATA[..8],
        }),
        OpRepr::PutSignal(op::PutSignal {
            req: 10,
            key: KEY_WRITE,
            offset: 0,
            signal_key: KEY_READ,
            signal_offset: 0,
            signal_op: SignalOp::Set,
            signal_value: 1,
            body: &DATA[..8],
        }),
        OpRepr::PutStrided(op::PutStrided {
            req: 11,
            key: KEY_ALL,
            offset: 0,
            elem_size: 4,
            count: 8,
            stride: 16,
            body: &DATA[..32],
        }),
        OpRepr::PutStrided(op::PutStrided {
            req: 11,
            key: KEY_ALL,
            offset: 0,
            elem_size: 4,
            count: 8,
            stride: 40,
            body: &DATA[..32],
        }),
        OpRepr::GetStridedRequest(op::GetStridedRequest {
            req: 12,
            key: KEY_READ,
            offset: 0,
            elem_size: 2,
            count: 4,
            stride: 16,
        }),
        OpRepr::PutIov(op::PutIov {
            req: 13,
            key: KEY_ALL,
            segments: IovSegments::from_pairs(&PAIRS),
            body: &DATA[..12],
        }),
        OpRepr::PutIov(op::PutIov {
            req: 13,
            key: KEY_ALL,
            segments: IovSegments::from_pairs(&BAD_PAIRS),
            body: &DATA[..20],
        }),
        OpRepr::PutMasked(op::PutMasked {
            req: 14,
            key: KEY_ALL,
            offset: 192,
            block: MaskedBlock::B64,
            mask: 0b1010_0101,
            body: &DATA[..64],
        }),
        OpRepr::PutMasked(op::PutMasked {
            req: 14,
            key: KEY_ALL,
            offset: 0,
            block: MaskedBlock::B256,
            mask: u64::MAX,
            body: &DATA[..256],
        }),
        OpRepr::RegisterPut(op::RegisterPut { req: 15, register: REGISTER, body: &DATA[..64] }),
        OpRepr::RegisterPut(op::RegisterPut { req: 15, register: REGISTER, body: &DATA[..65] }),
        OpRepr::RegisterPut(op::RegisterPut { req: 15, register: 9, body: &DATA[..4] }),
        OpRepr::GetResponse(op::GetResponse { req: reqs[0], status: Status::Ok, body: &DATA[..40] }),
        OpRepr::GetResponse(op::GetResponse { req: reqs[0], status: Status::Ok, body: &DATA[..40] }),
        OpRepr::AtomicResponse(op::AtomicResponse { req: reqs[1], status: Status::Ok, value: 3 }),
        OpRepr::OpStatus(op::OpStatus { req: reqs[2], status: Status::Ok }),
        OpRepr::OpStatus(op::OpStatus { req: reqs[2], status: Status::OutOfBounds }),
        OpRepr::AmRequest(op::AmRequest {
            req: 0,
            handler: crate::internal::HANDLER_GATHER,
            want_reply: false,
            rndv: false,
            args: op::AmArgs::from_slice(&[0]).expect("one argument fits"),
            body: &DATA[..16],
        }),
    ]
}

/// A fuzz input (in `mode`) whose records are the datagrams
/// fresh protocol endpoints emit toward [`ME`] for `messages` (sender rank
/// and message bytes each), so sequence numbers start where the harness
/// expects them.
fn capture(mode: u8, messages: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let config = proto_config(mode);
    let job = mw_proto::job_id_from_key(&JOB_KEY);
    let mut senders: Vec<mw_proto::Endpoint> =
        (0..RANKS).map(|rank| mw_proto::Endpoint::new(config.clone(), job, rank, 0xe0 + rank, RANKS)).collect();
    let now = Instant::from_nanos(1_000_000);
    let mut buf = vec![0u8; config.max_datagram];
    let mut input = vec![mode];
    for (from, message) in messages {
        let ep = &mut senders[*from as usize];
        ep.submit(now, ME, &[message]).expect("valid submit");
        while let Some(t) = ep.poll_transmit(now, &mut buf) {
            if HeaderRepr::parse_packet(&buf[..t.len]).is_ok_and(|(r, _)| r.dst_rank == ME) {
                push_record(&mut input, &buf[..t.len]);
            }
        }
    }
    input
}

/// Seed inputs: for each mode (plain, authenticated, checksummed), one input
/// per seed operation (every operation kind, in and out of bounds, with and
/// without the rights, and replies; sent by rank 1, or rank 2 for the atomic
/// reply), one with all of them in a row, and one large put that spans
/// several datagrams.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for mode in MODES {
        let reqs = Harness::new(mode).request_ids();
        let mut buf = vec![0u8; 4096];
        let messages: Vec<(u32, Vec<u8>)> = seed_ops(&reqs)
            .iter()
            .map(|repr| {
                let from = if matches!(repr, OpRepr::AtomicResponse(_)) { 2 } else { 1 };
                let len = repr.emit(&mut buf);
                (from, buf[..len].to_vec())
            })
            .collect();
        out.extend(messages.iter().map(|m| capture(mode, std::slice::from_ref(m))));
        out.push(capture(mode, &messages));
        let big = OpRepr::Put(op::Put { req: 1, key: KEY_ALL, offset: 0, body: &[0x5a; 3000] });
        let len = big.emit(&mut buf);
        // Longer than the region: a multi-datagram message rejected at the end.
        out.push(capture(mode, &[(1, buf[..len].to_vec())]));
        out.push(mcast_seed(mode));
    }
    out
}

/// Multicast segments from the armed transfer's root: the right one, one in
/// the wrong place, one past the end, one of another transfer, and a
/// feedback operation (the harness roots nothing: it is dropped).
fn mcast_seed(mode: u8) -> Vec<u8> {
    let config = proto_config(mode);
    let mut root =
        mw_proto::Endpoint::new(config.clone(), mw_proto::job_id_from_key(&JOB_KEY), MCAST_ROOT, 0xe1, RANKS);
    let data = [0x3c; MCAST_LEN as usize];
    let seg = |transfer, offset: u64, len: usize| mw_wire::mcast::McastData {
        team: MCAST_TEAM,
        transfer,
        total: MCAST_LEN,
        offset,
        data: &data[..len],
    };
    let mut input = vec![mode];
    let mut buf = vec![0u8; config.max_datagram];
    for (to, index, segment) in [
        (None, 0, seg(MCAST_TRANSFER, 0, MCAST_LEN as usize)),
        (Some(ME), 0, seg(MCAST_TRANSFER, 8, 100)),
        (None, 1, seg(MCAST_TRANSFER, MCAST_LEN, 0)),
        (None, 0, seg(MCAST_TRANSFER + 1, 0, MCAST_LEN as usize)),
    ] {
        let len = root.encode_mcast(to, index, &segment, &mut buf).expect("a segment fits");
        push_record(&mut input, &buf[..len]);
    }
    input
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_reach_the_executor_and_land_only_where_allowed() {
        for seed in seeds() {
            run(&seed);
        }
        // One input with every operation: writes land in the writable regions.
        let records = |input: &[u8]| {
            let mut out = Vec::new();
            let mut rest = &input[1..];
            while let [_, lo, hi, tail @ ..] = rest {
                let len = usize::from(u16::from_le_bytes([*lo, *hi]));
                out.push(tail[..len].to_vec());
                rest = &tail[len..];
            }
            out
        };
        let all = seeds().into_iter().filter(|s| s[0] == 0).max_by_key(|s| records(s).len()).expect("seeds");
        let mut h = Harness::new(0);
        for datagram in records(&all) {
            h.handle_datagram(&datagram);
        }
        assert!(h.stats.rejected_no_permission >= 2, "{:?}", h.stats);
        assert!(h.stats.rejected_out_of_bounds >= 2, "{:?}", h.stats);
        assert!(h.stats.rejected_bad_key >= 1, "{:?}", h.stats);
        assert_eq!(h.stats.malformed_ops, 0);
        let mut now = vec![0u8; h.initial.len()];
        h.arena.read(0, &mut now);
        for (i, &(key, len, access)) in REGIONS.iter().enumerate() {
            let range = h.offsets[i]..h.offsets[i] + len;
            let changed = now[range.clone()] != h.initial[range];
            assert_eq!(changed, access.contains(Access::WRITE), "region {key:#x}");
        }
        assert_eq!(h.requests.is_done(RequestId(h.request_ids()[1])), Some(true), "atomic reply consumed");
    }

    #[test]
    fn multicast_segments_land_in_the_armed_range_only() {
        for mode in MODES {
            let seed = mcast_seed(mode);
            let mut h = Harness::new(mode);
            let mut rest = &seed[1..];
            while let [_, lo, hi, tail @ ..] = rest {
                let len = usize::from(u16::from_le_bytes([*lo, *hi]));
                h.handle_datagram(&tail[..len]);
                rest = &tail[len..];
            }
            let all = h.regions.get(RegionKey(KEY_ALL)).expect("registered").mem;
            let mut got = vec![0u8; 256];
            all.read(0, &mut got);
            let start = h.offsets[0];
            let initial = &h.initial[start..start + 256];
            let armed = MCAST_AT..MCAST_AT + MCAST_LEN as usize;
            assert!(got[armed.clone()].iter().all(|&b| b == 0x3c), "mode {mode}: the segment landed");
            assert_eq!(got[..armed.start], initial[..armed.start]);
            assert_eq!(got[armed.end..], initial[armed.end..]);
            assert_eq!(h.mcast.stats.stray, 3, "wrong place, past the end, another transfer");
            assert_eq!(h.proto.stats().mcast_received, 4);
        }
    }

    #[test]
    fn fixup_makes_any_header_acceptable() {
        for mode in MODES {
            let mut h = Harness::new(mode);
            let body = OpRepr::Put(op::Put { req: 0, key: KEY_ALL, offset: 0, body: b"fixed up" });
            let mut datagram = vec![0xffu8; HEADER_LEN];
            datagram[3] = 1; // Data
            datagram[4..6].copy_from_slice(&(Flags::FIRST | Flags::LAST).bits().to_le_bytes());
            datagram[32..36].copy_from_slice(&0u32.to_le_bytes()); // the first sequence number
            let mut msg = vec![0u8; 64];
            let len = body.emit(&mut msg);
            datagram.extend_from_slice(&msg[..len]);
            h.fixup(&mut datagram, true);
            h.handle_datagram(&datagram);
            let all_region = h.regions.get(RegionKey(KEY_ALL)).expect("registered");
            let mut got = [0u8; 8];
            all_region.mem.read(0, &mut got);
            assert_eq!(&got, b"fixed up", "mode {mode}");
        }
    }
}
