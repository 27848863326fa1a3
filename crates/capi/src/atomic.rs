//! Remote atomics as C sees them: every operation on u32 and u64 words,
//! blocking (one function per operation and width, the old value through an
//! out-parameter) and nonblocking (`mw_atomic_nb`, any operation).
//!
//! Owns: validating atomic arguments from C. Must not: execute anything
//! itself; the endpoint executes each atomic exactly once at the target.
//!
//! The target word must be aligned to its width (`MW_ERR_MISALIGNED`
//! otherwise) and the region must grant `MW_ACCESS_ATOMIC`, for atomic
//! loads and stores too (`MW_ERR_NO_PERMISSION` otherwise).

use mw_core::{AtomicOp, AtomicWidth};

use crate::endpoint::{endpoint, mw_endpoint};
use crate::ffi;
use crate::handle::{self, mw_handle};
use crate::region::key;
use crate::status::{guard, mw_status, Failure};
use crate::*;

fn op_from(op: mw_atomic_op) -> Result<AtomicOp, Failure> {
    Ok(match op {
        MW_ATOMIC_ADD => AtomicOp::Add,
        MW_ATOMIC_SWAP => AtomicOp::Swap,
        MW_ATOMIC_COMPARE_SWAP => AtomicOp::CompareSwap,
        MW_ATOMIC_AND => AtomicOp::And,
        MW_ATOMIC_OR => AtomicOp::Or,
        MW_ATOMIC_XOR => AtomicOp::Xor,
        MW_ATOMIC_LOAD => AtomicOp::Load,
        MW_ATOMIC_STORE => AtomicOp::Store,
        _ => return Err(Failure::invalid("unknown MW_ATOMIC_* value")),
    })
}

fn width_from(width: mw_width) -> Result<AtomicWidth, Failure> {
    Ok(match width {
        MW_WIDTH_U32 => AtomicWidth::U32,
        MW_WIDTH_U64 => AtomicWidth::U64,
        _ => return Err(Failure::invalid("unknown MW_WIDTH_* value")),
    })
}

/// A fetching atomic: runs `op` and stores the old value through `old`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
unsafe fn fetching<T: Copy>(
    ep: *mut mw_endpoint,
    old: *mut T,
    op: impl FnOnce(&mw_core::Endpoint) -> mw_core::Result<T>,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(old, "old")?) };
        out.set(op(&owner.ep)?);
        Ok(())
    })
}

/// A non-fetching atomic.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
unsafe fn plain(ep: *mut mw_endpoint, op: impl FnOnce(&mw_core::Endpoint) -> mw_core::Result<()>) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        Ok(op(&owner.ep)?)
    })
}

/// Starts an atomic `op` (`MW_ATOMIC_*`) on the `width`-byte word
/// (`MW_WIDTH_*`) at `offset` of region `key` at `rank` and stores its
/// handle in `*handle`. `operand` is the value to add/swap/store/combine,
/// `compare` the expected value for `MW_ATOMIC_COMPARE_SWAP`. Arguments an
/// op does not use are ignored on every path, whatever their value:
/// `compare` for every op but `MW_ATOMIC_COMPARE_SWAP`, `operand` for
/// `MW_ATOMIC_LOAD`. For a 32-bit word the arguments the op uses must fit in
/// 32 bits (`MW_ERR_INVALID_ARGUMENT` otherwise). With `fetch` (always for
/// `MW_ATOMIC_LOAD`), consume the handle with `mw_wait_value` to get the
/// word's previous value; otherwise with `mw_wait`. An atomic the target
/// refuses (unknown key, out of bounds, no atomic right, misaligned) fails
/// its handle with that error; it never completes as `MW_OK` without
/// having happened.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `handle` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_atomic_nb(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    op: mw_atomic_op,
    width: mw_width,
    operand: u64,
    compare: u64,
    fetch: bool,
    handle: *mut *mut mw_handle,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(handle, "handle")?) };
        let (op, width) = (op_from(op)?, width_from(width)?);
        let h = owner.ep.atomic_nb(rank, self::key(key), offset, op, width, operand, compare, fetch)?;
        handle::give(owner, h, out);
        Ok(())
    })
}

