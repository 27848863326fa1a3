//! How a batch of datagrams maps onto `sendmmsg` entries: pure logic, so it
//! is tested without sockets.
//!
//! Owns: grouping runs of same-destination datagrams of one size (the last may
//! be shorter) into GSO sends, within the kernel's segment-count and byte
//! limits. Must not: reorder datagrams, touch a socket, or allocate beyond the
//! caller's output vector.

use std::net::SocketAddr;

use super::{MAX_UDP6_PAYLOAD, MAX_UDP_PAYLOAD};
use crate::sys::{OutDatagram, SendGroup};

/// When a run of datagrams may be merged into one GSO send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GsoPolicy {
    /// Most segments per GSO send; 1 means GSO is off.
    pub max_segments: usize,
    /// Segments up to this size are safe on any path (they fit the
    /// configured MTU); larger ones only toward loopback, because the kernel
    /// refuses (`EINVAL`) a GSO segment larger than the path MTU.
    pub payload_mtu: usize,
}

impl GsoPolicy {
    pub(super) fn disabled() -> Self {
        Self { max_segments: 1, payload_mtu: 0 }
    }

    fn allows(&self, dst: &SocketAddr, segment: usize) -> bool {
        self.max_segments > 1
            && segment > 0
            && segment <= usize::from(u16::MAX)
            && (segment <= self.payload_mtu || dst.ip().to_canonical().is_loopback())
    }
}

/// The most payload one GSO send may carry: the IP length field limit.
fn max_gso_bytes(dst: &SocketAddr) -> usize {
    match dst {
        SocketAddr::V4(_) => MAX_UDP_PAYLOAD,
        SocketAddr::V6(_) => MAX_UDP6_PAYLOAD,
    }
}

/// Splits `msgs` into consecutive groups, each sent as one `sendmmsg` entry.
/// A group holds one datagram, or — under `policy` — a run to the same
/// destination whose payloads all have the first one's size except possibly
/// a shorter, non-empty last one (the kernel cuts GSO sends into equal
/// segments, the last may be short). Order is preserved. Writes into `out`
/// (cleared first) so the caller's preallocated vector is reused.
pub(super) fn plan_groups<D: OutDatagram>(msgs: &[D], policy: &GsoPolicy, out: &mut Vec<SendGroup>) {
    out.clear();
    let mut start = 0;
    while start < msgs.len() {
        let dst = msgs[start].dst();
        let segment = msgs[start].len();
        let mut end = start + 1;
        if policy.allows(dst, segment) {
            let limit = max_gso_bytes(dst);
            let mut total = segment;
            while end < msgs.len() && end - start < policy.max_segments {
                let next_dst = msgs[end].dst();
                let len = msgs[end].len();
                // An empty last payload would add no bytes, so the kernel
                // would emit one datagram fewer than we count.
                if next_dst != dst || len > segment || len == 0 || total + len > limit {
                    break;
                }
                total += len;
                end += 1;
                if len < segment {
                    break;
                }
            }
        }
        out.push(SendGroup {
            start,
            end,
            // Checked by `allows` whenever the group has more than one entry.
            gso_size: (end - start > 1).then_some(segment as u16),
        });
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gso(max_segments: usize) -> GsoPolicy {
        GsoPolicy { max_segments, payload_mtu: 1472 }
    }

    fn plan(msgs: &[(SocketAddr, &[u8])], policy: GsoPolicy) -> Vec<(usize, usize, Option<u16>)> {
        let mut out = Vec::new();
        plan_groups(msgs, &policy, &mut out);
        out.iter().map(|g| (g.start, g.end, g.gso_size)).collect()
    }

    const A: &str = "10.0.0.1:9";
    const B: &str = "10.0.0.2:9";

    fn msgs<'a>(spec: &[(&str, &'a [u8])]) -> Vec<(SocketAddr, &'a [u8])> {
        spec.iter().map(|(a, p)| (a.parse().unwrap(), *p)).collect()
    }

    #[test]
    fn equal_runs_to_one_destination_merge() {
        let p = [0u8; 100];
        let m = msgs(&[(A, &p), (A, &p), (A, &p[..40]), (A, &p), (B, &p), (B, &p)]);
        assert_eq!(plan(&m, gso(64)), vec![(0, 3, Some(100)), (3, 4, None), (4, 6, Some(100))]);
    }

    #[test]
    fn without_gso_every_datagram_is_its_own_entry() {
        let p = [0u8; 100];
        let m = msgs(&[(A, &p), (A, &p), (A, &p)]);
        let expected = vec![(0, 1, None), (1, 2, None), (2, 3, None)];
        assert_eq!(plan(&m, GsoPolicy::disabled()), expected);
    }

    #[test]
    fn longer_or_empty_followers_start_a_new_group() {
        let p = [0u8; 200];
        let m = msgs(&[(A, &p[..100]), (A, &p), (A, &p[..100]), (A, &p[..0])]);
        assert_eq!(plan(&m, gso(64)), vec![(0, 1, None), (1, 3, Some(200)), (3, 4, None)]);
    }

    #[test]
    fn segment_count_and_total_size_are_bounded() {
        let p = [0u8; 1472];
        let m: Vec<_> = (0..100).map(|_| (A.parse().unwrap(), &p[..])).collect();
        let groups = plan(&m, gso(64));
        // 65507 / 1472 = 44 segments fit one IPv4 datagram's length field.
        assert_eq!(groups[0], (0, 44, Some(1472)));
        assert_eq!(groups[1], (44, 88, Some(1472)));
        assert_eq!(groups[2], (88, 100, Some(1472)));
        let small = [0u8; 10];
        let m: Vec<_> = (0..70).map(|_| (A.parse().unwrap(), &small[..])).collect();
        assert_eq!(plan(&m, gso(64)), vec![(0, 64, Some(10)), (64, 70, Some(10))]);
    }

    #[test]
    fn segments_above_the_mtu_merge_only_toward_loopback() {
        let p = [0u8; 8000];
        let m = msgs(&[(A, &p), (A, &p)]);
        assert_eq!(plan(&m, gso(64)), vec![(0, 1, None), (1, 2, None)]);
        let m = msgs(&[("127.0.0.1:9", &p), ("127.0.0.1:9", &p)]);
        assert_eq!(plan(&m, gso(64)), vec![(0, 2, Some(8000))]);
    }
}
