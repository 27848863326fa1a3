//! memwire: protected, reliable remote memory access for parallel programs on
//! ordinary machines, over UDP between hosts, with no special NIC, kernel
//! module or root.
//!
//! This is the crate users depend on; it re-exports the endpoint layer.
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
#![forbid(unsafe_code)]

pub use mw_core::*;

/// The README's Rust examples, compiled and run as doctests so the program a
/// newcomer copies keeps working.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
