//! Ethernet/IPv4/UDP frames as the relay sees them: finding the addresses,
//! splitting a UDP GSO super-frame into the datagrams it stands for, and
//! writing correct IPv4 and UDP checksums.
//!
//! Owns: parsing (never panics on any input) and building frames. Must not:
//! decide what happens to a frame (that is `faults.rs`) or touch a socket.

use std::net::Ipv4Addr;

/// Ethernet header length (no VLAN tags on the test cluster's bridge).
pub const ETH_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const IPPROTO_UDP: u8 = 17;
const UDP_LEN: usize = 8;

/// Offload metadata the kernel gives with a received frame (`struct
/// virtio_net_hdr`, enabled by `PACKET_VNET_HDR`), as far as the relay needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offload {
    /// `Some(size)`: the frame is a UDP GSO super-frame whose payload is
    /// cut into datagrams of `size` bytes (the last may be shorter).
    pub udp_segment: Option<u16>,
}

/// Length of `struct virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;

impl Offload {
    /// Decodes a received `virtio_net_hdr` (host byte order, as the kernel
    /// writes it for packet sockets). `None` for a GSO kind other than
    /// UDP (a TCP super-frame: not the relay's business).
    pub fn from_vnet_hdr(hdr: &[u8]) -> Option<Offload> {
        let gso_type = *hdr.get(1)?;
        let gso_size = u16::from_ne_bytes([*hdr.get(4)?, *hdr.get(5)?]);
        match gso_type & 0x7f {
            VIRTIO_NET_HDR_GSO_NONE => Some(Offload { udp_segment: None }),
            VIRTIO_NET_HDR_GSO_UDP_L4 if gso_size > 0 => Some(Offload { udp_segment: Some(gso_size) }),
            _ => None,
        }
    }
}

/// The parts of a UDP-over-IPv4 frame the relay routes and rebuilds by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpFrame<'a> {
    /// Ethernet header, as received (its destination MAC is the receiving host's).
    pub eth: &'a [u8],
    /// IPv4 header including options.
    pub ip: &'a [u8],
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    /// Source and destination ports.
    pub ports: [u8; 4],
    /// UDP payload (the whole GSO payload for a super-frame).
    pub payload: &'a [u8],
}

/// Parses an Ethernet frame carrying one unfragmented UDP datagram over
/// IPv4. `None` for anything else (ARP, TCP, fragments, malformed).
pub fn parse_udp(frame: &[u8]) -> Option<UdpFrame<'_>> {
    let eth = frame.get(..ETH_LEN)?;
    if u16::from_be_bytes([eth[12], eth[13]]) != ETHERTYPE_IPV4 {
        return None;
    }
    let rest = &frame[ETH_LEN..];
    let version_ihl = *rest.first()?;
    let ihl = usize::from(version_ihl & 0x0f) * 4;
    if version_ihl >> 4 != 4 || ihl < 20 {
        return None;
    }
    let ip = rest.get(..ihl)?;
    if ip[9] != IPPROTO_UDP {
        return None;
    }
    // More-fragments flag or a fragment offset: not a whole datagram.
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return None;
    }
    // A GSO super-frame may announce more than 65535 bytes (total length 0);
    // trust the frame then, else the IP length (frames may carry padding).
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let end = if total == 0 { rest.len() } else { total };
    let datagram = rest.get(ihl..end)?;
    let udp = datagram.get(..UDP_LEN)?;
    Some(UdpFrame {
        eth,
        ip,
        src: Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
        dst: Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
        ports: [udp[0], udp[1], udp[2], udp[3]],
        payload: &datagram[UDP_LEN..],
    })
}

