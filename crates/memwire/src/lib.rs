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
//! # Deadlines
//!
//! No blocking call waits forever for something another rank's library
//! owes: such a wait (a completion, `flush`, `quiet`, an active message's
//! reply) ends with [`Error::Timeout`] after `Config::op_timeout`
//! (`MW_OP_TIMEOUT_MS`, 60 s by default), and every wait ends with
//! [`Error::PeerUnreachable`] when the awaited rank dies. A wait paced by
//! another rank's application (a receive, a FIFO pop, a barrier or
//! collective) lasts until that rank acts, because ranks legitimately
//! compute for minutes between matching calls, unless `Config::wait_timeout`
//! (`MW_WAIT_TIMEOUT_MS`) bounds it; and most blocking calls
//! have a `*_timeout` form with a deadline of the caller's
//! ([`Endpoint::recv_timeout`], [`RecvHandle::wait_timeout`],
//! [`Handle::wait_timeout`], [`Fifo::pop_timeout`], …). A receive that
//! times out is cancelled: nothing is written into its buffer after the
//! call returns, and the sender of a large message that was being pulled
//! into it gets [`Error::Cancelled`]. A team collective that times out
//! leaves the team broken ([`Error::TeamBroken`]); [`Endpoint::barrier`]
//! continues where it stopped on the next call. `docs/guarantees.md`
//! ("Deadlines") has the table of every wait.
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
//! **Region memory is copied, never lent as a slice.** Same-host peers
//! store into a region directly (direct puts, put_signal, atomics), without
//! taking this rank's lock, so safe code reaches a region's bytes only by
//! copying them with atomic loads and stores ([`Region::read`],
//! [`Region::write`], [`Region::fill`], [`Region::load_u64`]): a racing
//! remote store may be seen in part, but never makes a data race. The
//! `&mut [u8]` view, [`Region::with_bytes`], is `unsafe`, its contract
//! written on it.
//!
//! ```no_run
//! # fn demo(region: &memwire::Region<'_>) -> memwire::Result<()> {
//! region.fill(0, region.len(), 0)?;
//! region.write(8, b"copied in")?;
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0133
//! # fn demo(region: &memwire::Region<'_>) {
//! region.with_bytes(|bytes| bytes.fill(0)); // error[E0133]: `with_bytes` is unsafe
//! # }
//! ```
//!
//! **The internals stay inside.** This crate re-exports an explicit list
//! of items; the raw views of region memory, the buffers behind them, the
//! mappings of peers' memory and the region table are private to `mw-core`,
//! so no safe path leads to a pointer that outlives its memory.
//!
//! ```compile_fail,E0433
//! let view = memwire::region::AlignedBuf::zeroed(64); // error[E0433]: no `region` in `memwire`
//! ```
//!
//! ```compile_fail,E0433
//! let window = memwire::PeerWindow::open(1, 3, 4096); // error[E0433]: no `PeerWindow` in `memwire`
//! ```
//!
//! ```compile_fail,E0603
//! // Not through the endpoint crate either: its `region` module is private.
//! use mw_core::region::{AlignedBuf, PeerWindow, RawMem, RegionTable}; // error[E0603]
//! ```
//!
//! Leaking a handle (`std::mem::forget`) is safe too: a put's data is
//! copied when it is issued, and fetched data is staged by the library and
//! copied into your buffer only by `wait`, while the borrow is alive, so the
//! library never writes to memory you have since freed. The C API cannot
//! express these borrows; its rules are written on each function, and Rust
//! code that registers memory it cannot lend by borrow uses the `unsafe`
//! [`Endpoint::register_raw`].
//!
//! # Threads
//!
//! Every public type is `Send` and `Sync` (pinned by
//! `tests/thread_safety.rs`, which fails to build if one stops being so):
//!
//! | type | shared between threads (`Sync`) means |
//! |---|---|
//! | [`Endpoint`] | any thread may call any method; calls take turns on one internal lock (a blocking wait releases it while it waits) |
//! | [`Region`] | `read`, `write`, `fill` take the endpoint lock; `load_u64`/`store_u64` are atomics; dropping deregisters under the lock |
//! | [`Team`] | its collectives take `&mut self`, so one thread at a time runs them (the compiler enforces it); several teams may run collectives at once from different threads; `&Team` only reads its rank and size |
//! | [`Handle`], [`RecvHandle`], [`AmHandle`], [`OwnedSend`], [`OwnedRecv`] | completion is `wait(self)`/`test(&mut self)`: one owner; a handle may be moved to another thread and completed there |
//! | [`Fifo`], [`McastGroup`] | as [`Region`]: methods lock the endpoint |
//! | [`AmContext`], [`AmMessage`] | lent to a handler, which runs with the endpoint locked |
//! | values ([`Config`], [`Error`], keys, enums, counters) | plain data |
//!
//! Regions, teams and handles borrow the endpoint, so they move only into
//! scoped threads ([`std::thread::scope`]), never past the endpoint.
//!
//! ```no_run
//! # fn demo(ep: &memwire::Endpoint) -> memwire::Result<()> {
//! let region = ep.alloc_shared(64, memwire::Access::ALL)?;
//! let mut team = ep.team_world()?;
//! std::thread::scope(|s| {
//!     s.spawn(|| team.barrier()); // one thread runs the team's collectives
//!     s.spawn(|| region.write(0, b"x")); // others share the region
//!     s.spawn(|| region.load_u64(8));
//! });
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0499
//! # fn demo(ep: &memwire::Endpoint) -> memwire::Result<()> {
//! let mut team = ep.team_world()?;
//! std::thread::scope(|s| {
//!     s.spawn(|| team.barrier());
//!     s.spawn(|| team.barrier()); // error[E0499]: the team is lent to the first thread
//! });
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0521
//! # fn demo(ep: &memwire::Endpoint) -> memwire::Result<()> {
//! let region = ep.alloc_shared(64, memwire::Access::ALL)?;
//! // error[E0521]: the region borrows `ep`, which a detached thread may outlive
//! std::thread::spawn(move || region.write(0, b"x"));
//! # Ok(()) }
//! ```
//!
//! # Completion, progress and what remains by design
//!
//! What each call guarantees when it returns (completion at the initiator
//! or at the target), what "nonblocking" means over UDP and over shared
//! memory, and the caveats that remain by design are written down in
//! `docs/guarantees.md` in the repository.
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
pub use mw_core::{
    CoreStats, DropCounts, FaultConfig, FaultConfigError, FaultStats, IoCounts, McastStats, MsgStats, ProtoStats,
};

/// The README's Rust examples, compiled and run as doctests so the program a
/// newcomer copies keeps working.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
