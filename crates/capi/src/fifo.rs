//! Remote FIFOs as C sees them (MBCF's Memory-Based FIFO): the owner creates
//! a FIFO of fixed-size slots and pops; any rank pushes by `(rank, key)`. A
//! full FIFO pushes back on the pusher (it waits, or `mw_fifo_try_push`
//! answers `MW_ERR_WOULD_BLOCK`); nothing is dropped.
//!
//! Owns: `mw_fifo`, which keeps a `Fifo<'static>` borrowing the endpoint
//! (counted like regions, see `endpoint`), and the C watermark callback
//! (run as a callback: see `status::as_callback`). Must not: queue entries
//! itself (core's ring does).

use std::ffi::c_void;

use mw_core::{Endpoint, Fifo, FifoKey};

use crate::endpoint::{endpoint, mw_endpoint};
use crate::ffi;
use crate::status::{as_callback, guard, mw_status};

/// A FIFO this rank owns. Opaque; created by `mw_fifo_create`, destroyed by
/// `mw_fifo_free`.
#[derive(Debug)]
pub struct mw_fifo {
    /// Always `Some` until dropped; taken first so the FIFO goes before the
    /// endpoint stops counting it.
    fifo: Option<Fifo<'static>>,
    owner: &'static mw_endpoint,
}

impl mw_fifo {
    fn get(&self) -> &Fifo<'static> {
        self.fifo.as_ref().expect("a FIFO is present until it is dropped")
    }
}

impl Drop for mw_fifo {
    fn drop(&mut self) {
        drop(self.fifo.take());
        self.owner.release();
    }
}

/// A watermark callback: `entries` waiting when a push filled the FIFO to
/// ¾ or more. Runs in the progress engine like a handler: it must return
/// promptly and call no memwire function (they fail with `MW_ERR_IN_USE`
/// there); set a flag instead.
pub type mw_fifo_watermark = Option<unsafe extern "C" fn(entries: usize, user: *mut c_void)>;

/// The watermark's user pointer (see `am::User`).
struct User(*mut c_void);
// SAFETY: only passed back to the C callback, never dereferenced here;
// `mw_fifo_set_watermark` documents that it may run on any thread.
unsafe impl Send for User {}

impl User {
    /// The pointer (a method, so closures capture the whole `User`, which is
    /// `Send`, not its bare pointer field).
    fn get(&self) -> *mut c_void {
        self.0
    }
}

/// Creates a FIFO of `slots` entries of at most `slot_size` bytes (all
/// allocated now; `slot_size` at most the chunk size, 256 KiB by default)
/// and stores it in `*fifo`. Others push to it with this rank and its key.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `fifo` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fifo_create(
    ep: *mut mw_endpoint,
    slot_size: usize,
    slots: usize,
    fifo: *mut *mut mw_fifo,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(fifo, "fifo")?) };
        let created = owner.ep.create_fifo(slot_size, slots)?;
        owner.retain();
        out.set(ffi::give(mw_fifo { fifo: Some(created), owner }));
        Ok(())
    })
}

/// Destroys the FIFO (entries still in it are dropped; later pushes to it
/// fail with `MW_ERR_BAD_KEY`) and sets `*fifo` to NULL. A NULL `*fifo` is
/// a no-op.
///
/// # Safety
/// `fifo` must be NULL or point to the caller's variable holding NULL or a
/// FIFO from `mw_fifo_create`, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn mw_fifo_free(fifo: *mut *mut mw_fifo) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        drop(unsafe { ffi::take(fifo, "fifo") }?);
        Ok(())
    })
}

/// Stores the FIFO's key (what other ranks push to, with this rank) in `*key`.
///
/// # Safety
/// `fifo` must be NULL or a live FIFO; `key` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fifo_key(fifo: *const mw_fifo, key: *mut u64) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (fifo, out) = unsafe { (ffi::obj(fifo, "fifo")?, ffi::out(key, "key")?) };
        out.set(fifo.get().key().0);
        Ok(())
    })
}

/// Stores the number of entries waiting in `*entries`.
///
/// # Safety
/// `fifo` must be NULL or a live FIFO; `entries` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fifo_len(fifo: *const mw_fifo, entries: *mut usize) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (fifo, out) = unsafe { (ffi::obj(fifo, "fifo")?, ffi::out(entries, "entries")?) };
        out.set(fifo.get().len());
        Ok(())
    })
}

/// The two pushes: `len` bytes of `data` to FIFO `key` of `rank` by `push`.
///
/// # Safety
/// As for `mw_fifo_push`.
unsafe fn push_by(
    ep: *mut mw_endpoint,
    rank: u32,
    key: u64,
    data: *const c_void,
    len: usize,
    push: fn(&Endpoint, u32, FifoKey, &[u8]) -> mw_core::Result<()>,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, data) = unsafe { (endpoint(ep)?, ffi::bytes(data, len, "data")?) };
        Ok(push(&owner.ep, rank, FifoKey(key), data)?)
    })
}

