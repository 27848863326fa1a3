//! Status codes: the one table from `mw_core::Error` to `mw_status`, their
//! messages (`mw_strerror`), the per-thread detail of the last failure
//! (`mw_last_error`), and the guard every exported function runs its body in.
//!
//! Owns: turning every outcome, a panic included, into a status. Must not:
//! let a panic cross the FFI boundary.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use mw_core::Error;

/// The result of every fallible memwire call. `MW_OK` (0) is success; every
/// other value is an error, described by `mw_strerror` and, in more detail,
/// by `mw_last_error`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum mw_status {
    /// Success.
    MW_OK = 0,
    /// An argument is invalid (unknown enum value, bad size, stride or mask).
    MW_ERR_INVALID_ARGUMENT = 1,
    /// A required pointer is NULL (or misaligned for its type).
    MW_ERR_NULL_POINTER = 2,
    /// The target rank is outside `0..size`.
    MW_ERR_BAD_RANK = 3,
    /// The peer stopped answering; the operation may or may not have taken effect.
    MW_ERR_PEER_UNREACHABLE = 4,
    /// The target does not know the region key.
    MW_ERR_BAD_KEY = 5,
    /// The access falls outside the region (the target's memory is untouched).
    MW_ERR_OUT_OF_BOUNDS = 6,
    /// The region does not grant the access the operation needs.
    MW_ERR_NO_PERMISSION = 7,
    /// An atomic or signal word is not aligned to its width.
    MW_ERR_MISALIGNED = 8,
    /// The target does not support the operation (e.g. an unset address register).
    MW_ERR_UNSUPPORTED = 9,
    /// No handler is registered under that id at the target.
    MW_ERR_NO_HANDLER = 10,
    /// The data did not fit the buffer.
    MW_ERR_TRUNCATED = 11,
    /// The operation would have to wait (e.g. too many operations outstanding).
    MW_ERR_WOULD_BLOCK = 12,
    /// Waiting ran past its deadline.
    MW_ERR_TIMEOUT = 13,
    /// Joining the job failed (launcher, rendezvous, address exchange).
    MW_ERR_BOOTSTRAP = 14,
    /// The operating system refused something (socket, memory).
    MW_ERR_IO = 15,
    /// The target answered with a status this library does not know.
    MW_ERR_REMOTE = 16,
    /// The object is still in use: `mw_init` while an endpoint exists, or
    /// `mw_finalize` while regions or handles of the endpoint exist.
    MW_ERR_IN_USE = 17,
    /// A bug inside memwire was caught (a panic); the call had no defined effect.
    MW_ERR_INTERNAL = 18,
    /// The receiver gave the message up (its receive timed out or its handle
    /// was freed) before all of it arrived: the message was not delivered.
    MW_ERR_CANCELLED = 19,
    /// A collective on this team (or the endpoint's own gather) timed out
    /// earlier on this rank: its members are out of step; free the team.
    MW_ERR_TEAM_BROKEN = 20,
}

use mw_status::*;

/// The one table from the endpoint's errors to C status codes.
fn status_of(error: &Error) -> mw_status {
    match error {
        Error::BadRank { .. } => MW_ERR_BAD_RANK,
        Error::PeerUnreachable { .. } => MW_ERR_PEER_UNREACHABLE,
        Error::BadKey => MW_ERR_BAD_KEY,
        Error::OutOfBounds => MW_ERR_OUT_OF_BOUNDS,
        Error::NoPermission => MW_ERR_NO_PERMISSION,
        Error::Misaligned => MW_ERR_MISALIGNED,
        Error::Unsupported => MW_ERR_UNSUPPORTED,
        Error::NoHandler => MW_ERR_NO_HANDLER,
        Error::Truncated => MW_ERR_TRUNCATED,
        Error::WouldBlock => MW_ERR_WOULD_BLOCK,
        Error::InvalidArgument(_) => MW_ERR_INVALID_ARGUMENT,
        Error::Timeout => MW_ERR_TIMEOUT,
        Error::Bootstrap(_) => MW_ERR_BOOTSTRAP,
        Error::Io(_) => MW_ERR_IO,
        Error::Remote(_) => MW_ERR_REMOTE,
        Error::Cancelled => MW_ERR_CANCELLED,
        Error::TeamBroken => MW_ERR_TEAM_BROKEN,
        // A variant added to core after this table: still an error, never OK.
        _ => MW_ERR_INTERNAL,
    }
}

