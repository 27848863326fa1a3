//! Per-endpoint counters kept above the protocol (the protocol keeps its own
//! packet counters); printed at finalize when `MW_STATS=1`.
//!
//! Owns: counting. Must not: influence behaviour.

/// Operation-level counters of one endpoint.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CoreStats {
    /// Operations initiated by this rank.
    pub ops_initiated: u64,
    /// Incoming operations rejected: unknown region key.
    pub rejected_bad_key: u64,
    /// Incoming operations rejected: outside the region.
    pub rejected_out_of_bounds: u64,
    /// Incoming operations rejected: the region does not grant the right.
    pub rejected_no_permission: u64,
    /// Incoming operations rejected for another reason (misaligned, bad argument).
    pub rejected_other: u64,
    /// Delivered messages whose operation header did not parse.
    pub malformed_ops: u64,
    /// Delivered operations of a kind this endpoint does not serve.
    pub unsupported_ops: u64,
    /// Datagrams the transport failed to send (retried by the protocol).
    pub send_errors: u64,
    /// Requests allocated and not yet freed when the counters were read:
    /// operations in flight, handles not yet waited on, payloads exposed
    /// and not yet pulled. Not a counter: a value that keeps growing over
    /// the rounds of a steady loop is a leak.
    pub requests_live: u64,
    /// One-sided operations this rank executed directly on a same-host
    /// peer's memory (mapped load/store/atomic, or `process_vm_*`).
    /// Counted without a lock: approximate when several threads issue them.
    pub shm_direct_ops: u64,
    /// Messages this rank put into same-host peers' rings.
    pub shm_ring_sent: u64,
    /// Messages this rank took from its inbound rings and executed.
    pub shm_ring_received: u64,
    /// Bytes of its own large messages this rank copied for a same-host
    /// receiver while the receiver was pulling them (both CPUs copying one
    /// message; `mw_transport::shm::assist`): into the receiver's buffer,
    /// or through its staging area.
    pub shm_assist_bytes: u64,
    /// The part of `shm_assist_bytes` that went through a receiver's
    /// staging area (a receiver in another process; `mw_transport::shm::stage`).
    pub shm_staged_bytes: u64,
    /// The part of `shm_staged_bytes` written with non-temporal stores (in
    /// the host's stretches of placing the two CPUs far apart;
    /// `mw_transport::shm::StageCopy`).
    pub shm_streamed_bytes: u64,
    /// IP multicast: transfers, segments, repairs, fallbacks.
    pub mcast: crate::McastStats,
    /// Datagrams the UDP socket dropped because they were longer than its
    /// receive buffer (`mw_transport`'s `truncated_datagrams`); they never
    /// reach the protocol, whose own `drops.oversized` counts datagrams
    /// longer than the job's `max_datagram`.
    pub udp_oversized: u64,
    /// The same for the IP multicast socket.
    pub mcast_oversized: u64,
    /// The UDP socket's system calls and the datagrams they moved.
    pub udp_io: mw_transport::IoCounts,
    /// The largest datagram sent to a peer on another host (the path's
    /// payload MTU as configured; loopback peers may get larger ones).
    pub udp_payload_mtu: u64,
    /// Whether sends to one peer go out as UDP GSO super-datagrams.
    pub udp_gso: bool,
    /// Whether the kernel may hand over GRO-coalesced datagrams.
    pub udp_gro: bool,
    /// CPU time of the whole process when the counters were read, user and
    /// system, in microseconds (`getrusage`; 0 where unavailable).
    pub cpu_user_us: u64,
    /// See `cpu_user_us`.
    pub cpu_system_us: u64,
    /// What the fault injector (`MW_FAULT_*`) did to outgoing datagrams; all
    /// zero without injection.
    pub fault: mw_transport::FaultStats,
}