/// Appends `len` bytes of `data` to FIFO `key` of `rank`, waiting while it
/// is full (into another rank's FIFO at most the endpoint's wait timeout (`MW_WAIT_TIMEOUT_MS`, none by default);
/// into this rank's own at most the operation timeout, `MW_OP_TIMEOUT_MS`:
/// then `MW_ERR_TIMEOUT`, nothing appended). An entry longer than its slots is
/// `MW_ERR_TRUNCATED` (nothing appended), an unknown key `MW_ERR_BAD_KEY`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `data` NULL (only if `len` is 0)
/// or readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_fifo_push(
    ep: *mut mw_endpoint,
    rank: u32,
    key: u64,
    data: *const c_void,
    len: usize,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { push_by(ep, rank, key, data, len, Endpoint::fifo_push) }
}

/// `mw_fifo_push` without waiting: a full FIFO is `MW_ERR_WOULD_BLOCK` and
/// nothing was appended.
///
/// # Safety
/// As for `mw_fifo_push`.
#[no_mangle]
pub unsafe extern "C" fn mw_fifo_try_push(
    ep: *mut mw_endpoint,
    rank: u32,
    key: u64,
    data: *const c_void,
    len: usize,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { push_by(ep, rank, key, data, len, Endpoint::try_fifo_push) }
}

/// Waits for an entry, takes it into `buf` (`capacity` bytes) and stores
/// its length in `*len`. An entry longer than `capacity` stays queued:
/// `MW_ERR_TRUNCATED`. Waits at most the endpoint's wait timeout (`MW_WAIT_TIMEOUT_MS`, none by default),
/// then `MW_ERR_TIMEOUT`.
///
/// # Safety
/// `fifo` must be NULL or a live FIFO; `buf` NULL (only if `capacity` is 0)
/// or writable for `capacity` bytes; `len` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fifo_pop(
    fifo: *const mw_fifo,
    buf: *mut c_void,
    capacity: usize,
    len: *mut usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (fifo, buf, out) =
            unsafe { (ffi::obj(fifo, "fifo")?, ffi::bytes_mut(buf, capacity, "buf")?, ffi::out(len, "len")?) };
        out.set(fifo.get().pop(buf)?);
        Ok(())
    })
}

/// `mw_fifo_pop`, giving up after `timeout_ms` milliseconds with
/// `MW_ERR_TIMEOUT`; nothing is taken then.
///
/// # Safety
/// As for `mw_fifo_pop`.
#[no_mangle]
pub unsafe extern "C" fn mw_fifo_pop_timeout(
    fifo: *const mw_fifo,
    buf: *mut c_void,
    capacity: usize,
    len: *mut usize,
    timeout_ms: u64,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (fifo, buf, out) =
            unsafe { (ffi::obj(fifo, "fifo")?, ffi::bytes_mut(buf, capacity, "buf")?, ffi::out(len, "len")?) };
        out.set(fifo.get().pop_timeout(buf, std::time::Duration::from_millis(timeout_ms))?);
        Ok(())
    })
}

/// Takes the oldest entry into `buf` if there is one: sets `*found`, and
/// its length in `*len`. Makes progress once. An entry longer than
/// `capacity` stays queued: `MW_ERR_TRUNCATED`.
///
/// # Safety
/// As for `mw_fifo_pop`; `found` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_fifo_try_pop(
    fifo: *const mw_fifo,
    buf: *mut c_void,
    capacity: usize,
    found: *mut bool,
    len: *mut usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (fifo, buf, found, out) = unsafe {
            (
                ffi::obj(fifo, "fifo")?,
                ffi::bytes_mut(buf, capacity, "buf")?,
                ffi::out(found, "found")?,
                ffi::out(len, "len")?,
            )
        };
        let popped = fifo.get().try_pop(buf)?;
        found.set(popped.is_some());
        out.set(popped.unwrap_or(0));
        Ok(())
    })
}

/// Calls `callback(entries, user)` whenever a push fills the FIFO to ¾ or
/// more from below (Cenju-4's quarter-buffer interrupt; re-armed once pops
/// take it below ¾). Replaces an earlier callback; NULL removes it. It runs
/// in the progress engine, on whichever thread makes progress.
///
/// # Safety
/// `fifo` must be NULL or a live FIFO; `callback` NULL or a function that
/// may be called with `user` from any thread until the FIFO is freed.
#[no_mangle]
pub unsafe extern "C" fn mw_fifo_set_watermark(
    fifo: *const mw_fifo,
    callback: mw_fifo_watermark,
    user: *mut c_void,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let fifo = unsafe { ffi::obj(fifo, "fifo") }?;
        let Some(callback) = callback else {
            fifo.get().set_watermark(|_| {});
            return Ok(());
        };
        let user = User(user);
        fifo.get().set_watermark(move |entries| {
            // SAFETY: the registration's contract.
            as_callback(|| unsafe { callback(entries, user.get()) });
        });
        Ok(())
    })
}
