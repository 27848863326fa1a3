//! memwire's endpoint layer: regions and their protection, every one-sided
//! operation, requests and handles, and the progress engine that drives the
//! sans-IO protocol (crate `mw-proto`) over the transport (crate `mw-transport`).
//!
//! Owns: what an operation *means* (initiator: `rma.rs`; target: `target.rs`),
//! protection checks (`region`), completion (`request`, `handle`), the
//! endpoint's life cycle and progress (`endpoint`). Must not: implement
//! reliability, parse packet headers, or touch sockets directly.
//! Same-host peers use shared memory (`shm`: rings for messages, direct
//! load/store/atomics on mapped regions). `unsafe` lives only in
//! `region::raw` (and the one scoped registration helper in `memory`), each
//! block with its `// SAFETY:` reasoning.
#![deny(unsafe_code)]

pub mod config;
mod endpoint;
mod error;
mod handle;
mod internal;
mod memory;
pub mod region;
mod request;
mod rma;
mod shm;
mod stats;
mod target;

pub use config::{Config, ProgressMode, ShmCopy, TransportChoice};
pub use endpoint::Endpoint;
pub use error::{Error, Result};
pub use handle::{wait_all, Handle};
pub use internal::RESERVED_HANDLER_BASE;
pub use memory::Region;
pub use mw_wire::op::{AtomicOp, AtomicWidth, SignalOp};
pub use region::{Access, Arrival, ArrivalKind, RegionKey};
pub use rma::{Cmp, Signal};
pub use stats::CoreStats;
