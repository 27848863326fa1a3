//! Tagged messages as C sees them: blocking and nonblocking send and
//! receive, probe, with wildcard source and tag (`MW_ANY_SOURCE`,
//! `MW_ANY_TAG`), matched in order between a pair of ranks within a
//! matching context (the `_in` forms; the others use context 0); and raw,
//! unreliable datagrams.
//!
//! Owns: turning C buffers into the slices the endpoint borrows, and the
//! `mw_recv_status` envelope. Must not: keep a caller buffer past the call,
//! except inside a handle (the documented buffer-lifetime rule), or match
//! messages itself (core does).

use std::ffi::c_void;

use mw_core::RecvStatus;

use crate::endpoint::{endpoint, mw_endpoint};
use crate::ffi;
use crate::handle::{self, mw_handle};
use crate::status::{guard, mw_status, Failure};

/// Matches a message from any rank (the `source` of a receive or probe).
pub const MW_ANY_SOURCE: u32 = 0xffff_ffff;
/// Matches a message of any tag (a receive's or probe's `tag`; not a valid
/// tag to send).
pub const MW_ANY_TAG: u64 = 0xffff_ffff_ffff_ffff;
/// The matching context of the functions without `_in` (`mw_send`,
/// `mw_recv`, ...). Any other value is a context of the caller's choosing.
pub const MW_CONTEXT_DEFAULT: u32 = 0;
// Literals for cbindgen; they must be core's values.
const _: () = assert!(MW_ANY_SOURCE == mw_core::ANY_SOURCE && MW_ANY_TAG == mw_core::ANY_TAG);

/// The envelope of a received (or probed) message.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mw_recv_status {
    /// The sending rank.
    pub source: u32,
    /// The message's tag.
    pub tag: u64,
    /// The message's length in bytes (for a receive, what landed in the buffer).
    pub len: usize,
}

impl From<RecvStatus> for mw_recv_status {
    fn from(s: RecvStatus) -> mw_recv_status {
        mw_recv_status { source: s.source, tag: s.tag, len: s.len }
    }
}

/// Sends `len` bytes of `data` to `dest` with `tag` and returns when `data`
/// may be reused: at once for a message up to the eager limit, once the
/// receiver has pulled it for a larger one (it is then never copied on the
/// way: the receiver reads it from `data`). A large message to oneself
/// needs its receive posted first (`mw_irecv`).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `data` NULL (only if `len` is 0)
/// or readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_send(
    ep: *mut mw_endpoint,
    dest: u32,
    tag: u64,
    data: *const c_void,
    len: usize,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { mw_send_in(ep, MW_CONTEXT_DEFAULT, dest, tag, data, len) }
}

/// `mw_send` in matching context `context`: the message matches only
/// receives and probes of the same context (`mw_recv_in`, `mw_irecv_in`,
/// `mw_probe_in`, `mw_iprobe_in`). The functions without `_in` use
/// `MW_CONTEXT_DEFAULT`; a library layered on memwire picks its own
/// context so its messages never mix with the application's, whatever
/// their tags. Order between a pair of ranks holds within each context.
///
/// # Safety
/// As for `mw_send`.
#[no_mangle]
pub unsafe extern "C" fn mw_send_in(
    ep: *mut mw_endpoint,
    context: u32,
    dest: u32,
    tag: u64,
    data: *const c_void,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, data) = unsafe { (endpoint(ep)?, ffi::bytes(data, len, "data")?) };
        Ok(owner.ep.send_in(context, dest, tag, data)?)
    })
}

/// Receives a message from `source` (or `MW_ANY_SOURCE`) with `tag` (or
/// `MW_ANY_TAG`) into `buf` of `capacity` bytes, waiting for it; stores its
/// envelope in `*status` unless `status` is NULL. A message longer than
/// `capacity` is consumed and fails with `MW_ERR_TRUNCATED`, leaving `buf`
/// untouched. Waits at most the endpoint's wait timeout (`MW_WAIT_TIMEOUT_MS`, none by default),
/// then fails with `MW_ERR_TIMEOUT` (see
/// `mw_recv_timeout` for what a timeout leaves).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `buf` NULL (only if `capacity` is
/// 0) or writable for `capacity` bytes; `status` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_recv(
    ep: *mut mw_endpoint,
    source: u32,
    tag: u64,
    buf: *mut c_void,
    capacity: usize,
    status: *mut mw_recv_status,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { mw_recv_in(ep, MW_CONTEXT_DEFAULT, source, tag, buf, capacity, status) }
}

