//! Micro-benchmarks of the hot-path codecs: the packet header, an 8-byte
//! put and a put-with-signal, each encoded then decoded.
//!
//! `cargo bench -p mw-wire --bench codec` (add `-- --quick` for a short run).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use mw_wire::op::{Put, PutSignal, SignalOp, MAX_HEADER_LEN};
use mw_wire::{Flags, HeaderRepr, OpRepr, PacketType, HEADER_LEN};

fn header() -> HeaderRepr {
    HeaderRepr {
        packet_type: PacketType::Data,
        flags: Flags::FIRST | Flags::LAST | Flags::ACK,
        payload_len: 32,
        job_id: 0x0123_4567_89ab_cdef,
        src_rank: 1,
        dst_rank: 2,
        src_epoch: 7,
        dst_epoch: 9,
        seq: 1000,
        ack: 500,
        sack: 0b1011,
    }
}

fn bench_header(c: &mut Criterion) {
    let repr = header();
    let mut buf = vec![0u8; repr.buffer_len()];
    let mut group = c.benchmark_group("header");
    group.throughput(Throughput::Elements(1));
    group.bench_function("encode", |b| {
        b.iter(|| black_box(&repr).emit_into(black_box(&mut buf[..])));
    });
    repr.emit_into(&mut buf);
    group.bench_function("decode", |b| {
        b.iter(|| HeaderRepr::parse_packet(black_box(&buf[..])).map(|(h, p)| (h.seq, p.len())));
    });
    group.bench_function("encode+decode", |b| {
        b.iter(|| {
            black_box(&repr).emit_into(&mut buf[..]);
            HeaderRepr::parse_packet(black_box(&buf[..])).map(|(h, p)| (h.seq, p.len()))
        });
    });
    group.finish();
}

fn bench_op(c: &mut Criterion, name: &str, repr: OpRepr<'_>) {
    let mut header = [0u8; MAX_HEADER_LEN];
    let mut msg = vec![0u8; repr.buffer_len()];
    repr.emit(&mut msg);
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    group.bench_function("encode", |b| {
        b.iter(|| black_box(&repr).emit_header(black_box(&mut header[..])));
    });
    group.bench_function("decode", |b| {
        b.iter(|| OpRepr::parse(black_box(&msg[..])).map(|op| op.body().len()));
    });
    group.bench_function("encode+decode", |b| {
        b.iter(|| {
            let len = black_box(&repr).emit_header(&mut msg[..]);
            OpRepr::parse(black_box(&msg[..])).map(|op| op.body().len() + len)
        });
    });
    group.finish();
}

fn bench_ops(c: &mut Criterion) {
    let data = 0x1122_3344_5566_7788u64.to_le_bytes();
    bench_op(c, "put8", OpRepr::Put(Put { req: 1, key: 0xabcd, offset: 64, body: &data }));
    let put_signal = PutSignal {
        req: 1,
        key: 0xabcd,
        offset: 64,
        signal_key: 0xabce,
        signal_offset: 0,
        signal_op: SignalOp::Add,
        signal_value: 1,
        body: &data,
    };
    bench_op(c, "put_signal8", OpRepr::PutSignal(put_signal));
}

/// Whole datagram: header plus an 8-byte put, encoded then decoded.
fn bench_packet(c: &mut Criterion) {
    let data = [0x5au8; 8];
    let op = OpRepr::Put(Put { req: 1, key: 0xabcd, offset: 64, body: &data });
    let mut repr = header();
    repr.payload_len = op.buffer_len() as u16;
    let mut buf = vec![0u8; repr.buffer_len()];
    c.bench_function("packet_put8/encode+decode", |b| {
        b.iter(|| {
            black_box(&repr).emit_into(&mut buf[..]);
            black_box(&op).emit(&mut buf[HEADER_LEN..]);
            let (h, payload) = HeaderRepr::parse_packet(black_box(&buf[..])).expect("valid");
            OpRepr::parse(payload).map(|op| (h.seq, op.body().len()))
        });
    });
}

/// The CRC32C checksum trailer over a small, an Ethernet-sized and a
/// loopback-sized packet (computed once by the sender, once by the receiver).
fn bench_checksum(c: &mut Criterion) {
    for len in [64usize, 1472, 65_000] {
        let buf = vec![0xa5u8; len];
        c.bench_function(&format!("checksum/{len}B"), |b| b.iter(|| mw_wire::packet_checksum(black_box(&buf))));
    }
}

criterion_group!(benches, bench_header, bench_ops, bench_packet, bench_checksum);
criterion_main!(benches);
