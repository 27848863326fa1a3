//! memwire's C API: `extern "C"` functions named `mw_*` over the endpoint
//! layer (crate `mw-core`), built as `libmemwire.so` and `libmemwire.a`, with
//! `include/memwire.h` generated from this crate by cbindgen
//! (`make header`; `tests/header.rs` fails when the header is stale).
//!
//! Owns: the C types (opaque handles, `#[repr(C)]` structs, integer enums),
//! the one table from `mw_core::Error` to `mw_status` (`status`), the
//! conversion of C pointers into Rust references (`ffi`, the unsafe island),
//! and the ownership rules that let C hold objects whose Rust lifetimes it
//! cannot express. Must not: implement operations (core does), or let a
//! panic unwind into C: every exported body runs inside `status::guard`.
//!
//! Rules the C side relies on (repeated in the header's preamble):
//! - Every fallible function returns `mw_status`; `MW_OK` is 0. Outputs are
//!   written only on success. A NULL pointer where an object or output is
//!   required is `MW_ERR_NULL_POINTER`; an unknown enum value or a bad size
//!   is `MW_ERR_INVALID_ARGUMENT`; a bug caught as a panic is `MW_ERR_INTERNAL`.
//! - Functions that destroy an object take a pointer to the caller's
//!   variable and set it to NULL (`mw_finalize`, `mw_config_free`,
//!   `mw_region_free`, `mw_wait`, `mw_wait_value`, `mw_wait_recv`,
//!   `mw_wait_reply`, `mw_wait_all`, `mw_handle_free`), so calling them
//!   twice on the same variable is an error, not a double free.
//! - A struct that may grow (`mw_stats`) leads with its `size`, set by the
//!   caller; the library writes no byte past it, so new fields are appended
//!   without breaking programs built against an older header.
//! - The endpoint outlives its regions and handles: `mw_finalize` refuses with
//!   `MW_ERR_IN_USE` while any exist.
//! - A nonblocking operation's local buffer must stay valid, and a get's must
//!   stay untouched, until its handle is completed by `mw_wait*` or released
//!   by `mw_handle_free`; registered memory stays valid until `mw_region_free`.
#![allow(unsafe_code)] // the FFI boundary; every dereference is in `ffi`
#![allow(non_camel_case_types)] // C names: mw_endpoint, mw_status, ...

// Declared in the order the header presents them (blank lines keep rustfmt
// from sorting them).
mod version;

mod status;

mod endpoint;

mod config;

mod stats;

mod region;

mod rma;

mod atomic;

mod handle;

mod msg;

mod am;

mod fifo;

mod team;

mod coll;

mod mcast;

mod ffi;

use std::ffi::c_void;

pub use am::{mw_am_context, mw_am_handler, mw_am_message, mw_am_reply_data, MW_AM_MAX_ARGS};
pub use coll::{mw_dtype, mw_op};
pub use config::{
    mw_config, mw_progress_mode, mw_transport_choice, MW_PROGRESS_AUTO, MW_PROGRESS_INLINE, MW_PROGRESS_THREAD,
    MW_TRANSPORT_AUTO, MW_TRANSPORT_UDP,
};
pub use endpoint::{mw_endpoint, mw_peer_event, mw_peer_event_kind, MW_PEER_DOWN, MW_PEER_RESTARTED};
pub use fifo::{mw_fifo, mw_fifo_watermark};
pub use handle::mw_handle;
pub use mcast::mw_mcast_group;
pub use msg::{mw_recv_status, MW_ANY_SOURCE, MW_ANY_TAG, MW_CONTEXT_DEFAULT};
pub use region::mw_region;
pub use stats::mw_stats;
pub use status::mw_status;
pub use team::{mw_team, MW_TEAM_NONE};
pub use version::{MW_VERSION, MW_VERSION_MAJOR, MW_VERSION_MINOR, MW_VERSION_PATCH};

/// A region's key: names the region in remote operations, as
/// `(rank, key, offset)`. Keys are random; 0 is never a valid key.
pub type mw_key = u64;

/// Rights a region grants to remote operations: an OR of `MW_ACCESS_*`.
pub type mw_access = u32;
/// No remote access (the owner only uses the memory locally).
pub const MW_ACCESS_NONE: mw_access = 0;
/// Remote reads: get, get_strided, get_value.
pub const MW_ACCESS_READ: mw_access = 1;
/// Remote writes: put and its variants (put_signal's signal word too).
pub const MW_ACCESS_WRITE: mw_access = 2;
/// Remote atomics, every `mw_*_u32`/`mw_*_u64` and `mw_atomic_nb` operation
/// (atomic loads and stores included).
pub const MW_ACCESS_ATOMIC: mw_access = 4;
/// Reads and writes.
pub const MW_ACCESS_READ_WRITE: mw_access = 3;
/// Every right.
pub const MW_ACCESS_ALL: mw_access = 7;

