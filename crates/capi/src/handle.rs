//! Nonblocking operation handles as C sees them: test, wait (which consumes
//! the handle), wait for a fetched value, wait for many, release without
//! waiting, and a completion flag written at the initiator.
//!
//! Owns: `mw_handle`, which keeps a `Handle<'static>` (or, for `mw_irecv`,
//! a `RecvHandle<'static>`; for `mw_am_request_nb`, an `AmHandle<'static>`)
//! borrowing the endpoint (counted, see
//! `endpoint`) and the caller's buffer (the caller's promise to keep it
//! valid until the handle is consumed). Must not: hand a handle back to C
//! after consuming it: every consuming call nulls the caller's variable.

use mw_core::{AmHandle, AmReplyData, Handle, RecvHandle, RecvStatus};

use crate::endpoint::mw_endpoint;
use crate::ffi;
use crate::region;
use crate::status::{guard, mw_status, Failure};

/// A nonblocking operation in flight. Opaque; returned by the `*_nb`
/// functions, `mw_isend` and `mw_irecv`, and consumed by exactly one of
/// `mw_wait`, `mw_wait_value`, `mw_wait_recv`, `mw_wait_reply`,
/// `mw_wait_all` or `mw_handle_free`, each of which sets the caller's
/// variable to NULL.
#[derive(Debug)]
pub struct mw_handle {
    /// Always `Some` until consumed; taken before the endpoint stops
    /// counting the handle.
    op: Option<InFlight>,
    owner: &'static mw_endpoint,
}

/// What a handle waits for.
#[derive(Debug)]
enum InFlight {
    /// A one-sided operation or a send.
    Op(Handle<'static>),
    /// A receive (`mw_irecv`): completes with the message's envelope.
    Recv(RecvHandle<'static>),
    /// An active-message request (`mw_am_request_nb`): completes with the
    /// handler's reply.
    Am(AmHandle<'static>),
}

impl InFlight {
    fn test(&mut self) -> bool {
        match self {
            InFlight::Op(h) => h.test(),
            InFlight::Recv(h) => h.test(),
            InFlight::Am(h) => h.test(),
        }
    }

    fn wait(self) -> mw_core::Result<()> {
        match self {
            InFlight::Op(h) => h.wait(),
            InFlight::Recv(h) => h.wait().map(drop),
            InFlight::Am(h) => h.wait().map(drop),
        }
    }
}

impl mw_handle {
    fn get(&mut self) -> &mut InFlight {
        self.op.as_mut().expect("a handle is present until it is consumed")
    }

    /// Runs `f` on the operation, keeping the handle counted (so the
    /// endpoint cannot be finalized under it) until `f` returns.
    fn consume<R>(&mut self, f: impl FnOnce(InFlight) -> R) -> R {
        let op = self.op.take().expect("a handle is present until it is consumed");
        f(op)
    }
}

impl Drop for mw_handle {
    fn drop(&mut self) {
        drop(self.op.take());
        self.owner.release();
    }
}

/// Hands a new handle to C through `out`.
pub(crate) fn give(owner: &'static mw_endpoint, handle: Handle<'static>, out: ffi::Out<'_, *mut mw_handle>) {
    owner.retain();
    out.set(ffi::give(mw_handle { op: Some(InFlight::Op(handle)), owner }));
}

/// Hands a new receive handle to C through `out`.
pub(crate) fn give_recv(owner: &'static mw_endpoint, handle: RecvHandle<'static>, out: ffi::Out<'_, *mut mw_handle>) {
    owner.retain();
    out.set(ffi::give(mw_handle { op: Some(InFlight::Recv(handle)), owner }));
}

/// Hands a new active-message request handle to C through `out`.
pub(crate) fn give_am(owner: &'static mw_endpoint, handle: AmHandle<'static>, out: ffi::Out<'_, *mut mw_handle>) {
    owner.retain();
    out.set(ffi::give(mw_handle { op: Some(InFlight::Am(handle)), owner }));
}

/// Waits for an active-message request handle (`mw_wait_reply`): the
/// handler's reply, or `MW_ERR_INVALID_ARGUMENT` for a handle of another
/// kind (waited all the same: the handle is consumed whatever the result).
pub(crate) fn wait_reply(h: &mut mw_handle) -> Result<AmReplyData, Failure> {
    h.consume(|op| match op {
        InFlight::Am(am) => Ok(am.wait()?),
        other => {
            other.wait()?;
            Err(Failure::invalid("not an active-message request handle (use mw_wait or mw_wait_recv)"))
        }
    })
}

/// Waits for a receive handle (`mw_wait_recv`): the message's envelope, or
/// `MW_ERR_INVALID_ARGUMENT` for a handle of another kind (waited all the
/// same: the handle is consumed whatever the result).
/// Waits for a receive handle (at most `timeout`, else the operation
/// timeout) and consumes it.
pub(crate) fn wait_recv(h: &mut mw_handle, timeout: Option<std::time::Duration>) -> Result<RecvStatus, Failure> {
    h.consume(|op| match op {
        InFlight::Recv(recv) => Ok(match timeout {
            Some(timeout) => recv.wait_timeout(timeout)?,
            None => recv.wait()?,
        }),
        other => {
            other.wait()?;
            Err(Failure::invalid("not a receive handle (use mw_wait)"))
        }
    })
}

/// Cancels a receive handle's receive if no message matched it (see
/// `mw_cancel_recv`); `MW_ERR_INVALID_ARGUMENT` for a handle of another kind.
pub(crate) fn cancel_recv(h: &mut mw_handle) -> Result<bool, Failure> {
    match h.get() {
        InFlight::Recv(recv) => Ok(recv.cancel_unmatched()),
        _ => Err(Failure::invalid("not a receive handle")),
    }
}

/// Makes progress once and sets `*done` to whether the operation has
/// completed. Does not consume the handle: a completed handle must still be
/// passed to `mw_wait` (for its result) or `mw_handle_free`.
///
/// # Safety
/// `handle` must be NULL or a live handle used by no other thread;
/// `done` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_test(handle: *mut mw_handle, done: *mut bool) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (h, done) = unsafe { (ffi::obj_mut(handle, "handle")?, ffi::out(done, "done")?) };
        done.set(h.get().test());
        Ok(())
    })
}

