//! IPv4 multicast on loopback: two receiving sockets on one port (as two
//! ranks of one host) each get every datagram the data-path socket sends to
//! their group, large ones included; a socket does not see groups it did
//! not join, even on the same port; leaving stops delivery.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use mw_transport::{Idle, McastSocket, UdpConfig, UdpTransport, WaitPolicy, Waiter};

const LO: Ipv4Addr = Ipv4Addr::LOCALHOST;

fn port() -> u16 {
    // Above the kernel's ephemeral range, varied by pid so concurrent runs differ.
    61_000 + (std::process::id() % 4000) as u16
}

fn recv(sock: &mut McastSocket, within: Duration) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 65_536];
    let mut waiter = Waiter::new(WaitPolicy::block_at_once());
    let deadline = Instant::now() + within;
    loop {
        if let Some((len, _)) = sock.recv_one(&mut buf).unwrap() {
            return Some(buf[..len].to_vec());
        }
        if waiter.idle(&[sock.as_raw_fd()], Some(deadline)).unwrap() == Idle::TimedOut {
            return None;
        }
    }
}

#[test]
fn two_members_on_one_port_each_get_every_datagram() {
    let (group, other) = (Ipv4Addr::new(239, 193, 7, 1), Ipv4Addr::new(239, 193, 7, 2));
    let mut a = McastSocket::bind(port(), LO, 1 << 20).unwrap();
    let mut b = McastSocket::bind(port(), LO, 1 << 20).unwrap();
    let mut c = McastSocket::bind(port(), LO, 1 << 20).unwrap();
    a.join(group).unwrap();
    b.join(group).unwrap();
    c.join(other).unwrap();
    assert!(a.join(Ipv4Addr::new(10, 0, 0, 1)).is_err(), "not a multicast address");
    let mut tx = UdpTransport::bind(SocketAddr::new(LO.into(), 0), &UdpConfig::default()).unwrap();
    tx.enable_multicast_send(LO).unwrap();
    let to = SocketAddr::V4(SocketAddrV4::new(group, port()));
    for len in [0usize, 1, 1472, 60_000] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        tx.send_to(&data, to).unwrap();
        assert_eq!(recv(&mut a, Duration::from_secs(5)).as_deref(), Some(&data[..]), "a, {len} bytes");
        assert_eq!(recv(&mut b, Duration::from_secs(5)).as_deref(), Some(&data[..]), "b, {len} bytes");
    }
    assert_eq!(recv(&mut c, Duration::from_millis(50)), None, "c joined another group on the same port");
    b.leave(group).unwrap();
    tx.send_to(b"after", to).unwrap();
    assert_eq!(recv(&mut a, Duration::from_secs(5)).as_deref(), Some(&b"after"[..]));
    assert_eq!(recv(&mut b, Duration::from_millis(50)), None, "b left");
    assert_eq!((a.port(), a.interface()), (port(), LO));
}
