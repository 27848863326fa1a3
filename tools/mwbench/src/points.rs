//! The measured points: memwire operations and their raw-UDP baselines.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mw_core::{Access, Cmp, Signal, SignalOp};
use mw_transport::udp::{UdpConfig, UdpTransport};

use crate::harness::two_ranks;

/// One measured point.
#[derive(Debug, Clone)]
pub struct Row {
    pub bench: &'static str,
    pub op: &'static str,
    pub transport: &'static str,
    pub size: usize,
    pub iters: usize,
    pub median_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub mbps: Option<f64>,
}

impl Row {
    /// A bandwidth point.
    pub fn bandwidth(op: &'static str, transport: &'static str, size: usize, iters: usize, mbps: f64) -> Row {
        Row { bench: "bandwidth", op, transport, size, iters, median_us: None, p99_us: None, mbps: Some(mbps) }
    }

    pub fn emit(self) -> Row {
        let mut obj = serde_json::json!({
            "bench": self.bench, "op": self.op, "transport": self.transport, "size": self.size, "iters": self.iters,
        });
        if let Some(m) = self.median_us {
            obj["median_us"] = serde_json::json!((m * 1000.0).round() / 1000.0);
        }
        if let Some(p) = self.p99_us {
            obj["p99_us"] = serde_json::json!((p * 1000.0).round() / 1000.0);
        }
        if let Some(b) = self.mbps {
            obj["MBps"] = serde_json::json!(b.round());
        }
        println!("{obj}");
        eprintln!("  measured {} {} {} {} B", self.bench, self.op, self.transport, self.size);
        self
    }
}

pub fn latency_row(op: &'static str, transport: &'static str, size: usize, mut half_rtts_us: Vec<f64>) -> Row {
    half_rtts_us.sort_by(f64::total_cmp);
    let n = half_rtts_us.len();
    Row {
        bench: "pingpong",
        op,
        transport,
        size,
        iters: n,
        median_us: Some(half_rtts_us[n / 2]),
        p99_us: Some(half_rtts_us[(n * 99 / 100).min(n - 1)]),
        mbps: None,
    }
}

fn warmup(iters: usize) -> usize {
    (iters / 10).max(100)
}

/// Polls a raw socket the way memwire's default wait policy does: try, then
/// yield the CPU, so the baseline pays the same scheduler costs.
fn recv_polling(sock: &mut UdpTransport, buf: &mut [u8]) -> usize {
    loop {
        if let Ok(Some((len, _))) = sock.recv_one(buf) {
            return len;
        }
        std::thread::yield_now();
    }
}

/// Raw UDP ping-pong without reliability: the floor memwire is judged by.
pub fn pingpong_udp_raw(size: usize, iters: usize) -> Row {
    let cfg = UdpConfig::default();
    let mut a = UdpTransport::bind("127.0.0.1:0".parse().expect("addr"), &cfg).expect("bind");
    let mut b = UdpTransport::bind("127.0.0.1:0".parse().expect("addr"), &cfg).expect("bind");
    let (addr_a, addr_b): (SocketAddr, SocketAddr) = (a.local_addr(), b.local_addr());
    let total = iters + warmup(iters);
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        for _ in 0..total {
            let len = recv_polling(&mut b, &mut buf);
            while b.send_to(&buf[..len], addr_a).is_err() {}
        }
    });
    let payload = vec![7u8; size];
    let mut buf = vec![0u8; 65_536];
    let mut samples = Vec::with_capacity(iters);
    for i in 0..total {
        let t0 = Instant::now();
        while a.send_to(&payload, addr_b).is_err() {}
        recv_polling(&mut a, &mut buf);
        if i >= total - iters {
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
    }
    echo.join().expect("echo thread");
    latency_row("udp_raw", "udp", size, samples).emit()
}