/// `mw_recv` in matching context `context`: takes only a message sent in
/// the same context (`mw_send_in`, `mw_isend_in`).
///
/// # Safety
/// As for `mw_recv`.
#[no_mangle]
pub unsafe extern "C" fn mw_recv_in(
    ep: *mut mw_endpoint,
    context: u32,
    source: u32,
    tag: u64,
    buf: *mut c_void,
    capacity: usize,
    status: *mut mw_recv_status,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, buf, status) =
            unsafe { (endpoint(ep)?, ffi::bytes_mut(buf, capacity, "buf")?, ffi::out_opt(status, "status")?) };
        let got = owner.ep.recv_in(context, source, tag, buf)?;
        if let Some(out) = status {
            out.set(got.into());
        }
        Ok(())
    })
}

/// `mw_recv_in`, giving up after `timeout_ms` milliseconds instead of
/// the endpoint's wait timeout (`MW_WAIT_TIMEOUT_MS`, none by default). On `MW_ERR_TIMEOUT` the receive is cancelled: `buf`
/// is not written after the call returns (it may hold part of a large
/// message that was being pulled into it), a message that had not matched
/// is left for a later receive, and the sender of one that was being
/// pulled gets `MW_ERR_CANCELLED`. A message that arrived whole by then is
/// received.
///
/// # Safety
/// As for `mw_recv`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mw_recv_timeout(
    ep: *mut mw_endpoint,
    context: u32,
    source: u32,
    tag: u64,
    buf: *mut c_void,
    capacity: usize,
    status: *mut mw_recv_status,
    timeout_ms: u64,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, buf, status) =
            unsafe { (endpoint(ep)?, ffi::bytes_mut(buf, capacity, "buf")?, ffi::out_opt(status, "status")?) };
        let timeout = std::time::Duration::from_millis(timeout_ms);
        let got = owner.ep.recv_in_timeout(context, source, tag, buf, timeout)?;
        if let Some(out) = status {
            out.set(got.into());
        }
        Ok(())
    })
}

/// Starts a send of `len` bytes of `data` to `dest` with `tag` and stores
/// its handle in `*handle`. Never waits for the receiver: a message up to
/// the eager limit goes out now (or waits in the library for the receiver's
/// credit), a larger one is copied once and announced. `data` must stay
/// valid until the handle is consumed (`mw_wait`, `mw_wait_all`,
/// `mw_handle_free`); it may be reused once the handle completes.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `data` NULL (only if `len` is 0)
/// or readable for `len` bytes until the handle is consumed; `handle` NULL
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_isend(
    ep: *mut mw_endpoint,
    dest: u32,
    tag: u64,
    data: *const c_void,
    len: usize,
    handle: *mut *mut mw_handle,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { mw_isend_in(ep, MW_CONTEXT_DEFAULT, dest, tag, data, len, handle) }
}

/// `mw_isend` in matching context `context` (see `mw_send_in`).
///
/// # Safety
/// As for `mw_isend`.
#[no_mangle]
pub unsafe extern "C" fn mw_isend_in(
    ep: *mut mw_endpoint,
    context: u32,
    dest: u32,
    tag: u64,
    data: *const c_void,
    len: usize,
    handle: *mut *mut mw_handle,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract: `data` outlives the handle, which is the
        // only holder of the 'static slice and is consumed before `data` may go.
        let (owner, out, data) =
            unsafe { (endpoint(ep)?, ffi::out(handle, "handle")?, ffi::bytes::<'static>(data, len, "data")?) };
        let h = owner.ep.isend_in(context, dest, tag, data)?;
        handle::give(owner, h, out);
        Ok(())
    })
}

