//! The socket baselines between two processes: under mwrun, `udp_raw`,
//! `udp_gso` and `tcp_raw` run between the job's ranks 0 and 1, each side
//! in its own process, on the path memwire's own UDP takes between them
//! ([`NetPath`]: between hosts, or loopback when both are on one host).
//!
//! | op        | what one side does                                                                 |
//! |-----------|------------------------------------------------------------------------------------|
//! | `udp_raw` | one `sendto` per datagram of the path's size (1472 between hosts unless `MW_MTU`, 65000 on loopback); one `recvfrom` per datagram (no GRO) |
//! | `udp_gso` | `UdpTransport::send_batch` of up to 64 such datagrams (the kernel's UDP GSO merges them, at most 64 KiB a send); `recv_batch` with GRO |
//! | `tcp_raw` | one TCP_NODELAY connection per direction                                           |
//!
//! Ping-pong, bandwidth (a blast, or a TCP stream acknowledged at its end),
//! bibw (both directions at once), rate and initiator overhead, as the
//! threaded loopback versions in `raw` measure them (and with their
//! helpers). Rates and bandwidths are taken at the receiver (first to last
//! arrival; only what arrived counts) or, over TCP, at the sender up to
//! the receiver's acknowledgement; no clocks are compared across hosts.
//!
//! Owns: binding each side's sockets on its rank's data address, the
//! exchange of socket addresses through the memwire endpoint
//! (`allgather_bytes`), starting both sides together (an allgather of
//! readiness, which is also the barrier), and bringing rank 1's counts to
//! rank 0, which builds the row. Must not: print, or touch the endpoint
//! while measuring. A side that cannot bind or connect says so in the
//! exchange, and neither side measures.

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use mw_core::Endpoint;
use mw_transport::udp::{UdpConfig, UdpTransport};

use crate::harness::NetPath;
use crate::pingpong::warmup;
use crate::plan::Point;
use crate::raw::{
    absorb_from, read_polling, recv_all_udp, send_all_udp_in, send_udp, tcp_recv_stream, tcp_send_stream,
    write_polling, LOST_AFTER,
};
use crate::row::Row;

/// Most datagrams handed to one `send_batch` (the GSO segment limit).
const GSO_BATCH: usize = 64;
/// How long a receiver waits for the first datagram of a blast.
const FIRST_WAIT: Duration = Duration::from_secs(5);
/// How long rank 1 waits for rank 0's TCP connections.
const ACCEPT_WITHIN: Duration = Duration::from_secs(10);

/// Whether `op` is one of this module's baselines.
pub fn is_pair_op(op: &str) -> bool {
    matches!(op, "udp_raw" | "udp_gso" | "tcp_raw")
}

fn udp_config(op: &str, datagram: usize) -> UdpConfig {
    let gso = op == "udp_gso";
    UdpConfig { payload_mtu: datagram, gso, gro: gso, ..UdpConfig::default() }
}

/// One side's sockets for a point.
struct Side {
    /// Sends (and, in a ping-pong, also receives).
    tx: Option<UdpTransport>,
    /// Receives a blast.
    rx: Option<UdpTransport>,
    listener: Option<TcpListener>,
}

/// Which of the three kinds of socket a side needs.
fn needs(p: &Point, rank: u32) -> (bool, bool, usize) {
    let both = p.bench == "bibw";
    let udp = p.op != "tcp_raw";
    let sends = both || rank == 0 || p.bench == "pingpong";
    let receives = both || rank == 1;
    // (a sending socket, a blast-receiving socket, TCP connections)
    match (udp, p.bench) {
        (true, "pingpong") => (true, false, 0),
        (true, _) => (sends, receives && p.bench != "pingpong", 0),
        (false, "bibw") => (false, false, 2),
        (false, _) => (false, false, 1),
    }
}

impl Side {
    fn bind(p: &Point, rank: u32, ip: IpAddr, datagram: usize) -> Result<Side, String> {
        let (tx, rx, tcp) = needs(p, rank);
        let cfg = udp_config(p.op, datagram);
        let udp = || UdpTransport::bind(SocketAddr::new(ip, 0), &cfg).map_err(|e| format!("binding UDP on {ip}: {e}"));
        let listener = if tcp > 0 && rank == 1 {
            Some(TcpListener::bind(SocketAddr::new(ip, 0)).map_err(|e| format!("binding TCP on {ip}: {e}"))?)
        } else {
            None
        };
        Ok(Side { tx: if tx { Some(udp()?) } else { None }, rx: if rx { Some(udp()?) } else { None }, listener })
    }

