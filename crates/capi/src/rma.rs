//! Remote memory access as C sees it: put, get (blocking, nonblocking and
//! single-word forms), put_signal, strided, vectored and masked puts, and
//! puts through address registers.
//!
//! Owns: validating C arguments (enum values, strided extents) and turning
//! caller buffers into the slices the endpoint borrows. Must not: keep a
//! caller buffer past the call, except inside a handle (the documented
//! buffer-lifetime rule).

use std::ffi::c_void;

use mw_core::{Signal, SignalOp};

use crate::endpoint::{endpoint, mw_endpoint};
use crate::ffi;
use crate::handle::{self, mw_handle};
use crate::region::key;
use crate::status::{guard, mw_status, Failure};
use crate::{mw_iov, mw_key, mw_signal, MW_SIGNAL_ADD, MW_SIGNAL_SET};

fn signal_from(signal: &mw_signal) -> Result<Signal, Failure> {
    let op = match signal.op {
        MW_SIGNAL_SET => SignalOp::Set,
        MW_SIGNAL_ADD => SignalOp::Add,
        _ => return Err(Failure::invalid("unknown MW_SIGNAL_* value")),
    };
    Ok(Signal { key: key(signal.key), offset: signal.offset, op, value: signal.value })
}

/// Bytes spanned by `count` elements of `elem_size` bytes every `stride`
/// bytes (0 for no elements).
fn strided_extent(elem_size: usize, count: usize, stride: usize) -> Result<usize, Failure> {
    if count == 0 {
        return Ok(0);
    }
    if stride < elem_size {
        return Err(Failure::invalid("local stride smaller than the element"));
    }
    stride
        .checked_mul(count - 1)
        .and_then(|v| v.checked_add(elem_size))
        .ok_or(Failure::invalid("strided extent overflows"))
}

/// Copies `len` bytes from `data` to `offset` of region `key` at `rank`,
/// and returns when they are in the target's memory.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `data` NULL (only if `len` is 0)
/// or readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_put(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    data: *const c_void,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, data) = unsafe { (endpoint(ep)?, ffi::bytes(data, len, "data")?) };
        Ok(owner.ep.put(rank, self::key(key), offset, data)?)
    })
}

/// Starts a put of `len` bytes from `data` to `offset` of region `key` at
/// `rank` and stores its handle in `*handle`; the handle completes when the
/// data is in the target's memory. `data` must stay valid and unchanged
/// until the handle is consumed (`mw_wait`, `mw_wait_all`, `mw_handle_free`):
/// toward a peer on another host, a large put's bytes are read from `data`
/// as they leave, not copied at the call.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `data` NULL (only if `len` is 0)
/// or readable for `len` bytes until the handle is consumed; `handle` NULL
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_put_nb(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    data: *const c_void,
    len: usize,
    handle: *mut *mut mw_handle,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract: `data` outlives the handle, which is the
        // only holder of the 'static slice and is consumed (never leaked)
        // before `data` may go, as `put_nb_lent` requires.
        let (owner, out, data) =
            unsafe { (endpoint(ep)?, ffi::out(handle, "handle")?, ffi::bytes::<'static>(data, len, "data")?) };
        // SAFETY: as above.
        let h = unsafe { owner.ep.put_nb_lent(rank, self::key(key), offset, data) }?;
        handle::give(owner, h, out);
        Ok(())
    })
}

/// Stores the 64-bit `value` (little-endian, as on every supported host) at
/// `offset` of region `key` at `rank` (PPRAM-Link's bit-of-data write).
/// Returns when it is in the target's memory.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_put_value(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: u64,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        Ok(owner.ep.put_value(rank, self::key(key), offset, value)?)
    })
}

/// Reads `len` bytes at `offset` of region `key` at `rank` into `out`, and
/// returns when they are there.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `out` NULL (only if `len` is 0)
/// or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_get(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    out: *mut c_void,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::bytes_mut(out, len, "out")?) };
        Ok(owner.ep.get(rank, self::key(key), offset, out)?)
    })
}

