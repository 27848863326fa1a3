//! The measured points: memwire operations and their raw-UDP baselines.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mw_core::{Access, Cmp, Signal, SignalOp};
use mw_transport::udp::{UdpConfig, UdpTransport};

use crate::harness::{two_ranks, two_ranks_with};

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
    latency_row("put_signal", transport, size, put_signal_samples(transport, size, iters, |_| {})).emit()
}

/// put_signal ping-pong with packet authentication forced on
/// (`put_signal_auth`) against the same ping-pong with it forced off
/// (`put_signal`), over UDP, measured in alternating blocks of a quarter of
/// the iterations each, so that load drifting on a shared machine hits both alike.
pub fn pingpong_put_signal_auth_pair(size: usize, iters: usize) -> [Row; 2] {
    const BLOCKS: usize = 4;
    let per_block = iters.div_ceil(BLOCKS);
    let (mut plain, mut auth) = (Vec::new(), Vec::new());
    for _ in 0..BLOCKS {
        plain.extend(put_signal_samples("udp", size, per_block, |c| c.auth = Some(false)));
        auth.extend(put_signal_samples("udp", size, per_block, |c| c.auth = Some(true)));
    }
    [latency_row("put_signal", "udp", size, plain).emit(), latency_row("put_signal_auth", "udp", size, auth).emit()]
}

