//! Counters as C sees them: `mw_stats`, a struct versioned by its leading
//! `size` field so it can grow without breaking programs built against an
//! older header, and `mw_stats_get`.
//!
//! Owns: the mapping from core's counters (`CoreStats`, the protocol's
//! `Stats`, `MsgStats`, `McastStats`) to the flat C struct, and the rule
//! that a call writes no byte past the caller's `size`. Must not: count
//! anything itself, or reorder or remove fields (new ones are appended).

use crate::endpoint::{endpoint, mw_endpoint};
use crate::ffi;
use crate::status::{guard, mw_status, Failure};

/// Counters of one endpoint (`mw_stats_get`): operations, the reliable
/// protocol's packets, the shared-memory and UDP paths, messaging, active
/// messages and multicast. `MW_STATS=1` prints them at `mw_finalize`.
///
/// Versioned by its size: set `size` before the call
/// (`mw_stats s = { .size = sizeof s };`, or in C++ `s.size = sizeof s`)
/// and the library writes only that many bytes, so a program built against
/// an older, shorter `mw_stats` keeps working with a newer library. Fields
/// are only ever appended, and every one is a `uint64_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mw_stats {
    /// In: the caller's `sizeof(mw_stats)`. Out: the bytes written, the
    /// smaller of that and the library's own size (so a newer program on an
    /// older library can tell which fields were filled).
    pub size: u64,
    /// Operations this rank initiated.
    pub ops_initiated: u64,
    /// Incoming operations rejected: unknown region key.
    pub rejected_bad_key: u64,
    /// Incoming operations rejected: outside the region.
    pub rejected_out_of_bounds: u64,
    /// Incoming operations rejected: the region does not grant the right.
    pub rejected_no_permission: u64,
    /// Incoming operations rejected for another reason (misaligned, bad argument).
    pub rejected_other: u64,
    /// Delivered operations whose header did not parse.
    pub malformed_ops: u64,
    /// Delivered operations of a kind this endpoint does not serve.
    pub unsupported_ops: u64,
    /// Datagrams the socket refused to send (the protocol resends them).
    pub send_errors: u64,
    /// Datagrams sent.
    pub packets_sent: u64,
    /// Bytes of datagrams sent.
    pub bytes_sent: u64,
    /// Datagrams received, accepted or not.
    pub packets_received: u64,
    /// Bytes of datagrams received.
    pub bytes_received: u64,
    /// Data packets sent for the first time.
    pub data_sent: u64,
    /// Data packets retransmitted after a timeout.
    pub retransmits_timeout: u64,
    /// Data packets retransmitted early (Nack or SACK evidence).
    pub retransmits_fast: u64,
    /// Standalone acknowledgement packets sent.
    pub acks_sent: u64,
    /// Negative acknowledgements sent.
    pub nacks_sent: u64,
    /// Negative acknowledgements received.
    pub nacks_received: u64,
    /// Messages submitted to the protocol.
    pub messages_submitted: u64,
    /// Messages delivered by the protocol.
    pub messages_delivered: u64,
    /// Peers declared dead.
    pub peers_dead: u64,
    /// Peer restarts noticed.
    pub peers_restarted: u64,
    /// Datagrams dropped as not well-formed: truncated, bad magic, version,
    /// type or length, malformed, oversized, or a bad checksum.
    pub drops_malformed: u64,
    /// Datagrams dropped: another job's.
    pub drops_wrong_job: u64,
    /// Datagrams dropped: addressed to another rank, or from an unknown one.
    pub drops_wrong_peer: u64,
    /// Datagrams dropped: from or to an earlier incarnation.
    pub drops_stale_epoch: u64,
    /// Datagrams dropped: duplicates of data already received.
    pub drops_duplicate: u64,
    /// Datagrams dropped: beyond the receive window.
    pub drops_out_of_window: u64,
    /// Datagrams dropped: bad or missing MAC.
    pub drops_bad_mac: u64,
    /// Datagrams dropped: from a peer declared dead.
    pub drops_dead_peer: u64,
    /// One-sided operations executed directly on a same-host peer's memory
    /// (not counted in `ops_initiated`, which counts those sent as messages).
    pub shm_direct_ops: u64,
    /// Messages put into same-host peers' shared-memory rings.
    pub shm_ring_sent: u64,
    /// Messages taken from this rank's shared-memory rings and executed.
    pub shm_ring_received: u64,
    /// Bytes of this rank's large messages it copied into a same-host
    /// receiver's buffer itself, while the receiver copied the rest.
    pub shm_assist_bytes: u64,
    /// Bytes of this rank's large messages it copied into a same-host
    /// receiver's staging area (ranks as processes, 2 MiB and more), for the
    /// receiver to copy out.
    pub shm_staged_bytes: u64,
    /// The part of `shm_staged_bytes` written with non-temporal stores
    /// (while the host placed the two CPUs far apart).
    pub shm_streamed_bytes: u64,

    // ---- Since 0.1 (the first versioned layout): appended only below. ----
    /// Requests allocated and not yet freed when the counters were read
    /// (operations in flight, handles not yet consumed, payloads exposed
    /// and not yet pulled): a value that keeps growing over the rounds of a
    /// steady loop is a leak.
    pub requests_live: u64,
    /// Data packets received that passed the header, job and MAC checks,
    /// duplicates included.
    pub data_received: u64,
    /// Probe packets sent (ack requests with no data to carry them, keepalives).
    pub probes_sent: u64,
    /// Reset packets sent to peers that addressed an earlier incarnation of this rank.
    pub resets_sent: u64,
    /// Times this rank noticed it had not run for a while (stopped or
    /// starved) and restarted its peers' silence clocks.
    pub stalls_forgiven: u64,
    /// UDP send calls that sent something (`sendto`, `sendmsg`, `sendmmsg`).
    pub udp_send_calls: u64,
    /// Datagrams those calls sent (a GSO send counts its segments).
    pub udp_datagrams_sent: u64,
    /// UDP receive calls that returned something.
    pub udp_recv_calls: u64,
    /// Datagrams those calls returned (a GRO buffer counts its segments).
    pub udp_datagrams_received: u64,
    /// The largest datagram sent to a peer on another host (the path's
    /// payload MTU as configured; loopback peers may get larger ones).
    pub udp_payload_mtu: u64,
    /// 1 if sends to one peer go out as UDP GSO super-datagrams, else 0.
    pub udp_gso: u64,
    /// 1 if the kernel may hand over GRO-coalesced datagrams, else 0.
    pub udp_gro: u64,
    /// Datagrams the UDP socket dropped as longer than its receive buffer.
    pub udp_oversized: u64,
    /// The same for the IP multicast socket.
    pub mcast_oversized: u64,
    /// CPU time of the whole process in user mode when the counters were
    /// read, microseconds (0 where unavailable).
    pub cpu_user_us: u64,
    /// The same in the kernel.
    pub cpu_system_us: u64,
    /// Datagrams offered to the fault injector (`MW_FAULT_*`; 0 without it).
    pub fault_offered: u64,
    /// Of those, dropped.
    pub fault_dropped: u64,
    /// Of those, duplicated.
    pub fault_duplicated: u64,
    /// Of those, reordered.
    pub fault_reordered: u64,
    /// Bytes (payload + 64 per message) now held in the unexpected-message buffer.
    pub msg_unexpected_bytes: u64,
    /// The highest `msg_unexpected_bytes` ever reached.
    pub msg_unexpected_bytes_max: u64,
    /// Messages now held in the unexpected-message buffer.
    pub msg_unexpected_messages: u64,
    /// Tagged sends that had to wait for credit from their receiver.
    pub msg_credit_stalls: u64,
    /// Tagged messages sent eagerly.
    pub msg_eager_sent: u64,
    /// Tagged messages sent by rendezvous.
    pub msg_rndv_sent: u64,
    /// Rendezvous payloads pulled (tagged and active-message).
    pub msg_rndv_pulled: u64,
    /// Active-message handlers run.
    pub am_handled: u64,
    /// Of those, requests from same-host peers run straight from the ring.
    pub am_in_place: u64,
    /// Replies from same-host peers the waiting requester took straight from the ring.
    pub am_replies_in_place: u64,
    /// Handlers that failed (their request was answered `MW_ERR_UNSUPPORTED`).
    pub am_handler_panics: u64,
    /// Active messages for an id without a handler (one-way ones included).
    pub am_no_handler: u64,
    /// FIFO pushes refused because the FIFO was full.
    pub fifo_refused: u64,
    /// Raw datagrams received and queued.
    pub raw_received: u64,
    /// Raw datagrams dropped because the receive queue was full.
    pub raw_dropped: u64,
    /// Multicast calls this rank rooted over IP multicast.
    pub mcast_ip_transfers: u64,
    /// Multicast calls this rank rooted over the tree although the team had
    /// IP multicast (a member reported trouble, or sending failed).
    pub mcast_tree_fallbacks: u64,
    /// Segments sent to a group (first sends and repairs).
    pub mcast_group_sends: u64,
    /// Segments sent by unicast (repairs, or everything after a group failure).
    pub mcast_unicast_sends: u64,
    /// Of the group sends, repairs.
    pub mcast_group_repairs: u64,
    /// Nacks received from members.
    pub mcast_nacks_received: u64,
    /// Segments received first from a group.
    pub mcast_received_via_group: u64,
    /// Segments received first by unicast repair.
    pub mcast_received_via_unicast: u64,
    /// Copies of segments already held.
    pub mcast_duplicates: u64,
    /// Nacks sent to roots.
    pub mcast_nacks_sent: u64,
    /// Valid segments for no transfer armed here (late, early or another team's).
    pub mcast_stray: u64,
    /// Sends to a group the kernel refused (no route, not permitted).
    pub mcast_send_errors: u64,
    /// Failures to open the group socket or join a group.
    pub mcast_setup_failures: u64,
    /// Datagrams dropped: they would have set or changed a peer's epoch
    /// (a restart) without proving it (one host, authentication off).
    pub drops_unproven_epoch: u64,
}

