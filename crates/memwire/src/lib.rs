//! memwire: protected, reliable remote memory access for parallel programs on
//! ordinary machines, over UDP between hosts, with no special NIC, kernel
//! module or root.
//!
//! This is the crate users depend on; it re-exports the endpoint layer
//! (`mw-core`) and adds nothing of its own. Owns: the public surface and its
//! documentation, including the compile-time guarantees below. Must not:
//! contain protocol, transport or `unsafe` code (it forbids `unsafe`), or
//! expose internals `mw-core` keeps private.
//!
//! ```no_run
//! use memwire::{Access, Endpoint};
//!
//! fn main() -> memwire::Result<()> {
//!     let ep = Endpoint::init()?; // joins the job that `mwrun -n 4 prog` started
//!     work(&ep)?; // regions borrow the endpoint, so they are dropped before finalize
//!     ep.finalize()
//! }
//!
//! fn work(ep: &Endpoint) -> memwire::Result<()> {
//!     let (me, n) = (ep.rank(), ep.size());
//!     // Word 0: a counter on rank 0; then one slot per rank.
//!     let region = ep.alloc_symmetric(8 + 8 * n as usize, Access::ALL)?;
//!     let key = region.key(); // the same key on every rank
//!     let right = (me + 1) % n;
//!     ep.put(right, key, 8 + 8 * u64::from(me), &u64::from(me).to_le_bytes())?;
//!     ep.fetch_add_u64(0, key, 0, 1)?;
//!     ep.barrier()?;
//!     let mut slot = [0u8; 8];
//!     ep.get(right, key, 8 + 8 * u64::from(me), &mut slot)?;
//!     assert_eq!(u64::from_le_bytes(slot), u64::from(me));
//!     if me == 0 {
//!         assert_eq!(region.load_u64(0)?, u64::from(n)); // every rank added once
//!     }
//!     Ok(())
//! }
//! ```
//!
//! # Safety by construction
//!
//! Remote operations read and write memory while your program runs, so
//! memwire makes the compiler check who may touch that memory, and when:
//! a region borrows the memory it exposes (and the endpoint), and a
//! nonblocking operation borrows its local buffer until it completes.
//! Misuse fails to compile instead of corrupting memory. Each rule is shown
//! twice: the correct program, then the same program with one mistake,
//! which must not compile (a `compile_fail` doctest). Only a nightly
//! rustdoc checks the error code each one names, so `make unit` also runs
//! `cargo +nightly test --doc -p memwire`: each fails for the stated
//! reason, not a typo. In these examples `ep` is the endpoint and `key`
//! names a region on rank 1.
//!
//! **A nonblocking put borrows its source until the handle is done.** The
//! data may be in flight until the handle is waited on (or dropped, which
//! lets the operation finish unobserved).
//!
//! ```no_run
//! # fn demo(ep: &memwire::Endpoint, key: memwire::RegionKey) -> memwire::Result<()> {
//! let mut data = vec![1u8; 4096];
//! let handle = ep.put_nb(1, key, 0, &data)?;
//! handle.wait()?;
//! data[0] = 2; // the put is complete: the buffer is ours again
//! drop(data);
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0502
//! # fn demo(ep: &memwire::Endpoint, key: memwire::RegionKey) -> memwire::Result<()> {
//! let mut data = vec![1u8; 4096];
//! let handle = ep.put_nb(1, key, 0, &data)?;
//! data[0] = 2; // error[E0502]: `data` is still lent to the put
//! handle.wait()?;
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0505
//! # fn demo(ep: &memwire::Endpoint, key: memwire::RegionKey) -> memwire::Result<()> {
//! let data = vec![1u8; 4096];
//! let handle = ep.put_nb(1, key, 0, &data)?;
//! drop(data); // error[E0505]: cannot free `data` while the put borrows it
//! handle.wait()?;
//! # Ok(()) }
//! ```
//!
//! **A nonblocking get borrows its destination until the handle is done.**
//! The bytes are there once `wait` returns `Ok`; before that, reading or
//! writing the buffer does not compile.
//!
//! ```no_run
//! # fn demo(ep: &memwire::Endpoint, key: memwire::RegionKey) -> memwire::Result<()> {
//! let mut out = vec![0u8; 4096];
//! let handle = ep.get_nb(1, key, 0, &mut out)?;
//! handle.wait()?;
//! let first = out[0]; // filled
//! # let _ = first; Ok(()) }
//! ```
//!
//! ```compile_fail,E0502
//! # fn demo(ep: &memwire::Endpoint, key: memwire::RegionKey) -> memwire::Result<()> {
//! let mut out = vec![0u8; 4096];
//! let handle = ep.get_nb(1, key, 0, &mut out)?;
//! let first = out[0]; // error[E0502]: `out` is still lent to the get
//! handle.wait()?;
//! # let _ = first; Ok(()) }
//! ```
//!
//! **A region cannot outlive its endpoint.** Regions borrow the endpoint,
//! so they are dropped (deregistered) before `finalize`, which takes the
//! endpoint by value, and cannot be returned past the endpoint's scope.
//!
//! ```no_run
//! use memwire::{Access, Endpoint, Region};
//!
//! fn scratch(ep: &Endpoint) -> memwire::Result<Region<'_>> {
//!     ep.alloc_shared(64, Access::ALL) // lives as long as the caller's endpoint
//! }
//!
//! fn main() -> memwire::Result<()> {
//!     let ep = Endpoint::init()?;
//!     let region = scratch(&ep)?;
//!     region.write(0, b"hello")?;
//!     drop(region); // deregistered
//!     ep.finalize()
//! }
//! ```
//!
//! ```compile_fail,E0505
//! use memwire::{Access, Endpoint};
//!
//! fn main() -> memwire::Result<()> {
//!     let ep = Endpoint::init()?;
//!     let region = ep.alloc_shared(64, Access::ALL)?;
//!     ep.finalize()?; // error[E0505]: cannot move out of `ep` while `region` borrows it
//!     region.write(0, b"hello")
//! }
//! ```
//!
//! ```compile_fail,E0515
//! use memwire::{Access, Endpoint, Region};
//!
//! fn scratch() -> memwire::Result<Region<'static>> {
//!     let ep = Endpoint::init()?;
//!     ep.alloc_shared(64, Access::ALL) // error[E0515]: the region would outlive `ep`
//! }
//! # fn main() {}
//! ```
//!
//! **Registered memory is remote memory only inside the closure.**
//! [`Endpoint::with_registered`] lends your buffer to remote ranks for the
//! duration of a closure and deregisters it before the borrow ends (also
//! on panic). The region cannot escape the closure, and your own code cannot
//! touch the buffer behind the region's back while it is registered.
//!
//! ```no_run
//! # fn demo(ep: &memwire::Endpoint) -> memwire::Result<()> {
//! use memwire::Access;
//!
//! let mut buf = vec![0u8; 4096];
//! let key = ep.with_registered(&mut buf, Access::READ_WRITE, |region| {
//!     // Remote ranks access `region` here (e.g. until a barrier).
//!     region.write(0, b"local write, through the region")?;
//!     Ok::<_, memwire::Error>(region.key())
//! })??;
//! buf[0] = 1; // deregistered: the buffer is ours again
//! # let _ = key; Ok(()) }
//! ```
//!
//! ```compile_fail,E0521
//! # fn demo(ep: &memwire::Endpoint) -> memwire::Result<()> {
//! use memwire::Access;
//!
//! let mut buf = vec![0u8; 4096];
//! let mut escaped = None;
//! ep.with_registered(&mut buf, Access::READ_WRITE, |region| {
//!     escaped = Some(region); // error[E0521]: the region escapes the closure
//! })?;
//! # drop(escaped); Ok(()) }
//! ```
//!
//! ```compile_fail,E0499
//! # fn demo(ep: &memwire::Endpoint) -> memwire::Result<()> {
//! use memwire::Access;
//!
//! let mut buf = vec![0u8; 4096];
//! ep.with_registered(&mut buf, Access::READ_WRITE, |region| {
//!     buf[0] = 1; // error[E0499]: `buf` is lent to the registration
//!     region.key()
//! })?;
//! # Ok(()) }
//! ```
//!
//! **A nonblocking receive borrows its buffer until the handle is done.**
//!
//! ```no_run
//! # fn demo(ep: &memwire::Endpoint) -> memwire::Result<()> {
//! let mut buf = vec![0u8; 64];
//! let handle = ep.irecv(0, 7, &mut buf)?;
//! let status = handle.wait()?;
//! buf[status.len..].fill(0); // the message is in `buf[..status.len]`
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0499
//! # fn demo(ep: &memwire::Endpoint) -> memwire::Result<()> {
//! let mut buf = vec![0u8; 64];
//! let handle = ep.irecv(0, 7, &mut buf)?;
//! buf.fill(0); // error[E0499]: `buf` is still lent to the receive
//! handle.wait()?;
//! # Ok(()) }
//! ```
//!
//! Leaking a handle (`std::mem::forget`) is safe too: a put's data is
//! copied when it is issued, and fetched data is staged by the library and
//! copied into your buffer only by `wait`, while the borrow is alive, so the
//! library never writes to memory you have since freed. The C API cannot
//! express these borrows; its rules are written on each function, and Rust
//! code that registers memory it cannot lend by borrow uses the `unsafe`
//! [`Endpoint::register_raw`].
#![forbid(unsafe_code)]