    /// `tx=ADDR rx=ADDR tcp=ADDR` (those it has).
    fn addresses(&self) -> String {
        let mut out = Vec::new();
        if let Some(t) = &self.tx {
            out.push(format!("tx={}", t.local_addr()));
        }
        if let Some(r) = &self.rx {
            out.push(format!("rx={}", r.local_addr()));
        }
        if let Some(l) = &self.listener {
            out.push(format!("tcp={}", l.local_addr().map_or_else(|e| e.to_string(), |a| a.to_string())));
        }
        out.join(" ")
    }
}

/// The peer's announced addresses, by name.
fn address(announced: &str, name: &str) -> Result<SocketAddr, String> {
    announced
        .split_whitespace()
        .find_map(|w| w.strip_prefix(name).and_then(|a| a.strip_prefix('=')))
        .ok_or_else(|| format!("the peer announced no {name} address ({announced:?})"))?
        .parse()
        .map_err(|e| format!("the peer's {name} address: {e}"))
}

/// Every rank contributes `Ok(text)` or its error; all get every rank's.
/// An error anywhere is everyone's error (so both sides skip together).
fn gather(ep: &Endpoint, mine: Result<String, String>) -> Result<Vec<String>, String> {
    let blob = match &mine {
        Ok(text) => format!("ok {text}"),
        Err(e) => format!("err rank {}: {e}", ep.rank()),
    };
    let all = ep.allgather_bytes(blob.as_bytes()).map_err(|e| format!("exchange through the endpoint: {e}"))?;
    let all: Vec<String> = all.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect();
    if let Some(err) = all.iter().find_map(|t| t.strip_prefix("err ")) {
        return Err(err.to_string());
    }
    Ok(all.iter().map(|t| t.strip_prefix("ok ").unwrap_or(t).trim().to_string()).collect())
}

fn tune(s: &TcpStream) -> Result<(), String> {
    s.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
    s.set_nonblocking(true).map_err(|e| format!("nonblocking TCP: {e}"))
}

/// Rank 0 connects `n` times to rank 1's listener, which accepts them in
/// that order: the first carries 0 → 1, the second (bibw) 1 → 0.
fn connect(rank: u32, side: &Side, peer: &str, n: usize) -> Result<Vec<TcpStream>, String> {
    let mut streams = Vec::new();
    if n == 0 {
        return Ok(streams);
    }
    if rank == 0 {
        let to = address(peer, "tcp")?;
        for _ in 0..n {
            let s = TcpStream::connect_timeout(&to, ACCEPT_WITHIN).map_err(|e| format!("connecting to {to}: {e}"))?;
            tune(&s)?;
            streams.push(s);
        }
    } else if let Some(listener) = &side.listener {
        listener.set_nonblocking(true).map_err(|e| format!("nonblocking listener: {e}"))?;
        let deadline = Instant::now() + ACCEPT_WITHIN;
        while streams.len() < n {
            match listener.accept() {
                Ok((s, _)) => {
                    tune(&s)?;
                    streams.push(s);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => return Err(format!("accepting rank 0's connection: {e}")),
            }
        }
    }
    Ok(streams)
}

/// What one side measured.
enum Outcome {
    /// Rank 0's half round trips or send times (µs).
    Samples(Vec<f64>),
    /// A receiver: bytes, datagrams, first-to-last arrival (s), and the
    /// bytes that arrived after the first receive call (the rate's
    /// numerator: the first call's bytes came before the clock started).
    Received(usize, usize, f64, usize),
    /// A TCP side: seconds from the start until its part was done.
    Seconds(f64),
    /// Nothing to report (the echo side of a ping-pong, a pure sender).
    Nothing,
}

impl Outcome {
    fn encode(&self) -> String {
        match self {
            Outcome::Received(b, d, s, timed) => format!("received {b} {d} {s} {timed}"),
            Outcome::Seconds(s) => format!("seconds {s}"),
            Outcome::Samples(_) | Outcome::Nothing => "nothing".into(),
        }
    }

    fn decode(text: &str) -> Outcome {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["received", b, d, s, timed] => Outcome::Received(
                b.parse().unwrap_or(0),
                d.parse().unwrap_or(0),
                s.parse().unwrap_or(0.0),
                timed.parse().unwrap_or(0),
            ),
            ["seconds", s] => Outcome::Seconds(s.parse().unwrap_or(0.0)),
            _ => Outcome::Nothing,
        }
    }
}