// Every field is a u64: no padding, so the whole struct is initialized bytes
// (`ffi::write_prefix`) and a prefix of it is an older version's layout.
const _: () = assert!(size_of::<mw_stats>() % 8 == 0 && align_of::<mw_stats>() == 8);

/// The smallest `size` accepted: the `size` field and one counter.
const MIN_SIZE: u64 = 16;

/// Stores a snapshot of the endpoint's counters in `*stats`, writing no
/// more than `stats->size` bytes (see `mw_stats`) and setting `stats->size`
/// to the bytes written. A `size` below 16 (e.g. 0: not set) is
/// `MW_ERR_INVALID_ARGUMENT` and writes nothing.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `stats` NULL or 8-byte aligned and
/// valid for reads and writes of `stats->size` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_stats_get(ep: *mut mw_endpoint, stats: *mut mw_stats) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract: at least the size field is there.
        let (ep, size) = unsafe { (endpoint(ep)?, ffi::leading_u64(stats, "stats")?) };
        if size < MIN_SIZE {
            return Err(Failure::invalid("stats->size must be set to sizeof(mw_stats) before the call"));
        }
        let len = size.min(size_of::<mw_stats>() as u64);
        let mut snapshot = snapshot(&ep.ep);
        snapshot.size = len;
        // SAFETY: the caller's struct holds `size >= len` bytes (the
        // contract); `mw_stats` has no padding (asserted above).
        unsafe { ffi::write_prefix(stats, &snapshot, len as usize) };
        Ok(())
    })
}