// The public surface, item by item: adding to `mw-core` does not add to it.
// Internals (region views and buffers, peer windows, the region table, the
// protocol and transport crates) stay behind; internal crates' types that
// appear in public signatures are the plain-data ones named here.

// Endpoint, life cycle, configuration.
pub use mw_core::{Config, Endpoint, PeerEvent, ProgressMode, ShmCopy, StageStores, TransportChoice, ENV_VARS};
// Errors.
pub use mw_core::{Error, Result};
// Regions and one-sided operations.
pub use mw_core::{
    wait_all, Access, Arrival, ArrivalKind, AtomicOp, AtomicWidth, Cmp, Handle, Region, RegionKey, Signal, SignalOp,
};
// Messaging: tagged messages, active messages, FIFOs.
pub use mw_core::{
    AmContext, AmHandle, AmMessage, AmReplyData, Fifo, FifoKey, OwnedRecv, OwnedSend, RecvHandle, RecvStatus,
    ANY_SOURCE, ANY_TAG, RESERVED_HANDLER_BASE,
};
// Teams and collectives.
pub use mw_core::{
    AllgatherAlgo, AllreduceAlgo, AlltoallAlgo, BarrierAlgo, BcastAlgo, CollTrials, CollTuning, DType, Element,
    McastAlgo, McastGroup, ReduceAlgo, ReduceOp, Team, VectorAlgo,
};
// Counters and fault injection.
pub use mw_core::{CoreStats, FaultConfig, FaultStats, IoCounts, McastStats, MsgStats, ProtoStats};

/// The README's Rust examples, compiled and run as doctests so the program a
/// newcomer copies keeps working.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