/// Atomically adds `value` (wrapping) to the u64 word
/// at `offset` of region `key` at `rank`; stores the word's previous value
/// in `*old`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fetch_add_u64(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u64,
    old: *mut u64,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { fetching(ep, old, |e| e.fetch_add_u64(rank, self::key(key), offset, value)) }
}

/// Atomically adds `value` (wrapping) to the u64 word
/// at `offset` of region `key` at `rank`; returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_add_u64(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u64,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { plain(ep, |e| e.add_u64(rank, self::key(key), offset, value)) }
}

/// Atomically replaces the u64 word with `value` at `offset` of region `key` at `rank`; stores the word's previous
/// value in `*old`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_swap_u64(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u64,
    old: *mut u64,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { fetching(ep, old, |e| e.swap_u64(rank, self::key(key), offset, value)) }
}

/// Atomically sets the u64 word at `offset` of region `key` at `rank` to
/// `desired` if it equals `expected`; stores the word's previous value in
/// `*old` (the swap happened when `*old == expected`).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_compare_swap_u64(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    expected: u64,
    desired: u64,
    old: *mut u64,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { fetching(ep, old, |e| e.compare_swap_u64(rank, self::key(key), offset, expected, desired)) }
}

/// Atomically does `word &= value` on the u64 word
/// at `offset` of region `key` at `rank`; stores the word's previous value
/// in `*old`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fetch_and_u64(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u64,
    old: *mut u64,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe {
        fetching(ep, old, |e| e.fetch_bitwise(rank, self::key(key), offset, AtomicOp::And, AtomicWidth::U64, value))
    }
}

/// Atomically does `word &= value` on the u64 word
/// at `offset` of region `key` at `rank`; returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_and_u64(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u64,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { plain(ep, |e| e.bitwise(rank, self::key(key), offset, AtomicOp::And, AtomicWidth::U64, value)) }
}

/// Atomically does `word |= value` on the u64 word
/// at `offset` of region `key` at `rank`; stores the word's previous value
/// in `*old`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fetch_or_u64(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u64,
    old: *mut u64,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe {
        fetching(ep, old, |e| e.fetch_bitwise(rank, self::key(key), offset, AtomicOp::Or, AtomicWidth::U64, value))
    }
}

/// Atomically does `word |= value` on the u64 word
/// at `offset` of region `key` at `rank`; returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_or_u64(ep: *mut mw_endpoint, rank: u32, key: mw_key, offset: u64, value: u64) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { plain(ep, |e| e.bitwise(rank, self::key(key), offset, AtomicOp::Or, AtomicWidth::U64, value)) }
}

/// Atomically does `word ^= value` on the u64 word
/// at `offset` of region `key` at `rank`; stores the word's previous value
/// in `*old`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fetch_xor_u64(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u64,
    old: *mut u64,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe {
        fetching(ep, old, |e| e.fetch_bitwise(rank, self::key(key), offset, AtomicOp::Xor, AtomicWidth::U64, value))
    }
}

/// Atomically does `word ^= value` on the u64 word
/// at `offset` of region `key` at `rank`; returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_xor_u64(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u64,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { plain(ep, |e| e.bitwise(rank, self::key(key), offset, AtomicOp::Xor, AtomicWidth::U64, value)) }
}

/// Atomically reads the u64 word at `offset` of region `key` at `rank` into
/// `*value`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `value` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_atomic_load_u64(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: *mut u64,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { fetching(ep, value, |e| e.atomic_load(rank, self::key(key), offset, AtomicWidth::U64)) }
}

/// Atomically writes `value` to the u64 word
/// at `offset` of region `key` at `rank`; returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_atomic_store_u64(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u64,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { plain(ep, |e| e.atomic_store(rank, self::key(key), offset, AtomicWidth::U64, value)) }
}