/// Sends `data` to `dst` as datagrams of `datagram` bytes: one `sendto`
/// each, or (`gso`) batches of up to [`GSO_BATCH`] through `send_batch`.
fn send_message(sock: &mut UdpTransport, data: &[u8], dst: SocketAddr, datagram: usize, gso: bool) {
    if !gso || data.len() <= datagram {
        send_all_udp_in(sock, data, dst, datagram);
        return;
    }
    let pieces: Vec<(SocketAddr, &[u8])> = data.chunks(datagram).map(|c| (dst, c)).collect();
    send_pieces(sock, &pieces);
}

/// `send_batch` until every piece is out, yielding while the socket is full.
fn send_pieces(sock: &mut UdpTransport, pieces: &[(SocketAddr, &[u8])]) {
    let mut at = 0;
    while at < pieces.len() {
        let end = (at + GSO_BATCH).min(pieces.len());
        match sock.send_batch(&pieces[at..end]) {
            Ok(n) if n > 0 => at += n,
            Ok(_) => std::thread::yield_now(),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::thread::yield_now()
            }
            Err(e) => panic!("udp_gso: sending {} datagrams: {e}", end - at),
        }
    }
}

/// Receives with `recv_batch` until `size` bytes (at least one datagram)
/// arrived; `false` if none came for [`LOST_AFTER`].
fn recv_all_batch(sock: &mut UdpTransport, batch: &mut mw_transport::udp::RecvBatch, size: usize) -> bool {
    let (mut got, mut datagrams) = (0, 0);
    let mut idle = Instant::now();
    while got < size || datagrams == 0 {
        match sock.recv_batch(batch) {
            Ok(n) if n > 0 => {
                got += batch.iter().map(|(_, d)| d.len()).sum::<usize>();
                datagrams += n;
                idle = Instant::now();
            }
            _ if idle.elapsed() > LOST_AFTER => return false,
            _ => std::thread::yield_now(),
        }
    }
    true
}

/// A blast receiver on `rx` for `expect` bytes, with `recv_batch` (GRO)
/// for `udp_gso`.
fn absorb(rx: &mut UdpTransport, expect: usize, gso: bool) -> Outcome {
    if !gso {
        let (b, d, t) = absorb_from(rx, expect, FIRST_WAIT);
        // One datagram per call: all but the first arrived on the clock.
        let timed = if d > 1 { b - b / d } else { 0 };
        return Outcome::Received(b, d, t.as_secs_f64(), timed);
    }
    let mut batch = rx.new_recv_batch();
    let mut first_bytes = 0usize;
    let (mut got, mut datagrams) = (0usize, 0usize);
    let mut first = None;
    let mut last = Instant::now();
    let mut idle_since = Instant::now();
    let quiet = Duration::from_millis(300);
    while got < expect && idle_since.elapsed() < if first.is_some() { quiet } else { FIRST_WAIT } {
        match rx.recv_batch(&mut batch) {
            Ok(n) if n > 0 => {
                let bytes = batch.iter().map(|(_, d)| d.len()).sum::<usize>();
                if first.is_none() {
                    first = Some(Instant::now());
                    first_bytes = bytes;
                }
                last = Instant::now();
                idle_since = last;
                got += bytes;
                datagrams += n;
            }
            _ => std::thread::yield_now(),
        }
    }
    Outcome::Received(got, datagrams, first.map_or(0.0, |f| (last - f).as_secs_f64()), got - first_bytes)
}

