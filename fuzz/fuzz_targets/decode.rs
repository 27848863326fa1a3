//! Fuzz target: decode any bytes as a packet header (then its payload as an
//! operation) and as an operation message. Whatever decodes must re-emit to
//! the very same bytes and re-parse to an equal value; nothing may panic.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run decode corpus/decode seeds/decode`.
//! The same check runs on stable over the seed corpus in
//! `crates/wire/tests/fuzz_seeds.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/wire/tests/support/decode_check.rs"]
mod decode_check;

fuzz_target!(|data: &[u8]| {
    decode_check::check(data);
});