/// Atomically adds `value` (wrapping) to the u32 word
/// at `offset` of region `key` at `rank`; stores the word's previous value
/// in `*old`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fetch_add_u32(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u32,
    old: *mut u32,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { fetching(ep, old, |e| e.fetch_add_u32(rank, self::key(key), offset, value)) }
}

/// Atomically adds `value` (wrapping) to the u32 word
/// at `offset` of region `key` at `rank`; returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_add_u32(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u32,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { plain(ep, |e| e.add_u32(rank, self::key(key), offset, value)) }
}

/// Atomically replaces the u32 word with `value` at `offset` of region `key` at `rank`; stores the word's previous
/// value in `*old`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_swap_u32(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u32,
    old: *mut u32,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { fetching(ep, old, |e| e.swap_u32(rank, self::key(key), offset, value)) }
}

/// Atomically sets the u32 word at `offset` of region `key` at `rank` to
/// `desired` if it equals `expected`; stores the word's previous value in
/// `*old` (the swap happened when `*old == expected`).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_compare_swap_u32(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    expected: u32,
    desired: u32,
    old: *mut u32,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { fetching(ep, old, |e| e.compare_swap_u32(rank, self::key(key), offset, expected, desired)) }
}

/// Atomically does `word &= value` on the u32 word
/// at `offset` of region `key` at `rank`; stores the word's previous value
/// in `*old`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fetch_and_u32(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u32,
    old: *mut u32,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe {
        fetching(ep, old, |e| {
            e.fetch_bitwise(rank, self::key(key), offset, AtomicOp::And, AtomicWidth::U32, u64::from(value))
                .map(|v| v as u32)
        })
    }
}

/// Atomically does `word &= value` on the u32 word
/// at `offset` of region `key` at `rank`; returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_and_u32(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u32,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { plain(ep, |e| e.bitwise(rank, self::key(key), offset, AtomicOp::And, AtomicWidth::U32, u64::from(value))) }
}

/// Atomically does `word |= value` on the u32 word
/// at `offset` of region `key` at `rank`; stores the word's previous value
/// in `*old`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fetch_or_u32(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u32,
    old: *mut u32,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe {
        fetching(ep, old, |e| {
            e.fetch_bitwise(rank, self::key(key), offset, AtomicOp::Or, AtomicWidth::U32, u64::from(value))
                .map(|v| v as u32)
        })
    }
}

/// Atomically does `word |= value` on the u32 word
/// at `offset` of region `key` at `rank`; returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_or_u32(ep: *mut mw_endpoint, rank: u32, key: mw_key, offset: u64, value: u32) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { plain(ep, |e| e.bitwise(rank, self::key(key), offset, AtomicOp::Or, AtomicWidth::U32, u64::from(value))) }
}

/// Atomically does `word ^= value` on the u32 word
/// at `offset` of region `key` at `rank`; stores the word's previous value
/// in `*old`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `old` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fetch_xor_u32(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u32,
    old: *mut u32,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe {
        fetching(ep, old, |e| {
            e.fetch_bitwise(rank, self::key(key), offset, AtomicOp::Xor, AtomicWidth::U32, u64::from(value))
                .map(|v| v as u32)
        })
    }
}

/// Atomically does `word ^= value` on the u32 word
/// at `offset` of region `key` at `rank`; returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_xor_u32(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u32,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { plain(ep, |e| e.bitwise(rank, self::key(key), offset, AtomicOp::Xor, AtomicWidth::U32, u64::from(value))) }
}

/// Atomically reads the u32 word at `offset` of region `key` at `rank` into
/// `*value`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `value` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_atomic_load_u32(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: *mut u32,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { fetching(ep, value, |e| e.atomic_load(rank, self::key(key), offset, AtomicWidth::U32).map(|v| v as u32)) }
}

/// Atomically writes `value` to the u32 word
/// at `offset` of region `key` at `rank`; returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_atomic_store_u32(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u32,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { plain(ep, |e| e.atomic_store(rank, self::key(key), offset, AtomicWidth::U32, u64::from(value))) }
}