/// put_signal ping-pong: each side puts `size` bytes and sets the other's
/// signal word; the other waits on it.
pub fn pingpong_put_signal(transport: &'static str, size: usize, iters: usize) -> Row {
    let total = (iters + warmup(iters)) as u64;
    let samples = two_ranks(transport, move |ep| {
        let region = ep.alloc_symmetric(64 + size.max(8), Access::ALL).expect("alloc");
        let key = region.key();
        let data = vec![3u8; size];
        let mut samples = Vec::with_capacity(iters);
        for round in 1..=total {
            if ep.rank() == 0 {
                let t0 = Instant::now();
                let sig = Signal { key, offset: 0, op: SignalOp::Set, value: round };
                drop(ep.put_signal_nb(1, key, 64, &data, sig).expect("put_signal"));
                ep.wait_until(&region, 8, Cmp::Ge, round).expect("wait");
                if round > total - iters as u64 {
                    samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
                }
            } else {
                ep.wait_until(&region, 0, Cmp::Ge, round).expect("wait");
                let sig = Signal { key, offset: 8, op: SignalOp::Set, value: round };
                drop(ep.put_signal_nb(0, key, 64, &data, sig).expect("put_signal"));
            }
        }
        ep.quiet().expect("quiet");
        samples
    });
    latency_row("put_signal", transport, size, samples).emit()
}

/// Round trip of a fetching atomic (reported as half, like ping-pong).
pub fn pingpong_fetch_add(transport: &'static str, iters: usize) -> Row {
    let total = iters + warmup(iters);
    let samples = two_ranks(transport, move |ep| {
        let region = ep.alloc_symmetric(64, Access::ALL).expect("alloc");
        let key = region.key();
        let mut samples = Vec::with_capacity(iters);
        if ep.rank() == 0 {
            for i in 0..total {
                let t0 = Instant::now();
                ep.fetch_add_u64(1, key, 0, 1).expect("fetch_add");
                if i >= total - iters {
                    samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
                }
            }
        }
        ep.barrier().expect("barrier");
        samples
    });
    latency_row("fetch_add", transport, 8, samples).emit()
}

/// Round trip of a get of `size` bytes (reported as half).
pub fn pingpong_get(transport: &'static str, size: usize, iters: usize) -> Row {
    let total = iters + warmup(iters);
    let samples = two_ranks(transport, move |ep| {
        let region = ep.alloc_symmetric(size.max(8), Access::ALL).expect("alloc");
        let key = region.key();
        let mut out = vec![0u8; size];
        let mut samples = Vec::with_capacity(iters);
        if ep.rank() == 0 {
            for i in 0..total {
                let t0 = Instant::now();
                ep.get(1, key, 0, &mut out).expect("get");
                if i >= total - iters {
                    samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
                }
            }
        }
        ep.barrier().expect("barrier");
        samples
    });
    latency_row("get", transport, size, samples).emit()
}

/// Raw UDP blast of 65,000-byte datagrams (memwire's loopback datagram
/// size) without reliability: received bytes per second at the receiver.
pub fn bandwidth_udp_raw(size: usize, total: usize) -> Row {
    let cfg = UdpConfig::default();
    let mut tx = UdpTransport::bind("127.0.0.1:0".parse().expect("addr"), &cfg).expect("bind");
    let mut rx = UdpTransport::bind("127.0.0.1:0".parse().expect("addr"), &cfg).expect("bind");
    let dst = rx.local_addr();
    let datagram = 65_000usize;
    let count = total.div_ceil(datagram);
    let receiver = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        let mut got = 0usize;
        let mut first = None;
        let mut last = Instant::now();
        let mut idle_since = Instant::now();
        while got < count * datagram && idle_since.elapsed() < Duration::from_millis(300) {
            match rx.recv_one(&mut buf) {
                Ok(Some((len, _))) => {
                    first.get_or_insert_with(Instant::now);
                    last = Instant::now();
                    idle_since = last;
                    got += len;
                }
                _ => std::thread::yield_now(),
            }
        }
        (got, first.map_or(Duration::ZERO, |f| last - f))
    });
    let payload = vec![1u8; datagram];
    for _ in 0..count {
        while tx.send_to(&payload, dst).is_err() {
            std::thread::yield_now();
        }
    }
    let (got, elapsed) = receiver.join().expect("receiver");
    let mbps = got as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6;
    Row::bandwidth("udp_raw", "udp", size, count, mbps).emit()
}