/// `mw_send_in`, but synchronous (MPI's `MPI_Ssend`): returns only once a
/// receive on `dest` in the same context has matched the message and
/// taken it, whatever its size (a receive whose buffer is too small also
/// counts; it fails there with `MW_ERR_TRUNCATED`). The data goes by
/// rendezvous, never copied on the way, so a synchronous send to oneself
/// needs its receive posted first (`mw_irecv_in`).
///
/// # Safety
/// As for `mw_send`.
#[no_mangle]
pub unsafe extern "C" fn mw_ssend_in(
    ep: *mut mw_endpoint,
    context: u32,
    dest: u32,
    tag: u64,
    data: *const c_void,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, data) = unsafe { (endpoint(ep)?, ffi::bytes(data, len, "data")?) };
        Ok(owner.ep.ssend_in(context, dest, tag, data)?)
    })
}

/// Nonblocking `mw_ssend_in` (MPI's `MPI_Issend`): `data` is copied once
/// and announced; the handle completes when a receive on `dest` has
/// matched the message and taken it. `data` must stay valid until the
/// handle is consumed, as for `mw_isend`.
///
/// # Safety
/// As for `mw_isend`.
#[no_mangle]
pub unsafe extern "C" fn mw_issend_in(
    ep: *mut mw_endpoint,
    context: u32,
    dest: u32,
    tag: u64,
    data: *const c_void,
    len: usize,
    handle: *mut *mut mw_handle,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract: `data` outlives the handle, which is the
        // only holder of the 'static slice and is consumed before `data` may go.
        let (owner, out, data) =
            unsafe { (endpoint(ep)?, ffi::out(handle, "handle")?, ffi::bytes::<'static>(data, len, "data")?) };
        let h = owner.ep.issend_in(context, dest, tag, data)?;
        handle::give(owner, h, out);
        Ok(())
    })
}

/// Posts a receive from `source` (or `MW_ANY_SOURCE`) with `tag` (or
/// `MW_ANY_TAG`) into `buf` of `capacity` bytes and stores its handle in
/// `*handle`. `buf` is filled when `mw_wait_recv` (which also gives the
/// envelope) or `mw_wait` returns `MW_OK`, and must stay valid and untouched
/// until then; `mw_handle_free` before the message matched cancels the
/// receive, and `buf` is never written after it returns.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `buf` NULL (only if `capacity` is
/// 0) or writable for `capacity` bytes until the handle is consumed;
/// `handle` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_irecv(
    ep: *mut mw_endpoint,
    source: u32,
    tag: u64,
    buf: *mut c_void,
    capacity: usize,
    handle: *mut *mut mw_handle,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { mw_irecv_in(ep, MW_CONTEXT_DEFAULT, source, tag, buf, capacity, handle) }
}

/// `mw_irecv` in matching context `context`: matches only a message sent
/// in the same context (see `mw_send_in`).
///
/// # Safety
/// As for `mw_irecv`.
#[no_mangle]
pub unsafe extern "C" fn mw_irecv_in(
    ep: *mut mw_endpoint,
    context: u32,
    source: u32,
    tag: u64,
    buf: *mut c_void,
    capacity: usize,
    handle: *mut *mut mw_handle,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract: `buf` outlives the handle, which is the
        // only holder of the 'static slice and is consumed before `buf` may go.
        let (owner, out, buf) =
            unsafe { (endpoint(ep)?, ffi::out(handle, "handle")?, ffi::bytes_mut::<'static>(buf, capacity, "buf")?) };
        let h = owner.ep.irecv_in(context, source, tag, buf)?;
        handle::give_recv(owner, h, out);
        Ok(())
    })
}

