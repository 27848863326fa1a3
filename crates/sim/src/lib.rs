//! A deterministic network simulator for memwire's protocol, and the seeded
//! scenarios that test it.
//!
//! Owns: a virtual clock and an in-memory network of 2..16
//! [`mw_proto::Endpoint`]s ([`net`]) with per-link loss, duplication,
//! reordering, jitter and a bandwidth cap, all drawn from one seeded
//! generator ([`rng`]); workloads whose message contents derive from
//! (sender, receiver, index) so every delivery is checked byte for byte
//! ([`check`]); crash, restart and garbage injection; and the scenario
//! families with their replay entry point ([`scenario`]); and multicast
//! transfers, one root to many members, with their own families ([`mcast`]).
//!
//! Must not: be a dependency of anything but tests and benchmarks, or read
//! real clocks: a seed and a family name determine a run completely, so a
//! failure replays exactly with
//! `MW_SIM_SEED=<seed> MW_SIM_SCENARIO=<family> cargo test -p mw-sim --test scenarios -- replay --nocapture`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod check;
mod driver;
pub mod mcast;
pub mod net;
pub mod rng;
pub mod scenario;

pub use net::{LinkConfig, NetStats, Network};
pub use rng::Rng;
pub use scenario::{replay_from_env, run, run_family, Crash, Report, Scenario, Workload, FAMILIES};
