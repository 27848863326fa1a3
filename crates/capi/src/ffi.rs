//! The unsafe island of the C API: turning pointers received from C into
//! Rust references, slices and boxes, after every check that can be made
//! (NULL, alignment, sizes that overflow). What cannot be checked (that a
//! non-NULL pointer really points to live memory of the right kind) is the
//! caller's contract, written on each exported function.
//!
//! Owns: every dereference of a C pointer and every `Box::from_raw`. Must
//! not: call into the endpoint (the operation modules do, with what this
//! module hands them).

use std::ffi::{c_char, c_void, CStr};
use std::marker::PhantomData;

use crate::status::Failure;

/// Largest byte count a Rust slice may have.
const MAX_LEN: usize = isize::MAX as usize;

fn usable<T>(ptr: *const T) -> bool {
    !ptr.is_null() && ptr.is_aligned()
}

/// A shared reference to a C-held object.
///
/// # Safety
/// If `ptr` is non-NULL it must point to a live `T` created by this library
/// that nothing frees or mutably borrows for `'a`.
pub(crate) unsafe fn obj<'a, T>(ptr: *const T, what: &'static str) -> Result<&'a T, Failure> {
    if !usable(ptr) {
        return Err(Failure::null(what));
    }
    // SAFETY: non-NULL and aligned (checked); live and unaliased per the contract.
    Ok(unsafe { &*ptr })
}

/// An exclusive reference to a C-held object.
///
/// # Safety
/// If `ptr` is non-NULL it must point to a live `T` created by this library,
/// used by no other thread or reference for `'a`.
pub(crate) unsafe fn obj_mut<'a, T>(ptr: *mut T, what: &'static str) -> Result<&'a mut T, Failure> {
    if !usable(ptr) {
        return Err(Failure::null(what));
    }
    // SAFETY: non-NULL and aligned (checked); exclusive per the contract.
    Ok(unsafe { &mut *ptr })
}

/// An optional in-out C struct (NULL means "not wanted").
///
/// # Safety
/// If `ptr` is non-NULL it must be valid for reads and writes of a `T`,
/// used by no other thread or reference for `'a`.
pub(crate) unsafe fn obj_mut_opt<'a, T>(ptr: *mut T, what: &'static str) -> Result<Option<&'a mut T>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { obj_mut(ptr, what) }.map(Some)
}

/// `len` bytes at `ptr` (NULL is accepted when `len` is 0).
///
/// # Safety
/// If `len > 0`, `ptr` must be valid for reads of `len` bytes that nothing
/// writes for `'a`.
pub(crate) unsafe fn bytes<'a>(ptr: *const c_void, len: usize, what: &'static str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::null(what));
    }
    if len > MAX_LEN {
        return Err(Failure::invalid("length exceeds the address space"));
    }
    // SAFETY: non-NULL, u8 needs no alignment, len <= isize::MAX (checked);
    // readable and not written for 'a per the contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// `len` writable bytes at `ptr` (NULL is accepted when `len` is 0).
///
/// # Safety
/// If `len > 0`, `ptr` must be valid for reads and writes of `len` bytes that
/// nothing else accesses for `'a`.
pub(crate) unsafe fn bytes_mut<'a>(ptr: *mut c_void, len: usize, what: &'static str) -> Result<&'a mut [u8], Failure> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Failure::null(what));
    }
    if len > MAX_LEN {
        return Err(Failure::invalid("length exceeds the address space"));
    }
    // SAFETY: non-NULL, u8 needs no alignment, len <= isize::MAX (checked);
    // exclusively accessible for 'a per the contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
}

/// `count` elements at `ptr` (NULL is accepted when `count` is 0).
///
/// # Safety
/// If `count > 0`, `ptr` must be valid for reads of `count` `T`s that
/// nothing writes for `'a`.
pub(crate) unsafe fn array<'a, T>(ptr: *const T, count: usize, what: &'static str) -> Result<&'a [T], Failure> {
    if count == 0 {
        return Ok(&[]);
    }
    if !usable(ptr) {
        return Err(Failure::null(what));
    }
    if count.checked_mul(size_of::<T>()).is_none_or(|n| n > MAX_LEN) {
        return Err(Failure::invalid("array length exceeds the address space"));
    }
    // SAFETY: non-NULL, aligned, total size <= isize::MAX (checked); readable
    // per the contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, count) })
}