/// Every counter of `ep`, flattened.
fn snapshot(ep: &mw_core::Endpoint) -> mw_stats {
    let (core, proto) = ep.stats();
    let msg = ep.msg_stats();
    let (d, io, f, m) = (&proto.drops, &core.udp_io, &core.fault, &core.mcast);
    mw_stats {
        size: 0,
        ops_initiated: core.ops_initiated,
        rejected_bad_key: core.rejected_bad_key,
        rejected_out_of_bounds: core.rejected_out_of_bounds,
        rejected_no_permission: core.rejected_no_permission,
        rejected_other: core.rejected_other,
        malformed_ops: core.malformed_ops,
        unsupported_ops: core.unsupported_ops,
        send_errors: core.send_errors,
        packets_sent: proto.packets_sent,
        bytes_sent: proto.bytes_sent,
        packets_received: proto.packets_received,
        bytes_received: proto.bytes_received,
        data_sent: proto.data_sent,
        retransmits_timeout: proto.retransmits_timeout,
        retransmits_fast: proto.retransmits_fast,
        acks_sent: proto.acks_sent,
        nacks_sent: proto.nacks_sent,
        nacks_received: proto.nacks_received,
        messages_submitted: proto.messages_submitted,
        messages_delivered: proto.messages_delivered,
        peers_dead: proto.peers_dead,
        peers_restarted: proto.peers_restarted,
        drops_malformed: d.not_well_formed(),
        drops_wrong_job: d.wrong_job,
        drops_wrong_peer: d.wrong_target + d.unknown_peer,
        drops_stale_epoch: d.stale_epoch,
        drops_duplicate: d.duplicate,
        drops_out_of_window: d.out_of_window,
        drops_bad_mac: d.bad_mac,
        drops_dead_peer: d.dead_peer,
        shm_direct_ops: core.shm_direct_ops,
        shm_ring_sent: core.shm_ring_sent,
        shm_ring_received: core.shm_ring_received,
        shm_assist_bytes: core.shm_assist_bytes,
        shm_staged_bytes: core.shm_staged_bytes,
        shm_streamed_bytes: core.shm_streamed_bytes,
        requests_live: core.requests_live,
        data_received: proto.data_received,
        probes_sent: proto.probes_sent,
        resets_sent: proto.resets_sent,
        stalls_forgiven: proto.stalls_forgiven,
        udp_send_calls: io.send_calls,
        udp_datagrams_sent: io.datagrams_sent,
        udp_recv_calls: io.recv_calls,
        udp_datagrams_received: io.datagrams_received,
        udp_payload_mtu: core.udp_payload_mtu,
        udp_gso: u64::from(core.udp_gso),
        udp_gro: u64::from(core.udp_gro),
        udp_oversized: core.udp_oversized,
        mcast_oversized: core.mcast_oversized,
        cpu_user_us: core.cpu_user_us,
        cpu_system_us: core.cpu_system_us,
        fault_offered: f.offered,
        fault_dropped: f.dropped,
        fault_duplicated: f.duplicated,
        fault_reordered: f.reordered,
        msg_unexpected_bytes: msg.unexpected_bytes,
        msg_unexpected_bytes_max: msg.unexpected_bytes_max,
        msg_unexpected_messages: msg.unexpected_messages,
        msg_credit_stalls: msg.credit_stalls,
        msg_eager_sent: msg.eager_sent,
        msg_rndv_sent: msg.rndv_sent,
        msg_rndv_pulled: msg.rndv_pulled,
        am_handled: msg.am_handled,
        am_in_place: msg.am_in_place,
        am_replies_in_place: msg.am_replies_in_place,
        am_handler_panics: msg.am_handler_panics,
        am_no_handler: msg.am_no_handler,
        fifo_refused: msg.fifo_refused,
        raw_received: msg.raw_received,
        raw_dropped: msg.raw_dropped,
        mcast_ip_transfers: m.ip_transfers,
        mcast_tree_fallbacks: m.tree_fallbacks,
        mcast_group_sends: m.group_sends,
        mcast_unicast_sends: m.unicast_sends,
        mcast_group_repairs: m.group_repairs,
        mcast_nacks_received: m.nacks_received,
        mcast_received_via_group: m.received_via_group,
        mcast_received_via_unicast: m.received_via_unicast,
        mcast_duplicates: m.duplicates,
        mcast_nacks_sent: m.nacks_sent,
        mcast_stray: m.stray,
        mcast_send_errors: m.send_errors,
        mcast_setup_failures: m.setup_failures,
        drops_unproven_epoch: d.unproven_epoch,
    }
}
