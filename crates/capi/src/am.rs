//! Active messages as C sees them: handlers are C functions with a user
//! pointer, run by the progress engine; a request waits for the handler's
//! reply, whose payload lands in the caller's buffer, either at once
//! (`mw_am_request`) or through a handle (`mw_am_request_nb`,
//! `mw_wait_reply`); a one-way message (`mw_am_post`, or `mw_am_send` from
//! inside a handler) gets no reply.
//!
//! Owns: the C handler trampoline (it marks the thread as inside a callback,
//! so every other exported function refuses instead of waiting for the
//! endpoint lock its caller holds), `mw_am_message`, `mw_am_reply`, and the
//! opaque `mw_am_context`, which is core's `AmContext` behind a pointer that
//! lives for one handler call. Must not: let a context pointer be used after
//! its handler returns (C's promise), or dispatch messages itself.

use std::ffi::c_void;

use mw_core::{AmContext, AmMessage, AmReplyData};

use crate::endpoint::{endpoint, mw_endpoint};
use crate::ffi;
use crate::handle::{self, mw_handle};
use crate::status::{as_callback, guard, guard_callback, mw_status, Failure};

/// Most u64 arguments a request or reply carries.
pub const MW_AM_MAX_ARGS: usize = 8;

/// What a handler may do while it runs: reply (`mw_am_reply`), queue
/// one-way active messages (`mw_am_send`), ask who sent the request
/// (`mw_am_source`). Opaque; valid only during the handler call.
#[derive(Debug)]
pub struct mw_am_context {
    _opaque: [u8; 0],
}

/// An active message as its handler sees it; valid only during the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mw_am_message {
    /// The initiating rank.
    pub source: u32,
    /// The handler id it was sent to.
    pub handler: u16,
    /// Its u64 arguments (`nargs` of them, at most `MW_AM_MAX_ARGS`).
    pub args: *const u64,
    /// How many arguments.
    pub nargs: usize,
    /// Its payload (any size: a large one was pulled before the handler ran).
    pub payload: *const c_void,
    /// Payload bytes.
    pub len: usize,
}

/// A handler: runs in the progress engine, on whichever thread makes
/// progress, with `user` as registered. It must return promptly and may use
/// only `ctx` (every other memwire call fails there with `MW_ERR_IN_USE`).
pub type mw_am_handler =
    Option<unsafe extern "C" fn(ctx: *mut mw_am_context, msg: *const mw_am_message, user: *mut c_void)>;

/// A request's reply, filled by `mw_am_request`: the caller sets `payload`
/// and `capacity` (the buffer the reply's payload goes into; NULL and 0 if
/// none is expected); the call sets `args`, `nargs` and `len`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mw_am_reply_data {
    /// The reply's arguments.
    pub args: [u64; MW_AM_MAX_ARGS],
    /// How many of `args` the handler sent.
    pub nargs: usize,
    /// Where the reply's payload goes (caller's buffer).
    pub payload: *mut c_void,
    /// Bytes `payload` holds.
    pub capacity: usize,
    /// The reply payload's length.
    pub len: usize,
}

/// The user pointer a handler was registered with. Handed to the handler
/// on whichever thread makes progress: what it points to is the caller's
/// to share safely (the registration's documented contract).
struct User(*mut c_void);
// SAFETY: the pointer is only passed back to the C handler, never
// dereferenced here; `mw_register_handler` documents that the handler may
// run on any thread of the process.
unsafe impl Send for User {}
// SAFETY: as above.
unsafe impl Sync for User {}

impl User {
    /// The pointer (a method, so closures capture the whole `User`, which is
    /// `Send`, not its bare pointer field).
    fn get(&self) -> *mut c_void {
        self.0
    }
}