/// Starts a get of `len` bytes at `offset` of region `key` at `rank` into
/// `out` and stores its handle in `*handle`. `out` is filled when `mw_wait`
/// (or `mw_wait_all`) returns `MW_OK` for the handle; until the handle is
/// consumed, `out` must stay valid and must not be read or written. Once
/// `mw_handle_free` has released the handle, `out` is never written again
/// (a get from a same-host peer may already have filled it inside this
/// call), so it may be freed at once.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `out` NULL (only if `len` is 0) or
/// writable for `len` bytes until the handle is consumed; `handle` NULL or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_get_nb(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    out: *mut c_void,
    len: usize,
    handle: *mut *mut mw_handle,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract: `out` stays valid and untouched by the
        // caller until the handle (the only holder of the slice) is consumed.
        let (owner, slot, out) =
            unsafe { (endpoint(ep)?, ffi::out(handle, "handle")?, ffi::bytes_mut::<'static>(out, len, "out")?) };
        let h = owner.ep.get_nb(rank, self::key(key), offset, out)?;
        handle::give(owner, h, slot);
        Ok(())
    })
}

/// Reads the 64-bit little-endian value at `offset` of region `key` at
/// `rank` into `*value` (PPRAM-Link's bit-of-data read).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `value` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_get_value(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    value: *mut u64,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(value, "value")?) };
        out.set(owner.ep.get_value(rank, self::key(key), offset)?);
        Ok(())
    })
}

/// Puts `len` bytes from `data` to `offset` of region `key` at `rank`, then
/// sets or adds to the signal word described by `signal` at the same rank,
/// so a target waiting on the signal (`mw_wait_until`) sees the data.
/// Returns when both are done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `data` NULL (only if `len` is 0)
/// or readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_put_signal(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    data: *const c_void,
    len: usize,
    signal: mw_signal,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, data) = unsafe { (endpoint(ep)?, ffi::bytes(data, len, "data")?) };
        let signal = signal_from(&signal)?;
        Ok(owner.ep.put_signal(rank, self::key(key), offset, data, signal)?)
    })
}

/// Implicit nonblocking put (OpenSHMEM's `put_nbi`): like `mw_put_nb`
/// without a handle. The put is complete once a later `mw_flush` toward
/// `rank` or `mw_quiet` returns; if it fails, that call returns the error.
/// An error found at issue is returned here. `data` must stay valid and
/// unchanged until that flush or quiet returns (toward a peer on another
/// host a large put's bytes are read as they leave).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `data` NULL (only if `len` is 0)
/// or readable for `len` bytes until a later `mw_flush(ep, rank)` or
/// `mw_quiet(ep)` has returned.
#[no_mangle]
pub unsafe extern "C" fn mw_put_nbi(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    data: *const c_void,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract: `data` stays readable until the flush
        // or quiet that completes the put, as `put_nbi_lent` requires.
        let (owner, data) = unsafe { (endpoint(ep)?, ffi::bytes::<'static>(data, len, "data")?) };
        // SAFETY: as above.
        unsafe { owner.ep.put_nbi_lent(rank, self::key(key), offset, data) }?;
        Ok(())
    })
}