/// Waits (at most the endpoint's operation timeout, then `MW_ERR_TIMEOUT`
/// and the receive is cancelled) for a receive from `mw_irecv`, stores the message's envelope in
/// `*status` unless `status` is NULL, frees the handle and sets `*handle`
/// to NULL. A handle of another kind is waited for, consumed, and answered
/// with `MW_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `handle` must be NULL or point to the caller's variable holding NULL or
/// a handle from this library; no other thread may use the handle
/// meanwhile; `status` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_wait_recv(handle: *mut *mut mw_handle, status: *mut mw_recv_status) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract; `status` is checked before the handle is taken.
        let status = unsafe { ffi::out_opt(status, "status") }?;
        // SAFETY: forwarded contract.
        let mut h = unsafe { ffi::take(handle, "handle") }?.ok_or_else(|| Failure::null("*handle"))?;
        let got = handle::wait_recv(&mut h, None)?;
        if let Some(out) = status {
            out.set(got.into());
        }
        Ok(())
    })
}

/// Cancels a receive from `mw_irecv` if no message has matched it yet
/// (MPI's `MPI_Cancel`): then sets `*cancelled` to true, frees the handle
/// and sets `*handle` to NULL; no message will match it and `buf` is not
/// written. Otherwise (a message has matched it: arrived, or still
/// arriving) sets `*cancelled` to false and leaves the handle to be waited
/// for as usual; the message's sender is not affected. A handle of another
/// kind is `MW_ERR_INVALID_ARGUMENT`, left unconsumed.
///
/// # Safety
/// `handle` must be NULL or point to the caller's variable holding NULL or
/// a handle from this library; no other thread may use the handle
/// meanwhile; `cancelled` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_cancel_recv(handle: *mut *mut mw_handle, cancelled: *mut bool) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let cancelled = unsafe { ffi::out(cancelled, "cancelled") }?;
        // SAFETY: forwarded contract; `handle` is checked before it is read.
        let h = unsafe { ffi::obj_mut(handle, "handle") }?;
        // SAFETY: forwarded contract: `*h` is NULL or a live handle of ours.
        let live = unsafe { ffi::obj_mut(*h, "*handle") }?;
        let done = handle::cancel_recv(live)?;
        cancelled.set(done);
        if done {
            // SAFETY: forwarded contract; the cancelled receive's handle is freed.
            drop(unsafe { ffi::take(handle, "handle") }?);
        }
        Ok(())
    })
}

/// `mw_wait_recv`, giving up after `timeout_ms` milliseconds instead of
/// the endpoint's operation timeout: then `MW_ERR_TIMEOUT`, the receive is
/// cancelled as `mw_recv_timeout` cancels one, and the handle is consumed.
///
/// # Safety
/// As for `mw_wait_recv`.
#[no_mangle]
pub unsafe extern "C" fn mw_wait_recv_timeout(
    handle: *mut *mut mw_handle,
    status: *mut mw_recv_status,
    timeout_ms: u64,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract; `status` is checked before the handle is taken.
        let status = unsafe { ffi::out_opt(status, "status") }?;
        // SAFETY: forwarded contract.
        let mut h = unsafe { ffi::take(handle, "handle") }?.ok_or_else(|| Failure::null("*handle"))?;
        let got = handle::wait_recv(&mut h, Some(std::time::Duration::from_millis(timeout_ms)))?;
        if let Some(out) = status {
            out.set(got.into());
        }
        Ok(())
    })
}

/// Waits until a message from `source` (or `MW_ANY_SOURCE`) with `tag` (or
/// `MW_ANY_TAG`) has arrived and stores its envelope in `*status`; the
/// message stays queued for a receive (size a buffer by `status->len`).
/// Waits at most the endpoint's operation timeout (`MW_ERR_TIMEOUT`).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `status` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_probe(
    ep: *mut mw_endpoint,
    source: u32,
    tag: u64,
    status: *mut mw_recv_status,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { mw_probe_in(ep, MW_CONTEXT_DEFAULT, source, tag, status) }
}

/// `mw_probe` in matching context `context`: sees only messages sent in
/// the same context.
///
/// # Safety
/// As for `mw_probe`.
#[no_mangle]
pub unsafe extern "C" fn mw_probe_in(
    ep: *mut mw_endpoint,
    context: u32,
    source: u32,
    tag: u64,
    status: *mut mw_recv_status,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(status, "status")?) };
        out.set(owner.ep.probe_in(context, source, tag)?.into());
        Ok(())
    })
}