/// The datagrams `frame` stands for: one, or one per GSO segment. Each is
/// a complete Ethernet frame, preceded by `headroom` zero bytes (room for
/// the `virtio_net_hdr` the send path needs), with correct IPv4 and UDP
/// checksums.
pub fn split(frame: &UdpFrame<'_>, offload: Offload, headroom: usize) -> Vec<Vec<u8>> {
    let segment = offload.udp_segment.map_or(frame.payload.len(), usize::from).max(1);
    let ip_id = u16::from_be_bytes([frame.ip[4], frame.ip[5]]);
    let mut out = Vec::with_capacity(frame.payload.len() / segment + 1);
    let mut chunks: Vec<&[u8]> = frame.payload.chunks(segment).collect();
    if chunks.is_empty() {
        chunks.push(&[]);
    }
    for (i, chunk) in chunks.into_iter().enumerate() {
        let mut buf = Vec::with_capacity(headroom + ETH_LEN + frame.ip.len() + UDP_LEN + chunk.len());
        buf.resize(headroom, 0);
        buf.extend_from_slice(frame.eth);
        let ip_at = buf.len();
        buf.extend_from_slice(frame.ip);
        buf.extend_from_slice(&frame.ports);
        buf.extend_from_slice(&[0; 4]); // length and checksum, below
        buf.extend_from_slice(chunk);
        let ip_len = frame.ip.len();
        let total = u16::try_from(ip_len + UDP_LEN + chunk.len()).unwrap_or(u16::MAX);
        let ip = &mut buf[ip_at..ip_at + ip_len];
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[4..6].copy_from_slice(&ip_id.wrapping_add(i as u16).to_be_bytes());
        let udp_len = u16::try_from(UDP_LEN + chunk.len()).unwrap_or(u16::MAX);
        buf[ip_at + ip_len + 4..ip_at + ip_len + 6].copy_from_slice(&udp_len.to_be_bytes());
        seal(&mut buf[headroom..]);
        out.push(buf);
    }
    out
}

/// Offset, within a frame built by [`split`] (headroom excluded), of the
/// UDP payload, and its length.
pub fn payload_range(frame: &[u8]) -> Option<(usize, usize)> {
    let ihl = usize::from(frame.get(ETH_LEN)? & 0x0f) * 4;
    let start = ETH_LEN + ihl + UDP_LEN;
    Some((start, frame.len().checked_sub(start)?))
}

/// Rewrites the IPv4 header checksum and the UDP checksum of a frame built
/// by [`split`] (headroom excluded), e.g. after changing payload bytes, as a
/// router that rewrites packets would: the corruption then passes the
/// receiver's UDP check, and only memwire's own MAC can catch it.
pub fn seal(frame: &mut [u8]) {
    let ihl = usize::from(frame[ETH_LEN] & 0x0f) * 4;
    let ip_at = ETH_LEN;
    frame[ip_at + 10..ip_at + 12].copy_from_slice(&[0, 0]);
    let ip_sum = fold(sum_be(&frame[ip_at..ip_at + ihl], 0));
    frame[ip_at + 10..ip_at + 12].copy_from_slice(&(!ip_sum).to_be_bytes());

    let udp_at = ip_at + ihl;
    let udp_len = frame.len() - udp_at;
    frame[udp_at + 6..udp_at + 8].copy_from_slice(&[0, 0]);
    let mut sum = sum_be(&frame[ip_at + 12..ip_at + 20], 0); // source and destination addresses
    sum += u32::from(IPPROTO_UDP) + udp_len as u32;
    sum = sum_be(&frame[udp_at..], sum);
    let mut udp_sum = !fold(sum);
    if udp_sum == 0 {
        udp_sum = 0xffff; // 0 means "no checksum" in IPv4 UDP
    }
    frame[udp_at + 6..udp_at + 8].copy_from_slice(&udp_sum.to_be_bytes());
}