/// Registers `handler` under `id` (below 0xFF00, which memwire keeps for
/// itself), called with `user` for every active message sent to it. An id
/// already taken is `MW_ERR_INVALID_ARGUMENT`. The handler may run on any
/// thread of the process that makes progress.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `handler` a function that may be
/// called until `mw_unregister_handler(id)` or `mw_finalize`, with `user`.
#[no_mangle]
pub unsafe extern "C" fn mw_register_handler(
    ep: *mut mw_endpoint,
    id: u16,
    handler: mw_am_handler,
    user: *mut c_void,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        let handler = handler.ok_or_else(|| Failure::null("handler"))?;
        let user = User(user);
        owner.ep.register_handler(id, move |ctx: &mut AmContext, msg: &AmMessage<'_>| {
            let message = mw_am_message {
                source: msg.source,
                handler: msg.handler,
                args: msg.args.as_ptr(),
                nargs: msg.args.len(),
                payload: msg.payload.as_ptr().cast(),
                len: msg.payload.len(),
            };
            let ctx = std::ptr::from_mut(ctx).cast::<mw_am_context>();
            // SAFETY: the registration's contract: `handler` may be called
            // with `user`; `ctx` and `message` are valid for the call.
            as_callback(|| unsafe { handler(ctx, &message, user.get()) });
        })?;
        Ok(())
    })
}

/// Removes the handler under `id` and sets `*removed` (unless NULL) to
/// whether there was one. Later requests to it fail at their initiator
/// with `MW_ERR_NO_HANDLER`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `removed` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_unregister_handler(ep: *mut mw_endpoint, id: u16, removed: *mut bool) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out_opt(removed, "removed")?) };
        let was = owner.ep.unregister_handler(id);
        if let Some(out) = out {
            out.set(was);
        }
        Ok(())
    })
}

/// Runs handler `id` at `rank` with `nargs` arguments and `len` bytes of
/// `payload`, waits for its reply and stores it in `*reply` (its payload in
/// `reply->payload`, which holds `reply->capacity` bytes). A reply payload
/// longer than that is `MW_ERR_TRUNCATED` (its length still in
/// `reply->len`, nothing written to the buffer); no handler under `id` at
/// `rank` is `MW_ERR_NO_HANDLER`. `reply` may be NULL when no reply
/// payload is expected and the reply's arguments are not wanted.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `args` NULL (only if `nargs` is 0)
/// or readable for `nargs` values; `payload` NULL (only if `len` is 0) or
/// readable for `len` bytes; `reply` NULL or valid for reads and writes,
/// its `payload` writable for `capacity` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature: target, handler, arguments, payload, reply
pub unsafe extern "C" fn mw_am_request(
    ep: *mut mw_endpoint,
    rank: u32,
    id: u16,
    args: *const u64,
    nargs: usize,
    payload: *const c_void,
    len: usize,
    reply: *mut mw_am_reply_data,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, args, payload) =
            unsafe { (endpoint(ep)?, ffi::array(args, nargs, "args")?, ffi::bytes(payload, len, "payload")?) };
        // SAFETY: forwarded contract: checked before anything is sent.
        let reply = unsafe { check_reply(reply) }?;
        let mut got = AmReplyData::default();
        owner.ep.am_request_into(rank, id, args, payload, &mut got)?;
        // SAFETY: forwarded contract (checked above).
        unsafe { fill_reply(reply, &got) }
    })
}

/// Checks the caller's reply struct and its buffer (`reply->payload`,
/// `reply->capacity`) before anything is sent or waited for; `None` when
/// `reply` is NULL.
///
/// # Safety
/// `reply` NULL or valid for reads and writes for `'a`, its `payload`
/// writable for `capacity` bytes.
unsafe fn check_reply<'a>(reply: *mut mw_am_reply_data) -> Result<Option<&'a mut mw_am_reply_data>, Failure> {
    // SAFETY: forwarded contract.
    let reply = unsafe { ffi::obj_mut_opt(reply, "reply") }?;
    if let Some(r) = &reply {
        // SAFETY: forwarded contract.
        unsafe { ffi::bytes_mut(r.payload, r.capacity, "reply->payload") }?;
    }
    Ok(reply)
}