/// `count` writable elements at `ptr` (NULL is accepted when `count` is 0).
///
/// # Safety
/// If `count > 0`, `ptr` must be valid for reads and writes of `count` `T`s
/// that nothing else accesses for `'a`.
pub(crate) unsafe fn array_mut<'a, T>(ptr: *mut T, count: usize, what: &'static str) -> Result<&'a mut [T], Failure> {
    if count == 0 {
        return Ok(&mut []);
    }
    if !usable(ptr) {
        return Err(Failure::null(what));
    }
    if count.checked_mul(size_of::<T>()).is_none_or(|n| n > MAX_LEN) {
        return Err(Failure::invalid("array length exceeds the address space"));
    }
    // SAFETY: non-NULL, aligned, total size <= isize::MAX (checked);
    // exclusively accessible per the contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, count) })
}

/// A NUL-terminated UTF-8 string from C.
///
/// # Safety
/// If `ptr` is non-NULL it must point to a NUL-terminated string that
/// nothing writes for `'a`.
pub(crate) unsafe fn str<'a>(ptr: *const c_char, what: &'static str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: non-NULL (checked); NUL-terminated and unchanging for 'a per the contract.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().map_err(|_| Failure::invalid("a string argument is not UTF-8"))
}

/// The leading `u64` of a size-versioned C struct `T` (its `size` field),
/// read without assuming the rest of `T` is there.
///
/// # Safety
/// If `ptr` is non-NULL it must be valid for reads of 8 bytes; `T` must
/// begin with a `u64`.
pub(crate) unsafe fn leading_u64<T>(ptr: *const T, what: &'static str) -> Result<u64, Failure> {
    if !usable(ptr) || !ptr.cast::<u64>().is_aligned() {
        return Err(Failure::null(what));
    }
    // SAFETY: non-NULL and aligned (checked); 8 readable bytes per the contract.
    Ok(unsafe { ptr.cast::<u64>().read() })
}

/// Writes the first `len` bytes of `value` to `dst`: a C struct versioned
/// by its size, whose caller may know an older, shorter layout (a prefix of
/// `T`'s), so that nothing past the caller's struct is written.
///
/// # Safety
/// `dst` must be valid for writes of `len` bytes; `T` must have no padding
/// (every byte of `value` is initialized); `len <= size_of::<T>()`.
pub(crate) unsafe fn write_prefix<T: Copy>(dst: *mut T, value: &T, len: usize) {
    debug_assert!(len <= size_of::<T>());
    // SAFETY: `value` is `size_of::<T>()` initialized bytes (no padding,
    // the contract) and `len` fits in it; `dst` is writable for `len` bytes
    // and cannot overlap the local `value`.
    unsafe { std::ptr::copy_nonoverlapping(std::ptr::from_ref(value).cast::<u8>(), dst.cast::<u8>(), len) }
}

/// An output parameter, checked up front and written only on success.
#[derive(Debug)]
pub(crate) struct Out<'a, T> {
    ptr: *mut T,
    _borrow: PhantomData<&'a mut T>,
}

impl<T> Out<'_, T> {
    /// Stores the result (the previous contents are overwritten, not dropped:
    /// outputs are plain C data).
    pub fn set(self, value: T) {
        // SAFETY: non-NULL and aligned (checked in `out`), valid for writes per
        // `out`'s contract; `T` is plain data so not dropping the old value is fine.
        unsafe { self.ptr.write(value) }
    }
}

/// A required output parameter.
///
/// # Safety
/// If `ptr` is non-NULL it must be valid for writes of a `T` for `'a`.
pub(crate) unsafe fn out<'a, T: Copy>(ptr: *mut T, what: &'static str) -> Result<Out<'a, T>, Failure> {
    if !usable(ptr) {
        return Err(Failure::null(what));
    }
    Ok(Out { ptr, _borrow: PhantomData })
}

/// An optional output parameter (NULL means "not wanted").
///
/// # Safety
/// As for [`out`].
pub(crate) unsafe fn out_opt<'a, T: Copy>(ptr: *mut T, what: &'static str) -> Result<Option<Out<'a, T>>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { out(ptr, what) }.map(Some)
}

