//! The socket baselines, measured in the same run on the same loopback
//! path as memwire's UDP: `udp_raw` (datagrams without any reliability)
//! and `tcp_raw` (one TCP connection with TCP_NODELAY). Both poll
//! nonblocking sockets the way memwire's default wait policy does (try, then
//! yield the CPU), so they pay the same scheduler costs.
//!
//! Owns those measurements, each side a thread of this process; must not
//! print (the runner emits the rows). A lost raw datagram in a ping-pong is
//! reported as an error (raw UDP has no retransmission), never as a time.
//! Under mwrun the same baselines run between two processes instead, on the
//! job's own path (`rawpair`, which shares the socket helpers below).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use mw_transport::udp::{UdpConfig, UdpTransport};

use crate::pingpong::warmup;
use crate::row::Row;

/// Largest raw datagram (memwire's loopback datagram size).
pub const DATAGRAM: usize = 65_000;
/// A ping-pong datagram not back within this long was lost.
pub const LOST_AFTER: Duration = Duration::from_secs(2);

fn bind_udp() -> UdpTransport {
    UdpTransport::bind("127.0.0.1:0".parse().expect("addr"), &UdpConfig::default()).expect("bind UDP")
}

/// Sends one datagram, retrying while the socket is full; any other error
/// (e.g. a datagram too large) is fatal for the measurement.
pub fn send_udp(sock: &mut UdpTransport, datagram: &[u8], dst: SocketAddr) {
    loop {
        match sock.send_to(datagram, dst) {
            Ok(()) => return,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::thread::yield_now()
            }
            Err(e) => panic!("udp_raw: sending a {}-byte datagram: {e}", datagram.len()),
        }
    }
}

fn send_all_udp(sock: &mut UdpTransport, data: &[u8], dst: SocketAddr) {
    send_all_udp_in(sock, data, dst, DATAGRAM);
}

/// Sends `data` as datagrams of at most `datagram` bytes (one empty one
/// when `data` is empty).
pub fn send_all_udp_in(sock: &mut UdpTransport, data: &[u8], dst: SocketAddr, datagram: usize) {
    for piece in data.chunks(datagram) {
        send_udp(sock, piece, dst);
    }
    if data.is_empty() {
        send_udp(sock, &[], dst);
    }
}

/// Receives datagrams until `size` bytes (at least one datagram) arrived;
/// `false` if none came for [`LOST_AFTER`].
pub fn recv_all_udp(sock: &mut UdpTransport, buf: &mut [u8], size: usize) -> bool {
    let mut got = 0;
    let mut datagrams = 0;
    let mut idle = Instant::now();
    while got < size || datagrams == 0 {
        match sock.recv_one(buf) {
            Ok(Some((len, _))) => {
                got += len;
                datagrams += 1;
                idle = Instant::now();
            }
            _ if idle.elapsed() > LOST_AFTER => return false,
            _ => std::thread::yield_now(),
        }
    }
    true
}

/// Raw UDP ping-pong of `size` bytes (split into 65,000-byte datagrams).
pub fn udp_pingpong(size: usize, iters: usize) -> Result<Row, String> {
    let (mut a, mut b) = (bind_udp(), bind_udp());
    let (addr_a, addr_b) = (a.local_addr(), b.local_addr());
    let total = iters + warmup(iters);
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        let data = vec![8u8; size];
        for _ in 0..total {
            if !recv_all_udp(&mut b, &mut buf, size) {
                return;
            }
            send_all_udp(&mut b, &data, addr_a);
        }
    });
    let payload = vec![7u8; size];
    let mut buf = vec![0u8; 65_536];
    let mut samples = Vec::with_capacity(iters);
    for i in 0..total {
        let t0 = Instant::now();
        send_all_udp(&mut a, &payload, addr_b);
        if !recv_all_udp(&mut a, &mut buf, size) {
            return Err(format!("udp_raw ping-pong of {size} B lost a datagram (raw UDP has no retransmission)"));
        }
        if i >= total - iters {
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
    }
    echo.join().expect("echo thread");
    Ok(Row::latency("pingpong", "udp_raw", "udp", size, samples))
}

/// One blast of `count` datagrams of `datagram` bytes from `tx` to `dst`.
fn blast(mut tx: UdpTransport, dst: SocketAddr, datagram: usize, count: usize) {
    let payload = vec![1u8; datagram];
    for _ in 0..count {
        send_udp(&mut tx, &payload, dst);
    }
}