/// Static text for a status (also for values that are not statuses).
fn message_of(status: c_int) -> &'static CStr {
    const TABLE: [&CStr; 21] = [
        c"success",
        c"invalid argument",
        c"null pointer",
        c"rank out of range",
        c"peer unreachable",
        c"unknown region key at the target",
        c"access outside the region's bounds",
        c"the region does not permit this access",
        c"word not aligned to its width",
        c"operation not supported by the target",
        c"no handler registered at the target",
        c"data truncated: buffer too small",
        c"operation would block",
        c"timed out",
        c"bootstrap failed",
        c"I/O error",
        c"remote error",
        c"object still in use",
        c"internal error (a bug in memwire; please report it)",
        c"cancelled by the receiver: the message was not delivered",
        c"a collective timed out on this team earlier: free it",
    ];
    usize::try_from(status).ok().and_then(|i| TABLE.get(i)).copied().unwrap_or(c"unknown status code")
}

/// Why a call failed: the status to return and the detail for `mw_last_error`.
#[derive(Debug)]
pub(crate) struct Failure {
    pub status: mw_status,
    pub message: Cow<'static, str>,
}

impl Failure {
    /// A required pointer argument is NULL or misaligned.
    pub fn null(what: &'static str) -> Failure {
        Failure { status: MW_ERR_NULL_POINTER, message: Cow::Owned(format!("{what} is NULL or misaligned")) }
    }

    /// An argument is invalid.
    pub fn invalid(why: &'static str) -> Failure {
        Failure { status: MW_ERR_INVALID_ARGUMENT, message: Cow::Borrowed(why) }
    }

    /// The object is still in use.
    pub fn in_use(why: &'static str) -> Failure {
        Failure { status: MW_ERR_IN_USE, message: Cow::Borrowed(why) }
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        Failure { status: status_of(&error), message: Cow::Owned(error.to_string()) }
    }
}

/// Result of an exported function's body.
pub(crate) type Outcome = Result<(), Failure>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // During thread teardown the slot may be gone; the status still tells.
    let _ = LAST_ERROR.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            *slot = text;
        }
    });
}

thread_local! {
    /// This thread runs a C callback (an active-message handler, a FIFO
    /// watermark) inside the progress engine, with the endpoint locked.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` as a C callback from the progress engine: meanwhile every
/// exported function but the handler context's refuses (see [`guard`]).
pub(crate) fn as_callback<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_CALLBACK.with(|flag| flag.set(self.0));
        }
    }
    let _reset = Reset(IN_CALLBACK.with(|flag| flag.replace(true)));
    f()
}

/// Runs an exported function's body: a failure becomes its status (and the
/// thread's last-error text), a panic becomes `MW_ERR_INTERNAL`. Nothing
/// unwinds into C. Called from inside a C callback (which runs with the
/// endpoint locked, so any call that takes the endpoint would wait for
/// itself forever) it refuses with `MW_ERR_IN_USE`.
pub(crate) fn guard(body: impl FnOnce() -> Outcome) -> mw_status {
    if IN_CALLBACK.with(Cell::get) {
        return guard_callback(|| {
            Err(Failure::in_use(
                "called from inside an active-message handler or FIFO watermark callback: \
                 only the mw_am_* context functions may be used there",
            ))
        });
    }
    guard_callback(body)
}

