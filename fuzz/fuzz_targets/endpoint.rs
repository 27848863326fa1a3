//! Fuzz target: arbitrary datagrams into one endpoint with registered
//! regions — the protocol endpoint, the operation executor and the reply
//! path, as the progress engine runs them (`mw_core::fuzzing`). Nothing may
//! panic, and no byte outside a writable region may change (guard bytes
//! surround every region; a read-only and a no-access region must stay
//! intact).
//!
//! Input: `[mode, (ctl, len_lo, len_hi, datagram…)*]`; see
//! `mw_core::fuzzing::run`. Record `ctl` bit 0 asks the harness to make the
//! header acceptable (job id, ranks, epochs, length, MAC), so mutations reach
//! the operation layer instead of dying at the header checks.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run endpoint corpus/endpoint seeds/endpoint`.
//! The same check runs on stable over the seed corpus in
//! `crates/core/tests/fuzz_seeds.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mw_core::fuzzing::run(data);
});