/// `mw_probe_in`, giving up after `timeout_ms` milliseconds (instead of
/// the endpoint's operation timeout, which bounds `mw_probe`) with
/// `MW_ERR_TIMEOUT`.
///
/// # Safety
/// As for `mw_probe`.
#[no_mangle]
pub unsafe extern "C" fn mw_probe_timeout(
    ep: *mut mw_endpoint,
    context: u32,
    source: u32,
    tag: u64,
    status: *mut mw_recv_status,
    timeout_ms: u64,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(status, "status")?) };
        let timeout = std::time::Duration::from_millis(timeout_ms);
        out.set(owner.ep.probe_in_timeout(context, source, tag, timeout)?.into());
        Ok(())
    })
}

/// Makes progress once and sets `*found` to whether a message from `source`
/// (or `MW_ANY_SOURCE`) with `tag` (or `MW_ANY_TAG`) has arrived; if so,
/// stores its envelope in `*status` (unless NULL). The message stays queued.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `found` NULL or valid for writes;
/// `status` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_iprobe(
    ep: *mut mw_endpoint,
    source: u32,
    tag: u64,
    found: *mut bool,
    status: *mut mw_recv_status,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { mw_iprobe_in(ep, MW_CONTEXT_DEFAULT, source, tag, found, status) }
}

/// `mw_iprobe` in matching context `context`: sees only messages sent in
/// the same context.
///
/// # Safety
/// As for `mw_iprobe`.
#[no_mangle]
pub unsafe extern "C" fn mw_iprobe_in(
    ep: *mut mw_endpoint,
    context: u32,
    source: u32,
    tag: u64,
    found: *mut bool,
    status: *mut mw_recv_status,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, found, status) =
            unsafe { (endpoint(ep)?, ffi::out(found, "found")?, ffi::out_opt(status, "status")?) };
        let got = owner.ep.iprobe_in(context, source, tag)?;
        if let (Some(got), Some(out)) = (got, status) {
            out.set(got.into());
        }
        found.set(got.is_some());
        Ok(())
    })
}

/// Stores the largest raw datagram payload in `*len`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `len` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_raw_max_len(ep: *mut mw_endpoint, len: *mut usize) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(len, "len")?) };
        out.set(owner.ep.raw_max_len());
        Ok(())
    })
}

/// Sends one **unreliable, unordered** datagram of `len` bytes to `rank`
/// (PPRAM-Link's raw packets): it may be lost or reordered and nobody is
/// told. At most `mw_raw_max_len` bytes (`MW_ERR_INVALID_ARGUMENT` above).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `data` NULL (only if `len` is 0)
/// or readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_send_raw(ep: *mut mw_endpoint, rank: u32, data: *const c_void, len: usize) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, data) = unsafe { (endpoint(ep)?, ffi::bytes(data, len, "data")?) };
        Ok(owner.ep.send_raw(rank, data)?)
    })
}

/// Takes a received raw datagram into `buf` (`capacity` bytes) if one is
/// queued: sets `*found`, and its sender and length in `*source` and
/// `*len` (either may be NULL). Makes progress once. A datagram longer
/// than `capacity` stays queued: `MW_ERR_TRUNCATED`. Never waits (raw
/// datagrams may never come; poll, with a timeout of your own).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `buf` NULL (only if `capacity` is
/// 0) or writable for `capacity` bytes; `found` NULL or valid for writes;
/// `source` and `len` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_try_recv_raw(
    ep: *mut mw_endpoint,
    buf: *mut c_void,
    capacity: usize,
    found: *mut bool,
    source: *mut u32,
    len: *mut usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, buf, found, source, len) = unsafe {
            (
                endpoint(ep)?,
                ffi::bytes_mut(buf, capacity, "buf")?,
                ffi::out(found, "found")?,
                ffi::out_opt(source, "source")?,
                ffi::out_opt(len, "len")?,
            )
        };
        let got = owner.ep.try_recv_raw(buf)?;
        if let Some((from, n)) = got {
            if let Some(source) = source {
                source.set(from);
            }
            if let Some(len) = len {
                len.set(n);
            }
        }
        found.set(got.is_some());
        Ok(())
    })
}
