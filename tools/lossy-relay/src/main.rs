//! `mw-lossy-relay`: a user-space lossy network between the hosts of the
//! netns test cluster (`scripts/netns-cluster relay start`), for what
//! nftables cannot do and the netem qdisc (missing on these kernels) would:
//! reordering, duplication, delay, jitter and corruption, plus loss.
//!
//! How it sits on the path: the cluster's hosts are network namespaces whose
//! veth links meet on a bridge. The relay opens a packet socket on the root
//! end of every host's link, so it sees each frame a host sends. While it
//! runs, an nftables rule (bridge family) stops the bridge from forwarding
//! UDP between hosts itself; the relay decides each datagram's fate and
//! writes it out of the destination host's link. Addresses, ports and MACs
//! are untouched, so neither memwire nor the launcher notices the relay.
//! UDP GSO super-frames are split into their datagrams first; every
//! datagram leaves with freshly computed IPv4 and UDP checksums — also a
//! corrupted one, as a router that rewrites packets would send it, so that
//! corruption reaches memwire and only its MAC can catch it.
//!
//! Owns: the event loop and the schedule of pending datagrams. Must not
//! install or remove firewall rules (the script does).

mod faults;
mod frame;
mod sys;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;

use faults::{Counters, Decider, Faults};
use frame::{Offload, VNET_HDR_LEN};
use sys::LinkSocket;

/// Relay UDP between hosts of the netns test cluster, with faults.
///
/// Each --link names a host's link (the root-namespace end of its veth) and
/// the host's address; a UDP datagram arriving on one link for another
/// link's address is relayed to it. Percentages may be fractional. On
/// SIGTERM or SIGINT the relay prints its counters and exits 0.
#[derive(Debug, Parser)]
#[command(name = "mw-lossy-relay", version)]
struct Cli {
    /// `IFNAME=IPV4`: a host's link and the host's address (repeat per host).
    #[arg(long = "link", value_name = "IFNAME=IPV4", required = true, value_parser = parse_link)]
    links: Vec<(String, Ipv4Addr)>,
    /// Percent of datagrams dropped.
    #[arg(long, default_value_t = 0.0, value_parser = parse_percent)]
    drop: f64,
    /// Percent of datagrams sent twice.
    #[arg(long, default_value_t = 0.0, value_parser = parse_percent)]
    dup: f64,
    /// Percent of datagrams held back by --reorder-hold-us, so later ones overtake them.
    #[arg(long, default_value_t = 0.0, value_parser = parse_percent)]
    reorder: f64,
    /// Percent of datagrams with one payload bit flipped (checksums then recomputed).
    #[arg(long, default_value_t = 0.0, value_parser = parse_percent)]
    corrupt: f64,
    /// Delay added to every datagram, microseconds.
    #[arg(long, default_value_t = 0)]
    delay_us: u64,
    /// Uniform random extra delay per datagram, 0..=this, microseconds.
    #[arg(long, default_value_t = 0)]
    jitter_us: u64,
    /// How long a reordered datagram is held, microseconds.
    #[arg(long, default_value_t = 1000)]
    reorder_hold_us: u64,
    /// Seed of the fault decisions (default: from the clock; printed at start).
    #[arg(long)]
    seed: Option<u64>,
}

fn parse_link(text: &str) -> Result<(String, Ipv4Addr), String> {
    let (name, addr) = text.split_once('=').ok_or_else(|| format!("{text:?}: expected IFNAME=IPV4"))?;
    if name.is_empty() || name.len() > 15 {
        return Err(format!("{text:?}: interface names have 1 to 15 characters"));
    }
    let addr = addr.parse().map_err(|e| format!("{text:?}: {e}"))?;
    Ok((name.to_owned(), addr))
}

fn parse_percent(text: &str) -> Result<f64, String> {
    let value: f64 = text.parse().map_err(|e| format!("{text:?}: {e}"))?;
    if !(0.0..=100.0).contains(&value) {
        return Err(format!("{text:?}: a percentage must be within 0..=100"));
    }
    Ok(value / 100.0)
}

/// A datagram waiting for its time: (when, arrival order) orders the heap;
/// the frame carries its vnet-header headroom, ready to send.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    due: Instant,
    order: u64,
    link: usize,
    frame: Vec<u8>,
}

