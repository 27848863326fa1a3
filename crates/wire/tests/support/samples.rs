//! One sample operation of every kind, and a helper that wraps a message in a
//! single-segment Data packet; used as fuzz seeds and mutation bases.

use mw_wire::op::*;
use mw_wire::{Flags, HeaderRepr, PacketType, HEADER_LEN, MAC_LEN};

static DATA: [u8; 256] = {
    let mut a = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        a[i] = (i as u8).wrapping_mul(7);
        i += 1;
    }
    a
};
static PAIRS: [(u64, u32); 2] = [(8, 3), (64, 5)];
static RANGES: [(u32, u32); 2] = [(1, 3), (7, 8)];

/// One operation of every opcode.
pub fn ops() -> Vec<OpRepr<'static>> {
    vec![
        OpRepr::Put(Put { req: 1, key: 2, offset: 3, body: &DATA[..8] }),
        OpRepr::PutInline(PutInline { req: 1, key: 2, offset: 3, body: &DATA[..32] }),
        OpRepr::GetRequest(GetRequest { req: 1, key: 2, offset: 3, len: 4 }),
        OpRepr::GetResponse(GetResponse { req: 1, status: Status::Ok, body: &DATA[..16] }),
        OpRepr::AtomicRequest(AtomicRequest {
            req: 1,
            key: 2,
            offset: 8,
            op: AtomicOp::CompareSwap,
            width: AtomicWidth::U32,
            fetch: true,
            operand: 5,
            compare: 6,
        }),
        OpRepr::AtomicResponse(AtomicResponse { req: 1, status: Status::Ok, value: 7 }),
        OpRepr::PutSignal(PutSignal {
            req: 1,
            key: 2,
            offset: 3,
            signal_key: 4,
            signal_offset: 8,
            signal_op: SignalOp::Set,
            signal_value: 1,
            body: &DATA[..8],
        }),
        OpRepr::PutStrided(PutStrided {
            req: 1,
            key: 2,
            offset: 0,
            elem_size: 2,
            count: 3,
            stride: 4,
            body: &DATA[..6],
        }),
        OpRepr::GetStridedRequest(GetStridedRequest { req: 1, key: 2, offset: 0, elem_size: 2, count: 3, stride: 4 }),
        OpRepr::PutIov(PutIov { req: 1, key: 2, segments: IovSegments::from_pairs(&PAIRS), body: &DATA[..8] }),
        OpRepr::PutMasked(PutMasked {
            req: 1,
            key: 2,
            offset: 0,
            block: MaskedBlock::B64,
            mask: 0x0f0f,
            body: &DATA[..64],
        }),
        OpRepr::RegisterPut(RegisterPut { req: 1, register: 2, body: &DATA[..4] }),
        OpRepr::OpStatus(OpStatus { req: 1, status: Status::NoPermission }),
        OpRepr::AmRequest(AmRequest {
            req: 1,
            handler: 2,
            want_reply: true,
            rndv: false,
            args: AmArgs::from_slice(&[3, 4]).expect("two args fit"),
            body: &DATA[..5],
        }),
        OpRepr::AmReply(AmReply {
            req: 1,
            status: Status::Ok,
            rndv: false,
            args: AmArgs::from_slice(&[9]).expect("fits"),
            body: &[],
        }),
        OpRepr::Eager(Eager { context: 1, tag: 2, body: &DATA[..12] }),
        OpRepr::RndvRts(RndvRts { context: 1, tag: 2, total_len: 1 << 20, sender_req: 3, key: 4, offset: 5 }),
        OpRepr::RndvDone(RndvDone { sender_req: 3, status: Status::Ok }),
        OpRepr::FifoPush(FifoPush { req: 1, key: 2, body: &DATA[..16] }),
        OpRepr::Credit(Credit { class: 1, amount: 64 }),
        OpRepr::McastFeedback(McastFeedback {
            team: 9,
            transfer: 4,
            contig: 1,
            done: false,
            missing: McastRanges::from_pairs(&RANGES),
        }),
    ]
}