/// `count` datagrams of `datagram` bytes to `dst`, one by one or in GSO batches.
fn blast(tx: &mut UdpTransport, dst: SocketAddr, datagram: usize, count: usize, gso: bool) {
    let payload = vec![1u8; datagram];
    if !gso {
        for _ in 0..count {
            send_udp(tx, &payload, dst);
        }
        return;
    }
    let batch: Vec<(SocketAddr, &[u8])> = (0..GSO_BATCH).map(|_| (dst, &payload[..])).collect();
    let mut left = count;
    while left > 0 {
        let n = left.min(GSO_BATCH);
        send_pieces(tx, &batch[..n]);
        left -= n;
    }
}

/// Measures point `p` between ranks 0 and 1 of the job (every rank calls
/// it; ranks above 1 only take part in the exchanges). Rank 0 returns the
/// row, the others nothing.
pub fn measure(ep: &Endpoint, net: &NetPath, p: &Point) -> Result<Vec<Row>, String> {
    let rank = ep.rank();
    let datagram = net.datagram;
    let active = rank < 2;
    let side = if active { Side::bind(p, rank, net.ips[rank as usize], datagram).map(Some) } else { Ok(None) };
    let announced =
        gather(ep, side.as_ref().map(|s| s.as_ref().map_or(String::new(), Side::addresses)).map_err(Clone::clone))?;
    let side = side.expect("bind errors were shared in the exchange");
    let peer = announced.get(1 - rank.min(1) as usize).cloned().unwrap_or_default();
    let tcp = needs(p, rank).2;
    let streams = match &side {
        Some(s) => connect(rank, s, &peer, tcp),
        None => Ok(Vec::new()),
    };
    // Everyone connected (or the error everyone skips on): start together.
    gather(ep, streams.as_ref().map(|_| String::new()).map_err(Clone::clone))?;
    let streams = streams.expect("connect errors were shared in the exchange");
    let outcome = match side {
        Some(side) => run_side(p, rank, side, &peer, streams, datagram),
        None => Ok(Outcome::Nothing),
    };
    // Always exchanged, also after a failure, so neither side waits alone.
    let results = gather(ep, outcome.as_ref().map(Outcome::encode).map_err(Clone::clone));
    let outcome = outcome?;
    let results = results?;
    if rank != 0 {
        return Ok(Vec::new());
    }
    let theirs = Outcome::decode(results.get(1).map_or("", String::as_str));
    Ok(vec![row(p, net, datagram, outcome, theirs)?])
}

/// The row of `p` from rank 0's and rank 1's outcomes.
fn row(p: &Point, net: &NetPath, datagram: usize, mine: Outcome, theirs: Outcome) -> Result<Row, String> {
    let (size, n) = (p.size, p.count);
    let mut row = match (p.op, p.bench, mine, theirs) {
        (_, "pingpong" | "overhead", Outcome::Samples(s), _) => Row::latency(p.bench, p.op, "udp", size, s),
        ("tcp_raw", "rate", Outcome::Seconds(s), _) => Row::rate("tcp_raw", "udp", size, n, s),
        ("tcp_raw", _, Outcome::Seconds(a), theirs) => {
            let b = if let Outcome::Seconds(b) = theirs { b } else { 0.0 };
            let directions = if p.bench == "bibw" { 2 } else { 1 };
            Row::throughput(p.bench, "tcp_raw", "udp", size, n, (directions * n * size) as f64, a.max(b))
        }
        (op, bench, mine, theirs) => {
            let received: Vec<(usize, usize, f64, usize)> = [mine, theirs]
                .into_iter()
                .filter_map(|o| if let Outcome::Received(b, d, s, t) = o { Some((b, d, s, t)) } else { None })
                .collect();
            if received.is_empty() {
                return Err(format!("{op} {bench}: no receiver reported"));
            }
            if received.iter().any(|r| r.2 <= 0.0 || r.3 == 0) {
                return Err(format!(
                    "{op} {bench} of {size} B: a receiver got the blast in one call (or nothing), too short to \
                     time; raise --iters"
                ));
            }
            let bytes: usize = received.iter().map(|r| r.0).sum();
            let timed: usize = received.iter().map(|r| r.3).sum();
            let got: usize = received.iter().map(|r| r.1).sum();
            let seconds = received.iter().map(|r| r.2).fold(0.0, f64::max);
            let chunk = size.clamp(1, datagram);
            let sent_datagrams = (n * size).div_ceil(chunk).max(1);
            let mut row = if bench == "rate" {
                let mut r = Row::rate(op, "udp", size, timed / chunk, seconds);
                r.extra.insert("sent".into(), serde_json::json!(sent_datagrams));
                r.extra.insert("received".into(), serde_json::json!(got));
                r
            } else {
                Row::throughput(bench, op, "udp", size, n, timed as f64, seconds)
            };
            let sent = (received.len() * sent_datagrams * chunk) as f64;
            row.extra.insert("received_pct".into(), serde_json::json!((1000.0 * bytes as f64 / sent).round() / 10.0));
            row
        }
    };
    row.path = Some(net.name().into());
    if p.op == "tcp_raw" {
        row.via = Some("tcp".into());
    } else {
        row.datagram = Some(datagram);
    }
    Ok(row)
}

