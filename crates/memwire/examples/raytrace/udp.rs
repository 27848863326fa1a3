//! The comparison path: the same pixels over plain UDP sockets, made
//! reliable by a small go-back-N protocol of the program's own (cumulative
//! acks, a window of 64 datagrams, resend everything unacknowledged after
//! 2 ms of silence), as the MBCF paper had to do on SunOS. memwire is used
//! here only to exchange socket addresses and for the barriers.

use std::collections::{HashMap, VecDeque};
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use memwire::{Access, Endpoint, Region};

use crate::{my_groups, scene, Args};

const WINDOW: usize = 64;
const RESEND_AFTER: Duration = Duration::from_millis(2);
/// seq (u32) + first pixel (u64).
const HEADER: usize = 12;

pub struct Link<'a> {
    sock: UdpSocket,
    peers: Vec<SocketAddr>,
    /// Word 0 on rank 0 counts workers that are done (their acks all came).
    control: Region<'a>,
}

/// The address peers can reach us at: loopback for a one-host job, else the
/// one the kernel routes toward the bootstrap host (like memwire's own).
fn reachable_ip() -> IpAddr {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let Ok(boot) = std::env::var("MW_BOOTSTRAP") else {
        return loopback;
    };
    use std::net::ToSocketAddrs;
    let Some(target) = boot.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        return loopback;
    };
    if target.ip().is_loopback() {
        return loopback;
    }
    UdpSocket::bind("0.0.0.0:0")
        .and_then(|probe| {
            probe.connect(target)?;
            probe.local_addr()
        })
        .map(|a| a.ip())
        .unwrap_or(loopback)
}

impl<'a> Link<'a> {
    /// Collective: every rank binds a socket and learns everyone's address.
    pub fn setup(ep: &'a Endpoint) -> Result<Link<'a>, Box<dyn std::error::Error>> {
        let sock = UdpSocket::bind(SocketAddr::new(reachable_ip(), 0))?;
        sock.set_nonblocking(true)?;
        let me = sock.local_addr()?.to_string();
        let peers = ep
            .allgather_bytes(me.as_bytes())?
            .iter()
            .map(|b| std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()).ok_or("bad peer address"))
            .collect::<Result<Vec<SocketAddr>, _>>()?;
        let control = ep.alloc_symmetric(8, Access::ALL)?;
        Ok(Link { sock, peers, control })
    }

    /// A worker's side: computes its groups as the window allows, sends each
    /// as one datagram, resends on silence, then tells rank 0 it is done.
    pub fn send_pixels(
        &mut self,
        ep: &Endpoint,
        args: &Args,
        granularity: u32,
        me: u32,
        count: u32,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let pixels = u64::from(args.width) * u64::from(args.height);
        let to = self.peers[0];
        let mut groups = my_groups(pixels, granularity, me, count);
        let mut window: VecDeque<Vec<u8>> = VecDeque::with_capacity(WINDOW);
        let (mut base, mut next) = (0u32, 0u32);
        let mut exhausted = false;
        let mut last_progress = Instant::now();
        let mut ack = [0u8; 4];
        loop {
            while !exhausted && window.len() < WINDOW {
                let Some((first, n)) = groups.next() else {
                    exhausted = true;
                    break;
                };
                let mut datagram = vec![0u8; HEADER + n as usize * 3];
                datagram[..4].copy_from_slice(&next.to_le_bytes());
                datagram[4..12].copy_from_slice(&first.to_le_bytes());
                scene::render_span(first, &mut datagram[HEADER..], args.width, args.height);
                send(&self.sock, &datagram, to)?;
                window.push_back(datagram);
                next += 1;
            }
            while let Ok(len) = self.sock.recv(&mut ack) {
                let upto = if len == 4 { u32::from_le_bytes(ack) } else { continue };
                while base < upto && !window.is_empty() {
                    window.pop_front();
                    base += 1;
                    last_progress = Instant::now();
                }
            }
            if exhausted && window.is_empty() {
                break;
            }
            if last_progress.elapsed() > RESEND_AFTER {
                for datagram in &window {
                    send(&self.sock, datagram, to)?;
                }
                last_progress = Instant::now();
            }
            std::thread::yield_now();
        }
        ep.add_u64(0, self.control.key(), 0, 1)?;
        Ok(())
    }

    /// Rank 0's side: accepts each worker's datagrams in order, writes the
    /// pixels into the frame, acknowledges cumulatively; done when every
    /// worker reported all its datagrams acknowledged.
    pub fn receive_frame(
        &mut self,
        ep: &Endpoint,
        frame: &Region<'_>,
        args: &Args,
        granularity: u32,
        workers: u32,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let pixels = u64::from(args.width) * u64::from(args.height);
        let total = pixels.div_ceil(u64::from(granularity));
        let rank_of: HashMap<SocketAddr, usize> = self.peers.iter().enumerate().map(|(r, a)| (*a, r)).collect();
        let mut expected = vec![0u32; self.peers.len()];
        let mut received = 0u64;
        let mut buf = vec![0u8; 65_536];
        loop {
            match self.sock.recv_from(&mut buf) {
                Ok((len, from)) => {
                    let Some(&rank) = rank_of.get(&from) else { continue };
                    if len < HEADER {
                        continue;
                    }
                    let seq = u32::from_le_bytes(buf[..4].try_into()?);
                    let first = u64::from_le_bytes(buf[4..12].try_into()?);
                    if seq == expected[rank] {
                        frame.write(first * 3, &buf[HEADER..len])?;
                        expected[rank] += 1;
                        received += 1;
                    }
                    send(&self.sock, &expected[rank].to_le_bytes(), from)?;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if received == total && self.control.load_u64(0)? == u64::from(workers) {
                        break;
                    }
                    ep.progress(); // serve the workers' "done" atomics
                    std::thread::yield_now();
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.control.store_u64(0, 0)?;
        Ok(())
    }
}

fn send(sock: &UdpSocket, datagram: &[u8], to: SocketAddr) -> std::io::Result<()> {
    loop {
        match sock.send_to(datagram, to) {
            Ok(_) => return Ok(()),
            // A full socket buffer: the go-back-N resend covers a real loss,
            // but there is no need to cause one.
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => return Err(e),
        }
    }
}