/// The whole message of `op`: header then body.
pub fn message(op: &OpRepr<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; op.buffer_len()];
    op.emit(&mut buf);
    buf
}

/// A header for a packet of `packet_type` with `payload_len` bytes of payload.
pub fn header(packet_type: PacketType, flags: Flags, payload_len: u16) -> HeaderRepr {
    HeaderRepr {
        packet_type,
        flags,
        payload_len,
        job_id: 0x0123_4567_89ab_cdef,
        src_rank: 1,
        dst_rank: 2,
        src_epoch: 0x1234_5678,
        dst_epoch: 0x9abc_def0,
        seq: 100,
        ack: 50,
        sack: 0b101,
    }
}

/// Which trailer a sample packet carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trailer {
    /// None.
    Plain,
    /// A (dummy) MAC.
    Mac,
    /// A valid CRC32C checksum.
    Checksum,
}

/// `payload` in one packet with the given trailer.
pub fn packet(header: HeaderRepr, payload: &[u8], trailer: Trailer) -> Vec<u8> {
    let mut header = header;
    header.payload_len = u16::try_from(payload.len()).expect("payload fits one packet");
    header.flags.set(Flags::MAC, trailer == Trailer::Mac);
    header.flags.set(Flags::CHECKSUM, trailer == Trailer::Checksum);
    let mut buf = vec![0u8; header.buffer_len()];
    header.emit_into(&mut buf);
    let end = HEADER_LEN + payload.len();
    buf[HEADER_LEN..end].copy_from_slice(payload);
    match trailer {
        Trailer::Plain => {}
        Trailer::Mac => buf[end..].copy_from_slice(&[0x5a; MAC_LEN]),
        Trailer::Checksum => {
            let crc = mw_wire::packet_checksum(&buf[..end]);
            buf[end..].copy_from_slice(&crc.to_le_bytes());
        }
    }
    buf
}

/// Seed inputs: every op alone and inside a Data packet, plus control packets.
pub fn seeds() -> Vec<Vec<u8>> {
    let data = header(PacketType::Data, Flags::FIRST | Flags::LAST | Flags::ACK, 0);
    let mut seeds = Vec::new();
    for (i, op) in ops().iter().enumerate() {
        let msg = message(op);
        seeds.push(packet(data, &msg, [Trailer::Plain, Trailer::Mac, Trailer::Checksum][i % 3]));
        seeds.push(msg);
    }
    seeds.push(packet(header(PacketType::Ack, Flags::ACK, 0), &[], Trailer::Plain));
    seeds.push(packet(header(PacketType::Ack, Flags::ACK, 0), &[], Trailer::Checksum));
    seeds.push(packet(header(PacketType::Nack, Flags::ACK | Flags::ACK_NOW, 0), &[], Trailer::Mac));
    seeds.push(packet(header(PacketType::Raw, Flags::empty(), 0), b"raw user bytes", Trailer::Plain));
    seeds.push(packet(header(PacketType::Probe, Flags::ACK_NOW, 0), &[], Trailer::Plain));
    seeds.push(packet(header(PacketType::Reset, Flags::empty(), 0), &[], Trailer::Plain));
    let mcast = HeaderRepr {
        ack: 0,
        sack: 0,
        dst_rank: mw_wire::mcast::GROUP_RANK,
        seq: 1,
        ..header(PacketType::Mcast, Flags::empty(), 0)
    };
    let segment = mw_wire::mcast::McastData { team: 5, transfer: 6, total: 40, offset: 24, data: &DATA[..16] };
    let mut payload = vec![0u8; segment.buffer_len()];
    segment.emit(&mut payload);
    seeds.push(packet(mcast, &payload, Trailer::Plain));
    seeds.push(packet(mcast, &payload, Trailer::Mac));
    seeds.push(packet(mcast, &payload, Trailer::Checksum));
    seeds
}