/// Waits for the operation to complete, returns its result, frees the
/// handle and sets `*handle` to NULL. For a get, the destination buffer is
/// filled when this returns `MW_OK`. A NULL `*handle` is
/// `MW_ERR_NULL_POINTER` (the handle was already consumed).
///
/// # Safety
/// `handle` must be NULL or point to the caller's variable holding NULL or
/// a handle from this library; no other thread may use the handle meanwhile.
#[no_mangle]
pub unsafe extern "C" fn mw_wait(handle: *mut *mut mw_handle) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let mut h = unsafe { ffi::take(handle, "handle") }?.ok_or_else(|| Failure::null("*handle"))?;
        Ok(h.consume(InFlight::wait)?)
    })
}

/// Like `mw_wait`, but gives up after `timeout_ms` milliseconds instead of
/// the endpoint's operation timeout (`MW_OP_TIMEOUT_MS`; for a receive,
/// the wait timeout `MW_WAIT_TIMEOUT_MS`): then returns
/// `MW_ERR_TIMEOUT`, the operation is abandoned (a late completion is
/// discarded; a get's buffer is not written after this returns) and the
/// handle is consumed all the same. For handles of one-sided operations,
/// sends (`*_nb`, `mw_isend`) and receives (`mw_irecv`: cancelled as
/// `mw_wait_recv_timeout` cancels one); an active-message handle is
/// `MW_ERR_INVALID_ARGUMENT` and is left to the caller, unconsumed.
///
/// # Safety
/// As for `mw_wait`.
#[no_mangle]
pub unsafe extern "C" fn mw_wait_timeout(handle: *mut *mut mw_handle, timeout_ms: u64) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let mut h = unsafe {
            ffi::take_if(handle, "*handle", |h: &mw_handle| match h.op {
                Some(InFlight::Op(_) | InFlight::Recv(_)) => Ok(()),
                _ => Err(Failure::invalid(
                    "mw_wait_timeout takes a one-sided operation's, a send's or a receive's handle",
                )),
            })
        }?;
        let timeout = std::time::Duration::from_millis(timeout_ms);
        Ok(h.consume(|op| match op {
            InFlight::Op(op) => op.wait_timeout(timeout),
            InFlight::Recv(recv) => recv.wait_timeout(timeout).map(drop),
            other => other.wait(),
        })?)
    })
}

