//! `mw-transport`: the only memwire crate that moves bytes through the OS.
//!
//! Owns:
//! - [`UdpTransport`]: a nonblocking UDP socket with single-datagram calls
//!   for the latency path and `sendmmsg`/`recvmmsg` batches with UDP GSO/GRO
//!   (probed at bind, with a silent fallback) for the throughput path;
//! - [`Waiter`]: what a progress loop does when it finds nothing — spin,
//!   then yield the CPU, then block in `ppoll` until a deadline;
//! - [`FaultInjector`]: seeded drop/duplicate/reorder on the send path,
//!   configured by `MW_FAULT_*`, always compiled;
//! - [`McastSocket`]: the receiving side of IPv4 multicast groups (sending
//!   is the UDP socket's, after [`UdpTransport::enable_multicast_send`]);
//! - `sys`: the unsafe island, the one module here allowed `unsafe`.
//!
//! Must not: hold protocol logic. No sequence numbers, acks, timers or
//! retries live here; a full socket is reported as `WouldBlock` and the
//! sans-IO protocol above decides what to do. Nothing here reads the clock
//! except the waiter, which only measures how long the caller has been idle.
//!
//! - [`shm`]: shared memory between ranks of one host (memory-file segments,
//!   single-producer rings, the control block, `process_vm_*` copies).
//!
//! Linux only (GSO/GRO, `*mmsg`, `ppoll`).

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod fault;
pub mod mcast;
pub mod shm;
#[allow(unsafe_code)]
mod sys;
pub mod udp;
pub mod wait;

pub use fault::{FaultAction, FaultConfig, FaultConfigError, FaultInjector, FaultStats};
pub use mcast::McastSocket;
pub use udp::{IoCounts, RecvBatch, RecvIter, RecvSegments, UdpConfig, UdpTransport};
pub use wait::{Idle, WaitPolicy, Waiter};