/// [`guard`] without the callback check: for the functions a handler may
/// call (`mw_am_reply`, `mw_am_send`, ...), which use only its context.
pub(crate) fn guard_callback(body: impl FnOnce() -> Outcome) -> mw_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => MW_OK,
        Ok(Err(failure)) => {
            set_last_error(&failure.message);
            failure.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            // Dropping the payload could itself panic; leak it instead.
            std::mem::forget(payload);
            set_last_error(&format!("internal error: {what}"));
            MW_ERR_INTERNAL
        }
    }
}

/// A short, static, English description of `status` (any integer is
/// accepted; unknown values get "unknown status code"). Never NULL; the
/// string must not be freed.
#[no_mangle]
pub extern "C" fn mw_strerror(status: c_int) -> *const c_char {
    message_of(status).as_ptr()
}

/// Details of the last failure on the calling thread (e.g. which argument
/// was invalid, or the bootstrap's error), or "" if none failed yet. Only
/// failing calls set it. Never NULL; the text stays valid until the next
/// failing memwire call on this thread; it must not be freed.
#[no_mangle]
pub extern "C" fn mw_last_error() -> *const c_char {
    let fallback = c"".as_ptr();
    catch_unwind(|| {
        LAST_ERROR
            .try_with(|slot| match slot.try_borrow() {
                // The CString's buffer lives in the thread-local until the next
                // failure replaces it, as documented.
                Ok(text) => text.as_ptr(),
                Err(_) => fallback,
            })
            .unwrap_or(fallback)
    })
    .unwrap_or(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_maps_to_a_distinct_non_ok_status() {
        let errors = [
            Error::BadRank { rank: 9, size: 2 },
            Error::PeerUnreachable { rank: 1 },
            Error::BadKey,
            Error::OutOfBounds,
            Error::NoPermission,
            Error::Misaligned,
            Error::Unsupported,
            Error::NoHandler,
            Error::Truncated,
            Error::WouldBlock,
            Error::InvalidArgument("x"),
            Error::Timeout,
            Error::Bootstrap("x".into()),
            Error::Io("x".into()),
            Error::Remote(200),
            Error::Cancelled,
            Error::TeamBroken,
        ];
        let mut seen = std::collections::HashSet::new();
        for error in &errors {
            let status = status_of(error);
            assert_ne!(status, MW_OK);
            assert_ne!(status, MW_ERR_INTERNAL);
            assert!(seen.insert(status as i32), "{error:?} shares a status");
        }
    }

    #[test]
    fn strerror_covers_every_status_and_unknown_values() {
        for code in 0..=MW_ERR_TEAM_BROKEN as c_int {
            assert_ne!(message_of(code), c"unknown status code", "status {code} has no message");
        }
        assert_eq!(message_of(-1), c"unknown status code");
        assert_eq!(message_of(10_000), c"unknown status code");
        assert_eq!(message_of(MW_ERR_BAD_KEY as c_int), c"unknown region key at the target");
    }

    #[test]
    fn a_panic_becomes_internal_error_with_its_message() {
        let status = guard(|| panic!("boom {}", 42));
        assert_eq!(status, MW_ERR_INTERNAL);
        // SAFETY: mw_last_error returns a NUL-terminated string valid until the
        // next failure on this thread.
        let text = unsafe { CStr::from_ptr(mw_last_error()) };
        assert_eq!(text.to_str().unwrap(), "internal error: boom 42");
    }

    #[test]
    fn failures_set_last_error_and_success_keeps_it() {
        assert_eq!(guard(|| Err(Failure::from(Error::InvalidArgument("bad stride")))), MW_ERR_INVALID_ARGUMENT);
        assert_eq!(guard(|| Ok(())), MW_OK);
        // SAFETY: as above.
        let text = unsafe { CStr::from_ptr(mw_last_error()) };
        assert_eq!(text.to_str().unwrap(), "invalid argument: bad stride");
        assert_eq!(guard(|| Err(Failure::null("ep"))), MW_ERR_NULL_POINTER);
    }
}