/// Like `mw_wait`, for an operation that fetches a word (an atomic from
/// `mw_atomic_nb` with `fetch`, or `MW_ATOMIC_LOAD`): on success stores the
/// word's previous value in `*value`. The handle is consumed whatever the
/// result; an operation that fetches nothing gives `MW_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// As for `mw_wait`; `value` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_wait_value(handle: *mut *mut mw_handle, value: *mut u64) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract; `value` is checked before the handle is taken.
        let out = unsafe { ffi::out(value, "value") }?;
        // SAFETY: forwarded contract.
        let mut h = unsafe { ffi::take(handle, "handle") }?.ok_or_else(|| Failure::null("*handle"))?;
        out.set(h.consume(|op| match op {
            InFlight::Op(op) => Ok(op.wait_value()?),
            InFlight::Recv(recv) => {
                recv.wait()?;
                Err(Failure::invalid("a receive fetches no word (use mw_wait_recv)"))
            }
            InFlight::Am(am) => {
                am.wait()?;
                Err(Failure::invalid("an active-message request fetches no word (use mw_wait_reply)"))
            }
        })?);
        Ok(())
    })
}

/// Waits for every handle in `handles[0..count]`, consuming each and setting
/// its entry to NULL; NULL entries are skipped. Returns the first error
/// (in array order) after all have completed.
///
/// # Safety
/// `handles` must be NULL (only if `count` is 0) or point to `count`
/// variables each holding NULL or a handle from this library, used by no
/// other thread.
#[no_mangle]
pub unsafe extern "C" fn mw_wait_all(handles: *mut *mut mw_handle, count: usize) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let slots = unsafe { ffi::array_mut(handles, count, "handles") }?;
        let mut boxes = Vec::with_capacity(slots.len());
        for slot in slots.iter_mut() {
            // SAFETY: each entry is a caller variable holding NULL or a handle.
            if let Some(h) = unsafe { ffi::take(slot, "handles[i]") }? {
                boxes.push(h);
            }
        }
        let mut first_error = None;
        if boxes.iter().all(|h| matches!(h.op, Some(InFlight::Op(_)))) {
            let ops = boxes.iter_mut().filter_map(|h| match h.op.take() {
                Some(InFlight::Op(op)) => Some(op),
                _ => None,
            });
            first_error = mw_core::wait_all(ops.collect::<Vec<_>>()).err();
        } else {
            // Receives or requests among them: each in turn (every wait makes progress
            // for all), the first error in array order kept.
            for h in &mut boxes {
                if let Some(op) = h.op.take() {
                    let result = op.wait();
                    if first_error.is_none() {
                        first_error = result.err();
                    }
                }
            }
        }
        // The boxes stay counted until every operation has been waited on.
        drop(boxes);
        first_error.map_or(Ok(()), |e| Err(e.into()))
    })
}

/// Releases a handle without waiting and sets `*handle` to NULL: the
/// operation still completes, its result is discarded, and a get's buffer
/// is not written after this returns. A NULL `*handle` is a no-op.
///
/// # Safety
/// As for `mw_wait`.
#[no_mangle]
pub unsafe extern "C" fn mw_handle_free(handle: *mut *mut mw_handle) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        drop(unsafe { ffi::take(handle, "handle") }?);
        Ok(())
    })
}

/// Asks for a completion flag: when the operation completes, the 64-bit
/// word at `offset` (8-byte aligned) of this rank's `region` is
/// incremented by one (at once, if it already has). Poll it with
/// `mw_region_load_u64` or wait with `mw_wait_until` (Cenju-4's
/// notification address, MBCF's completion flag). The handle must still be
/// consumed.
///
/// # Safety
/// `handle` must be NULL or a live handle used by no other thread; `region`
/// NULL or a live region.
#[no_mangle]
pub unsafe extern "C" fn mw_handle_notify(
    handle: *mut mw_handle,
    region: *const crate::mw_region,
    offset: u64,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (h, r) = unsafe { (ffi::obj_mut(handle, "handle")?, region::region(region)?) };
        match h.get() {
            InFlight::Op(op) => Ok(op.notify(r.get(), offset)?),
            InFlight::Recv(_) => Err(Failure::invalid("a receive handle has no completion flag")),
            InFlight::Am(_) => Err(Failure::invalid("an active-message request handle has no completion flag")),
        }
    })
}
