//! Which local IP address the other ranks can reach this one at, so the
//! data path binds its socket there ([`Bootstrap::reachable_ip`]).
//!
//! Owns: the choice only (by resolving names and asking the kernel's routing
//! table through unconnected-then-connected UDP sockets, which sends
//! nothing). Must not: bind the data-path socket or send any packet.
//!
//! [`Bootstrap::reachable_ip`]: crate::Bootstrap::reachable_ip

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};

/// The local address the kernel would send from toward `target`.
pub(crate) fn source_toward(target: SocketAddr) -> io::Result<IpAddr> {
    if target.ip().is_loopback() {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let unspecified: IpAddr =
        if target.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { std::net::Ipv6Addr::UNSPECIFIED.into() };
    let probe = UdpSocket::bind(SocketAddr::new(unspecified, 0))?;
    probe.connect(target)?;
    Ok(probe.local_addr()?.ip())
}

/// The address toward the rendezvous server at `addr` (`host:port`).
pub(crate) fn toward_server(addr: &str) -> io::Result<IpAddr> {
    let target = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{addr} resolves to nothing")))?;
    source_toward(target)
}

/// The address for rank `rank` of a job whose ranks run on `hosts` (the
/// launcher's names for them, in rank order):
///
/// 1. every rank on this host: loopback;
/// 2. this host's own name resolves to an address of this machine (the
///    usual case on a cluster, and the only one when the launcher names
///    hosts by IP): that address;
/// 3. otherwise the address the kernel routes from toward another host;
/// 4. otherwise the source of the default route.
pub(crate) fn among_hosts(hosts: &[String], rank: usize) -> io::Result<IpAddr> {
    let mine = &hosts[rank];
    if hosts.iter().all(|h| h == mine) {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    for ip in resolve(mine) {
        if !ip.is_loopback() && !ip.is_unspecified() && UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok() {
            return Ok(ip);
        }
    }
    for other in hosts.iter().filter(|h| *h != mine) {
        for ip in resolve(other) {
            if let Ok(local) = source_toward(SocketAddr::new(ip, 9)) {
                if !local.is_loopback() && !local.is_unspecified() {
                    return Ok(local);
                }
            }
        }
    }
    // TEST-NET-1 is never a real peer; connecting a UDP socket sends nothing
    // and only asks the routing table, which answers with the default route.
    if let Ok(local) = source_toward(SocketAddr::from(([192, 0, 2, 1], 9))) {
        if !local.is_loopback() && !local.is_unspecified() {
            return Ok(local);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "neither this host's name {mine:?} nor the other hosts' names resolve to a usable address, and there \
             is no default route; set MW_BIND to this host's address on the cluster network"
        ),
    ))
}

fn resolve(host: &str) -> Vec<IpAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return vec![ip];
    }
    (host, 0).to_socket_addrs().map(|addrs| addrs.map(|a| a.ip()).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn one_host_means_loopback() {
        assert_eq!(among_hosts(&hosts(&["a", "a"]), 1).unwrap(), IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(toward_server("127.0.0.1:9").unwrap(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    }

    #[test]
    fn without_a_usable_name_the_default_route_or_an_error_naming_mw_bind() {
        // 127.0.0.2 is local but loopback, so it is skipped; the other host
        // is 127.0.0.1, which routes from loopback; what is left is the
        // default route, or, where there is none, an error naming the fix.
        match among_hosts(&hosts(&["127.0.0.2", "127.0.0.1"]), 0) {
            Ok(ip) => assert!(!ip.is_loopback() && Some(ip) == source_toward("192.0.2.1:9".parse().unwrap()).ok()),
            Err(e) => assert!(e.to_string().contains("MW_BIND"), "{e}"),
        }
    }
}