/// One side's part of point `p`.
fn run_side(
    p: &Point,
    rank: u32,
    mut side: Side,
    peer: &str,
    mut streams: Vec<TcpStream>,
    datagram: usize,
) -> Result<Outcome, String> {
    let (size, n) = (p.size, p.count);
    let gso = p.op == "udp_gso";
    let both = p.bench == "bibw";
    if p.op == "tcp_raw" {
        return Ok(tcp_side(p.bench, rank, &mut streams, size, n));
    }
    match p.bench {
        "pingpong" => {
            let dst = address(peer, "tx")?;
            let sock = side.tx.as_mut().expect("ping-pong socket");
            udp_pingpong_side(sock, rank, dst, size, n, datagram, gso)
        }
        "overhead" if rank == 0 => {
            let dst = address(peer, "rx")?;
            Ok(overhead_side(side.tx.as_mut().expect("sending socket"), dst, size, n, datagram))
        }
        "overhead" => {
            let total = n + warmup(n);
            Ok(absorb(side.rx.as_mut().expect("receiving socket"), total * size.max(1), false))
        }
        _ => {
            let chunk = size.clamp(1, datagram);
            let count = (n * size).div_ceil(chunk).max(1);
            let sender = match side.tx.take() {
                Some(mut tx) if both || rank == 0 => {
                    let dst = address(peer, "rx")?;
                    Some(std::thread::spawn(move || blast(&mut tx, dst, chunk, count, gso)))
                }
                _ => None,
            };
            let outcome = match side.rx.as_mut() {
                Some(rx) => absorb(rx, count * chunk, gso),
                None => Outcome::Nothing,
            };
            if let Some(s) = sender {
                s.join().map_err(|_| "the sending thread panicked".to_string())?;
            }
            Ok(outcome)
        }
    }
}