/// Put bandwidth: `size`-byte puts with a window of 8 outstanding, until
/// `total` bytes are complete at the target.
pub fn bandwidth_put(transport: &'static str, size: usize, total: usize) -> Row {
    let count = total.div_ceil(size).max(1);
    let mbps = two_ranks(transport, move |ep| {
        let region = ep.alloc_symmetric(size, Access::ALL).expect("alloc");
        let key = region.key();
        let data = vec![5u8; size];
        let mut mbps = 0.0;
        if ep.rank() == 0 {
            let t0 = Instant::now();
            let mut window = std::collections::VecDeque::new();
            for i in 0..count {
                if window.len() == 8 {
                    let h: mw_core::Handle<'_> = window.pop_front().expect("window");
                    h.wait().expect("put");
                }
                let _ = i;
                window.push_back(ep.put_nb(1, key, 0, &data).expect("put_nb"));
            }
            mw_core::wait_all(window).expect("put");
            mbps = (count * size) as f64 / t0.elapsed().as_secs_f64() / 1e6;
        }
        ep.barrier().expect("barrier");
        mbps
    });
    Row::bandwidth("put", transport, size, count, mbps).emit()
}

/// Get bandwidth: `size`-byte gets with a window of 8 outstanding.
pub fn bandwidth_get(transport: &'static str, size: usize, total: usize) -> Row {
    let count = total.div_ceil(size).max(1);
    let mbps = two_ranks(transport, move |ep| {
        let region = ep.alloc_symmetric(size, Access::ALL).expect("alloc");
        let key = region.key();
        let mut bufs: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; size]).collect();
        let mut mbps = 0.0;
        if ep.rank() == 0 {
            let t0 = Instant::now();
            let mut done = 0;
            while done < count {
                let batch = (count - done).min(8);
                let handles: Vec<_> =
                    bufs.iter_mut().take(batch).map(|b| ep.get_nb(1, key, 0, b).expect("get_nb")).collect();
                mw_core::wait_all(handles).expect("get");
                done += batch;
            }
            mbps = (count * size) as f64 / t0.elapsed().as_secs_f64() / 1e6;
        }
        ep.barrier().expect("barrier");
        mbps
    });
    Row::bandwidth("get", transport, size, count, mbps).emit()
}

/// The readable table with ratios against the same-run baseline.
pub fn print_table(rows: &[Row]) {
    eprintln!(
        "\n{:<10} {:<11} {:<5} {:>9} {:>11} {:>9} {:>10} {:>9}",
        "bench", "op", "via", "size", "median_us", "p99_us", "MB/s", "ratio"
    );
    for row in rows {
        // Each transport against its own physical floor: raw UDP for udp,
        // the cache-line ping-pong and memcpy for shared memory.
        let floor = match (row.transport, row.bench) {
            ("shm", "pingpong") => "cacheline",
            ("shm", _) => "memcpy",
            _ => "udp_raw",
        };
        let base = rows.iter().find(|r| {
            r.bench == row.bench
                && r.op == floor
                && r.transport == row.transport
                && (r.size == row.size || floor == "cacheline")
        });
        let ratio = match (base, row.median_us, row.mbps) {
            (Some(b), Some(m), _) => b.median_us.map(|bm| format!("{:.2}x", m / bm)),
            (Some(b), _, Some(v)) => b.mbps.map(|bv| format!("{:.0}%", 100.0 * v / bv)),
            _ => None,
        };
        eprintln!(
            "{:<10} {:<11} {:<5} {:>9} {:>11} {:>9} {:>10} {:>9}",
            row.bench,
            row.op,
            row.transport,
            row.size,
            row.median_us.map_or("-".into(), |v| format!("{v:.2}")),
            row.p99_us.map_or("-".into(), |v| format!("{v:.2}")),
            row.mbps.map_or("-".into(), |v| format!("{v:.0}")),
            ratio.unwrap_or_else(|| "-".into())
        );
    }
}