fn put_signal_samples(
    transport: &'static str,
    size: usize,
    iters: usize,
    adjust: fn(&mut mw_core::Config),
) -> Vec<f64> {
    let total = (iters + warmup(iters)) as u64;
    two_ranks_with(transport, adjust, move |ep| {
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
    })
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

/// Tagged send/recv ping-pong: each side receives `size` bytes with a
/// blocking `recv` and sends them back with `send`.
pub fn pingpong_send_recv(transport: &'static str, size: usize, iters: usize) -> Row {
    let total = iters + warmup(iters);
    let samples = two_ranks(transport, move |ep| {
        let data = vec![3u8; size];
        let mut buf = vec![0u8; size];
        let mut samples = Vec::with_capacity(iters);
        let peer = 1 - ep.rank();
        for i in 0..total {
            if ep.rank() == 0 {
                let t0 = Instant::now();
                ep.send(peer, 1, &data).expect("send");
                ep.recv(peer, 1, &mut buf).expect("recv");
                if i >= total - iters {
                    samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
                }
            } else {
                ep.recv(peer, 1, &mut buf).expect("recv");
                ep.send(peer, 1, &data).expect("send");
            }
        }
        ep.barrier().expect("barrier");
        samples
    });
    latency_row("send_recv", transport, size, samples).emit()
}

/// Active-message round trip (reported as half): the handler at rank 1
/// replies with a payload of the same size.
pub fn pingpong_am(transport: &'static str, size: usize, iters: usize) -> Row {
    let total = iters + warmup(iters);
    let samples = two_ranks(transport, move |ep| {
        let reply = vec![4u8; size];
        ep.register_handler(1, move |ctx, _m| {
            let _ = ctx.reply(&[], &reply);
        })
        .expect("register");
        ep.barrier().expect("barrier");
        let data = vec![3u8; size];
        let mut samples = Vec::with_capacity(iters);
        if ep.rank() == 0 {
            for i in 0..total {
                let t0 = Instant::now();
                let r = ep.am_request(1, 1, &[], &data).expect("am_request");
                if i >= total - iters {
                    samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
                }
                assert_eq!(r.payload.len(), size);
            }
        }
        ep.barrier().expect("barrier");
        samples
    });
    latency_row("am", transport, size, samples).emit()
}

/// Send/recv bandwidth: blocking `send` of `size`-byte messages (eager or
/// rendezvous by size) against blocking `recv`s, until `total` bytes arrived.
pub fn bandwidth_send_recv(transport: &'static str, size: usize, total: usize) -> Row {
    let count = total.div_ceil(size).max(1);
    let mbps = two_ranks(transport, move |ep| {
        let mut mbps = 0.0;
        ep.barrier().expect("barrier");
        if ep.rank() == 0 {
            let data = vec![5u8; size];
            let t0 = Instant::now();
            for _ in 0..count {
                ep.send(1, 2, &data).expect("send");
            }
            // Eager sends complete locally: the receiver's ack ends the clock.
            ep.recv(1, 3, &mut [0u8; 1]).expect("ack");
            mbps = (count * size) as f64 / t0.elapsed().as_secs_f64() / 1e6;
        } else {
            let mut buf = vec![0u8; size];
            for _ in 0..count {
                ep.recv(0, 2, &mut buf).expect("recv");
            }
            ep.send(0, 3, &[1]).expect("ack");
        }
        ep.barrier().expect("barrier");
        mbps
    });
    Row {
        bench: "bandwidth",
        op: "send_recv",
        transport,
        size,
        iters: count,
        median_us: None,
        p99_us: None,
        mbps: Some(mbps),
    }
    .emit()
}

/// `units` of dependent integer work (the "computation" overlapped with
/// communication); returns a value so it is not optimized away.
fn compute(units: u64) -> u64 {
    let mut x = 1u64;
    for i in 0..units {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    x
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Overlap of a `size`-byte receive with computation, progress thread on
/// (SR8000 Fig. 3): the receive alone (`comm`), a computation of about the
/// same length alone (`comp`), then the receive posted before the
/// computation and waited after it (`both`). Overlap = (comm + comp − both) /
/// min(comm, comp): 100% when the transfer hides entirely behind the work.
pub fn overlap_recv(size: usize, reps: usize) -> Row {
    let (comm, comp, both) = two_ranks_with(
        "udp",
        |cfg| cfg.progress = mw_core::ProgressMode::Thread,
        move |ep| {
            let mut comm = Vec::new();
            let mut comp = Vec::new();
            let mut both = Vec::new();
            let data = vec![6u8; size];
            let mut buf = vec![0u8; size];
            // Phase 1: the receive alone. Phase 2: both.
            for phase in 0..2 {
                let mut units = 0u64;
                if phase == 1 && ep.rank() == 0 {
                    // Calibrate the work to last about as long as the receive.
                    let target = median(comm.clone());
                    let probe = 1u64 << 20;
                    let t0 = Instant::now();
                    compute(probe);
                    let per_unit = t0.elapsed().as_secs_f64() * 1e6 / probe as f64;
                    units = (target / per_unit.max(1e-6)) as u64;
                    for _ in 0..reps {
                        let t0 = Instant::now();
                        compute(units);
                        comp.push(t0.elapsed().as_secs_f64() * 1e6);
                    }
                }
                for _ in 0..reps {
                    if ep.rank() == 0 {
                        let h = ep.irecv(1, 1, &mut buf).expect("irecv");
                        ep.barrier().expect("barrier");
                        let t0 = Instant::now();
                        if phase == 1 {
                            compute(units);
                        }
                        h.wait().expect("recv");
                        let us = t0.elapsed().as_secs_f64() * 1e6;
                        if phase == 0 {
                            comm.push(us)
                        } else {
                            both.push(us)
                        }
                    } else {
                        ep.barrier().expect("barrier");
                        ep.send(0, 1, &data).expect("send");
                    }
                }
            }
            ep.barrier().expect("barrier");
            if ep.rank() == 0 {
                (median(comm), median(comp), median(both))
            } else {
                (0.0, 0.0, 0.0)
            }
        },
    );
    let pct = 100.0 * (comm + comp - both) / comm.min(comp).max(1e-9);
    let obj = serde_json::json!({
        "bench": "overlap", "op": "send_recv", "transport": "udp", "size": size, "iters": reps,
        "comm_us": comm.round(), "comp_us": comp.round(), "both_us": both.round(), "overlap_pct": pct.round(),
    });
    println!("{obj}");
    eprintln!("  overlap {size} B: comm {comm:.0} us, compute {comp:.0} us, both {both:.0} us -> {pct:.0}% overlapped");
    Row {
        bench: "overlap",
        op: "send_recv",
        transport: "udp",
        size,
        iters: reps,
        median_us: Some(both),
        p99_us: None,
        mbps: None,
    }
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

/// Put bandwidth: `size`-byte puts with a window of `window` outstanding,
/// until `total` bytes are complete at the target.
pub fn bandwidth_put(transport: &'static str, size: usize, total: usize, window: usize) -> Row {
    let count = total.div_ceil(size).max(1);
    let mbps = two_ranks(transport, move |ep| {
        let region = ep.alloc_symmetric(size, Access::ALL).expect("alloc");
        let key = region.key();
        let data = vec![5u8; size];
        let mut mbps = 0.0;
        if ep.rank() == 0 {
            let t0 = Instant::now();
            let mut in_flight = std::collections::VecDeque::new();
            for _ in 0..count {
                if in_flight.len() == window {
                    let h: mw_core::Handle<'_> = in_flight.pop_front().expect("window");
                    h.wait().expect("put");
                }
                in_flight.push_back(ep.put_nb(1, key, 0, &data).expect("put_nb"));
            }
            mw_core::wait_all(in_flight).expect("put");
            mbps = (count * size) as f64 / t0.elapsed().as_secs_f64() / 1e6;
        }
        ep.barrier().expect("barrier");
        mbps
    });
    Row::bandwidth("put", transport, size, count, mbps).emit()
}

/// Get bandwidth: `size`-byte gets with `window / 2` to `window`
/// outstanding. (A handle borrows its destination, so the window is two
/// halves of buffers that take turns: one half is refilled while the other
/// is in flight; draining the whole window before issuing more would empty
/// the pipe once per batch.)
pub fn bandwidth_get(transport: &'static str, size: usize, total: usize, window: usize) -> Row {
    let count = total.div_ceil(size).max(1);
    let mbps = two_ranks(transport, move |ep| {
        let region = ep.alloc_symmetric(size, Access::ALL).expect("alloc");
        let key = region.key();
        let mut bufs: Vec<Vec<u8>> = (0..window.max(2)).map(|_| vec![0u8; size]).collect();
        let mut mbps = 0.0;
        if ep.rank() == 0 {
            let (first, second) = bufs.split_at_mut(window.max(2) / 2);
            let t0 = Instant::now();
            let mut issued = 0;
            let mut in_second = Vec::new();
            while issued < count {
                let n = (count - issued).min(first.len());
                let in_first: Vec<_> =
                    first.iter_mut().take(n).map(|b| ep.get_nb(1, key, 0, b).expect("get_nb")).collect();
                issued += n;
                mw_core::wait_all(in_second).expect("get");
                let n = (count - issued).min(second.len());
                in_second = second.iter_mut().take(n).map(|b| ep.get_nb(1, key, 0, b).expect("get_nb")).collect();
                issued += n;
                mw_core::wait_all(in_first).expect("get");
            }
            mw_core::wait_all(in_second).expect("get");
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
    for auth in rows.iter().filter(|r| r.op == "put_signal_auth") {
        let plain = rows.iter().find(|r| r.op == "put_signal" && r.size == auth.size);
        if let (Some(a), Some(p)) = (auth.median_us, plain.and_then(|p| p.median_us)) {
            eprintln!("put_signal {} B: authenticated / plain median = {:.3}x (target <= 1.1x)", auth.size, a / p);
        }
    }
}