/// A ping-pong side: rank 0 times `n` round trips after a warm-up, rank 1
/// echoes; a lost datagram ends both (raw UDP has no retransmission).
fn udp_pingpong_side(
    sock: &mut UdpTransport,
    rank: u32,
    dst: SocketAddr,
    size: usize,
    n: usize,
    datagram: usize,
    gso: bool,
) -> Result<Outcome, String> {
    let total = n + warmup(n);
    let data = vec![7u8; size];
    let mut buf = vec![0u8; 65_536];
    let mut batch = sock.new_recv_batch();
    let mut receive = |sock: &mut UdpTransport| {
        if gso {
            recv_all_batch(sock, &mut batch, size)
        } else {
            recv_all_udp(sock, &mut buf, size)
        }
    };
    if rank != 0 {
        for _ in 0..total {
            if !receive(sock) {
                break;
            }
            send_message(sock, &data, dst, datagram, gso);
        }
        return Ok(Outcome::Nothing);
    }
    let mut samples = Vec::with_capacity(n);
    for i in 0..total {
        let t0 = Instant::now();
        send_message(sock, &data, dst, datagram, gso);
        if !receive(sock) {
            // Let the echo side notice the silence and leave first.
            std::thread::sleep(LOST_AFTER);
            return Err(format!(
                "{} ping-pong of {size} B between ranks lost a datagram (raw UDP has no retransmission)",
                if gso { "udp_gso" } else { "udp_raw" }
            ));
        }
        if i >= total - n {
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
    }
    Ok(Outcome::Samples(samples))
}

/// Rank 0's send times of `n` messages (after a warm-up) while rank 1 drains.
fn overhead_side(tx: &mut UdpTransport, dst: SocketAddr, size: usize, n: usize, datagram: usize) -> Outcome {
    let payload = vec![2u8; size];
    let total = n + warmup(n);
    let mut samples = Vec::with_capacity(n);
    for i in 0..total {
        let t0 = Instant::now();
        send_all_udp_in(tx, &payload, dst, datagram);
        let us = t0.elapsed().as_secs_f64() * 1e6;
        if i >= total - n {
            samples.push(us);
        }
        if i % 64 == 63 {
            std::thread::yield_now();
        }
    }
    Outcome::Samples(samples)
}

/// A TCP side: ping-pong (rank 0 times), or streams: rank 0 → 1 on the
/// first connection and, for bibw, 1 → 0 on the second at the same time.
fn tcp_side(bench: &str, rank: u32, streams: &mut [TcpStream], size: usize, n: usize) -> Outcome {
    if bench == "pingpong" {
        let s = &mut streams[0];
        let total = n + warmup(n);
        let mut buf = vec![0u8; size];
        if rank != 0 {
            for _ in 0..total {
                read_polling(s, &mut buf);
                write_polling(s, &buf);
            }
            return Outcome::Nothing;
        }
        let payload = vec![7u8; size];
        let mut samples = Vec::with_capacity(n);
        for i in 0..total {
            let t0 = Instant::now();
            write_polling(s, &payload);
            read_polling(s, &mut buf);
            if i >= total - n {
                samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
            }
        }
        return Outcome::Samples(samples);
    }
    let t0 = Instant::now();
    let (first, rest) = streams.split_first_mut().expect("a connection");
    match rest.first_mut() {
        // bibw: send on the connection of my direction, receive on the other.
        Some(second) => {
            let (send_on, recv_on) = if rank == 0 { (first, second) } else { (second, first) };
            let mut send_on = send_on.try_clone().expect("clone TCP stream");
            let sender = std::thread::spawn(move || tcp_send_stream(&mut send_on, size, n));
            tcp_recv_stream(recv_on, size, n);
            sender.join().expect("tcp_raw sending thread");
        }
        None if rank == 0 => tcp_send_stream(first, size, n),
        None => tcp_recv_stream(first, size, n),
    }
    Outcome::Seconds(t0.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_travel_as_text() {
        let back = Outcome::decode(&Outcome::Received(1000, 3, 0.5, 900).encode());
        assert!(matches!(back, Outcome::Received(1000, 3, s, 900) if s == 0.5));
        assert!(matches!(Outcome::decode(&Outcome::Seconds(2.0).encode()), Outcome::Seconds(s) if s == 2.0));
        assert!(matches!(Outcome::decode("nothing"), Outcome::Nothing));
        assert!(matches!(Outcome::decode("garbage 1"), Outcome::Nothing));
    }

    #[test]
    fn announced_addresses_are_found_by_name() {
        let text = "tx=10.77.0.2:4000 rx=10.77.0.2:4001";
        assert_eq!(address(text, "rx").unwrap(), "10.77.0.2:4001".parse().unwrap());
        assert!(address(text, "tcp").unwrap_err().contains("no tcp"));
    }

    #[test]
    fn each_side_binds_what_its_part_needs() {
        let p = |bench: &'static str, op: &'static str| Point {
            bench,
            op,
            transport: "udp",
            size: 8,
            count: 1,
            ranks: 2,
            variant: None,
            loss: None,
            window: 1,
        };
        assert_eq!(needs(&p("pingpong", "udp_raw"), 1), (true, false, 0));
        assert_eq!(needs(&p("bandwidth", "udp_gso"), 0), (true, false, 0));
        assert_eq!(needs(&p("bandwidth", "udp_gso"), 1), (false, true, 0));
        assert_eq!(needs(&p("bibw", "udp_raw"), 1), (true, true, 0));
        assert_eq!(needs(&p("bibw", "tcp_raw"), 0), (false, false, 2));
        assert_eq!(needs(&p("rate", "tcp_raw"), 1), (false, false, 1));
    }
}