/// The `MW_STATS=1` report of one rank: a few labelled lines, each starting
/// with `memwire rank N`, operation layer first, then transport, then the
/// protocol's counters.
pub fn report(rank: u32, core: &CoreStats, proto: &mw_proto::Stats) -> String {
    use std::fmt::Write as _;
    let mut lines = vec![
        format!(
            "operations {} initiated, {} requests live; rejected incoming: {} bad key, {} out of bounds, \
             {} no permission, {} other; {} malformed, {} unsupported",
            core.ops_initiated,
            core.requests_live,
            core.rejected_bad_key,
            core.rejected_out_of_bounds,
            core.rejected_no_permission,
            core.rejected_other,
            core.malformed_ops,
            core.unsupported_ops
        ),
        format!(
            "shm        {} direct ops, {} ring messages sent, {} received, {} bytes copied for receivers ({} staged, \
             {} of them streamed)",
            core.shm_direct_ops,
            core.shm_ring_sent,
            core.shm_ring_received,
            core.shm_assist_bytes,
            core.shm_staged_bytes,
            core.shm_streamed_bytes
        ),
        format!(
            "transport  {} send errors, oversized datagrams dropped: {} udp, {} multicast",
            core.send_errors, core.udp_oversized, core.mcast_oversized
        ),
        format!(
            "udp        datagrams up to {} B, GSO {}, GRO {}; {} datagrams sent in {} calls ({:.1} per call), \
             {} received in {} calls ({:.1} per call)",
            core.udp_payload_mtu,
            on_off(core.udp_gso),
            on_off(core.udp_gro),
            core.udp_io.datagrams_sent,
            core.udp_io.send_calls,
            per(core.udp_io.datagrams_sent, core.udp_io.send_calls),
            core.udp_io.datagrams_received,
            core.udp_io.recv_calls,
            per(core.udp_io.datagrams_received, core.udp_io.recv_calls),
        ),
        format!(
            "cpu        {:.3} s user, {:.3} s system (whole process); {:.2} acks sent per data packet received",
            core.cpu_user_us as f64 / 1e6,
            core.cpu_system_us as f64 / 1e6,
            per(proto.acks_sent + proto.nacks_sent, proto.data_received),
        ),
    ];
    let f = &core.fault;
    if f.offered > 0 {
        lines.push(format!(
            "faults     {} datagrams offered: {} dropped, {} duplicated, {} reordered",
            f.offered, f.dropped, f.duplicated, f.reordered
        ));
    }
    let m = &core.mcast;
    if *m != crate::McastStats::default() {
        lines.push(format!(
            "ip mcast   {} transfers ({} tree fallbacks), {} group + {} unicast sends ({} repairs), \
         received {} via group + {} via unicast, {} duplicates, {} stray, nacks {} sent / {} received, \
         {} send errors, {} setup failures",
            m.ip_transfers,
            m.tree_fallbacks,
            m.group_sends,
            m.unicast_sends,
            m.group_repairs,
            m.received_via_group,
            m.received_via_unicast,
            m.duplicates,
            m.stray,
            m.nacks_sent,
            m.nacks_received,
            m.send_errors,
            m.setup_failures
        ));
    }
    lines.extend(proto.to_string().lines().map(str::to_string));
    let mut out = String::new();
    for line in lines {
        let _ = writeln!(out, "memwire rank {rank} {line}");
    }
    out
}

/// This process's CPU time so far, (user, system) in microseconds, from
/// `/proc/self/stat` (fields 14 and 15, in the kernel's fixed `USER_HZ` of
/// 100 ticks a second: 10 ms resolution). `None` off Linux.
pub(crate) fn process_cpu_us() -> Option<(u64, u64)> {
    const USER_HZ: u64 = 100;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces: count from its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((user * 1_000_000 / USER_HZ, system * 1_000_000 / USER_HZ))
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

/// `a / b`, 0 when `b` is.
fn per(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_cpu_time_is_read_and_grows() {
        let (user, system) = process_cpu_us().expect("/proc/self/stat on Linux");
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let (user2, system2) = process_cpu_us().unwrap();
        assert!(user2 + system2 >= user + system + 20_000, "{user}+{system} -> {user2}+{system2}");
    }

    #[test]
    fn the_report_is_labelled_lines_with_transport_counters() {
        let core = CoreStats {
            requests_live: 5,
            udp_oversized: 3,
            fault: mw_transport::FaultStats { offered: 10, dropped: 2, duplicated: 1, reordered: 0 },
            ..CoreStats::default()
        };
        let mut proto = mw_proto::Stats::default();
        proto.drops.bad_version = 4;
        let text = report(7, &core, &proto);
        assert!(text.lines().all(|l| l.starts_with("memwire rank 7 ")), "{text}");
        assert!(text.contains("oversized datagrams dropped: 3 udp, 0 multicast"), "{text}");
        assert!(text.contains("0 initiated, 5 requests live;"), "{text}");
        assert!(text.contains("10 datagrams offered: 2 dropped, 1 duplicated"), "{text}");
        assert!(text.contains("drops      total 4 bad_version=4"), "{text}");
        assert!(!text.contains('{'), "no Debug structs: {text}");
        assert!(text.contains("udp        datagrams up to 0 B, GSO off, GRO off"), "{text}");
        let quiet = report(0, &CoreStats::default(), &mw_proto::Stats::default());
        assert!(!quiet.contains("faults"), "no fault line without injection");
        assert!(!quiet.contains("ip mcast"), "no IP multicast line without IP multicast");
        let mcast = CoreStats { mcast: crate::McastStats { ip_transfers: 2, ..Default::default() }, ..core };
        assert!(report(1, &mcast, &proto).contains("ip mcast   2 transfers"));
    }
}
