//! `SocketAddr` ⇄ `sockaddr_storage`, without allocation.
//!
//! Owns: the byte layout of IPv4/IPv6 socket addresses as the kernel wants
//! them. Must not: make system calls or allocate; an address family other than
//! IPv4/IPv6 decodes to `None`, never a panic.

use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// An all-zero `sockaddr_storage`, the starting state of every address slot.
pub(crate) fn zeroed_storage() -> libc::sockaddr_storage {
    // SAFETY: `sockaddr_storage` is a plain C struct of integers and byte
    // arrays; the all-zero bit pattern is a valid value (family AF_UNSPEC).
    unsafe { std::mem::zeroed() }
}

/// Writes `addr` into `out` in the kernel's layout and returns the length the
/// kernel must be told.
pub(crate) fn encode_addr(addr: &SocketAddr, out: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    // The octets are already in network order; keep the bytes as they are.
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `sockaddr_storage` is specified to be large enough and
            // suitably aligned for every socket address type, including
            // `sockaddr_in`; `out` is a valid exclusive reference, and
            // `write` does not read or drop the previous contents.
            unsafe { std::ptr::write((out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>(), sin) };
            size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: as above, `sockaddr_storage` can hold and is aligned for
            // `sockaddr_in6`; `out` is valid and exclusively borrowed.
            unsafe { std::ptr::write((out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>(), sin6) };
            size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// Reads the address the kernel wrote into `storage` (`len` bytes of it).
/// Returns `None` for families other than IPv4/IPv6 or a short length, which
/// a UDP socket never produces but which must not be trusted blindly.
pub(crate) fn decode_addr(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family tag says the kernel stored a `sockaddr_in`,
            // `len` confirms it wrote that many bytes, and `sockaddr_storage`
            // is aligned for every socket address type.
            let sin = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family tag and length say a full `sockaddr_in6` is
            // present, and the storage is aligned for it.
            let sin6 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_through_storage() {
        let addrs: [SocketAddr; 3] =
            ["127.0.0.1:4242".parse().unwrap(), "10.1.2.3:1".parse().unwrap(), "[fe80::1%3]:65535".parse().unwrap()];
        for addr in addrs {
            let mut storage = zeroed_storage();
            let len = encode_addr(&addr, &mut storage);
            assert_eq!(decode_addr(&storage, len), Some(addr));
        }
    }

    #[test]
    fn short_or_unknown_addresses_are_rejected() {
        let mut storage = zeroed_storage();
        assert_eq!(decode_addr(&storage, 128), None, "AF_UNSPEC");
        let len = encode_addr(&"127.0.0.1:1".parse().unwrap(), &mut storage);
        assert_eq!(decode_addr(&storage, len - 1), None);
    }
}