/// Stores the handler's reply `got` in the caller's `reply` (see
/// `mw_am_request`): a payload larger than `reply->capacity`, or any
/// payload with no `reply`, is `MW_ERR_TRUNCATED` (its length still in
/// `reply->len`, nothing written to the buffer).
///
/// # Safety
/// `reply`, if `Some`, passed `check_reply`, whose contract still holds.
unsafe fn fill_reply(reply: Option<&mut mw_am_reply_data>, got: &AmReplyData) -> Result<(), Failure> {
    let Some(reply) = reply else {
        return if got.payload.is_empty() { Ok(()) } else { Err(Failure::from(mw_core::Error::Truncated)) };
    };
    reply.nargs = got.args.len();
    reply.args = [0; MW_AM_MAX_ARGS];
    reply.args[..got.args.len()].copy_from_slice(&got.args);
    reply.len = got.payload.len();
    if got.payload.len() > reply.capacity {
        return Err(Failure::from(mw_core::Error::Truncated));
    }
    // SAFETY: forwarded contract (checked by `check_reply`).
    let out = unsafe { ffi::bytes_mut(reply.payload, reply.capacity, "reply->payload") }?;
    out[..got.payload.len()].copy_from_slice(&got.payload);
    Ok(())
}

/// Starts `mw_am_request` without waiting: runs handler `id` at `rank`
/// with `nargs` arguments and `len` bytes of `payload`, and stores the
/// request's handle in `*handle`. `args` and `payload` may be reused as
/// soon as this returns (a payload above the eager limit is copied for the
/// target to pull). Take the reply with `mw_wait_reply`; `mw_wait` waits
/// and discards it, `mw_test` polls, `mw_handle_free` abandons it (the
/// handler still runs). No handler under `id` at `rank` completes the
/// handle with `MW_ERR_NO_HANDLER`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `args` NULL (only if `nargs` is 0)
/// or readable for `nargs` values; `payload` NULL (only if `len` is 0) or
/// readable for `len` bytes; `handle` NULL or valid for writes.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature: target, handler, arguments, payload, handle
pub unsafe extern "C" fn mw_am_request_nb(
    ep: *mut mw_endpoint,
    rank: u32,
    id: u16,
    args: *const u64,
    nargs: usize,
    payload: *const c_void,
    len: usize,
    handle: *mut *mut mw_handle,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, args, payload, out) = unsafe {
            (
                endpoint(ep)?,
                ffi::array(args, nargs, "args")?,
                ffi::bytes(payload, len, "payload")?,
                ffi::out(handle, "handle")?,
            )
        };
        let h = owner.ep.am_request_nb(rank, id, args, payload)?;
        handle::give_am(owner, h, out);
        Ok(())
    })
}

/// Waits for a request from `mw_am_request_nb`, stores the handler's reply
/// in `*reply` as `mw_am_request` does (a payload longer than
/// `reply->capacity` is `MW_ERR_TRUNCATED`; `reply` may be NULL when no
/// reply payload is expected), frees the handle and sets `*handle` to
/// NULL. The handle is consumed whatever the result; one of another kind
/// is waited for and answered with `MW_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `handle` must be NULL or point to the caller's variable holding NULL or
/// a handle from this library, used by no other thread; `reply` NULL or
/// valid for reads and writes, its `payload` writable for `capacity` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_wait_reply(handle: *mut *mut mw_handle, reply: *mut mw_am_reply_data) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract; `reply` is checked before the handle is taken.
        let reply = unsafe { check_reply(reply) }?;
        // SAFETY: forwarded contract.
        let mut h = unsafe { ffi::take(handle, "handle") }?.ok_or_else(|| Failure::null("*handle"))?;
        let got = handle::wait_reply(&mut h)?;
        // SAFETY: `reply` passed `check_reply` above.
        unsafe { fill_reply(reply, &got) }
    })
}