/// Hands a new object to C.
pub(crate) fn give<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Takes back an object given to C through the caller's variable `*slot`,
/// setting the variable to NULL so a second call with it fails cleanly.
/// Returns `Ok(None)` when `*slot` is already NULL.
///
/// # Safety
/// `slot`, if non-NULL, must be valid for reads and writes of a pointer; a
/// non-NULL `*slot` must come from [`give`] with the same `T` and not have
/// been taken back since.
pub(crate) unsafe fn take<T>(slot: *mut *mut T, what: &'static str) -> Result<Option<Box<T>>, Failure> {
    if !usable(slot) {
        return Err(Failure::null(what));
    }
    // SAFETY: `slot` is non-NULL and aligned (checked) and valid per the contract.
    let ptr = unsafe { slot.replace(std::ptr::null_mut()) };
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: per the contract, `ptr` came from `Box::into_raw` in `give` and is
    // taken back once: its variable now holds NULL.
    Ok(Some(unsafe { Box::from_raw(ptr) }))
}

/// Like [`take`], but a NULL `*slot` is an error and the variable is left
/// unchanged unless `check` accepts the object.
///
/// # Safety
/// As for [`take`].
pub(crate) unsafe fn take_if<T>(
    slot: *mut *mut T,
    what: &'static str,
    check: impl FnOnce(&T) -> Result<(), Failure>,
) -> Result<Box<T>, Failure> {
    if !usable(slot) {
        return Err(Failure::null(what));
    }
    // SAFETY: `slot` is non-NULL and aligned (checked) and valid per the contract.
    let ptr = unsafe { slot.read() };
    // SAFETY: a non-NULL `*slot` is a live object from `give` per the contract.
    check(unsafe { obj(ptr, what) }?)?;
    // SAFETY: forwarded contract; the object was just checked to exist.
    unsafe { take(slot, what) }?.ok_or_else(|| Failure::null(what))
}

/// [`take`], once `check` accepted the object: a NULL `*slot` is
/// `Ok(None)` (nothing to check), a refusal leaves `*slot` as it was.
///
/// # Safety
/// As for [`take`].
pub(crate) unsafe fn take_checked<T>(
    slot: *mut *mut T,
    what: &'static str,
    check: impl FnOnce(&T) -> Result<(), Failure>,
) -> Result<Option<Box<T>>, Failure> {
    if !usable(slot) {
        return Err(Failure::null(what));
    }
    // SAFETY: `slot` is non-NULL and aligned (checked) and valid per the contract.
    let ptr = unsafe { slot.read() };
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: a non-NULL `*slot` is a live object from `give` per the contract.
    check(unsafe { obj(ptr, what) }?)?;
    // SAFETY: forwarded contract; the object was just checked to exist.
    unsafe { take(slot, what) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mw_status;

    #[test]
    fn null_and_empty_buffers() {
        // SAFETY: NULL with length 0 is accepted without a dereference.
        assert!(unsafe { bytes(std::ptr::null(), 0, "data") }.unwrap().is_empty());
        // SAFETY: NULL with a length is rejected before any dereference.
        let err = unsafe { bytes(std::ptr::null(), 8, "data") }.unwrap_err();
        assert_eq!(err.status, mw_status::MW_ERR_NULL_POINTER);
        let mut x = 0u64;
        let p = (&mut x as *mut u64).cast::<c_void>();
        // SAFETY: `p` is 8 valid bytes but the length claims more than isize::MAX:
        // rejected before the slice is made.
        let err = unsafe { bytes(p, usize::MAX, "data") }.unwrap_err();
        assert_eq!(err.status, mw_status::MW_ERR_INVALID_ARGUMENT);
    }

    #[test]
    fn take_nulls_the_variable_so_a_second_take_finds_nothing() {
        let mut var = give(5u32);
        // SAFETY: `var` holds a pointer from `give`.
        let first = unsafe { take(&mut var, "x") }.unwrap();
        assert_eq!(first.as_deref(), Some(&5));
        assert!(var.is_null());
        // SAFETY: `var` is NULL now.
        assert!(unsafe { take(&mut var, "x") }.unwrap().is_none());
        // SAFETY: NULL slot is rejected.
        assert!(unsafe { take::<u32>(std::ptr::null_mut(), "x") }.is_err());
    }

    #[test]
    fn misaligned_output_is_rejected() {
        let mut buf = [0u64; 2];
        let p = buf.as_mut_ptr().cast::<u8>().wrapping_add(1).cast::<u64>();
        // SAFETY: alignment is checked before any write.
        assert!(unsafe { out(p, "value") }.is_err());
    }
}
