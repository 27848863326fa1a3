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
    /// One-sided operations this rank executed directly on a same-host
    /// peer's memory (mapped load/store/atomic, or `process_vm_*`).
    /// Counted without a lock: approximate when several threads issue them.
    pub shm_direct_ops: u64,
    /// Messages this rank put into same-host peers' rings.
    pub shm_ring_sent: u64,
    /// Messages this rank took from its inbound rings and executed.
    pub shm_ring_received: u64,
    /// IP multicast: transfers, segments, repairs, fallbacks.
    pub mcast: crate::McastStats,
}