/// Largest frame read: a UDP GSO super-frame is at most 64 KiB of IP.
const RECV_BUF: usize = VNET_HDR_LEN + frame::ETH_LEN + 65_536 + 64;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mw-lossy-relay: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> std::io::Result<()> {
    let sockets: Vec<LinkSocket> = cli
        .links
        .iter()
        .map(|(name, _)| LinkSocket::open(name).map_err(|e| std::io::Error::new(e.kind(), format!("link {name}: {e}"))))
        .collect::<Result<_, _>>()?;
    sys::catch_stop_signals()?;
    let seed = cli.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let faults = Faults {
        drop: cli.drop,
        dup: cli.dup,
        reorder: cli.reorder,
        corrupt: cli.corrupt,
        delay: Duration::from_micros(cli.delay_us),
        jitter: Duration::from_micros(cli.jitter_us),
        reorder_hold: Duration::from_micros(cli.reorder_hold_us),
    };
    let mut decider = Decider::new(faults.clone(), seed);
    let mut counters = Counters::default();
    println!("mw-lossy-relay: ready, {} links, seed {seed}, {faults:?}", sockets.len());
    let _ = std::io::stdout().flush();

    let mut heap: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let mut buf = vec![0u8; RECV_BUF];
    let mut ready = Vec::with_capacity(sockets.len());
    let mut order = 0u64;
    while !sys::stop_requested() {
        let now = Instant::now();
        while heap.peek().is_some_and(|p| p.0.due <= now) {
            let Reverse(p) = heap.pop().expect("peeked");
            match sockets[p.link].send(&p.frame) {
                Ok(()) => counters.sent += 1,
                Err(_) => counters.send_errors += 1,
            }
        }
        let timeout = heap.peek().map(|p| p.0.due.saturating_duration_since(Instant::now()));
        sys::wait_readable(&sockets, timeout, &mut ready)?;
        for (from, socket) in sockets.iter().enumerate() {
            if !ready[from] {
                continue;
            }
            while let Some(len) = socket.recv(&mut buf)? {
                let arrived = Instant::now();
                let Some(datagrams) = relayable(cli, from, &buf[..len.min(buf.len())], len, &mut counters) else {
                    counters.ignored += 1;
                    continue;
                };
                let (to, datagrams) = datagrams;
                for mut datagram in datagrams {
                    counters.datagrams += 1;
                    let fate = decider.decide(&mut counters);
                    if fate.dropped {
                        continue;
                    }
                    if let Some(bit) = fate.flip_bit {
                        let frame = &mut datagram[VNET_HDR_LEN..];
                        if let Some((start, plen)) = frame::payload_range(frame).filter(|r| r.1 > 0) {
                            let bit = bit % (plen as u64 * 8);
                            frame[start + (bit / 8) as usize] ^= 1 << (bit % 8);
                            frame::seal(frame);
                        }
                    }
                    if let Some(copy_after) = fate.copy_after {
                        order += 1;
                        let copy = datagram.clone();
                        heap.push(Reverse(Pending { due: arrived + copy_after, order, link: to, frame: copy }));
                    }
                    order += 1;
                    heap.push(Reverse(Pending { due: arrived + fate.after, order, link: to, frame: datagram }));
                }
            }
        }
    }
    // Deliver what is still pending: stopping the relay is not a fault.
    while let Some(Reverse(p)) = heap.pop() {
        match sockets[p.link].send(&p.frame) {
            Ok(()) => counters.sent += 1,
            Err(_) => counters.send_errors += 1,
        }
    }
    println!("mw-lossy-relay: stopped: {}", counters.line());
    Ok(())
}

/// The destination link of a frame read from link `from` (vnet header
/// first; `len` is its full length, possibly more than `data` holds) and
/// the datagrams it stands for, ready to send; `None` if it is not UDP
/// between two hosts of the cluster.
fn relayable(
    cli: &Cli,
    from: usize,
    data: &[u8],
    len: usize,
    counters: &mut Counters,
) -> Option<(usize, Vec<Vec<u8>>)> {
    if len > data.len() || data.len() < VNET_HDR_LEN {
        return None;
    }
    let offload = Offload::from_vnet_hdr(&data[..VNET_HDR_LEN])?;
    let udp = frame::parse_udp(&data[VNET_HDR_LEN..])?;
    if cli.links[from].1 != udp.src {
        return None;
    }
    let to = cli.links.iter().position(|(_, addr)| *addr == udp.dst)?;
    if to == from {
        return None;
    }
    counters.frames += 1;
    if offload.udp_segment.is_some() {
        counters.gso_frames += 1;
    }
    Some((to, frame::split(&udp, offload, VNET_HDR_LEN)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_values_are_checked() {
        assert_eq!(parse_percent("5").unwrap(), 0.05);
        assert_eq!(parse_percent("0.5").unwrap(), 0.005);
        assert!(parse_percent("101").unwrap_err().contains("0..=100"));
        assert!(parse_percent("-1").is_err());
        assert!(parse_percent("x").is_err());
        assert_eq!(parse_link("mwv1=10.77.0.1").unwrap(), ("mwv1".to_owned(), Ipv4Addr::new(10, 77, 0, 1)));
        assert!(parse_link("mwv1").unwrap_err().contains("IFNAME=IPV4"));
        assert!(parse_link("a-very-long-interface=10.0.0.1").is_err());
        assert!(parse_link("mwv1=10.77.0").is_err());
        Cli::try_parse_from(["mw-lossy-relay"]).expect_err("--link is required");
        let cli = Cli::try_parse_from(["mw-lossy-relay", "--link", "a=10.0.0.1", "--link", "b=10.0.0.2", "--dup", "5"])
            .expect("valid");
        assert_eq!(cli.links.len(), 2);
        assert_eq!(cli.dup, 0.05);
    }
}