/// Implicit nonblocking `mw_put_signal`, completed and reported like
/// `mw_put_nbi`.
///
/// # Safety
/// As for `mw_put_nbi`.
#[no_mangle]
pub unsafe extern "C" fn mw_put_signal_nbi(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    data: *const c_void,
    len: usize,
    signal: mw_signal,
) -> mw_status {
    guard(|| {
        // SAFETY: as for `mw_put_nbi`.
        let (owner, data) = unsafe { (endpoint(ep)?, ffi::bytes::<'static>(data, len, "data")?) };
        let signal = signal_from(&signal)?;
        // SAFETY: as for `mw_put_nbi`.
        unsafe { owner.ep.put_signal_nbi_lent(rank, self::key(key), offset, data, signal) }?;
        Ok(())
    })
}

/// Nonblocking `mw_put_signal`: stores the operation's handle in `*handle`.
/// `data` must stay valid and unchanged until the handle is consumed (it
/// may be read as the put leaves, as for `mw_put_nb`).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `data` NULL (only if `len` is 0)
/// or readable for `len` bytes until the handle is consumed; `handle` NULL
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_put_signal_nb(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    data: *const c_void,
    len: usize,
    signal: mw_signal,
    handle: *mut *mut mw_handle,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract, as for `mw_put_nb`.
        let (owner, out, data) =
            unsafe { (endpoint(ep)?, ffi::out(handle, "handle")?, ffi::bytes::<'static>(data, len, "data")?) };
        let signal = signal_from(&signal)?;
        // SAFETY: as for `mw_put_nb`: the handle is consumed before `data` may go.
        let h = unsafe { owner.ep.put_signal_nb_lent(rank, self::key(key), offset, data, signal) }?;
        handle::give(owner, h, out);
        Ok(())
    })
}

/// Strided put (PPRAM-Link stride scatter): `count` elements of `elem_size`
/// bytes, taken from `src` every `src_stride` bytes, land at the target
/// every `dst_stride` bytes from `offset` of region `key` at `rank`. Both
/// strides must be at least `elem_size`. Returns when all are in place.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `src` NULL (only if `count` or
/// `elem_size` is 0) or readable for `(count - 1) * src_stride + elem_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_put_strided(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    src: *const c_void,
    elem_size: usize,
    count: usize,
    src_stride: usize,
    dst_stride: usize,
) -> mw_status {
    guard(|| {
        let extent = strided_extent(elem_size, count, src_stride)?;
        // SAFETY: forwarded contract; `extent` is exactly what it promises.
        let (owner, src) = unsafe { (endpoint(ep)?, ffi::bytes(src, extent, "src")?) };
        Ok(owner.ep.put_strided(rank, self::key(key), offset, src, elem_size, count, src_stride, dst_stride)?)
    })
}

/// Strided get (PPRAM-Link stride gather): `count` elements of `elem_size`
/// bytes, read at the target every `src_stride` bytes from `offset` of
/// region `key` at `rank`, land in `dst` every `dst_stride` bytes (bytes
/// between elements are left alone). Returns when all are in place.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `dst` NULL (only if `count` or
/// `elem_size` is 0) or writable for `(count - 1) * dst_stride + elem_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_get_strided(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    dst: *mut c_void,
    elem_size: usize,
    count: usize,
    src_stride: usize,
    dst_stride: usize,
) -> mw_status {
    guard(|| {
        let extent = strided_extent(elem_size, count, dst_stride)?;
        // SAFETY: forwarded contract; `extent` is exactly what it promises.
        let (owner, dst) = unsafe { (endpoint(ep)?, ffi::bytes_mut(dst, extent, "dst")?) };
        Ok(owner.ep.get_strided(rank, self::key(key), offset, dst, elem_size, count, src_stride, dst_stride)?)
    })
}

/// Vectored put: segment `i` puts `segments[i].len` bytes from
/// `segments[i].data` at `segments[i].offset` of region `key` at `rank`, all
/// as one operation (grouped into few messages). Returns when every
/// segment is in place.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `segments` NULL (only if `count` is
/// 0) or readable for `count` entries, each `data` readable for its `len`.
#[no_mangle]
pub unsafe extern "C" fn mw_put_iov(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    segments: *const mw_iov,
    count: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, segs) = unsafe { (endpoint(ep)?, ffi::array(segments, count, "segments")?) };
        let mut pairs = Vec::with_capacity(segs.len());
        for seg in segs {
            // SAFETY: forwarded contract for each segment's buffer.
            pairs.push((seg.offset, unsafe { ffi::bytes(seg.data, seg.len, "segments[i].data") }?));
        }
        Ok(owner.ep.put_iov(rank, self::key(key), &pairs)?)
    })
}

/// Masked put (PPRAM-Link writesw, DSM write-back of dirty words): of the
/// `block_len`-byte block (64 or 256 bytes) at `block`, writes only the
/// 4-byte words whose bit is set in `word_mask` (bit i = bytes 4i..4i+3) to
/// `offset` of region `key` at `rank`. A 64-byte block has 16 words, so
/// mask bits above 15 are an error. Returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `block` readable for `block_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_put_masked(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    offset: u64,
    block: *const c_void,
    block_len: usize,
    word_mask: u64,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, block) = unsafe { (endpoint(ep)?, ffi::bytes(block, block_len, "block")?) };
        Ok(owner.ep.put_masked(rank, self::key(key), offset, block, word_mask)?)
    })
}

/// Puts `len` bytes from `data` through address register `reg` of `rank`:
/// they land wherever that rank pointed the register (`mw_set_register`);
/// an unset register gives `MW_ERR_UNSUPPORTED`, a window too small
/// `MW_ERR_OUT_OF_BOUNDS`. Limited to one chunk (`MW_CHUNK`, 256 KiB by
/// default). Returns when done at the target.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `data` NULL (only if `len` is 0)
/// or readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_put_to_register(
    ep: *mut mw_endpoint,
    rank: u32,
    reg: u16,
    data: *const c_void,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, data) = unsafe { (endpoint(ep)?, ffi::bytes(data, len, "data")?) };
        Ok(owner.ep.put_to_register(rank, reg, data)?)
    })
}