/// Receives until `expect` bytes arrived or the sender has been silent for
/// 300 ms; returns (bytes, datagrams, first-to-last-arrival time).
fn absorb(mut rx: UdpTransport, expect: usize) -> (usize, usize, Duration) {
    absorb_from(&mut rx, expect, Duration::from_millis(300))
}

/// [`absorb`] on a borrowed socket that waits up to `first_wait` for the
/// first datagram (a sender in another process starts a little later).
pub fn absorb_from(rx: &mut UdpTransport, expect: usize, first_wait: Duration) -> (usize, usize, Duration) {
    let mut buf = vec![0u8; 65_536];
    let (mut got, mut datagrams) = (0usize, 0usize);
    let mut first = None;
    let mut last = Instant::now();
    let mut idle_since = Instant::now();
    let quiet = Duration::from_millis(300);
    while got < expect && idle_since.elapsed() < if first.is_some() { quiet } else { first_wait.max(quiet) } {
        match rx.recv_one(&mut buf) {
            Ok(Some((len, _))) => {
                first.get_or_insert_with(Instant::now);
                last = Instant::now();
                idle_since = last;
                got += len;
                datagrams += 1;
            }
            _ => std::thread::yield_now(),
        }
    }
    (got, datagrams, first.map_or(Duration::ZERO, |f| last - f))
}

/// Raw UDP blast: `count` messages of `size` bytes (datagrams of at most
/// 65,000 bytes) in one direction, or in both at once (`both`); bytes
/// received per second at the receiver(s) (lost datagrams do not count).
pub fn udp_blast(bench: &str, size: usize, count: usize, both: bool) -> Row {
    let datagram = size.clamp(1, DATAGRAM);
    let datagrams = (count * size).div_ceil(datagram).max(1);
    let directions = if both { 2 } else { 1 };
    let mut receivers = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..directions {
        let (tx, rx) = (bind_udp(), bind_udp());
        let dst = rx.local_addr();
        receivers.push(std::thread::spawn(move || absorb(rx, datagrams * datagram)));
        senders.push(std::thread::spawn(move || blast(tx, dst, datagram, datagrams)));
    }
    senders.into_iter().for_each(|s| s.join().expect("sender"));
    let results: Vec<_> = receivers.into_iter().map(|r| r.join().expect("receiver")).collect();
    let bytes: usize = results.iter().map(|r| r.0).sum();
    let seconds = results.iter().map(|r| r.2.as_secs_f64()).fold(0.0, f64::max);
    let mut row = Row::throughput(bench, "udp_raw", "udp", size, count, bytes as f64, seconds);
    let sent = (directions * datagrams * datagram) as f64;
    row.extra.insert("received_pct".into(), serde_json::json!((1000.0 * bytes as f64 / sent).round() / 10.0));
    row
}

/// Raw UDP message rate: `count` datagrams of `size` bytes; datagrams
/// received per second (first to last arrival).
pub fn udp_rate(size: usize, count: usize) -> Result<Row, String> {
    if size > DATAGRAM {
        return Err(format!("udp_raw message rate is per datagram, at most {DATAGRAM} B"));
    }
    let (tx, rx) = (bind_udp(), bind_udp());
    let dst = rx.local_addr();
    let receiver = std::thread::spawn(move || absorb(rx, count * size.max(1)));
    blast(tx, dst, size, count);
    let (_, datagrams, elapsed) = receiver.join().expect("receiver");
    let mut row = Row::rate("udp_raw", "udp", size, datagrams, elapsed.as_secs_f64());
    row.extra.insert("sent".into(), serde_json::json!(count));
    Ok(row)
}

