//! Per-packet protocol cost, no I/O: the send path (submit + poll_transmit),
//! the receive path (handle_datagram + deliver) and ack processing, for
//! single-packet messages. Each measurement runs a batch of `N` packets
//! through fresh endpoints and reports time per packet.
//!
//! `cargo bench -p mw-proto --bench packet -- --measurement-time 2`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mw_proto::time::{Duration, Instant};
use mw_proto::{Config, Endpoint};
use std::hint::black_box;

const N: usize = 2048;

fn config(ack_every: u32) -> Config {
    Config {
        initial_window: 4096,
        max_window: 4096,
        recv_window: 4096,
        max_window_bytes: 64 << 20,
        ack_every,
        ..Config::default()
    }
}

fn endpoints(ack_every: u32) -> (Endpoint, Endpoint) {
    let c = config(ack_every);
    (Endpoint::new(c.clone(), 1, 0, 0xa, 2), Endpoint::new(c, 1, 1, 0xb, 2))
}

fn now() -> Instant {
    Instant::ZERO + Duration::from_micros(5)
}

/// A's `N` data packets of `size`-byte messages, and B after receiving them.
fn data_packets(size: usize, ack_every: u32) -> (Endpoint, Endpoint, Vec<Vec<u8>>) {
    let (mut a, b) = endpoints(ack_every);
    let payload = vec![0x5a; size];
    let mut buf = vec![0u8; 1472];
    let mut packets = Vec::with_capacity(N);
    for _ in 0..N {
        a.submit(now(), 1, &[&payload]).unwrap();
        let t = a.poll_transmit(now(), &mut buf).unwrap();
        packets.push(buf[..t.len].to_vec());
    }
    (a, b, packets)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_packet");
    group.throughput(Throughput::Elements(N as u64));
    for size in [8usize, 1424] {
        group.bench_with_input(BenchmarkId::new("send_submit_poll_transmit", size), &size, |bench, &size| {
            let payload = vec![0x5a; size];
            let mut buf = vec![0u8; 1472];
            bench.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                for _ in 0..iters {
                    let (mut a, _) = endpoints(8);
                    let start = std::time::Instant::now();
                    for _ in 0..N {
                        a.submit(now(), 1, &[&payload]).unwrap();
                        black_box(a.poll_transmit(now(), &mut buf));
                    }
                    total += start.elapsed();
                }
                total
            });
        });
        group.bench_with_input(BenchmarkId::new("recv_handle_datagram_deliver", size), &size, |bench, &size| {
            let (_, _, packets) = data_packets(size, 8);
            bench.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                for _ in 0..iters {
                    let (_, mut b) = endpoints(8);
                    let mut sum = 0usize;
                    let start = std::time::Instant::now();
                    for p in &packets {
                        let _ = b.handle_datagram(now(), p, &mut |_, m| sum += m.len());
                    }
                    total += start.elapsed();
                    black_box(sum);
                }
                total
            });
        });
    }
    group.bench_function("ack_processing_every_packet", |bench| {
        // B acks every packet; A processes N acks and reports completions.
        let (_, mut b, packets) = data_packets(8, 1);
        let mut buf = vec![0u8; 1472];
        let mut acks = Vec::new();
        for p in &packets {
            let _ = b.handle_datagram(now(), p, &mut |_, _| {});
            while let Some(t) = b.poll_transmit(now(), &mut buf) {
                acks.push(buf[..t.len].to_vec());
            }
        }
        assert_eq!(acks.len(), N);
        bench.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                let (mut a, _, _) = data_packets(8, 1);
                let later = now() + Duration::from_micros(20);
                let start = std::time::Instant::now();
                for ack in &acks {
                    let _ = a.handle_datagram(later, ack, &mut |_, _| {});
                    while let Some(e) = a.poll_event() {
                        black_box(e);
                    }
                }
                total += start.elapsed();
            }
            total
        });
    });
    // One message A -> B and its share of acks (ack_every = 8), steady
    // state; with packet authentication the difference is the MAC's cost.
    group.bench_function("round_trip_8B_message", |bench| round_trip(bench, config(8)));
    let auth = Config { auth: Some(mw_proto::AuthKey::from_job_key(&[7; 16])), ..config(8) };
    group.bench_function("round_trip_8B_message_auth", |bench| round_trip(bench, auth.clone()));
    group.finish();
}

fn round_trip(bench: &mut criterion::Bencher<'_>, config: Config) {
    let (mut a, mut b) = (Endpoint::new(config.clone(), 1, 0, 0xa, 2), Endpoint::new(config, 1, 1, 0xb, 2));
    let mut buf = vec![0u8; 1472];
    let mut t = 0u64;
    bench.iter_custom(|iters| {
        let start = std::time::Instant::now();
        for _ in 0..iters * N as u64 {
            t += 100;
            let now = Instant::from_nanos(t);
            a.submit(now, 1, &[b"8 bytes!"]).unwrap();
            while let Some(tx) = a.poll_transmit(now, &mut buf) {
                let _ = b.handle_datagram(now, &buf[..tx.len], &mut |_, m| {
                    black_box(m);
                });
            }
            if b.poll_timeout().is_some_and(|d| d <= now) {
                b.handle_timeout(now);
            }
            while let Some(tx) = b.poll_transmit(now, &mut buf) {
                let _ = a.handle_datagram(now, &buf[..tx.len], &mut |_, _| {});
            }
            while let Some(e) = a.poll_event() {
                black_box(e);
            }
        }
        start.elapsed()
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
