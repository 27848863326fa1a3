//! memwire's endpoint layer: regions and their protection, every one-sided
//! operation, requests and handles, and the progress engine that drives the
//! sans-IO protocol (crate `mw-proto`) over the transport (crate `mw-transport`).
//!
//! Owns: what an operation *means* (initiator: `rma.rs`; target: `target.rs`),
//! protection checks (`region`), completion (`request`, `handle`), the
//! endpoint's life cycle and progress (`endpoint`). Must not: implement
//! reliability, parse packet headers, or touch sockets directly.
//! `unsafe` lives only in `region::raw` (and the scoped registration
//! helpers in `memory`), each block with its `// SAFETY:` reasoning.
//! Messaging (tagged messages, active messages, FIFOs, raw datagrams) lives
//! in `msg`; see the section below.
//!
//! # Messaging
//!
//! **Tagged messages** ([`Endpoint::send`], [`Endpoint::isend`],
//! [`Endpoint::recv`], [`Endpoint::irecv`], [`Endpoint::probe`],
//! [`Endpoint::iprobe`], and `*_in` forms taking a matching context): a
//! receive names a source rank or [`ANY_SOURCE`] and a tag or [`ANY_TAG`];
//! it matches the oldest arrived message it accepts, and a message matches
//! the oldest posted receive that accepts it, so messages between a pair
//! never overtake each other. Messages up to the eager limit
//! (`Config::eager_limit` toward other hosts, default 64 KiB;
//! `Config::shm_eager_limit` within a host, by default 16 KiB or, toward
//! another process where the kernel's cross-memory copy is slow, 64 KiB;
//! [`Endpoint::eager_limit`] tells a peer's) travel in one protocol message; larger
//! ones are announced and the receiver GETs the data (receiver-driven
//! rendezvous, seed 002): a blocking `recv` lands it straight in the caller's
//! buffer and a blocking `send` exposes the caller's buffer in place, so
//! neither copies; the nonblocking forms stage through library memory so
//! that a leaked handle can never touch freed memory. Messages that arrive
//! before their receive wait in an unexpected buffer bounded by credits
//! (`MW_UNEXPECTED_CREDIT` bytes per sender, default 256 KiB; the same on
//! every rank): a sender without credit waits (`send`) or queues locally
//! (`isend`), nothing is dropped. A message longer than the receive buffer
//! fails the receive with [`Error::Truncated`] and leaves the buffer untouched.
//!
//! **Active messages** ([`Endpoint::register_handler`],
//! [`Endpoint::am_request`], [`AmContext::reply`]): ids below
//! [`RESERVED_HANDLER_BASE`]; up to 8 u64 arguments and a payload of any size
//! each way (large ones by rendezvous); an id without a handler at the target
//! answers [`Error::NoHandler`]. Handlers run in the progress engine with the
//! endpoint locked: they must not call the [`Endpoint`], and act through
//! their [`AmContext`] (reply, queue one-way messages).
//!
//! **Remote FIFOs** ([`Endpoint::create_fifo`], [`Endpoint::fifo_push`],
//! [`Endpoint::try_fifo_push`], [`Fifo::pop`], [`Fifo::try_pop`],
//! [`Fifo::set_watermark`]; seed 001's Memory-Based FIFO): a full FIFO
//! refuses a push ([`Error::WouldBlock`] from `try_fifo_push`; `fifo_push`
//! waits until the owner pops), nothing is lost; the watermark callback fires
//! when a push fills it to ¾.
//!
//! **Raw datagrams** ([`Endpoint::send_raw`], [`Endpoint::recv_raw`],
//! [`Endpoint::try_recv_raw`]): **unreliable and unordered**, at most
//! [`Endpoint::raw_max_len`] bytes; they may be lost and nobody is told.
//!
//! ```no_run
//! # fn main() -> mw_core::Result<()> {
//! let ep = mw_core::Endpoint::init()?;
//! ep.register_handler(1, |ctx, msg| {
//!     let _ = ctx.reply(&[msg.args[0] + 1], msg.payload);
//! })?;
//! ep.barrier()?;
//! if ep.rank() == 0 && ep.size() > 1 {
//!     ep.send(1, 7, b"hello")?;
//!     let reply = ep.am_request(1, 1, &[41], b"ping")?;
//!     assert_eq!(reply.args, [42]);
//! } else if ep.rank() == 1 {
//!     let mut buf = [0u8; 64];
//!     let status = ep.recv(mw_core::ANY_SOURCE, mw_core::ANY_TAG, &mut buf)?;
//!     assert_eq!(&buf[..status.len], b"hello");
//! }
//! ep.barrier()?;
//! ep.finalize()
//! # }
//! ```
//! Same-host peers use shared memory (`shm`: rings for messages, direct
//! load/store/atomics on mapped regions). `unsafe` lives only in
//! `region::raw`, the endpoint lock (`lock`) and the one scoped
//! registration helper in `memory`, each block with its `// SAFETY:`
//! reasoning.
#![deny(unsafe_code)]

mod coll;
mod config;
mod deadline;
mod endpoint;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod get_window;
mod handle;
mod internal;
mod lock;
mod mcast;
mod memory;
mod msg;
mod progress;
mod put_feed;
// Private: `RawMem` views, `AlignedBuf`, `PeerWindow` and `RegionTable` are
// the unsafe island's internals; only its value types are re-exported below.
mod region;
mod request;
mod rma;
mod shm;
mod stats;
mod target;
mod transmit;
mod wait;

pub use coll::{
    AllgatherAlgo, AllreduceAlgo, AlltoallAlgo, BarrierAlgo, BcastAlgo, CollTrials, CollTuning, DType, Element,
    McastAlgo, McastGroup, ReduceAlgo, ReduceOp, Team, VectorAlgo,
};
pub use config::{Config, ProgressMode, ShmCopy, StageStores, TransportChoice, ENV_VARS};
pub use endpoint::{Endpoint, PeerEvent};
pub use error::{Error, Result};
pub use handle::{wait_all, Handle};
pub use internal::RESERVED_HANDLER_BASE;
pub use mcast::McastStats;
pub use memory::Region;
pub use msg::{
    AmContext, AmHandle, AmMessage, AmReplyData, Fifo, FifoKey, MsgStats, OwnedRecv, OwnedSend, RecvHandle, RecvStatus,
    ANY_SOURCE, ANY_TAG,
};
pub use mw_wire::op::{AtomicOp, AtomicWidth, SignalOp};
pub use region::{Access, Arrival, ArrivalKind, RegionKey};
pub use rma::{Cmp, Signal};
pub use stats::CoreStats;

/// The protocol layer's counters (the second half of [`Endpoint::stats`])
/// and its dropped-datagram counts; re-exported deliberately (plain
/// structs of `u64` counters).
pub use mw_proto::{DropCounts, Stats as ProtoStats};
/// Fault injection ([`Config::fault`], `MW_FAULT_*`) and its counters
/// ([`CoreStats::fault`]), and the UDP transport's system-call counters
/// ([`CoreStats::udp_io`]); re-exported deliberately (plain data, no handles).
pub use mw_transport::{FaultConfig, FaultConfigError, FaultStats, IoCounts};