/// Raw UDP initiator overhead: how long the `sendto` calls of a `size`-byte
/// message take to return, while a thread drains the receiver.
pub fn udp_overhead(size: usize, iters: usize) -> Row {
    let (mut tx, mut rx) = (bind_udp(), bind_udp());
    let dst = rx.local_addr();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drainer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if !matches!(rx.recv_one(&mut buf), Ok(Some(_))) {
                    std::thread::yield_now();
                }
            }
        })
    };
    let payload = vec![2u8; size];
    let total = iters + warmup(iters);
    let mut samples = Vec::with_capacity(iters);
    for i in 0..total {
        let t0 = Instant::now();
        send_all_udp(&mut tx, &payload, dst);
        let us = t0.elapsed().as_secs_f64() * 1e6;
        if i >= total - iters {
            samples.push(us);
        }
        // Let the drainer keep up, as memwire's window does.
        if i % 64 == 63 {
            std::thread::yield_now();
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drainer.join().expect("drainer");
    Row::latency("overhead", "udp_raw", "udp", size, samples)
}

/// A connected pair of nonblocking TCP sockets on loopback with TCP_NODELAY.
fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind TCP");
    let a = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let (b, _) = listener.accept().expect("accept");
    for s in [&a, &b] {
        s.set_nodelay(true).expect("TCP_NODELAY");
        s.set_nonblocking(true).expect("nonblocking");
    }
    (a, b)
}

pub fn write_polling(s: &mut TcpStream, mut data: &[u8]) {
    while !data.is_empty() {
        match s.write(data) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::thread::yield_now()
            }
            Err(e) => panic!("tcp_raw write: {e}"),
        }
    }
}

/// Reads until exactly `buf.len()` bytes arrived.
pub fn read_polling(s: &mut TcpStream, buf: &mut [u8]) {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => panic!("tcp_raw: connection closed"),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::thread::yield_now()
            }
            Err(e) => panic!("tcp_raw read: {e}"),
        }
    }
}

/// Raw TCP ping-pong of `size` bytes.
pub fn tcp_pingpong(size: usize, iters: usize) -> Row {
    let (mut a, mut b) = tcp_pair();
    let total = iters + warmup(iters);
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; size.max(1)];
        for _ in 0..total {
            read_polling(&mut b, &mut buf[..size]);
            write_polling(&mut b, &buf[..size]);
        }
    });
    let payload = vec![7u8; size];
    let mut buf = vec![0u8; size];
    let mut samples = Vec::with_capacity(iters);
    for i in 0..total {
        let t0 = Instant::now();
        write_polling(&mut a, &payload);
        read_polling(&mut a, &mut buf);
        if i >= total - iters {
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
    }
    echo.join().expect("echo thread");
    Row::latency("pingpong", "tcp_raw", "udp", size, samples).via("tcp")
}

/// Streams `count` writes of `size` bytes from `tx`, then waits for the
/// 1-byte acknowledgement the reader sends after the last byte.
pub fn tcp_send_stream(tx: &mut TcpStream, size: usize, count: usize) {
    let data = vec![5u8; size];
    for _ in 0..count {
        write_polling(tx, &data);
    }
    read_polling(tx, &mut [0u8; 1]);
}

pub fn tcp_recv_stream(rx: &mut TcpStream, size: usize, count: usize) {
    let mut buf = vec![0u8; (size * count).clamp(1, 1 << 20)];
    let mut left = size * count;
    while left > 0 {
        let n = left.min(buf.len());
        read_polling(rx, &mut buf[..n]);
        left -= n;
    }
    write_polling(rx, &[1]);
}

/// Raw TCP streaming: `count` writes of `size` bytes, one direction
/// (`bandwidth`, `rate`) or both at once (`bibw`); bytes per second at the
/// sender (until the receiver's acknowledgement of the last byte).
pub fn tcp_stream(bench: &str, size: usize, count: usize) -> Row {
    let both = bench == "bibw";
    let directions = if both { 2 } else { 1 };
    // One connection per direction, so each acknowledgement has its own stream.
    let pairs: Vec<_> = (0..directions).map(|_| tcp_pair()).collect();
    let t0 = Instant::now();
    let mut threads = Vec::new();
    for (mut tx, mut rx) in pairs {
        threads.push(std::thread::spawn(move || tcp_send_stream(&mut tx, size, count)));
        threads.push(std::thread::spawn(move || tcp_recv_stream(&mut rx, size, count)));
    }
    threads.into_iter().for_each(|t| t.join().expect("tcp_raw stream thread"));
    let seconds = t0.elapsed().as_secs_f64();
    let row = if bench == "rate" {
        Row::rate("tcp_raw", "udp", size, count, seconds)
    } else {
        Row::throughput(bench, "tcp_raw", "udp", size, count, (directions * count * size) as f64, seconds)
    };
    row.via("tcp")
}