/// Sends a one-way active message to handler `id` at `rank` from
/// application code (the form of `mw_am_send` outside a handler): returns
/// once it is queued, and `args` and `payload` may be reused at once. It
/// is delivered reliably and, toward one target, in order with this rank's
/// other operations, and its handler runs once there; nothing comes back:
/// an unknown `id` or a failing handler at the target is only counted there
/// (`am_no_handler`, `am_handler_panics` in `mw_stats`), and `mw_flush`
/// does not wait for it. Use `mw_am_request_nb` to learn the outcome.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `args` NULL (only if `nargs` is 0)
/// or readable for `nargs` values; `payload` NULL (only if `len` is 0) or
/// readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_am_post(
    ep: *mut mw_endpoint,
    rank: u32,
    id: u16,
    args: *const u64,
    nargs: usize,
    payload: *const c_void,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, args, payload) =
            unsafe { (endpoint(ep)?, ffi::array(args, nargs, "args")?, ffi::bytes(payload, len, "payload")?) };
        Ok(owner.ep.am_send(rank, id, args, payload)?)
    })
}

/// The handler's context behind `ctx`.
///
/// # Safety
/// `ctx` must be NULL or the context passed to the running handler.
unsafe fn context<'a>(ctx: *mut mw_am_context) -> Result<&'a mut AmContext, Failure> {
    if ctx.is_null() {
        return Err(Failure::null("ctx"));
    }
    // SAFETY: the trampoline in `mw_register_handler` made `ctx` from a
    // `&mut AmContext` that lives for the handler call, which is still
    // running (the contract); nothing else uses it meanwhile.
    Ok(unsafe { &mut *ctx.cast::<AmContext>() })
}

/// From inside a handler: answers the request with `nargs` arguments and
/// `len` bytes of `payload` (copied before this returns). At most once per
/// request; a request sent without wanting a reply ignores it.
///
/// # Safety
/// `ctx` must be NULL or the running handler's context; `args` NULL (only if
/// `nargs` is 0) or readable for `nargs` values; `payload` NULL (only if
/// `len` is 0) or readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_am_reply(
    ctx: *mut mw_am_context,
    args: *const u64,
    nargs: usize,
    payload: *const c_void,
    len: usize,
) -> mw_status {
    guard_callback(|| {
        // SAFETY: forwarded contract.
        let (ctx, args, payload) =
            unsafe { (context(ctx)?, ffi::array(args, nargs, "args")?, ffi::bytes(payload, len, "payload")?) };
        Ok(ctx.reply(args, payload)?)
    })
}

/// From inside a handler: queues a one-way active message to handler `id`
/// at `rank` (sent when the handler returns; no reply; an error at the
/// target is only counted there).
///
/// # Safety
/// As for `mw_am_reply`.
#[no_mangle]
pub unsafe extern "C" fn mw_am_send(
    ctx: *mut mw_am_context,
    rank: u32,
    id: u16,
    args: *const u64,
    nargs: usize,
    payload: *const c_void,
    len: usize,
) -> mw_status {
    guard_callback(|| {
        // SAFETY: forwarded contract.
        let (ctx, args, payload) =
            unsafe { (context(ctx)?, ffi::array(args, nargs, "args")?, ffi::bytes(payload, len, "payload")?) };
        Ok(ctx.am_send(rank, id, args, payload)?)
    })
}

/// From inside a handler: stores the requesting rank in `*source` and
/// whether it waits for a reply in `*wants_reply` (either may be NULL).
///
/// # Safety
/// `ctx` must be NULL or the running handler's context; the outputs NULL or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_am_source(ctx: *mut mw_am_context, source: *mut u32, wants_reply: *mut bool) -> mw_status {
    guard_callback(|| {
        // SAFETY: forwarded contract.
        let (ctx, source, wants) =
            unsafe { (context(ctx)?, ffi::out_opt(source, "source")?, ffi::out_opt(wants_reply, "wants_reply")?) };
        if let Some(out) = source {
            out.set(ctx.source());
        }
        if let Some(out) = wants {
            out.set(ctx.wants_reply());
        }
        Ok(())
    })
}