/// One's-complement sum of big-endian 16-bit words (an odd last byte is
/// padded with zero), added to `acc`, not yet folded.
fn sum_be(bytes: &[u8], mut acc: u32) -> u32 {
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
        acc = (acc & 0xffff) + (acc >> 16);
    }
    if let [last] = words.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame from 10.9.0.1:4000 to 10.9.0.2:5000 with `payload`, IP
    /// checksum left 0 and UDP checksum garbage (as offload leaves it).
    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let total = (20 + 8 + payload.len()) as u16;
        f.extend_from_slice(&[0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 9, 0, 1, 10, 9, 0, 2]);
        f[ETH_LEN + 2..ETH_LEN + 4].copy_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&4000u16.to_be_bytes());
        f.extend_from_slice(&5000u16.to_be_bytes());
        f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0xde, 0xad]);
        f.extend_from_slice(payload);
        f
    }

    /// A checksum over a region that includes its own correct checksum
    /// folds to 0xffff.
    fn verifies(frame: &[u8]) -> bool {
        let ihl = usize::from(frame[ETH_LEN] & 0x0f) * 4;
        let ip_ok = fold(sum_be(&frame[ETH_LEN..ETH_LEN + ihl], 0)) == 0xffff;
        let udp_at = ETH_LEN + ihl;
        let mut sum = sum_be(&frame[ETH_LEN + 12..ETH_LEN + 20], 0);
        sum += 17 + (frame.len() - udp_at) as u32;
        let udp_ok = fold(sum_be(&frame[udp_at..], sum)) == 0xffff;
        ip_ok && udp_ok
    }

    #[test]
    fn parses_udp_and_ignores_everything_else() {
        let f = frame(b"hello");
        let udp = parse_udp(&f).expect("a UDP frame");
        assert_eq!((udp.src, udp.dst), ("10.9.0.1".parse().unwrap(), "10.9.0.2".parse().unwrap()));
        assert_eq!(udp.payload, b"hello");
        let mut padded = f.clone();
        padded.extend_from_slice(&[0; 20]); // Ethernet padding is not payload
        assert_eq!(parse_udp(&padded).unwrap().payload, b"hello");
        let mut tcp = f.clone();
        tcp[ETH_LEN + 9] = 6;
        assert!(parse_udp(&tcp).is_none());
        let mut fragment = f.clone();
        fragment[ETH_LEN + 6] = 0x20; // more fragments
        assert!(parse_udp(&fragment).is_none());
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(parse_udp(&arp).is_none());
        for cut in 0..f.len() - 5 {
            assert!(parse_udp(&f[..cut]).is_none(), "a frame cut at {cut} bytes");
        }
    }

    #[test]
    fn a_plain_frame_gets_valid_checksums() {
        let f = frame(b"odd-length payload");
        let out = split(&parse_udp(&f).unwrap(), Offload::default(), 3);
        assert_eq!(out.len(), 1);
        assert_eq!(&out[0][..3], &[0, 0, 0], "headroom");
        assert!(verifies(&out[0][3..]));
        // Headers unchanged but the IP checksum (IP bytes 10-11) and the UDP one.
        assert_eq!(&out[0][3..3 + ETH_LEN + 10], &f[..ETH_LEN + 10]);
        assert_eq!(&out[0][3 + ETH_LEN + 12..3 + ETH_LEN + 26], &f[ETH_LEN + 12..ETH_LEN + 26]);
        assert_eq!(&out[0][3 + ETH_LEN + 28..], b"odd-length payload");
    }

    #[test]
    fn a_gso_super_frame_splits_into_its_datagrams() {
        let payload: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        let f = frame(&payload);
        let out = split(&parse_udp(&f).unwrap(), Offload { udp_segment: Some(1000) }, 0);
        assert_eq!(out.len(), 3);
        let mut joined = Vec::new();
        for (i, seg) in out.iter().enumerate() {
            assert!(verifies(seg), "segment {i}");
            let parsed = parse_udp(seg).unwrap();
            assert_eq!(parsed.payload.len(), if i < 2 { 1000 } else { 500 });
            assert_eq!(u16::from_be_bytes([seg[ETH_LEN + 4], seg[ETH_LEN + 5]]), 0x1234 + i as u16);
            joined.extend_from_slice(parsed.payload);
        }
        assert_eq!(joined, payload);
    }

    #[test]
    fn resealing_after_a_bit_flip_makes_the_checksums_valid_again() {
        let f = frame(b"payload to corrupt");
        let mut out = split(&parse_udp(&f).unwrap(), Offload::default(), 0).remove(0);
        let (start, len) = payload_range(&out).unwrap();
        assert_eq!(len, 18);
        out[start + 5] ^= 0x10;
        assert!(!verifies(&out));
        seal(&mut out);
        assert!(verifies(&out));
    }

    #[test]
    fn vnet_headers_decode() {
        assert_eq!(Offload::from_vnet_hdr(&[0; 10]), Some(Offload { udp_segment: None }));
        let mut gso = [0u8; 10];
        gso[1] = VIRTIO_NET_HDR_GSO_UDP_L4;
        gso[4..6].copy_from_slice(&1472u16.to_ne_bytes());
        assert_eq!(Offload::from_vnet_hdr(&gso), Some(Offload { udp_segment: Some(1472) }));
        gso[1] = 1; // TCPv4
        assert_eq!(Offload::from_vnet_hdr(&gso), None);
        assert_eq!(Offload::from_vnet_hdr(&[0; 3]), None);
    }
}