/// Comparison for `mw_wait_until`: one of `MW_CMP_*`.
pub type mw_cmp = u32;
/// Equal.
pub const MW_CMP_EQ: mw_cmp = 0;
/// Not equal.
pub const MW_CMP_NE: mw_cmp = 1;
/// Greater than.
pub const MW_CMP_GT: mw_cmp = 2;
/// Greater than or equal.
pub const MW_CMP_GE: mw_cmp = 3;
/// Less than.
pub const MW_CMP_LT: mw_cmp = 4;
/// Less than or equal.
pub const MW_CMP_LE: mw_cmp = 5;

/// What a put_signal does to its signal word: one of `MW_SIGNAL_*`.
pub type mw_signal_op = u32;
/// `signal = value`.
pub const MW_SIGNAL_SET: mw_signal_op = 1;
/// `signal += value` (wrapping), so several senders can count arrivals.
pub const MW_SIGNAL_ADD: mw_signal_op = 2;

/// Remote atomic operation for `mw_atomic_nb`: one of `MW_ATOMIC_*`.
pub type mw_atomic_op = u32;
/// `word += operand` (wrapping).
pub const MW_ATOMIC_ADD: mw_atomic_op = 1;
/// `word = operand`.
pub const MW_ATOMIC_SWAP: mw_atomic_op = 2;
/// `if (word == compare) word = operand`.
pub const MW_ATOMIC_COMPARE_SWAP: mw_atomic_op = 3;
/// `word &= operand`.
pub const MW_ATOMIC_AND: mw_atomic_op = 4;
/// `word |= operand`.
pub const MW_ATOMIC_OR: mw_atomic_op = 5;
/// `word ^= operand`.
pub const MW_ATOMIC_XOR: mw_atomic_op = 6;
/// Read the word (always fetches).
pub const MW_ATOMIC_LOAD: mw_atomic_op = 7;
/// `word = operand`, without fetching.
pub const MW_ATOMIC_STORE: mw_atomic_op = 8;

/// Width of an atomic's target word, in bytes: `MW_WIDTH_U32` or `MW_WIDTH_U64`.
pub type mw_width = u32;
/// A 4-byte word, 4-byte aligned at the target.
pub const MW_WIDTH_U32: mw_width = 4;
/// An 8-byte word, 8-byte aligned at the target.
pub const MW_WIDTH_U64: mw_width = 8;

/// Kind of a remote operation recorded in an arrival log: one of `MW_ARRIVAL_*`.
pub type mw_arrival_kind = u32;
/// A put (any contiguous form, including put_value).
pub const MW_ARRIVAL_PUT: mw_arrival_kind = 1;
/// The data part of a put_signal.
pub const MW_ARRIVAL_PUT_SIGNAL: mw_arrival_kind = 2;
/// The signal word of a put_signal.
pub const MW_ARRIVAL_SIGNAL: mw_arrival_kind = 3;
/// A strided put.
pub const MW_ARRIVAL_PUT_STRIDED: mw_arrival_kind = 4;
/// A vectored put.
pub const MW_ARRIVAL_PUT_IOV: mw_arrival_kind = 5;
/// A masked put.
pub const MW_ARRIVAL_PUT_MASKED: mw_arrival_kind = 6;
/// A put through an address register.
pub const MW_ARRIVAL_REGISTER_PUT: mw_arrival_kind = 7;
/// An atomic operation.
pub const MW_ARRIVAL_ATOMIC: mw_arrival_kind = 8;
/// A get (remote read).
pub const MW_ARRIVAL_GET: mw_arrival_kind = 9;

/// The signal half of a put_signal: after the data has landed, the 64-bit
/// word at `offset` (8-byte aligned) of region `key` at the same target rank
/// is set to or incremented by `value`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mw_signal {
    /// Region holding the signal word.
    pub key: mw_key,
    /// Offset of the signal word in that region (8-byte aligned).
    pub offset: u64,
    /// `MW_SIGNAL_SET` or `MW_SIGNAL_ADD`.
    pub op: mw_signal_op,
    /// Value to set or add.
    pub value: u64,
}

/// One segment of `mw_put_iov`: `len` bytes from `data` land at `offset`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mw_iov {
    /// Offset in the target region.
    pub offset: u64,
    /// Local source bytes (may be NULL when `len` is 0).
    pub data: *const c_void,
    /// Number of bytes.
    pub len: usize,
}

/// One entry of a region's arrival log (Cenju-4's log buffer).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mw_arrival {
    /// What arrived: one of `MW_ARRIVAL_*`.
    pub kind: mw_arrival_kind,
    /// The initiating rank.
    pub source: u32,
    /// First byte touched.
    pub offset: u64,
    /// Bytes touched (the whole extent for strided forms).
    pub len: u64,
}
